package server

// The operator's procedures for TLS: renewing the replicas' certificates,
// moving to a new CA, a certificate that expires, and a replica given
// the wrong one. Each is walked through while a job launches every
// second, with certificates made here.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"paxcron/internal/api"
	"paxcron/internal/testcert"
	"paxcron/paxos"
)

// tlsFiles are each replica's TLS files, in a folder of its own,
// rewritten in place as an operator would before a restart.
type tlsFiles struct {
	t       testing.TB
	dirs    map[paxos.ReplicaID]string
	serials map[paxos.ReplicaID]*big.Int
}

func newTLSFiles(t testing.TB) *tlsFiles {
	f := &tlsFiles{t: t, dirs: map[paxos.ReplicaID]string{}, serials: map[paxos.ReplicaID]*big.Int{}}
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		f.dirs[id] = t.TempDir()
	}
	return f
}

// set writes replica id's files: the certificates of cas in its CA file,
// and a certificate issuer signs as spec says (named replica-<id> unless
// spec names it).
func (f *tlsFiles) set(id paxos.ReplicaID, cas []*testcert.CA, issuer *testcert.CA, spec testcert.Leaf) {
	f.t.Helper()
	f.setCAs(id, cas...)
	if spec.Name == "" {
		spec.Name = fmt.Sprintf("replica-%d", id)
	}
	issued := issuer.Issue(f.t, spec)
	cert, key := issued.PEM(f.t)
	serial := issued.Serial
	f.write(id, "cert.pem", cert)
	f.write(id, "key.pem", key)
	f.serials[id] = serial
}

// setCAs rewrites replica id's CA file alone.
func (f *tlsFiles) setCAs(id paxos.ReplicaID, cas ...*testcert.CA) {
	f.t.Helper()
	var bundle []byte
	for _, ca := range cas {
		bundle = append(bundle, ca.PEM()...)
	}
	f.write(id, "ca.pem", bundle)
}

func (f *tlsFiles) write(id paxos.ReplicaID, name string, b []byte) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dirs[id], name), b, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// of are replica id's files as its config names them.
func (f *tlsFiles) of(id paxos.ReplicaID) *TLSFiles {
	d := f.dirs[id]
	return &TLSFiles{CAFile: filepath.Join(d, "ca.pem"), CertFile: filepath.Join(d, "cert.pem"), KeyFile: filepath.Join(d, "key.pem")}
}

// mutate is a cluster's mutate: every replica (re)starts with its files.
func (f *tlsFiles) mutate(cfg *Config) { cfg.TLS = f.of(cfg.ID) }

// servedSerial is the serial number of the certificate replica id's API
// presents, verified against the CAs in caFile.
func (c *cluster) servedSerial(id paxos.ReplicaID, caFile string) *big.Int {
	c.t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		c.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	conn, err := tls.Dial("tcp", c.servers[id-1].HTTPAddr(), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		c.t.Fatalf("TLS to replica %d's API: %v", id, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// writeThroughFollower writes a job through a follower, so that it is
// forwarded to the leader (over TLS between the replicas' APIs).
func (c *cluster) writeThroughFollower(name string) {
	c.t.Helper()
	follower := c.leader()%3 + 1
	if _, err := c.client(follower, writeToken).PutJobs(context.Background(), everySecond(name)); err != nil {
		c.t.Fatalf("a write through replica %d: %v", follower, err)
	}
}

// withLogs gives every replica a log of its own in logs, at level.
func withLogs(logs map[paxos.ReplicaID]*syncBuffer, level slog.Level) func(*Config) {
	return func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(logs[cfg.ID], &slog.HandlerOptions{Level: level}))
	}
}

// both applies two mutates in order.
func both(a, b func(*Config)) func(*Config) {
	return func(cfg *Config) { a(cfg); b(cfg) }
}

// startTLSCluster starts three replicas, each with a certificate ca
// signs as leaf says and a CA file of ca alone, logging at level and up
// into the logs returned.
func startTLSCluster(t *testing.T, ca *testcert.CA, leaf testcert.Leaf, level slog.Level) (*cluster, *tlsFiles, map[paxos.ReplicaID]*syncBuffer) {
	t.Helper()
	files := newTLSFiles(t)
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		files.set(id, []*testcert.CA{ca}, ca, leaf)
	}
	logs := newLogs()
	return startClusterWith(t, both(files.mutate, withLogs(logs, level))), files, logs
}

// startTickingTLSCluster is startTLSCluster with certificates of ca
// and a job "tick" launching every second, its first two children made.
func startTickingTLSCluster(t *testing.T, ca *testcert.CA, level slog.Level) (*cluster, *tlsFiles, map[paxos.ReplicaID]*syncBuffer) {
	t.Helper()
	c, files, logs := startTLSCluster(t, ca, testcert.Leaf{}, level)
	c.putEverySecond(c.leader(), "tick")
	c.waitChildren(2)
	return c, files, logs
}

func newLogs() map[paxos.ReplicaID]*syncBuffer {
	return map[paxos.ReplicaID]*syncBuffer{1: {}, 2: {}, 3: {}}
}

// checkNoRefusal fails if a replica logged a refused connection.
func checkNoRefusal(t testing.TB, logs map[paxos.ReplicaID]*syncBuffer) {
	t.Helper()
	for _, id := range slices.Sorted(maps.Keys(logs)) {
		if l := logs[id].String(); strings.Contains(l, "refused") {
			t.Errorf("replica %d refused a peer or was refused:\n%s", id, l)
		}
	}
}

// Renewing every replica's certificate under the same CA: new files, then
// a rolling restart. Launches go on throughout, none doubled or missed;
// the replicas connect at every step (old and new certificates side by
// side), forwarded writes go through, and each replica presents its new
// certificate once restarted.
func TestTLSCertificateRenewalByRollingRestart(t *testing.T) {
	ca := testcert.NewCA(t, "paxcron test CA", time.Now().Add(24*time.Hour))
	c, files, logs := startTickingTLSCluster(t, ca, slog.LevelError)
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		old := files.serials[id]
		files.set(id, []*testcert.CA{ca}, ca, testcert.Leaf{})
		c.restartGracefully(id)
		c.waitChildren(len(c.nomad.Children()) + 2)
		c.writeThroughFollower(fmt.Sprintf("renewed-%d", id))
		if got := c.servedSerial(id, files.of(id).CAFile); got.Cmp(files.serials[id]) != 0 || got.Cmp(old) == 0 {
			t.Errorf("replica %d presents certificate %x after its renewal, want %x", id, got, files.serials[id])
		}
	}
	c.waitChildren(len(c.nomad.Children()) + 3)
	c.checkEverySecondOnce("tick")
	checkNoRefusal(t, logs)
}

// Moving to a new CA, each step a rolling restart: (1) a CA file holding
// both CAs on every replica; (2) certificates from the new CA; (3) the
// old CA dropped. Launches go on throughout, none doubled or missed, the
// replicas connect at every step, and forwarded writes go through. The
// two CAs share a name, as a CA made again often does. An API client
// given both CAs in one file works throughout; one given only the old CA
// stops working once the certificates are new.
func TestTLSCAMoveByRollingRestarts(t *testing.T) {
	oldCA := testcert.NewCA(t, "paxcron CA", time.Now().Add(24*time.Hour))
	newCA := testcert.NewCA(t, "paxcron CA", time.Now().Add(48*time.Hour))
	c, files, logs := startTLSCluster(t, oldCA, testcert.Leaf{}, slog.LevelError)
	ctx := context.Background()
	c.putEverySecond(c.leader(), "tick")
	c.waitChildren(2)
	clients := t.TempDir()
	bundle, oldOnly := filepath.Join(clients, "both.pem"), filepath.Join(clients, "old.pem")
	if err := os.WriteFile(bundle, append(oldCA.PEM(), newCA.PEM()...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(oldOnly, oldCA.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := caMoveSteps(files, oldCA, newCA)
	for step, s := range steps {
		for id := paxos.ReplicaID(1); id <= 3; id++ {
			s.set(id)
			c.restartGracefully(id)
			c.waitChildren(len(c.nomad.Children()) + 2)
			c.writeThroughFollower(fmt.Sprintf("step%d-%d", step+1, id))
			for other := paxos.ReplicaID(1); other <= 3; other++ {
				cl := c.clientWith(other, api.ClientConfig{Token: readToken, CACert: bundle})
				if _, err := cl.Status(ctx); err != nil {
					t.Errorf("step %d (%s), replica %d restarted: a client with both CAs, to replica %d: %v", step+1, s.what, id, other, err)
				}
			}
		}
	}
	cl := c.clientWith(1, api.ClientConfig{Token: readToken, CACert: oldOnly})
	if _, err := cl.Status(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client trusting only the old CA, once the certificates are new: %v, want a certificate error", err)
	}
	c.waitChildren(len(c.nomad.Children()) + 3)
	c.checkEverySecondOnce("tick")
	checkNoRefusal(t, logs)
}

// caMoveStep is one step of moving a cluster from one CA to another:
// what it is, and the files it gives replica id.
type caMoveStep struct {
	what string
	set  func(id paxos.ReplicaID)
}

// caMoveSteps are the three steps of a move from oldCA to newCA, each to
// be finished on every replica before the next: both CAs trusted,
// certificates from the new CA, the old CA dropped.
func caMoveSteps(files *tlsFiles, oldCA, newCA *testcert.CA) []caMoveStep {
	return []caMoveStep{
		{"both CAs trusted", func(id paxos.ReplicaID) { files.setCAs(id, oldCA, newCA) }},
		{"certificates from the new CA", func(id paxos.ReplicaID) { files.set(id, []*testcert.CA{oldCA, newCA}, newCA, testcert.Leaf{}) }},
		{"the old CA dropped", func(id paxos.ReplicaID) { files.setCAs(id, newCA) }},
	}
}

// waitLogSays waits until log, from its byte from on, holds every one
// of want; what names the wait in the failure, which shows that part of
// the log.
func waitLogSays(t *testing.T, what string, log *syncBuffer, from int, want []string) {
	t.Helper()
	eventually(t, what, func() bool {
		l := log.String()[from:]
		for _, w := range want {
			if !strings.Contains(l, w) {
				return false
			}
		}
		return true
	}, func() string { return log.String()[from:] })
}

// gauge is the value of replica s's metric name.
func gauge(t testing.TB, s *Server, name string) (float64, bool) {
	t.Helper()
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// A certificate that expires while the cluster runs. From start-up every
// replica warns that its certificate expires soon, naming when, and a
// metric holds the time. Connections made before it expires go on, and
// so do launches; when it expires each replica says so. A replica
// restarted on it refuses to start, naming the expiry; restarted with a
// new certificate it is cut off from the others, whose expired
// certificates it refuses (saying so), while they launch on; restarted
// one at a time with new certificates, the others take it back. Nothing
// is doubled or missed.
func TestTLSCertificateThatExpiresWhileRunning(t *testing.T) {
	ca := testcert.NewCA(t, "paxcron test CA", time.Now().Add(24*time.Hour))
	// Long enough for the cluster to form and launch twice on a loaded
	// CI machine, under the race detector (x509 counts whole seconds).
	expires := time.Now().Add(30 * time.Second).Truncate(time.Second)
	c, files, logs := startTLSCluster(t, ca, testcert.Leaf{NotAfter: expires}, slog.LevelWarn)
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		if l := logs[id].String(); !strings.Contains(l, "TLS certificate expires in") || !strings.Contains(l, expires.UTC().Format(time.RFC3339)) {
			t.Errorf("replica %d does not warn at start that its certificate expires at %s:\n%s", id, expires.UTC().Format(time.RFC3339), l)
		}
		if v, ok := gauge(t, c.servers[id-1], "paxcron_tls_certificate_expiry_timestamp_seconds"); !ok || v != float64(expires.Unix()) {
			t.Errorf("replica %d's expiry metric: %v (%v), want %d", id, v, ok, expires.Unix())
		}
	}
	c.putEverySecond(c.leader(), "tick")
	c.waitChildren(2)
	// The certificates expire on the real clock, which crypto/tls reads:
	// wait for it.
	<-time.After(time.Until(expires))
	eventually(t, "every replica to say its certificate expired", func() bool {
		for id := paxos.ReplicaID(1); id <= 3; id++ {
			if !strings.Contains(logs[id].String(), "TLS certificate has expired") {
				return false
			}
		}
		return true
	})
	c.waitChildren(len(c.nomad.Children()) + 2)

	// A follower restarted on its expired certificate refuses to start.
	leader := c.leader()
	renewed := leader%3 + 1
	if err := c.servers[renewed-1].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.servers[renewed-1] = nil
	cfg := testConfig(t, renewed, c.dirs[renewed-1], c.nomad)
	files.mutate(&cfg)
	if _, err := New(cfg, false); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "expired at "+expires.UTC().Format(time.RFC3339)) {
		t.Fatalf("replica %d started on an expired certificate: %v, want ErrConfig naming the expiry", renewed, err)
	}
	// Renewed, it starts, and refuses its peers' expired certificates.
	files.set(renewed, []*testcert.CA{ca}, ca, testcert.Leaf{})
	c.start(renewed, false)
	eventually(t, fmt.Sprintf("replica %d to say it refuses its peers' expired certificates", renewed), func() bool {
		l := logs[renewed].String()
		return strings.Contains(l, "this replica refused the other replica's certificate") && strings.Contains(l, "it has expired")
	}, func() string { return logs[renewed].String() })
	c.waitChildren(len(c.nomad.Children()) + 2)
	// The others, one at a time: the other follower, then the leader.
	for _, id := range []paxos.ReplicaID{renewed%3 + 1, leader} {
		files.set(id, []*testcert.CA{ca}, ca, testcert.Leaf{})
		c.restartGracefully(id)
		c.waitChildren(len(c.nomad.Children()) + 2)
	}
	c.waitChildren(len(c.nomad.Children()) + 3)
	c.checkEverySecondOnce("tick")
}

// A replica given a certificate its peers would refuse is refused at
// start-up (ErrConfig), naming the certificate and the cause: from a CA
// its CA file does not hold, expired, or not for client authentication
// (a replica dials its peers with it). A CA file whose bundle lost
// certificates to a missing line break is refused too.
func TestTLSCertificateRefusedAtStart(t *testing.T) {
	ca := testcert.NewCA(t, "paxcron test CA", time.Now().Add(24*time.Hour))
	other := testcert.NewCA(t, "another cluster's CA", time.Now().Add(24*time.Hour))
	newCA := testcert.NewCA(t, "paxcron new CA", time.Now().Add(48*time.Hour))
	for _, tc := range []struct {
		name string
		set  func(f *tlsFiles)
		want []string
	}{
		{"from another CA", func(f *tlsFiles) { f.set(1, []*testcert.CA{ca}, other, testcert.Leaf{}) },
			[]string{`issuer "CN=another cluster's CA"`, `is not signed by a CA in`, `it holds "CN=paxcron test CA"`}},
		{"expired", func(f *tlsFiles) {
			f.set(1, []*testcert.CA{ca}, ca, testcert.Leaf{NotAfter: time.Now().Add(-time.Minute)})
		},
			[]string{`subject "CN=replica-1"`, "expired at"}},
		{"for servers only", func(f *tlsFiles) {
			f.set(1, []*testcert.CA{ca}, ca, testcert.Leaf{Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		}, []string{`subject "CN=replica-1"`, "is not for TLS client authentication"}},
		{"a bundle missing a line break", func(f *tlsFiles) {
			f.set(1, []*testcert.CA{ca}, newCA, testcert.Leaf{})
			// Three CA files concatenated, the second without its last
			// line break: the second and third were skipped.
			second := bytes.TrimSuffix(newCA.PEM(), []byte("\n"))
			f.write(1, "ca.pem", slices.Concat(ca.PEM(), second, other.PEM()))
		}, []string{"ca.pem", "line break"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := newTLSFiles(t)
			tc.set(files)
			cfg := testConfig(t, 1, t.TempDir(), newFakeNomad())
			files.mutate(&cfg)
			s, err := New(cfg, true)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("started: %v, want ErrConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
		})
	}
}

// A replica given a certificate its peers refuse at run time: one for
// the wrong name (the dialer checks the host it dials), or one from
// another CA with that CA in its CA file too (so it starts). Its peers
// refuse it, and the logs on both sides name the certificate and the
// cause; the cluster launches on, and once its files are fixed it
// rejoins. Nothing is doubled or missed.
func TestTLSWrongCertificateIsRefusedAndSaidSo(t *testing.T) {
	ca := testcert.NewCA(t, "paxcron test CA", time.Now().Add(24*time.Hour))
	other := testcert.NewCA(t, "another cluster's CA", time.Now().Add(24*time.Hour))
	c, files, logs := startTickingTLSCluster(t, ca, slog.LevelInfo)
	for i, tc := range []struct {
		name string
		set  func(id paxos.ReplicaID)
		// what the replica itself says, and what the leader says (in
		// the text log, whose quoted message escapes quotes)
		self, leader []string
	}{
		{"the wrong name", func(id paxos.ReplicaID) {
			files.set(id, []*testcert.CA{ca}, ca, testcert.Leaf{DNS: []string{"replica-9.example"}})
		}, []string{"does not name the host it advertises", "the other replica refused this replica's certificate"},
			[]string{"this replica refused the other replica's certificate", "does not name the host this replica dialed, 127.0.0.1"}},
		{"a CA the others do not hold yet", func(id paxos.ReplicaID) { files.set(id, []*testcert.CA{ca, other}, other, testcert.Leaf{}) },
			[]string{"the other replica refused this replica's certificate: its CA file does not hold the CA that signed it"},
			[]string{`issuer \"CN=another cluster's CA\"`, "it is not signed by a CA in this replica's CA file"}},
		{"another cluster's files", func(id paxos.ReplicaID) { files.set(id, []*testcert.CA{other}, other, testcert.Leaf{}) },
			[]string{"this replica refused the other replica's certificate", "it is not signed by a CA in this replica's CA file",
				"the other replica refused this replica's certificate"},
			[]string{`issuer \"CN=another cluster's CA\"`, "it is not signed by a CA in this replica's CA file"}},
	} {
		leader := c.leader()
		wrong := leader%3 + 1
		if err := c.servers[wrong-1].Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		tc.set(wrong)
		mark := map[paxos.ReplicaID]int{wrong: len(logs[wrong].String()), leader: len(logs[leader].String())}
		c.start(wrong, false)
		for _, side := range []struct {
			id   paxos.ReplicaID
			want []string
		}{{wrong, tc.self}, {leader, tc.leader}} {
			waitLogSays(t, fmt.Sprintf("%s: replica %d's log to say why", tc.name, side.id), logs[side.id], mark[side.id], side.want)
		}
		stuck := c.servers[wrong-1].Node().Status().Applied
		c.waitChildren(len(c.nomad.Children()) + 2)
		// A write through the third replica, forwarded to the leader.
		if _, err := c.client(wrong%3+1, writeToken).PutJobs(context.Background(), everySecond("during-"+strconv.Itoa(i))); err != nil {
			t.Fatalf("%s: a write through replica %d: %v", tc.name, wrong%3+1, err)
		}
		if got := c.servers[wrong-1].Node().Status().Applied; got != stuck {
			t.Errorf("%s: the refused replica applied %d -> %d", tc.name, stuck, got)
		}
		files.set(wrong, []*testcert.CA{ca}, ca, testcert.Leaf{})
		c.restartGracefully(wrong)
		c.waitChildren(len(c.nomad.Children()) + 2)
	}
	c.checkEverySecondOnce("tick")
}

func TestNextCertCheck(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		left, want time.Duration
	}{
		{365 * day, day}, // far off: looked at daily all the same (the clock may jump)
		{30*day + time.Hour, time.Hour + time.Second}, // at the start of the warning
		{30 * day, day},                      // warning: daily
		{10 * time.Second, 11 * time.Second}, // at the expiry itself
		{0, time.Hour},                       // expired: hourly
		{-day, time.Hour},
	} {
		if got := nextCertCheck(now, now.Add(tc.left)); got != tc.want {
			t.Errorf("%s before the expiry: next check in %s, want %s", tc.left, got, tc.want)
		}
	}
}

package server

// Reloading the TLS files while the cluster runs (Server.ReloadTLS, which
// the server's SIGHUP calls): renewing certificates, the steps of a CA
// move after the first, and files that must be refused. Each is walked
// through while a job launches every second.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"paxcron/internal/testcert"
	"paxcron/nomad"
	"paxcron/paxos"
)

// servedSerials are the serial numbers of the certificates replica id
// presents on new connections to its API and to its Paxos transport,
// verified against roots; the Paxos connection presents a certificate
// client signs, and is closed once TLS is through.
func (c *cluster) servedSerials(id paxos.ReplicaID, client *testcert.CA, roots ...*testcert.CA) (apiSerial, paxosSerial *big.Int) {
	c.t.Helper()
	pool := x509.NewCertPool()
	for _, ca := range roots {
		pool.AddCert(ca.Cert)
	}
	served := func(addr string, cfg *tls.Config) *big.Int {
		conn, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			c.t.Fatalf("TLS to replica %d at %s: %v", id, addr, err)
		}
		defer conn.Close()
		c.probes = append(c.probes, conn.LocalAddr().String())
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	s := c.servers[id-1]
	apiSerial = served(s.HTTPAddr(), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	cert := client.Issue(c.t, testcert.Leaf{Name: "test client"}).TLS()
	paxosSerial = served(s.PaxosAddr(), &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	return apiSerial, paxosSerial
}

// checkNoRefusal fails if a replica logged a refused connection (a
// warning or an error) other than the probes of servedSerials. A peer
// said unreachable is no refusal: a replica restarted on new ports
// refuses TCP at its old address until its peers are told the new one
// (found when "cannot reach peer" came, with its "connection refused").
func (c *cluster) checkNoRefusal(logs map[paxos.ReplicaID]*syncBuffer) {
	c.t.Helper()
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		for line := range strings.Lines(logs[id].String()) {
			probe := slices.ContainsFunc(c.probes, func(p string) bool { return strings.Contains(line, "remote="+p) })
			loud := strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")
			unreachable := strings.Contains(line, `msg="cannot reach peer`)
			if loud && strings.Contains(line, "refused") && !probe && !unreachable {
				c.t.Errorf("replica %d refused a peer or was refused: %s", id, line)
			}
		}
	}
}

// reloads is replica s's count of reloads of files with result.
func reloads(t testing.TB, s *Server, files, result string) float64 {
	t.Helper()
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "paxcron_config_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["files"] == files && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Renewing every replica's certificate under the same CA by reloading
// it, one replica after another, no restart. Each presents its new
// certificate on new connections (API and Paxos) at once, says in its
// log what changed, counts the reload, and publishes the new expiry;
// the connections open go on, launches are neither doubled nor missed,
// and once a replica restarts (every peer dialing it again, and it
// them) none is refused.
func TestTLSCertificateRenewalByReload(t *testing.T) {
	ca := testcert.NewCA(t, "paxcron test CA", time.Now().Add(48*time.Hour))
	c, files, logs := startTickingTLSCluster(t, ca, slog.LevelInfo)
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		s := c.servers[id-1]
		old := files.serials[id]
		// Before the CA's end: the metric is the chain's.
		expires := time.Now().Add(time.Duration(id) * 10 * time.Hour).Truncate(time.Second)
		files.set(id, []*testcert.CA{ca}, ca, testcert.Leaf{Name: fmt.Sprintf("renewed-%d", id), NotAfter: expires})
		mark := len(logs[id].String())
		if err := s.ReloadTLS(); err != nil {
			t.Fatalf("replica %d: reloading renewed files: %v", id, err)
		}
		apiSerial, paxosSerial := c.servedSerials(id, ca, ca)
		if apiSerial.Cmp(files.serials[id]) != 0 || paxosSerial.Cmp(files.serials[id]) != 0 {
			t.Errorf("replica %d presents %x (API) and %x (Paxos) after the reload, want %x (before: %x)",
				id, apiSerial, paxosSerial, files.serials[id], old)
		}
		if v, _ := gauge(t, s, "paxcron_tls_certificate_expiry_timestamp_seconds"); v != float64(expires.Unix()) {
			t.Errorf("replica %d's expiry metric after the reload: %v, want %d", id, v, expires.Unix())
		}
		if n := reloads(t, s, "tls", "ok"); n != 1 {
			t.Errorf("replica %d counts %v reloads ok, want 1", id, n)
		}
		l := logs[id].String()[mark:]
		for _, want := range []string{"TLS files reloaded", `CN=renewed-` + fmt.Sprint(id), `CN=replica-` + fmt.Sprint(id),
			expires.UTC().Format(time.RFC3339)} {
			if !strings.Contains(l, want) {
				t.Errorf("replica %d's log after the reload does not say %q:\n%s", id, want, l)
			}
		}
		// The expiry watch starts over with the new certificate, which
		// expires within the warning's 30 days.
		eventually(t, fmt.Sprintf("replica %d to warn of its new certificate's expiry", id), func() bool {
			return strings.Contains(logs[id].String()[mark:], "TLS certificate expires in")
		}, func() string { return logs[id].String()[mark:] })
		c.waitChildren(len(c.nomad.Children()) + 2)
		c.writeThroughFollower(fmt.Sprintf("renewed-%d", id))
	}
	c.restartGracefully(c.leader())
	c.waitChildren(len(c.nomad.Children()) + 3)
	c.writeThroughFollower("after-restart")
	c.checkEverySecondOnce("tick")
	c.checkNoRefusal(logs)
}

// redial closes replica id's connections, Paxos and forwarding, and
// waits until each is made again: it dials both peers and each dials it,
// every handshake with the TLS files loaded last (each side's CA file,
// dialing and dialed), and it forwards through new connections.
func (c *cluster) redial(id paxos.ReplicaID) {
	c.t.Helper()
	before := map[paxos.ReplicaID]uint64{}
	for _, s := range c.servers {
		before[s.cfg.ID] = s.TransportStats().Reconnects
	}
	s := c.servers[id-1]
	s.tr.Redial()
	s.proxy.CloseIdleConnections()
	eventually(c.t, fmt.Sprintf("replica %d and its peers to connect again", id), func() bool {
		for _, o := range c.servers {
			want := before[o.cfg.ID] + 1 // its connection to id
			if o.cfg.ID == id {
				want = before[id] + 2 // to both peers
			}
			if o.TransportStats().Reconnects < want {
				return false
			}
		}
		return true
	}, func() string {
		var b strings.Builder
		for _, o := range c.servers {
			fmt.Fprintf(&b, "replica %d: %+v; ", o.cfg.ID, o.TransportStats())
		}
		return b.String()
	})
}

// Moving to a new CA by reloads alone, no restart: (1) both CAs in every
// replica's CA file; (2) certificates from the new CA; (3) the new CA
// alone; each step reloaded on every replica, while a job launches every
// second. After each step every replica closes its connections and they
// are made again, and a write is forwarded through new ones: after step
// 2 each replica dials peers presenting the new CA's certificates, a CA
// its CA file did not hold at start (before, its dials trusted the CAs
// of the start, and the reload of step 2 was refused); after step 3
// every connection that is made was verified against the new CA alone,
// both ways. Each replica presents its new certificate at once. None is
// refused; launches are neither doubled nor missed.
func TestTLSCAMoveByReloads(t *testing.T) {
	oldCA := testcert.NewCA(t, "paxcron CA", time.Now().Add(24*time.Hour))
	newCA := testcert.NewCA(t, "paxcron CA", time.Now().Add(48*time.Hour))
	c, files, logs := startTickingTLSCluster(t, oldCA, slog.LevelError)
	steps := caMoveSteps(files, oldCA, newCA)
	for step, st := range steps {
		for id := paxos.ReplicaID(1); id <= 3; id++ {
			st.set(id)
			if err := c.servers[id-1].ReloadTLS(); err != nil {
				t.Fatalf("step %d (%s), replica %d: %v", step+1, st.what, id, err)
			}
		}
		for id := paxos.ReplicaID(1); id <= 3; id++ {
			c.redial(id)
		}
		c.waitChildren(len(c.nomad.Children()) + 2)
		c.writeThroughFollower(fmt.Sprintf("step%d", step+1))
		if step == 0 {
			continue
		}
		for id := paxos.ReplicaID(1); id <= 3; id++ {
			apiSerial, paxosSerial := c.servedSerials(id, newCA, newCA)
			if apiSerial.Cmp(files.serials[id]) != 0 || paxosSerial.Cmp(files.serials[id]) != 0 {
				t.Errorf("step %d (%s): replica %d presents %x (API) and %x (Paxos), want %x",
					step+1, st.what, id, apiSerial, paxosSerial, files.serials[id])
			}
		}
	}
	c.checkEverySecondOnce("tick")
	c.checkNoRefusal(logs)
}

// Files that fail a check of the start are refused by a reload, each
// with an error and a log line naming the file and the cause: the
// replica goes on presenting and trusting what it had (new connections
// included), counts the failure, keeps its expiry metric, and the
// cluster launches on. Good files reloaded after are taken.
func TestTLSBadReloadKeepsWhatItHad(t *testing.T) {
	ca := testcert.NewCA(t, "paxcron test CA", time.Now().Add(24*time.Hour))
	other := testcert.NewCA(t, "another cluster's CA", time.Now().Add(24*time.Hour))
	c, files, logs := startTickingTLSCluster(t, ca, slog.LevelInfo)
	const id = paxos.ReplicaID(1)
	s, kept := c.servers[id-1], files.serials[id]
	expiry, _ := gauge(t, s, "paxcron_tls_certificate_expiry_timestamp_seconds")
	if err := s.ReloadTLS(); err != nil || !strings.Contains(logs[id].String(), "TLS files reloaded, unchanged") {
		t.Errorf("reloading the same files: %v; the log does not say they are unchanged:\n%s", err, logs[id].String())
	}
	f := files.of(id)
	for i, tc := range []struct {
		name string
		set  func()
		want []string
	}{
		{"from another CA", func() { files.set(id, []*testcert.CA{ca}, other, testcert.Leaf{}) },
			[]string{f.CertFile, `issuer "CN=another cluster's CA"`, "is not signed by a CA in"}},
		{"expired", func() { files.set(id, []*testcert.CA{ca}, ca, testcert.Leaf{NotAfter: time.Now().Add(-time.Minute)}) },
			[]string{f.CertFile, "expired at"}},
		{"for servers only", func() {
			files.set(id, []*testcert.CA{ca}, ca, testcert.Leaf{Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		}, []string{f.CertFile, "is not for TLS client authentication"}},
		{"a certificate file that is not PEM", func() {
			files.set(id, []*testcert.CA{ca}, ca, testcert.Leaf{})
			files.write(id, "cert.pem", []byte("not a certificate\n"))
		}, []string{f.CertFile, "failed to find any PEM data in certificate input"}},
		{"a key of another certificate", func() {
			files.set(id, []*testcert.CA{ca}, ca, testcert.Leaf{})
			_, key := ca.Issue(t, testcert.Leaf{}).PEM(t)
			files.write(id, "key.pem", key)
		}, []string{f.KeyFile, "private key does not match public key"}},
		{"a CA bundle missing a line break", func() {
			files.set(id, []*testcert.CA{ca}, ca, testcert.Leaf{})
			files.write(id, "ca.pem", slices.Concat(bytes.TrimSuffix(ca.PEM(), []byte("\n")), other.PEM()))
		}, []string{f.CAFile, "line break"}},
	} {
		tc.set()
		mark := len(logs[id].String())
		err := s.ReloadTLS()
		if err == nil {
			t.Fatalf("%s: the reload was taken", tc.name)
		}
		l := logs[id].String()[mark:]
		for _, want := range append(tc.want, "keeps presenting and trusting those it read before") {
			if !strings.Contains(err.Error()+l, want) {
				t.Errorf("%s: neither the error nor the log says %q: %v\n%s", tc.name, want, err, l)
			}
		}
		for _, want := range tc.want {
			if !strings.Contains(l, strings.ReplaceAll(want, `"`, `\"`)) {
				t.Errorf("%s: the log does not say %q:\n%s", tc.name, want, l)
			}
		}
		if apiSerial, paxosSerial := c.servedSerials(id, ca, ca); apiSerial.Cmp(kept) != 0 || paxosSerial.Cmp(kept) != 0 {
			t.Errorf("%s: replica %d presents %x (API) and %x (Paxos), want the certificate it had, %x", tc.name, id, apiSerial, paxosSerial, kept)
		}
		if n := reloads(t, s, "tls", "failed"); n != float64(i+1) {
			t.Errorf("%s: %v reloads counted failed, want %d", tc.name, n, i+1)
		}
		if v, _ := gauge(t, s, "paxcron_tls_certificate_expiry_timestamp_seconds"); v != expiry {
			t.Errorf("%s: the expiry metric moved from %v to %v", tc.name, expiry, v)
		}
		c.waitChildren(len(c.nomad.Children()) + 1)
	}
	// Good files, with a CA added: taken, and the log names the CAs now
	// trusted (dialing too, from the next connection on: no restart).
	files.set(id, []*testcert.CA{ca, other}, ca, testcert.Leaf{})
	mark := len(logs[id].String())
	if err := s.ReloadTLS(); err != nil {
		t.Fatalf("good files after the bad: %v", err)
	}
	if l := logs[id].String()[mark:]; !strings.Contains(l, "TLS files reloaded: new connections use them") ||
		!strings.Contains(l, `cas="\"CN=paxcron test CA\", \"CN=another cluster's CA\""`) || strings.Contains(l, "restart") {
		t.Errorf("the log does not name the CAs reloaded, or asks for a restart:\n%s", l)
	}
	if apiSerial, _ := c.servedSerials(id, ca, ca); apiSerial.Cmp(files.serials[id]) != 0 {
		t.Errorf("replica %d presents %x once good files are reloaded, want %x", id, apiSerial, files.serials[id])
	}
	c.writeThroughFollower("after")
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
}

// A certificate from a CA the peers do not trust yet, reloaded on a
// replica whose own CA file holds that CA: the files pass the checks of
// the start, so the reload is taken, and the peers refuse the
// certificate on the next connections, both ways, each side saying whose
// certificate and why, as when a replica starts with it
// (TestTLSWrongCertificateIsRefusedAndSaidSo). Before, such a reload
// was refused, as peers dialed trusting the CAs they started with. The
// cluster launches on; once the files are fixed and reloaded the replica
// connects again, and nothing is doubled or missed.
func TestTLSReloadedCertificateFromACAPeersDoNotTrustIsRefusedAndSaidSo(t *testing.T) {
	ca := testcert.NewCA(t, "paxcron test CA", time.Now().Add(24*time.Hour))
	other := testcert.NewCA(t, "another cluster's CA", time.Now().Add(24*time.Hour))
	c, files, logs := startTickingTLSCluster(t, ca, slog.LevelInfo)
	leader := c.leader()
	wrong := leader%3 + 1
	files.set(wrong, []*testcert.CA{ca, other}, other, testcert.Leaf{})
	mark := map[paxos.ReplicaID]int{wrong: len(logs[wrong].String()), leader: len(logs[leader].String())}
	if err := c.servers[wrong-1].ReloadTLS(); err != nil {
		t.Fatalf("replica %d: reloading a certificate from a CA its own CA file holds: %v", wrong, err)
	}
	c.servers[wrong-1].tr.Redial()
	for _, side := range []struct {
		id   paxos.ReplicaID
		want []string
	}{
		{wrong, []string{"the other replica refused this replica's certificate: its CA file does not hold the CA that signed it"}},
		{leader, []string{`issuer \"CN=another cluster's CA\"`, "it is not signed by a CA in this replica's CA file",
			fmt.Sprintf(`side="dialing replica %d"`, wrong), `side="dialed from`}},
	} {
		waitLogSays(t, fmt.Sprintf("replica %d's log to say why", side.id), logs[side.id], mark[side.id], side.want)
	}
	c.waitChildren(len(c.nomad.Children()) + 2)
	files.set(wrong, []*testcert.CA{ca}, ca, testcert.Leaf{})
	if err := c.servers[wrong-1].ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	c.redial(wrong)
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
}

// A CA dropped from a replica's CA file by a reload is no longer trusted
// by it, dialing or dialed: its connections open to and from peers that
// present a certificate from that CA, and those it forwards through, are
// closed at once, each logged, and the next ones are refused, the log
// saying whose and why.
func TestTLSCADroppedByReloadIsNoLongerTrusted(t *testing.T) {
	oldCA := testcert.NewCA(t, "paxcron old CA", time.Now().Add(24*time.Hour))
	newCA := testcert.NewCA(t, "paxcron new CA", time.Now().Add(48*time.Hour))
	files := newTLSFiles(t)
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		files.set(id, []*testcert.CA{oldCA, newCA}, oldCA, testcert.Leaf{})
	}
	logs := newLogs()
	c := startClusterWith(t, both(files.mutate, withLogs(logs, slog.LevelInfo)))
	c.putEverySecond(c.leader(), "tick")
	c.waitChildren(2)
	// A write through the dropper: a connection to the leader's API is
	// kept. Through the replica that leads throughout the write: on a
	// loaded machine the lead may move meanwhile, and the write then goes
	// again, under the new leader.
	var leader, dropper, stale paxos.ReplicaID
	for attempt := 1; ; attempt++ {
		l := c.lead()
		leader = l.id
		dropper, stale = leader%3+1, (leader+1)%3+1
		if _, err := c.client(dropper, writeToken).PutJobs(context.Background(), everySecond("forwarded")); err != nil {
			t.Fatalf("a write through replica %d: %v", dropper, err)
		}
		if c.held(l) {
			break
		}
		if attempt == 3 {
			t.Fatalf("the lead moved during each of %d writes", attempt)
		}
	}
	mark := len(logs[dropper].String())
	files.set(dropper, []*testcert.CA{newCA}, newCA, testcert.Leaf{})
	if err := c.servers[dropper-1].ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	closed := "closed a replica-to-replica connection made before the TLS files were reloaded"
	sides := map[string]int{}
	for line := range strings.Lines(logs[dropper].String()[mark:]) {
		if strings.Contains(line, closed) && strings.Contains(line, `issuer \"CN=paxcron old CA\"`) &&
			strings.Contains(line, "it is not signed by a CA in this replica's CA file") {
			side, _, _ := strings.Cut(line[strings.Index(line, "side=")+len("side="):], " certificate=")
			sides[strings.Trim(side, `"`)]++
		}
	}
	for _, want := range []string{fmt.Sprintf("dialing replica %d", stale), fmt.Sprintf("dialing replica %d", leader),
		"dialed from 127.0.0.1", "forwarding to " + c.servers[leader-1].cfg.HTTPAdvertise} {
		if want == "dialed from 127.0.0.1" && sides[want] != 2 || want != "dialed from 127.0.0.1" && sides[want] != 1 {
			t.Errorf("replica %d logged %d connections %s closed, want one per connection; it logged:\n%s",
				dropper, sides[want], want, logs[dropper].String()[mark:])
		}
	}
	eventually(t, fmt.Sprintf("replica %d to refuse replica %d's certificate both ways, and say so", dropper, stale), func() bool {
		var dialing, dialed bool
		for line := range strings.Lines(logs[dropper].String()[mark:]) {
			if strings.Contains(line, "this replica refused the other replica's certificate") && strings.Contains(line, `issuer \"CN=paxcron old CA\"`) {
				dialing = dialing || strings.Contains(line, fmt.Sprintf("side=\"dialing replica %d\"", stale))
				dialed = dialed || strings.Contains(line, "side=\"dialed from")
			}
		}
		return dialing && dialed
	}, func() string { return logs[dropper].String()[mark:] })
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
}

// A reload that changes the CAs but keeps the one every certificate is
// from closes no connection: a CA added (the first step of a CA move)
// churns nothing.
func TestTLSReloadKeepingTheCAClosesNothing(t *testing.T) {
	ca := testcert.NewCA(t, "paxcron CA", time.Now().Add(24*time.Hour))
	c, files, logs := startTickingTLSCluster(t, ca, slog.LevelInfo)
	c.writeThroughFollower("forwarded")
	other := testcert.NewCA(t, "paxcron next CA", time.Now().Add(48*time.Hour))
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		files.setCAs(id, ca, other)
		if err := c.servers[id-1].ReloadTLS(); err != nil {
			t.Fatal(err)
		}
		if l := logs[id].String(); !strings.Contains(l, "cas_before") || strings.Contains(l, "closed a replica-to-replica connection") {
			t.Fatalf("replica %d reloaded a CA added, and closed a connection or did not see the CAs change:\n%s", id, l)
		}
	}
	c.waitChildren(len(c.nomad.Children()) + 2)
	for id, l := range logs {
		if strings.Contains(l.String(), "a replica-to-replica connection was refused") {
			t.Errorf("replica %d refused a peer or was refused:\n%s", id, l)
		}
	}
}

// The replica's reload reloads its Nomad client's TLS files too: a new
// client certificate is taken, logged and counted, and one that does
// not load is refused the same way, naming the file.
func TestNomadTLSReloadedWithTheReplicas(t *testing.T) {
	files := newNomadTLSFiles(t, testcert.Leaf{Name: "paxcron-nomad-client"})
	var logs syncBuffer
	s := startNomadTLSReplica(t, files, &logs)
	dir, write, issue := files.dir, files.write, func(name string) { files.issue(testcert.Leaf{Name: name}) }

	if err := s.ReloadTLS(); err != nil || !strings.Contains(logs.String(), "the Nomad client's TLS files reloaded, unchanged") {
		t.Errorf("reloading the same files: %v; the log does not say they are unchanged:\n%s", err, logs.String())
	}
	issue("paxcron-nomad-client-renewed")
	if err := s.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if n := reloads(t, s, "nomad", "ok"); n != 2 {
		t.Errorf("%v reloads of Nomad's files counted ok, want 2", n)
	}
	for _, want := range []string{"the Nomad client's TLS files reloaded", "CN=paxcron-nomad-client-renewed", `before="subject \"CN=paxcron-nomad-client\"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}

	write("cert.pem", []byte("not a certificate"))
	err := s.ReloadTLS()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "cert.pem")) {
		t.Errorf("reloading a certificate file that is not PEM: %v, want an error naming the file", err)
	}
	if n := reloads(t, s, "nomad", "failed"); n != 1 {
		t.Errorf("%v reloads of Nomad's files counted failed, want 1", n)
	}
	if !strings.Contains(logs.String(), "reloading the Nomad client's TLS files failed") {
		t.Errorf("the log does not say the reload failed:\n%s", logs.String())
	}
}

// nomadTLSFiles are a Nomad client's TLS files in dir: a CA file of ca,
// and a client certificate ca issued.
type nomadTLSFiles struct {
	t   testing.TB
	dir string
	ca  *testcert.CA
}

func newNomadTLSFiles(t testing.TB, leaf testcert.Leaf) *nomadTLSFiles {
	f := &nomadTLSFiles{t: t, dir: t.TempDir(), ca: testcert.NewCA(t, "nomad CA", time.Now().Add(24*time.Hour))}
	f.write("ca.pem", f.ca.PEM())
	f.issue(leaf)
	return f
}

func (f *nomadTLSFiles) write(name string, b []byte) {
	if err := os.WriteFile(filepath.Join(f.dir, name), b, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// issue writes a new client certificate and key, ca's, as leaf says.
func (f *nomadTLSFiles) issue(leaf testcert.Leaf) {
	cert, key := f.ca.Issue(f.t, leaf).PEM(f.t)
	f.write("cert.pem", cert)
	f.write("key.pem", key)
}

// config is a lone replica's whose Nomad client has the files, logging
// into logs.
func (f *nomadTLSFiles) config(t *testing.T, logs *syncBuffer) Config {
	cfg := testConfig(t, 1, t.TempDir(), newFakeNomad())
	cfg.NewDispatcher = nil
	cfg.Nomad = nomad.DefaultConfig()
	cfg.Nomad.Address = "https://127.0.0.1:4646"
	cfg.Nomad.TLS = nomad.TLSConfig{CACert: filepath.Join(f.dir, "ca.pem"), ClientCert: filepath.Join(f.dir, "cert.pem"), ClientKey: filepath.Join(f.dir, "key.pem")}
	cfg.SkipNomadChecks = true
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	return cfg
}

// startNomadTLSReplica starts a lone replica whose Nomad client has the
// files, logging into logs; the test's end stops it.
func startNomadTLSReplica(t *testing.T, f *nomadTLSFiles, logs *syncBuffer) *Server {
	s, err := New(f.config(t, logs), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.Start()
	return s
}

// The Nomad client's certificate's expiry is warned of and published as
// the replica's own is, and follows a reload.
func TestNomadClientCertificateExpiryIsPublished(t *testing.T) {
	soon := time.Now().Add(10 * 24 * time.Hour).Truncate(time.Second)
	files := newNomadTLSFiles(t, testcert.Leaf{Name: "paxcron-nomad-client", NotAfter: soon})
	var logs syncBuffer
	s := startNomadTLSReplica(t, files, &logs)
	const metric = "paxcron_nomad_tls_certificate_expiry_timestamp_seconds"
	if v, ok := gauge(t, s, metric); !ok || v != float64(soon.Unix()) {
		t.Errorf("%s: %v (%v), want %d", metric, v, ok, soon.Unix())
	}
	waitLogSays(t, "the warning of the Nomad client's certificate", &logs, 0,
		[]string{"the Nomad client's TLS certificate expires in", soon.UTC().Format(time.RFC3339), filepath.Join(files.dir, "cert.pem")})

	later := time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second)
	files.issue(testcert.Leaf{Name: "paxcron-nomad-client", NotAfter: later})
	if err := s.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if v, ok := gauge(t, s, metric); !ok || v != float64(later.Unix()) {
		t.Errorf("%s after a reload: %v (%v), want %d", metric, v, ok, later.Unix())
	}
}

package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paxcron/internal/testcert"
	"paxcron/paxos"
)

type tlsFixture struct {
	server *tls.Config // a member's config: its certificate, the cluster CA
}

// testTLS makes a CA and one certificate for 127.0.0.1 signed by it,
// valid for both server and client authentication.
func testTLS(t *testing.T) tlsFixture {
	t.Helper()
	ca := testcert.NewCA(t, "paxcron test CA", time.Now().Add(time.Hour))
	pool := ca.Pool()
	return tlsFixture{server: &tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, testcert.Leaf{Name: "replica"}).TLS()},
		RootCAs:      pool, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS13,
	}}
}

func TestMutualTLS(t *testing.T) {
	fx := testTLS(t)
	nodes := startClusterTLS(t, 2, testLimits(), fx.server)
	a, b := nodes[0], nodes[1]
	for r := uint64(1); r <= 20; r++ {
		if err := a.tr.Send(heartbeat(1, 2, r)); err != nil {
			t.Fatal(err)
		}
	}
	b.rec.waitFor(t, "messages over TLS", func() bool { return b.rec.total() == 20 })

	// A replica with the cluster key but a certificate from another CA,
	// and one without TLS, cannot connect.
	other := testTLS(t)
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{{"foreign CA", other.server}, {"no TLS", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			before := a.tr.Stats().AuthFailures
			imp, err := New(Config{ID: 2, Peers: map[paxos.ReplicaID]string{1: a.tr.Addr().String()}, Key: testKey,
				ListenAddr: "127.0.0.1:0", Handler: func(paxos.Message) {}, Limits: testLimits(), TLS: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			defer imp.Close()
			imp.Send(heartbeat(2, 1, 999))
			eventually(t, "refused TLS handshakes", func() bool {
				return a.tr.Stats().AuthFailures >= before+2 && imp.Stats().DialFailures >= 2
			})
			if a.rec.total() != 0 || imp.Stats().Sent != 0 {
				t.Fatalf("impostor got through: received %d, impostor stats %+v", a.rec.total(), imp.Stats())
			}
		})
	}
}

// A dialer that refuses the certificate of the peer it dialed (here: from
// another CA) tells OnAuthFailure, naming the peer and the certificate;
// before, such refusals were only counted as failed dials.
func TestTLSRefusalWhileDialingIsTold(t *testing.T) {
	fx, foreign := testTLS(t), testTLS(t)
	imp, err := New(Config{ID: 2, Peers: map[paxos.ReplicaID]string{1: "127.0.0.1:1"}, Key: testKey,
		ListenAddr: "127.0.0.1:0", Handler: func(paxos.Message) {}, Limits: testLimits(), TLS: foreign.server})
	if err != nil {
		t.Fatal(err)
	}
	defer imp.Close()
	a, told := startDialer(t, imp.Addr().String(), fx.server, nil)
	a.Send(heartbeat(1, 2, 1))
	select {
	case f := <-told:
		var cv *tls.CertificateVerificationError
		if !f.Dialing || f.Peer != 2 || f.Closed || !errors.As(f.Err, &cv) {
			t.Errorf("told %+v, want a dial to replica 2 refused on its certificate", f)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no refusal told; stats %+v", a.Stats())
	}
}

// A TLS handshake the other end closes or resets (as a replica stopping
// in a rolling restart does) is counted as closed, not as a refusal;
// plain text where a TLS handshake belongs is still a refusal. Found by
// CI: such a reset was logged as "a replica-to-replica connection was
// refused".
func TestTLSHandshakeClosedByThePeerIsNoRefusal(t *testing.T) {
	fx := testTLS(t)
	nodes := startClusterTLS(t, 2, testLimits(), fx.server)
	a := nodes[0]
	closeMidHandshake := func(reset bool) {
		c, err := net.Dial("tcp", a.tr.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// Half a ClientHello's record header: the server reads on.
		c.Write([]byte{0x16, 0x03})
		if reset {
			c.(*net.TCPConn).SetLinger(0)
		}
		c.Close()
	}
	before := a.tr.Stats()
	closeMidHandshake(false)
	closeMidHandshake(true)
	eventually(t, "the closed handshakes counted", func() bool {
		return a.tr.Stats().HandshakesClosed >= before.HandshakesClosed+2
	})
	if got := a.tr.Stats().AuthFailures - before.AuthFailures; got != 0 {
		t.Fatalf("%d handshakes the other end closed counted as refusals", got)
	}

	c, err := net.Dial("tcp", a.tr.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	eventually(t, "plain text refused", func() bool { return a.tr.Stats().AuthFailures > before.AuthFailures })

	// A handshake under way when the transport stops was closed by this
	// side: neither refused nor closed by the peer.
	b := nodes[1]
	pending, err := net.Dial("tcp", b.tr.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Close()
	pending.Write([]byte{0x16, 0x03})
	time.Sleep(50 * time.Millisecond) // let b start reading the hello
	before = b.tr.Stats()
	if err := b.tr.Close(); err != nil {
		t.Fatal(err)
	}
	if after := b.tr.Stats(); after.AuthFailures != before.AuthFailures || after.HandshakesClosed != before.HandshakesClosed {
		t.Fatalf("a handshake this side closed in stopping was counted: before %+v, after %+v", before, after)
	}
}

// dialerOf is a dialer's TLS config: cert presented, peers verified
// against roots.
func dialerOf(cert tls.Certificate, roots *x509.CertPool) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS13}
}

// acceptorOf is a member's TLS config presenting cert and accepting
// dialers whose certificates clientCAs signed.
func acceptorOf(cert tls.Certificate, clientCAs *x509.CertPool) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: clientCAs, ClientCAs: clientCAs,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
}

// startDialer starts replica 1, dialing replica 2 at addr with the
// configs dialTLS gives, and tells its refusals into the channel
// returned.
func startDialer(t *testing.T, addr string, acceptor *tls.Config, dialTLS func() *tls.Config) (*Transport, chan AuthFailure) {
	t.Helper()
	told := make(chan AuthFailure, 64)
	tr, err := New(Config{ID: 1, Peers: map[paxos.ReplicaID]string{2: addr}, Key: testKey,
		ListenAddr: "127.0.0.1:0", Handler: func(paxos.Message) {}, Limits: testLimits(), TLS: acceptor, DialTLS: dialTLS,
		OnAuthFailure: func(f AuthFailure) {
			select {
			case told <- f:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, told
}

// startAcceptor starts replica 2, presenting cert to replica 1's dials.
func startAcceptor(t *testing.T, cert tls.Certificate, clientCAs *x509.CertPool) (*Transport, *recorder) {
	t.Helper()
	rec := newRecorder()
	tr, err := New(Config{ID: 2, Peers: map[paxos.ReplicaID]string{1: "127.0.0.1:1"}, Key: testKey,
		ListenAddr: "127.0.0.1:0", Handler: rec.handle, Limits: testLimits(), TLS: acceptorOf(cert, clientCAs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, rec
}

// refusal waits for the first refusal told while dialing replica 2.
func refusal(t *testing.T, told chan AuthFailure) *tls.CertificateVerificationError {
	t.Helper()
	select {
	case f := <-told:
		var cv *tls.CertificateVerificationError
		if !f.Dialing || f.Peer != 2 || !errors.As(f.Err, &cv) {
			t.Fatalf("told %+v, want a dial to replica 2 refused on its certificate", f)
		}
		return cv
	case <-time.After(10 * time.Second):
		t.Fatal("no refusal told")
	}
	return nil
}

// Config.DialTLS is asked at every dial: a CA added to the RootCAs it
// gives between two dials is trusted by the second. Before, a dialer
// verified its peers against the config it was built with to the end,
// so a replica's reload could not add a CA for its dials.
func TestDialTLSIsAskedAtEveryDial(t *testing.T) {
	oldCA := testcert.NewCA(t, "paxcron CA", time.Now().Add(time.Hour))
	newCA := testcert.NewCA(t, "paxcron CA", time.Now().Add(2*time.Hour))
	both := oldCA.Pool()
	both.AddCert(newCA.Cert)
	b, rec := startAcceptor(t, newCA.Issue(t, testcert.Leaf{Name: "replica-2"}).TLS(), both)
	cert := oldCA.Issue(t, testcert.Leaf{Name: "replica-1"}).TLS()
	var now atomic.Pointer[tls.Config]
	now.Store(dialerOf(cert, oldCA.Pool()))
	a, told := startDialer(t, b.Addr().String(), acceptorOf(cert, both), now.Load)

	a.Send(heartbeat(1, 2, 1))
	var unknown x509.UnknownAuthorityError
	if cv := refusal(t, told); !errors.As(cv.Err, &unknown) {
		t.Fatalf("refused with %v, want a certificate from a CA the dialer does not trust", cv.Err)
	}
	now.Store(dialerOf(cert, both))
	a.Send(heartbeat(1, 2, 2))
	rec.waitFor(t, "a message over the dial trusting the CA added", func() bool { return rec.total() > 0 })
}

// Through Config.DialTLS the dialer still checks that the peer's
// certificate names the host it dialed, an IP address included: one
// naming another host is refused, and nothing is sent. (Checking the
// chain alone, in a hook of the config, would let it through.)
func TestDialTLSStillChecksTheHostDialed(t *testing.T) {
	ca := testcert.NewCA(t, "paxcron test CA", time.Now().Add(time.Hour))
	b, rec := startAcceptor(t, ca.Issue(t, testcert.Leaf{Name: "replica-2", DNS: []string{"replica-2.example"}}).TLS(), ca.Pool())
	cert := ca.Issue(t, testcert.Leaf{Name: "replica-1"}).TLS()
	dialer := dialerOf(cert, ca.Pool())
	a, told := startDialer(t, b.Addr().String(), acceptorOf(cert, ca.Pool()), func() *tls.Config { return dialer })

	a.Send(heartbeat(1, 2, 1))
	var host x509.HostnameError
	if cv := refusal(t, told); !errors.As(cv.Err, &host) || host.Host != "127.0.0.1" {
		t.Fatalf("refused with %v, want a certificate not naming 127.0.0.1", cv.Err)
	}
	if rec.total() != 0 || a.Stats().Sent != 0 {
		t.Fatalf("a message got through to a peer whose certificate does not name its address: received %d, stats %+v", rec.total(), a.Stats())
	}
	if dialer.ServerName != "" {
		t.Errorf("the config DialTLS gave was changed (ServerName %q): the transport must set the host on a clone", dialer.ServerName)
	}
}

// Retrust closes the TLS connections its check refuses, dialed and
// accepted, checks every handshake that completes after with it too (one
// may have started with the TLS config of before), and a later check
// that refuses nothing lets them be made again.
func TestRetrustClosesWhatItsCheckRefuses(t *testing.T) {
	fx := testTLS(t)
	nodes := startClusterTLS(t, 2, testLimits(), fx.server)
	a, b := nodes[0], nodes[1]
	round := uint64(0)
	delivered := func() bool {
		round++
		b.tr.Send(heartbeat(2, 1, round))
		a.tr.Send(heartbeat(1, 2, round))
		return a.rec.total() > 0 && b.rec.total() > 0
	}
	eventually(t, "messages both ways over TLS", delivered)
	var mu sync.Mutex
	checked := map[string]int{}
	a.tr.Retrust(func(c TLSConn) error {
		mu.Lock()
		defer mu.Unlock()
		checked[fmt.Sprintf("dialing=%v peer=%d certificate=%s", c.Dialing, c.Peer, c.State.PeerCertificates[0].Subject)]++
		return errors.New("no longer trusted")
	})
	mu.Lock()
	if len(checked) != 2 || checked["dialing=true peer=2 certificate=CN=replica"] != 1 || checked["dialing=false peer=2 certificate=CN=replica"] != 1 {
		t.Errorf("checked %v, want the connection dialed to replica 2 and the one it dialed in, once each", checked)
	}
	mu.Unlock()
	before := a.tr.Stats()
	eventually(t, "new handshakes both ways refused by the check", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return checked["dialing=true peer=2 certificate=CN=replica"] > 1 && checked["dialing=false peer=0 certificate=CN=replica"] > 0
	})
	if s := a.tr.Stats(); s.AuthFailures != before.AuthFailures {
		t.Errorf("the refusals were told as failed handshakes too: %+v, before %+v", s, before)
	}
	a.tr.Retrust(func(TLSConn) error { return nil })
	receivedA, receivedB := a.rec.total(), b.rec.total()
	eventually(t, "messages both ways once the check refuses nothing", func() bool {
		delivered()
		return a.rec.total() > receivedA && b.rec.total() > receivedB
	})
}

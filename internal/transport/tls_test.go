package transport

import (
	"crypto/tls"
	"errors"
	"net"
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
	told := make(chan AuthFailure, 16)
	a, err := New(Config{ID: 1, Peers: map[paxos.ReplicaID]string{2: imp.Addr().String()}, Key: testKey,
		ListenAddr: "127.0.0.1:0", Handler: func(paxos.Message) {}, Limits: testLimits(), TLS: fx.server,
		OnAuthFailure: func(f AuthFailure) {
			select {
			case told <- f:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
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

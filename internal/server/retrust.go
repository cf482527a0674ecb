package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"time"

	"paxcron/internal/transport"
)

// Found in review (TLS reload): a reload that dropped a CA refused new
// connections from the peers it had signed, but those open went on,
// trusted by a CA file that no longer held their CA, until they broke.
// Now a reload that changes the CAs checks the certificate of every
// replica-to-replica connection open (the Paxos transport's, both ways,
// and the forwarding proxy's) against the new ones, and closes those it
// refuses. The API does not ask its clients for certificates, so its
// connections have no trust of that kind to lose.

// retrust closes every replica-to-replica connection whose other end's
// certificate the CAs of m, just reloaded, do not verify, and logs each.
func (s *Server) retrust(m *tlsMaterial) {
	s.tr.Retrust(func(c transport.TLSConn) error {
		usage := x509.ExtKeyUsageClientAuth // dialed from: the other end is the client
		if c.Dialing {
			usage = x509.ExtKeyUsageServerAuth
		}
		return s.stillTrusted(m, c.State.PeerCertificates, usage, c.At, connSide(c.Dialing, c.Peer, c.Remote))
	})
	s.forwarded.retrust(func(c *forwardConn) error {
		return s.stillTrusted(m, c.state.PeerCertificates, x509.ExtKeyUsageServerAuth, c.at, "forwarding to "+c.addr)
	})
}

// stillTrusted verifies a connection's peer certificates against the CAs
// of m, for usage, and says why not in the log. It verifies them as of
// at, when the connection's handshake verified them: the question is
// the CAs trusted, and a certificate that expired since is left to go
// on as it would without a reload.
func (s *Server) stillTrusted(m *tlsMaterial, certs []*x509.Certificate, usage x509.ExtKeyUsage, at time.Time, side string) error {
	if len(certs) == 0 {
		// Mutual TLS gives every connection here the other end's
		// certificate; one without is trusted by nothing.
		s.log.Warn("closed a replica-to-replica connection made before the TLS files were reloaded: the other end presented no certificate", "side", side)
		return errNoPeerCertificate
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: m.pool, Intermediates: inter, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		s.log.Warn("closed a replica-to-replica connection made before the TLS files were reloaded: "+
			"this replica no longer trusts the other end's certificate ("+certCause(err)+"), and refuses it from now on",
			"side", side, "certificate", describeCert(certs[0]), "err", err)
	}
	return err
}

// errNoPeerCertificate: a connection checked again whose other end
// presented no certificate.
var errNoPeerCertificate = errors.New("server: the other end presented no certificate")

// errForwardRetrusted: a forwarding dial whose TLS handshake completed
// with a config taken before a reload, which its check then refused.
var errForwardRetrusted = errors.New("server: the leader's certificate is no longer trusted since the TLS files were reloaded")

// forwardConns are the TLS connections the forwarding proxy dialed and
// has open: http.Transport keeps them out of reach, so they are kept
// here too for retrust, each under its TLS (http.Transport needs the
// *tls.Conn itself, for HTTP/2).
type forwardConns struct {
	mu   sync.Mutex
	open map[*forwardConn]struct{}
	// check is retrust's last, nil before: a dial whose handshake
	// completes after it is checked with it too, since it may have
	// started with the config of before.
	check func(*forwardConn) error
}

// forwardConn is one connection the proxy dialed, under its TLS: closing
// it forgets it.
type forwardConn struct {
	net.Conn
	set  *forwardConns
	addr string
	// state and at, once its TLS handshake completed: the state, and
	// when; refused, once a check refused it.
	state   tls.ConnectionState
	at      time.Time
	refused bool
}

func newForwardConns() *forwardConns {
	return &forwardConns{open: map[*forwardConn]struct{}{}}
}

// track wraps raw, just dialed to addr, to be kept once its handshake completes.
func (f *forwardConns) track(raw net.Conn, addr string) *forwardConn {
	return &forwardConn{Conn: raw, set: f, addr: addr}
}

// handshook keeps c, whose TLS handshake completed with state, and
// checks it with retrust's check if there was one; it reports whether
// the check let it be (false: c is closed).
func (f *forwardConns) handshook(c *forwardConn, state tls.ConnectionState) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c.state, c.at = state, time.Now()
	f.open[c] = struct{}{}
	return f.check == nil || f.recheckLocked(c)
}

// retrust checks every connection open with check and closes those it
// refuses (see transport.Transport.Retrust, which this mirrors).
func (f *forwardConns) retrust(check func(*forwardConn) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.check = check
	//detlint:maprange each connection is checked on its own; order is irrelevant
	for c := range f.open {
		if !c.refused {
			f.recheckLocked(c)
		}
	}
}

func (f *forwardConns) recheckLocked(c *forwardConn) bool {
	if err := f.check(c); err != nil {
		c.refused = true
		c.Conn.Close() // the raw connection: http.Transport sees it fail
		return false
	}
	return true
}

func (c *forwardConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.open, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}

package transport

import (
	"crypto/tls"
	"errors"
	"net"
	"time"

	"paxcron/paxos"
)

// TLSConn is an open connection's TLS, as Retrust's check sees it.
type TLSConn struct {
	// Peer is the replica dialed, or the one that dialed in once the
	// handshake after TLS authenticated it (None until then).
	Peer paxos.ReplicaID
	// Dialing: this replica dialed the connection, so the other end's
	// certificate is a server's; otherwise a client's.
	Dialing bool
	Remote  string
	// State is the connection's, its TLS handshake complete; At is when
	// that handshake completed.
	State tls.ConnectionState
	At    time.Time
}

// tlsConn is a tracked connection's TLS, once its TLS handshake completed.
type tlsConn struct {
	TLSConn
	// refused: a check refused it, so it is closing and is not checked
	// (nor said refused) again.
	refused bool
}

// errRetrusted: a TLS handshake that completed with a config taken
// before Retrust's last call is refused by its check.
var errRetrusted = errors.New("the peer's certificate is no longer trusted since the TLS files were reloaded")

// Retrust checks every open TLS connection with check, and closes each one
// it refuses (returns an error for). Call it when the CAs trusted change:
// a connection's trust was decided by its handshake, and without this a
// peer whose certificate the new CAs do not verify would stay connected
// on the trust of the old ones. A TLS handshake that completes after is
// checked with it as well, since it may have started with the config of
// before. check may log the refusal: it runs at most once per connection
// refused, with the transport's lock held, so it must be quick and must
// not call the Transport.
func (t *Transport) Retrust(check func(TLSConn) error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.retrust = check
	//detlint:maprange each connection is checked on its own; order is irrelevant
	for raw, c := range t.conns {
		if c != nil && !c.refused {
			t.recheckLocked(raw, c)
		}
	}
}

// noteTLS keeps the TLS of raw, whose TLS handshake just completed, and
// checks it with Retrust's check if there was one; it reports whether
// the check let it be (false: raw is closed).
func (t *Transport) noteTLS(raw net.Conn, c TLSConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, tracked := t.conns[raw]; !tracked {
		return true // closing already: the next read or write fails
	}
	tc := &tlsConn{TLSConn: c}
	t.conns[raw] = tc
	return t.retrust == nil || t.recheckLocked(raw, tc)
}

// recheckLocked checks c, raw's TLS, with retrust, closing raw if it is
// refused; it reports whether it was not.
func (t *Transport) recheckLocked(raw net.Conn, c *tlsConn) bool {
	if err := t.retrust(c.TLSConn); err != nil {
		c.refused = true
		raw.Close()
		return false
	}
	return true
}

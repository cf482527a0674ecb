package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"paxcron/paxos"
)

// MinKeyBytes is the shortest cluster key Config accepts.
const MinKeyBytes = 16

// ErrConfig is wrapped by every error New returns for an invalid Config.
var ErrConfig = errors.New("transport: invalid config")

// Config configures a Transport. Every field without a documented default
// is required.
type Config struct {
	// ID is this replica's ID.
	ID paxos.ReplicaID
	// Peers maps every other member's ID to the address it listens on
	// (host:port), or "" while it is not known (the peer is dialed once
	// SetPeerAddr gives one; messages to it queue, within the bounds, and
	// drop). It must not contain ID. SetPeerAddr changes an address later;
	// the set of members is fixed.
	Peers map[paxos.ReplicaID]string
	// Key is the cluster key every member holds, at least MinKeyBytes:
	// the one this replica proves itself with.
	Key []byte
	// AcceptKeys are further cluster keys this replica accepts a peer's
	// proof under, each at least MinKeyBytes (optional): during a key
	// rotation a dialer proves itself with the acceptor's Key when it
	// holds it among its own, so that two replicas connect while either
	// holds the other's Key (see the package comment).
	AcceptKeys [][]byte
	// ListenAddr is the address to listen on; or set Listener instead
	// (exactly one of the two).
	ListenAddr string
	// Listener, when set, is used instead of ListenAddr. The Transport
	// owns it from New on and closes it in Close.
	Listener net.Listener
	// TLS, when set, wraps every connection before the handshake: the
	// acceptor as a TLS server, the dialer as a client (ServerName set to
	// the peer's host when empty) unless DialTLS is set. It must require
	// and verify client certificates (ClientAuth =
	// tls.RequireAndVerifyClientCert): TLS here is mutual.
	TLS *tls.Config
	// DialTLS, when set, gives the dialer's TLS config at every dial,
	// instead of TLS: the transport clones what it returns and sets
	// ServerName to the peer's host when empty, so crypto/tls verifies
	// the chain against its RootCAs and the host dialed (an IP address
	// included) as it does with TLS. A config the caller swaps between
	// dials (a reload of its CA file or certificate) is thus used by the
	// next dial: the pool of a config, once cloned, cannot change, and no
	// hook of a tls.Config sees the host dialed when it is an IP address
	// (the SNI name is empty), so checking the chain in a hook would drop
	// the host check. Optional; it needs TLS (the acceptor's), and each
	// config it returns must present a certificate (Certificates or
	// GetClientCertificate: TLS here is mutual) and verify the peer (no
	// InsecureSkipVerify). It is called from the dialing goroutines, at
	// the same time, so it must be safe for that.
	DialTLS func() *tls.Config
	// Handler receives every inbound message (see the package comment for
	// which goroutine calls it).
	Handler func(paxos.Message)
	// Agreed are settings every replica must share besides the members
	// (the server's timing: its tick and the core's timeouts and lease),
	// encoded by the caller; the handshake binds them as it binds the
	// members, so replicas whose Agreed differ refuse each other.
	// Optional: nil binds nothing more.
	Agreed []byte
	// ClusterID returns this replica's cluster ID, zero while it knows
	// none (a new cluster not named yet, a replica rebuilding from its
	// peers). It is read once per handshake, from the connection's
	// goroutine, so it must be safe for concurrent use and quick (an
	// atomic load). Replicas that both know one and whose IDs differ
	// refuse each other (ErrOtherCluster). Optional: nil never knows one.
	ClusterID func() ClusterID
	// Ready, when set, reports whether this replica may take part yet:
	// until it does, the transport neither dials (it checks again every
	// Limits.BackoffMin) nor answers a hello (it closes the connection),
	// so that a replica still applying what its own disk holds, its
	// cluster ID not read yet, cannot answer with that state before the
	// ID is checked. Read per dial and per connection accepted; it must
	// be quick and safe for concurrent use. Nil: always ready.
	Ready func() bool
	// OnAuthFailure, when set, is told of each handshake that failed
	// authentication, either side, with the error that says why (a
	// wrong cluster key, an ID that is not a member...); nil: they are
	// only counted (Stats.AuthFailures, or Stats.HandshakesClosed when
	// the other end closed the handshake). It is called from the
	// connection's goroutine and must not block.
	OnAuthFailure func(AuthFailure)
	// OnReachability, when set, is told when a peer becomes unreachable
	// (a dial failed on the network: refused, no route, timed out; or
	// its handshake timed out, the peer accepting and never answering)
	// and when it is reached again (a dial yielded a connection), once
	// per change, not per redial: the failures between are only counted
	// (Stats.DialFailures). A dial the handshake refused changes nothing
	// here (OnAuthFailure says why). It is called from the peer's dialing
	// goroutine and must not block.
	OnReachability func(Reachability)
	// Limits bounds queues, timeouts and backoff; DefaultLimits is a
	// reasonable start.
	Limits Limits
}

// AuthFailure is a handshake that failed authentication.
type AuthFailure struct {
	// Dialing: this replica dialed Peer; otherwise Remote dialed in.
	Dialing bool
	Peer    paxos.ReplicaID // the peer dialed (0 when Remote dialed in)
	Remote  string          // the other end's address
	Err     error
	// Closed: the other end closed the connection during the handshake,
	// which does not say who is wrong (it refused this replica and says
	// why on its side, or it was stopping, as in a rolling restart).
	Closed bool
}

// Reachability is a change in whether this replica reaches a peer.
type Reachability struct {
	Peer paxos.ReplicaID
	// Addr is the address dialed.
	Addr string
	// Reachable: a dial yielded a connection after failures; otherwise
	// the peer just became unreachable (or its new address is too), and
	// Err says why.
	Reachable bool
	Err       error
	// FailedDials and Down, once Reachable: how many dials failed, over
	// how long, since the peer became unreachable.
	FailedDials uint64
	Down        time.Duration
}

// members are the cluster's replica IDs, sorted: ID and every peer's.
// The handshake binds them, so replicas whose lists differ refuse each
// other.
func (c *Config) members() []paxos.ReplicaID {
	return slices.Sorted(func(yield func(paxos.ReplicaID) bool) {
		if !yield(c.ID) {
			return
		}
		//detlint:maprange sorted by the caller
		for id := range c.Peers {
			if !yield(id) {
				return
			}
		}
	})
}

// keys are the keys this replica accepts, Key first.
func (c *Config) keys() [][]byte {
	return append([][]byte{c.Key}, c.AcceptKeys...)
}

// Limits are the transport's bounds. All must be positive.
type Limits struct {
	// QueueMessagesMax and QueueBytesMax bound each peer's send queue
	// (encoded frame bytes). A message that would exceed either is
	// dropped.
	QueueMessagesMax int
	QueueBytesMax    int
	// InboundConnsMax bounds the inbound connections open at once,
	// authenticated or still in their handshake, each with its goroutine:
	// it bounds what processes without the key can make a replica hold.
	// It must be above the number of peers, since each peer holds one
	// authenticated connection (a newer one replaces the older) and a
	// redialing peer needs a slot for its handshake. When every slot is
	// taken, a new connection closes the oldest one still in its
	// handshake, never an authenticated one (the new one is closed
	// instead when none is in its handshake); either is counted in
	// Stats.Rejected. So connections that stall their handshake hold a
	// slot only until InboundConnsMax newer ones arrive, not for
	// HandshakeTimeout, and cannot keep a member out: to push a member's
	// handshake out, strangers must open more connections than there are
	// slots during the few round trips it takes.
	InboundConnsMax int
	// DialTimeout bounds one TCP dial; HandshakeTimeout the TLS and key
	// handshake that follows (on both sides); WriteTimeout one batch of
	// writes to a peer, after which the connection is given up.
	DialTimeout      time.Duration
	HandshakeTimeout time.Duration
	WriteTimeout     time.Duration
	// BackoffMin and BackoffMax bound the wait between failed dials: it
	// starts at BackoffMin, doubles per failure up to BackoffMax, and each
	// wait is drawn uniformly from [d/2, d) (jitter, so replicas that lost
	// a peer together do not redial in step).
	BackoffMin time.Duration
	BackoffMax time.Duration
}

// DefaultLimits are limits for replicas on a LAN: 1024 messages or 128 MiB
// queued per peer (a few snapshot chunks and full batches), 64 inbound
// connections (one per peer, the rest for handshakes), dials and
// handshakes of a few seconds, and redials between 50 ms and 5 s apart.
func DefaultLimits() Limits {
	return Limits{
		QueueMessagesMax: 1024,
		QueueBytesMax:    128 << 20,
		InboundConnsMax:  64,
		DialTimeout:      3 * time.Second,
		HandshakeTimeout: 5 * time.Second,
		WriteTimeout:     10 * time.Second,
		BackoffMin:       50 * time.Millisecond,
		BackoffMax:       5 * time.Second,
	}
}

func (c *Config) validate() error {
	if c.ID == paxos.None {
		return fmt.Errorf("%w: ID is zero", ErrConfig)
	}
	if err := c.validatePeers(); err != nil {
		return err
	}
	if len(c.Key) < MinKeyBytes {
		return fmt.Errorf("%w: Key has %d bytes, want at least %d", ErrConfig, len(c.Key), MinKeyBytes)
	}
	for i, k := range c.AcceptKeys {
		if len(k) < MinKeyBytes {
			return fmt.Errorf("%w: AcceptKeys[%d] has %d bytes, want at least %d", ErrConfig, i, len(k), MinKeyBytes)
		}
	}
	if (c.ListenAddr == "") == (c.Listener == nil) {
		return fmt.Errorf("%w: set exactly one of ListenAddr and Listener", ErrConfig)
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if c.Handler == nil {
		return fmt.Errorf("%w: Handler is nil", ErrConfig)
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	if c.Limits.InboundConnsMax <= len(c.Peers) {
		return fmt.Errorf("%w: Limits.InboundConnsMax is %d, must be above the %d peers (one connection each, and room for a handshake)",
			ErrConfig, c.Limits.InboundConnsMax, len(c.Peers))
	}
	return nil
}

func (c *Config) validateTLS() error {
	if c.TLS == nil {
		if c.DialTLS != nil {
			return fmt.Errorf("%w: DialTLS is set without TLS: set TLS for the acceptor too (TLS here is mutual)", ErrConfig)
		}
		return nil
	}
	if c.TLS.ClientAuth != tls.RequireAndVerifyClientCert {
		return fmt.Errorf("%w: TLS.ClientAuth must be tls.RequireAndVerifyClientCert (mutual TLS)", ErrConfig)
	}
	if c.DialTLS == nil {
		return checkDialerTLS("TLS", c.TLS)
	}
	return checkDialerTLS("DialTLS()", c.DialTLS())
}

// checkDialerTLS checks a config the dialer would use: it verifies the
// peer dialed and presents a certificate, or the peer refuses it.
func checkDialerTLS(name string, d *tls.Config) error {
	switch {
	case d == nil:
		return fmt.Errorf("%w: %s is nil", ErrConfig, name)
	case d.InsecureSkipVerify:
		return fmt.Errorf("%w: %s sets InsecureSkipVerify: a replica must verify the certificate of the peer it dials", ErrConfig, name)
	case len(d.Certificates) == 0 && d.GetClientCertificate == nil:
		return fmt.Errorf("%w: %s has no certificate to present (Certificates or GetClientCertificate): TLS here is mutual", ErrConfig, name)
	}
	return nil
}

func (c *Config) validatePeers() error {
	for id, addr := range c.Peers {
		if id == paxos.None {
			return fmt.Errorf("%w: Peers contains replica ID 0", ErrConfig)
		}
		if id == c.ID {
			return fmt.Errorf("%w: Peers contains this replica's own ID %d", ErrConfig, id)
		}
		if addr == "" {
			continue
		}
		if err := checkAddr(addr); err != nil {
			return fmt.Errorf("%w: peer %d: %w", ErrConfig, id, err)
		}
	}
	return nil
}

func checkAddr(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("address %q is not host:port: %w", addr, err)
	}
	return nil
}

func (l Limits) validate() error {
	ints := []struct {
		name string
		v    int
	}{
		{"QueueMessagesMax", l.QueueMessagesMax}, {"QueueBytesMax", l.QueueBytesMax},
		{"InboundConnsMax", l.InboundConnsMax},
	}
	for _, f := range ints {
		if f.v <= 0 {
			return fmt.Errorf("%w: Limits.%s is %d, must be positive", ErrConfig, f.name, f.v)
		}
	}
	durs := []struct {
		name string
		v    time.Duration
	}{
		{"DialTimeout", l.DialTimeout}, {"HandshakeTimeout", l.HandshakeTimeout},
		{"WriteTimeout", l.WriteTimeout}, {"BackoffMin", l.BackoffMin}, {"BackoffMax", l.BackoffMax},
	}
	for _, f := range durs {
		if f.v <= 0 {
			return fmt.Errorf("%w: Limits.%s is %v, must be positive", ErrConfig, f.name, f.v)
		}
	}
	if l.BackoffMax < l.BackoffMin {
		return fmt.Errorf("%w: Limits.BackoffMax (%v) is below BackoffMin (%v)", ErrConfig, l.BackoffMax, l.BackoffMin)
	}
	return nil
}

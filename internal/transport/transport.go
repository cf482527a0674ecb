package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"paxcron/internal/hoptrace"
	"paxcron/paxos"
)

var (
	// ErrClosed is returned by Send and SetPeerAddr after Close.
	ErrClosed = errors.New("transport: closed")
	// ErrUnknownPeer is returned for a replica ID that is not a peer.
	ErrUnknownPeer = errors.New("transport: not a peer")
	// ErrQueueFull is returned by Send when the message was dropped
	// because the peer's queue is full. Callers may ignore it: Paxos
	// tolerates loss.
	ErrQueueFull = errors.New("transport: send queue full, message dropped")
)

// Stats are cumulative counters of one Transport.
type Stats struct {
	Sent         uint64 // frames written to a connection
	Received     uint64 // messages passed to the handler
	Dropped      uint64 // messages refused by Send because a queue was full
	Lost         uint64 // frames taken from a queue whose connection then failed
	Undecodable  uint64 // frames paxos.DecodeMessage rejected
	Misaddressed uint64 // messages whose From/To did not match the connection
	Oversized    uint64 // connections closed for a frame over MaxMessageBytes
	// AuthFailures counts handshakes refused: by this side (the other
	// end failed to prove the key, was not a member, bound other members
	// or settings, or its TLS certificate did not verify), or by the
	// other end's TLS alert, which names this side's certificate.
	AuthFailures uint64
	// HandshakesClosed counts handshakes the other end closed before
	// they completed: it refused this side (and says why in its own
	// log), or it was stopping, as every replica does in a rolling
	// restart. Kept apart from AuthFailures, which counted these too
	// before the operator's procedures were walked through: a rolling
	// restart then raised the failure count every time.
	HandshakesClosed uint64
	DialFailures     uint64 // dials or handshakes that did not yield a connection
	Reconnects       uint64 // outbound connections made after a peer's first
	// Rejected counts inbound connections closed over InboundConnsMax: the
	// oldest still in its handshake, pushed out by a newer one, or the new
	// one when no connection was in its handshake.
	Rejected uint64
	// Superseded counts messages read on an inbound connection after a
	// newer one from the same peer replaced it: each is dropped, so as
	// not to reorder the peer's messages, and that connection's reader
	// stops.
	Superseded uint64
}

type counters struct {
	sent, received, dropped, lost, undecodable, misaddressed atomic.Uint64
	oversized, authFailures, dialFailures, reconnects        atomic.Uint64
	rejected, superseded, handshakesClosed                   atomic.Uint64
}

// Transport is one replica's endpoint. Its methods are safe for
// concurrent use.
type Transport struct {
	cfg    Config
	ln     net.Listener
	peers  map[paxos.ReplicaID]*peer
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stats  counters
	// inboundSlots holds one token per inbound connection being served,
	// taken before its goroutine starts and given back when it returns:
	// its capacity, InboundConnsMax, bounds both.
	inboundSlots chan struct{}

	mu     sync.Mutex
	closed bool
	// conns are the open connections, for Close: each with its TLS once
	// its TLS handshake completed (nil before, and without TLS), for
	// Retrust.
	conns map[net.Conn]*tlsConn
	// retrust is the check of Retrust's last call, nil before: a TLS
	// handshake that completes after it is checked with it too.
	retrust func(TLSConn) error
	// handshaking holds the inbound connections not yet authenticated,
	// oldest first: the ones a new connection may push out.
	handshaking []net.Conn
	inbound     map[paxos.ReplicaID]net.Conn // the current inbound connection per peer
	// incarnations tells, per peer, the processes that dialed in lately
	// (see admit).
	incarnations map[paxos.ReplicaID]*incarnations
	// incarnation is this transport's, sent in every hello it dials with.
	incarnation uint64
}

// New validates cfg, starts listening and starts dialing every peer.
func New(cfg Config) (*Transport, error) {
	if err := cfg.validate(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
			return nil, fmt.Errorf("transport: listening on %s: %w", cfg.ListenAddr, err)
		}
	}
	cfg.Key = append([]byte(nil), cfg.Key...)
	cfg.Agreed = slices.Clone(cfg.Agreed)
	cfg.AcceptKeys = slices.Clone(cfg.AcceptKeys)
	for i, k := range cfg.AcceptKeys {
		cfg.AcceptKeys[i] = slices.Clone(k)
	}
	t := &Transport{
		cfg:          cfg,
		ln:           ln,
		peers:        make(map[paxos.ReplicaID]*peer, len(cfg.Peers)),
		conns:        make(map[net.Conn]*tlsConn),
		inbound:      make(map[paxos.ReplicaID]net.Conn),
		incarnations: make(map[paxos.ReplicaID]*incarnations),
		incarnation:  newIncarnation(),
		inboundSlots: make(chan struct{}, cfg.Limits.InboundConnsMax),
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	//detlint:maprange each peer gets its own goroutine; order is irrelevant
	for id, addr := range cfg.Peers {
		t.peers[id] = newPeer(id, addr)
	}
	t.wg.Add(1 + len(t.peers))
	go t.acceptLoop()
	//detlint:maprange starting goroutines; order is irrelevant
	for _, p := range t.peers {
		go t.runPeer(p)
	}
	return t, nil
}

// Addr is the address the transport listens on.
func (t *Transport) Addr() net.Addr { return t.ln.Addr() }

// Send queues m for m.To and returns at once. m.From must be this
// replica. The message is encoded on the caller's goroutine (so the
// queue's byte bound is exact and a bad message is refused here). It
// returns ErrUnknownPeer for a To that is not a peer, an error
// wrapping paxos.ErrInvalidMessage or paxos.ErrMessageTooLarge for a
// message that cannot be encoded, ErrQueueFull when the message was
// dropped (counted in Stats.Dropped), and ErrClosed after Close.
func (t *Transport) Send(m paxos.Message) error {
	if m.From != t.cfg.ID {
		return fmt.Errorf("transport: message from replica %d sent by replica %d", m.From, t.cfg.ID)
	}
	p, ok := t.peers[m.To]
	if !ok {
		return fmt.Errorf("%w: replica %d", ErrUnknownPeer, m.To)
	}
	if t.ctx.Err() != nil {
		return ErrClosed
	}
	hoptrace.Mark(hoptrace.TransportSend, hoptrace.Message(uint8(m.Type), uint64(m.To)))
	f, err := encodeFrame(m)
	if err != nil {
		return fmt.Errorf("transport: encoding %s: %w", m.Type, err)
	}
	if !p.push(f, t.cfg.Limits) {
		t.stats.dropped.Add(1)
		return fmt.Errorf("%w: replica %d", ErrQueueFull, m.To)
	}
	return nil
}

// SetPeerAddr changes the address peer id is dialed at. A connection to
// the old address is closed and the new one dialed at once.
func (t *Transport) SetPeerAddr(id paxos.ReplicaID, addr string) error {
	p, ok := t.peers[id]
	if !ok {
		return fmt.Errorf("%w: replica %d", ErrUnknownPeer, id)
	}
	if err := checkAddr(addr); err != nil {
		return fmt.Errorf("transport: peer %d: %w", id, err)
	}
	if t.ctx.Err() != nil {
		return ErrClosed
	}
	p.setAddr(addr)
	return nil
}

// clusterID is this replica's cluster ID now (Config.ClusterID).
func (t *Transport) clusterID() ClusterID {
	if t.cfg.ClusterID == nil {
		return ClusterID{}
	}
	return t.cfg.ClusterID()
}

// ready is Config.Ready, true when unset.
func (t *Transport) ready() bool { return t.cfg.Ready == nil || t.cfg.Ready() }

// Redial closes every connection, inbound and outbound: each peer is
// dialed again, and dials in again, with a new handshake. Call it once
// this replica learns its cluster ID: a connection made while it knew
// none was checked against nothing, and must not outlive that.
func (t *Transport) Redial() {
	t.mu.Lock()
	defer t.mu.Unlock()
	//detlint:maprange closing every connection; order is irrelevant
	for c := range t.conns {
		c.Close()
	}
}

// Stats returns the counters so far.
func (t *Transport) Stats() Stats {
	c := &t.stats
	return Stats{
		Sent: c.sent.Load(), Received: c.received.Load(), Dropped: c.dropped.Load(),
		Lost: c.lost.Load(), Undecodable: c.undecodable.Load(), Misaddressed: c.misaddressed.Load(),
		Oversized: c.oversized.Load(), AuthFailures: c.authFailures.Load(),
		DialFailures: c.dialFailures.Load(), Reconnects: c.reconnects.Load(),
		Rejected: c.rejected.Load(), Superseded: c.superseded.Load(),
		HandshakesClosed: c.handshakesClosed.Load(),
	}
}

// Close stops listening, closes every connection, drops what is queued
// and waits for every goroutine of the transport to return. The handler is
// not called after Close returns. Close is idempotent.
func (t *Transport) Close() error {
	t.cancel()
	t.mu.Lock()
	first := !t.closed
	t.closed = true
	//detlint:maprange closing every connection; order is irrelevant
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	var err error
	if first {
		err = t.ln.Close()
	}
	t.wg.Wait()
	return err
}

// track registers c for Close; it reports false (and closes c) if the
// transport is closing.
func (t *Transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.trackLocked(c)
}

// trackLocked is track with mu held.
func (t *Transport) trackLocked(c net.Conn) bool {
	if t.closed {
		c.Close()
		return false
	}
	t.conns[c] = nil
	return true
}

func (t *Transport) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.handshaking = slices.DeleteFunc(t.handshaking, func(h net.Conn) bool { return h == c })
	if id := t.inboundPeer(c); id != paxos.None {
		delete(t.inbound, id)
	}
	t.mu.Unlock()
	c.Close()
}

// inboundPeer finds the peer whose current inbound connection is c (None
// if none). Called with mu held.
func (t *Transport) inboundPeer(c net.Conn) paxos.ReplicaID {
	//detlint:maprange at most one entry holds c
	for id, ic := range t.inbound {
		if ic == c {
			return id
		}
	}
	return paxos.None
}

// wrapTLS wraps c for TLS when configured and runs the TLS handshake: to
// peer, dialing it at addr; or, accepting, from a peer not known yet
// (None).
func (t *Transport) wrapTLS(c net.Conn, peer paxos.ReplicaID, addr string) (net.Conn, error) {
	server := peer == paxos.None
	if t.cfg.TLS == nil {
		return c, nil
	}
	var tc *tls.Conn
	if server {
		tc = tls.Server(c, t.cfg.TLS)
	} else {
		cfg := t.dialerTLS().Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc = tls.Client(c, cfg)
	}
	if err := tc.HandshakeContext(t.ctx); err != nil {
		return nil, fmt.Errorf("transport: TLS handshake: %w", err)
	}
	if !t.noteTLS(c, TLSConn{Peer: peer, Dialing: !server, Remote: c.RemoteAddr().String(), State: tc.ConnectionState(), At: time.Now()}) {
		return nil, fmt.Errorf("transport: TLS handshake: %w", errRetrusted)
	}
	return tc, nil
}

// dialerTLS is the TLS config of a dial: Config.DialTLS's now, when set.
func (t *Transport) dialerTLS() *tls.Config {
	if t.cfg.DialTLS == nil {
		return t.cfg.TLS
	}
	d := t.cfg.DialTLS()
	if err := checkDialerTLS("DialTLS()", d); err != nil {
		panic(fmt.Sprintf("transport: Config.DialTLS broke what New checked: %v", err))
	}
	return d
}

// closedByPeer reports whether err says the other end closed or reset
// the connection: no refusal of this side's, as a replica stopping in a
// rolling restart closes its TLS handshakes too (found by CI: such a
// reset was logged as a refused connection).
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// closedHere reports whether err, from a handshake, came of this side
// closing the connection: the transport stopping, Redial, or a handshake
// pushed out by newer ones. Found by CI: a replica that learned its
// cluster ID and redialed logged its own close as a refusal of the dialer.
func (t *Transport) closedHere(err error) bool {
	return t.ctx.Err() != nil || errors.Is(err, net.ErrClosed)
}

// isTLSRefusal reports whether err is a TLS handshake that failed on a
// certificate: this side refused the other's (wrong CA, name, expiry),
// or the other side's alert refused this one's. Found in review (the
// operator's procedures, TLS): a dialer's refusals were only counted, so
// a replica whose certificate did not name its host was cut off with no
// line on the side that refused it. A network error is no refusal.
func isTLSRefusal(err error) bool {
	var cv *tls.CertificateVerificationError
	var op *net.OpError
	return errors.As(err, &cv) || errors.As(err, &op) && op.Op == "remote error"
}

// acceptLoop accepts inbound connections until Close.
func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			// A transient error (out of file descriptors): wait a little.
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if !t.takeInboundSlot() {
			c.Close()
			if t.ctx.Err() != nil {
				return
			}
			continue
		}
		if !t.trackHandshaking(c) {
			<-t.inboundSlots
			return
		}
		t.wg.Add(1)
		go t.serveInbound(c)
	}
}

// takeInboundSlot takes a slot for a new inbound connection. When every
// slot is taken it closes the oldest connection still in its handshake and
// waits for that one's goroutine to give its slot back (at once: its
// reads and writes fail when closed), so that connections stalling their
// handshake cannot keep a member out and the bound still holds. It
// reports false, for the new connection to be closed, when every slot
// holds an authenticated connection or the transport closes.
func (t *Transport) takeInboundSlot() bool {
	select {
	case t.inboundSlots <- struct{}{}:
		return true
	default:
	}
	t.stats.rejected.Add(1)
	if !t.closeOldestHandshake() {
		return false
	}
	select {
	case t.inboundSlots <- struct{}{}:
		return true
	case <-t.ctx.Done():
		return false
	}
}

// closeOldestHandshake closes the oldest inbound connection still in its
// handshake, if any. It leaves handshaking at once, so that setInbound
// cannot make it a peer's connection.
func (t *Transport) closeOldestHandshake() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.handshaking) == 0 {
		return false
	}
	oldest := t.handshaking[0]
	t.handshaking = slices.Delete(t.handshaking, 0, 1)
	oldest.Close()
	return true
}

// trackHandshaking is track for a new inbound connection, which also
// joins handshaking.
func (t *Transport) trackHandshaking(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.trackLocked(c) {
		return false
	}
	t.handshaking = append(t.handshaking, c)
	return true
}

// serveInbound authenticates one inbound connection and reads it until it
// fails or the transport closes.
func (t *Transport) serveInbound(raw net.Conn) {
	defer t.wg.Done()
	defer func() { <-t.inboundSlots }()
	defer t.untrack(raw)
	if !t.ready() {
		return // the peer dials again
	}
	raw.SetDeadline(time.Now().Add(t.cfg.Limits.HandshakeTimeout))
	c, err := t.wrapTLS(raw, paxos.None, "")
	if err != nil {
		// Closed on this side (the transport stopping, or a handshake
		// pushed out by newer ones): nobody refused anything. Or refused
		// by Retrust's check, which said so.
		if !t.closedHere(err) && !errors.Is(err, errRetrusted) {
			t.authFailed(AuthFailure{Remote: raw.RemoteAddr().String(), Err: err, Closed: closedByPeer(err)})
		}
		return
	}
	from, inc, err := acceptHandshake(c, t.cfg.Key, t.cfg.members(), t.cfg.Agreed, t.clusterID(), t.cfg.ID, t.isPeer)
	if err != nil {
		// As for TLS: a handshake this side closed (Redial, pushed out,
		// the transport stopping) refused nothing.
		if errors.Is(err, errAuth) && !t.closedHere(err) {
			t.authFailed(AuthFailure{Remote: raw.RemoteAddr().String(), Err: err, Closed: errors.Is(err, errClosedMidHandshake)})
		}
		return
	}
	if err := t.admit(from, inc, time.Now()); err != nil {
		t.authFailed(AuthFailure{Remote: raw.RemoteAddr().String(), Err: err})
		return
	}
	raw.SetDeadline(time.Time{})
	if !t.setInbound(from, raw) {
		return
	}
	t.readLoop(c, raw, from)
}

// authFailed counts a failed handshake and tells OnAuthFailure.
func (t *Transport) authFailed(f AuthFailure) {
	if f.Closed {
		t.stats.handshakesClosed.Add(1)
	} else {
		t.stats.authFailures.Add(1)
	}
	if t.cfg.OnAuthFailure != nil {
		t.cfg.OnAuthFailure(f)
	}
}

// incarnations are the processes that dialed in as one peer lately: the
// incarnation of its current inbound connection, and when each one seen
// within the quiet window last completed a handshake.
type incarnations struct {
	current    uint64
	seen       map[uint64]time.Time
	conflicted bool
}

// incarnationsMax bounds the incarnations remembered per peer.
const incarnationsMax = 8

// admit checks that inc, just authenticated as peer from, is not one of
// two processes running as one replica. A restarted replica dials with a
// new incarnation and its old one never comes back; so an incarnation
// that dials again after another replaced it, within the quiet window
// (twice BackoffMax: how often a refused peer redials, at the most), is
// a second process with the replica's ID and key. Found in review (the
// operator's procedures): the two took turns as the peer, each with its
// own promises, so a quorum could count one acceptor's vote twice. From
// then on the peer is refused, its current connection closed, until only
// one incarnation has dialed for the quiet window.
func (t *Transport) admit(from paxos.ReplicaID, inc uint64, now time.Time) error {
	quiet := 2 * t.cfg.Limits.BackoffMax
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.incarnations[from]
	if st == nil {
		st = &incarnations{seen: map[uint64]time.Time{}}
		t.incarnations[from] = st
	}
	//detlint:maprange deletes only; the order is irrelevant
	for i, at := range st.seen {
		if now.Sub(at) > quiet {
			delete(st.seen, i)
		}
	}
	_, before := st.seen[inc]
	if before && inc != st.current {
		st.conflicted = true
	}
	if len(st.seen) >= incarnationsMax && !before {
		clear(st.seen)
	}
	st.seen[inc] = now
	if st.conflicted && len(st.seen) > 1 {
		if c := t.inbound[from]; c != nil {
			delete(t.inbound, from)
			c.Close()
		}
		return fmt.Errorf("transport: two processes run as replica %d (they dialed in turn, %d within %v): "+
			"it is refused until only one dials for %v; stop the one started by mistake (each replica needs its own replica_id)",
			from, len(st.seen), quiet, quiet)
	}
	st.conflicted = false
	st.current = inc
	return nil
}

// newIncarnation draws a transport's incarnation.
func newIncarnation() uint64 {
	n := newNonce()
	return binary.BigEndian.Uint64(n[:8])
}

func (t *Transport) isPeer(id paxos.ReplicaID) bool {
	_, ok := t.peers[id]
	return ok
}

// setInbound makes c, just authenticated, the inbound connection of from,
// closing an older one (the peer redialed; the old one is dead or about to
// be). It reports false if c was pushed out of its handshake meanwhile.
func (t *Transport) setInbound(from paxos.ReplicaID, c net.Conn) bool {
	t.mu.Lock()
	i := slices.Index(t.handshaking, c)
	if i < 0 {
		t.mu.Unlock()
		return false
	}
	t.handshaking = slices.Delete(t.handshaking, i, i+1)
	if tc := t.conns[c]; tc != nil {
		tc.Peer = from
	}
	old := t.inbound[from]
	t.inbound[from] = c
	t.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return true
}

// readLoop delivers the frames of an authenticated connection from peer
// from (c, read through; raw, as tracked) until the connection fails or
// is no longer from's current one.
func (t *Transport) readLoop(c, raw net.Conn, from paxos.ReplicaID) {
	fr := frameReader{r: bufio.NewReaderSize(c, 64<<10)}
	for {
		b, err := fr.next()
		if err != nil {
			if errors.Is(err, errOversized) {
				t.stats.oversized.Add(1)
			}
			return
		}
		m, err := paxos.DecodeMessage(b)
		if err != nil {
			t.stats.undecodable.Add(1)
			continue
		}
		if m.From != from || m.To != t.cfg.ID {
			t.stats.misaddressed.Add(1)
			continue
		}
		if !t.deliver(from, raw, m) {
			return
		}
	}
}

// deliver hands m, read from raw, to the handler, unless raw is no longer
// from's current inbound connection or the transport is closing; it
// reports whether raw should still be read. It holds from's deliverMu
// throughout, so that a newer connection's first message waits for the
// handler call in progress on the older one, and what the older one read
// but had not handed over yet is dropped: the peer sent it before
// anything on the newer connection, so handing it over later would
// reorder the peer's messages.
func (t *Transport) deliver(from paxos.ReplicaID, raw net.Conn, m paxos.Message) bool {
	p := t.peers[from]
	p.deliverMu.Lock()
	defer p.deliverMu.Unlock()
	if t.ctx.Err() != nil {
		return false
	}
	if !t.isCurrentInbound(from, raw) {
		t.stats.superseded.Add(1)
		return false
	}
	hoptrace.Mark(hoptrace.TransportReceived, hoptrace.Message(uint8(m.Type), uint64(m.From)))
	t.stats.received.Add(1)
	t.cfg.Handler(m)
	return true
}

func (t *Transport) isCurrentInbound(from paxos.ReplicaID, c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inbound[from] == c
}

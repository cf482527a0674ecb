package transport

import (
	"bufio"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"paxcron/internal/hoptrace"
	"paxcron/paxos"
)

// peer is one other member: the address it is dialed at and its send
// queue, and the lock that keeps its inbound messages in order.
type peer struct {
	id paxos.ReplicaID
	// wake is signalled when the queue becomes non-empty; redial when the
	// address changes. Both hold at most one pending signal.
	wake   chan struct{}
	redial chan struct{}
	// deliverMu is held while a message from this peer is handed to the
	// handler (see Transport.deliver). It is taken before Transport.mu,
	// never after.
	deliverMu sync.Mutex

	mu          sync.Mutex
	addr        string
	queue       [][]byte
	queuedBytes int
}

func newPeer(id paxos.ReplicaID, addr string) *peer {
	return &peer{id: id, addr: addr, wake: make(chan struct{}, 1), redial: make(chan struct{}, 1)}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// push appends frame f unless that would exceed a limit.
func (p *peer) push(f []byte, l Limits) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) >= l.QueueMessagesMax || p.queuedBytes+len(f) > l.QueueBytesMax {
		return false
	}
	p.queue = append(p.queue, f)
	p.queuedBytes += len(f)
	signal(p.wake)
	return true
}

// takeAll empties the queue and returns what it held, oldest first.
func (p *peer) takeAll() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	p.queue, p.queuedBytes = nil, 0
	return q
}

func (p *peer) getAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

func (p *peer) setAddr(addr string) {
	p.mu.Lock()
	changed := p.addr != addr
	p.addr = addr
	p.mu.Unlock()
	if changed {
		signal(p.redial)
	}
}

// runPeer keeps a connection to p and writes its queue to it, until Close.
func (t *Transport) runPeer(p *peer) {
	defer t.wg.Done()
	backoff := t.cfg.Limits.BackoffMin
	connected := false
	var reach unreachable
	for t.ctx.Err() == nil {
		select {
		case <-p.redial: // about to dial the newest address anyway
		default:
		}
		if p.getAddr() == "" {
			// Not known yet: membership will tell (SetPeerAddr). The queue
			// meanwhile fills up to its bounds and drops.
			select {
			case <-t.ctx.Done():
				return
			case <-p.redial:
				continue
			}
		}
		if !t.ready() {
			if !t.wait(p, t.cfg.Limits.BackoffMin) {
				return
			}
			continue
		}
		addr := p.getAddr()
		c, err := t.dial(p, addr)
		if err != nil {
			t.stats.dialFailures.Add(1)
			t.dialFailed(p, &reach, addr, err)
			if !t.wait(p, backoff) {
				return
			}
			backoff = min(2*backoff, t.cfg.Limits.BackoffMax)
			continue
		}
		t.reached(p, &reach, addr)
		backoff = t.cfg.Limits.BackoffMin
		if connected {
			t.stats.reconnects.Add(1)
		}
		connected = true
		t.pump(p, c)
		t.untrack(c.Conn)
	}
}

// unreachable is what Config.OnReachability was last told of a peer:
// runPeer's own, so that it says each change once, not each redial.
type unreachable struct {
	told        bool // the peer was said unreachable, at addr
	addr        string
	since       time.Time
	failedDials uint64
}

// dialFailed tells OnReachability that p became unreachable at addr, if
// err is the network's and it was not told so already. A refused
// handshake is not the network's (OnAuthFailure says why), but one that
// timed out is: the peer accepts connections and never answers (a hung
// or stopped process, or a port that swallows what is sent).
func (t *Transport) dialFailed(p *peer, u *unreachable, addr string, err error) {
	var netErr net.Error
	timedOut := errors.As(err, &netErr) && netErr.Timeout()
	if (isAuthErr(err) || isTLSRefusal(err)) && !timedOut || errors.Is(err, ErrClosed) || errors.Is(err, errRetrusted) || t.ctx.Err() != nil {
		return
	}
	u.failedDials++
	if u.told && u.addr == addr {
		return
	}
	if !u.told {
		u.since = time.Now()
	}
	u.told, u.addr = true, addr
	if t.cfg.OnReachability != nil {
		t.cfg.OnReachability(Reachability{Peer: p.id, Addr: addr, Err: err})
	}
}

// reached tells OnReachability that p is reached again at addr, if it
// was told it was not.
func (t *Transport) reached(p *peer, u *unreachable, addr string) {
	if !u.told {
		*u = unreachable{}
		return
	}
	r := Reachability{Peer: p.id, Addr: addr, Reachable: true, FailedDials: u.failedDials, Down: time.Since(u.since)}
	*u = unreachable{}
	if t.cfg.OnReachability != nil {
		t.cfg.OnReachability(r)
	}
}

// wait sleeps for a jittered backoff in [d/2, d); it returns early when
// p's address changes, and false when the transport closes. Jitter comes
// from math/rand/v2: it only spreads redials and decides nothing.
func (t *Transport) wait(p *peer, d time.Duration) bool {
	d = d/2 + rand.N(d/2+1)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.ctx.Done():
		return false
	case <-p.redial:
		signal(p.redial) // runPeer drains it before dialing
		return true
	case <-timer.C:
		return true
	}
}

// dial connects to p and runs TLS and the handshake. The returned
// connection is tracked.
func (t *Transport) dial(p *peer, addr string) (*wrapped, error) {
	d := net.Dialer{Timeout: t.cfg.Limits.DialTimeout}
	raw, err := d.DialContext(t.ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if !t.track(raw) {
		return nil, ErrClosed
	}
	raw.SetDeadline(time.Now().Add(t.cfg.Limits.HandshakeTimeout))
	c, err := t.wrapTLS(raw, p.id, addr)
	if err == nil {
		err = dialHandshake(c, t.cfg.keys(), t.cfg.members(), t.cfg.Agreed, t.clusterID(), t.cfg.ID, p.id, t.incarnation)
	}
	if err != nil {
		if (isAuthErr(err) || isTLSRefusal(err)) && !t.closedHere(err) {
			t.authFailed(AuthFailure{Dialing: true, Peer: p.id, Remote: addr, Err: err, Closed: errors.Is(err, errClosedMidHandshake)})
		}
		t.untrack(raw)
		return nil, err
	}
	raw.SetDeadline(time.Time{})
	return &wrapped{Conn: raw, rw: c}, nil
}

// wrapped reads and writes through rw (TLS, or raw itself) and closes the
// raw connection it was tracked as.
type wrapped struct {
	net.Conn
	rw net.Conn
}

func (w *wrapped) Read(b []byte) (int, error)  { return w.rw.Read(b) }
func (w *wrapped) Write(b []byte) (int, error) { return w.rw.Write(b) }

// pump writes p's queue to c until c fails, p's address changes or the
// transport closes. The acceptor never writes after the handshake, so a
// read that returns means the connection is gone: a watcher goroutine
// notices that at once rather than at the next write.
func (t *Transport) pump(p *peer, c net.Conn) {
	dead := make(chan struct{})
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer close(dead)
		var b [1]byte
		c.Read(b[:])
		c.Close()
	}()
	w := bufio.NewWriterSize(c, 64<<10)
	for {
		frames := p.takeAll()
		if len(frames) == 0 {
			select {
			case <-p.wake:
				continue
			case <-dead:
			case <-p.redial:
			case <-t.ctx.Done():
			}
			c.Close()
			<-dead
			return
		}
		if !t.write(c, w, frames) {
			c.Close()
			<-dead
			return
		}
	}
}

// write writes frames and flushes them within WriteTimeout.
func (t *Transport) write(c net.Conn, w *bufio.Writer, frames [][]byte) bool {
	c.SetWriteDeadline(time.Now().Add(t.cfg.Limits.WriteTimeout))
	for i, f := range frames {
		if _, err := w.Write(f); err != nil {
			t.stats.lost.Add(uint64(len(frames) - i))
			return false
		}
	}
	if err := w.Flush(); err != nil {
		// Some of the frames may have gone out; count the batch lost.
		t.stats.lost.Add(uint64(len(frames)))
		return false
	}
	hoptrace.Mark(hoptrace.TransportFlushed, uint32(len(frames)))
	t.stats.sent.Add(uint64(len(frames)))
	return true
}

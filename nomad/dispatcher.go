package nomad

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

// Caller makes the blocking calls a Dispatcher runs on its workers.
// *Client implements it against Nomad; a test or a simulator may supply
// another.
type Caller interface {
	Dispatch(ctx context.Context, l Launch) (child string, err error)
	Lookup(ctx context.Context, t state.Target, identity string) (child string, found bool, err error)
	Running(ctx context.Context, t state.Target, child string) (bool, error)
	Stop(ctx context.Context, t state.Target, child string) error
}

var _ Caller = (*Client)(nil)

// Call makes request r through c and returns its Result: OpDispatch is
// Dispatch, OpLookup Lookup, OpRunning Running (Result.Found: running),
// OpStop Stop. An unknown Op is a programmer error and panics.
func Call(ctx context.Context, c Caller, r launcher.Request) launcher.Result {
	res := launcher.Result{ID: r.ID}
	switch r.Op {
	case launcher.OpDispatch:
		res.ChildID, res.Err = c.Dispatch(ctx, LaunchOf(r))
	case launcher.OpLookup:
		res.ChildID, res.Found, res.Err = c.Lookup(ctx, r.Spec.Target(), r.Identity)
	case launcher.OpRunning:
		res.Found, res.Err = c.Running(ctx, r.Spec.Target(), r.ChildID)
	case launcher.OpStop:
		res.Err = c.Stop(ctx, r.Spec.Target(), r.ChildID)
	default:
		panic(fmt.Sprintf("nomad: request %d has unknown op %v", r.ID, r.Op))
	}
	return res
}

// DispatcherConfig configures a Dispatcher. Caller and Deliver are
// required; a zero limit takes its default.
type DispatcherConfig struct {
	// Caller makes the calls (a *Client).
	Caller Caller
	// Deliver hands a Result back, once per request. It is called from
	// any goroutine, Submit's own included, so it must not block and must
	// not call into the launcher: it queues the Result for the launcher's
	// thread, which passes it to Launcher.Done.
	Deliver func(launcher.Result)
	// Workers is how many calls are in flight at most, each from its
	// submission to its Result (a *Client sends at most 64 HTTP calls at
	// once; the rest wait for a slot or for their read-back). Default 256,
	// the launcher's default MaxInflight.
	Workers int
	// MaxPending bounds the requests submitted and not yet answered, in
	// flight or waiting for a worker; one more is answered at once, not
	// sent (launcher.ErrNotSent, ErrBusy). The launcher has at most its
	// MaxInflight (256 by default) calls outstanding in a term, and a
	// term it lost leaves its calls to end within RequestTimeout; the
	// default, four times the launcher's default MaxInflight, leaves room
	// for terms that overlap so. Set it to at least the launcher's
	// MaxInflight.
	MaxPending int
	// RequestTimeout bounds a request from Submit to its Result, the wait
	// for a worker and the retries included. No attempt starts after the
	// request's Deadline (its leader's lease end) or, as the launcher
	// renews that lease in the request's stint (Lease), after the lease's
	// end as renewed, and none after the first half of RequestTimeout;
	// one started before runs on for its answer within RequestTimeout. Keep it below the
	// launcher's MaxCallLatency (10 s by default) by the time Nomad may
	// take to apply a call given up on: the launcher trusts a look-up
	// only once every dispatch before it is that old. Default 8 s.
	RequestTimeout time.Duration
	// Now is the launcher's clock, the one Request.Deadline is on.
	// Default time.Now.
	Now func() time.Time
}

// Dispatcher defaults.
const (
	DefaultWorkers    = launcher.DefaultMaxInflight
	DefaultMaxPending = 4 * launcher.DefaultMaxInflight
)

// Errors a Dispatcher answers with without calling Nomad, each wrapped
// with launcher.ErrNotSent, so that the launcher dispatches again without
// a lookup. ErrClosed also wraps the error of a call cut by Close, which
// may have been sent and is not marked so.
var (
	ErrDeadline = errors.New("nomad: the request's deadline passed before it was called")
	ErrClosed   = errors.New("nomad: the dispatcher is closed")
	ErrBusy     = errors.New("nomad: MaxPending requests are unanswered already")
)

// Dispatcher is the launcher's asynchronous Dispatcher over a Caller:
// Submit queues the request and returns at once, a pool of Workers makes
// the calls, and each Result goes back through Deliver. It follows one
// launcher's lease (launcher.LeaseFollower), so it must not be shared
// between launchers. Safe for concurrent use.
type Dispatcher struct {
	cfg    DispatcherConfig
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	// pending counts the requests queued and not yet answered; queue
	// holds up to MaxPending, so a send to it never blocks.
	pending int
	queue   chan queued

	leaseMu sync.Mutex
	lease   toldLease
}

// toldLease is the launcher's lease as it last told it (Lease): its
// stint, and its end on the local monotonic clock, zero when it holds
// none.
type toldLease struct {
	stint uint64
	until time.Time
}

type queued struct {
	r launcher.Request
	// On the local monotonic clock: leaseEnd is the request's Deadline,
	// the end of the lease it was made under, lastStart the latest an
	// attempt may start however that lease is renewed (half of
	// RequestTimeout after Submit, leaving the other half for its
	// answer), and the request ends by deadline (RequestTimeout after
	// Submit).
	leaseEnd, lastStart, deadline time.Time
}

var _ launcher.LeaseFollower = (*Dispatcher)(nil)

// NewDispatcher starts a Dispatcher's workers. Close stops them.
func NewDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	switch {
	case cfg.Caller == nil || cfg.Deliver == nil:
		return nil, fmt.Errorf("%w: DispatcherConfig needs a Caller and a Deliver", ErrConfig)
	case cfg.Workers < 0 || cfg.MaxPending < 0 || cfg.RequestTimeout < 0:
		return nil, fmt.Errorf("%w: DispatcherConfig has a negative limit", ErrConfig)
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Dispatcher{cfg: cfg, queue: make(chan queued, cfg.MaxPending)}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.wg.Add(cfg.Workers)
	for range cfg.Workers {
		go d.work()
	}
	return d, nil
}

// Submit queues r and returns at once. A request whose Deadline has
// passed, one submitted after Close, and one beyond MaxPending are
// answered at once (through Deliver, from this goroutine) with an error
// wrapping launcher.ErrNotSent, and no call.
func (d *Dispatcher) Submit(r launcher.Request) {
	if r.Op < launcher.OpDispatch || r.Op > launcher.OpStop {
		panic(fmt.Sprintf("nomad: Submit of request %d with unknown op %v", r.ID, r.Op))
	}
	left := r.Deadline.Sub(d.cfg.Now())
	if left <= 0 {
		d.cfg.Deliver(launcher.Result{ID: r.ID, Err: fmt.Errorf("%w: %w (%v ago)", launcher.ErrNotSent, ErrDeadline, -left)})
		return
	}
	now := time.Now()
	q := queued{r: r, leaseEnd: now.Add(min(left, d.cfg.RequestTimeout)),
		lastStart: now.Add(d.cfg.RequestTimeout / 2), deadline: now.Add(d.cfg.RequestTimeout)}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.cfg.Deliver(launcher.Result{ID: r.ID, Err: notSent(ErrClosed)})
		return
	}
	if d.pending == d.cfg.MaxPending {
		// Terms that overlapped while Nomad hung: the calls of the ones
		// lost run on for their answers within RequestTimeout.
		d.mu.Unlock()
		d.cfg.Deliver(launcher.Result{ID: r.ID, Err: fmt.Errorf("%w: %w (%d)", launcher.ErrNotSent, ErrBusy, d.cfg.MaxPending)})
		return
	}
	d.pending++
	d.queue <- q // never blocks: pending <= MaxPending, the queue's capacity
	d.mu.Unlock()
}

func (d *Dispatcher) work() {
	defer d.wg.Done()
	for q := range d.queue {
		res := d.run(q)
		// Counted out before the launcher can hear of it: a request it
		// submits on hearing this one's Result finds the room.
		d.mu.Lock()
		d.pending--
		d.mu.Unlock()
		d.cfg.Deliver(res)
	}
}

// run makes q's call within its deadline.
func (d *Dispatcher) run(q queued) launcher.Result {
	if d.ctx.Err() != nil {
		return launcher.Result{ID: q.r.ID, Err: notSent(ErrClosed)}
	}
	if late := time.Since(d.startBy(q)); late >= 0 {
		return launcher.Result{ID: q.r.ID, Err: fmt.Errorf("%w: %w (waited for a worker until %v past it)", launcher.ErrNotSent, ErrDeadline, late)}
	}
	ctx, cancel := context.WithDeadline(d.ctx, q.deadline)
	defer cancel()
	ctx = withStartBy(ctx, func() time.Time { return d.startBy(q) })
	res := Call(ctx, d.cfg.Caller, q.r)
	if res.Err != nil && d.ctx.Err() != nil && !Permanent(res.Err) {
		res.Err = fmt.Errorf("%w: %w", ErrClosed, res.Err)
	}
	return res
}

// Lease is told by the launcher, from its Step, of the lease its calls
// are made under: until (on the launcher's clock, Now) in stint, or none
// (a zero until) once the stint is over or the lease lapsed.
func (d *Dispatcher) Lease(stint uint64, until time.Time) {
	var local time.Time
	if !until.IsZero() {
		local = time.Now().Add(until.Sub(d.cfg.Now()))
	}
	d.leaseMu.Lock()
	d.lease = toldLease{stint: stint, until: local}
	d.leaseMu.Unlock()
}

// startBy is the time, as of now, at and after which no attempt of q's
// may start: its lease's end as renewed since in its stint, up to
// lastStart; never before the lease end it was made under, unless its
// stint is over or its lease lapsed (zero: at once). A launcher that
// never told its lease leaves every request its own lease end.
func (d *Dispatcher) startBy(q queued) time.Time {
	d.leaseMu.Lock()
	l := d.lease
	d.leaseMu.Unlock()
	switch {
	case l.stint == 0 || l.stint < q.r.Stint:
		return q.leaseEnd
	case l.stint > q.r.Stint || l.until.IsZero():
		return time.Time{}
	case l.until.After(q.lastStart):
		return later(q.leaseEnd, q.lastStart)
	}
	return later(q.leaseEnd, l.until)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// notSent marks err as a request's that made no call.
func notSent(err error) error { return fmt.Errorf("%w: %w", launcher.ErrNotSent, err) }

// Close cancels the calls in flight, answers the queued requests with
// ErrClosed, and returns once every worker has stopped; each request
// submitted before it has then been answered once. Later Submits are
// answered with ErrClosed. Calling it again waits likewise.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.queue)
	}
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
}

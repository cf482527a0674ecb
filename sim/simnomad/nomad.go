package simnomad

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"paxcron/cron/launcher"
	"paxcron/sim/simclock"
)

// Nomad's defaults for an empty namespace and region.
const (
	DefaultNamespace = "default"
	DefaultRegion    = "global"
)

var (
	// ErrUnavailable is what every call gets while Nomad is down. It does
	// not wrap launcher.ErrRejected: the caller cannot tell that the call
	// had no effect.
	ErrUnavailable = errors.New("simnomad: dial tcp: connect: connection refused")
	// ErrDeadlineExceeded wraps context.DeadlineExceeded, as an HTTP
	// client's error does when its context expires, and is wrapped by
	// every deadline error a call gets.
	ErrDeadlineExceeded = fmt.Errorf("simnomad: %w", context.DeadlineExceeded)

	errLateSubmit = fmt.Errorf("%w: %w: the deadline passed before the call was made", launcher.ErrNotSent, ErrDeadlineExceeded)
	errNoReply    = fmt.Errorf("%w: no reply by the deadline", ErrDeadlineExceeded)
	errNotSent    = fmt.Errorf("%w: %w: no connection came free before the deadline", launcher.ErrNotSent, ErrDeadlineExceeded)
)

// Child is one dispatched child job, as the checkers see it. Times are true
// times (on the scheduler's clock).
type Child struct {
	ID        string
	Token     string
	Namespace string
	Region    string
	Parent    string
	CreatedAt time.Duration
	// FinishedAt is when the child finished, or, while it runs, when it
	// will finish on its own unless it is stopped first.
	FinishedAt time.Duration
	// Stopped says a stop call ended it before it finished on its own.
	Stopped bool
	// Collected says garbage collection removed it, at CollectedAt; from
	// then on its token dispatches a new child.
	Collected   bool
	CollectedAt time.Duration
}

// Duplicate is one idempotency token, in one scope, that got more than one
// child over the run.
type Duplicate struct {
	Namespace string
	Region    string
	Parent    string
	Token     string
	// ChildIDs are its children, in creation order.
	ChildIDs []string
}

func (d Duplicate) String() string {
	return fmt.Sprintf("%s/%s/%s token %q: %d children %v", d.Namespace, d.Region, d.Parent, d.Token, len(d.ChildIDs), d.ChildIDs)
}

// Stats counts what Nomad did. Once no call is pending, the calls made
// (the four Calls counters) equal Results: every call gets one result.
type Stats struct {
	CallsDispatch uint64
	CallsLookup   uint64
	CallsRunning  uint64
	CallsStop     uint64
	// Results counts results delivered to callers.
	Results uint64
	// Created counts dispatches that created a child; Deduplicated those
	// answered with the live child their token already had; Rejected
	// those refused because the parent is not registered.
	Created      uint64
	Deduplicated uint64
	Rejected     uint64
	// FailedDown counts calls that reached Nomad while it was down.
	FailedDown uint64
	// RepliesLost counts calls that took effect (or failed at Nomad) and
	// whose reply never arrived.
	RepliesLost uint64
	// LateSubmits counts calls made at or after their deadline.
	LateSubmits uint64
	// NotSent counts calls that never reached Nomad and were answered so
	// at their deadline (NotSentProbability).
	NotSent uint64
	// TimedOut counts calls whose reply was lost or came at or after the
	// deadline, and which got a deadline error at the deadline instead.
	TimedOut uint64
	// Collected counts children removed by garbage collection, periodic
	// or forced.
	Collected uint64
}

// scope is where an idempotency token means something: one parent job in
// one namespace and region.
type scope struct{ namespace, region, parent string }

type tokenKey struct {
	scope
	token string
}

// idKey finds a child by ID. Nomad's job IDs are per namespace and
// region, so a call naming the child in another scope does not find it.
type idKey struct{ namespace, region, id string }

// call is one call in flight, until its caller has its result.
type call struct {
	req      launcher.Request
	deadline time.Duration
	timer    simclock.Timer
	reply    func(launcher.Result)
	done     bool
}

// Nomad is a simulated Nomad cluster answering the launcher's calls. It is
// not safe for concurrent use; the simulator drives it from one goroutine.
type Nomad struct {
	sched *simclock.Scheduler
	rand  *rand.Rand
	cfg   Config
	down  bool

	// The maps are only looked up, never ranged over, so their order cannot
	// leak into the run.
	registered map[scope]bool
	stopped    map[scope]bool
	// runs bounds how long the children of a parent run, where it is not
	// the configured RunMin-RunMax.
	runs    map[scope][2]time.Duration
	byToken map[tokenKey]int
	byID    map[idKey]int
	// everID finds every child ever made by its ID, which is unique over
	// the run: the checkers' look-up, collected children included.
	everID map[string]int

	// children is every child ever created, in creation order; live holds
	// the indices of those not collected yet, in the same order.
	children []Child
	live     []int

	// Garbage collection is lazy: each entry point first removes every
	// child whose time has come, with the time it came, so when the sweep
	// runs changes nothing anyone can observe. gcFrom is when GCThreshold
	// last changed (a child cannot have been collected under a threshold
	// before it was set); nextGC is the earliest a live child can be
	// collected, so that most sweeps cost nothing.
	gcFrom time.Duration
	nextGC time.Duration

	pending int
	stats   Stats
}

// New returns a Nomad that answers on sched, with latencies, run times,
// lost replies and child IDs drawn from r. It starts up, with no parent
// jobs registered. Every argument is required.
func New(sched *simclock.Scheduler, r *rand.Rand, cfg Config) (*Nomad, error) {
	if sched == nil || r == nil {
		return nil, fmt.Errorf("%w: scheduler and rand are required", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Nomad{
		sched:      sched,
		rand:       r,
		cfg:        cfg,
		registered: make(map[scope]bool),
		stopped:    make(map[scope]bool),
		runs:       make(map[scope][2]time.Duration),
		byToken:    make(map[tokenKey]int),
		byID:       make(map[idKey]int),
		everID:     make(map[string]int),
		gcFrom:     sched.Now(),
		nextGC:     math.MaxInt64,
	}, nil
}

// Config returns the current configuration.
func (n *Nomad) Config() Config { return n.cfg }

// SetConfig changes the configuration from now on: calls made after it
// draw their latencies and fate from cfg, children created after it their
// run time, and a new GCThreshold applies to every child not yet collected,
// but never back before now.
func (n *Nomad) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	now := n.sched.Now()
	n.collect(now)
	if cfg.GCThreshold != n.cfg.GCThreshold {
		n.gcFrom = now
		n.nextGC = 0 // the next sweep recomputes it under the new threshold
	}
	n.cfg = cfg
	return nil
}

// SetUp brings Nomad up or down. Calls that reach it while it is down fail
// with ErrUnavailable and have no effect; children keep running, and
// finish, regardless.
func (n *Nomad) SetUp(up bool) { n.down = !up }

// Up reports whether Nomad is up.
func (n *Nomad) Up() bool { return !n.down }

// Register adds a parameterized parent job to a scope. An empty namespace
// means DefaultNamespace and an empty region DefaultRegion.
func (n *Nomad) Register(namespace, region, parent string) {
	n.registered[scopeOf(namespace, region, parent)] = true
}

// SetRunTime makes the children of a parent job run between runMin and
// runMax, in place of the configured RunMin and RunMax: a parent whose
// children run long, as a report does.
func (n *Nomad) SetRunTime(namespace, region, parent string, runMin, runMax time.Duration) error {
	if !span(runMin, runMax) {
		return fmt.Errorf("%w: need 0 <= run min (%v) <= run max (%v)", ErrConfig, runMin, runMax)
	}
	n.runs[scopeOf(namespace, region, parent)] = [2]time.Duration{runMin, runMax}
	return nil
}

// StopParent stops a registered parent job, as `nomad job stop` does
// without purging: it stays, its children stay, but a dispatch of it is
// refused, even one whose token already has a child. Nomad checks the
// parent before the token, and answers such a dispatch with a 500 whatever
// the token; this fake answers what a client that looks the token up on a
// refusal (nomad.Client) reports: the token's child if it has one, else
// the refusal.
func (n *Nomad) StopParent(namespace, region, parent string) {
	n.stopped[scopeOf(namespace, region, parent)] = true
}

// Stats returns the counters so far.
func (n *Nomad) Stats() Stats {
	n.collect(n.sched.Now())
	return n.stats
}

// Pending returns the number of calls whose caller has no result yet.
func (n *Nomad) Pending() int { return n.pending }

// Call makes one call to Nomad: req.Op with req.Identity as the token,
// req.Spec's NomadJob, Namespace and Region as parent and scope, and
// req.ChildID for OpRunning and OpStop. deadline is in true time.
//
// The request reaches Nomad after the request latency and takes effect
// then, even past the deadline, for the server does not know that the
// client gave up. reply is called exactly once, from a scheduled event and
// never inside Call, with a Result whose ID is req.ID: the reply if it
// arrives before the deadline, else a deadline error at the deadline. A
// call made at or after its deadline gets a deadline error at once and has
// no effect; so does one that is never sent (NotSentProbability), at its
// deadline. Both errors wrap launcher.ErrNotSent.
//
// A nil reply or an unknown Op is a programmer error and panics.
func (n *Nomad) Call(req launcher.Request, deadline time.Duration, reply func(launcher.Result)) {
	if reply == nil {
		panic("simnomad: Call with a nil reply func")
	}
	switch req.Op {
	case launcher.OpDispatch:
		n.stats.CallsDispatch++
	case launcher.OpLookup:
		n.stats.CallsLookup++
	case launcher.OpRunning:
		n.stats.CallsRunning++
	case launcher.OpStop:
		n.stats.CallsStop++
	default:
		panic(fmt.Sprintf("simnomad: Call with unknown op %v", req.Op))
	}
	c := &call{req: req, deadline: deadline, reply: reply}
	n.pending++
	now := n.sched.Now()
	if now >= deadline {
		n.stats.LateSubmits++
		n.sched.At(now, func() { n.deliver(c, launcher.Result{Err: errLateSubmit}) })
		return
	}
	if n.chance(n.cfg.NotSentProbability) {
		n.stats.NotSent++
		n.sched.At(deadline, func() { n.deliver(c, launcher.Result{Err: errNotSent}) })
		return
	}
	c.timer = n.sched.At(deadline, func() {
		n.stats.TimedOut++
		n.deliver(c, launcher.Result{Err: errNoReply})
	})
	n.sched.At(addSat(now, n.draw(n.cfg.RequestLatencyMin, n.cfg.RequestLatencyMax)), func() { n.arrive(c) })
}

// arrive is the request reaching Nomad: it takes effect, and its reply
// sets out, unless lost.
func (n *Nomad) arrive(c *call) {
	res := n.apply(c.req)
	if n.chance(n.cfg.ReplyLossProbability) {
		n.stats.RepliesLost++
		return
	}
	at := addSat(n.sched.Now(), n.draw(n.cfg.ReplyLatencyMin, n.cfg.ReplyLatencyMax))
	if at >= c.deadline {
		// The deadline timer answers; a reply then would be a second one.
		return
	}
	n.sched.At(at, func() {
		c.timer.Cancel()
		n.deliver(c, res)
	})
}

func (n *Nomad) deliver(c *call, res launcher.Result) {
	if c.done {
		panic(fmt.Sprintf("simnomad: second result for call %d", c.req.ID))
	}
	c.done = true
	n.pending--
	n.stats.Results++
	res.ID = c.req.ID
	c.reply(res)
}

// apply performs req at Nomad now and returns its reply.
func (n *Nomad) apply(req launcher.Request) launcher.Result {
	now := n.sched.Now()
	n.collect(now)
	if n.down {
		n.stats.FailedDown++
		return launcher.Result{Err: ErrUnavailable}
	}
	spec := req.Spec
	switch req.Op {
	case launcher.OpDispatch:
		sc := scopeOf(spec.Namespace, spec.Region, spec.NomadJob)
		if !n.registered[sc] {
			n.stats.Rejected++
			return launcher.Result{Err: fmt.Errorf("%w: parameterized job %q not found in namespace %q, region %q",
				launcher.ErrRejected, sc.parent, sc.namespace, sc.region)}
		}
		if i, ok := n.byToken[tokenKey{sc, req.Identity}]; ok {
			n.stats.Deduplicated++
			return launcher.Result{ChildID: n.children[i].ID}
		}
		if n.stopped[sc] {
			n.stats.Rejected++
			return launcher.Result{Err: fmt.Errorf("%w: specified job %q is stopped", launcher.ErrRejected, sc.parent)}
		}
		return launcher.Result{ChildID: n.create(sc, req.Identity, now)}
	case launcher.OpLookup:
		// Listing an unknown parent's children finds none; it is no error.
		sc := scopeOf(spec.Namespace, spec.Region, spec.NomadJob)
		if i, ok := n.byToken[tokenKey{sc, req.Identity}]; ok {
			return launcher.Result{Found: true, ChildID: n.children[i].ID}
		}
		return launcher.Result{}
	case launcher.OpRunning:
		c := n.liveChild(spec.Namespace, spec.Region, req.ChildID)
		return launcher.Result{Found: c != nil && c.FinishedAt > now}
	case launcher.OpStop:
		if c := n.liveChild(spec.Namespace, spec.Region, req.ChildID); c != nil && c.FinishedAt > now {
			c.FinishedAt = now
			c.Stopped = true
			n.nextGC = min(n.nextGC, n.gcAt(c))
		}
		return launcher.Result{}
	}
	panic(fmt.Sprintf("simnomad: unknown op %v", req.Op))
}

// create dispatches a new child of sc with token and returns its ID.
func (n *Nomad) create(sc scope, token string, now time.Duration) string {
	unix := n.cfg.Epoch.Add(now).Unix()
	var id string
	for {
		// An empty token is no token: Nomad then names the child without
		// it, and never deduplicates.
		if token == "" {
			id = fmt.Sprintf("%s/dispatch-%d-%08x", sc.parent, unix, n.rand.Uint32())
		} else {
			id = fmt.Sprintf("%s/dispatch-%s-%d-%08x", sc.parent, token, unix, n.rand.Uint32())
		}
		// Redraw the rare collision, so that an ID names one child in
		// the whole record.
		if _, taken := n.everID[id]; !taken {
			break
		}
	}
	runMin, runMax := n.cfg.RunMin, n.cfg.RunMax
	if r, ok := n.runs[sc]; ok {
		runMin, runMax = r[0], r[1]
	}
	i := len(n.children)
	n.children = append(n.children, Child{
		ID:         id,
		Token:      token,
		Namespace:  sc.namespace,
		Region:     sc.region,
		Parent:     sc.parent,
		CreatedAt:  now,
		FinishedAt: addSat(now, n.draw(runMin, runMax)),
	})
	n.live = append(n.live, i)
	if token != "" {
		n.byToken[tokenKey{sc, token}] = i
	}
	n.byID[idKey{sc.namespace, sc.region, id}] = i
	n.everID[id] = i
	n.nextGC = min(n.nextGC, n.gcAt(&n.children[i]))
	n.stats.Created++
	return id
}

// liveChild returns the child not yet collected with id in the scope, or
// nil.
func (n *Nomad) liveChild(namespace, region, id string) *Child {
	sc := scopeOf(namespace, region, "")
	if i, ok := n.byID[idKey{sc.namespace, sc.region, id}]; ok {
		return &n.children[i]
	}
	return nil
}

// gcAt is when garbage collection removes c under the current threshold.
func (n *Nomad) gcAt(c *Child) time.Duration {
	return max(addSat(c.FinishedAt, n.cfg.GCThreshold), n.gcFrom)
}

// collect removes every child whose collection time is at or before now.
func (n *Nomad) collect(now time.Duration) {
	if now < n.nextGC {
		return
	}
	next := time.Duration(math.MaxInt64)
	keep := n.live[:0]
	for _, i := range n.live {
		c := &n.children[i]
		if at := n.gcAt(c); at <= now {
			n.remove(i, at)
		} else {
			keep = append(keep, i)
			next = min(next, at)
		}
	}
	n.live = keep
	n.nextGC = next
}

// ForceGC collects every finished child now, as `nomad system gc` does,
// whether Nomad is up or not, and returns how many it collected.
func (n *Nomad) ForceGC() int {
	now := n.sched.Now()
	n.collect(now)
	removed := 0
	keep := n.live[:0]
	for _, i := range n.live {
		if n.children[i].FinishedAt <= now {
			n.remove(i, now)
			removed++
		} else {
			keep = append(keep, i)
		}
	}
	n.live = keep
	return removed
}

// remove collects child i at time at; the caller takes it out of live.
func (n *Nomad) remove(i int, at time.Duration) {
	c := &n.children[i]
	c.Collected = true
	c.CollectedAt = at
	if c.Token != "" {
		delete(n.byToken, tokenKey{scope{c.Namespace, c.Region, c.Parent}, c.Token})
	}
	delete(n.byID, idKey{c.Namespace, c.Region, c.ID})
	n.stats.Collected++
}

// Children returns every child ever created, collected or not, in creation
// order.
func (n *Nomad) Children() []Child {
	n.collect(n.sched.Now())
	out := make([]Child, len(n.children))
	copy(out, n.children)
	return out
}

// ChildByToken returns the child not yet collected that token dispatched
// in the scope, as a lookup would find it now.
func (n *Nomad) ChildByToken(namespace, region, parent, token string) (Child, bool) {
	n.collect(n.sched.Now())
	if i, ok := n.byToken[tokenKey{scopeOf(namespace, region, parent), token}]; ok {
		return n.children[i], true
	}
	return Child{}, false
}

// ChildByID returns the child with id, collected or not, as the checkers
// see it (Children's record of it now).
func (n *Nomad) ChildByID(id string) (Child, bool) {
	n.collect(n.sched.Now())
	if i, ok := n.everID[id]; ok {
		return n.children[i], true
	}
	return Child{}, false
}

// Refuses reports whether a dispatch of parent in the scope is refused
// whatever its token: the parent is not registered, or is stopped (a
// stopped parent's token that has a child still answers with it).
func (n *Nomad) Refuses(namespace, region, parent string) bool {
	sc := scopeOf(namespace, region, parent)
	return !n.registered[sc] || n.stopped[sc]
}

// Duplicates returns every token that got more than one child in one
// scope over the whole run, in the order of their first child. Children
// dispatched without a token count as one token, "".
func (n *Nomad) Duplicates() []Duplicate {
	group := make(map[tokenKey]int) // index in all
	var all []Duplicate
	for _, c := range n.children {
		k := tokenKey{scope{c.Namespace, c.Region, c.Parent}, c.Token}
		g, ok := group[k]
		if !ok {
			g = len(all)
			group[k] = g
			all = append(all, Duplicate{Namespace: c.Namespace, Region: c.Region, Parent: c.Parent, Token: c.Token})
		}
		all[g].ChildIDs = append(all[g].ChildIDs, c.ID)
	}
	var dups []Duplicate
	for _, d := range all {
		if len(d.ChildIDs) > 1 {
			dups = append(dups, d)
		}
	}
	return dups
}

// draw returns a duration uniform in [lo, hi]. It draws nothing when the
// range is a single value, so a fixed setting spends no randomness.
func (n *Nomad) draw(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(n.rand.Uint64N(uint64(hi-lo)+1))
}

// addSat adds two non-negative durations, saturating instead of wrapping
// so that a huge setting means "never" rather than the past.
func addSat(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// chance draws true with probability p. It draws nothing when p is zero.
func (n *Nomad) chance(p float64) bool {
	return p > 0 && n.rand.Float64() < p
}

func scopeOf(namespace, region, parent string) scope {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if region == "" {
		region = DefaultRegion
	}
	return scope{namespace, region, parent}
}

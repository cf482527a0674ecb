package launcher

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"paxcron/cron/scheduler"
	"paxcron/cron/state"
	"paxcron/internal/mapshrink"
	"paxcron/paxos"
)

// Config configures a Launcher. Machine, Propose, Dispatcher and
// NewClusterID are required; a zero limit takes its default.
type Config struct {
	// Machine is the replica's cron state. The Launcher applies the log
	// to it (the Launcher is the replica's StateMachine) and reads it.
	Machine *state.Machine
	// Propose encodes and proposes a command to the local paxos node. An
	// error (not leader, busy) is not fatal: the launcher tries again.
	Propose func(state.Command) error
	// Dispatcher makes the calls to Nomad.
	Dispatcher Dispatcher
	// MemoryHorizon is how long Nomad is sure to remember a dispatch's
	// token: its job garbage-collection threshold (4 h by default). An
	// open launch older than that, minus ClockSkew, is never dispatched
	// again: Nomad may have forgotten the child it made.
	MemoryHorizon time.Duration
	// ClockSkew bounds how far two replicas' clocks may disagree; the
	// horizon rule keeps that margin. Default 30 s.
	ClockSkew time.Duration
	// MaxInflight bounds the calls the launcher has handed to its
	// Dispatcher and not had answered. Default 256: more than a Dispatcher
	// over nomad.Client sends at once (64), so that a call waiting for its
	// read-back does not keep the next one from being sent.
	MaxInflight int
	// MaxStartsPerStep bounds the launches proposed per Step: a herd is
	// taken in batches. Default 1024.
	MaxStartsPerStep int
	// BuildStep bounds the work per Step of building the schedule heap on
	// taking over: jobs read from the state, then sift-downs. A million
	// jobs built in one Step held the replica's loop half a second of a
	// one-second lease (issue 6); in steps the loop keeps answering its
	// peers, and no launch starts until the heap is built. Default 65,536.
	BuildStep int
	// MapShrinkFloor is the size the leader's per-job and per-launch maps
	// and its heap must have reached before they are rebuilt once far
	// below it (mapshrink). 0 is mapshrink.Floor; the simulator's few
	// jobs need a small one to be rebuilt at all.
	MapShrinkFloor int
	// RetryAfter is the wait before a failed call is retried; it doubles
	// per attempt up to 32 times its value. Default 1 s.
	RetryAfter time.Duration
	// ProposalTimeout is how long a proposal may take to be applied
	// before it is proposed again. Default 10 s.
	ProposalTimeout time.Duration
	// MaxCallLatency bounds how long after it was sent a call can still
	// take effect in Nomad (the HTTP client's timeout plus Nomad's own
	// processing): a lookup that finds no child proves none will appear
	// only once the dispatches before it are that old. A new leader
	// therefore waits this long before looking up the launches its
	// predecessor left open, and a dispatch whose answer was lost is looked
	// up this long after it was sent. Default 10 s.
	MaxCallLatency time.Duration
	// NewClusterID draws a cluster ID, never the zero one, from the
	// caller's randomness (crypto/rand in the server, the seed in the
	// simulator): a leader that finds its state unnamed proposes one
	// (NameCluster). Two clusters must never draw the same.
	NewClusterID func() state.ClusterID
	// Applied, when set, hears every command applied to the state, on
	// every replica, with the state's verdict (nil, or why it was refused
	// or ignored): the launch log line, and the simulator's checkers. It
	// must not call back into the Launcher.
	Applied func(slot uint64, c state.Command, err error)
}

// Defaults.
const (
	DefaultClockSkew        = 30 * time.Second
	DefaultMaxInflight      = 256
	DefaultMaxStartsPerStep = 1024
	DefaultBuildStep        = 1 << 16
	DefaultRetryAfter       = time.Second
	DefaultProposalTimeout  = 10 * time.Second
	DefaultMaxCallLatency   = 10 * time.Second
)

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("launcher: invalid config")

func (c *Config) validate() error {
	switch {
	case c.Machine == nil || c.Propose == nil || c.Dispatcher == nil || c.NewClusterID == nil:
		return fmt.Errorf("%w: Machine, Propose, Dispatcher and NewClusterID are required", ErrConfig)
	case c.MemoryHorizon <= 0:
		return fmt.Errorf("%w: MemoryHorizon must be positive (Nomad's job GC threshold)", ErrConfig)
	case c.ClockSkew < 0 || c.MaxInflight < 0 || c.MaxStartsPerStep < 0 || c.BuildStep < 0 || c.RetryAfter < 0 || c.ProposalTimeout < 0 || c.MaxCallLatency < 0:
		return fmt.Errorf("%w: negative limit", ErrConfig)
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if c.ClockSkew >= c.MemoryHorizon {
		return fmt.Errorf("%w: ClockSkew %v leaves nothing of MemoryHorizon %v", ErrConfig, c.ClockSkew, c.MemoryHorizon)
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.MaxStartsPerStep == 0 {
		c.MaxStartsPerStep = DefaultMaxStartsPerStep
	}
	if c.BuildStep == 0 {
		c.BuildStep = DefaultBuildStep
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.ProposalTimeout == 0 {
		c.ProposalTimeout = DefaultProposalTimeout
	}
	if c.MaxCallLatency == 0 {
		c.MaxCallLatency = DefaultMaxCallLatency
	}
	return nil
}

// Leadership is what the launcher needs to know of its replica's role.
type Leadership struct {
	// Leader: the local paxos node leads, in ballot Term.
	Leader bool
	Term   paxos.Ballot
	// CaughtUp: the replica has applied every command chosen before its
	// leadership began (paxos.Status.CaughtUpAt).
	CaughtUp bool
	// LeaseUntil is when the leader's lease ends, on the launcher's clock;
	// zero or past when it holds none.
	LeaseUntil time.Time
}

// Serves reports whether a replica with this leadership may answer from
// its own state as the cluster's at now (a linearizable read): it leads,
// has applied everything chosen before its term, and holds the lease.
func (l Leadership) Serves(now time.Time) bool {
	return l.Leader && l.CaughtUp && l.LeaseUntil.After(now)
}

// LeadershipOf derives the Leadership from the node's status. now is the
// launcher's clock and tick the node's tick interval. The lease is counted
// in ticks; one tick is taken off, since now may be up to a tick past the
// node's last tick.
func LeadershipOf(st paxos.Status, applied uint64, now time.Time, tick time.Duration) Leadership {
	if st.Role != paxos.Leader {
		return Leadership{}
	}
	l := Leadership{Leader: true, Term: st.Ballot, CaughtUp: applied >= st.CaughtUpAt}
	if st.LeaseUntil > st.Now+1 {
		l.LeaseUntil = now.Add(time.Duration(st.LeaseUntil-st.Now-1) * tick)
	}
	return l
}

// phase is where a task stands in concluding its launch.
type phase uint8

const (
	// phaseLookup: ask Nomad whether the launch's child exists.
	phaseLookup phase = iota + 1
	// phaseDecide: about to dispatch; check the job, window and policy.
	phaseDecide
	// phaseLookupUnknown: the forbid or replace policy looks up a launch
	// of the job concluded unknown, whose child may run unrecorded.
	phaseLookupUnknown
	// phaseRunning: the forbid policy asks whether a previous child runs.
	phaseRunning
	// phaseStop: the replace policy stops the last child.
	phaseStop
	// phaseDispatch: dispatch.
	phaseDispatch
	// phaseFinish: LaunchFinished proposed, waiting for it to be applied.
	phaseFinish
)

// task concludes one open launch on the leader.
type task struct {
	seq    uint64 // creation order, for a deterministic queue
	launch state.Launch
	phase  phase
	// done: the launch's LaunchFinished was applied; the task is gone.
	done bool
	// call is the request in flight, 0 if none.
	call uint64
	// notBefore delays a retry.
	notBefore time.Time
	attempts  int
	// dispatched: a dispatch was sent and may have happened; the task
	// then never concludes "failed" without a lookup saying no child.
	dispatched bool
	// mayHaveRun: an at-least-once launch dispatched again once Nomad may
	// have forgotten a child of it; only "dispatched" or "unknown" can
	// then conclude it truthfully.
	mayHaveRun bool
	sentAt     time.Time // when the last call was sent
	lastErr    string
	// previous lists the children the forbid or replace policy acts on,
	// each with where it was dispatched: the job's last child recorded
	// dispatched, then those found for its launches concluded unknown.
	// The calls are about previous[0].
	previous []state.Child
	// unknown lists the job's launches concluded unknown still to look
	// up (the calls are about unknown[0]), each in the target it went to
	// (the job may have moved since); policy is the job's policy when it
	// was decided.
	unknown []state.UnknownLaunch
	policy  state.Concurrency
	finish  state.LaunchFinished
	// proposedAt is when finish (phaseFinish) was last proposed; zero
	// when it still has to be.
	proposedAt time.Time
}

// start is a LaunchStarted proposed and not yet applied.
type start struct {
	at         time.Time // the launch's scheduled time
	proposedAt time.Time
	// finish, when set, concludes the launch as soon as it starts: it is
	// skipped (paused, or beyond its catch-up window).
	finish *state.LaunchFinished
	// fresh: nobody can have called Nomad for the launch (this leader
	// started it in its term), so its first call is a dispatch, not a
	// lookup. It lives and dies with the start: kept apart, by identity,
	// it outlived a start that was never applied (lost, then its job
	// deleted or rescheduled), one entry a time for the whole term.
	fresh bool
}

// Stats counts what a launcher did since it was created.
type Stats struct {
	Promotions   uint64
	Demotions    uint64
	Calls        [5]uint64 // by Op
	Retries      uint64
	StaleResults uint64 // results for calls of an earlier term, ignored
	Reproposals  uint64
	// HeldForRoom counts the steps in which a job came due and none
	// could start: the state held as many launches open of all jobs as
	// it keeps (state.Limits.OpenLaunches).
	HeldForRoom uint64
	// MapRebuilds counts the leader's maps rebuilt far below their peak
	// (shrinkMaps).
	MapRebuilds uint64
}

// Launcher is the leader's launch protocol. It is the replica's
// StateMachine: it applies the log to the cron state, and while its replica
// leads, holds the lease and has caught up, it launches the due jobs and
// concludes every open launch. It owns no goroutine or clock: the caller
// feeds it time (Step) and Nomad's answers (Done) on one thread, so the
// simulator runs it as the server does. Not safe for concurrent use.
type Launcher struct {
	cfg Config
	m   *state.Machine

	now  time.Time
	lead Leadership
	// leading is set once promoted in term; everything below is the
	// leader's and is dropped on demotion.
	leading bool
	term    paxos.Ballot
	// stint counts promotions: a request carries the one it was made in
	// (Request.Stint). published is the lease last told to a
	// LeaseFollower, so that a lapse is told once.
	stint     uint64
	published time.Time
	// takenOver is set once the term's Takeover is applied: until then
	// the leader proposes it and does nothing else.
	takenOver  bool
	takeoverAt time.Time // when it was last proposed; zero: to propose
	// termBefore is the state's term before the last Takeover applied.
	termBefore state.Term
	// mem outlives demotion: see memory.
	mem  *memory
	heap scheduler.Heap
	// build, while set, is the heap being built: heap is not used until
	// it is done.
	build *heapBuild
	// starting holds, by job, the LaunchStarted proposed and not applied.
	starting map[string]start
	// full holds the jobs whose start the state refused, having as many
	// launches open as it keeps (state.MaxOpenLaunches): their next start
	// waits until one of those concludes, or every step would write a
	// refused start to the log. (When all jobs' launches fill the state,
	// startDue waits instead.) Each holds the time it was marked.
	full map[string]time.Time
	// waited holds, by job, the span it last spent in full, until its
	// next start is decided; held the spans in which startDue held due
	// starts back while the state held its limit of open launches of all
	// jobs, newest last, at most maxHeldSpans, the last one still growing
	// while holding. A start found past its catch-up window says it
	// waited for room (ReasonNoRoom...) if one of them overlaps the
	// window: a leader was there, with no room.
	waited  map[string]span
	held    []span
	holding bool
	tasks   map[string]*task // by identity
	// queue holds tasks ready for a call, oldest first; delayed those
	// waiting for notBefore, by (notBefore, seq); finishing those whose
	// LaunchFinished is to be proposed. A task that concluded meanwhile is
	// marked done and skipped when its turn comes.
	queue     []*task
	delayed   []*task
	finishing []*task
	calls     map[uint64]*task // by request ID
	// peaks track the peaks of the maps above, for shrinkMaps.
	peaks   leaderPeaks
	nextReq uint64
	nextSeq uint64
	swept   time.Time
	// draining: start no launch (a graceful shutdown), only conclude
	// those under way.
	draining bool
	// naming is the cluster ID this launcher drew (NameCluster), zero
	// until it first needs one; namedAt and namedIn when and in which
	// term it last proposed it.
	naming  state.ClusterID
	namedAt time.Time
	namedIn paxos.Ballot

	stats Stats
}

// New returns a Launcher; it leads nothing until Step says so.
func New(cfg Config) (*Launcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Launcher{cfg: cfg, m: cfg.Machine}, nil
}

// Machine returns the cron state.
func (l *Launcher) Machine() *state.Machine { return l.m }

// Stats returns the launcher's counters.
func (l *Launcher) Stats() Stats { return l.stats }

// Leading reports whether the launcher acts as the leader's launcher.
func (l *Launcher) Leading() bool { return l.leading }

// Apply implements replica.StateMachine.
func (l *Launcher) Apply(slot uint64, data []byte) {
	c, err := state.Decode(data)
	if err != nil {
		l.m.Apply(slot, data) // counted and remembered as undecodable
		return
	}
	if _, ok := c.(state.Takeover); ok {
		l.termBefore = l.m.Term()
	}
	err = l.m.ApplyCommand(slot, c)
	if l.cfg.Applied != nil {
		l.cfg.Applied(slot, c, err)
	}
	if l.leading {
		l.applied(slot, c, err)
	}
}

// Snapshot implements replica.StateMachine.
func (l *Launcher) Snapshot() ([]byte, error) { return l.m.Snapshot() }

// FreezeSnapshot implements replica.Freezer: the cron state frozen now,
// encoded later (state.Machine.FreezeSnapshot).
func (l *Launcher) FreezeSnapshot() func() ([]byte, error) { return l.m.FreezeSnapshot() }

// Restore implements replica.StateMachine. A leader whose state is
// replaced starts over: it rebuilds its heap and looks every open launch
// up.
func (l *Launcher) Restore(data []byte) error {
	if err := l.m.Restore(data); err != nil {
		return err
	}
	l.stateReplaced()
	return nil
}

// stateReplaced starts the launcher over on a state that replaced its
// own: what it knew may not hold.
func (l *Launcher) stateReplaced() {
	l.demote()
	l.mem = nil
}

// DecodeSnapshot implements replica.Decoder: Restore in two steps, the
// decode (seconds at a million jobs) on any goroutine while this state
// goes on applying, the install on the replica's.
func (l *Launcher) DecodeSnapshot(data []byte) (install func(), err error) {
	restored, err := state.DecodeSnapshot(data)
	if err != nil {
		return nil, err
	}
	return func() {
		l.m.Install(restored)
		l.stateReplaced()
	}, nil
}

// Step advances the launcher to now with the replica's current role:
// promotion or demotion, starting the due launches and making the calls
// that are ready. Call it after every input to the replica (tick, message,
// write completion), and after Done.
func (l *Launcher) Step(now time.Time, lead Leadership) {
	l.NameCluster(now, lead)
	l.now, l.lead = now, lead
	if l.leading && (!lead.Leader || lead.Term != l.term) {
		l.demote()
	}
	if !l.leading && lead.Leader && lead.CaughtUp && l.leaseHeld() {
		l.promote()
	}
	l.publishLease()
	if !l.leading {
		return
	}
	if !l.takenOver {
		if l.takeoverAt.IsZero() || l.now.Sub(l.takeoverAt) >= l.cfg.ProposalTimeout {
			l.proposeTakeover()
		}
		return
	}
	if l.build != nil {
		l.stepBuild()
	}
	l.sweep()
	l.shrinkMaps()
	l.proposeFinishing()
	if !l.leaseHeld() {
		return
	}
	if !l.draining && l.build == nil {
		l.startDue()
	}
	l.pump()
}

// NameCluster proposes a cluster ID while the state holds none, this
// replica leads, and it has applied every command chosen before its term
// (so it missed no earlier leader's SetClusterID). The first applied
// names the cluster on every replica (state.SetClusterID); the drawn ID
// is proposed again, the same one, after ProposalTimeout and in each new
// term until one is. Step calls it; it needs neither the lease nor Nomad,
// and a driver that holds its launcher back from launching (internal/node's
// CanLaunch) calls it with the replica's true leadership, so that a
// cluster is named while it cannot launch yet.
func (l *Launcher) NameCluster(now time.Time, lead Leadership) {
	if !lead.Leader || !lead.CaughtUp || !l.m.ClusterID().IsZero() {
		return
	}
	if l.naming.IsZero() {
		l.naming = l.cfg.NewClusterID()
		if l.naming.IsZero() {
			panic("launcher: Config.NewClusterID drew the zero cluster ID")
		}
	}
	if l.namedIn == lead.Term && !l.namedAt.IsZero() && now.Sub(l.namedAt) < l.cfg.ProposalTimeout {
		return
	}
	if err := l.cfg.Propose(state.SetClusterID{ID: l.naming}); err != nil {
		l.namedAt = time.Time{}
		return
	}
	l.namedAt, l.namedIn = now, lead.Term
}

// SetDraining makes the leader start no new launch while d, for a
// graceful shutdown: the launches under way are still concluded, so that
// the next leader has nothing to look up. Launches that come due
// meanwhile are left to it.
func (l *Launcher) SetDraining(d bool) { l.draining = d }

// Drained reports whether this replica has no launch under way: it does
// not lead, or every start it proposed was applied and every launch it
// was concluding is recorded finished.
func (l *Launcher) Drained() bool {
	return !l.leading || (l.takenOver && len(l.starting) == 0 && len(l.tasks) == 0)
}

func (l *Launcher) leaseHeld() bool { return l.now.Before(l.lead.LeaseUntil) }

// NextWake returns when the launcher next has work that no input will
// prompt, as of the last Step: the first job due, or the first delayed
// call. ok is false when it has none (it does not lead). A driver that
// steps the launcher only on its replica's inputs (a tick every 50 ms)
// arms a timer for it, so that a launch is not up to a tick late.
func (l *Launcher) NextWake() (at time.Time, ok bool) {
	if !l.leading || !l.takenOver || !l.leaseHeld() {
		return time.Time{}, false
	}
	if l.build != nil {
		return l.now, true // the next step of the heap's build
	}
	// Past the state's room the due starts wait for a conclusion, whose
	// apply steps the launcher anyway: a wake for them would come at
	// once, again and again (found in review: every 2 ms while full).
	if e, has := l.heap.Peek(); has && !l.draining && len(l.starting) < l.cfg.MaxStartsPerStep && l.room() > 0 {
		at, ok = e.NextAt, true
	}
	if len(l.delayed) > 0 && (!ok || l.delayed[0].notBefore.Before(at)) {
		at, ok = l.delayed[0].notBefore, true
	}
	return at, ok
}

// promote takes over as the launcher of a new term: the schedule heap is
// built from the state, and every open launch is looked up in Nomad before
// anything else is done with it.
func (l *Launcher) promote() {
	l.leading, l.term, l.takenOver = true, l.lead.Term, false
	l.stint++
	l.stats.Promotions++
	l.starting = map[string]start{}
	l.full = map[string]time.Time{}
	l.waited, l.held, l.holding = map[string]span{}, nil, false
	l.tasks = map[string]*task{}
	l.calls = map[uint64]*task{}
	l.peaks = newLeaderPeaks(l.cfg.MapShrinkFloor)
	l.swept = l.now
	if l.m.Term() == l.stateTerm() {
		// Promoted again in a term whose Takeover is applied (the node
		// held the launcher back meanwhile, CanLaunch): the state would
		// refuse a second Takeover of the term as stale, and the leader
		// would wait for it for ever. Every earlier leader's conclusion
		// is applied or refused already, so it takes over now; what it
		// trusts of its memory of its calls is takeOver's to decide.
		l.takeOver()
		return
	}
	l.proposeTakeover()
}

// CheckSchedule verifies that a leader's heap holds every job the state
// schedules, at the state's time, but for the jobs whose start is in
// flight (out of the heap until it is applied), and nothing else: a job
// missing from it would never launch. O(jobs); the simulator calls it
// after every step of a leader whose heap is built.
func (l *Launcher) CheckSchedule() error {
	if !l.leading || !l.takenOver || l.build != nil {
		return nil
	}
	held := 0
	for _, name := range l.m.JobNames() {
		want, _ := l.m.NextAt(name)
		got, in := l.heap.NextAt(name)
		if in {
			held++
		}
		_, starting := l.starting[name]
		switch {
		case starting && in:
			return fmt.Errorf("launcher: job %q is in the heap (at %v) while its start is in flight", name, got)
		case l.isFull(name) && in:
			return fmt.Errorf("launcher: job %q is in the heap (at %v) with as many launches open as it may have", name, got)
		case starting || l.isFull(name):
		case want.IsZero() && in:
			return fmt.Errorf("launcher: job %q has no next launch but is in the heap at %v", name, got)
		case !want.IsZero() && (!in || !got.Equal(want)):
			return fmt.Errorf("launcher: job %q is due at %v but the heap has it at %v (held: %v)", name, want, got, in)
		}
	}
	if held != l.heap.Len() {
		return fmt.Errorf("launcher: the heap holds %d jobs, %d of them the state's", l.heap.Len(), held)
	}
	return nil
}

// heapBuild is the schedule heap built a BuildStep at a time: the jobs
// are read from the state's names as they were when the build began,
// and every job changed meanwhile is put right once it is done.
type heapBuild struct {
	names []string // state.Machine.JobNames at the start; names[next:] are still to read
	next  int
	b     *scheduler.Builder
	dirty map[string]bool // jobs changed since the build began
}

// stepBuild does a BuildStep of the heap's build, and when the build is
// done installs the heap and resyncs the jobs that changed meanwhile.
func (l *Launcher) stepBuild() {
	bd := l.build
	work := l.cfg.BuildStep
	for ; work > 0 && bd.next < len(bd.names); work-- {
		name := bd.names[bd.next]
		bd.next++
		if at, ok := l.m.NextAt(name); ok {
			bd.b.Add(scheduler.Entry{Name: name, NextAt: at})
		}
	}
	if work == 0 || !bd.b.Step(work) {
		return
	}
	l.heap, l.build = bd.b.Heap(), nil
	l.heap.SetShrinkFloor(l.cfg.MapShrinkFloor)
	dirty := make([]string, 0, len(bd.dirty))
	//detlint:maprange collected, then sorted
	for name := range bd.dirty {
		dirty = append(dirty, name)
	}
	slices.Sort(dirty)
	for _, name := range dirty {
		l.resync(name)
	}
}

// stateTerm is the launcher's term as the state's commands carry it.
func (l *Launcher) stateTerm() state.Term {
	return state.Term{Round: l.term.Round, Replica: uint64(l.term.Replica)}
}

// proposeTakeover proposes the term's Takeover; the sweep proposes it
// again until it is applied.
func (l *Launcher) proposeTakeover() {
	if err := l.cfg.Propose(state.Takeover{Term: l.stateTerm()}); err != nil {
		l.takeoverAt = time.Time{}
		return
	}
	l.takeoverAt = l.now
}

// memory is what a launcher knows of the dispatches it sent in a term,
// kept past its demotion. If it leads again and no other leader took
// over in between (the state's term before its new Takeover is its old
// one), nobody else can have called Nomad for those launches: a launch it
// never dispatched needs no lookup, and one whose child it learned needs
// no call at all. A leader re-elected after a stall then carries on at
// once, instead of waiting MaxCallLatency and looking every open launch
// up (measured: 70,000 lookups and 10 s lost in a midnight herd).
type memory struct {
	term  state.Term
	child map[string]string // identity -> the child Nomad reported
	// unsure holds, by identity, when a lookup will tell whether a child
	// exists: a dispatch of ours or of an earlier leader may have landed.
	unsure map[string]time.Time
	calls  map[uint64]string // dispatch request ID -> identity, in flight
	// peaks track the peaks of the maps above, for shrinkMaps.
	peaks memoryPeaks
}

// memoryPeaks are the peaks of a memory's maps.
type memoryPeaks struct{ child, unsure, calls mapshrink.Peak }

func (p *memoryPeaks) all() []*mapshrink.Peak {
	return []*mapshrink.Peak{&p.child, &p.unsure, &p.calls}
}

func newMemory(term state.Term, shrinkFloor int) *memory {
	m := &memory{term: term, child: map[string]string{}, unsure: map[string]time.Time{}, calls: map[uint64]string{}}
	setFloor(m.peaks.all(), shrinkFloor)
	return m
}

func (m *memory) forget(id string) {
	delete(m.unsure, id)
	delete(m.child, id)
}

// mayHaveLanded notes that a call for id may take effect until at.
func (m *memory) mayHaveLanded(id string, at time.Time) {
	if at.After(m.unsure[id]) {
		m.unsure[id] = at
	}
}

// takeOver starts the term's work once its Takeover is applied: every
// earlier leader's conclusion is now either applied or refused by the
// state, so the open launches are what they seem.
func (l *Launcher) takeOver() {
	l.takenOver = true
	names := l.m.JobNames()
	l.heap = scheduler.Heap{}
	l.build = &heapBuild{names: names, b: scheduler.NewBuilder(len(names)), dirty: map[string]bool{}}
	l.stepBuild()
	prev := l.mem
	continuing := prev != nil && prev.term == l.termBefore
	l.mem = newMemory(l.stateTerm(), l.cfg.MapShrinkFloor)
	for _, open := range l.m.OpenLaunches() {
		id := open.Identity
		switch child, unsureUntil := prev.lookup(id); {
		case continuing && child != "":
			l.mem.child[id] = child
			l.addTask(open, phaseFinish).finish = l.finished(open, state.Outcome{Kind: state.OutcomeDispatched, ChildID: child})
		case continuing && !unsureUntil.IsZero():
			l.mem.mayHaveLanded(id, unsureUntil)
			t := l.newTask(open, phaseLookup)
			l.delay(t, phaseLookup, unsureUntil.Sub(l.now))
		case continuing:
			l.addTask(open, phaseDecide) // nobody has called Nomad for it
		default:
			// A call the previous leader sent before its lease ended may
			// still be on its way to Nomad: look up only once it must
			// have landed.
			until := l.now.Add(l.cfg.MaxCallLatency)
			l.mem.mayHaveLanded(id, until)
			t := l.newTask(open, phaseLookup)
			l.delay(t, phaseLookup, until.Sub(l.now))
		}
	}
}

// dispatchDone records the child a dispatch reported, whether or not its
// launcher still leads.
func (m *memory) dispatchDone(r Result) {
	if m == nil {
		return
	}
	id, ok := m.calls[r.ID]
	if !ok {
		return
	}
	delete(m.calls, r.ID)
	if r.Err == nil {
		m.child[id] = r.ChildID
	}
}

// lookedUp records a lookup of id sent at sentAt: found, the child; not
// found, and sent once every earlier call must have landed, the launch is
// sure to have no child.
func (m *memory) lookedUp(id string, r Result, sentAt time.Time) {
	switch {
	case r.Found:
		m.child[id] = r.ChildID
	case !sentAt.Before(m.unsure[id]):
		delete(m.unsure, id)
	}
}

// lookup returns what m knows of launch id; a nil m knows nothing.
func (m *memory) lookup(id string) (child string, unsureUntil time.Time) {
	if m == nil {
		return "", time.Time{}
	}
	return m.child[id], m.unsure[id]
}

// demote drops everything the leader held; calls in flight are forgotten
// and their results ignored. The next leader looks every open launch up.
func (l *Launcher) demote() {
	if !l.leading {
		return
	}
	l.leading = false
	l.stats.Demotions++
	l.heap, l.build = scheduler.Heap{}, nil
	l.starting, l.full, l.tasks, l.calls = nil, nil, nil, nil
	l.waited, l.held, l.holding = nil, nil, false
	l.queue, l.delayed, l.finishing = nil, nil, nil
}

// publishLease tells a LeaseFollower dispatcher the lease under which
// the current stint's calls may start: its end while the launcher leads
// and holds it, a zero time otherwise.
func (l *Launcher) publishLease() {
	f, ok := l.cfg.Dispatcher.(LeaseFollower)
	if !ok {
		return
	}
	var until time.Time
	if l.leading && l.leaseHeld() {
		until = l.lead.LeaseUntil
	}
	if until.IsZero() && l.published.IsZero() {
		return
	}
	l.published = until
	f.Lease(l.stint, until)
}

// newTask creates the task that concludes an open launch.
func (l *Launcher) newTask(open state.Launch, p phase) *task {
	if _, dup := l.tasks[open.Identity]; dup {
		panic(fmt.Sprintf("launcher: a second task for launch %s", open.Identity))
	}
	l.nextSeq++
	t := &task{seq: l.nextSeq, launch: open, phase: p}
	l.tasks[open.Identity] = t
	return t
}

// addTask creates the task that concludes an open launch, queued for its
// first call.
func (l *Launcher) addTask(open state.Launch, p phase) *task {
	t := l.newTask(open, p)
	if p == phaseFinish {
		l.finishing = append(l.finishing, t)
	} else {
		l.queue = append(l.queue, t)
	}
	return t
}

// applied updates the leader's view after the state applied c (err is
// what the state said of it).
func (l *Launcher) applied(slot uint64, c state.Command, err error) {
	if tk, ok := c.(state.Takeover); ok && !l.takenOver && err == nil && tk.Term == l.stateTerm() {
		l.takeOver()
		return
	}
	if !l.takenOver {
		return // takeOver will read the state as it is then
	}
	switch c := c.(type) {
	case state.Trigger, state.Backfill:
		if err != nil {
			return
		}
		// Opened by a client through the log: nothing can have been
		// dispatched yet, so they start with the pre-dispatch checks.
		j, _ := l.m.Job(state.JobOf(c))
		for _, open := range j.Open {
			if open.StartedSlot == slot {
				l.addTask(open, phaseDecide)
			}
		}
	case state.PutJob, state.Resume, state.Pause:
		l.resync(state.JobOf(c))
	case state.DeleteJob:
		if err == nil {
			delete(l.starting, c.Name)
			delete(l.full, c.Name) // a job created under its name starts afresh
			delete(l.waited, c.Name)
			l.unschedule(c.Name)
		}
	case state.LaunchStarted:
		s, ok := l.starting[c.Job]
		ok = ok && s.at.Equal(c.ScheduledAt) // this leader's start
		if ok {
			delete(l.starting, c.Job)
		}
		if errors.Is(err, state.ErrLimit) && !errors.Is(err, state.ErrAllOpen) {
			if !l.isFull(c.Job) {
				l.full[c.Job] = l.now // room comes only from its own launches
			}
		}
		l.resync(c.Job)
		if err != nil {
			return // a duplicate or a refused start: nothing opened
		}
		open, opened := l.m.OpenLaunch(c.Job, c.ScheduledAt, state.LaunchScheduled)
		if !opened {
			panic(fmt.Sprintf("launcher: start of %s accepted but no launch open", c.Identity))
		}
		switch {
		case ok && s.finish != nil:
			// Proposed at the next Step: never from inside Apply.
			l.addTask(open, phaseFinish).finish = *s.finish
		case ok && s.fresh:
			l.addTask(open, phaseDecide)
		default:
			l.addTask(open, phaseLookup)
		}
	case state.LaunchFinished:
		if err != nil {
			// Refused (a replaced leader's): the launch is still open. Or
			// a duplicate: the launch it concluded is gone, and a task
			// under its identity is a later opening's (a backfill of the
			// same slot), not to be dropped.
			return
		}
		if since, full := l.full[c.Job]; full {
			delete(l.full, c.Job) // room for its next start
			l.waited[c.Job] = span{from: since, to: l.now}
			l.resync(c.Job)
		}
		id := state.LaunchIdentity(c.Job, c.ScheduledAt, c.LaunchKind)
		l.mem.forget(id)
		if t, ok := l.tasks[id]; ok {
			delete(l.tasks, id)
			if t.call != 0 {
				delete(l.calls, t.call)
			}
			t.done = true
		}
	}
}

// unschedule takes a deleted job out of the heap.
func (l *Launcher) unschedule(name string) {
	if l.build != nil {
		l.build.dirty[name] = true
		return
	}
	l.heap.Remove(name)
}

// resync puts the job back in the heap at its state's next launch, unless
// a start of it is in flight (the heap learns the next one when it is
// applied).
func (l *Launcher) resync(name string) {
	if l.build != nil {
		l.build.dirty[name] = true
		return
	}
	if _, busy := l.starting[name]; busy {
		return
	}
	at, ok := l.m.NextAt(name)
	if !ok || l.isFull(name) {
		l.heap.Remove(name)
		return
	}
	l.heap.Set(name, at)
}

// room is how many more launches the state can open, less the starts
// proposed and not yet applied.
func (l *Launcher) room() int { return l.m.OpenRoom() - len(l.starting) }

// isFull reports whether job name waits for one of its own launches to
// conclude (full).
func (l *Launcher) isFull(name string) bool {
	_, ok := l.full[name]
	return ok
}

// span is a stretch of the leader's time, both ends included.
type span struct{ from, to time.Time }

// maxHeldSpans bounds Launcher.held: an older span matters only to a
// start past its window since, which then reads "missed" (no leader
// could launch it) rather than that it waited for room.
const maxHeldSpans = 16

// holdForRoom records that startDue held a due start back at l.now
// while the state held its limit of open launches of all jobs.
func (l *Launcher) holdForRoom() {
	if !l.holding {
		if len(l.held) == maxHeldSpans {
			l.held = slices.Delete(l.held, 0, 1)
		}
		l.held = append(l.held, span{from: l.now})
		l.holding = true
	}
	l.held[len(l.held)-1].to = l.now
}

// missedReason is the skip of job name's slot at, late past its catch-up
// window: it waited for room if, in that window, the job waited for its
// own launches to conclude or the leader held starts back for the room
// of all jobs; else no leader could launch it.
func (l *Launcher) missedReason(name string, at time.Time, late, window time.Duration) string {
	overlaps := func(s span) bool { return !s.to.Before(at) && !s.from.After(at.Add(window)) }
	limits := l.m.Limits()
	if s, ok := l.waited[name]; ok && overlaps(s) {
		return ReasonNoRoomForJob(limits.OpenLaunchesJob, late, window)
	}
	if slices.ContainsFunc(l.held, overlaps) {
		return ReasonNoRoom(limits.OpenLaunches, late, window)
	}
	return ReasonMissed(late, window)
}

// startDue proposes LaunchStarted for the jobs that came due, a batch at
// a time. A paused job's launch, or one already beyond its catch-up
// window, is started and finished at once as skipped: one record per
// slot, never a silent gap.
func (l *Launcher) startDue() {
	// Past the state's room for open launches of all jobs every start is
	// refused, a skip's opening too: none is proposed until launches
	// conclude, and the jobs due wait in the heap, oldest first.
	room := l.room()
	budget := min(l.cfg.MaxStartsPerStep-len(l.starting), room)
	if budget <= 0 {
		next, ok := l.heap.Peek()
		held := ok && !next.NextAt.After(l.now) && room <= 0
		if held {
			l.stats.HeldForRoom++
		}
		if held && l.m.OpenRoom() <= 0 {
			l.holdForRoom() // the state's own limit, not only starts in flight
		} else {
			l.holding = false
		}
		return
	}
	l.holding = false
	due := l.heap.PopDue(l.now, budget)
	for i, e := range due {
		info, ok := l.m.Info(e.Name)
		if !ok || !info.NextAt.Equal(e.NextAt) {
			l.resync(e.Name) // the heap was stale
			continue
		}
		at := e.NextAt
		c := state.LaunchStarted{Job: e.Name, ScheduledAt: at, Identity: state.Identity(e.Name, at), SpecVersion: info.Version, At: l.now}
		s := start{at: at, proposedAt: l.now}
		switch late := l.now.Sub(at); {
		case info.Paused:
			s.finish = l.skipped(c, ReasonPaused)
		case late > info.Spec.CatchupWindow:
			s.finish = l.skipped(c, l.missedReason(e.Name, at, late, info.Spec.CatchupWindow))
		default:
			s.fresh = true
		}
		if err := l.cfg.Propose(c); err != nil {
			// Busy or no longer leader: put this and the rest back.
			for _, back := range due[i:] {
				l.resync(back.Name)
			}
			return
		}
		l.starting[e.Name] = s
		delete(l.waited, e.Name) // its wait is over
	}
}

func (l *Launcher) skipped(c state.LaunchStarted, reason string) *state.LaunchFinished {
	return &state.LaunchFinished{Job: c.Job, ScheduledAt: c.ScheduledAt, Term: l.stateTerm(),
		Outcome: state.Outcome{Kind: state.OutcomeSkipped, Reason: reason}}
}

// proposeFinishing proposes the LaunchFinished of the tasks that
// concluded; those the node refuses (busy) wait for the sweep.
func (l *Launcher) proposeFinishing() {
	for _, t := range l.finishing {
		if !t.done {
			l.proposeFinish(t)
		}
	}
	l.finishing = nil
}

// pump moves delayed tasks whose wait is over to the queue, then makes
// calls for queued tasks while there is room in flight.
func (l *Launcher) pump() {
	n := 0
	for n < len(l.delayed) && !l.delayed[n].notBefore.After(l.now) {
		n++
	}
	if n > 0 {
		l.queue = append(l.queue, l.delayed[:n]...)
		l.delayed = slices.Delete(l.delayed, 0, n)
	}
	for len(l.queue) > 0 && len(l.calls) < l.cfg.MaxInflight {
		t := l.queue[0]
		l.queue = l.queue[1:]
		if !t.done {
			l.advance(t)
		}
	}
	if len(l.queue) == 0 {
		l.queue = nil // let the backing array go after a herd
	}
}

// retry puts t back after a backoff that doubles per attempt.
func (l *Launcher) retry(t *task, p phase, err error) {
	t.attempts++
	t.lastErr = err.Error()
	l.stats.Retries++
	l.delay(t, p, l.cfg.RetryAfter<<min(t.attempts-1, 5))
}

// delay puts t back in phase p after wait.
func (l *Launcher) delay(t *task, p phase, wait time.Duration) {
	t.phase = p
	t.notBefore = l.now.Add(wait)
	i, _ := slices.BinarySearchFunc(l.delayed, t, func(a, b *task) int {
		return cmp.Or(a.notBefore.Compare(b.notBefore), cmp.Compare(a.seq, b.seq))
	})
	l.delayed = slices.Insert(l.delayed, i, t)
}

// giveUpAt is when the launcher stops retrying a launch: at the end of its
// catch-up window, and, unless the job asked for at least once, before
// Nomad may forget its token.
func (l *Launcher) giveUpAt(t *task, window time.Duration) time.Time {
	end := due(t.launch).Add(window)
	if h := l.horizonEnd(t); h.Before(end) && !t.launch.AtLeastOnce {
		end = h
	}
	return end
}

// redispatchable reports whether t, open past Nomad's memory horizon and
// not found, may be dispatched again: it was started at least once, its
// job (the one it was started for) still exists and is not paused (unless t is
// forced), and t is still within its catch-up window. Otherwise it is
// recorded unknown, since it may have run.
func (l *Launcher) redispatchable(t *task) bool {
	info, ok := l.m.Info(t.launch.Job)
	if !t.launch.AtLeastOnce || !l.sameJob(t, info, ok) || info.Paused && !t.launch.Force {
		return false
	}
	return l.now.Sub(due(t.launch)) <= info.Spec.CatchupWindow
}

// due is when a launch's catch-up window opens: a scheduled launch at its
// slot, a manual or backfilled one at the request that opened it (its
// slot may be hours gone).
func due(l state.Launch) time.Time {
	if l.Kind != state.LaunchScheduled {
		return l.StartedAt
	}
	return l.ScheduledAt
}

// horizonEnd is when a dispatch of t's launch may have been forgotten by
// Nomad: no dispatch of it happened before its LaunchStarted was proposed.
func (l *Launcher) horizonEnd(t *task) time.Time {
	return t.launch.StartedAt.Add(l.cfg.MemoryHorizon - l.cfg.ClockSkew)
}

// advance takes t one step: a call, or its conclusion.
func (l *Launcher) advance(t *task) {
	switch t.phase {
	case phaseLookup:
		l.call(t, OpLookup, target(t.launch.Target), "")
	case phaseDecide:
		l.decide(t)
	case phaseLookupUnknown:
		l.call(t, OpLookup, target(t.unknown[0].Target), "")
	case phaseRunning:
		l.call(t, OpRunning, target(t.previous[0].Target), t.previous[0].ID)
	case phaseStop:
		l.call(t, OpStop, target(t.previous[0].Target), t.previous[0].ID)
	case phaseDispatch:
		info, ok := l.m.Info(t.launch.Job)
		if !l.sameJob(t, info, ok) {
			o := state.Outcome{Kind: state.OutcomeSkipped, Reason: ReasonDeleted}
			if t.dispatched {
				// Deleted while a failed dispatch, found not to have made
				// a child, waited to be sent again: it failed, and says why.
				o = state.Outcome{Kind: state.OutcomeFailed, Reason: ReasonDeletedAfterFailure(t.lastErr)}
			}
			l.conclude(t, o)
			return
		}
		// The target, payload and meta are the launch's own, fixed when it
		// started: every attempt under its identity sends the same.
		spec := target(t.launch.Target)
		spec.Payload, spec.Meta = t.launch.DispatchContent()
		if state.ContentHash(spec) != t.launch.Content {
			panic(fmt.Sprintf("launcher: launch %s carries content that does not match its hash", t.launch.Identity))
		}
		l.call(t, OpDispatch, spec, "")
	case phaseFinish:
		l.proposeFinish(t)
	default:
		panic(fmt.Sprintf("launcher: task %s in phase %d", t.launch.Identity, t.phase))
	}
}

// decide runs the checks before a dispatch: the job still exists and is
// not paused, the launch is inside its catch-up window, and the
// concurrency policy allows it.
func (l *Launcher) decide(t *task) {
	info, ok := l.m.Info(t.launch.Job)
	switch late := l.now.Sub(due(t.launch)); {
	case !l.sameJob(t, info, ok):
		l.conclude(t, state.Outcome{Kind: state.OutcomeSkipped, Reason: ReasonDeleted})
		return
	case info.Paused && !t.launch.Force:
		l.conclude(t, state.Outcome{Kind: state.OutcomeSkipped, Reason: ReasonPaused})
		return
	case late > info.Spec.CatchupWindow:
		l.conclude(t, state.Outcome{Kind: state.OutcomeSkipped, Reason: ReasonCatchup(late, info.Spec.CatchupWindow)})
		return
	}
	if info.Spec.Concurrency == state.ConcurrencyAllow || t.launch.Force {
		t.phase = phaseDispatch
		l.advance(t)
		return
	}
	if info.FirstOpened != "" && info.FirstOpened != t.launch.Identity {
		// A launch of the job opened before this one is still open: the
		// policy looks at its child, so wait for it to conclude. Opened
		// before, not scheduled before: a backfill of an earlier slot
		// opened while a scheduled launch was being dispatched once went
		// ahead beside it.
		l.delay(t, phaseDecide, l.cfg.RetryAfter)
		return
	}
	t.policy, t.previous, t.unknown = info.Spec.Concurrency, nil, nil
	if info.LastChild.ID != "" {
		t.previous = append(t.previous, info.LastChild)
	}
	for _, u := range l.m.Unknown(t.launch.Job) {
		if u.Identity != t.launch.Identity {
			t.unknown = append(t.unknown, u)
		}
	}
	l.nextPolicyStep(t)
}

// nextPolicyStep moves t on through its policy now.
func (l *Launcher) nextPolicyStep(t *task) {
	l.policyPhase(t)
	l.advance(t)
}

// queueNextPolicyStep moves t on through its policy at the next step (a
// result came in: calls are made while stepping).
func (l *Launcher) queueNextPolicyStep(t *task) {
	l.policyPhase(t)
	l.queue = append(l.queue, t)
}

// policyPhase is t's next phase in its policy: the unknown launches
// looked up, then each previous child asked about (forbid) or stopped
// (replace), then the dispatch.
func (l *Launcher) policyPhase(t *task) {
	switch {
	case len(t.unknown) > 0:
		t.phase = phaseLookupUnknown
	case len(t.previous) == 0:
		t.phase = phaseDispatch
	case t.policy == state.ConcurrencyForbid:
		t.phase = phaseRunning
	case t.policy == state.ConcurrencyReplace:
		t.phase = phaseStop
	default:
		panic(fmt.Sprintf("launcher: launch %s: a policy step under concurrency %q", t.launch.Identity, t.policy))
	}
}

// sameJob reports whether the job info (ok: it exists) is the one t's
// launch belongs to, and not a job created since under the same name.
func (l *Launcher) sameJob(t *task, info state.JobInfo, ok bool) bool {
	return ok && t.launch.SpecVersion >= info.CreatedVersion
}

// target is a spec holding only t: what a call other than a dispatch
// needs.
func target(t state.Target) state.JobSpec {
	return state.JobSpec{NomadJob: t.NomadJob, Namespace: t.Namespace, Region: t.Region}
}

// call sends t's request for op.
func (l *Launcher) call(t *task, op Op, spec state.JobSpec, child string) {
	if t.call != 0 {
		panic(fmt.Sprintf("launcher: second call for %s while %d is in flight", t.launch.Identity, t.call))
	}
	if !l.leaseHeld() {
		panic("launcher: a call to Nomad without the lease")
	}
	l.nextReq++
	t.call = l.nextReq
	t.sentAt = l.now
	l.calls[t.call] = t
	if op == OpDispatch {
		t.dispatched = true
		l.mem.mayHaveLanded(t.launch.Identity, l.now.Add(l.cfg.MaxCallLatency))
		l.mem.calls[t.call] = t.launch.Identity
	}
	l.stats.Calls[op]++
	req := Request{
		ID: t.call, Op: op, Job: t.launch.Job, ScheduledAt: t.launch.ScheduledAt, Identity: t.launch.Identity,
		Spec: spec, ChildID: child, Deadline: l.lead.LeaseUntil, Stint: l.stint,
	}
	if t.phase == phaseLookupUnknown {
		// About another launch of the job: its child, by its token.
		req.ScheduledAt, req.Identity = t.unknown[0].ScheduledAt, t.unknown[0].Identity
	}
	l.cfg.Dispatcher.Submit(req)
}

// Done hands the launcher a Dispatcher's Result. Call Step after it.
func (l *Launcher) Done(r Result) {
	l.mem.dispatchDone(r) // remembered even after a demotion
	t, ok := l.calls[r.ID]
	if !ok {
		l.stats.StaleResults++
		return
	}
	delete(l.calls, r.ID)
	if t.phase == phaseLookup && r.Err == nil && (r.Found || l.now.Before(l.horizonEnd(t))) {
		// Past the horizon, "not found" may mean forgotten: a leader
		// re-elected after its conclusion was lost must look again, not
		// take the launch for one nobody called Nomad for.
		l.mem.lookedUp(t.launch.Identity, r, t.sentAt)
	}
	t.call = 0
	switch t.phase {
	case phaseLookup:
		l.lookedUp(t, r)
	case phaseLookupUnknown:
		u := t.unknown[0]
		switch {
		case r.Err != nil:
			l.retryOrConclude(t, phaseLookupUnknown, r.Err, state.OutcomeFailed, func(err error) string { return ReasonUnknownLookupFailed(u.Identity, err) })
			return
		case r.Found && !slices.ContainsFunc(t.previous, func(c state.Child) bool { return c.ID == r.ChildID }):
			t.previous = append(t.previous, state.Child{ID: r.ChildID, Target: u.Target})
		}
		t.unknown = t.unknown[1:]
		l.queueNextPolicyStep(t)
	case phaseRunning:
		switch {
		case r.Err != nil:
			c := t.previous[0].ID
			l.retryOrConclude(t, phaseRunning, r.Err, state.OutcomeFailed, func(err error) string { return ReasonRunningUnknown(c, err) })
		case r.Found:
			// The child is named as well as told of: one found for a launch
			// concluded unknown becomes the job's last child, looked at
			// after that launch has left the history.
			c := t.previous[0].ID
			l.conclude(t, state.Outcome{Kind: state.OutcomeSkipped, ChildID: c, Reason: ReasonForbid(c)})
		default:
			t.previous = t.previous[1:]
			l.queueNextPolicyStep(t)
		}
	case phaseStop:
		if r.Err != nil {
			c := t.previous[0].ID
			l.retryOrConclude(t, phaseStop, r.Err, state.OutcomeFailed, func(err error) string { return ReasonStopFailed(c, err) })
			return
		}
		t.previous = t.previous[1:]
		l.queueNextPolicyStep(t)
	case phaseDispatch:
		switch {
		case r.Err == nil:
			l.conclude(t, state.Outcome{Kind: state.OutcomeDispatched, ChildID: r.ChildID})
		case errors.Is(r.Err, ErrRejected):
			l.conclude(t, state.Outcome{Kind: state.OutcomeFailed, Reason: ReasonRefused(r.Err)})
		case errors.Is(r.Err, ErrNotSent):
			// It never reached Nomad: as after a lookup that found no
			// child, dispatch again after the retry's wait, with no
			// MaxCallLatency wait and no lookup. In a herd that swamps
			// the agent, a request whose time ran out waiting for a
			// connection was looked up 10 s later, and that lookup queued
			// behind the dispatches too (issue 6).
			t.lastErr = r.Err.Error()
			info, ok := l.m.Info(t.launch.Job)
			if !l.sameJob(t, info, ok) {
				l.conclude(t, state.Outcome{Kind: state.OutcomeFailed, Reason: ReasonDeletedAfterFailure(t.lastErr)})
				return
			}
			l.dispatchAgain(t, info)
		default:
			// It may have happened, or still be on its way: look it up
			// once it must have landed.
			t.lastErr = r.Err.Error()
			l.delay(t, phaseLookup, t.sentAt.Add(l.cfg.MaxCallLatency).Sub(l.now))
		}
	default:
		panic(fmt.Sprintf("launcher: result for %s in phase %d", t.launch.Identity, t.phase))
	}
}

// dispatchAgain sends t's failed dispatch again after the retry's wait,
// or concludes it failed when the wait would pass its catch-up window.
func (l *Launcher) dispatchAgain(t *task, info state.JobInfo) {
	if !l.now.Add(l.backoff(t)).Before(l.giveUpAt(t, info.Spec.CatchupWindow)) {
		l.conclude(t, state.Outcome{Kind: state.OutcomeFailed, Reason: ReasonRetriesOut(t.attempts+1, t.lastErr)})
		return
	}
	l.retry(t, phaseDispatch, errors.New(t.lastErr))
}

// lookedUp handles a lookup's result.
func (l *Launcher) lookedUp(t *task, r Result) {
	switch {
	case r.Err != nil:
		l.retryOrConclude(t, phaseLookup, r.Err, state.OutcomeUnknown, ReasonLookupFailed)
	case r.Found:
		l.conclude(t, state.Outcome{Kind: state.OutcomeDispatched, ChildID: r.ChildID})
	case !l.now.Before(l.horizonEnd(t)) && l.redispatchable(t):
		// Not found, and Nomad may have forgotten a child it made; the
		// job asked for at least once: dispatch it again, as a retry of
		// a launch already decided (no policy check: a skip now could
		// hide a child that ran).
		if t.mayHaveRun {
			// Dispatched again already, and that failed too: waits as
			// any failed dispatch does before the next.
			info, _ := l.m.Info(t.launch.Job)
			l.dispatchAgain(t, info)
			return
		}
		t.phase, t.mayHaveRun = phaseDispatch, true
		l.queue = append(l.queue, t)
	case !l.now.Before(l.horizonEnd(t)):
		// Not found, but Nomad may have forgotten a child it made: fail
		// closed.
		l.conclude(t, state.Outcome{Kind: state.OutcomeUnknown, Reason: ReasonForgotten(t.launch.StartedAt, l.cfg.MemoryHorizon, l.cfg.ClockSkew)})
	case t.dispatched:
		// Our dispatch failed and Nomad has no child: try again, with the
		// same token, until the launch's time is up.
		info, ok := l.m.Info(t.launch.Job)
		if !l.sameJob(t, info, ok) {
			l.conclude(t, state.Outcome{Kind: state.OutcomeFailed, Reason: ReasonDeletedAfterFailure(t.lastErr)})
			return
		}
		l.dispatchAgain(t, info)
	default:
		t.phase = phaseDecide
		l.queue = append(l.queue, t)
	}
}

func (l *Launcher) backoff(t *task) time.Duration { return l.cfg.RetryAfter << min(t.attempts, 5) }

// retryOrConclude retries a failed call, or concludes the launch with kind
// once its time is up, for the reason reason(err) gives.
func (l *Launcher) retryOrConclude(t *task, p phase, err error, kind state.OutcomeKind, reason func(error) string) {
	window := state.DefaultCatchupWindow
	if info, ok := l.m.Info(t.launch.Job); ok {
		window = info.Spec.CatchupWindow
	}
	if kind == state.OutcomeUnknown {
		// A lookup keeps trying for as long as Nomad remembers.
		window = l.cfg.MemoryHorizon
	}
	if l.now.Add(l.backoff(t)).Before(l.giveUpAt(t, window)) {
		l.retry(t, p, err)
		return
	}
	if kind == state.OutcomeFailed && t.dispatched {
		kind = state.OutcomeUnknown // a dispatch may have happened
	}
	l.conclude(t, state.Outcome{Kind: kind, Reason: reason(err)})
}

// conclude proposes t's LaunchFinished.
func (l *Launcher) conclude(t *task, o state.Outcome) {
	if t.mayHaveRun && (o.Kind == state.OutcomeSkipped || o.Kind == state.OutcomeFailed) {
		o = state.Outcome{Kind: state.OutcomeUnknown, Reason: ReasonAfterRedispatch(o.Kind, o.Reason)}
	}
	t.phase = phaseFinish
	t.finish = l.finished(t.launch, o)
	l.proposeFinish(t)
}

// finished is the LaunchFinished that concludes launch with o in this term.
func (l *Launcher) finished(launch state.Launch, o state.Outcome) state.LaunchFinished {
	return state.LaunchFinished{Job: launch.Job, ScheduledAt: launch.ScheduledAt, LaunchKind: launch.Kind, Outcome: o, Term: l.stateTerm()}
}

func (l *Launcher) proposeFinish(t *task) {
	t.finish.Outcome.Reason = clipReason(t.finish.Outcome.Reason)
	t.finish.StartedSlot = t.launch.StartedSlot // this opening alone
	if err := l.cfg.Propose(t.finish); err != nil {
		t.proposedAt = time.Time{} // the sweep proposes it again
		return
	}
	t.proposedAt = l.now
}

// clipReason makes a reason one the state accepts: valid UTF-8 (an error
// from Nomad or a proxy in front of it may carry any bytes) and at most
// state.MaxReasonBytes, cut at a character's start so that the cut leaves
// no half of one.
func clipReason(reason string) string {
	reason = strings.ToValidUTF8(reason, "\uFFFD")
	if len(reason) <= state.MaxReasonBytes {
		return reason
	}
	const ellipsis = "..."
	cut := state.MaxReasonBytes - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut] + ellipsis
}

// sweep proposes again what was proposed and not applied in time (a lost
// proposal, or one refused while the node was busy). Proposing twice is
// safe: the state ignores a duplicate start or finish.
func (l *Launcher) sweep() {
	if l.now.Sub(l.swept) < l.cfg.ProposalTimeout/4 {
		return
	}
	l.swept = l.now
	var late []string
	//detlint:maprange collected, then sorted
	for name, s := range l.starting {
		if l.now.Sub(s.proposedAt) >= l.cfg.ProposalTimeout {
			late = append(late, name)
		}
	}
	slices.Sort(late)
	for _, name := range late {
		delete(l.starting, name)
		l.resync(name)
		l.stats.Reproposals++
	}
	var finishing []*task
	//detlint:maprange collected, then sorted
	for _, t := range l.tasks {
		if t.phase == phaseFinish && (t.proposedAt.IsZero() || l.now.Sub(t.proposedAt) >= l.cfg.ProposalTimeout) {
			finishing = append(finishing, t)
		}
	}
	slices.SortFunc(finishing, func(a, b *task) int { return cmp.Compare(a.seq, b.seq) })
	for _, t := range finishing {
		l.stats.Reproposals++
		l.proposeFinish(t)
	}
}

// leaderPeaks are the peaks of a leader's per-job and per-launch maps.
type leaderPeaks struct{ starting, full, waited, tasks, calls mapshrink.Peak }

// newLeaderPeaks is leaderPeaks for maps rebuilt above floor
// (Config.MapShrinkFloor).
func newLeaderPeaks(floor int) leaderPeaks {
	p := leaderPeaks{}
	setFloor(p.all(), floor)
	return p
}

func (p *leaderPeaks) all() []*mapshrink.Peak {
	return []*mapshrink.Peak{&p.starting, &p.full, &p.waited, &p.tasks, &p.calls}
}

func setFloor(peaks []*mapshrink.Peak, floor int) {
	for _, p := range peaks {
		p.Floor = floor
	}
}

// shrinkMaps rebuilds the leader's maps that fell far below their peak
// (mapshrink): a Go map never shrinks, so a herd of a million launches,
// or a million jobs deleted, kept their memory for the rest of the term,
// and sweep's walks of starting and tasks their time. Step calls it, so
// it sees each map's length between inputs; a rebuilt map holds the same
// entries.
func (l *Launcher) shrinkMaps() {
	before := l.mapRebuilds()
	defer func() { l.stats.MapRebuilds += l.mapRebuilds() - before }()
	p := &l.peaks
	l.starting = mapshrink.Keep(l.starting, &p.starting)
	l.full = mapshrink.Keep(l.full, &p.full)
	l.waited = mapshrink.Keep(l.waited, &p.waited)
	l.tasks = mapshrink.Keep(l.tasks, &p.tasks)
	l.calls = mapshrink.Keep(l.calls, &p.calls)
	if m := l.mem; m != nil {
		m.child = mapshrink.Keep(m.child, &m.peaks.child)
		m.unsure = mapshrink.Keep(m.unsure, &m.peaks.unsure)
		m.calls = mapshrink.Keep(m.calls, &m.peaks.calls)
	}
}

// mapRebuilds is the rebuilds the peaks of the leader's maps counted.
func (l *Launcher) mapRebuilds() uint64 {
	peaks := l.peaks.all()
	if m := l.mem; m != nil {
		peaks = append(peaks, m.peaks.all()...)
	}
	var n uint64
	for _, p := range peaks {
		n += p.Rebuilds
	}
	return n
}

// Open returns the number of launches the leader is concluding.
func (l *Launcher) Open() int { return len(l.tasks) }

// Describe says where the leader's work on an open launch stands, for
// operators and for the simulator's failure reports.
func (l *Launcher) Describe(identity string) string {
	switch {
	case !l.leading:
		return "not leading"
	case !l.takenOver:
		return "leading, takeover not applied yet"
	}
	t, ok := l.tasks[identity]
	if !ok {
		return "no task"
	}
	return fmt.Sprintf("phase %d, call %d, not before %s, attempts %d, last error %q, proposed %s",
		t.phase, t.call, t.notBefore.Format(time.RFC3339Nano), t.attempts, t.lastErr, t.proposedAt.Format(time.RFC3339Nano))
}

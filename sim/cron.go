package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/sim/check"
	"paxcron/sim/simnomad"
)

// The cron side of a run: every replica runs the real launcher over the
// real cron state, a client edits jobs, and one simulated Nomad answers
// the leader's calls.

// epochs are the wall-clock instants runs start at (one per seed, in
// turn): each is a little before a daylight-saving change in one of the
// zones the simulated jobs use, so that runs cross gaps and overlaps.
var epochs = []time.Time{
	time.Date(2026, 3, 8, 6, 59, 30, 0, time.UTC),   // New York springs forward at 07:00Z
	time.Date(2026, 11, 1, 5, 59, 30, 0, time.UTC),  // New York falls back at 06:00Z
	time.Date(2026, 4, 4, 15, 59, 30, 0, time.UTC),  // Sydney falls back at 16:00Z
	time.Date(2026, 10, 3, 15, 59, 30, 0, time.UTC), // Sydney springs forward at 16:00Z
	time.Date(2026, 4, 4, 14, 59, 30, 0, time.UTC),  // Lord Howe falls back 30 minutes at 15:00Z
	time.Date(2026, 10, 3, 15, 29, 30, 0, time.UTC), // Lord Howe springs forward 30 minutes at 15:30Z
	time.Date(2026, 12, 31, 23, 59, 30, 0, time.UTC),
}

// EpochFor returns the wall-clock start of the run of seed.
func EpochFor(seed uint64) time.Time { return epochs[seed%uint64(len(epochs))] }

// jobSpecs are the schedules the client gives jobs: sub-minute, so that
// a minute-long run launches often; in the zones of the epochs; with
// every concurrency policy and short and default catch-up windows. Hour
// fields that name the hour of a change test the gap and overlap rules.
var jobSpecs = []state.JobSpec{
	{Schedule: "* * * * * *", NomadJob: "batch", CatchupWindow: 3 * time.Second},
	{Schedule: "*/2 * * * * *", TimeZone: "America/New_York", NomadJob: "batch", Concurrency: state.ConcurrencyForbid},
	{Schedule: "*/3 * * * * *", TimeZone: "Australia/Sydney", NomadJob: "report", Namespace: "ops", Concurrency: state.ConcurrencyReplace},
	{Schedule: "@every 4s", NomadJob: "batch", CatchupWindow: 10 * time.Second},
	{Schedule: "*/5 * 2 * * *", TimeZone: "America/New_York", NomadJob: "batch"},
	{Schedule: "*/5 * 1 * * *", TimeZone: "America/New_York", NomadJob: "batch", CatchupWindow: 3 * time.Second},
	{Schedule: "*/2 * 2 * * *", TimeZone: "Australia/Sydney", NomadJob: "batch", Concurrency: state.ConcurrencyForbid},
	{Schedule: "*/3 * 2 * * *", TimeZone: "Australia/Lord_Howe", NomadJob: "batch"},
	{Schedule: "? * * * * *", TimeZone: "Australia/Lord_Howe", NomadJob: "batch"},
	{Schedule: "*/7 * * * * *", NomadJob: "missing"}, // Nomad has no such job: refused
	// At least once: past the memory horizon (10 s), within the window.
	{Schedule: "*/2 * * * * *", NomadJob: "batch", CatchupWindow: 30 * time.Second, AtLeastOnce: true},
	{Schedule: "@every 3s", TimeZone: "Australia/Sydney", NomadJob: "batch", CatchupWindow: 20 * time.Second, AtLeastOnce: true, Concurrency: state.ConcurrencyForbid},
	{Schedule: "0 0 1 1 *", NomadJob: "batch"}, // never within a run
	// Policies with a short window: a Nomad outage can outlast it while
	// forbid asks about the last child, replace stops it, or either looks
	// up a launch concluded unknown, so that those failures happen too.
	{Schedule: "*/2 * * * * *", NomadJob: "batch", CatchupWindow: 2 * time.Second, Concurrency: state.ConcurrencyForbid},
	{Schedule: "*/3 * * * * *", NomadJob: "report", Namespace: "ops", CatchupWindow: 2 * time.Second, Concurrency: state.ConcurrencyReplace},
	// A forbid job in a second target: an edit between this and another
	// forbid spec moves a job whose launch may have concluded unknown,
	// which must be looked up where it went.
	{Schedule: "*/2 * * * * *", NomadJob: "report", Namespace: "ops", CatchupWindow: 3 * time.Second, Concurrency: state.ConcurrencyForbid},
}

// jobNames are the jobs the client edits.
var jobNames = []string{"j0", "j1", "j2", "j3", "j4", "j5", "j6", "j7"}

// newNomad builds the run's simulated Nomad with its parent jobs.
func newNomad(c *cluster) (*simnomad.Nomad, error) {
	cfg := c.opts.Nomad
	cfg.Epoch = c.opts.Epoch
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.nomadGC > 0 {
		cfg.GCThreshold = bug.nomadGC
	}
	r := rand.New(rand.NewPCG(c.rng.Uint64(), c.rng.Uint64()))
	n, err := simnomad.New(c.sched, r, cfg)
	if err != nil {
		return nil, err
	}
	n.Register("", "", "batch")
	n.Register("ops", "", "report")
	// Reports run long: a launch of one that concluded unknown may still
	// run when the forbid policy looks it up, after the memory horizon.
	if err := n.SetRunTime("ops", "", "report", 2*time.Second, 16*time.Second); err != nil {
		return nil, err
	}
	return n, nil
}

// wall is replica n's wall clock now.
func (c *cluster) wall(n *node) time.Time { return c.opts.Epoch.Add(n.clock.Wall(c.sched.Now())) }

// trueWall is the true wall-clock time now: Nomad's clock.
func (c *cluster) trueWall() time.Time { return c.opts.Epoch.Add(c.sched.Now()) }

// simMapShrinkFloor is the peak above which a replica's maps are rebuilt
// once far below it (mapshrink): the server's 4,096 is more jobs than a
// run holds, and a small one rebuilds them at moments faults choose.
const simMapShrinkFloor = 4

// newLauncher builds replica n's launcher for its current incarnation.
func (c *cluster) newLauncher(n *node) (*launcher.Launcher, error) {
	horizon := c.opts.MemoryHorizon
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.forgetHorizon {
		horizon = 1000 * time.Hour
	}
	m, err := state.NewWithLimits(c.opts.State)
	if err != nil {
		return nil, err
	}
	m.SetMapShrinkFloor(simMapShrinkFloor)
	n.machine = m
	return launcher.New(launcher.Config{
		Machine:        n.machine,
		Propose:        c.proposer(n),
		Dispatcher:     &simDispatcher{c: c, n: n, incarnation: n.incarnation},
		MemoryHorizon:  horizon,
		ClockSkew:      c.opts.ClockSkew,
		MaxInflight:    16,
		MapShrinkFloor: simMapShrinkFloor,
		// A heap of the 8 jobs built over several steps after every
		// takeover, with the log's changes applied meanwhile.
		BuildStep:       1,
		RetryAfter:      100 * time.Millisecond,
		ProposalTimeout: 2 * time.Second,
		// simnomad's slowest call (flaky) lands within 300 ms.
		MaxCallLatency: 400 * time.Millisecond,
		Applied:        func(slot uint64, cmd state.Command, err error) { c.cronApplied(n, slot, cmd, err) },
		NewClusterID:   c.newClusterID,
	})
}

// newClusterID draws a cluster ID for a launcher, from the seed.
func (c *cluster) newClusterID() state.ClusterID {
	var id state.ClusterID
	for id.IsZero() {
		binary.BigEndian.PutUint64(id[:8], c.naming.Uint64())
		binary.BigEndian.PutUint64(id[8:], c.naming.Uint64())
	}
	return id
}

// proposer is replica n's launcher's way into its paxos node.
func (c *cluster) proposer(n *node) func(state.Command) error {
	return func(cmd state.Command) error {
		data, err := state.Encode(cmd)
		if err != nil {
			c.fail(fmt.Errorf("replica %d's launcher proposed an invalid %s: %w", n.id, cmd.Kind(), err))
			return err
		}
		c.checks.Proposed(data)
		if _, err = n.rep.Propose(data); err != nil {
			return err
		}
		if start, ok := cmd.(state.LaunchStarted); ok {
			c.plantFalseSkip(n, start)
		}
		return nil
	}
}

// plantFalseSkip proposes, behind replica n's start, the false skip a
// falseSkip planted bug makes of it, and holds the launcher's dispatch of
// it back until a conclusion of the launch is applied.
func (c *cluster) plantFalseSkip(n *node, start state.LaunchStarted) {
	bug := plantedBugs[c.opts.Bug]
	if bug == nil || bug.falseSkip == nil {
		return
	}
	outcome := bug.falseSkip(c, n, start)
	if outcome.Kind == "" {
		return
	}
	ballot := n.rep.Node().Status().Ballot
	skip := state.LaunchFinished{Job: start.Job, ScheduledAt: start.ScheduledAt, LaunchKind: state.LaunchScheduled,
		Term:    state.Term{Round: ballot.Round, Replica: uint64(ballot.Replica)},
		Outcome: outcome}
	data, err := state.Encode(skip)
	if err != nil {
		panic(fmt.Sprintf("sim: planted bug built an invalid skip: %v", err))
	}
	c.checks.Proposed(data)
	if _, err := n.rep.Propose(data); err == nil {
		c.heldBack[start.Identity] = true
		c.faults["planted false skip"]++ // not a fault: proof the bug acted
	}
}

// stepLauncher gives replica n's launcher the time and the replica's role
// after every input, then sends what it proposed.
func (c *cluster) stepLauncher(n *node) {
	if !n.up || n.stepping {
		return
	}
	n.stepping = true
	defer func() { n.stepping = false }()
	now := c.wall(n)
	lead := launcher.LeadershipOf(n.rep.Node().Status(), n.rep.Applied(), now, c.opts.TickInterval)
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.ignoreLease && lead.Leader {
		lead.LeaseUntil = now.Add(time.Hour)
	}
	was := n.launcher.Leading()
	if bug := plantedBugs[c.opts.Bug]; bug == nil || !bug.stallBeforeHeal || c.healed || c.sched.Now()%(10*time.Second) >= 6*time.Second {
		held := n.launcher.Stats().HeldForRoom
		n.launcher.Step(now, lead)
		if n.launcher.Stats().HeldForRoom > held {
			c.faults["due starts held for room among all jobs' open launches"]++ // proof the path ran
		}
	}
	c.fail(n.launcher.CheckSchedule())
	if !was && n.launcher.Leading() {
		c.promotions++
		c.trace.Record(fmt.Sprintf("launcher %d takes over", n.id))
		c.logf("launcher %d leads in %v", n.id, lead.Term)
	}
	c.handle(n, n.rep.Process())
}

// cronApplied feeds the cron checker each chosen command once, as the
// first replica to apply its slot saw it.
func (c *cluster) cronApplied(n *node, slot uint64, cmd state.Command, err error) {
	if slot <= c.cronSlot {
		return
	}
	c.cronSlot = slot
	if c.opts.Log != nil {
		switch cmd.(type) {
		case state.LaunchStarted, state.LaunchFinished, state.Trigger, state.Backfill:
			c.logf("slot %d: %s %+v (err: %v)", slot, cmd.Kind(), cmd, err)
		}
	}
	if f, ok := cmd.(state.LaunchFinished); ok {
		delete(c.heldBack, state.LaunchIdentity(f.Job, f.ScheduledAt, f.LaunchKind))
	}
	switch {
	case errors.Is(err, state.ErrAllOpen):
		c.faults["refused for want of room among all jobs' open launches"]++ // proof the path ran
	case errors.Is(err, state.ErrLimit):
		if _, ok := cmd.(state.LaunchStarted); ok {
			c.faults["start refused for its job's open launches"]++ // proof the path ran
		}
	}
	if _, ok := cmd.(state.SetClusterID); ok && errors.Is(err, state.ErrStale) {
		c.faults["cluster ID drawn by two leaders, the second refused"]++ // not a fault: proof the path ran
	}
	if err != nil {
		return
	}
	if f, ok := cmd.(state.LaunchFinished); ok {
		switch o := f.Outcome; {
		case o.Kind == state.OutcomeDispatched:
			c.dispatched[f.Job] = o.ChildID
		case o.Kind == state.OutcomeSkipped && o.ChildID != "" && o.ChildID != c.dispatched[f.Job]:
			c.faults["forbid skip naming an unknown launch's child"]++ // not a fault: proof the path ran
		}
	}
	now := c.trueWall()
	switch cmd := cmd.(type) {
	case state.Takeover:
		c.fail(c.cronCheck.Applied(slot, now, cmd, state.Job{}))
		// A client's writes right behind a takeover, so that some land
		// while the new leader builds its heap a step at a time
		// (BuildStep): it must take them in.
		for _, d := range []time.Duration{time.Millisecond, 4 * time.Millisecond, 15 * time.Millisecond} {
			c.sched.After(d, c.proposeOnce)
		}
	case state.PutJob, state.DeleteJob, state.Pause, state.Resume:
		j, _ := n.machine.Job(state.JobOf(cmd))
		if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.hideSuperseded {
			j = withoutSuperseded(j, slot)
		}
		c.fail(c.cronCheck.Applied(slot, now, cmd, j))
	case state.LaunchStarted:
		j, ok := n.machine.Job(cmd.Job)
		if !ok {
			c.fail(fmt.Errorf("replica %d accepted the start of %s for a job it does not have", n.id, cmd.Identity))
			return
		}
		c.fail(c.cronCheck.Started(slot, now, cmd, j))
	case state.LaunchFinished:
		c.fail(c.cronCheck.Finished(slot, now, cmd))
	case state.Trigger, state.Backfill:
		job := state.JobOf(cmd)
		j, ok := n.machine.Job(job)
		if !ok {
			c.fail(fmt.Errorf("replica %d accepted a %s of job %q it does not have", n.id, cmd.Kind(), job))
			return
		}
		for _, l := range j.Open {
			if l.StartedSlot == slot {
				c.fail(c.cronCheck.Opened(slot, now, l, j))
				c.openedByKind[l.Kind]++
			}
		}
	}
}

// stateHash is a digest of replica n's whole cron state.
func stateHash(n *node) uint64 {
	snap, err := n.machine.Snapshot()
	if err != nil {
		panic(err)
	}
	h := fnv.New64a()
	h.Write(snap)
	return h.Sum64()
}

// simDispatcher carries replica n's calls to the simulated Nomad, checking
// that each is made under the lease.
type simDispatcher struct {
	c           *cluster
	n           *node
	incarnation uint64
	// The lease the launcher last told (launcher.LeaseFollower): the
	// simulated calls are made at once, so it is checked, not followed.
	toldStint uint64
	toldLive  bool
}

var _ launcher.LeaseFollower = (*simDispatcher)(nil)

// Lease checks the lease the launcher tells: one its replica holds, to no
// later than its own end.
func (d *simDispatcher) Lease(stint uint64, until time.Time) {
	c, n := d.c, d.n
	if stint < d.toldStint {
		c.fail(fmt.Errorf("replica %d's launcher told stint %d after stint %d", n.id, stint, d.toldStint))
	}
	_, held := n.rep.Node().LeaseValidUntil()
	lead := launcher.LeadershipOf(n.rep.Node().Status(), n.rep.Applied(), c.wall(n), c.opts.TickInterval)
	c.fail(c.cronCheck.LeaseTold(c.sched.Now(), n.id, stint, until, lead.LeaseUntil, held))
	d.toldStint, d.toldLive = stint, !until.IsZero()
}

func (d *simDispatcher) Submit(req launcher.Request) {
	c, n := d.c, d.n
	_, held := n.rep.Node().LeaseValidUntil()
	c.fail(c.cronCheck.Call(c.sched.Now(), n.id, req, held))
	c.fail(c.cronCheck.CallStint(c.sched.Now(), n.id, req, d.toldStint, d.toldLive))
	c.trace.Record(fmt.Sprintf("call %d %s %s", n.id, req.Op, req.Identity))
	c.logf("replica %d calls Nomad: %s %s %s", n.id, req.Op, req.Identity, req.ChildID)
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.fakeSuccess && req.Op == launcher.OpDispatch {
		c.sched.After(time.Millisecond, func() {
			d.done(launcher.Result{ID: req.ID, ChildID: req.Spec.NomadJob + "/dispatch-" + req.Identity + "-fake"})
		})
		return
	}
	if c.heldBack[req.Identity] && req.Op == launcher.OpDispatch {
		// A planted false skip is on its way: Nomad never hears of the
		// launch, and the launcher only learns that the call failed.
		c.sched.After(time.Millisecond, func() {
			d.done(launcher.Result{ID: req.ID, Err: errors.New("sim: dispatch held back by a planted bug")})
		})
		return
	}
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.noToken && req.Op == launcher.OpDispatch {
		req.Identity += "-" + strconv.FormatUint(req.ID, 10)
	}
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.runningLooksDone && req.Op == launcher.OpRunning {
		c.sched.After(time.Millisecond, func() { d.done(launcher.Result{ID: req.ID, Found: false}) })
		return
	}
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.slowManual > 0 && req.Op == launcher.OpDispatch && strings.HasSuffix(req.Identity, "-manual") {
		d.holdManual(req, bug.slowManual)
		return
	}
	d.send(req)
}

// holdManual sends a manual launch's dispatch after wait (the slow-manual
// planted bug), as if the launcher had sent it then: only if its replica
// still leads in the same ballot and holds the lease, with the lease's
// deadline as it is then, so that the delay breaks nothing but the
// launch's timing (a call sent after the lease ended could land after a
// successor's look-up, and make a second child). Otherwise the dispatch
// fails without reaching Nomad.
func (d *simDispatcher) holdManual(req launcher.Request, wait time.Duration) {
	c, n := d.c, d.n
	ballot := n.rep.Node().Status().Ballot
	c.sched.After(wait, func() {
		if !n.up || n.incarnation != d.incarnation {
			return // the replica crashed since: nothing is sent
		}
		st := n.rep.Node().Status()
		lead := launcher.LeadershipOf(st, n.rep.Applied(), c.wall(n), c.opts.TickInterval)
		_, held := n.rep.Node().LeaseValidUntil()
		if !lead.Leader || st.Ballot != ballot || !held || !lead.LeaseUntil.After(c.wall(n)) {
			d.done(launcher.Result{ID: req.ID, Err: errors.New("sim: manual dispatch held back by a planted bug past the lease")})
			return
		}
		c.faults["manual dispatch held back"]++ // not a fault: proof the bug acted
		req.Deadline = lead.LeaseUntil
		d.send(req)
	})
}

// simRequestTimeout is how long a call made under the lease waits for
// its answer, past the lease's end if need be, as nomad.Dispatcher's
// RequestTimeout lets it (8 s against a lease of 0.6-0.8 s). simnomad
// applies a call when it arrives, whatever its caller's deadline, so this
// bounds only when the launcher hears, not when a call lands
// (MaxCallLatency).
const simRequestTimeout = 2 * time.Second

// send makes call req to the simulated Nomad: at once, so before its
// lease's end or not at all (a late submit); its answer is waited for
// until simRequestTimeout.
func (d *simDispatcher) send(req launcher.Request) {
	c, n := d.c, d.n
	deadline := c.sched.Now()
	if left := req.Deadline.Sub(c.wall(n)); left > 0 {
		deadline = n.clock.TrueAfter(c.sched.Now(), max(left, simRequestTimeout))
	}
	c.nomad.Call(req, deadline, d.done)
}

func (d *simDispatcher) done(r launcher.Result) {
	n := d.n
	if !n.up || n.incarnation != d.incarnation {
		return // the replica crashed since: the answer is lost
	}
	n.launcher.Done(r)
	d.c.stepLauncher(n)
}

// purgeOdds: one client command in purgeOdds, before the heal, starts a
// purge.
const purgeOdds = 150

// purge returns the next deletion of a purge: now and then the client
// deletes every job but one, one command at a time, so that states (a
// restored one among them) fall far below their peak and rebuild their
// maps and leave a restore's memory, under faults (mapshrink; the
// server's floor is more jobs than a run holds). Done once replica n's
// state holds one job at most, or after twice as many commands as jobs
// (n's view may lag, and deletions conflict).
func (c *cluster) purge(n *node) (state.DeleteJob, bool) {
	if c.purgeLeft == 0 {
		if c.healed || c.rng.IntN(purgeOdds) != 0 {
			return state.DeleteJob{}, false
		}
		c.purgeLeft = 2 * len(jobNames)
		c.purges++
	}
	c.purgeLeft--
	if c.healed || n.machine.JobCount() <= 1 {
		c.purgeLeft = 0
		return state.DeleteJob{}, false
	}
	for _, name := range jobNames {
		if j, ok := n.machine.Job(name); ok {
			return state.DeleteJob{Name: name, IfVersion: j.Version}, true
		}
	}
	panic("sim: a state of more than one job holds none of the client's")
}

// clientCommand is the client's next edit, read against replica n's state
// (possibly stale: a conflict is refused by the log, as for a real
// client). Until the faults heal, it creates, replaces, deletes, pauses
// and resumes jobs; afterwards it only touches what cannot move a
// schedule (meta, target, pause, resume, creating missing jobs), so that the
// healthy stretch checks lateness alone.
func (c *cluster) clientCommand(n *node) state.Command {
	if del, ok := c.purge(n); ok {
		return del
	}
	name := jobNames[c.rng.IntN(len(jobNames))]
	j, exists := n.machine.Job(name)
	c.rev++
	k := c.rng.IntN(100)
	switch {
	case k < 15 && exists:
		return state.Pause{Name: name}
	case k < 30 && exists:
		return state.Resume{Name: name}
	case k < 38 && exists && !c.healed:
		return state.DeleteJob{Name: name, IfVersion: j.Version}
	case k < 43 && exists:
		// A manual launch, now; some forced past the pause and policy.
		return state.Trigger{Name: name, At: c.trueWall().Truncate(time.Second), Force: c.rng.IntN(2) == 0}
	case k < 47 && exists && !j.LastStartedAt.IsZero() && j.LastStartedAt.After(c.trueWall().Add(-30*time.Second)):
		// Re-run what did not run in the last half minute. Never forced:
		// a forced backfill of an unknown slot is the operator taking the
		// risk of a second child, which invariant 7 would rightly flag.
		return state.Backfill{Name: name, From: c.trueWall().Add(-30 * time.Second), To: j.LastStartedAt, At: c.trueWall()}
	}
	spec := jobSpecs[c.rng.IntN(len(jobSpecs))]
	ifVersion := uint64(0)
	if exists {
		ifVersion = j.Version
		if c.healed || k < 70 {
			spec = j.Spec // an edit of what the job passes to Nomad only
			if k%4 == 0 {
				// Or of where: a launch concluded unknown is then looked
				// up where it went, not where the job is.
				spec.NomadJob, spec.Namespace = otherTarget(spec.Target())
			}
		}
	}
	spec.Meta = map[string]string{"rev": strconv.FormatUint(c.rev, 10)}
	return state.PutJob{Name: name, Spec: spec, IfVersion: ifVersion, At: c.trueWall()}
}

// otherTarget is a Nomad job and namespace, other than t's, that Nomad
// takes dispatches for: the simulator's two.
func otherTarget(t state.Target) (nomadJob, namespace string) {
	if t.NomadJob == "batch" && t.Namespace == "" {
		return "report", "ops"
	}
	return "batch", ""
}

// cronFinal runs the end-of-run cron checks against the most up-to-date
// replica's state and everything Nomad made.
func (c *cluster) cronFinal() error {
	var ref *node
	for _, n := range c.nodes {
		if n.up && (ref == nil || n.rep.Applied() > ref.rep.Applied()) {
			ref = n
		}
	}
	if ref == nil {
		return errors.New("sim: no replica up at the end")
	}
	var children []check.NomadChild
	for _, ch := range c.nomad.Children() {
		children = append(children, c.checkerChild(ch))
	}
	healthy := c.healthy
	if !c.healthyFrom.IsZero() {
		healthy = append(healthy, check.Interval{From: c.healthyFrom, To: c.trueWall()})
	}
	err := c.cronCheck.Final(check.CronFinal{
		End: c.trueWall(), Bound: c.opts.LatenessBound, Healthy: healthy,
		Children: children, Jobs: ref.machine.Jobs(), Open: ref.machine.OpenLaunches(),
	})
	if err != nil && c.opts.Log != nil {
		for _, o := range ref.machine.OpenLaunches() {
			for _, n := range c.nodes {
				if n.up && n.launcher.Leading() {
					c.logf("open %s (%s): launcher %d: %s", o.Identity, o.Kind, n.id, n.launcher.Describe(o.Identity))
				}
			}
		}
	}
	return err
}

// checkerChild is Nomad's record of a child as the cron checker reads it,
// on the scheduled times' clock.
func (c *cluster) checkerChild(ch simnomad.Child) check.NomadChild {
	nc := check.NomadChild{ID: ch.ID, Token: ch.Token, CreatedAt: c.opts.Epoch.Add(ch.CreatedAt), FinishedAt: c.opts.Epoch.Add(ch.FinishedAt)}
	if ch.Collected {
		nc.CollectedAt = c.opts.Epoch.Add(ch.CollectedAt)
	}
	return nc
}

// nomadView is the cron checker's view of the run's Nomad.
type nomadView struct{ c *cluster }

func (v nomadView) Refuses(t state.Target) bool {
	return v.c.nomad.Refuses(t.Namespace, t.Region, t.NomadJob)
}

func (v nomadView) Child(id string) (check.NomadChild, bool) {
	ch, ok := v.c.nomad.ChildByID(id)
	if !ok {
		return check.NomadChild{}, false
	}
	return v.c.checkerChild(ch), true
}

// Nomad faults.

func (c *cluster) faultNomadDown() bool {
	if !c.nomad.Up() {
		return false
	}
	c.nomad.SetUp(false)
	down := 300*time.Millisecond + time.Duration(c.rng.Int64N(int64(3*time.Second)))
	if c.rng.IntN(4) == 0 {
		// Past the memory horizon (10 s): the launches open meanwhile
		// are decided after Nomad may have forgotten their tokens.
		down = 12*time.Second + time.Duration(c.rng.Int64N(int64(10*time.Second)))
	}
	c.sched.After(down, func() { c.nomad.SetUp(true) })
	return true
}

func (c *cluster) faultNomadFlaky() bool {
	cfg := c.opts.Nomad
	cfg.Epoch = c.opts.Epoch
	cfg.ReplyLossProbability = 0.3
	// Some calls never leave (a connection's wait outlasts the request):
	// the launcher dispatches those again without a lookup.
	cfg.NotSentProbability = 0.1
	cfg.ReplyLatencyMax = 300 * time.Millisecond
	cfg.RequestLatencyMax = 300 * time.Millisecond
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.nomadGC > 0 {
		cfg.GCThreshold = bug.nomadGC
	}
	if err := c.nomad.SetConfig(cfg); err != nil {
		panic(err)
	}
	c.nomadFlaky = true
	c.sched.After(time.Second+time.Duration(c.rng.Int64N(int64(3*time.Second))), c.nomadNormal)
	return true
}

// nomadNormal puts Nomad back to its healthy configuration.
func (c *cluster) nomadNormal() {
	cfg := c.opts.Nomad
	cfg.Epoch = c.opts.Epoch
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.nomadGC > 0 {
		cfg.GCThreshold = bug.nomadGC
	}
	if err := c.nomad.SetConfig(cfg); err != nil {
		panic(err)
	}
	c.nomadFlaky = false
}

// replicaCounts is what replicas' states and launchers counted: maps
// rebuilt far below their peak, and moves out of a restore's memory.
type replicaCounts struct{ stateMapRebuilds, leaderMapRebuilds, restoreMoves uint64 }

// add adds what replica n's state and launcher counted.
func (r *replicaCounts) add(n *node) {
	r.stateMapRebuilds += n.machine.MapRebuilds()
	r.leaderMapRebuilds += n.launcher.Stats().MapRebuilds
	r.restoreMoves += n.machine.RestoreMoves()
}

// cronStats gathers the run's cron counters.
func (c *cluster) cronStats() CronStats {
	st := CronStats{Nomad: c.nomad.Stats(), Promotions: c.promotions,
		Manual: c.openedByKind[state.LaunchManual], Backfilled: c.openedByKind[state.LaunchBackfill],
		Purges: c.purges}
	counts := c.crashed
	for _, n := range c.nodes {
		if n.up {
			counts.add(n)
		}
	}
	st.StateMapRebuilds, st.LeaderMapRebuilds, st.RestoreMoves = counts.stateMapRebuilds, counts.leaderMapRebuilds, counts.restoreMoves
	_, st.Calls = c.cronCheck.Stats()
	st.SecondChildren = c.cronCheck.SecondChildren()
	st.Checked = c.cronCheck.Counts()
	var ref *node
	for _, n := range c.nodes {
		if n.up && (ref == nil || n.rep.Applied() > ref.rep.Applied()) {
			ref = n
		}
	}
	if ref != nil {
		st.Launches = ref.machine.Stats().Launches
		for _, j := range ref.machine.Jobs() {
			for _, l := range j.History {
				if l.Outcome.Reason == state.ReasonNotKept {
					st.ReasonsNotKept++
				}
			}
		}
	}
	return st
}

// clockMargin bounds how far a replica's wall clock runs ahead of true
// time in a run: every clock starts on true time and drifts at most its
// bound (or a planted bug's) for the run's whole duration, and none jumps.
func clockMargin(o Options) time.Duration {
	ppm := o.Timing.MaxClockDriftPPM
	if bug := plantedBugs[o.Bug]; bug != nil {
		ppm = max(ppm, bug.clockDriftPPM)
	}
	return o.Duration/1_000_000*time.Duration(ppm) + time.Millisecond
}

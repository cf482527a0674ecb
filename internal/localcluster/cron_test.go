package localcluster

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/internal/fakenomad"
	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/memstore"
)

// newFakeNomad is one Nomad shared by every replica's Dispatcher, which
// answers lookups from inside Submit and dispatches from another
// goroutine, so that both ways back to the replica are used.
func newFakeNomad() *fakenomad.Nomad {
	return fakenomad.New(fakenomad.Options{InlineLookups: true})
}

// heard records, per replica, the launches the Applied hook saw finish.
type heard struct {
	mu       sync.Mutex
	finished map[paxos.ReplicaID]map[string]state.Outcome
}

func (h *heard) applied(id paxos.ReplicaID, _ uint64, c state.Command, err error) {
	f, ok := c.(state.LaunchFinished)
	if !ok || err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finished[id] == nil {
		h.finished[id] = map[string]state.Outcome{}
	}
	h.finished[id][state.Identity(f.Job, f.ScheduledAt)] = f.Outcome
}

func (h *heard) of(id paxos.ReplicaID) map[string]state.Outcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.finished[id])
}

// cronEnv is a cron-mode cluster's options over in-memory stores that
// survive a Close (reopened by restarting them), a fake Nomad and a
// record of what the replicas applied.
type cronEnv struct {
	t      *testing.T
	nomad  *fakenomad.Nomad
	heard  *heard
	mu     sync.Mutex
	stores map[paxos.ReplicaID]*memstore.Store
}

func newCronEnv(t *testing.T) *cronEnv {
	return &cronEnv{t: t, nomad: newFakeNomad(), heard: &heard{finished: map[paxos.ReplicaID]map[string]state.Outcome{}}, stores: map[paxos.ReplicaID]*memstore.Store{}}
}

func (e *cronEnv) options() Options {
	o := testOptions("")
	// Small enough that the tests take and restore snapshots of the cron
	// state, not only replay the log.
	o.Snapshots.EveryEntries = 6
	// A replica a stall of the machine left behind catches up from the
	// log's tail, not from a leader's snapshot: a restored snapshot skips
	// the Applied hook of the launches it covers, whose finish
	// deleteAndSettle checks every replica heard (a stall injected in review
	// failed it so).
	o.Snapshots.TailEntries = 1 << 20
	o.OpenStore = func(id paxos.ReplicaID) (storage.Store, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		s, ok := e.stores[id]
		if ok {
			s.Restart() // reopened after Close, with what it synced
		} else {
			s = memstore.New()
			e.stores[id] = s
		}
		return s, nil
	}
	o.Cron = &CronOptions{
		Launcher: launcher.Config{
			MemoryHorizon:   time.Hour,
			RetryAfter:      50 * time.Millisecond,
			ProposalTimeout: time.Second,
			// The fake Nomad takes effect at once: a new leader need
			// not wait long before looking up what is open.
			MaxCallLatency: 100 * time.Millisecond,
		},
		NewDispatcher: e.nomad.Dispatcher,
		Applied:       e.heard.applied,
	}
	return o
}

// waitLaunching waits for a launcher to lead, other than not's, and
// returns it: of two that say so, the one of the higher ballot (the
// other's status is stale).
func waitLaunching(ctx context.Context, t *testing.T, c *Cluster, not paxos.ReplicaID) paxos.ReplicaID {
	t.Helper()
	var id paxos.ReplicaID
	err := c.waitUntil(ctx, func() bool {
		var best Status
		for _, s := range c.Statuses() {
			if s.Launching && s.Err == nil && s.ID != not && (best.ID == paxos.None || best.Ballot.Less(s.Ballot)) {
				best = s
			}
		}
		id = best.ID
		return id != paxos.None
	})
	if err != nil {
		t.Fatalf("no launcher leads: %v: %+v", err, c.Statuses())
	}
	return id
}

// waitDispatched waits until Nomad holds at least want children of each job.
func (e *cronEnv) waitDispatched(ctx context.Context, jobs []string, want map[string]int) map[string]int {
	e.t.Helper()
	for {
		got := e.nomad.DispatchedPerJob(jobs)
		done := true
		for _, j := range jobs {
			done = done && got[j] >= want[j]
		}
		if done {
			return got
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("waiting for %v dispatches: %v, got %v", want, ctx.Err(), got)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func putJobs(ctx context.Context, t *testing.T, c *Cluster, jobs []string, schedule string) {
	t.Helper()
	for _, j := range jobs {
		cmd := state.PutJob{Name: j, Spec: state.JobSpec{Schedule: schedule, NomadJob: "batch"}, At: time.Now()}
		proposeOnce(ctx, t, c, cmd, func(m *state.Machine) bool {
			got, ok := m.Job(j)
			return ok && got.Version == got.CreatedVersion && got.CreatedAt.Equal(cmd.At) &&
				got.Spec.Schedule == schedule && got.Spec.NomadJob == "batch"
		})
	}
}

// proposeOnce proposes cmd through the cluster and fails t unless the
// state accepts it. ErrOutcomeUnknown (a replica restored a snapshot past
// the command's slot, as one a stall left behind does without a log tail
// to catch up from) says that slot is chosen, but not with what: then
// took, run on the state of a replica that serves reads (which holds
// every chosen slot before its term), says whether cmd took effect, and
// cmd is sent again only if not. A command sent again that had taken
// effect after all gets the state's verdict on a second one, which fails
// t.
func proposeOnce(ctx context.Context, t *testing.T, c *Cluster, cmd state.Command, took func(*state.Machine) bool) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := c.ProposeCommand(ctx, cmd)
		if !errors.Is(err, ErrOutcomeUnknown) || attempt == 5 {
			if err != nil {
				t.Fatalf("%T %+v: %v", cmd, cmd, err)
			}
			return
		}
		done := false
		servingLeader(ctx, t, c, func(l *launcher.Launcher) { done = took(l.Machine()) })
		if done {
			return
		}
		t.Logf("%T %+v: %v, and the state shows it did not take effect: sending it again", cmd, cmd, err)
	}
}

// deleteAndSettle deletes the jobs, waits until the leader's launcher has
// concluded every open launch and the live replicas applied the same log,
// then checks they hold the same cron state and heard the same launches
// finish, each of them dispatched to the child Nomad made.
func (e *cronEnv) deleteAndSettle(ctx context.Context, c *Cluster, jobs []string) {
	e.t.Helper()
	t := e.t
	for _, j := range jobs {
		proposeOnce(ctx, t, c, state.DeleteJob{Name: j}, func(m *state.Machine) bool {
			_, ok := m.Job(j)
			return !ok
		})
	}
	var live []*Replica
	for _, r := range c.replicas {
		if r.Status().Err == nil {
			live = append(live, r)
		}
	}
	var snaps [][]byte
	err := c.waitUntil(ctx, func() bool {
		snaps = snaps[:0]
		var last uint64
		for i, r := range live {
			var open int
			var slot uint64
			var snap []byte
			var err error
			// Read together on the loop: the replica's Status, read after,
			// once counted a delete applied after the snapshot was taken,
			// and two replicas' states a slot apart were compared.
			if cerr := r.Cron(ctx, func(l *launcher.Launcher) {
				m := l.Machine()
				open, slot = len(m.OpenLaunches()), m.LastSlot()
				snap, err = m.Snapshot()
			}); cerr != nil || err != nil {
				t.Fatalf("replica %d: %v %v", r.ID(), cerr, err)
			}
			if open > 0 || (i > 0 && slot != last) {
				return false
			}
			last = slot
			snaps = append(snaps, snap)
		}
		return true
	})
	if err != nil {
		t.Fatalf("the cluster did not settle: %v: %+v", err, c.Statuses())
	}
	for i := range snaps {
		if !bytes.Equal(snaps[i], snaps[0]) {
			t.Fatalf("replicas %d and %d hold different cron states at the same slot", live[0].ID(), live[i].ID())
		}
	}
	ss := c.Statuses()
	for _, r := range live[1:] {
		if s, s0 := ss[r.ID()-1], ss[live[0].ID()-1]; s.Hash != s0.Hash || s.Commands != s0.Commands {
			t.Fatalf("replicas applied different logs: %+v", ss)
		}
	}
	if rep := e.nomad.Repeated(); len(rep) > 0 {
		t.Fatalf("dispatched more than once: %v", rep)
	}
	children := e.nomad.Children()
	for _, r := range live {
		got := e.heard.of(r.ID())
		for id, child := range children {
			o, ok := got[id]
			if !ok || o.Kind != state.OutcomeDispatched || o.ChildID != child {
				t.Errorf("replica %d: launch %s finished %+v (heard %t), want dispatched to %s", r.ID(), id, o, ok, child)
			}
		}
		for id, o := range got {
			if _, ok := children[id]; !ok {
				t.Errorf("replica %d: launch %s finished %+v without a child in Nomad", r.ID(), id, o)
			}
		}
	}
}

// Jobs every second launch through the leader's launcher; the leader is
// stopped while a dispatch's answer is lost, and the next one looks up
// what its predecessor left open and goes on: no launch is dispatched twice, and every replica
// records each launch dispatched to the child Nomad made.
func TestCronLaunchesAcrossLeaderStop(t *testing.T) {
	for attempt := 1; !launchAcrossLeaderStop(t); attempt++ {
		if attempt == 3 {
			t.Fatal("the lead moved before the stop in every attempt")
		}
	}
}

// launchAcrossLeaderStop runs TestCronLaunchesAcrossLeaderStop on a
// cluster of its own. It returns false, the run void, when the replica
// stopped had lost the lead before its stop (a stall of the machine
// longer than the election timeout moves it): the launcher that then
// leads may be waiting for the answer kept, which never comes (the fake
// Nomad abandons no call), and its launch would stay open.
func launchAcrossLeaderStop(t *testing.T) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newCronEnv(t)
	c := start(t, e.options())
	defer c.Close()
	jobs := []string{"a", "b", "c"}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	putJobs(ctx, t, c, jobs, "@every 1s")
	waitLaunching(ctx, t, c, paxos.None)
	e.waitDispatched(ctx, jobs, map[string]int{"a": 2, "b": 2, "c": 2})

	if err := e.nomad.HoldUntilKept(ctx); err != nil {
		t.Fatalf("no dispatch while holding: %v", err)
	}
	// Found now, not before the dispatches waited for: the lead may have
	// moved since, and its launcher holds the answer kept.
	leader := waitLaunching(ctx, t, c, paxos.None)
	if err := c.Stop(leader); err != nil {
		t.Fatal(err)
	}
	e.nomad.Release()
	// A stopped replica's status is the one it published last: if it
	// still led then, and none led on a higher ballot, no other could lead
	// before its lease lapsed.
	last := c.Replica(leader).Status()
	moved := !last.Launching
	for _, s := range c.Statuses() {
		moved = moved || (s.ID != leader && s.Role == paxos.Leader && last.Ballot.Less(s.Ballot))
	}
	if moved {
		t.Logf("replica %d lost the lead before it was stopped (%+v); starting again", leader, c.Statuses())
		return false
	}
	if err := c.Replica(leader).Propose(ctx, nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("propose on the stopped replica: got %v, want ErrStopped", err)
	}
	// Counted once the stopped replica can dispatch no more (not before
	// the hold, as a stall there could let the leaders meanwhile make the
	// children waited for below): those made from now on are the live
	// replicas'.
	got := e.nomad.DispatchedPerJob(jobs)
	var live []paxos.ReplicaID
	for id := range paxos.ReplicaID(len(c.replicas)) {
		if id+1 != leader {
			live = append(live, id+1)
		}
	}
	liveDispatches := func() int {
		n := 0
		for _, id := range live {
			n += e.nomad.DispatchesFrom(id)
		}
		return n
	}
	before := liveDispatches()
	next := waitLaunching(ctx, t, c, leader)
	for _, j := range jobs {
		got[j] += 2
	}
	e.waitDispatched(ctx, jobs, got)
	// Counted over both live replicas, not only next: another stall may
	// move the lead again before next dispatched anything.
	if liveDispatches() == before {
		t.Fatalf("the replicas leading after the stop (%d first) dispatched nothing", next)
	}
	e.deleteAndSettle(ctx, c, jobs)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return true
}

// The whole cluster is closed, while a dispatch's answer is lost, and
// reopened from its stores (a snapshot of the cron state and the log after
// it): the launches go on from where the
// log says they are, and none is dispatched twice.
func TestCronLaunchesAcrossRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newCronEnv(t)
	c := start(t, e.options())
	jobs := []string{"a", "b"}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	putJobs(ctx, t, c, jobs, "@every 1s")
	got := e.waitDispatched(ctx, jobs, map[string]int{"a": 3, "b": 3})
	if err := e.nomad.HoldUntilKept(ctx); err != nil {
		t.Fatalf("no dispatch while holding: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	e.nomad.Release()
	snapshots := 0
	for _, s := range e.stores {
		s.Restart()
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if snap.Meta.Index > 0 {
			snapshots++
		}
	}
	if snapshots == 0 {
		t.Fatal("no replica took a snapshot: the restart would not restore one")
	}

	c = start(t, e.options())
	waitLaunching(ctx, t, c, paxos.None)
	restored := false
	for _, s := range c.Statuses() {
		restored = restored || s.Restores > 0
	}
	if !restored {
		t.Fatalf("no replica restored its snapshot: %+v", c.Statuses())
	}
	for _, j := range jobs {
		got[j] += 2
	}
	e.waitDispatched(ctx, jobs, got)
	e.deleteAndSettle(ctx, c, jobs)
}

// Propose answers with the state's verdict in cron mode: the frame
// Propose puts before a command never reaches the state.
func TestCronProposeVerdicts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newCronEnv(t)
	c := start(t, e.options())
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	put := state.PutJob{Name: "j", Spec: state.JobSpec{Schedule: "0 0 1 1 *", NomadJob: "batch"}, At: time.Now()}
	if err := c.ProposeCommand(ctx, put); err != nil {
		t.Fatalf("creating a job: %v", err)
	}
	if err := c.ProposeCommand(ctx, put); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("creating it again: got %v, want state.ErrConflict", err)
	}
	if err := c.Propose(ctx, []byte("not a command")); !errors.Is(err, state.ErrDecode) {
		t.Fatalf("garbage: got %v, want state.ErrDecode", err)
	}
	// Read on a replica that serves reads, not on the one Leader names: a
	// stall of the machine past the election timeout can leave none
	// leading for a moment, or a new leader that has not yet applied the
	// commands its predecessor answered.
	var jobs []state.Job
	var st state.Stats
	servingLeader(ctx, t, c, func(l *launcher.Launcher) {
		jobs, st = l.Machine().Jobs(), l.Machine().Stats()
	})
	// Applied is not checked: it also counts the launcher's own commands (its Takeover).
	if len(jobs) != 1 || jobs[0].Name != "j" || st.Rejected != 1 || st.Undecodable != 1 {
		t.Fatalf("state holds %+v, stats %+v; want job j, 1 rejected, 1 undecodable", jobs, st)
	}
}

// cronCluster starts a cron-mode cluster, with a context that ends with
// the test (a minute at most).
func cronCluster(t *testing.T) (context.Context, *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, start(t, newCronEnv(t).options())
}

// servingLeader waits until a replica may answer reads from its own state
// as the cluster's (it leads, holds the lease and applied everything
// chosen before its term: node.ServesReads) and returns it with its term.
// read, when set, runs on that state in the same visit to the loop.
func servingLeader(ctx context.Context, t *testing.T, c *Cluster, read func(*launcher.Launcher)) (*Replica, paxos.Ballot) {
	t.Helper()
	for {
		for _, r := range c.replicas {
			if s := r.Status(); s.Role != paxos.Leader || s.Err != nil {
				continue
			}
			var term paxos.Ballot
			serves := false
			if err := r.Cron(ctx, func(l *launcher.Launcher) {
				if serves = r.ServesReads(); serves {
					term = r.Leadership().Term
					if read != nil {
						read(l)
					}
				}
			}); err != nil {
				t.Fatalf("replica %d: %v", r.ID(), err)
			}
			if serves {
				return r, term
			}
		}
		// Polled, as the lease a leader gains may change nothing it
		// publishes.
		select {
		case <-ctx.Done():
			t.Fatalf("no replica serves reads: %v: %+v", ctx.Err(), c.Statuses())
		case <-time.After(c.opts.TickInterval):
		}
	}
}

// onServingLeader runs call on a replica that serves reads and returns
// its error. A stall of the machine longer than the election timeout can
// move the lead before or while call runs: when call failed with
// paxos.ErrNotLeader (nothing proposed) or ErrDropped (the command's slot
// went to another value, so it was chosen nowhere) and the replica asked
// no longer leads in the term it served in, call runs again, whole, on
// the replica that serves then. The error of a replica that still leads
// in that term is returned: refusing there is the bug.
func onServingLeader(ctx context.Context, t *testing.T, c *Cluster, call func(*Replica) error) error {
	t.Helper()
	for attempt := 1; ; attempt++ {
		n, term := servingLeader(ctx, t, c, nil)
		err := call(n)
		if !errors.Is(err, paxos.ErrNotLeader) && !errors.Is(err, ErrDropped) || attempt == 5 {
			return err
		}
		var now launcher.Leadership
		if cerr := n.Cron(ctx, func(*launcher.Launcher) { now = n.Leadership() }); cerr != nil {
			t.Fatalf("replica %d: %v", n.ID(), cerr)
		}
		if now.Leader && now.Term == term {
			return err
		}
		t.Logf("replica %d lost the lead of term %v while asked (%v, now %+v); asking the next leader", n.ID(), term, err, now)
	}
}

// ProposeCommandThen reads the state a command left, on the loop, before
// any later command; a refused command does not run it.
func TestCronProposeThenReadsTheStateLeft(t *testing.T) {
	ctx, c := cronCluster(t)
	proposeThen := func(cmd state.Command, then func(*launcher.Launcher)) error {
		return onServingLeader(ctx, t, c, func(n *Replica) error { return n.ProposeCommandThen(ctx, cmd, then) })
	}
	put := state.PutJob{Name: "j", Spec: state.JobSpec{Schedule: "0 0 1 1 *", NomadJob: "batch"}, At: time.Now()}
	var created state.Job
	if err := proposeThen(put, func(l *launcher.Launcher) { created, _ = l.Machine().Job("j") }); err != nil {
		t.Fatal(err)
	}
	if created.Name != "j" || created.Version == 0 {
		t.Fatalf("then saw %+v, want job j at a version", created)
	}
	put.IfVersion, put.Spec.Schedule = created.Version, "0 0 2 1 *"
	var updated state.Job
	if err := proposeThen(put, func(l *launcher.Launcher) { updated, _ = l.Machine().Job("j") }); err != nil {
		t.Fatal(err)
	}
	if updated.Version <= created.Version || updated.Spec.Schedule != "0 0 2 1 *" {
		t.Fatalf("then saw %+v after an update of %+v", updated, created)
	}
	ran := false
	if err := proposeThen(put, func(*launcher.Launcher) { ran = true }); !errors.Is(err, state.ErrConflict) || ran {
		t.Fatalf("a stale version: got %v and then ran %v, want state.ErrConflict and no run", err, ran)
	}
}

// ProposeCommandFrom builds the command from the state it reads on the
// loop and proposes it in the same visit: a nil command proposes nothing,
// build's error comes back unproposed, a command built from the version
// read is applied and then sees its result, and one built from a stale
// version is refused with the state's verdict.
func TestCronProposeFromReadsAndProposesInOneVisit(t *testing.T) {
	ctx, c := cronCluster(t)
	// proposeFrom asks a replica that serves reads, so that build reads
	// every write acknowledged before, and asks again after a lead move.
	proposeFrom := func(ctx context.Context, build func(*launcher.Launcher) (state.Command, error), then func(*launcher.Launcher)) (proposed bool, err error) {
		err = onServingLeader(ctx, t, c, func(n *Replica) error {
			proposed, err = n.ProposeCommandFrom(ctx, build, then)
			return err
		})
		return proposed, err
	}
	spec := state.JobSpec{Schedule: "0 0 1 1 *", NomadJob: "batch"}
	// put builds a write of spec over the version it reads, or nothing
	// when the job already has spec.
	put := func(l *launcher.Launcher) (state.Command, error) {
		cur, ok := l.Machine().Job("j")
		if ok && cur.Spec.Schedule == spec.Schedule {
			return nil, nil
		}
		return state.PutJob{Name: "j", Spec: spec, IfVersion: cur.Version, At: time.Now()}, nil
	}
	var after state.Job
	read := func(l *launcher.Launcher) { after, _ = l.Machine().Job("j") }

	proposed, err := proposeFrom(ctx, put, read)
	if !proposed || err != nil || after.Name != "j" || after.Version == 0 {
		t.Fatalf("a new job: proposed %v, err %v, then saw %+v", proposed, err, after)
	}
	created := after
	if proposed, err := proposeFrom(ctx, put, read); proposed || err != nil {
		t.Fatalf("the same spec again: proposed %v, err %v; want nothing proposed", proposed, err)
	}
	spec.Schedule = "0 0 2 1 *"
	if proposed, err := proposeFrom(ctx, put, read); !proposed || err != nil || after.Version <= created.Version || after.Spec.Schedule != spec.Schedule {
		t.Fatalf("an update: proposed %v, err %v, then saw %+v after %+v", proposed, err, after, created)
	}
	errBuild := errors.New("build refused")
	if proposed, err := proposeFrom(ctx, func(*launcher.Launcher) (state.Command, error) { return nil, errBuild }, read); proposed || !errors.Is(err, errBuild) {
		t.Fatalf("build's error: proposed %v, err %v", proposed, err)
	}
	stale := func(*launcher.Launcher) (state.Command, error) {
		return state.PutJob{Name: "j", Spec: spec, IfVersion: created.Version, At: time.Now()}, nil
	}
	ran := false
	if proposed, err := proposeFrom(ctx, stale, func(*launcher.Launcher) { ran = true }); !proposed || !errors.Is(err, state.ErrConflict) || ran {
		t.Fatalf("a stale version: proposed %v, err %v, then ran %v; want state.ErrConflict and no run", proposed, err, ran)
	}
	invalid := func(*launcher.Launcher) (state.Command, error) {
		return state.PutJob{Name: "j", Spec: state.JobSpec{Schedule: "not a schedule", NomadJob: "batch"}, At: time.Now()}, nil
	}
	if proposed, err := proposeFrom(ctx, invalid, read); proposed || !errors.Is(err, state.ErrInvalid) {
		t.Fatalf("an invalid command: proposed %v, err %v; want state.ErrInvalid unproposed", proposed, err)
	}
	// A caller whose context ends while its call is on the loop learns
	// whether build proposed: the caller is not woken when build returns,
	// only when the proposal is answered (or build proposed nothing).
	spec.Schedule = "0 0 3 1 *"
	cctx, cancel := context.WithCancel(ctx)
	cancelling := func(l *launcher.Launcher) (state.Command, error) {
		cancel()
		return put(l)
	}
	if proposed, err := proposeFrom(cctx, cancelling, nil); !proposed || !errors.Is(err, context.Canceled) {
		t.Fatalf("a context ended after build: proposed %v, err %v; want proposed and context.Canceled", proposed, err)
	}
	cctx, cancel = context.WithCancel(ctx)
	nothing := func(*launcher.Launcher) (state.Command, error) { cancel(); return nil, nil }
	if proposed, err := proposeFrom(cctx, nothing, nil); proposed || err != nil {
		t.Fatalf("a context ended in a build that proposed nothing: proposed %v, err %v; want neither", proposed, err)
	}
}

func TestCronOptionsAndHashMode(t *testing.T) {
	good := func() Options {
		o := testOptions("")
		o.OpenStore = func(paxos.ReplicaID) (storage.Store, error) { return memstore.New(), nil }
		o.Cron = &CronOptions{Launcher: launcher.Config{MemoryHorizon: time.Hour}, NewDispatcher: newFakeNomad().Dispatcher}
		return o
	}
	for name, mutate := range map[string]func(*Options){
		"no dispatcher":  func(o *Options) { o.Cron.NewDispatcher = nil },
		"machine set":    func(o *Options) { o.Cron.Launcher.Machine = state.New() },
		"applied set":    func(o *Options) { o.Cron.Launcher.Applied = func(uint64, state.Command, error) {} },
		"no horizon":     func(o *Options) { o.Cron.Launcher.MemoryHorizon = 0 },
		"negative limit": func(o *Options) { o.Cron.Launcher.MaxInflight = -1 },
	} {
		o := good()
		mutate(&o)
		c, err := Start(o)
		if err == nil {
			_ = c.Close()
		}
		if !errors.Is(err, ErrConfig) && !errors.Is(err, launcher.ErrConfig) {
			t.Errorf("%s: Start: got %v, want a config error", name, err)
		}
	}

	c := start(t, testOptions(t.TempDir()))
	if err := c.ProposeCommand(context.Background(), state.Pause{Name: "j"}); !errors.Is(err, ErrNotCron) {
		t.Errorf("ProposeCommand in hash mode: got %v, want ErrNotCron", err)
	}
	if err := c.Replica(1).Cron(context.Background(), func(*launcher.Launcher) {}); !errors.Is(err, ErrNotCron) {
		t.Errorf("Cron in hash mode: got %v, want ErrNotCron", err)
	}
	build := func(*launcher.Launcher) (state.Command, error) { return state.Pause{Name: "j"}, nil }
	if proposed, err := c.Replica(1).ProposeCommandFrom(context.Background(), build, nil); proposed || !errors.Is(err, ErrNotCron) {
		t.Errorf("ProposeCommandFrom in hash mode: got %v, %v, want ErrNotCron", proposed, err)
	}
}

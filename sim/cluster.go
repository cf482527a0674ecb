package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/replica"
	"paxcron/cron/state"
	"paxcron/paxos"
	"paxcron/sim/check"
	"paxcron/sim/simclock"
	"paxcron/sim/simnet"
	"paxcron/sim/simnomad"
	"paxcron/storage"
	"paxcron/storage/memstore"
)

// node is one simulated replica: its disk survives crashes, everything
// else is rebuilt on restart.
type node struct {
	id    paxos.ReplicaID
	disk  *memstore.Store
	store storage.Store // disk, or a planted-bug wrapper around it
	clock *simclock.Clock
	rep   *replica.Replica
	// machine is the replica's cron state, launcher the state machine
	// the replica applies the log to.
	machine  *state.Machine
	launcher *launcher.Launcher
	stepping bool // inside stepLauncher
	up       bool
	wiped    bool // restarts as a rebuilding learner
	// crashArmed is set from arming a crash in the next write until the
	// replica crashes (or the faults heal).
	crashArmed bool
	// corrupted is set from injecting a flipped byte until it is found;
	// the disk may be lost then, so it counts as impaired.
	corrupted bool
	tick      simclock.Timer
	restart   simclock.Timer
	// incarnation counts starts: a write completing after a crash belongs
	// to a dead incarnation and never happens.
	incarnation  uint64
	writesDoneAt time.Duration // when the last write handed out completes
	// snapDoneAt is when the local snapshot handed out last completes: it
	// may complete after writes handed out later, never before those
	// handed out earlier.
	snapDoneAt time.Duration
	// moreScheduled is set while a Process is scheduled for the work a bounded
	// one left (Options.MaxApplyPerProcess).
	moreScheduled bool
}

// cluster is one run: every source of nondeterminism is owned here and
// drawn from one seed.
type cluster struct {
	opts Options
	rng  *rand.Rand
	// detector draws the failure detector's delays, apart from rng so
	// that it does not shift every other draw of a seed; naming the
	// launchers' cluster IDs, for the same reason.
	detector *rand.Rand
	naming   *rand.Rand
	sched    *simclock.Scheduler
	net      *simnet.Network
	nodes    []*node
	members  paxos.Membership

	checks   *check.Consensus
	lease    *check.Lease
	holders  []paxos.ReplicaID // scratch for lease checks
	live     *check.Liveness
	corrupt  *check.Corruption
	ids      *check.ClusterIDs
	trace    *check.Trace
	slotHash map[uint64]uint64 // state machine hash after each slot, first seen
	pending  map[string]paxos.ReplicaID
	healed   bool
	failure  error
	faults   map[string]int
	acked    int

	nomad      *simnomad.Nomad
	cronCheck  *check.Cron
	cronSlot   uint64 // the last slot the cron checker saw
	rev        uint64 // the client's edits, to make each one unique
	promotions uint64
	// crashed is what crashed replicas' states and launchers counted.
	crashed replicaCounts
	// purges and purgeLeft are the client's purges and the commands the
	// one under way may still take (purge).
	purges    uint64
	purgeLeft int
	// openedByKind counts launches Trigger and Backfill opened.
	openedByKind [3]uint64
	// healthyFrom is when, after healing, a leader held the lease (plus a
	// settling margin): from then on launches must be on time.
	healthyFrom time.Time
	// healthy are the healthy intervals before the faults healed, closed
	// (the tail, from healthyFrom, is added at the end); health is the
	// one under way (see health.go).
	healthy []check.Interval
	health  health
	// nomadFlaky and handingOver are faults under way: Nomad losing
	// replies, a leader draining before it steps down.
	nomadFlaky  bool
	handingOver bool
	// heldBack holds the launches a planted false skip concludes, until a
	// conclusion of theirs is applied: their dispatches never reach Nomad.
	heldBack map[string]bool
	// dispatched is each job's latest child concluded dispatched, as
	// chosen: a forbid skip naming another is one that found the child of
	// a launch concluded unknown (counted as proof that path ran).
	dispatched map[string]string
}

func newCluster(opts Options) (*cluster, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &cluster{
		opts:       opts,
		rng:        rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15)),
		detector:   rand.New(rand.NewPCG(opts.Seed, 0xd37ec7)),
		naming:     rand.New(rand.NewPCG(opts.Seed, 0xc1d)),
		ids:        check.NewClusterIDs(),
		sched:      simclock.NewScheduler(),
		checks:     check.NewConsensus(),
		lease:      check.NewLease(),
		live:       check.NewLiveness(opts.LivenessBound),
		corrupt:    check.NewCorruption(),
		trace:      check.NewTrace(),
		slotHash:   map[uint64]uint64{},
		pending:    map[string]paxos.ReplicaID{},
		faults:     map[string]int{},
		heldBack:   map[string]bool{},
		dispatched: map[string]string{},
	}
	netRand := rand.New(rand.NewPCG(c.rng.Uint64(), c.rng.Uint64()))
	var err error
	c.net, err = simnet.New(c.sched, netRand, simnet.DefaultLANConfig(), c.deliver)
	if err != nil {
		return nil, err
	}
	if c.nomad, err = newNomad(c); err != nil {
		return nil, err
	}
	c.cronCheck = check.NewCron(check.CronConfig{Nomad: nomadView{c}, ClockMargin: clockMargin(opts), OpenLimit: opts.State.OpenLaunches, OpenJobLimit: opts.State.OpenLaunchesJob})
	for i := 1; i <= opts.Replicas; i++ {
		c.members.Voters = append(c.members.Voters, paxos.ReplicaID(i))
	}
	for _, id := range c.members.Voters {
		disk := memstore.New()
		clock := simclock.NewClock(0, opts.Timing.MaxClockDriftPPM, c.rng)
		if bug := plantedBugs[opts.Bug]; bug != nil && bug.clockDriftPPM > 0 {
			// Odd replicas slow, even ones fast: the worst case.
			drift := bug.clockDriftPPM * (2*int(id%2) - 1) * -1
			clock = simclock.NewClockWithDrift(0, bug.clockDriftPPM, drift)
		}
		n := &node{id: id, disk: disk, store: disk, clock: clock}
		if bug := plantedBugs[opts.Bug]; bug != nil && bug.wrapStore != nil {
			n.store = bug.wrapStore(disk)
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

func (c *cluster) node(id paxos.ReplicaID) *node { return c.nodes[id-1] }

func (c *cluster) logf(format string, args ...any) {
	if c.opts.Log != nil {
		c.opts.Log(fmt.Sprintf("%12v ", c.sched.Now()) + fmt.Sprintf(format, args...))
	}
}

func (c *cluster) fail(err error) {
	if c.failure == nil && err != nil {
		c.failure = fmt.Errorf("at %v: %w", c.sched.Now(), err)
	}
}

// start boots (or reboots) a replica from its disk.
func (c *cluster) start(n *node) {
	snap, err := n.store.Snapshot()
	if errors.Is(err, storage.ErrCorrupt) {
		c.corruptionFound(n, err)
		return
	}
	if err != nil {
		c.fail(fmt.Errorf("replica %d: reading snapshot: %w", n.id, err))
		return
	}
	c.fail(c.checks.Restored(n.id, snap.Meta.Index))
	rebuilding := n.wiped
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.wipeAsVoter {
		rebuilding = false
	}
	var writer replica.Writer
	n.incarnation++
	n.moreScheduled = false // a Process scheduled for the last incarnation never runs
	if c.opts.DiskLatencyMax > 0 {
		writer = &simWriter{c: c, n: n, incarnation: n.incarnation}
	}
	l, err := c.newLauncher(n)
	if err != nil {
		c.fail(fmt.Errorf("replica %d: launcher: %w", n.id, err))
		return
	}
	c.ids.Started(n.id)
	n.launcher = l
	rep, err := replica.New(replica.Config{
		Writer: writer,
		ID:     n.id, Membership: c.members, Timing: c.opts.Timing, Limits: c.opts.Limits,
		Rand:  rand.New(rand.NewPCG(c.rng.Uint64(), uint64(n.id))),
		Store: n.store, StateMachine: n.launcher, Send: c.sender(n), Snapshots: c.opts.Snapshots,
		Observer: &observer{c: c, n: n}, Rebuilding: rebuilding,
		ReadSnapshots: c.snapshotReads(n), MaxApplyPerProcess: c.opts.MaxApplyPerProcess,
		DecodeSnapshots: c.snapshotDecodes(n),
	})
	if errors.Is(err, storage.ErrCorrupt) {
		c.corruptionFound(n, err)
		return
	}
	if err != nil {
		c.fail(fmt.Errorf("replica %d: restart: %w", n.id, err))
		return
	}
	c.logf("replica %d starts (rebuilding=%t, snapshot %d)", n.id, rebuilding, snap.Meta.Index)
	n.rep, n.up = rep, true
	c.net.SetUp(n.id, true)
	c.scheduleTick(n)
}

func (c *cluster) sender(n *node) func(paxos.Message) {
	return func(m paxos.Message) {
		if n.up {
			c.net.Send(m)
		}
	}
}

func (c *cluster) scheduleTick(n *node) {
	at, _ := n.clock.NextTick(c.sched.Now(), c.opts.TickInterval)
	n.tick = c.sched.At(at, func() {
		if !n.up {
			return
		}
		c.handle(n, n.rep.Tick())
		if n.up {
			c.scheduleTick(n)
		}
	})
}

func (c *cluster) deliver(m paxos.Message) {
	n := c.node(m.To)
	if !n.up {
		return
	}
	c.trace.RecordMessage(c.sched.Now(), m)
	c.handle(n, n.rep.Step(m))
}

// checkLease checks that at most one replica believes it holds the lease
// now; every tick and step may change a belief.
func (c *cluster) checkLease() {
	c.holders = c.holders[:0]
	for _, n := range c.nodes {
		if n.up {
			if _, ok := n.rep.Node().LeaseValidUntil(); ok {
				c.holders = append(c.holders, n.id)
			}
		}
	}
	c.fail(c.lease.Holders(c.sched.Now(), c.holders))
}

// handle reacts to what a replica's input returned.
func (c *cluster) handle(n *node, err error) {
	defer c.checkLease()
	switch {
	case err == nil:
	case errors.Is(err, paxos.ErrInvalidMessage):
		c.fail(fmt.Errorf("replica %d rejected a message from a correct peer: %w", n.id, err))
	case errors.Is(err, memstore.ErrCrashed):
		c.crash(n, "power loss during a write")
		c.scheduleRestart(n, c.downtime())
	case errors.Is(err, storage.ErrCorrupt):
		c.corruptionFound(n, err)
	default:
		c.fail(fmt.Errorf("replica %d: %w", n.id, err))
	}
	c.stepLauncher(n)
	c.processMore(n)
}

// processMore schedules a Process for the work a bounded one left, a
// moment later: other inputs may come first, as in the server's loop.
func (c *cluster) processMore(n *node) {
	if !n.up || n.moreScheduled || !n.rep.HasWork() {
		return
	}
	n.moreScheduled = true
	c.faults["work left by a bounded Process"]++ // not a fault: proof the path ran
	incarnation := n.incarnation
	c.sched.At(c.sched.Now()+time.Duration(1+c.rng.Int64N(int64(time.Millisecond))), func() {
		if n.incarnation != incarnation {
			return // a crash took the work; the restart's moreScheduled is its own
		}
		n.moreScheduled = false
		if n.up {
			c.handle(n, n.rep.Process())
		}
	})
}

// snapshotReads is the replica's replica.Config.ReadSnapshots: with
// Options.SnapshotReadLatencyMax the core's reads of a snapshot to send
// are done as a later event, as the server does them on a goroutine.
func (c *cluster) snapshotReads(n *node) func(read func()) {
	if c.opts.SnapshotReadLatencyMax <= 0 {
		return nil
	}
	return func(read func()) {
		c.inBackground(n, c.opts.SnapshotReadLatencyMax, func() {
			c.faults["snapshot read in the background"]++ // not a fault: proof the path ran
			read()
		})
	}
}

// snapshotDecodes is the replica's replica.Config.DecodeSnapshots: with
// Options.SnapshotDecodeLatencyMax the decode of a snapshot received from
// the leader is done as a later event, as the server does it on a
// goroutine; the replica goes on meanwhile, holding the entries chosen
// after it, and may receive a newer one first.
func (c *cluster) snapshotDecodes(n *node) func(decode func()) {
	if c.opts.SnapshotDecodeLatencyMax <= 0 {
		return nil
	}
	return func(decode func()) {
		c.inBackground(n, c.opts.SnapshotDecodeLatencyMax, func() {
			decode()
			c.faults["snapshot decoded in the background"]++ // not a fault: proof the path ran
			if n.rep.HeldEntries() > 0 {
				c.faults["entries held behind a decoding snapshot"]++ // not a fault: proof the path ran
			}
			err := n.rep.SnapshotDecoded()
			if n.rep.HeldEntries() > 0 {
				c.faults["held entries left to later Processes"]++ // not a fault: proof the path ran
			}
			c.handle(n, err)
		})
	}
}

// inBackground runs work, which the server would run on a goroutine of
// replica n's, a latency drawn from (0, latencyMax] later, unless n has
// crashed or restarted meanwhile.
func (c *cluster) inBackground(n *node, latencyMax time.Duration, work func()) {
	incarnation := n.incarnation
	c.sched.At(c.sched.Now()+time.Duration(1+c.rng.Int64N(int64(latencyMax))), func() {
		if n.up && n.incarnation == incarnation {
			work()
		}
	})
}

// corruptionFound takes a replica whose disk returned corrupt bytes out of
// service; an operator (here, the simulator) replaces its disk and it
// rebuilds from its peers.
func (c *cluster) corruptionFound(n *node, err error) {
	c.corrupt.CorruptRecordRead(n.id)
	c.fail(c.corrupt.CorruptionDetected(n.id))
	c.faults["corruption detected"]++
	c.crash(n, "corrupt disk")
	n.corrupted = false
	n.disk.Wipe()
	n.wiped = true
	c.checks.DiskLost(n.id)
	c.corrupt.DiskWiped(n.id)
	c.scheduleRestart(n, c.downtime())
}

func (c *cluster) crash(n *node, why string) {
	if !n.up {
		return
	}
	c.trace.Record("crash " + why)
	c.logf("replica %d crashes: %s", n.id, why)
	n.up = false
	n.crashArmed = false
	n.rep = nil
	c.crashed.add(n)
	n.launcher, n.machine = nil, nil
	n.tick.Cancel()
	c.net.SetUp(n.id, false)
	n.disk.Crash()
	c.checks.Crashed(n.id)
	c.suspectAfterCrash(n)
	//detlint:maprange deleting entries; order cannot matter
	for data, at := range c.pending {
		if at == n.id {
			delete(c.pending, data)
		}
	}
}

// suspectAfterCrash plays the server's failure detector (memberlist):
// each live replica is told, after a delay like memberlist's, that the
// crashed one is suspected, unless it came back by then.
func (c *cluster) suspectAfterCrash(down *node) {
	incarnation := down.incarnation
	for _, m := range c.nodes {
		if m == down || !m.up {
			continue
		}
		delay := 100*time.Millisecond + time.Duration(c.detector.Int64N(int64(900*time.Millisecond)))
		c.sched.After(delay, func() {
			if down.up || down.incarnation != incarnation || !m.up {
				return
			}
			c.suspect(m, down.id)
		})
	}
}

// suspect feeds a suspicion of id to replica m's core.
func (c *cluster) suspect(m *node, id paxos.ReplicaID) {
	c.faults["suspicion"]++
	c.trace.Record("suspect")
	c.logf("replica %d suspects %d", m.id, id)
	m.rep.Node().ReportSuspect(id)
}

func (c *cluster) scheduleRestart(n *node, after time.Duration) {
	n.restart.Cancel()
	n.restart = c.sched.After(after, func() {
		if !n.up {
			c.start(n)
		}
	})
}

func (c *cluster) downtime() time.Duration {
	return 200*time.Millisecond + time.Duration(c.rng.Int64N(int64(3*time.Second)))
}

// simWriter is a disk with latency: writes complete in order, each after a
// random delay; one that has not completed when its replica crashes is lost.
type simWriter struct {
	c           *cluster
	n           *node
	incarnation uint64
}

func (w *simWriter) Write(u storage.Update) { w.write(u) }

// WriteSnapshot encodes the frozen snapshot when the write completes, as
// the server's writer does some time later: the replica has applied more
// by then, and the snapshot must still be the frozen state. It takes up
// to four disk latencies (a large state's encode and save) and, as in the
// server, the writes handed out after it may complete first; one that
// carries a snapshot from the leader completes after it.
func (w *simWriter) WriteSnapshot(u storage.Update, encode func() ([]byte, error)) {
	c, n := w.c, w.n
	c.faults["snapshot off thread"]++ // not a fault: proof the path ran
	at := max(n.writesDoneAt, c.sched.Now()+time.Duration(1+c.rng.Int64N(4*int64(c.opts.DiskLatencyMax))))
	n.snapDoneAt = at
	c.sched.At(at, func() {
		if !n.up || n.incarnation != w.incarnation {
			return
		}
		var err error
		if u.Snapshot.Data, err = encode(); err != nil {
			c.fail(fmt.Errorf("replica %d: encoding a frozen snapshot: %w", n.id, err))
			return
		}
		if n.writesDoneAt > at {
			c.faults["snapshot saved after later writes"]++ // not a fault: proof the reordering ran
		}
		c.handle(n, n.rep.SnapshotWritten(n.store.Save(u)))
	})
}

func (w *simWriter) write(u storage.Update) {
	c, n := w.c, w.n
	if n.rep != nil && n.rep.InFlight() > 1 {
		c.faults["overlapping writes"]++ // not a fault: proof the async path ran
	}
	at := max(n.writesDoneAt, c.sched.Now()+time.Duration(1+c.rng.Int64N(int64(c.opts.DiskLatencyMax))))
	if u.Snapshot != nil {
		// The leader's snapshot is newer than a local one in flight.
		at = max(at, n.snapDoneAt+1)
	}
	n.writesDoneAt = at
	c.sched.At(at, func() {
		if !n.up || n.incarnation != w.incarnation {
			return
		}
		var err error
		if !u.IsEmpty() {
			err = n.store.Save(u)
		}
		c.handle(n, n.rep.WriteDone(err))
	})
}

// stateHashEvery is how often (in slots) replicas' cron states are
// compared: a digest of the whole state costs a snapshot.
const stateHashEvery = 8

// observer feeds what a replica does to the checkers.
type observer struct {
	c *cluster
	n *node
}

// Persisted clears a lost disk's flag once the rebuilding mark is durable:
// until then a restart must still say the disk was lost.
func (o *observer) Persisted(rd *paxos.Ready) {
	if rd.HardStateChanged && rd.HardState.Rebuilding {
		o.n.wiped = false
	}
}

func (o *observer) Sent(m paxos.Message) {
	if m.Type == paxos.MsgPromise || m.Type == paxos.MsgNack || m.Type == paxos.MsgPrepare {
		o.c.logf("%s", m)
	}
	o.c.fail(o.c.checks.Sent(m))
}

func (o *observer) Applied(e paxos.Entry) {
	c, n := o.c, o.n
	c.trace.RecordEntry(c.sched.Now(), n.id, e)
	c.fail(c.checks.Learned(n.id, e))
	c.fail(c.checks.Applied(n.id, e))
	c.fail(c.ids.Observe(n.id, n.machine.ClusterID()))
	if e.Slot%stateHashEvery == 0 {
		// Invariant 10: replicas that applied the same prefix hold the
		// same state, whether they got there from the full log or from a
		// snapshot and the log after it.
		got := stateHash(n)
		if want, ok := c.slotHash[e.Slot]; !ok {
			c.slotHash[e.Slot] = got
		} else if want != got {
			c.fail(&check.Violation{Invariant: check.InvReplicasAgree, Detail: fmt.Sprintf(
				"replica %d: cron state after slot %d hashes to %x, another replica's to %x", n.id, e.Slot, got, want)})
		}
		// The spec bytes, the open launches and the histories' reasons
		// decide what the limits refuse or drop, and are kept apart from
		// what the digest covers: kept as counted, replicas that agree on
		// the state agree on them.
		if err := n.machine.CheckKept(); err != nil {
			c.fail(&check.Violation{Invariant: check.InvReplicasAgree, Detail: fmt.Sprintf("replica %d after slot %d: %v", n.id, e.Slot, err)})
		}
		if kept, limit := n.machine.HistoryReasonBytes(), n.machine.Limits().HistoryReasons; kept > limit {
			c.fail(&check.Violation{Invariant: check.InvReplicasAgree, Detail: fmt.Sprintf("replica %d after slot %d: the histories keep %d bytes of reasons, past their limit of %d", n.id, e.Slot, kept, limit)})
		}
	}
	if e.Kind != paxos.EntryCommand {
		return
	}
	if at, ok := c.pending[string(e.Data)]; ok && at == n.id {
		delete(c.pending, string(e.Data))
		c.fail(c.checks.Acknowledged(e.Slot, e))
		c.acked++
		if c.healed {
			c.live.Committed(c.sched.Now())
		}
	}
}

func (o *observer) Restored(index uint64) {
	o.c.fail(o.c.checks.Restored(o.n.id, index))
	o.c.fail(o.c.ids.Observe(o.n.id, o.n.machine.ClusterID()))
}

func (o *observer) SnapshotTaken(uint64) { o.c.faults["snapshot taken"]++ }

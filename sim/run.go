package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"paxcron/cron/state"
	"paxcron/paxos"
	"paxcron/sim/check"
	"paxcron/sim/simnet"
	"paxcron/sim/simnomad"
)

// Result is the outcome of one simulated run.
type Result struct {
	Seed      uint64
	Err       error // the first invariant violation, or nil
	TraceHash uint64
	SimTime   time.Duration
	Events    uint64
	Acked     int            // commands acknowledged to the client
	Faults    map[string]int // injected faults by kind
	Network   simnet.Stats
	Cron      CronStats
}

// String is a one-line summary.
func (s CronStats) String() string {
	l, k := s.Launches, s.Checked
	var justified uint64
	for _, n := range k.Justified {
		justified += n
	}
	return fmt.Sprintf("launches: started=%d (manual %d, backfilled %d) dispatched=%d skipped=%d failed=%d unknown=%d; calls=%d takeovers=%d nomad: created=%d dedup=%d lost-replies=%d not-sent=%d; checked: justified=%d on-time=%d (before the tail %d) manual-on-time=%d (before the tail %d, short window %d) crowded=%d dropped-by-delete=%d superseded-while-healthy=%d; reasons not kept: %d; maps rebuilt: state=%d leader=%d; purges=%d restore-moves=%d",
		l.Started, s.Manual, s.Backfilled, l.Dispatched, l.Skipped, l.Failed, l.Unknown, s.Calls, s.Promotions, s.Nomad.Created, s.Nomad.Deduplicated, s.Nomad.RepliesLost, s.Nomad.NotSent,
		justified, k.OnTime, k.OnTimeEarly, k.OnTimeManual, k.OnTimeManualEarly, k.ManualWindowShort, k.Crowded, k.DroppedByDelete, k.SupersededJudged, s.ReasonsNotKept, s.StateMapRebuilds, s.LeaderMapRebuilds, s.Purges, s.RestoreMoves)
}

// CronStats is what the cron layer did in a run.
type CronStats struct {
	// Launches are the final state's counters (an up-to-date replica's).
	Launches state.Counters
	// Calls counts the calls replicas made to Nomad.
	Calls uint64
	// Promotions counts launchers that took over as leader.
	Promotions uint64
	// StateMapRebuilds and LeaderMapRebuilds count the maps replicas'
	// states and leaders rebuilt far below their peak (mapshrink).
	StateMapRebuilds, LeaderMapRebuilds uint64
	// RestoreMoves counts restored states that moved their jobs out of
	// the restore's memory; Purges, the client's purges (purge).
	RestoreMoves, Purges uint64
	// Manual and Backfilled count launches Trigger and Backfill opened.
	Manual     uint64
	Backfilled uint64
	// SecondChildren counts at-least-once launches that Nomad forgot and
	// the leader dispatched again.
	SecondChildren uint64
	Nomad          simnomad.Stats
	// ReasonsNotKept counts the failures and skips whose reasons the
	// final state's histories did not keep (Limits.HistoryReasons).
	ReasonsNotKept int
	// Checked is what the cron checker judged.
	Checked check.CronCounts
}

// FaultSummary lists the injected faults in a stable order.
func (r Result) FaultSummary() string {
	var parts []string
	for _, k := range sortedKeys(r.Faults) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.Faults[k]))
	}
	return strings.Join(parts, " ")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	//detlint:maprange keys are sorted before use
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// settleTime is how long before the end the client stops proposing.
const settleTime = 2 * time.Second

// healthySettle is how long after a leader holds the lease, once healed,
// the lateness bound starts to apply: the leader first concludes what the
// faults left open, whose retries back off for up to 3.2 s.
const healthySettle = 4 * time.Second

// Run simulates one cluster from opts.Seed and checks every invariant
// after every step.
func Run(opts Options) Result {
	c, err := newCluster(opts)
	if err != nil {
		return Result{Seed: opts.Seed, Err: err}
	}
	for _, n := range c.nodes {
		c.start(n)
	}
	c.sched.After(c.expDuration(opts.ProposalEvery), c.propose)
	c.sched.After(c.expDuration(opts.FaultEvery), c.injectFault)
	c.sched.At(opts.HealAt, c.heal)
	c.sched.After(opts.TickInterval, c.probe)
	for c.failure == nil && c.sched.Step() {
		if c.sched.Now() > opts.Duration {
			break
		}
	}
	if c.failure == nil {
		c.fail(c.finalCheck())
	}
	return Result{
		Seed: opts.Seed, Err: c.failure, TraceHash: c.trace.Sum(), SimTime: c.sched.Now(),
		Events: c.sched.Steps(), Acked: c.acked, Faults: c.faults, Network: c.net.Stats(),
		Cron: c.cronStats(),
	}
}

func (c *cluster) expDuration(mean time.Duration) time.Duration {
	return time.Duration(c.rng.ExpFloat64()*float64(mean)) + 1
}

// leader returns an up replica that believes it leads, if any.
func (c *cluster) leader() *node {
	for _, n := range c.nodes {
		if n.up && n.rep.Node().Status().Role == paxos.Leader {
			return n
		}
	}
	return nil
}

// propose is the client: it sends a unique command to whichever replica
// believes it leads.
func (c *cluster) propose() {
	// The client stops a little before the end, so the final checks see
	// every acknowledged command spread by heartbeats.
	if c.sched.Now() > c.opts.Duration-settleTime {
		return
	}
	defer c.sched.After(c.expDuration(c.opts.ProposalEvery), c.propose)
	c.proposeOnce()
}

// proposeOnce sends one client command, unless the client has stopped.
func (c *cluster) proposeOnce() {
	if c.sched.Now() > c.opts.Duration-settleTime {
		return
	}
	n := c.leader()
	if n == nil {
		return
	}
	cmd := c.clientCommand(n)
	data, err := state.Encode(cmd)
	if err != nil {
		panic(fmt.Sprintf("sim: the client built an invalid command: %v", err))
	}
	c.checks.Proposed(data)
	if _, err := n.rep.Propose(data); err != nil {
		if !errors.Is(err, paxos.ErrBusy) && !errors.Is(err, paxos.ErrNotLeader) {
			c.handle(n, err)
		}
		return
	}
	if _, ok := cmd.(state.PutJob); !ok {
		// Only a PutJob is unique (its meta), so only its
		// acknowledgement can be matched to its slot.
		c.handle(n, n.rep.Process())
		return
	}
	c.pending[string(data)] = n.id
	if bug := plantedBugs[c.opts.Bug]; bug != nil && bug.ackOnPropose {
		slot := n.rep.Node().Status().LastSlot
		c.fail(c.checks.Acknowledged(slot, paxos.Entry{Slot: slot, Kind: paxos.EntryCommand, Data: data}))
	}
	c.handle(n, n.rep.Process())
}

// probe runs the periodic checks.
func (c *cluster) probe() {
	now := c.sched.Now()
	c.observeHealth()
	if c.healed {
		if l := c.leader(); l != nil {
			if _, ok := l.rep.Node().LeaseValidUntil(); ok {
				c.live.LeaderElected(now, l.id)
				if c.healthyFrom.IsZero() && !c.handingOver {
					// Launches due from a little later on must be on time:
					// the new leader first concludes what the faults left.
					// Not while a graceful handover drains the launcher
					// (it starts nothing for up to 5 s, then steps down):
					// as before the heal, that is not a healthy leader
					// (3 of 20,000 seeds from 11000000 held a drain
					// begun just before the heal to the bound).
					c.healthyFrom = c.trueWall().Add(healthySettle)
				}
			}
		}
	}
	c.fail(c.live.Check(now))
	c.sched.After(c.opts.TickInterval, c.probe)
}

// heal ends the fault phase: every replica up, the network whole.
func (c *cluster) heal() {
	c.observeHealth()
	c.endHealthy() // the tail is judged from healthyFrom
	c.healed = true
	c.trace.Record("heal")
	c.net.Heal()
	c.nomad.SetUp(true)
	c.nomadNormal()
	if err := c.net.SetConfig(simnet.DefaultLANConfig()); err != nil {
		panic(err)
	}
	for _, n := range c.nodes {
		n.disk.CancelCrashDuringNextSave()
		n.crashArmed = false
		if !n.up {
			n.restart.Cancel()
			c.start(n)
		}
		n.clock.SetDriftPPM(c.sched.Now(), n.clock.DriftPPM()) // keep within bound
	}
	c.live.Healed(c.sched.Now())
}

// finalCheck runs the end-of-run invariants.
func (c *cluster) finalCheck() error {
	if !c.live.Satisfied() {
		return fmt.Errorf("check: invariant 6 (liveness) violated: no leader committed within %v of healing", c.opts.LivenessBound)
	}
	finals := make([]check.ReplicaFinal, 0, len(c.nodes))
	for _, n := range c.nodes {
		f := check.ReplicaFinal{ID: n.id, Up: n.up}
		if n.up {
			st := n.rep.Node().Status()
			f.Chosen = st.Chosen
			if st.Rebuilding {
				f.Up = false // it does not hold the log yet
			}
			store := n.store
			// A snapshot that does not read back (a corruption not yet
			// found) holds nothing: its slots then count only where the
			// log still has them.
			if snap, err := store.Snapshot(); err == nil {
				f.Snapshot = snap.Meta.Index
			}
			f.Entry = func(slot uint64) (paxos.Entry, bool) {
				es, err := store.Entries(slot, slot+1, 1)
				if err != nil || len(es) == 0 {
					return paxos.Entry{}, false
				}
				return es[0], true
			}
		}
		finals = append(finals, f)
	}
	if err := c.checks.CheckFinal(finals); err != nil {
		return err
	}
	if err := c.checkConverged(); err != nil {
		return err
	}
	if err := c.cronFinal(); err != nil {
		return err
	}
	if c.ids.Named().IsZero() {
		return &check.Violation{Invariant: check.InvClusterID, Detail: "no replica's state holds a cluster ID at the end of a healed run: no leader named the cluster"}
	}
	return c.corrupt.Check()
}

// checkConverged is the second half of liveness: after healing, every
// replica finishes rebuilding and applies every acknowledged command, not
// just a quorum (a follower wedged behind the leader proves nothing wrong
// with safety, but it is one failure away from an unavailable cluster).
func (c *cluster) checkConverged() error {
	var top uint64
	for _, n := range c.nodes {
		if !n.up {
			return fmt.Errorf("check: invariant 6 (liveness) violated: replica %d is down at the end of a healed run", n.id)
		}
		top = max(top, n.rep.Node().Status().Chosen)
	}
	for _, n := range c.nodes {
		st := n.rep.Node().Status()
		if st.Rebuilding || n.rep.Applied()+uint64(c.opts.Limits.MaxBatchEntries) < top {
			return fmt.Errorf("check: invariant 6 (liveness) violated: replica %d did not catch up after healing (rebuilding=%t applied=%d, highest chosen %d)",
				n.id, st.Rebuilding, n.rep.Applied(), top)
		}
	}
	return nil
}

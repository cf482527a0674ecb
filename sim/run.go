package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"paxcron/paxos"
	"paxcron/sim/check"
	"paxcron/sim/simnet"
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
	n := c.leader()
	if n == nil {
		return
	}
	c.nextCmd++
	data := fmt.Appendf(nil, "cmd-%d-%d", c.opts.Seed, c.nextCmd)
	c.checks.Proposed(data)
	if _, err := n.rep.Propose(data); err != nil {
		if !errors.Is(err, paxos.ErrBusy) && !errors.Is(err, paxos.ErrNotLeader) {
			c.handle(n, err)
		}
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
	if c.healed {
		if l := c.leader(); l != nil {
			if _, ok := l.rep.Node().LeaseValidUntil(); ok {
				c.live.LeaderElected(now, l.id)
			}
		}
	}
	c.fail(c.live.Check(now))
	c.sched.After(c.opts.TickInterval, c.probe)
}

// heal ends the fault phase: every replica up, the network whole.
func (c *cluster) heal() {
	c.healed = true
	c.trace.Record("heal")
	c.net.Heal()
	if err := c.net.SetConfig(simnet.DefaultLANConfig()); err != nil {
		panic(err)
	}
	for _, n := range c.nodes {
		n.disk.CancelCrashDuringNextSave()
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

package sim

import (
	"time"

	"paxcron/paxos"
	"paxcron/sim/simnet"
)

// faultKinds lists every fault the simulator injects, each a function that
// returns false when it does not apply now (then another is drawn).
var faultKinds = []struct {
	name   string
	inject func(c *cluster) bool
}{
	{"crash", (*cluster).faultCrash},
	{"crash leader", (*cluster).faultCrashLeader},
	{"crash during write", (*cluster).faultCrashDuringWrite},
	{"crash all", (*cluster).faultCrashAll},
	{"disk loss", (*cluster).faultDiskLoss},
	{"corrupt record", (*cluster).faultCorrupt},
	{"partition", (*cluster).faultPartition},
	{"split all", (*cluster).faultSplitAll},
	{"isolate leader", (*cluster).faultIsolateLeader},
	{"asymmetric link", (*cluster).faultAsymmetric},
	{"heal network", (*cluster).faultHealNetwork},
	{"lossy network", (*cluster).faultLossy},
	{"clock drift", (*cluster).faultDrift},
	{"nomad down", (*cluster).faultNomadDown},
	{"nomad flaky", (*cluster).faultNomadFlaky},
	{"false suspicion", (*cluster).faultFalseSuspicion},
	{"graceful handover", (*cluster).faultHandover},
}

// FaultKinds returns the names of every fault type, for coverage checks.
func FaultKinds() []string {
	names := make([]string, len(faultKinds))
	for i, f := range faultKinds {
		names[i] = f.name
	}
	return names
}

func (c *cluster) injectFault() {
	if c.healed {
		return
	}
	defer c.sched.After(c.expDuration(c.opts.FaultEvery), c.injectFault)
	c.observeHealth() // the interval under way held until now
	for range 8 {
		f := faultKinds[c.rng.IntN(len(faultKinds))]
		if f.inject(c) {
			c.faults[f.name]++
			c.trace.Record("fault " + f.name)
			c.logf("fault: %s", f.name)
			c.observeHealth()
			return
		}
	}
}

// impaired counts replicas that are down or rebuilding. Faults that can
// lose a replica's state are injected only while fewer than a minority are
// impaired: beyond that no protocol keeps what was acknowledged.
func (c *cluster) impaired() int {
	k := 0
	for _, n := range c.nodes {
		if !n.up || n.corrupted || n.rep.Node().Status().Rebuilding {
			k++
		}
	}
	return k
}

func (c *cluster) maxImpaired() int { return (len(c.nodes) - 1) / 2 }

func (c *cluster) randomUp() *node {
	var up []*node
	for _, n := range c.nodes {
		if n.up {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[c.rng.IntN(len(up))]
}

func (c *cluster) faultCrash() bool       { return c.crashAndRestart(c.randomUp(), false) }
func (c *cluster) faultCrashLeader() bool { return c.crashAndRestart(c.leader(), false) }
func (c *cluster) faultDiskLoss() bool    { return c.crashAndRestart(c.randomUp(), true) }

// crashAndRestart crashes n (losing its disk if wipe) and restarts it
// later, unless that would impair a majority.
func (c *cluster) crashAndRestart(n *node, wipe bool) bool {
	if n == nil || c.impaired() >= c.maxImpaired() {
		return false
	}
	if !wipe {
		c.crash(n, "fault")
	} else {
		c.crash(n, "disk loss")
		n.corrupted = false
		n.disk.Wipe()
		n.wiped = true
		c.checks.DiskLost(n.id)
		c.corrupt.DiskWiped(n.id)
	}
	c.scheduleRestart(n, c.downtime())
	return true
}

// faultCrashDuringWrite makes a replica lose power in the middle of its
// next synced write: the write is visible to reads but never reaches the
// disk, and no reply that depended on it may have left.
func (c *cluster) faultCrashDuringWrite() bool {
	n := c.randomUp()
	if n == nil || c.impaired() >= c.maxImpaired() {
		return false
	}
	n.disk.CrashDuringNextSave()
	n.crashArmed = true
	return true
}

// faultCrashAll is a power cut of the whole cluster: disks survive, so
// nothing acknowledged may be lost.
func (c *cluster) faultCrashAll() bool {
	if c.rng.IntN(4) != 0 {
		return false // rarer than the others
	}
	for _, n := range c.nodes {
		if n.up {
			c.crash(n, "power cut")
		}
		c.scheduleRestart(n, c.downtime())
	}
	return true
}

func (c *cluster) faultCorrupt() bool {
	n := c.randomUp()
	if n == nil || c.impaired() >= c.maxImpaired() {
		return false
	}
	if _, ok := n.disk.CorruptRandomRecord(c.rng); !ok {
		return false
	}
	c.corrupt.CorruptionInjected(n.id)
	n.corrupted = true
	return true
}

func (c *cluster) faultPartition() bool {
	c.net.Heal()
	perm := c.rng.Perm(len(c.nodes))
	cut := 1 + c.rng.IntN(len(c.nodes)-1)
	var a, b []paxos.ReplicaID
	for i, p := range perm {
		if i < cut {
			a = append(a, c.nodes[p].id)
		} else {
			b = append(b, c.nodes[p].id)
		}
	}
	c.net.Partition(a, b)
	return len(c.nodes) > 1
}

// faultSplitAll cuts every replica off from every other, as a failed
// switch would: no quorum anywhere, so the leader's lease runs out with
// whatever it proposed meanwhile unchosen, and nobody takes over until
// the network heals. Then any replica may win, the old leader among
// them, with no other leader's takeover between its two terms: the one
// path on which a launcher keeps what it learned in its last term.
func (c *cluster) faultSplitAll() bool {
	c.net.Heal()
	groups := make([][]paxos.ReplicaID, len(c.nodes))
	for i, n := range c.nodes {
		groups[i] = []paxos.ReplicaID{n.id}
	}
	c.net.Partition(groups...)
	return len(c.nodes) > 1
}

func (c *cluster) faultIsolateLeader() bool {
	n := c.leader()
	if n == nil {
		return false
	}
	c.net.Isolate(n.id)
	return true
}

func (c *cluster) faultAsymmetric() bool {
	from, to := c.rng.IntN(len(c.nodes)), c.rng.IntN(len(c.nodes))
	if from == to {
		return false
	}
	c.net.Block(c.nodes[from].id, c.nodes[to].id)
	return true
}

func (c *cluster) faultHealNetwork() bool {
	c.net.Heal()
	return true
}

func (c *cluster) faultLossy() bool {
	cfg := simnet.DefaultLossyConfig()
	if c.net.Config().LossProbability > 0 {
		cfg = simnet.DefaultLANConfig()
	}
	if err := c.net.SetConfig(cfg); err != nil {
		panic(err)
	}
	return true
}

// faultDrift redraws one replica's clock rate within the stated bound.
func (c *cluster) faultDrift() bool {
	n := c.randomUp()
	if n == nil || plantedBugs[c.opts.Bug] != nil && plantedBugs[c.opts.Bug].clockDriftPPM > 0 {
		return false
	}
	n.clock.RedrawDrift(c.sched.Now(), c.rng)
	n.tick.Cancel()
	c.scheduleTick(n)
	return true
}

var _ = time.Second

// faultFalseSuspicion tells every follower that the live leader is
// suspected, as a failure detector that lost a few probes would: the
// leader's next heartbeat must keep it in place, and nothing unsafe may
// follow if it does not.
func (c *cluster) faultFalseSuspicion() bool {
	leader := c.leader()
	if leader == nil {
		return false
	}
	for _, m := range c.nodes {
		if m != leader && m.up {
			c.suspect(m, leader.id)
		}
	}
	return true
}

// faultHandover is the leader's graceful shutdown, as the server does it
// on SIGTERM: its launcher drains (starts nothing, concludes what is
// under way), then the leader steps down and names a successor. A drain
// that has not ended after 5 s steps down anyway. Here the replica stays
// up afterwards, a follower.
func (c *cluster) faultHandover() bool {
	leader := c.leader()
	if leader == nil || leader.launcher == nil {
		return false
	}
	l, incarnation := leader.launcher, leader.incarnation
	l.SetDraining(true)
	c.handingOver = true
	deadline := c.sched.Now() + 5*time.Second
	var check func()
	check = func() {
		if !leader.up || leader.incarnation != incarnation {
			c.handingOver = false
			return // crashed meanwhile: a restarted launcher does not drain
		}
		if !l.Drained() && c.sched.Now() < deadline {
			c.sched.After(100*time.Millisecond, check)
			return
		}
		l.SetDraining(false)
		c.handingOver = false
		if successor, err := leader.rep.Node().StepDown(); err == nil {
			c.faults["step down"]++
			c.trace.Record("step down")
			c.logf("replica %d steps down for %d (drained: %t)", leader.id, successor, l.Drained())
			c.handle(leader, leader.rep.Process())
		}
	}
	c.sched.After(100*time.Millisecond, check)
	return true
}

package sim

import (
	"time"

	"paxcron/paxos"
	"paxcron/sim/check"
	"paxcron/sim/simnet"
)

// Healthy intervals before the faults heal: the stretches in which
// invariant 8's promise applies (while a majority is up and Nomad
// answers, a launch is dispatched within the lateness bound), so that the
// cron checker holds launches to it there too, not only in the healed
// tail of the run.
//
// Healthy means, at every observation: one replica holds the lease, and
// it and a majority counting it are sound (up, not rebuilding, with no
// undetected corruption and no crash armed in their next write) and
// connected both ways to it; the network is the healthy LAN (not lossy);
// Nomad is up and not flaky; and no graceful handover is draining the
// launcher. An interval is one leader's unbroken run of such
// observations. It is observed at every probe (each tick) and right
// before and after every fault injected, so that it ends no later than
// the fault that broke it; faults with a delayed effect (a crash during
// the next write, a corruption read later, a drain that ends in a step
// down) break it when injected. A replica cut off or coming back cannot
// unseat a leader that hears a quorum (pre-vote and check-quorum), and
// clock drift within its bound is not a fault the promise excuses.
//
// As in the tail, launches are held to the bound only from healthySettle
// after the interval's first observation: the leader first concludes what
// the faults left, whose retries back off for up to 3.2 s, and a forbid
// or replace launch waits for those of its job opened before it.

// health is the healthy interval under way, if open.
type health struct {
	open   bool
	leader paxos.ReplicaID
	// from is its first observation, last its latest.
	from, last time.Duration
}

// healthyNow reports whether the cluster and Nomad are healthy now, and
// which replica leads.
func (c *cluster) healthyNow() (paxos.ReplicaID, bool) {
	if !c.nomad.Up() || c.nomadFlaky || c.handingOver || c.net.Config() != simnet.DefaultLANConfig() {
		return 0, false
	}
	var leader *node
	for _, n := range c.nodes {
		if n.up {
			if _, ok := n.rep.Node().LeaseValidUntil(); ok {
				leader = n
			}
		}
	}
	if leader == nil || !sound(leader) {
		return 0, false
	}
	k := 0
	for _, n := range c.nodes {
		if sound(n) && c.net.Connected(leader.id, n.id) {
			k++
		}
	}
	return leader.id, k > len(c.nodes)/2
}

// sound reports whether replica n can count toward a healthy majority.
func sound(n *node) bool {
	return n.up && !n.corrupted && !n.crashArmed && !n.rep.Node().Status().Rebuilding
}

// observeHealth extends, ends or opens the healthy interval by what holds
// now. The healed tail is the cron checker's own (healthyFrom).
func (c *cluster) observeHealth() {
	if c.healed {
		return
	}
	now := c.sched.Now()
	id, ok := c.healthyNow()
	h := &c.health
	if h.open && ok && id == h.leader {
		h.last = now
		return
	}
	c.endHealthy()
	if ok {
		*h = health{open: true, leader: id, from: now, last: now}
	}
}

// endHealthy closes the healthy interval at its last observation, and
// hands the cron checker the part of it, past the settling time, that can
// hold a launch's whole lateness window.
func (c *cluster) endHealthy() {
	h := &c.health
	if !h.open {
		return
	}
	h.open = false
	iv := check.Interval{From: c.opts.Epoch.Add(h.from + healthySettle), To: c.opts.Epoch.Add(h.last)}
	if iv.To.Sub(iv.From) > c.opts.LatenessBound {
		c.healthy = append(c.healthy, iv)
	}
}

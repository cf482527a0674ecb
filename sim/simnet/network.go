package simnet

import (
	"fmt"
	"math/rand/v2"
	"time"

	"paxcron/paxos"
	"paxcron/sim/simclock"
)

// Stats counts what the network did, fault by fault, so that a run can
// report how many of each fault it injected (invariant 14). Every message
// handed to Send is counted in Sent and then in exactly one of Delivered,
// DroppedLoss, DroppedPartition, DroppedDown or DroppedOverflow; a
// duplicate adds one to Duplicated and one more to that set.
type Stats struct {
	Sent      uint64
	Delivered uint64
	// DroppedLoss counts messages lost at random on send.
	DroppedLoss uint64
	// DroppedPartition counts messages cut by a partition, on send or
	// while in flight.
	DroppedPartition uint64
	// DroppedDown counts messages that reached a crashed receiver.
	DroppedDown uint64
	// DroppedOverflow counts messages refused because MaxInFlightMessages
	// were already in flight.
	DroppedOverflow uint64
	// Duplicated counts extra copies scheduled.
	Duplicated uint64
	// DelayedTail counts copies held up by a long-tail delay.
	DelayedTail uint64
	// Reordered counts deliveries that overtook an earlier-sent message on
	// the same (from, to) link.
	Reordered uint64
}

// link is one direction between two replicas.
type link struct{ from, to paxos.ReplicaID }

// Network is a simulated network between replicas. It is not safe for
// concurrent use; the simulator drives it from one goroutine.
type Network struct {
	sched   *simclock.Scheduler
	rand    *rand.Rand
	cfg     Config
	deliver func(paxos.Message)

	// The maps are only looked up, never ranged over, so their order cannot
	// leak into the run.
	blocked  map[link]bool
	isolated map[paxos.ReplicaID]bool
	down     map[paxos.ReplicaID]bool
	// lastDelivered is the highest send sequence delivered on each link,
	// to count reorderings.
	lastDelivered map[link]uint64

	seq      uint64
	inFlight int
	stats    Stats
}

// New returns a network whose messages travel on sched, with delays and
// faults drawn from r, and are handed to deliver on arrival. Every argument
// is required.
func New(sched *simclock.Scheduler, r *rand.Rand, cfg Config, deliver func(paxos.Message)) (*Network, error) {
	if sched == nil || r == nil || deliver == nil {
		return nil, fmt.Errorf("%w: scheduler, rand and deliver func are required", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Network{
		sched:         sched,
		rand:          r,
		cfg:           cfg,
		deliver:       deliver,
		blocked:       make(map[link]bool),
		isolated:      make(map[paxos.ReplicaID]bool),
		down:          make(map[paxos.ReplicaID]bool),
		lastDelivered: make(map[link]uint64),
	}, nil
}

// Config returns the current configuration.
func (n *Network) Config() Config { return n.cfg }

// SetConfig changes delays and fault rates for messages sent from now on.
func (n *Network) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	n.cfg = cfg
	return nil
}

// Stats returns the counters so far.
func (n *Network) Stats() Stats { return n.stats }

// InFlight returns the number of message copies sent and not yet arrived.
func (n *Network) InFlight() int { return n.inFlight }

// Send puts a deep copy of m on the wire from m.From to m.To. Sending from
// a replica that is down, or without both addresses, is a programmer error
// in the runner and panics.
func (n *Network) Send(m paxos.Message) {
	if m.From == paxos.None || m.To == paxos.None {
		panic(fmt.Sprintf("simnet: message without sender or receiver: %v", m))
	}
	if n.down[m.From] {
		panic(fmt.Sprintf("simnet: replica %d is down and cannot send %v", m.From, m))
	}
	n.stats.Sent++
	switch {
	case n.Blocked(m.From, m.To):
		n.stats.DroppedPartition++
		return
	case n.chance(n.cfg.LossProbability):
		n.stats.DroppedLoss++
		return
	}
	n.schedule(CloneMessage(m))
	if n.chance(n.cfg.DuplicateProbability) {
		n.stats.Duplicated++
		n.schedule(CloneMessage(m))
	}
}

// schedule sends one copy with a delay of its own, unless the in-flight
// bound is reached.
func (n *Network) schedule(m paxos.Message) {
	if n.inFlight >= n.cfg.MaxInFlightMessages {
		n.stats.DroppedOverflow++
		return
	}
	n.seq++
	seq := n.seq
	n.inFlight++
	n.sched.After(n.delay(), func() { n.arrive(m, seq) })
}

// arrive hands a copy to the receiver, unless a partition started while it
// was in flight or the receiver is down now.
func (n *Network) arrive(m paxos.Message, seq uint64) {
	n.inFlight--
	switch {
	case n.Blocked(m.From, m.To):
		n.stats.DroppedPartition++
		return
	case n.down[m.To]:
		n.stats.DroppedDown++
		return
	}
	l := link{m.From, m.To}
	if seq < n.lastDelivered[l] {
		n.stats.Reordered++
	} else {
		n.lastDelivered[l] = seq
	}
	n.stats.Delivered++
	n.deliver(m)
}

// delay draws one copy's delay: base, plus jitter, plus sometimes a tail.
func (n *Network) delay() time.Duration {
	d := n.cfg.DelayBase
	switch n.cfg.DelayJitterKind {
	case JitterExponential:
		d += time.Duration(n.rand.ExpFloat64() * float64(n.cfg.DelayJitter))
	case JitterUniform:
		if n.cfg.DelayJitter > 0 {
			d += time.Duration(n.rand.Int64N(int64(n.cfg.DelayJitter)))
		}
	}
	if n.chance(n.cfg.DelayTailProbability) {
		n.stats.DelayedTail++
		d += n.cfg.DelayTailMin + time.Duration(n.rand.Int64N(int64(n.cfg.DelayTailMax-n.cfg.DelayTailMin)+1))
	}
	return d
}

// chance draws true with probability p. It draws nothing when p is zero,
// so a fault-free network spends no randomness on faults.
func (n *Network) chance(p float64) bool {
	return p > 0 && n.rand.Float64() < p
}

// SetUp marks a replica up or down. Messages that arrive at a down replica
// are dropped; a replica that comes back up receives whatever arrives
// after, including messages sent to its previous incarnation.
func (n *Network) SetUp(id paxos.ReplicaID, up bool) {
	if up {
		delete(n.down, id)
	} else {
		n.down[id] = true
	}
}

// Up reports whether a replica is up (every replica is, until SetUp).
func (n *Network) Up(id paxos.ReplicaID) bool { return !n.down[id] }

// Block cuts the one direction from -> to; to -> from is untouched (an
// asymmetric partition).
func (n *Network) Block(from, to paxos.ReplicaID) { n.blocked[link{from, to}] = true }

// Unblock restores the direction from -> to cut by Block or Partition. It
// does not undo Isolate.
func (n *Network) Unblock(from, to paxos.ReplicaID) { delete(n.blocked, link{from, to}) }

// Partition cuts both directions between every two replicas in different
// groups. Replicas named in no group keep whatever links they had; blocks
// already in place stay (use Heal first for a fresh partition). A replica
// in two groups is a programmer error and panics.
func (n *Network) Partition(groups ...[]paxos.ReplicaID) {
	seen := make(map[paxos.ReplicaID]int)
	for gi, g := range groups {
		for _, id := range g {
			if prev, dup := seen[id]; dup {
				panic(fmt.Sprintf("simnet: replica %d in partition groups %d and %d", id, prev, gi))
			}
			seen[id] = gi
		}
	}
	for gi, g := range groups {
		for _, other := range groups[gi+1:] {
			for _, a := range g {
				for _, b := range other {
					n.Block(a, b)
					n.Block(b, a)
				}
			}
		}
	}
}

// Isolate cuts every link to and from id, whoever the other end is.
func (n *Network) Isolate(id paxos.ReplicaID) { n.isolated[id] = true }

// Heal removes every partition, block and isolation. Messages already
// dropped stay dropped.
func (n *Network) Heal() {
	clear(n.blocked)
	clear(n.isolated)
}

// Blocked reports whether messages from -> to are cut now. A replica is
// never cut from itself.
func (n *Network) Blocked(from, to paxos.ReplicaID) bool {
	if from == to {
		return false
	}
	return n.isolated[from] || n.isolated[to] || n.blocked[link{from, to}]
}

// Connected reports whether both directions between a and b are open.
func (n *Network) Connected(a, b paxos.ReplicaID) bool {
	return !n.Blocked(a, b) && !n.Blocked(b, a)
}

package check

import (
	"fmt"
	"time"

	"paxcron/paxos"
)

// Liveness checks invariant 6: once the last fault has healed (a majority
// up and connected), a leader is elected and a proposal commits within
// Bound of simulated time.
//
// The runner calls Healed when the cluster becomes healthy and Faulted when
// a new fault starts (which calls the clock off until the next Healed). It
// reports LeaderElected whenever it sees a replica lead (a leader from
// before the heal that still leads counts once reported after it) and
// Committed when a proposal commits. Check fails once Bound has passed
// since the heal without both.
type Liveness struct {
	bound time.Duration

	armed     bool
	healedAt  time.Duration
	leader    paxos.ReplicaID
	leaderAt  time.Duration
	committed bool
	commitAt  time.Duration
}

// NewLiveness returns a liveness checker with the given bound, which must
// be positive.
func NewLiveness(bound time.Duration) *Liveness {
	if bound <= 0 {
		panic(fmt.Sprintf("check: liveness bound must be positive: %v", bound))
	}
	return &Liveness{bound: bound}
}

// Bound returns the bound.
func (l *Liveness) Bound() time.Duration { return l.bound }

// Healed starts the clock at true time at, unless it is already running
// (healing again without a fault in between does not extend the deadline).
func (l *Liveness) Healed(at time.Duration) {
	if l.armed {
		return
	}
	l.armed = true
	l.healedAt = at
	l.leader = paxos.None
	l.committed = false
}

// Faulted stops the clock: a new fault began, so nothing is owed until the
// next Healed.
func (l *Liveness) Faulted(at time.Duration) { l.armed = false }

// LeaderElected records that replica id leads at true time at.
func (l *Liveness) LeaderElected(at time.Duration, id paxos.ReplicaID) {
	if l.armed && at >= l.healedAt && l.leader == paxos.None {
		l.leader, l.leaderAt = id, at
	}
}

// Committed records that a proposal committed at true time at.
func (l *Liveness) Committed(at time.Duration) {
	if l.armed && at >= l.healedAt && !l.committed {
		l.committed, l.commitAt = true, at
	}
}

// Satisfied reports whether, since the last heal, both a leader and a
// commit were seen (or no heal is pending).
func (l *Liveness) Satisfied() bool {
	return !l.armed || (l.leader != paxos.None && l.committed)
}

// Check reports a violation if the bound has passed at true time now since
// the heal without a leader and a commit, each within the bound.
func (l *Liveness) Check(now time.Duration) error {
	if !l.armed {
		return nil
	}
	deadline := l.healedAt + l.bound
	switch {
	case l.leader != paxos.None && l.leaderAt > deadline:
		return violation(InvLiveness, "healed at %v, leader %d elected only at %v, after the bound %v", l.healedAt, l.leader, l.leaderAt, l.bound)
	case l.committed && l.commitAt > deadline:
		return violation(InvLiveness, "healed at %v, first commit only at %v, after the bound %v", l.healedAt, l.commitAt, l.bound)
	case now <= deadline || l.Satisfied():
		return nil
	case l.leader == paxos.None:
		return violation(InvLiveness, "healed at %v, no leader elected by %v (bound %v)", l.healedAt, now, l.bound)
	}
	return violation(InvLiveness, "healed at %v, leader %d elected at %v, but nothing committed by %v (bound %v)",
		l.healedAt, l.leader, l.leaderAt, now, l.bound)
}

package check

import "paxcron/paxos"

// Prefix checks invariant 4: each replica applies slots 1, 2, 3... in
// order without gaps, and (through the shared Agreement) the same value at
// each slot as every other replica, including when it re-applies slots
// after a restart.
//
// A replica's applied index moves only by Applied (one slot up) and
// Restored (set to a snapshot's index, on a snapshot install or a restart).
// Crashed marks its volatile state lost: it must be Restored before it
// applies again, and from there it re-applies, which Agreement holds to
// the values learned before the crash.
type Prefix struct {
	agree    *Agreement
	replicas map[paxos.ReplicaID]*applyState
}

type applyState struct {
	applied uint64
	crashed bool
}

// NewPrefix returns a prefix checker that checks values against a.
func NewPrefix(a *Agreement) *Prefix {
	if a == nil {
		panic("check: NewPrefix needs an Agreement")
	}
	return &Prefix{agree: a, replicas: make(map[paxos.ReplicaID]*applyState)}
}

func (p *Prefix) state(r paxos.ReplicaID) *applyState {
	s, ok := p.replicas[r]
	if !ok {
		s = &applyState{}
		p.replicas[r] = s
	}
	return s
}

// Applied records that replica r applied e to its state machine.
func (p *Prefix) Applied(r paxos.ReplicaID, e paxos.Entry) error {
	s := p.state(r)
	if s.crashed {
		return violation(InvPrefixOrder, "replica %d applied slot %d while crashed (no Restored since its crash)", r, e.Slot)
	}
	if e.Slot != s.applied+1 {
		return violation(InvPrefixOrder, "replica %d applied slot %d (%s) after slot %d: want slot %d",
			r, e.Slot, describe(e), s.applied, s.applied+1)
	}
	if err := p.agree.observe(r, e, "applied"); err != nil {
		return err
	}
	s.applied = e.Slot
	return nil
}

// Restored records that replica r's state machine now stands at index:
// it installed a snapshot of that index, or restarted from one (index 0
// when it restarted with no snapshot). A snapshot of slots that no replica
// has learned cannot have been built from chosen values.
func (p *Prefix) Restored(r paxos.ReplicaID, index uint64) error {
	if index > 0 {
		if _, _, ok := p.agree.Chosen(index); !ok {
			return violation(InvPrefixOrder, "replica %d restored a snapshot at slot %d, which no replica has learned", r, index)
		}
	}
	s := p.state(r)
	s.applied = index
	s.crashed = false
	return nil
}

// Crashed records that replica r lost its volatile state.
func (p *Prefix) Crashed(r paxos.ReplicaID) { p.state(r).crashed = true }

// AppliedIndex returns the last slot replica r applied.
func (p *Prefix) AppliedIndex(r paxos.ReplicaID) uint64 { return p.state(r).applied }

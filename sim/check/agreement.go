package check

import "paxcron/paxos"

// Agreement checks invariant 1: no two replicas learn different values
// (kind and data; ballots may differ) for one slot. It remembers the first
// value learned for every slot, which also makes it the reference log that
// Prefix and Durability compare against.
type Agreement struct {
	slots map[uint64]learned
}

// learned is the first value learned for a slot and who learned it.
type learned struct {
	entry paxos.Entry
	by    paxos.ReplicaID
}

// NewAgreement returns an empty agreement checker.
func NewAgreement() *Agreement {
	return &Agreement{slots: make(map[uint64]learned)}
}

// Learned records that replica r learned e (as chosen) and reports a
// violation if another value was learned for e.Slot before.
func (a *Agreement) Learned(r paxos.ReplicaID, e paxos.Entry) error {
	return a.observe(r, e, "learned")
}

// observe is Learned with the verb used in the message, so that Prefix can
// report what a replica applied.
func (a *Agreement) observe(r paxos.ReplicaID, e paxos.Entry, verb string) error {
	first, ok := a.slots[e.Slot]
	if !ok {
		a.slots[e.Slot] = learned{entry: cloneEntry(e), by: r}
		return nil
	}
	if !first.entry.SameValue(e) {
		return violation(InvAgreement, "replica %d %s %s at slot %d, but replica %d learned %s there",
			r, verb, describe(e), e.Slot, first.by, describe(first.entry))
	}
	return nil
}

// Chosen returns the value learned for slot, if any replica learned one,
// and the replica that learned it first.
func (a *Agreement) Chosen(slot uint64) (paxos.Entry, paxos.ReplicaID, bool) {
	l, ok := a.slots[slot]
	return l.entry, l.by, ok
}

// Len returns the number of slots with a learned value.
func (a *Agreement) Len() int { return len(a.slots) }

// Validity checks invariant 2: every value learned was proposed, either as
// a client command (registered with Proposed) or as a leader's no-op
// (which carries no data).
type Validity struct {
	proposed map[string]struct{}
}

// NewValidity returns a validity checker that knows of no proposals.
func NewValidity() *Validity {
	return &Validity{proposed: make(map[string]struct{})}
}

// Proposed registers a command handed to a replica's Propose.
func (v *Validity) Proposed(data []byte) {
	v.proposed[string(data)] = struct{}{}
}

// Learned reports a violation if e was never proposed.
func (v *Validity) Learned(r paxos.ReplicaID, e paxos.Entry) error {
	switch e.Kind {
	case paxos.EntryNoop:
		if len(e.Data) != 0 {
			return violation(InvValidity, "replica %d learned a noop carrying data at slot %d: %s", r, e.Slot, describe(e))
		}
		return nil
	case paxos.EntryCommand:
		if _, ok := v.proposed[string(e.Data)]; !ok {
			return violation(InvValidity, "replica %d learned %s at slot %d, which no client proposed", r, describe(e), e.Slot)
		}
		return nil
	}
	return violation(InvValidity, "replica %d learned an entry of unknown kind at slot %d: %s", r, e.Slot, describe(e))
}

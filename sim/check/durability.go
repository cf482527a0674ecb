package check

import (
	"fmt"
	"slices"

	"paxcron/paxos"
)

// Durability checks invariant 3: once a client was told that a value
// committed at a slot, no replica ever learns or applies another value
// there (whatever crashes and restarts happen), and at the end of a run a
// live majority still holds every acknowledged slot in its chosen prefix.
type Durability struct {
	agree *Agreement
	acked map[uint64]paxos.Entry
}

// NewDurability returns a durability checker that also compares
// acknowledgements with what replicas learned, through a.
func NewDurability(a *Agreement) *Durability {
	if a == nil {
		panic("check: NewDurability needs an Agreement")
	}
	return &Durability{agree: a, acked: make(map[uint64]paxos.Entry)}
}

// Acknowledged records that a client was told e committed at slot. An
// acknowledgement of a value that differs from one learned or acknowledged
// at that slot before is a violation. e.Slot, if set, must equal slot.
func (d *Durability) Acknowledged(slot uint64, e paxos.Entry) error {
	if e.Slot != 0 && e.Slot != slot {
		panic(fmt.Sprintf("check: Acknowledged(slot %d) with an entry for slot %d", slot, e.Slot))
	}
	e.Slot = slot
	if prev, ok := d.acked[slot]; ok && !prev.SameValue(e) {
		return violation(InvDurability, "slot %d acknowledged as %s, earlier acknowledged as %s",
			slot, describe(e), describe(prev))
	}
	if first, by, ok := d.agree.Chosen(slot); ok && !first.SameValue(e) {
		return violation(InvDurability, "slot %d acknowledged as %s, but replica %d learned %s there",
			slot, describe(e), by, describe(first))
	}
	d.acked[slot] = cloneEntry(e)
	return nil
}

// Learned reports a violation if replica r learned (or applied) a value
// other than the one acknowledged at e.Slot.
func (d *Durability) Learned(r paxos.ReplicaID, e paxos.Entry) error {
	if ack, ok := d.acked[e.Slot]; ok && !ack.SameValue(e) {
		return violation(InvDurability, "replica %d learned %s at slot %d, which was acknowledged to a client as %s",
			r, describe(e), e.Slot, describe(ack))
	}
	return nil
}

// Acked returns the number of acknowledged slots.
func (d *Durability) Acked() int { return len(d.acked) }

// ReplicaFinal is one replica's state at the end of a run, for CheckFinal.
type ReplicaFinal struct {
	ID paxos.ReplicaID
	// Up is false for a replica that is crashed at the end.
	Up bool
	// Chosen is the replica's chosen index: it knows every slot up to it
	// is chosen and holds its value, in its log or its snapshot.
	Chosen uint64
	// Entry, if not nil, returns the value the replica holds at slot; ok is
	// false for slots compacted into its snapshot or not held.
	Entry func(slot uint64) (e paxos.Entry, ok bool)
	// Snapshot is the last slot its snapshot holds (0: none). With Entry
	// set, a slot at or below Chosen counts as held only if the snapshot
	// or the log holds it: the replica's word for its chosen index is not
	// taken alone.
	Snapshot uint64
}

// CheckFinal checks, at the end of a run that was given time to settle,
// that every acknowledged slot lies within the chosen prefix of a majority
// of the replicas (replicas must list every voter, down ones included), all
// of them up, and that every replica holding the slot holds the
// acknowledged value. Slots are checked in increasing order, so the error
// names the lowest slot that fails.
func (d *Durability) CheckFinal(replicas []ReplicaFinal) error {
	quorum := len(replicas)/2 + 1
	slots := make([]uint64, 0, len(d.acked))
	//detlint:maprange the keys are sorted below
	for s := range d.acked {
		slots = append(slots, s)
	}
	slices.Sort(slots) // a map's order must not pick which error we report
	for _, slot := range slots {
		if err := d.checkSlotFinal(slot, replicas, quorum); err != nil {
			return err
		}
	}
	return nil
}

// holds reports whether r holds slot in its snapshot or its log (true
// where r gives no Entry to look).
func (r ReplicaFinal) holds(slot uint64) bool {
	if r.Entry == nil || slot <= r.Snapshot {
		return true
	}
	_, ok := r.Entry(slot)
	return ok
}

func (d *Durability) checkSlotFinal(slot uint64, replicas []ReplicaFinal, quorum int) error {
	ack := d.acked[slot]
	var holders []paxos.ReplicaID
	for _, r := range replicas {
		if r.Entry != nil {
			if e, ok := r.Entry(slot); ok && !e.SameValue(ack) {
				return violation(InvDurability, "at the end replica %d holds %s at slot %d, which was acknowledged as %s",
					r.ID, describe(e), slot, describe(ack))
			}
		}
		if r.Up && r.Chosen >= slot && r.holds(slot) {
			holders = append(holders, r.ID)
		}
	}
	if len(holders) < quorum {
		return violation(InvDurability, "at the end only replicas %v (up, chosen index >= %d, the slot in their snapshot or log) hold acknowledged slot %d (%s); a majority is %d of %d",
			holders, slot, slot, describe(ack), quorum, len(replicas))
	}
	return nil
}

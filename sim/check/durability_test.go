package check

import (
	"testing"

	"paxcron/paxos"
)

func TestDurability(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(a *Agreement, d *Durability) []step
		inv   Invariant
		parts []string
	}{
		{"acknowledged value is learned everywhere", func(a *Agreement, d *Durability) []step {
			return []step{
				func() error { return a.Learned(1, cmd(1, 1, 1, "x")) },
				func() error { return d.Acknowledged(1, cmd(1, 1, 1, "x")) },
				func() error { return d.Acknowledged(1, cmd(0, 1, 1, "x")) }, // a retry's ack
				func() error { return d.Learned(2, cmd(1, 4, 2, "x")) },
				func() error { return d.Learned(2, cmd(2, 4, 2, "other slot")) },
			}
		}, 0, nil},
		{"learned other value after the ack", func(a *Agreement, d *Durability) []step {
			return []step{
				func() error { return d.Acknowledged(3, cmd(3, 1, 1, "x")) },
				func() error { return d.Learned(2, cmd(3, 5, 2, "y")) },
			}
		}, InvDurability, []string{"replica 2", "slot 3", `"y"`, "acknowledged", `"x"`}},
		{"ack contradicts what was learned", func(a *Agreement, d *Durability) []step {
			return []step{
				func() error { return a.Learned(2, cmd(3, 1, 1, "x")) },
				func() error { return d.Acknowledged(3, cmd(3, 1, 1, "y")) },
			}
		}, InvDurability, []string{"slot 3", `"y"`, "replica 2 learned", `"x"`}},
		{"two acks disagree", func(a *Agreement, d *Durability) []step {
			return []step{
				func() error { return d.Acknowledged(3, cmd(3, 1, 1, "x")) },
				func() error { return d.Acknowledged(3, noop(3, 2, 2)) },
			}
		}, InvDurability, []string{"slot 3", "noop", `"x"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAgreement()
			runSteps(t, tc.steps(a, NewDurability(a)), tc.inv, tc.parts...)
		})
	}
}

// holds returns an Entry func over a replica's log.
func holds(es ...paxos.Entry) func(uint64) (paxos.Entry, bool) {
	return func(slot uint64) (paxos.Entry, bool) {
		for _, e := range es {
			if e.Slot == slot {
				return e, true
			}
		}
		return paxos.Entry{}, false
	}
}

func TestDurabilityCheckFinal(t *testing.T) {
	x1, y2 := cmd(1, 1, 1, "x"), cmd(2, 1, 1, "y")
	for _, tc := range []struct {
		name     string
		replicas []ReplicaFinal
		parts    []string // nil: must pass
	}{
		{"majority holds everything", []ReplicaFinal{
			{ID: 1, Up: true, Chosen: 2, Entry: holds(x1, y2)},
			{ID: 2, Up: true, Chosen: 2, Entry: holds(y2), Snapshot: 1}, // slot 1 compacted
			{ID: 3, Up: false, Chosen: 0},
		}, nil},
		{"only a minority is up with slot 2", []ReplicaFinal{
			{ID: 1, Up: true, Chosen: 2},
			{ID: 2, Up: true, Chosen: 1},
			{ID: 3, Up: false, Chosen: 2},
		}, []string{"slot 2", "[1]", "majority is 2 of 3"}},
		{"a replica holds another value", []ReplicaFinal{
			{ID: 1, Up: true, Chosen: 2},
			{ID: 2, Up: true, Chosen: 2, Entry: holds(x1, cmd(2, 3, 3, "z"))},
			{ID: 3, Up: true, Chosen: 2},
		}, []string{"replica 2 holds", `"z"`, "slot 2", `"y"`}},
		// A replica's chosen index is its own word: one that claims slot
		// 2 but holds it neither in its log nor in its snapshot does not
		// count toward the majority.
		{"a replica claims a slot it does not hold", []ReplicaFinal{
			{ID: 1, Up: true, Chosen: 2, Entry: holds(x1, y2)},
			{ID: 2, Up: true, Chosen: 2, Entry: holds(x1), Snapshot: 0},
			{ID: 3, Up: false, Chosen: 2},
		}, []string{"slot 2", "[1]", "majority is 2 of 3"}},
		{"lowest failing slot is named", []ReplicaFinal{
			{ID: 1, Up: true, Chosen: 0},
			{ID: 2, Up: true, Chosen: 0},
			{ID: 3, Up: true, Chosen: 2},
		}, []string{"acknowledged slot 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDurability(NewAgreement())
			wantOK(t, d.Acknowledged(2, y2))
			wantOK(t, d.Acknowledged(1, x1))
			err := d.CheckFinal(tc.replicas)
			if tc.parts == nil {
				wantOK(t, err)
				return
			}
			wantViolation(t, err, InvDurability, tc.parts...)
		})
	}
}

func TestDurabilityAckSlotMismatchPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	NewDurability(NewAgreement()).Acknowledged(2, cmd(3, 1, 1, "x"))
}

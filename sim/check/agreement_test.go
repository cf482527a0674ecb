package check

import (
	"testing"

	"paxcron/paxos"
)

func TestAgreement(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(a *Agreement) []step
		inv   Invariant
		parts []string
	}{
		{"same value under different ballots", func(a *Agreement) []step {
			return []step{
				func() error { return a.Learned(1, cmd(1, 1, 1, "x")) },
				func() error { return a.Learned(2, cmd(1, 2, 2, "x")) },
				func() error { return a.Learned(3, noop(2, 2, 2)) },
				func() error { return a.Learned(1, noop(2, 3, 3)) },
			}
		}, 0, nil},
		{"different data", func(a *Agreement) []step {
			return []step{
				func() error { return a.Learned(1, cmd(7, 1, 1, "x")) },
				func() error { return a.Learned(3, cmd(7, 2, 2, "y")) },
			}
		}, InvAgreement, []string{"replica 3", "slot 7", `"y"`, "ballot 2.2", "replica 1", `"x"`, "ballot 1.1"}},
		{"noop against empty command", func(a *Agreement) []step {
			return []step{
				func() error { return a.Learned(1, noop(4, 1, 1)) },
				func() error { return a.Learned(2, cmd(4, 1, 1, "")) },
			}
		}, InvAgreement, []string{"slot 4", "noop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAgreement()
			runSteps(t, tc.steps(a), tc.inv, tc.parts...)
		})
	}
}

func TestAgreementCopiesValues(t *testing.T) {
	a := NewAgreement()
	buf := []byte("x")
	wantOK(t, a.Learned(1, paxos.Entry{Slot: 1, Kind: paxos.EntryCommand, Data: buf}))
	buf[0] = 'y' // the caller reuses its buffer
	wantOK(t, a.Learned(2, cmd(1, 1, 1, "x")))
	if e, by, ok := a.Chosen(1); !ok || string(e.Data) != "x" || by != 1 || a.Len() != 1 {
		t.Fatalf("Chosen(1) = %v, %d, %t", e, by, ok)
	}
}

func TestValidity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		e     paxos.Entry
		inv   Invariant
		parts []string
	}{
		{"proposed command", cmd(1, 1, 1, "set a"), 0, nil},
		{"noop", noop(2, 1, 1), 0, nil},
		{"unproposed command", cmd(3, 1, 2, "set b"), InvValidity, []string{"replica 9", "slot 3", `"set b"`, "no client proposed"}},
		{"noop with data", paxos.Entry{Slot: 4, Kind: paxos.EntryNoop, Data: []byte("junk")}, InvValidity, []string{"noop carrying data", "slot 4"}},
		{"unknown kind", paxos.Entry{Slot: 5, Kind: 9}, InvValidity, []string{"unknown kind", "slot 5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := NewValidity()
			data := []byte("set a")
			v.Proposed(data)
			data[0] = 'X' // the caller reuses its buffer
			runSteps(t, []step{func() error { return v.Learned(9, tc.e) }}, tc.inv, tc.parts...)
		})
	}
}

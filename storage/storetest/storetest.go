// Package storetest owns the conformance suite every storage.Store must
// pass, and the reference model (Model) it checks stores against. Each
// store's tests call Run with a Harness that opens it on a fresh disk and
// can restart it, crash it and corrupt it.
package storetest

import (
	"math/rand/v2"
	"slices"
	"testing"

	"paxcron/paxos"
	"paxcron/storage"
)

// Harness is one store on its own fresh disk, with the operations the suite
// needs to restart it. Each function returns the store to use from then
// on; the harness closes the last one when the test ends.
type Harness struct {
	Store storage.Store
	// Reopen closes the store cleanly and opens it again on the same disk.
	Reopen func(t *testing.T) storage.Store
	// Crash simulates a power loss: every write not yet synced is dropped
	// and the store is opened again on what is left. It works whether or
	// not the store was closed.
	Crash func(t *testing.T) storage.Store
	// Corrupt flips one byte of one stored record, both chosen with r, as a
	// failing disk would; ok is false if no record is stored. Nil if the
	// store cannot be corrupted on purpose.
	Corrupt func(t *testing.T, r *rand.Rand) (desc string, ok bool)
	// HeldSlots lists the slots of every entry physically stored, read
	// past the store's API, in order. It shows entries that the API hides
	// but a snapshot or Compact should have deleted. Nil if unsupported.
	HeldSlots func(t *testing.T) []uint64
}

// Run runs the conformance suite; open must return a harness on a fresh,
// empty disk each time it is called.
func Run(t *testing.T, open func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) Harness)
	}{
		{"Empty", testEmpty},
		{"RoundTrip", testRoundTrip},
		{"SaveSemantics", testSaveSemantics},
		{"EntriesWindow", testEntriesWindow},
		{"TailWindow", testTailWindow},
		{"EntriesMaxBytes", testEntriesMaxBytes},
		{"NoAliasing", testNoAliasing},
		{"ReopenKeepsState", testReopenKeepsState},
		{"CrashKeepsSyncedState", testCrashKeepsSyncedState},
		{"Closed", testClosed},
		{"Corruption", testCorruption},
		{"RandomAgainstModel", testRandomAgainstModel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open) })
	}
}

// checkState fails t unless s reports exactly want.
func checkState(t *testing.T, s storage.Store, want State) {
	t.Helper()
	got, err := ReadState(s)
	if err != nil {
		t.Fatalf("reading state: %v", err)
	}
	if !got.Equal(want) {
		t.Fatalf("store state\n got %v\nwant %v\n(full got %+v)", got, want, got)
	}
}

// checkHeld fails t if h's store physically holds entries other than
// want's, such as entries at or below the snapshot index that the API
// hides but Save or Compact should have deleted.
func checkHeld(t *testing.T, h Harness, want State) {
	t.Helper()
	if h.HeldSlots == nil {
		return
	}
	if got := h.HeldSlots(t); !slices.Equal(got, slotsOf(want.Entries)) {
		t.Fatalf("store physically holds slots %v, want %v", got, slotsOf(want.Entries))
	}
}

func mustSave(t *testing.T, s storage.Store, m *Model, u storage.Update) {
	t.Helper()
	if err := s.Save(u); err != nil {
		t.Fatalf("Save: %v", err)
	}
	if err := m.Save(u); err != nil {
		t.Fatalf("model Save: %v", err)
	}
}

func entry(slot, round uint64, data string) paxos.Entry {
	e := paxos.Entry{Slot: slot, Ballot: paxos.Ballot{Round: round, Replica: 1}, Kind: paxos.EntryCommand}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

func entries(slots ...uint64) []paxos.Entry {
	es := make([]paxos.Entry, len(slots))
	for i, slot := range slots {
		es[i] = entry(slot, 1, "v")
	}
	return es
}

func snapshot(index uint64, data string) *paxos.Snapshot {
	return &paxos.Snapshot{
		Meta: paxos.SnapshotMeta{Index: index, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}},
		Data: []byte(data),
	}
}

func testEmpty(t *testing.T, open func(t *testing.T) Harness) {
	s := open(t).Store
	checkState(t, s, NewModel().State())
	if es, err := s.Entries(1, 100, 1<<20); err != nil || len(es) != 0 {
		t.Fatalf("Entries(1, 100) on an empty store = %v, %v; want none", es, err)
	}
	if _, err := s.Entries(0, 100, 1<<20); err != paxos.ErrCompacted {
		t.Fatalf("Entries(0, 100) = %v; want paxos.ErrCompacted itself (lo below FirstSlot 1)", err)
	}
	if first, err := s.FirstSlot(); err != nil || first != 1 {
		t.Fatalf("FirstSlot() on an empty store = %d, %v; want 1", first, err)
	}
	if err := s.Save(storage.Update{}); err != nil {
		t.Fatalf("empty Save: %v", err)
	}
}

func testRoundTrip(t *testing.T, open func(t *testing.T) Harness) {
	s, m := open(t).Store, NewModel()
	hs := paxos.HardState{Promised: paxos.Ballot{Round: 7, Replica: 3}, Chosen: 2}
	mustSave(t, s, m, storage.Update{HardState: &hs, Entries: []paxos.Entry{
		entry(1, 7, "one"), entry(2, 7, ""), {Slot: 3, Ballot: paxos.Ballot{Round: 7, Replica: 3}, Kind: paxos.EntryNoop},
	}})
	checkState(t, s, m.State())
	hs2 := paxos.HardState{Promised: paxos.Ballot{Round: 9, Replica: 1}, Chosen: 3}
	mustSave(t, s, m, storage.Update{HardState: &hs2})
	mustSave(t, s, m, storage.Update{Snapshot: snapshot(2, "image")})
	checkState(t, s, m.State())
	if got, _, _ := s.InitialState(); got != hs2 {
		t.Fatalf("InitialState hard state = %+v, want %+v", got, hs2)
	}
}

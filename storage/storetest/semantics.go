package storetest

import (
	"errors"
	"slices"
	"testing"

	"paxcron/paxos"
	"paxcron/storage"
)

// step is one Save of a table case.
type step struct {
	update  storage.Update
	wantErr error
}

func save(u storage.Update) step { return step{update: u} }

func testSaveSemantics(t *testing.T, open func(t *testing.T) Harness) {
	hs := &paxos.HardState{Promised: paxos.Ballot{Round: 5, Replica: 2}, Chosen: 1}
	tests := []struct {
		name      string
		steps     []step
		wantSlots []uint64
		wantSnap  uint64
		wantLast  uint64
		wantFirst uint64 // 0: wantSnap+1 (no tail)
	}{
		{name: "gaps are kept", steps: []step{save(storage.Update{Entries: entries(1, 2, 5, 9)})},
			wantSlots: []uint64{1, 2, 5, 9}, wantLast: 9},
		{name: "overwrite of a slot", steps: []step{
			save(storage.Update{Entries: []paxos.Entry{entry(4, 1, "old")}}),
			save(storage.Update{Entries: []paxos.Entry{entry(4, 2, "new"), entry(3, 2, "x")}}),
		}, wantSlots: []uint64{3, 4}, wantLast: 4},
		{name: "out of order slots in one update", steps: []step{
			save(storage.Update{Entries: entries(7, 3, 5)}),
		}, wantSlots: []uint64{3, 5, 7}, wantLast: 7},
		{name: "snapshot deletes entries at or below its index only", steps: []step{
			save(storage.Update{Entries: entries(1, 2, 3, 4, 6, 9)}),
			save(storage.Update{Snapshot: snapshot(4, "s4")}),
		}, wantSlots: []uint64{6, 9}, wantSnap: 4, wantLast: 9},
		{name: "snapshot above every entry", steps: []step{
			save(storage.Update{Entries: entries(1, 2)}),
			save(storage.Update{Snapshot: snapshot(10, "s10")}),
		}, wantSnap: 10, wantLast: 10},
		{name: "snapshot and entries in one update", steps: []step{
			save(storage.Update{Entries: entries(1, 2, 3)}),
			save(storage.Update{HardState: hs, Snapshot: snapshot(5, "s5"), Entries: entries(4, 5, 6, 8)}),
		}, wantSlots: []uint64{6, 8}, wantSnap: 5, wantLast: 8},
		{name: "entries below a stored snapshot are dropped", steps: []step{
			save(storage.Update{Snapshot: snapshot(5, "s5")}),
			save(storage.Update{Entries: entries(2, 5, 7)}),
		}, wantSlots: []uint64{7}, wantSnap: 5, wantLast: 7},
		{name: "newer snapshot replaces the older", steps: []step{
			save(storage.Update{Snapshot: snapshot(3, "s3"), Entries: entries(4, 5, 6)}),
			save(storage.Update{Snapshot: snapshot(5, "s5")}),
		}, wantSlots: []uint64{6}, wantSnap: 5, wantLast: 6},
		{name: "snapshot at the same index replaces it", steps: []step{
			save(storage.Update{Snapshot: snapshot(3, "first")}),
			save(storage.Update{Snapshot: snapshot(3, "second")}),
		}, wantSnap: 3, wantLast: 3},
		{name: "older snapshot is rejected and nothing written", steps: []step{
			save(storage.Update{Snapshot: snapshot(5, "s5"), Entries: entries(6)}),
			{update: storage.Update{HardState: hs, Snapshot: snapshot(4, "s4"), Entries: entries(7)}, wantErr: storage.ErrInvalid},
		}, wantSlots: []uint64{6}, wantSnap: 5, wantLast: 6},
		{name: "slot 0 is rejected and nothing written", steps: []step{
			save(storage.Update{Entries: entries(1)}),
			{update: storage.Update{HardState: hs, Entries: entries(2, 0)}, wantErr: storage.ErrInvalid},
		}, wantSlots: []uint64{1}, wantLast: 1},
		// The log's tail: a snapshot that keeps its last TailSlots slots.
		{name: "snapshot keeps its tail", steps: []step{
			save(storage.Update{Entries: entries(1, 2, 3, 4, 5, 6, 9)}),
			save(storage.Update{Snapshot: snapshot(5, "s5"), TailSlots: 2}),
		}, wantSlots: []uint64{4, 5, 6, 9}, wantSnap: 5, wantLast: 9, wantFirst: 4},
		{name: "a tail longer than the log keeps all of it", steps: []step{
			save(storage.Update{Entries: entries(1, 2, 3)}),
			save(storage.Update{Snapshot: snapshot(3, "s3"), TailSlots: 10}),
		}, wantSlots: []uint64{1, 2, 3}, wantSnap: 3, wantLast: 3, wantFirst: 1},
		{name: "entries in the update's own tail are written", steps: []step{
			save(storage.Update{Entries: entries(1, 2)}),
			save(storage.Update{Snapshot: snapshot(6, "s6"), TailSlots: 3, Entries: entries(3, 4, 5, 7)}),
		}, wantSlots: []uint64{4, 5, 7}, wantSnap: 6, wantLast: 7, wantFirst: 4},
		{name: "entries in a stored tail are not overwritten", steps: []step{
			save(storage.Update{Snapshot: snapshot(5, "s5"), TailSlots: 3, Entries: entries(3, 4, 5, 6)}),
			save(storage.Update{Entries: []paxos.Entry{entry(4, 9, "late"), entry(7, 9, "new")}}),
		}, wantSlots: []uint64{3, 4, 5, 6, 7}, wantSnap: 5, wantLast: 7, wantFirst: 3},
		{name: "a snapshot without a tail deletes the stored tail", steps: []step{
			save(storage.Update{Entries: entries(1, 2, 3, 4, 5, 6)}),
			save(storage.Update{Snapshot: snapshot(4, "s4"), TailSlots: 2}),
			save(storage.Update{Snapshot: snapshot(5, "s5")}),
		}, wantSlots: []uint64{6}, wantSnap: 5, wantLast: 6},
		{name: "a newer snapshot's tail keeps only what is held", steps: []step{
			save(storage.Update{Entries: entries(1, 2, 3, 4)}),
			save(storage.Update{Snapshot: snapshot(4, "s4")}),
			save(storage.Update{Entries: entries(5, 6, 7, 8)}),
			save(storage.Update{Snapshot: snapshot(8, "s8"), TailSlots: 10}),
		}, wantSlots: []uint64{5, 6, 7, 8}, wantSnap: 8, wantLast: 8, wantFirst: 5},
		{name: "a tail without a snapshot is rejected", steps: []step{
			save(storage.Update{Entries: entries(1)}),
			{update: storage.Update{HardState: hs, Entries: entries(2), TailSlots: 1}, wantErr: storage.ErrInvalid},
		}, wantSlots: []uint64{1}, wantLast: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := open(t)
			s, m := h.Store, NewModel()
			for i, st := range tt.steps {
				runStep(t, i, s, m, st)
			}
			want := m.State()
			checkState(t, s, want)
			checkHeld(t, h, want)
			var slots []uint64
			for _, e := range want.Entries {
				slots = append(slots, e.Slot)
			}
			wantFirst := tt.wantFirst
			if wantFirst == 0 {
				wantFirst = tt.wantSnap + 1
			}
			if !slices.Equal(slots, tt.wantSlots) || want.Snapshot.Meta.Index != tt.wantSnap || want.LastSlot != tt.wantLast || want.FirstSlot != wantFirst {
				t.Fatalf("model disagrees with the table: slots %v snap %d first %d last %d; table says %v %d %d %d",
					slots, want.Snapshot.Meta.Index, want.FirstSlot, want.LastSlot, tt.wantSlots, tt.wantSnap, wantFirst, tt.wantLast)
			}
		})
	}
}

func runStep(t *testing.T, i int, s storage.Store, m *Model, st step) {
	t.Helper()
	err, modelErr := s.Save(st.update), m.Save(st.update)
	if !errors.Is(err, st.wantErr) || !errors.Is(modelErr, st.wantErr) {
		t.Fatalf("step %d: error %v (model: %v), want %v", i, err, modelErr, st.wantErr)
	}
}

func testEntriesWindow(t *testing.T, open func(t *testing.T) Harness) {
	s, m := open(t).Store, NewModel()
	mustSave(t, s, m, storage.Update{Snapshot: snapshot(2, "s2"), Entries: entries(3, 4, 6, 9, 10)})
	const noLimit = ^uint64(0)
	tests := []struct {
		lo, hi    uint64
		wantSlots []uint64
		wantErr   error
	}{
		{lo: 3, hi: 11, wantSlots: []uint64{3, 4, 6, 9, 10}},
		{lo: 5, hi: 6},
		{lo: 5, hi: 7, wantSlots: []uint64{6}},
		{lo: 4, hi: 10, wantSlots: []uint64{4, 6, 9}},
		{lo: 11, hi: 100},
		{lo: 7, hi: 7},
		{lo: 9, hi: 3},
		{lo: 2, hi: 11, wantErr: paxos.ErrCompacted},
		{lo: 1, hi: 11, wantErr: paxos.ErrCompacted},
	}
	for _, tt := range tests {
		es, err := s.Entries(tt.lo, tt.hi, noLimit)
		if !errors.Is(err, tt.wantErr) || !slices.Equal(slotsOf(es), tt.wantSlots) {
			t.Errorf("Entries(%d, %d) = %v, %v; want %v, %v", tt.lo, tt.hi, slotsOf(es), err, tt.wantSlots, tt.wantErr)
		}
	}
}

// testTailWindow reads across the log's tail: Entries serves every slot
// from FirstSlot on, below and above the snapshot index alike.
func testTailWindow(t *testing.T, open func(t *testing.T) Harness) {
	h := open(t)
	s, m := h.Store, NewModel()
	mustSave(t, s, m, storage.Update{Entries: entries(1, 2, 3, 4, 5, 6, 7, 8, 9)})
	mustSave(t, s, m, storage.Update{Snapshot: snapshot(6, "s6"), TailSlots: 3})
	const noLimit = ^uint64(0)
	tests := []struct {
		lo, hi    uint64
		wantSlots []uint64
		wantErr   error
	}{
		{lo: 4, hi: 100, wantSlots: []uint64{4, 5, 6, 7, 8, 9}},
		{lo: 4, hi: 7, wantSlots: []uint64{4, 5, 6}},
		{lo: 6, hi: 8, wantSlots: []uint64{6, 7}},
		{lo: 3, hi: 100, wantErr: paxos.ErrCompacted},
		{lo: 1, hi: 5, wantErr: paxos.ErrCompacted},
	}
	check := func(when string) {
		t.Helper()
		for _, tt := range tests {
			es, err := s.Entries(tt.lo, tt.hi, noLimit)
			if !errors.Is(err, tt.wantErr) || !slices.Equal(slotsOf(es), tt.wantSlots) {
				t.Errorf("%s: Entries(%d, %d) = %v, %v; want %v, %v", when, tt.lo, tt.hi, slotsOf(es), err, tt.wantSlots, tt.wantErr)
			}
		}
		if first, err := s.FirstSlot(); err != nil || first != 4 {
			t.Errorf("%s: FirstSlot() = %d, %v; want 4", when, first, err)
		}
	}
	check("after the snapshot")
	s = h.Reopen(t)
	check("after a reopen")
	s = h.Crash(t)
	check("after a crash")
	checkState(t, s, m.State())
}

func testEntriesMaxBytes(t *testing.T, open func(t *testing.T) Harness) {
	s, m := open(t).Store, NewModel()
	// Sizes: slot 1 is 42 bytes, 2 is 52, 4 is 62, 5 is 32 (paxos.EntrySize).
	es := []paxos.Entry{entry(1, 1, "0123456789"), entry(2, 1, "01234567890123456789"),
		entry(4, 1, "012345678901234567890123456789"), entry(5, 1, "")}
	mustSave(t, s, m, storage.Update{Entries: es})
	tests := []struct {
		lo, maxBytes uint64
		wantSlots    []uint64
	}{
		{lo: 1, maxBytes: 0, wantSlots: []uint64{1}},
		{lo: 1, maxBytes: 41, wantSlots: []uint64{1}},
		{lo: 1, maxBytes: 42, wantSlots: []uint64{1}},
		{lo: 1, maxBytes: 93, wantSlots: []uint64{1}},
		{lo: 1, maxBytes: 94, wantSlots: []uint64{1, 2}},
		{lo: 1, maxBytes: 155, wantSlots: []uint64{1, 2}},
		{lo: 1, maxBytes: 156, wantSlots: []uint64{1, 2, 4}},
		{lo: 1, maxBytes: 188, wantSlots: []uint64{1, 2, 4, 5}},
		{lo: 3, maxBytes: 1, wantSlots: []uint64{4}},
		{lo: 3, maxBytes: 94, wantSlots: []uint64{4, 5}},
		{lo: 6, maxBytes: 0},
	}
	for _, tt := range tests {
		got, err := s.Entries(tt.lo, 100, tt.maxBytes)
		if err != nil || !slices.Equal(slotsOf(got), tt.wantSlots) {
			t.Errorf("Entries(%d, 100, %d) = %v, %v; want %v", tt.lo, tt.maxBytes, slotsOf(got), err, tt.wantSlots)
		}
	}
}

func slotsOf(es []paxos.Entry) []uint64 {
	var slots []uint64
	for _, e := range es {
		slots = append(slots, e.Slot)
	}
	return slots
}

package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"paxcron/paxos"
	"paxcron/storage"
)

func testNoAliasing(t *testing.T, open func(t *testing.T) Harness) {
	s, m := open(t).Store, NewModel()
	data := []byte("original")
	snap := snapshot(1, "image")
	mustSave(t, s, m, storage.Update{Snapshot: snap, Entries: []paxos.Entry{{Slot: 2, Kind: paxos.EntryCommand, Data: data}}})
	copy(data, "mutated!")
	copy(snap.Data, "XXXXX")
	snap.Meta.Membership.Voters[0] = 9
	checkState(t, s, m.State())

	es, err := s.Entries(2, 3, 1<<20)
	if err != nil || len(es) != 1 {
		t.Fatalf("Entries: %v, %v", es, err)
	}
	copy(es[0].Data, "mutated!")
	got, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	copy(got.Data, "XXXXX")
	checkState(t, s, m.State())
}

func testReopenKeepsState(t *testing.T, open func(t *testing.T) Harness) {
	h := open(t)
	s, m := h.Store, NewModel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 30 {
		mustSave(t, s, m, RandomUpdate(r, m))
		if i%10 == 9 {
			s = h.Reopen(t)
			checkState(t, s, m.State())
		}
	}
}

func testCrashKeepsSyncedState(t *testing.T, open func(t *testing.T) Harness) {
	h := open(t)
	s, m := h.Store, NewModel()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 30 {
		mustSave(t, s, m, RandomUpdate(r, m))
		if i%10 == 9 {
			s = h.Crash(t)
			checkState(t, s, m.State())
		}
	}
}

func testClosed(t *testing.T, open func(t *testing.T) Harness) {
	h := open(t)
	s := h.Store
	if err := s.Save(storage.Update{Entries: entries(1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, _, errInit := s.InitialState()
	_, errEntries := s.Entries(1, 2, 100)
	_, errLast := s.LastSlot()
	_, errFirst := s.FirstSlot()
	_, errSnap := s.Snapshot()
	errSave := s.Save(storage.Update{Entries: entries(2)})
	errClose := s.Close()
	for i, err := range []error{errInit, errEntries, errLast, errFirst, errSnap, errSave, errClose} {
		if !errors.Is(err, storage.ErrClosed) {
			t.Errorf("call %d on a closed store: %v, want ErrClosed", i, err)
		}
	}
	s = h.Crash(t)
	checkState(t, s, State{Entries: entries(1), FirstSlot: 1, LastSlot: 1})
}

// testCorruption flips one byte of one record, for many seeds, and checks
// that every read returns either the right data or ErrCorrupt, and that the
// damaged record is reported, before and after a restart.
func testCorruption(t *testing.T, open func(t *testing.T) Harness) {
	if open(t).Corrupt == nil {
		t.Skip("store cannot be corrupted on purpose")
	}
	for seed := range uint64(24) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := open(t)
			s, m := h.Store, NewModel()
			hs := paxos.HardState{Promised: paxos.Ballot{Round: 3, Replica: 1}, Chosen: 4}
			mustSave(t, s, m, storage.Update{HardState: &hs, Snapshot: snapshot(3, "snapshot image"), TailSlots: 1,
				Entries: []paxos.Entry{entry(3, 3, "three"), entry(4, 3, "four"), entry(5, 3, "five"), entry(8, 3, "eight")}})
			desc, ok := h.Corrupt(t, rand.New(rand.NewPCG(seed, 99)))
			if !ok {
				t.Fatal("Corrupt found no record to corrupt")
			}
			checkCorruptReads(t, s, m.State(), desc)
			s = h.Crash(t)
			checkCorruptReads(t, s, m.State(), desc)
		})
	}
}

// checkCorruptReads reads every record of s one by one. Each read must
// return want's data or an error wrapping ErrCorrupt, and at least one must
// fail: the damaged record must never be served as data.
func checkCorruptReads(t *testing.T, s storage.Store, want State, desc string) {
	t.Helper()
	var reported int
	check := func(what string, err error, same bool) {
		t.Helper()
		switch {
		case err != nil && !errors.Is(err, storage.ErrCorrupt):
			t.Fatalf("after corrupting %s: %s: %v, want ErrCorrupt or data", desc, what, err)
		case err != nil:
			reported++
		case !same:
			t.Fatalf("after corrupting %s: %s returned wrong data", desc, what)
		}
	}
	hs, meta, err := s.InitialState()
	check("InitialState", err, hs == want.HardState && meta.Index == want.Snapshot.Meta.Index)
	snap, err := s.Snapshot()
	check("Snapshot", err, State{Snapshot: snap}.Equal(State{Snapshot: want.Snapshot}))
	for _, e := range want.Entries {
		got, err := s.Entries(e.Slot, e.Slot+1, 1<<20)
		check(fmt.Sprintf("Entries(%d)", e.Slot), err, State{Entries: got}.Equal(State{Entries: []paxos.Entry{e}}))
	}
	all, err := s.Entries(want.FirstSlot, 1<<20, 1<<20)
	check("Entries(all)", err, State{Entries: all}.Equal(State{Entries: want.Entries}))
	if reported == 0 {
		t.Fatalf("corrupting %s went unnoticed by every read", desc)
	}
}

// testRandomAgainstModel runs random saves, compactions, restarts and
// crashes and compares the store with the model after each.
func testRandomAgainstModel(t *testing.T, open func(t *testing.T) Harness) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := open(t)
			s, m := h.Store, NewModel()
			r := rand.New(rand.NewPCG(seed, 7))
			for range 150 {
				s = randomStep(t, r, h, s, m)
				checkState(t, s, m.State())
				checkHeld(t, h, m.State())
			}
		})
	}
}

func randomStep(t *testing.T, r *rand.Rand, h Harness, s storage.Store, m *Model) storage.Store {
	t.Helper()
	switch n := r.IntN(100); {
	case n < 4:
		return h.Reopen(t)
	case n < 8:
		return h.Crash(t)
	default:
		mustSave(t, s, m, RandomUpdate(r, m))
	}
	return s
}

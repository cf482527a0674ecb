package memstore_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/memstore"
	"paxcron/storage/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		s := memstore.New()
		return storetest.Harness{
			Store: s,
			Reopen: func(t *testing.T) storage.Store {
				if err := s.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				s.Restart()
				return s
			},
			Crash: func(*testing.T) storage.Store { s.Crash(); return s },
			Corrupt: func(_ *testing.T, r *rand.Rand) (string, bool) {
				return s.CorruptRandomRecord(r)
			},
			HeldSlots: func(*testing.T) []uint64 { return s.HeldSlots() },
		}
	})
}

func saveRandom(t *testing.T, r *rand.Rand, s *memstore.Store, m *storetest.Model) storage.Update {
	t.Helper()
	u := storetest.RandomUpdate(r, m)
	if err := s.Save(u); err != nil {
		t.Fatalf("Save: %v", err)
	}
	if err := m.Save(u); err != nil {
		t.Fatalf("model Save: %v", err)
	}
	return u
}

func checkState(t *testing.T, s storage.Store, want storetest.State) {
	t.Helper()
	got, err := storetest.ReadState(s)
	if err != nil {
		t.Fatalf("ReadState: %v", err)
	}
	if !got.Equal(want) {
		t.Fatalf("state\n got %v\nwant %v", got, want)
	}
}

// TestCrashDuringSave checks the three ways out of a crashed Save: a power
// loss drops it, a process restart keeps it, and in between reads see it
// while writes are refused.
func TestCrashDuringSave(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		s, m := memstore.New(), storetest.NewModel()
		for range r.IntN(20) {
			saveRandom(t, r, s, m)
		}
		before := m.Clone()
		u := storetest.RandomUpdate(r, m)
		for u.IsEmpty() { // an empty Save writes nothing, so cannot crash
			u = storetest.RandomUpdate(r, m)
		}
		s.CrashDuringNextSave()
		if err := s.Save(u); !errors.Is(err, memstore.ErrCrashed) {
			t.Fatalf("seed %d: crashing Save = %v, want ErrCrashed", seed, err)
		}
		after := before.Clone()
		if err := after.Save(u); err != nil {
			t.Fatal(err)
		}
		checkState(t, s, after.State())
		if err := s.Save(storage.Update{Entries: []paxos.Entry{{Slot: 1000, Kind: paxos.EntryNoop}}}); !errors.Is(err, memstore.ErrCrashed) {
			t.Fatalf("seed %d: Save after a crash = %v, want ErrCrashed", seed, err)
		}
		m = after
		if seed%2 == 0 {
			s.Crash()
			m = before
		} else {
			s.Restart()
		}
		checkState(t, s, m.State())
		// Usable again, and later saves are synced as usual.
		saveRandom(t, r, s, m)
		s.Crash()
		checkState(t, s, m.State())
	}
}

func TestWipe(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	s, m := memstore.New(), storetest.NewModel()
	for range 10 {
		saveRandom(t, r, s, m)
	}
	s.CrashDuringNextSave()
	s.Wipe()
	checkState(t, s, storetest.NewModel().State())
	saveRandom(t, r, s, storetest.NewModel()) // not crashed: the fault went with the disk
}

func TestCorruptRandomRecordIsDeterministic(t *testing.T) {
	descs := func() []string {
		r := rand.New(rand.NewPCG(8, 8))
		s, m := memstore.New(), storetest.NewModel()
		var out []string
		for range 20 {
			saveRandom(t, r, s, m)
			desc, _ := s.CorruptRandomRecord(r)
			out = append(out, desc)
		}
		return out
	}
	a, b := descs(), descs()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("corruption %d differs between runs of one seed: %q vs %q", i, a[i], b[i])
		}
	}
	if _, ok := memstore.New().CorruptRandomRecord(rand.New(rand.NewPCG(1, 1))); ok {
		t.Fatal("corrupted a record of an empty store")
	}
}

func BenchmarkSave(b *testing.B) {
	s := memstore.New()
	hs := paxos.HardState{Promised: paxos.Ballot{Round: 1, Replica: 1}}
	es := make([]paxos.Entry, 16)
	data := make([]byte, 256)
	var slot uint64
	b.SetBytes(int64(len(es) * len(data)))
	for b.Loop() {
		for i := range es {
			slot++
			es[i] = paxos.Entry{Slot: slot, Ballot: hs.Promised, Kind: paxos.EntryCommand, Data: data}
		}
		hs.Chosen = slot
		if err := s.Save(storage.Update{HardState: &hs, Entries: es}); err != nil {
			b.Fatal(err)
		}
		if slot%4096 == 0 {
			if err := s.Save(storage.Update{Snapshot: &paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: slot - 1024}}}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

package pebblestore

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/paxos"
	"paxcron/storage"
)

// bigSnapshotBytes exceeds Pebble's default block cache (8 MiB), so a
// block holding the snapshot is loaded again by every read that touches it.
const bigSnapshotBytes = 12 << 20

func incompressible(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func saveEntries(t testing.TB, s *Store, lo, hi uint64) {
	t.Helper()
	var es []paxos.Entry
	for slot := lo; slot <= hi; slot++ {
		es = append(es, paxos.Entry{Slot: slot, Kind: paxos.EntryCommand, Data: make([]byte, 256)})
	}
	if err := s.Save(storage.Update{Entries: es}); err != nil {
		t.Fatal(err)
	}
}

// storeBesideBigSnapshot returns a store on a memory file system holding
// entries 1-1100, then a snapshot of bigSnapshotBytes at index 1000 that
// keeps a tail of 50 entries, flushed together into an sstable, then
// entries 1101-1200 in the memtable; and the snapshot.
func storeBesideBigSnapshot(tb testing.TB) (*Store, paxos.Snapshot) {
	tb.Helper()
	s, err := Open("store", Options{FS: vfs.NewMem(), Logger: quietLogger{}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	saveEntries(tb, s, 1, 1100)
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 1000}, Data: incompressible(bigSnapshotBytes)}
	if err := s.Save(storage.Update{Snapshot: &snap, TailSlots: 50}); err != nil {
		tb.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		tb.Fatal(err)
	}
	saveEntries(tb, s, 1101, 1200)
	return s, snap
}

// BenchmarkEntriesBesideSnapshot reads the 51 newest entries of
// storeBesideBigSnapshot's store, as a leader reads what it sends in its
// accepts. One op is one read.
func BenchmarkEntriesBesideSnapshot(b *testing.B) {
	s, _ := storeBesideBigSnapshot(b)
	for b.Loop() {
		if _, err := s.Entries(1150, 1201, 1<<30); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEntryReadsSkipTheSnapshot is the regression test of the scale
// benchmark's finding: with the snapshot flushed into an sstable beside
// older entries, reads of entries (newer ones in the memtable, the kept
// tail in the sstable, the first and last slots) must not load the
// snapshot's block. Before the snapshot moved in front of the entries,
// each read of the newer entries missed the block cache once (the
// snapshot's block) and took milliseconds.
func TestEntryReadsSkipTheSnapshot(t *testing.T) {
	s, snap := storeBesideBigSnapshot(t)

	const reads = 20
	misses := func(read func() error) int64 {
		before := s.db.Metrics().BlockCache.Misses
		for range reads {
			if err := read(); err != nil {
				t.Fatal(err)
			}
		}
		return s.db.Metrics().BlockCache.Misses - before
	}
	entries := func(lo, hi uint64) func() error {
		return func() error {
			es, err := s.Entries(lo, hi, 1<<30)
			if err == nil && len(es) != int(hi-lo) {
				t.Fatalf("Entries(%d, %d): %d entries", lo, hi, len(es))
			}
			return err
		}
	}
	for _, c := range []struct {
		name string
		read func() error
	}{
		{"newer entries", entries(1150, 1201)},
		{"the kept tail", entries(1060, 1100)},
		{"across both", entries(1090, 1120)},
		{"first slot", s.loadFirstSlot},
		{"last slot", func() error { _, _, err := s.lastNumber(entryTag); return err }},
	} {
		// A block read once and cached is fine; one read per call is
		// the snapshot's block (nothing else here misses every time).
		if m := misses(c.read); m >= reads {
			t.Errorf("%s: %d block-cache misses in %d reads: the reads load the snapshot's block", c.name, m, reads)
		}
	}
	got, err := s.Snapshot()
	if err != nil || !bytes.Equal(got.Data, snap.Data) {
		t.Fatalf("the snapshot read back: %d bytes, err %v", len(got.Data), err)
	}
}

// TestOpenMovesALegacySnapshot: a store written before the snapshot moved
// (its record under "s") opens with the snapshot, the entries and the
// hard state as they were, and holds nothing under "s" afterwards.
func TestOpenMovesALegacySnapshot(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("store", Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	saveEntries(t, s, 1, 30)
	hs := paxos.HardState{Promised: paxos.Ballot{Round: 3, Replica: 2}, Chosen: 30}
	if err := s.Save(storage.Update{HardState: &hs}); err != nil {
		t.Fatal(err)
	}
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 20}, Data: []byte("the state at 20")}
	// Write the snapshot as the old layout did: its record under "s",
	// the entries up to it deleted.
	b := s.db.NewBatch()
	if err := b.DeleteRange(entryKey(0), entryKeyAfter(20), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Set(legacySnapshotKey(20), s.codec.AppendSnapshot(nil, snap), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for open := range 2 { // the move, then a plain open
		s, err = Open("store", Options{FS: fs, Logger: quietLogger{}})
		if err != nil {
			t.Fatalf("open %d: %v", open, err)
		}
		gotHS, meta, err := s.InitialState()
		if err != nil || gotHS != hs || meta.Index != snap.Meta.Index {
			t.Fatalf("open %d: InitialState %+v %+v %v, want %+v %+v", open, gotHS, meta, err, hs, snap.Meta)
		}
		got, err := s.Snapshot()
		if err != nil || !bytes.Equal(got.Data, snap.Data) {
			t.Fatalf("open %d: snapshot %q %v", open, got.Data, err)
		}
		if first, _ := s.FirstSlot(); first != 21 {
			t.Fatalf("open %d: first slot %d, want 21", open, first)
		}
		if _, ok, err := s.lastNumber(legacySnapshotTag); ok || err != nil {
			t.Fatalf("open %d: a record still under %q (err %v)", open, legacySnapshotTag, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenRefusesTwoSnapshots: a snapshot under both keys cannot come from
// the move (one batch writes one and deletes the other), so it is
// reported as corruption rather than one of them picked.
func TestOpenRefusesTwoSnapshots(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("store", Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 5}, Data: []byte("x")}
	if err := s.Save(storage.Update{Snapshot: &snap}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(legacySnapshotKey(4), s.codec.AppendSnapshot(nil, snap), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("store", Options{FS: fs, Logger: quietLogger{}}); err == nil || !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("open: %v, want ErrCorrupt", err)
	}
}

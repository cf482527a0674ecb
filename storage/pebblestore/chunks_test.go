package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/paxos"
	"paxcron/storage"
)

// chunkNumbers lists the (index, chunk) pairs of every chunk key.
func chunkNumbers(t *testing.T, s *Store) []string {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{snapshotChunkTag}, UpperBound: tagUpperBound(snapshotChunkTag)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for valid := it.First(); valid; valid = it.Next() {
		index, n, err := parseChunkKey(it.Key())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d/%d", index, n))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkSnapshot(t *testing.T, s *Store, want paxos.Snapshot) {
	t.Helper()
	got, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got.Meta.Index != want.Meta.Index || !bytes.Equal(got.Data, want.Data) || (got.Data == nil) != (want.Data == nil) {
		t.Fatalf("read back the snapshot at %d of %d bytes; want the one at %d of %d bytes", got.Meta.Index, len(got.Data), want.Meta.Index, len(want.Data))
	}
	_, meta, err := s.InitialState()
	if err != nil || meta.Index != want.Meta.Index || len(meta.Membership.Voters) != len(want.Meta.Membership.Voters) {
		t.Fatalf("InitialState: meta %+v, err %v; want %+v", meta, err, want.Meta)
	}
}

// TestSnapshotInChunks: a snapshot is kept as a header and 1 MiB chunks;
// each newer snapshot (or one saved again at the same index) leaves no
// chunk of the one before, and everything reads back across a reopen.
func TestSnapshotInChunks(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("store", Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	voters := paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}
	image := incompressible(3*snapshotChunkBytes + 12345)
	steps := []struct {
		snap   paxos.Snapshot
		chunks []string
	}{
		{paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 10, Membership: voters}, Data: image}, []string{"10/0", "10/1", "10/2", "10/3"}},
		{paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 20}, Data: image[:snapshotChunkBytes+1]}, []string{"20/0", "20/1"}},
		{paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 20}, Data: image[:snapshotChunkBytes]}, []string{"20/0"}},
		{paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 30, Membership: voters}}, nil},
		{paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 40}, Data: image[:7]}, []string{"40/0"}},
	}
	for i, step := range steps {
		snap := step.snap
		if err := s.Save(storage.Update{Snapshot: &snap}); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := chunkNumbers(t, s); fmt.Sprint(got) != fmt.Sprint(step.chunks) {
			t.Fatalf("step %d: chunk keys %v, want %v", i, got, step.chunks)
		}
		checkSnapshot(t, s, snap)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s, err = Open("store", Options{FS: fs, Logger: quietLogger{}}); err != nil {
			t.Fatal(err)
		}
		checkSnapshot(t, s, snap)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotBatchIsSizedUpFront: the batch of a Save with a snapshot
// never grows; growing copies the whole batch so far in one step, which
// is what chunks are for (keys.go).
func TestSnapshotBatchIsSizedUpFront(t *testing.T) {
	s, err := Open("store", Options{FS: vfs.NewMem(), Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 100}, Data: incompressible(5*snapshotChunkBytes + 3)}
	var es []paxos.Entry
	for slot := uint64(90); slot <= 300; slot++ {
		es = append(es, paxos.Entry{Slot: slot, Kind: paxos.EntryCommand, Data: make([]byte, 300)})
	}
	hs := paxos.HardState{Chosen: 100}
	u := storage.Update{HardState: &hs, Snapshot: &snap, Entries: es, TailSlots: 5}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.newBatch(u)
	defer b.Close()
	before := cap(b.Repr())
	if _, err := s.fillBatch(b, u); err != nil {
		t.Fatal(err)
	}
	if after := cap(b.Repr()); after != before {
		t.Fatalf("the batch grew from %d to %d bytes (it holds %d)", before, after, len(b.Repr()))
	}
}

// TestDamagedChunksAreCorruption: a chunk missing, added, swapped or
// flipped is reported as corruption, never read as a shorter or different
// image.
func TestDamagedChunksAreCorruption(t *testing.T) {
	image := incompressible(3*snapshotChunkBytes + 5)
	chunkKey := func(n uint64) []byte { return appendChunkKey(nil, 10, n) }
	get := func(t *testing.T, s *Store, key []byte) []byte {
		v, closer, err := s.db.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		return bytes.Clone(v)
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, s *Store, b *pebble.Batch)
		want   string
	}{
		{"a chunk missing", func(t *testing.T, s *Store, b *pebble.Batch) {
			_ = b.Delete(chunkKey(1), nil)
		}, "chunk 2 where chunk 1 was due"},
		{"the last chunk missing", func(t *testing.T, s *Store, b *pebble.Batch) {
			_ = b.Delete(chunkKey(3), nil)
		}, "3 chunks of 3145728 bytes, its header says 4 of 3145733"},
		{"a chunk too many", func(t *testing.T, s *Store, b *pebble.Batch) {
			_ = b.Set(chunkKey(4), s.codec.AppendSnapshotChunk(nil, 10, 4, []byte("more")), nil)
		}, "more than the 4 chunks of its header"},
		{"two chunks swapped", func(t *testing.T, s *Store, b *pebble.Batch) {
			c0, c1 := get(t, s, chunkKey(0)), get(t, s, chunkKey(1))
			_ = b.Set(chunkKey(0), c1, nil)
			_ = b.Set(chunkKey(1), c0, nil)
		}, "chunk 0 holds chunk 1"},
		{"a flipped byte", func(t *testing.T, s *Store, b *pebble.Batch) {
			v := get(t, s, chunkKey(2))
			v[1000] ^= 0x40
			_ = b.Set(chunkKey(2), v, nil)
		}, "checksum mismatch"},
		{"a chunk of another snapshot", func(t *testing.T, s *Store, b *pebble.Batch) {
			_ = b.Set(chunkKey(2), s.codec.AppendSnapshotChunk(nil, 9, 2, image[:snapshotChunkBytes]), nil)
		}, "holds index 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s, err := Open("store", Options{FS: fs, Logger: quietLogger{}})
			if err != nil {
				t.Fatal(err)
			}
			snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 10}, Data: image}
			if err := s.Save(storage.Update{Snapshot: &snap}); err != nil {
				t.Fatal(err)
			}
			b := s.db.NewBatch()
			c.damage(t, s, b)
			if err := b.Commit(pebble.Sync); err != nil {
				t.Fatal(err)
			}
			_, err = s.Snapshot()
			if !errors.Is(err, storage.ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
				t.Fatalf("Snapshot: %v; want ErrCorrupt saying %q", err, c.want)
			}
			// The header alone is whole: the replica learns the index at
			// start and fails on the image when it needs it.
			if _, meta, err := s.InitialState(); err != nil || meta.Index != 10 {
				t.Fatalf("InitialState: %+v, %v", meta, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

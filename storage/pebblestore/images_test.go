package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/paxos"
	"paxcron/storage"
)

// imageFiles lists the image files of s's folder by number.
func imageFiles(t *testing.T, s *Store) []uint64 {
	t.Helper()
	names, err := s.fs.List(s.imagesDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, name := range names {
		n, ok := parseImageFileName(name)
		if !ok {
			t.Fatalf("unexpected file %q among the images", name)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// chunkKeys counts the chunk keys in the database (stores written before
// image files kept chunks there).
func chunkKeys(t *testing.T, s *Store) int {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{snapshotChunkTag}, UpperBound: tagUpperBound(snapshotChunkTag)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n
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

func openMem(t *testing.T, fs vfs.FS) *Store {
	t.Helper()
	s, err := Open("store", Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// closedMemWithSlots leaves in fs a closed store holding slots 1 to n,
// each saved (and synced) on its own: a WAL of many synced writes.
func closedMemWithSlots(t *testing.T, fs vfs.FS, n uint64) {
	t.Helper()
	s := openMem(t, fs)
	for slot := uint64(1); slot <= n; slot++ {
		saveEntries(t, s, slot, slot)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotImageFiles: a snapshot's image is kept in one file of its
// own, none for an empty image; each newer snapshot (or one saved again
// at the same index) leaves no file of the one before, the database holds
// no chunk, and everything reads back across a reopen.
func TestSnapshotImageFiles(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs)
	voters := paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}
	image := incompressible(3*snapshotChunkBytes + 12345)
	steps := []struct {
		snap  paxos.Snapshot
		files []uint64
	}{
		{paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 10, Membership: voters}, Data: image}, []uint64{1}},
		{paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 20}, Data: image[:snapshotChunkBytes+1]}, []uint64{2}},
		{paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 20}, Data: image[:snapshotChunkBytes]}, []uint64{3}},
		{paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 30, Membership: voters}}, nil},
		// Numbered past the files in the folder at Open: none.
		{paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 40}, Data: image[:7]}, []uint64{1}},
	}
	for i, step := range steps {
		snap := step.snap
		if err := s.Save(storage.Update{Snapshot: &snap}); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := imageFiles(t, s); !slices.Equal(got, step.files) {
			t.Fatalf("step %d: image files %v, want %v", i, got, step.files)
		}
		if n := chunkKeys(t, s); n != 0 {
			t.Fatalf("step %d: %d chunks in the database", i, n)
		}
		checkSnapshot(t, s, snap)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openMem(t, fs)
		checkSnapshot(t, s, snap)
		if got := imageFiles(t, s); !slices.Equal(got, step.files) {
			t.Fatalf("step %d: after a reopen, image files %v, want %v", i, got, step.files)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStagedSnapshot: an image staged ahead of its Save is the one the
// Save stores (no second file); staging changes nothing the store reads;
// a staged image never stored is deleted by the Save of a newer snapshot
// or by a reopen; staging below the stored snapshot is refused.
func TestStagedSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs)
	old := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 5}, Data: []byte("the state at 5")}
	if err := s.Save(storage.Update{Snapshot: &old}); err != nil {
		t.Fatal(err)
	}
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 10}, Data: incompressible(2*snapshotChunkBytes + 1)}
	if err := s.StageSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, s, old)
	if got := imageFiles(t, s); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("after staging: image files %v, want [1 2]", got)
	}
	saveEntries(t, s, 6, 20)
	if err := s.Save(storage.Update{Snapshot: &snap}); err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, s, snap)
	if got := imageFiles(t, s); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("after the Save of the staged image: files %v, want [2] (the staged one alone)", got)
	}

	// Staged, never saved: deleted at the next Open.
	later := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 15}, Data: []byte("the state at 15")}
	if err := s.StageSnapshot(later); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs)
	checkSnapshot(t, s, snap)
	if got := imageFiles(t, s); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("after a reopen: image files %v, want [2]", got)
	}

	// Staged at 15, then a copy of its image saved: the copy is written
	// (a Save trusts only the very image staged), the staged file goes.
	if err := s.StageSnapshot(later); err != nil {
		t.Fatal(err)
	}
	staged := imageFiles(t, s)[1]
	copied := paxos.Snapshot{Meta: later.Meta, Data: bytes.Clone(later.Data)}
	if err := s.Save(storage.Update{Snapshot: &copied}); err != nil {
		t.Fatal(err)
	}
	if got := imageFiles(t, s); len(got) != 1 || got[0] == staged || got[0] == 2 {
		t.Fatalf("after saving a copy of the staged image %d: files %v, want one new file", staged, got)
	}
	checkSnapshot(t, s, later)

	// A staged image of a snapshot the Save of a newer one supersedes.
	if err := s.StageSnapshot(paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 16}, Data: []byte("16")}); err != nil {
		t.Fatal(err)
	}
	keep := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 30}, Data: []byte("30")}
	if err := s.StageSnapshot(keep); err != nil {
		t.Fatal(err)
	}
	newer := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 20}, Data: []byte("20")}
	if err := s.Save(storage.Update{Snapshot: &newer}); err != nil {
		t.Fatal(err)
	}
	if got := imageFiles(t, s); len(got) != 2 {
		t.Fatalf("after the Save at 20: files %v, want the one at 20 and the one staged at 30", got)
	}
	if err := s.Save(storage.Update{Snapshot: &keep}); err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, s, keep)
	if got := imageFiles(t, s); len(got) != 1 {
		t.Fatalf("after the Save at 30: files %v, want its own alone", got)
	}

	err := s.StageSnapshot(paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 29}, Data: []byte("x")})
	if !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("staging below the stored snapshot: %v, want ErrInvalid", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.StageSnapshot(keep); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("staging on a closed store: %v, want ErrClosed", err)
	}
}

// TestStagingBesideWrites stages a large image while a writer saves
// entries and readers read the snapshot, as a replica does: under the
// race detector, nothing is shared unguarded, and each read returns a
// whole snapshot, the old one or the new.
func TestStagingBesideWrites(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	old := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 50}, Data: incompressible(snapshotChunkBytes + 3)}
	if err := s.Save(storage.Update{Snapshot: &old}); err != nil {
		t.Fatal(err)
	}
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 100}, Data: incompressible(4*snapshotChunkBytes + 9)}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs <- s.StageSnapshot(snap)
	}()
	go func() {
		defer wg.Done()
		for range 20 {
			got, err := s.Snapshot()
			if err == nil && got.Meta.Index != 50 && got.Meta.Index != 100 {
				err = fmt.Errorf("read a snapshot at %d", got.Meta.Index)
			}
			if err == nil && got.Meta.Index == 100 && !bytes.Equal(got.Data, snap.Data) {
				err = errors.New("read the new snapshot with another image")
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	saveEntries(t, s, 51, 150)
	saveEntries(t, s, 151, 250)
	wg.Wait()
	if err := s.Save(storage.Update{Snapshot: &snap, TailSlots: 10}); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkSnapshot(t, s, snap)
	if first, err := s.FirstSlot(); err != nil || first != 91 {
		t.Fatalf("first slot %d (%v), want 91", first, err)
	}
}

// TestReadSurvivesSupersedingSave: a snapshot read that began before a
// Save of a newer snapshot deleted its file still reads it whole.
func TestReadSurvivesSupersedingSave(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	old := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 50}, Data: incompressible(2*snapshotChunkBytes + 3)}
	if err := s.Save(storage.Update{Snapshot: &old}); err != nil {
		t.Fatal(err)
	}
	newer := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 60}, Data: []byte("60")}
	s.testHookSnapshotRead = func() {
		if err := s.Save(storage.Update{Snapshot: &newer}); err != nil {
			t.Error(err)
		}
	}
	got, err := s.Snapshot()
	s.testHookSnapshotRead = nil
	if err != nil || got.Meta.Index != 50 || !bytes.Equal(got.Data, old.Data) {
		t.Fatalf("read %d bytes at %d (%v), want the old snapshot", len(got.Data), got.Meta.Index, err)
	}
	if files := imageFiles(t, s); len(files) != 1 || files[0] != s.snapFile {
		t.Fatalf("image files %v, want the new snapshot's alone", files)
	}
	checkSnapshot(t, s, newer)
}

// A snapshot saved at or above one being staged, while its image was
// written, leaves no image file behind: before, the staging's image
// stayed until the next snapshot's Save or Open (found in review).
func TestStagingSupersededMeanwhileLeavesNoFile(t *testing.T) {
	for _, index := range []uint64{10, 12} {
		s := openMem(t, vfs.NewMem())
		staged := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 10}, Data: incompressible(2*snapshotChunkBytes + 1)}
		saved := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: index}, Data: []byte("saved meanwhile")}
		s.testHookImageStaging = func() {
			s.testHookImageStaging = nil // Save stages its own image too
			if err := s.Save(storage.Update{Snapshot: &saved}); err != nil {
				t.Error(err)
			}
		}
		if err := s.StageSnapshot(staged); err != nil {
			t.Fatal(err)
		}
		if files := imageFiles(t, s); len(files) != 1 || files[0] != s.snapFile {
			t.Fatalf("saved at %d while staging 10: image files %v, want the saved snapshot's (%d) alone", index, files, s.snapFile)
		}
		checkSnapshot(t, s, saved)
		s.Close()
	}
}

// saveChunksInDatabase stores snap as stores did before image files: a
// header and its chunks in the database, in one synced batch.
func saveChunksInDatabase(t *testing.T, s *Store, snap paxos.Snapshot) {
	t.Helper()
	b := s.db.NewBatch()
	defer b.Close()
	size := uint64(len(snap.Data))
	chunkBytes := uint64(s.chunkBytes)
	chunks := (size + chunkBytes - 1) / chunkBytes
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.DeleteRange(entryKey(0), entryKeyAfter(snap.Meta.Index), nil))
	must(b.Set(snapshotKey(snap.Meta.Index), s.codec.AppendSnapshotHeader(nil, storage.SnapshotHeader{Meta: snap.Meta, Size: size, Chunks: chunks}), nil))
	for n := range chunks {
		data := snap.Data[n*chunkBytes : min((n+1)*chunkBytes, size)]
		must(b.Set(appendChunkKey(nil, snap.Meta.Index, n), s.codec.AppendSnapshotChunk(nil, snap.Meta.Index, n, data), nil))
	}
	must(b.Commit(pebble.Sync))
}

// TestReadsChunksOfOlderStores: a store written before image files, its
// snapshot's chunks in the database, opens and reads it; the next Save of
// a snapshot writes a file and deletes the chunks.
func TestReadsChunksOfOlderStores(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs)
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 10}, Data: incompressible(2*snapshotChunkBytes + 5)}
	saveChunksInDatabase(t, s, snap)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs)
	checkSnapshot(t, s, snap)
	if n := chunkKeys(t, s); n != 3 {
		t.Fatalf("%d chunks in the database, want 3", n)
	}
	next := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 20}, Data: []byte("20")}
	if err := s.Save(storage.Update{Snapshot: &next}); err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, s, next)
	if n, files := chunkKeys(t, s), imageFiles(t, s); n != 0 || len(files) != 1 {
		t.Fatalf("after a new snapshot: %d chunks in the database, files %v; want none and one", n, files)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedImageIsCorruption: an image file missing, cut short, grown,
// its chunks swapped, a byte flipped or a frame's length changed is
// reported as corruption, never read as a shorter or different image.
func TestDamagedImageIsCorruption(t *testing.T) {
	image := incompressible(3*snapshotChunkBytes + 5)
	frameBytes := frameLengthBytes + len(storage.NewCodec().AppendSnapshotChunk(nil, 10, 0, image[:snapshotChunkBytes]))
	for _, c := range []struct {
		name   string
		damage func(file []byte) []byte // nil: delete the file
		want   string
	}{
		{"the file missing", nil, "its image file"},
		{"the file cut short inside a chunk", func(f []byte) []byte { return f[:len(f)-3] }, "it ends inside chunk 3"},
		{"the last chunk missing", func(f []byte) []byte { return f[:3*frameBytes] }, "it ends before chunk 3 of 4"},
		{"bytes after the last chunk", func(f []byte) []byte { return append(f, 0) }, "bytes follow its last chunk"},
		{"two chunks swapped", func(f []byte) []byte {
			out := slices.Clone(f[frameBytes : 2*frameBytes])
			out = append(out, f[:frameBytes]...)
			return append(out, f[2*frameBytes:]...)
		}, "chunk 0 holds chunk 1"},
		{"a flipped byte", func(f []byte) []byte { f[frameBytes+1000] ^= 0x40; return f }, "checksum mismatch"},
		{"a length too large", func(f []byte) []byte {
			binary.LittleEndian.PutUint32(f[frameBytes:], 1<<30)
			return f
		}, "chunk 1 is 1073741824 bytes long"},
		{"a length one short", func(f []byte) []byte {
			binary.LittleEndian.PutUint32(f, uint32(frameBytes-frameLengthBytes-1))
			return f
		}, "checksum mismatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := openMem(t, fs)
			snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 10}, Data: image}
			if err := s.Save(storage.Update{Snapshot: &snap}); err != nil {
				t.Fatal(err)
			}
			path := s.imagePath(s.snapFile)
			if c.damage == nil {
				if err := fs.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				rewrite(t, fs, path, c.damage(readAll(t, fs, path)))
			}
			_, err := s.Snapshot()
			if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
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

// TestAbsurdHeaderSizeIsCorruption: a snapshot header whose checksum is
// valid but whose size is absurd (a writer's bug, or a hand-edited store)
// is refused as corruption, for an image file and for chunks in the
// database; the size was once allocated whole first, and 1<<60 bytes
// panicked in make.
func TestAbsurdHeaderSizeIsCorruption(t *testing.T) {
	const absurd = uint64(1) << 60
	for _, inFile := range []bool{true, false} {
		t.Run(map[bool]string{true: "image file", false: "chunks in the database"}[inFile], func(t *testing.T) {
			fs := vfs.NewMem()
			s := openMem(t, fs)
			snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 10}, Data: incompressible(2*snapshotChunkBytes + 5)}
			h := storage.SnapshotHeader{Meta: snap.Meta, Size: absurd, Chunks: absurd / storage.MaxSnapshotChunkBytes}
			if inFile {
				if err := s.Save(storage.Update{Snapshot: &snap}); err != nil {
					t.Fatal(err)
				}
				h.File = s.snapFile
			} else {
				saveChunksInDatabase(t, s, snap)
			}
			if err := s.db.Set(snapshotKey(10), s.codec.AppendSnapshotHeader(nil, h), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openMem(t, fs)
			defer s.Close()
			if _, err := s.Snapshot(); !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("Snapshot: %v; want ErrCorrupt", err)
			}
		})
	}
}

func readAll(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rewrite(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

func TestParseImageFileName(t *testing.T) {
	for name, want := range map[string]uint64{"image-1": 1, "image-18446744073709551615": 1<<64 - 1} {
		if n, ok := parseImageFileName(name); !ok || n != want || imageFileName(n) != name {
			t.Errorf("%q: %d %v, want %d", name, n, ok, want)
		}
	}
	for _, name := range []string{"image-", "image-0", "image-01", "image-1.tmp", "image-18446744073709551616", "LOCK", "image--1"} {
		if n, ok := parseImageFileName(name); ok {
			t.Errorf("%q parsed as image file %d", name, n)
		}
	}
}

// TestStrayImageNumberNearTheTopDoesNotWrap (found in review): a file in the images folder
// numbered just below 2^64-1 (a stray or damaged name) must not make the
// store number a later image 0, which no header can name: the Save that
// stores it panicked.
func TestStrayImageNumberNearTheTopDoesNotWrap(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stray := fs.PathJoin("store", imagesDirName, imageFileName(math.MaxUint64-1))
	f, err := fs.Create(stray, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs)
	defer s.Close()
	for i := uint64(1); i <= 3; i++ {
		snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 10 * i}, Data: []byte(fmt.Sprint("image ", i))}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Save of snapshot %d panicked: %v", i, r)
				}
			}()
			if err := s.Save(storage.Update{Snapshot: &snap}); err != nil {
				t.Fatalf("Save of snapshot %d: %v", i, err)
			}
		}()
		checkSnapshot(t, s, snap)
	}
}

// TestEntryAtSlotZeroIsCorruption (found in review): no Save writes slot 0, so an entry
// key for it (a damaged or foreign database, its record's checksum
// valid) is corruption. The store opened and reported FirstSlot 0,
// which the paxos.Storage contract rules out and the core refuses with
// an error that does not say the disk is damaged.
func TestEntryAtSlotZeroIsCorruption(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs)
	if err := s.Save(storage.Update{Entries: []paxos.Entry{{Slot: 1, Kind: paxos.EntryNoop}}}); err != nil {
		t.Fatal(err)
	}
	rec := storage.NewCodec().AppendEntry(nil, paxos.Entry{Slot: 0, Kind: paxos.EntryNoop})
	if err := s.db.Set(entryKey(0), rec, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open("store", Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		if !errors.Is(err, storage.ErrCorrupt) {
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
		return
	}
	defer s.Close()
	first, err := s.FirstSlot()
	if err == nil && first == 0 {
		t.Fatalf("FirstSlot() = 0 on a store holding an entry key at slot 0; want ErrCorrupt (FirstSlot is at least 1)")
	}
}

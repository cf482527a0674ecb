package pebblestore_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/pebblestore"
)

// tornImages is how many crash images of the torn write each case takes.
const tornImages = 24

// tornPageBytes is the unit in which a crash image keeps or drops the
// unsynced data of a file (Pebble's MemFS.CrashClone).
const tornPageBytes = 4096

// TestTornWALTailOpensWithEverySyncedSave: a crash during a Save, between
// its WAL write and that write's sync, leaves any part of the write on
// disk: cut short, or in pieces out of their order, a later 4 KiB page
// kept and an earlier one lost (the write spans three pages and two
// 32 KiB blocks, so two chunks). Every such image must open, with
// every synced Save and the torn one whole or not at all: the chunks of
// an unsynced write claim only the syncs before it, so none proves
// damage. On a new WAL the lost pages read as the zeros the store wrote
// it through with; on a recycled one, as the stale chunks of the log it
// held before (a garbled tail). The images are Pebble's crash clones,
// each keeping half of the unsynced pages, at random.
func TestTornWALTailOpensWithEverySyncedSave(t *testing.T) {
	for _, c := range []struct {
		name string
		// syncedSaves of entriesPerSave entries each come before the torn one.
		syncedSaves, entriesPerSave int
	}{
		{"new WAL", 30, 4},
		{"recycled WAL", 300, 16}, // over a MiB: several memtables flushed, their logs recycled
	} {
		t.Run(c.name, func(t *testing.T) {
			outOfOrder := 0
			images, torn := takeTornImages(t, c.syncedSaves, c.entriesPerSave)
			for i, img := range images {
				outOfOrder += boolInt(img.outOfOrder(torn))
				checkTornImage(t, img.fs, torn.synced, torn.synced+torn.entries, fmt.Sprintf("image %d", i))
			}
			t.Logf("%d images of a write of %d bytes at %d of WAL %s (recycled: %t), %d of them out of order",
				len(images), torn.end-torn.start, torn.start, torn.path, torn.recycled, outOfOrder)
			if outOfOrder == 0 {
				t.Fatal("no image kept a later page of the torn write and lost an earlier one")
			}
			if strings.HasPrefix(c.name, "recycled") != torn.recycled {
				t.Fatalf("the torn write's WAL holds stale chunks past its end: %t; want %t", torn.recycled, !torn.recycled)
			}
		})
	}
}

// tornWrite is the Save torn by the crash images: where it lies in its
// WAL, as it was written in full.
type tornWrite struct {
	path       string
	start, end int64
	written    []byte // the WAL with the whole write, unsynced
	// synced is the last slot of the Saves before it; entries, its own.
	synced, entries uint64
	// recycled: the WAL holds bytes other than zeros past the write (the
	// stale chunks of a recycled log).
	recycled bool
}

type tornImage struct {
	fs  *vfs.MemFS
	wal []byte
}

// outOfOrder reports whether the image kept a page of the torn write and
// lost an earlier one.
func (img tornImage) outOfOrder(w tornWrite) bool {
	lost := false
	for p := w.start / tornPageBytes * tornPageBytes; p < w.end; p += tornPageBytes {
		lo, hi := max(p, w.start), min(p+tornPageBytes, w.end)
		kept := int64(len(img.wal)) >= hi && bytes.Equal(img.wal[lo:hi], w.written[lo:hi])
		if kept && lost {
			return true
		}
		lost = lost || !kept
	}
	return false
}

// takeTornImages saves syncedSaves Saves of entriesPerSave entries, then
// Saves of one entry until the log nears a block's end, then one across
// that end, taking tornImages crash images at its
// WAL sync.
func takeTornImages(t *testing.T, syncedSaves, entriesPerSave int) ([]tornImage, tornWrite) {
	mem := vfs.NewCrashableMem()
	var mu sync.Mutex
	var armed atomic.Bool
	var images []*vfs.MemFS
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		isSync := op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo
		// A recycled WAL comes wrapped without its name (reuseWrappingFS).
		isWAL := strings.HasSuffix(op.Path, ".log") || op.Path == ""
		if !isSync || !isWAL || !armed.CompareAndSwap(true, false) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		for k := range tornImages {
			images = append(images, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(uint64(k), 5))}))
		}
		return nil
	})
	s, err := pebblestore.Open(dir, pebblestore.Options{
		FS: reuseWrappingFS{errorfs.Wrap(mem, inj), inj, mem, &mu}, MemTableBytes: 256 << 10, Logger: quietLogger{},
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	slot := uint64(1)
	for range syncedSaves {
		saveSlots(t, s, slot, entriesPerSave)
		slot += uint64(entriesPerSave)
	}
	// Then Saves of one entry until the log ends in the last 8 KiB of a
	// block: the torn write's first chunk is short. Pebble's replay, at a
	// chunk failing its checksum, recomputes it with each bit of the chunk
	// flipped in turn (to report a flipped bit): about 0.2 s per image
	// for a chunk of 32 KiB.
	path, logNum, before := pebblestore.LiveWAL(t, mem, dir)
	for i := 0; pebblestore.WALChunksEnd(before, logNum)%(32<<10) < 24<<10; i++ {
		if i == 100 {
			t.Fatal("100 Saves of one entry did not bring the log into a block's last 8 KiB")
		}
		saveSlots(t, s, slot, 1)
		slot++
		path, logNum, before = pebblestore.LiveWAL(t, mem, dir)
	}
	w := tornWrite{path: path, start: pebblestore.WALChunksEnd(before, logNum), synced: slot - 1, entries: 40} // about 11 KiB
	armed.Store(true)
	saveSlots(t, s, slot, int(w.entries))
	if armed.Load() {
		t.Fatal("the torn Save synced no WAL")
	}
	if p, _, _ := pebblestore.LiveWAL(t, mem, dir); p != path {
		t.Fatalf("the torn Save went to WAL %s, not %s", p, path)
	}
	_, _, w.written = pebblestore.LiveWAL(t, mem, dir)
	w.end = pebblestore.WALChunksEnd(w.written, logNum)
	w.recycled = bytes.ContainsFunc(w.written[w.end:], func(r rune) bool { return r != 0 })
	if w.start/(32<<10) == (w.end-1)/(32<<10) {
		t.Fatalf("the torn write, at %d to %d, is inside one block; want it across two", w.start, w.end)
	}
	var out []tornImage
	for _, fs := range images {
		out = append(out, tornImage{fs: fs, wal: readFile(t, fs, path)})
	}
	return out, w
}

func saveSlots(t *testing.T, s *pebblestore.Store, lo uint64, n int) {
	t.Helper()
	var es []paxos.Entry
	for slot := lo; slot < lo+uint64(n); slot++ {
		es = append(es, paxos.Entry{Slot: slot, Kind: paxos.EntryCommand, Data: bytes.Repeat([]byte{byte(slot)}, 256)})
	}
	if err := s.Save(storage.Update{Entries: es}); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// checkTornImage opens the image and checks it holds every synced entry
// (through lastSynced) and the torn Save's (through lastTorn) all or none.
func checkTornImage(t *testing.T, fs *vfs.MemFS, lastSynced, lastTorn uint64, what string) {
	t.Helper()
	s, err := pebblestore.Open(dir, pebblestore.Options{FS: fs, MemTableBytes: 256 << 10, Logger: quietLogger{}})
	if err != nil {
		t.Fatalf("%s: a torn WAL tail refused: %v", what, err)
	}
	defer s.Close()
	last, err := s.LastSlot()
	if err != nil || (last != lastSynced && last != lastTorn) {
		t.Fatalf("%s: LastSlot = %d, %v; want %d (the torn Save lost) or %d (kept whole)", what, last, err, lastSynced, lastTorn)
	}
	es, err := s.Entries(1, last+1, 1<<30)
	if err != nil || uint64(len(es)) != last {
		t.Fatalf("%s: %d entries through %d, %v; want every one", what, len(es), last, err)
	}
}

package pebblestore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/pebblestore"
	"paxcron/storage/storetest"
)

const dir = "db"

// quietLogger is the package's own test logger (export_test.go).
type quietLogger = pebblestore.QuietLogger

// memDisk is a store on Pebble's crashable memory file system.
type memDisk struct {
	fs    *vfs.MemFS
	store *pebblestore.Store
	opts  pebblestore.Options
}

func openMemDisk(t *testing.T, opts pebblestore.Options) *memDisk {
	t.Helper()
	d := &memDisk{fs: vfs.NewCrashableMem(), opts: opts}
	d.open(t)
	t.Cleanup(func() { _ = d.store.Close() })
	return d
}

func (d *memDisk) open(t *testing.T) *pebblestore.Store {
	t.Helper()
	opts := d.opts
	opts.FS, opts.Logger = d.fs, quietLogger{}
	s, err := pebblestore.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	d.store = s
	return s
}

// crash keeps only what was synced and reopens the store on it.
func (d *memDisk) crash(t *testing.T) *pebblestore.Store {
	t.Helper()
	clone := d.fs.CrashClone(vfs.CrashCloneCfg{})
	_ = d.store.Close() // may be closed already; the clone is unaffected
	d.fs = clone
	return d.open(t)
}

func (d *memDisk) harness() storetest.Harness {
	return storetest.Harness{
		Store: d.store,
		Reopen: func(t *testing.T) storage.Store {
			if err := d.store.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return d.open(t)
		},
		Crash: func(t *testing.T) storage.Store { return d.crash(t) },
		Corrupt: func(t *testing.T, r *rand.Rand) (string, bool) {
			desc, ok, err := pebblestore.CorruptRandomRecord(d.store, r)
			if err != nil {
				t.Fatalf("corrupting: %v", err)
			}
			return desc, ok
		},
		HeldSlots: func(t *testing.T) []uint64 {
			slots, err := pebblestore.HeldSlots(d.store)
			if err != nil {
				t.Fatalf("listing held slots: %v", err)
			}
			return slots
		},
	}
}

// The suites at Pebble's default memtable write a new WAL through for
// 64 KiB, not 4 MiB (WithWALWriteThroughBytes): a WAL then also grows past
// its zeros, as one recycled from a smaller memtable does.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		return openMemDisk(t, pebblestore.WithWALWriteThroughBytes(pebblestore.Options{}, 64<<10)).harness()
	})
}

// TestConformanceSmallMemTable runs the suite with memtables small enough
// that flushes and compactions run under it.
func TestConformanceSmallMemTable(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		return openMemDisk(t, pebblestore.Options{MemTableBytes: 64 << 10}).harness()
	})
}

// TestConformanceSmallChunks runs the suite with snapshots in chunks of 16
// bytes, so that its snapshots (up to 200 bytes) span many, through its
// crashes, reopens and corruptions.
func TestConformanceSmallChunks(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		o := pebblestore.WithWALWriteThroughBytes(pebblestore.Options{}, 64<<10)
		return openMemDisk(t, pebblestore.WithSnapshotChunkBytes(o, 16)).harness()
	})
}

// saveRandomUpdates saves n random updates drawn from seed into s and
// returns the model holding what s must now hold.
func saveRandomUpdates(t *testing.T, s *pebblestore.Store, seed uint64, n int) *storetest.Model {
	t.Helper()
	m := storetest.NewModel()
	r := rand.New(rand.NewPCG(seed, seed))
	for range n {
		u := storetest.RandomUpdate(r, m)
		if err := s.Save(u); err != nil {
			t.Fatal(err)
		}
		_ = m.Save(u)
	}
	return m
}

// TestRealDisk checks the store on the operating system's file system.
func TestRealDisk(t *testing.T) {
	path := t.TempDir()
	open := func() *pebblestore.Store {
		s, err := pebblestore.Open(path, pebblestore.Options{FS: vfs.Default, Logger: quietLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	m := saveRandomUpdates(t, s, 1, 20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	got, err := storetest.ReadState(s)
	if err != nil || !got.Equal(m.State()) {
		t.Fatalf("after reopen: %v, %v; want %v", got, err, m.State())
	}
}

func TestOpenWithoutFS(t *testing.T) {
	if _, err := pebblestore.Open(dir, pebblestore.Options{}); err == nil {
		t.Fatal("Open without an FS succeeded")
	}
}

// TestConcurrentReadsDuringSaves runs readers against a writer (under
// -race): every read succeeds and sees LastSlot only grow, and every entry
// a read returns is one that a Save wrote.
func TestConcurrentReadsDuringSaves(t *testing.T) {
	s := openMemDisk(t, pebblestore.Options{MemTableBytes: 64 << 10}).store
	const saves = 200
	done := make(chan struct{})
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			var seen uint64
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				last, err := s.LastSlot()
				if err == nil && last < seen {
					err = fmt.Errorf("LastSlot went back from %d to %d", seen, last)
				}
				seen = last
				if err == nil {
					err = checkEntriesUpTo(s, last)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range uint64(saves) {
		es := []paxos.Entry{{Slot: 2*i + 1, Kind: paxos.EntryCommand, Data: []byte(fmt.Sprint(2*i + 1))}}
		if err := s.Save(storage.Update{Entries: es}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// checkEntriesUpTo checks that every slot 1, 3, ... up to last is held
// with its data: a reader that saw LastSlot never misses an entry below.
func checkEntriesUpTo(s *pebblestore.Store, last uint64) error {
	es, err := s.Entries(1, last+1, 1<<30)
	if err != nil {
		return err
	}
	if want := (last + 1) / 2; uint64(len(es)) != want {
		return fmt.Errorf("Entries(1, %d) returned %d entries, want %d", last+1, len(es), want)
	}
	for i, e := range es {
		if e.Slot != uint64(2*i+1) || string(e.Data) != fmt.Sprint(e.Slot) {
			return fmt.Errorf("entry %d is %+v", i, e)
		}
	}
	return nil
}

// TestSnapshotReadDoesNotHoldUpWrites reads a snapshot while saves go on:
// a read of a large snapshot takes seconds, and the replica's writes must
// not wait for it. The read returns the snapshot it started on, whole,
// even though a newer one replaced it meanwhile; Close waits for it.
func TestSnapshotReadDoesNotHoldUpWrites(t *testing.T) {
	s := openMemDisk(t, pebblestore.Options{MemTableBytes: 64 << 10}).store
	members := paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}
	snapAt := func(index uint64) storage.Update {
		data := []byte(fmt.Sprintf("state at %d", index))
		return storage.Update{Snapshot: &paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: index, Membership: members}, Data: data}}
	}
	if err := s.Save(snapAt(10)); err != nil {
		t.Fatal(err)
	}
	pinned, release := make(chan struct{}), make(chan struct{})
	pebblestore.SetSnapshotReadHook(s, func() {
		close(pinned)
		<-release
	})
	type result struct {
		snap paxos.Snapshot
		err  error
	}
	read := make(chan result, 1)
	go func() {
		snap, err := s.Snapshot()
		read <- result{snap, err}
	}()
	<-pinned
	// With the read under way: entries, a newer snapshot that deletes the
	// old one's key, and reads of other kinds all go through.
	saved := make(chan error, 1)
	go func() {
		es := []paxos.Entry{{Slot: 11, Kind: paxos.EntryCommand, Data: []byte("x")}}
		err := s.Save(storage.Update{Entries: es})
		if err == nil {
			err = s.Save(snapAt(11))
		}
		saved <- err
	}()
	select {
	case err := <-saved:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Save waited for the snapshot read")
	}
	if last, err := s.LastSlot(); err != nil || last != 11 {
		t.Fatalf("LastSlot = %d, %v; want 11", last, err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a snapshot read held a view of the database", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	r := <-read
	if r.err != nil || r.snap.Meta.Index != 10 || string(r.snap.Data) != "state at 10" {
		t.Fatalf("Snapshot = %d %q, %v; want the snapshot at 10 it started on", r.snap.Meta.Index, r.snap.Data, r.err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Snapshot(); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Snapshot after Close: %v, want storage.ErrClosed", err)
	}
}

// A new store's WAL is written through before its first record, so that
// its synced appends overwrite written blocks; a copy of the folder taken
// while the store is open (the disk as a crash would leave it: every save
// synced, the WAL's tail zeros) opens with every save in it.
func TestNewWALIsWrittenThrough(t *testing.T) {
	for _, c := range []struct {
		memTable, want int64
	}{
		{0, 4 << 20}, // Pebble's default memtable
		{1 << 20, 1 << 20},
	} {
		t.Run(fmt.Sprintf("memtable=%d", c.memTable), func(t *testing.T) {
			path := t.TempDir()
			opts := pebblestore.Options{FS: vfs.Default, Logger: quietLogger{}, MemTableBytes: uint64(c.memTable)}
			s, err := pebblestore.Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			m := saveRandomUpdates(t, s, 2, 30)
			logs, err := filepath.Glob(filepath.Join(path, "*.log"))
			if err != nil || len(logs) == 0 {
				t.Fatalf("no WAL in %s: %v", path, err)
			}
			for _, l := range logs {
				fi, err := os.Stat(l)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() < c.want {
					t.Fatalf("WAL %s: %d bytes; want at least %d, written through", l, fi.Size(), c.want)
				}
			}
			crashed := t.TempDir()
			if err := os.CopyFS(crashed, os.DirFS(path)); err != nil {
				t.Fatal(err)
			}
			cs, err := pebblestore.Open(crashed, opts)
			if err != nil {
				t.Fatalf("opening the store as a crash left it: %v", err)
			}
			defer cs.Close()
			got, err := storetest.ReadState(cs)
			if err != nil || !got.Equal(m.State()) {
				t.Fatalf("after the crash: %v, %v; want %v", got, err, m.State())
			}
		})
	}
}

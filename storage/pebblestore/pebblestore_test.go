package pebblestore_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

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

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		return openMemDisk(t, pebblestore.Options{}).harness()
	})
}

// TestConformanceSmallMemTable runs the suite with memtables small enough
// that flushes and compactions run under it.
func TestConformanceSmallMemTable(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		return openMemDisk(t, pebblestore.Options{MemTableBytes: 64 << 10}).harness()
	})
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
	s, m := open(), storetest.NewModel()
	r := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		u := storetest.RandomUpdate(r, m)
		if err := s.Save(u); err != nil {
			t.Fatal(err)
		}
		_ = m.Save(u)
	}
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

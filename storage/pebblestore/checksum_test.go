package pebblestore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/storage"
)

// TestPebbleChecksumFailureIsCorruption (found in review): a data block
// of an sstable that fails Pebble's own checksum is a damaged disk, as a
// record failing ours is, so it is reported as storage.ErrCorrupt, with
// Pebble's error kept behind it. It was a plain error, which callers
// telling a damaged disk from a failing one (errors.Is ErrCorrupt) took
// for the latter; and before the read returned, Pebble had called the
// logger's Fatalf, which ends a real process. The first data block is
// read by Open (the first and last keys), a middle one only by a read of
// the entries in it.
func TestPebbleChecksumFailureIsCorruption(t *testing.T) {
	for _, c := range []struct {
		name  string
		block func(blocks int) int
		// want is in the message: what was being read.
		want string
	}{
		{"first block, read by Open", func(int) int { return 0 }, "read the first key of the 'e' range"},
		{"middle block, read by Entries", func(n int) int { return n / 2 }, "read entries 1 to 401"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := openMem(t, fs)
			saveEntries(t, s, 1, 400)
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			damageDataBlock(t, fs, "store", c.block)

			err := readAllEntries(fs, fatalIsFailure{t})
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("reading a store whose sstable fails its checksum: %v; want ErrCorrupt", err)
			}
			if !pebble.IsCorruptionError(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: want Pebble's corruption error kept, and the message to say %q", err, c.want)
			}
		})
	}
}

// fatalIsFailure is a logger whose Fatalf fails the test instead of
// ending it with the process, so that the read it interrupted still
// returns and is checked.
type fatalIsFailure struct{ t *testing.T }

func (fatalIsFailure) Infof(string, ...any) {}

func (l fatalIsFailure) Errorf(format string, args ...any) { l.t.Logf(format, args...) }

func (l fatalIsFailure) Fatalf(format string, args ...any) {
	l.t.Errorf("Pebble called Fatalf: "+format, args...)
}

// readAllEntries opens the store on fs and reads every entry it holds,
// returning the first error.
func readAllEntries(fs vfs.FS, logger pebble.Logger) error {
	s, err := Open("store", Options{FS: fs, Logger: logger})
	if err != nil {
		return err
	}
	defer s.Close()
	first, err := s.FirstSlot()
	if err != nil {
		return err
	}
	last, err := s.LastSlot()
	if err != nil {
		return err
	}
	_, err = s.Entries(first, last+1, 1<<30)
	return err
}

// damageDataBlock flips a byte in the middle of data block pick(n) of the
// one sstable in dir (n data blocks): inside the block, so that Pebble
// finds a checksum mismatch when it loads it, not a bad footer at Open.
func damageDataBlock(t *testing.T, fs vfs.FS, dir string, pick func(n int) int) {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, name := range names {
		if strings.HasSuffix(name, ".sst") {
			tables = append(tables, fs.PathJoin(dir, name))
		}
	}
	if len(tables) != 1 {
		t.Fatalf("sstables in %s: %q; want one", dir, tables)
	}
	path := tables[0]
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		t.Fatal(err)
	}
	var po pebble.Options
	po.EnsureDefaults()
	r, err := sstable.NewReader(context.Background(), readable, po.MakeReaderOptions())
	if err != nil {
		t.Fatal(err)
	}
	layout, err := r.Layout()
	if err == nil {
		err = r.Close() // closes readable and f
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(layout.Data) < 3 {
		t.Fatalf("the sstable holds %d data blocks; want a first, a middle and a last", len(layout.Data))
	}
	h := layout.Data[pick(len(layout.Data))].Handle
	b := readAll(t, fs, path)
	b[h.Offset+h.Length/2] ^= 0xff
	rewrite(t, fs, path, b)
}

// TestNewStoresWALDamageIsCorruption: a byte flipped early in the WAL of
// a new store, with synced writes after it, is a damaged disk. Pebble
// tells damage inside a log from a torn tail by the sync offsets its
// chunks carry, and a new store's first WAL was made before its format
// was raised to write them: the store opened with every write after the
// flip gone, and no error. (Damage inside a log's last 32 KiB block,
// where Pebble does not look for proof of it, is found by walcheck.go:
// TestWALDamageInLastBlockIsCorruption.)
func TestNewStoresWALDamageIsCorruption(t *testing.T) {
	fs := vfs.NewMem()
	const writes = 400 // about 120 KiB of log: four blocks
	closedMemWithSlots(t, fs, writes)
	names, err := fs.List("store")
	if err != nil {
		t.Fatal(err)
	}
	// The live WAL is the highest-numbered. The one Open rotated away
	// may be kept for recycling, and under -race (Pebble's invariants
	// build) both come back with bytes scribbled past their records: the
	// file with the most bytes before its zeros was once taken, at random,
	// and the test flipped a byte no one reads.
	var wal string
	for _, name := range names {
		if strings.HasSuffix(name, ".log") && (wal == "" || name > wal) {
			wal = name // fixed-width numbers: text order is number order
		}
	}
	if wal == "" {
		t.Fatalf("no WAL among %v", names)
	}
	wal = fs.PathJoin("store", wal)
	b := readAll(t, fs, wal)
	written := len(b)
	for written > 0 && b[written-1] == 0 {
		written--
	}
	if written < 3*32<<10 {
		t.Fatalf("the WAL holds %d bytes; want several blocks", written)
	}
	// In the fourth or fifth write (under -race, past a scribbled tail,
	// about the 130th): either way with synced writes after it and
	// outside the last block.
	b[written/100] ^= 0xff
	rewrite(t, fs, wal, b)

	s, err := Open("store", Options{FS: fs, Logger: fatalIsFailure{t}})
	if err == nil {
		last, _ := s.LastSlot()
		s.Close()
		t.Fatalf("a store whose WAL was damaged before %d synced writes opened with its last slot %d, no error", writes, last)
	}
	if !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("opening a store whose WAL is damaged: %v; want ErrCorrupt", err)
	}
}

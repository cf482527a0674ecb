package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// CorruptRandomRecord flips one byte of one stored value or of the stored
// snapshot's image file, both chosen with r, and writes it back with a
// sync: the damage a failing disk or a bad memory word does below
// Pebble's own block checksums, which only our record checksums can
// catch.
func CorruptRandomRecord(s *Store, r *rand.Rand) (desc string, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, err := s.db.NewIter(nil)
	if err != nil {
		return "", false, err
	}
	var keys, values [][]byte
	for valid := it.First(); valid; valid = it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()...))
		values = append(values, append([]byte(nil), it.Value()...))
	}
	if err := it.Close(); err != nil {
		return "", false, err
	}
	if s.snapFile != 0 {
		image, err := readImageFile(s)
		if err != nil {
			return "", false, err
		}
		keys = append(keys, nil) // nil: the image file
		values = append(values, image)
	}
	if len(keys) == 0 {
		return "", false, nil
	}
	k := r.IntN(len(keys))
	v := values[k]
	i := r.IntN(len(v))
	v[i] ^= byte(1 + r.IntN(255))
	if keys[k] == nil {
		return fmt.Sprintf("image file %d, byte %d of %d", s.snapFile, i, len(v)), true, writeImageFile(s, v)
	}
	if err := s.db.Set(keys[k], v, pebble.Sync); err != nil {
		return "", false, err
	}
	return fmt.Sprintf("key %q, byte %d of %d", keys[k], i, len(v)), true, nil
}

// DropEntriesFrom deletes the entry keys from slot on, below the store's
// bookkeeping: keys a damaged disk lost without a checksum failing.
func DropEntriesFrom(s *Store, slot uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.DeleteRange(entryKey(slot), tagUpperBound(entryTag), pebble.Sync)
}

func readImageFile(s *Store) ([]byte, error) {
	f, err := s.fs.Open(s.imagePath(s.snapFile))
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	return b, errors.Join(err, f.Close())
}

// writeImageFile writes b over the image file in place: a new file
// would replace the old one in its folder, which a crash could undo.
func writeImageFile(s *Store, b []byte) error {
	f, err := s.fs.OpenReadWrite(s.imagePath(s.snapFile), vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	return errors.Join(err, f.Sync(), f.Close())
}

// HeldSlots lists the slots of every entry key in the database, in order,
// past the store's API.
func HeldSlots(s *Store) ([]uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{entryTag}, UpperBound: tagUpperBound(entryTag)})
	if err != nil {
		return nil, err
	}
	var slots []uint64
	for valid := it.First(); valid; valid = it.Next() {
		slot, err := parseNumberedKey(entryTag, it.Key())
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		slots = append(slots, slot)
	}
	return slots, it.Close()
}

// WithSnapshotChunkBytes returns o with snapshots written in chunks of n
// bytes: small snapshots in many chunks, cheaply.
func WithSnapshotChunkBytes(o Options, n int) Options {
	o.snapshotChunkBytes = n
	return o
}

// WithWALWriteThroughBytes returns o with n bytes of each new WAL file
// written through instead of a memtable's worth. On a memory file system
// the zeros are copied at every crash image and read again at every
// reopen: at Pebble's 4 MiB memtable they made the conformance suite
// take 18 times as long under -race.
func WithWALWriteThroughBytes(o Options, n int64) Options {
	o.walWriteThroughBytes = n
	return o
}

// quietLogger drops Pebble's chatter and keeps its errors; the tests of
// both test packages use it.
type quietLogger struct{}

// QuietLogger is quietLogger for the external test package.
type QuietLogger = quietLogger

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Errorf(format string, args ...any) { pebble.DefaultLogger.Errorf(format, args...) }

func (quietLogger) Fatalf(format string, args ...any) { pebble.DefaultLogger.Fatalf(format, args...) }

// SetSnapshotReadHook has Snapshot call hook once it has pinned its view
// of the database and released the store's lock.
func SetSnapshotReadHook(s *Store, hook func()) { s.testHookSnapshotRead = hook }

// LiveWAL returns the path, log number and bytes of the WAL a store in
// dir writes to (the highest-numbered).
func LiveWAL(t testing.TB, fs vfs.FS, dir string) (string, uint32, []byte) {
	t.Helper()
	path, logNum := liveWAL(t, fs, dir)
	return path, logNum, readAll(t, fs, path)
}

// WALChunksEnd returns the offset where the chunks of b, a WAL of log
// logNum, stop: the end of its writes, if it is whole.
func WALChunksEnd(b []byte, logNum uint32) int64 {
	_, stop := walkChunks(b, logNum)
	return stop
}

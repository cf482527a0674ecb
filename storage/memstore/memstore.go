// Package memstore owns the in-memory storage.Store of the deterministic
// simulator: a disk held in memory as encoded, checksummed records, with the
// faults a real disk has on demand: a crash in the middle of a write, loss of
// every unsynced write on power loss, loss of the whole disk, and flipped
// bytes.
//
// It starts no goroutines, reads no clock and takes randomness only from the
// *rand.Rand passed to CorruptRandomRecord. Every choice follows slot order,
// never map order, so that a simulation replays exactly from its seed. A
// Store is not safe for concurrent use: the simulator drives it from one
// goroutine.
package memstore

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"paxcron/paxos"
	"paxcron/storage"
)

// ErrCrashed is wrapped by the error of a Save that crashed (see
// CrashDuringNextSave) and returned by every later write until Crash,
// Restart or Wipe.
var ErrCrashed = errors.New("storage: simulated crash")

// Store is an in-memory storage.Store with fault injection.
//
// The disk is the set of records below. Save normally writes and syncs, so
// the records are all synced; a crashing Save writes without syncing and
// records how to undo each write, which is exactly what a power loss drops.
type Store struct {
	// mu makes the store safe for reads while a writer goroutine saves, as
	// a replica with asynchronous writes does (Pebble is safe for that too).
	mu    sync.Mutex
	codec *storage.Codec

	hardState []byte // the hard state record; nil if never saved
	snapshot  []byte // the snapshot record; nil if none
	snapIndex uint64 // index of snapshot; 0 if none
	entries   map[uint64][]byte
	slots     []uint64 // the keys of entries, sorted

	unsynced []undo // how to undo each unsynced write, oldest first

	crashNextSave bool // CrashDuringNextSave was called
	crashed       bool // a Save crashed: writes are refused until a restart
	closed        bool
}

var _ storage.Store = (*Store)(nil)

// New returns an empty store, as on a fresh disk.
func New() *Store {
	return &Store{codec: storage.NewCodec(), entries: make(map[uint64][]byte)}
}

// InitialState implements paxos.Storage. It decodes the records on every
// call, so that a byte flipped since the last read is caught.
func (s *Store) InitialState() (paxos.HardState, paxos.SnapshotMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return paxos.HardState{}, paxos.SnapshotMeta{}, storage.ErrClosed
	}
	var hs paxos.HardState
	if s.hardState != nil {
		var err error
		if hs, err = s.codec.DecodeHardState(s.hardState); err != nil {
			return paxos.HardState{}, paxos.SnapshotMeta{}, err
		}
	}
	snap, err := s.snapshotLocked()
	if err != nil {
		return paxos.HardState{}, paxos.SnapshotMeta{}, err
	}
	return hs, snap.Meta, nil
}

// Entries implements paxos.Storage.
func (s *Store) Entries(lo, hi, maxBytes uint64) ([]paxos.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, storage.ErrClosed
	}
	if err := storage.CheckEntriesRange(lo, s.firstSlotLocked()); err != nil {
		return nil, err
	}
	budget := storage.SizeBudget{MaxBytes: maxBytes}
	var out []paxos.Entry
	i, _ := slices.BinarySearch(s.slots, lo)
	for ; i < len(s.slots) && s.slots[i] < hi; i++ {
		e, err := s.codec.DecodeEntry(s.slots[i], s.entries[s.slots[i]])
		if err != nil {
			return nil, err
		}
		if !budget.Take(paxos.EntrySize(e)) {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// FirstSlot implements paxos.Storage.
func (s *Store) FirstSlot() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, storage.ErrClosed
	}
	return s.firstSlotLocked(), nil
}

func (s *Store) firstSlotLocked() uint64 {
	var lowest uint64
	if len(s.slots) > 0 {
		lowest = s.slots[0]
	}
	return storage.FirstSlot(lowest, len(s.slots) > 0, s.snapIndex)
}

// LastSlot implements paxos.Storage.
func (s *Store) LastSlot() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, storage.ErrClosed
	}
	if n := len(s.slots); n > 0 {
		return max(s.slots[n-1], s.snapIndex), nil
	}
	return s.snapIndex, nil
}

// Snapshot implements paxos.Storage.
func (s *Store) Snapshot() (paxos.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Store) snapshotLocked() (paxos.Snapshot, error) {
	if s.closed {
		return paxos.Snapshot{}, storage.ErrClosed
	}
	if s.snapshot == nil {
		return paxos.Snapshot{}, nil
	}
	return s.codec.DecodeSnapshot(s.snapIndex, s.snapshot)
}

// Save implements storage.Store. After CrashDuringNextSave it writes u
// without syncing and returns an error wrapping ErrCrashed.
func (s *Store) Save(u storage.Update) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWritable(); err != nil {
		return err
	}
	if err := storage.CheckUpdate(u, s.snapIndex); err != nil {
		return err
	}
	if u.IsEmpty() {
		return nil
	}
	crash := s.crashNextSave
	s.crashNextSave = false
	if u.HardState != nil {
		s.setHardState(s.codec.AppendHardState(nil, *u.HardState), crash)
	}
	storedSnapIndex := s.snapIndex
	if u.Snapshot != nil {
		s.installSnapshot(*u.Snapshot, u.DeleteThrough(), crash)
	}
	for _, e := range u.Entries {
		if storage.KeepsEntry(u, e, storedSnapIndex) {
			s.putEntry(e.Slot, s.codec.AppendEntry(nil, e), crash)
		}
	}
	if crash {
		s.crashed = true
		return fmt.Errorf("%w during a save of %d entries, before its sync", ErrCrashed, len(u.Entries))
	}
	return nil
}

// Close implements storage.Store. Crash, Restart or Wipe open it again.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	s.closed = true
	return nil
}

func (s *Store) checkWritable() error {
	switch {
	case s.closed:
		return storage.ErrClosed
	case s.crashed:
		return fmt.Errorf("%w: writes are refused until the store restarts", ErrCrashed)
	}
	return nil
}

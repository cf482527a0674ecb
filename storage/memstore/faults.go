package memstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// CrashDuringNextSave makes the next Save that writes something (not an
// empty or rejected one) crash between writing and syncing: its records are written (reads see them, as they would see the
// page cache) but not synced, and it returns an error wrapping ErrCrashed.
// Later writes fail with ErrCrashed until Crash (which drops the unsynced
// records), Restart (which keeps them) or Wipe.
func (s *Store) CrashDuringNextSave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.crashNextSave = true
}

// CancelCrashDuringNextSave disarms CrashDuringNextSave if it has not fired.
func (s *Store) CancelCrashDuringNextSave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.crashNextSave = false
}

// Crash simulates a power loss and the restart after it: every unsynced
// write is dropped and the store is usable again, as if reopened.
func (s *Store) Crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.unsynced) - 1; i >= 0; i-- {
		s.unsynced[i].apply(s)
	}
	s.reopen()
}

// Restart simulates a process restart without power loss: writes that
// reached the operating system survive even if they were never synced, so
// the unsynced records are kept. A crashed Save may thus turn out durable.
func (s *Store) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reopen()
}

// Wipe simulates the loss of the whole disk: the store is empty and usable
// again, as if opened on a new disk.
func (s *Store) Wipe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := New()
	s.codec, s.entries = fresh.codec, fresh.entries
	s.hardState, s.snapshot, s.snapIndex, s.slots, s.unsynced = nil, nil, 0, nil, nil
	s.crashNextSave, s.crashed, s.closed = false, false, false
}

func (s *Store) reopen() {
	s.unsynced = s.unsynced[:0]
	s.crashNextSave, s.crashed, s.closed = false, false, false
}

// CorruptRandomRecord flips one byte of one stored record, both chosen with
// r, so that the next read of that record fails with storage.ErrCorrupt.
// desc names the record and byte; ok is false when no record is stored.
func (s *Store) CorruptRandomRecord(r *rand.Rand) (desc string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.slots)
	if s.hardState != nil {
		n++
	}
	if s.snapshot != nil {
		n++
	}
	if n == 0 {
		return "", false
	}
	rec, name := s.recordAt(r.IntN(n))
	i := r.IntN(len(rec))
	// XOR with a non-zero mask so the byte always changes.
	rec[i] ^= byte(1 + r.IntN(255))
	return fmt.Sprintf("%s, byte %d of %d", name, i, len(rec)), true
}

// recordAt returns the i-th stored record in a fixed order: hard state,
// snapshot, then entries by slot.
func (s *Store) recordAt(i int) (rec []byte, name string) {
	if s.hardState != nil {
		if i == 0 {
			return s.hardState, "hard state"
		}
		i--
	}
	if s.snapshot != nil {
		if i == 0 {
			return s.snapshot, fmt.Sprintf("snapshot at index %d", s.snapIndex)
		}
		i--
	}
	slot := s.slots[i]
	return s.entries[slot], fmt.Sprintf("entry at slot %d", slot)
}

// HeldSlots returns the slots of every stored entry, in order, for tests
// and the simulator's statistics.
func (s *Store) HeldSlots() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.slots)
}

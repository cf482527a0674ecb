package memstore

import (
	"slices"

	"paxcron/paxos"
)

// undo restores one record as it was before an unsynced write.
type undo struct {
	kind recordKind
	slot uint64 // entry slot or snapshot index
	prev []byte // the record before the write; nil if there was none
}

type recordKind uint8

const (
	hardStateRecord recordKind = iota + 1
	snapshotRecord
	entryRecord
)

func (u undo) apply(s *Store) {
	switch u.kind {
	case hardStateRecord:
		s.hardState = u.prev
	case snapshotRecord:
		s.snapshot, s.snapIndex = u.prev, u.slot
	case entryRecord:
		if u.prev == nil {
			s.removeEntry(u.slot)
		} else {
			s.putEntry(u.slot, u.prev, false)
		}
	}
}

func (s *Store) setHardState(rec []byte, unsynced bool) {
	if unsynced {
		s.unsynced = append(s.unsynced, undo{kind: hardStateRecord, prev: s.hardState})
	}
	s.hardState = rec
}

// installSnapshot stores snap and deletes the entries at or below
// deleteThrough (its index, less the tail it keeps).
func (s *Store) installSnapshot(snap paxos.Snapshot, deleteThrough uint64, unsynced bool) {
	if unsynced {
		s.unsynced = append(s.unsynced, undo{kind: snapshotRecord, slot: s.snapIndex, prev: s.snapshot})
	}
	s.snapshot, s.snapIndex = s.codec.AppendSnapshot(nil, snap), snap.Meta.Index
	s.deleteEntriesThrough(deleteThrough, unsynced)
}

func (s *Store) putEntry(slot uint64, rec []byte, unsynced bool) {
	prev, held := s.entries[slot]
	if unsynced {
		s.unsynced = append(s.unsynced, undo{kind: entryRecord, slot: slot, prev: prev})
	}
	s.entries[slot] = rec
	if held {
		return
	}
	// Slots mostly grow, so appending is the common case.
	if n := len(s.slots); n == 0 || s.slots[n-1] < slot {
		s.slots = append(s.slots, slot)
		return
	}
	i, _ := slices.BinarySearch(s.slots, slot)
	s.slots = slices.Insert(s.slots, i, slot)
}

func (s *Store) removeEntry(slot uint64) {
	i, found := slices.BinarySearch(s.slots, slot)
	if !found {
		return
	}
	s.slots = slices.Delete(s.slots, i, i+1)
	delete(s.entries, slot)
}

// deleteEntriesThrough deletes every entry with slot <= upTo.
func (s *Store) deleteEntriesThrough(upTo uint64, unsynced bool) {
	n, _ := slices.BinarySearch(s.slots, upTo+1)
	if upTo == ^uint64(0) {
		n = len(s.slots)
	}
	for _, slot := range s.slots[:n] {
		if unsynced {
			s.unsynced = append(s.unsynced, undo{kind: entryRecord, slot: slot, prev: s.entries[slot]})
		}
		delete(s.entries, slot)
	}
	s.slots = slices.Delete(s.slots, 0, n)
}

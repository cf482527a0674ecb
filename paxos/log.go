package paxos

import (
	"errors"
	"fmt"
)

// memLog overlays the entries the core produced and the caller has not yet
// persisted on top of Storage. Entries go through three stages: pending
// (produced since the last Ready), handed (in the Ready being processed) and
// stable (in Storage, after Advance).
type memLog struct {
	storage   Storage
	pending   []Entry
	handed    []Entry
	bySlot    map[uint64]Entry // newest unpersisted entry per slot
	snapIndex uint64           // the newest snapshot's index, in Storage or pending
	lastSlot  uint64           // the highest slot held anywhere
}

func newMemLog(s Storage, snapIndex uint64) (*memLog, error) {
	last, err := s.LastSlot()
	if err != nil {
		return nil, fmt.Errorf("paxos: reading last slot: %w", err)
	}
	if last < snapIndex {
		return nil, fmt.Errorf("paxos: storage last slot %d below snapshot index %d", last, snapIndex)
	}
	return &memLog{storage: s, bySlot: map[uint64]Entry{}, snapIndex: snapIndex, lastSlot: last}, nil
}

// put records e as accepted (or learned) for its slot.
func (l *memLog) put(e Entry) {
	if e.Slot <= l.snapIndex {
		panic(fmt.Sprintf("paxos: put of slot %d at or below snapshot index %d", e.Slot, l.snapIndex))
	}
	l.pending = append(l.pending, e)
	l.bySlot[e.Slot] = e
	l.lastSlot = max(l.lastSlot, e.Slot)
}

// installSnapshot drops every unpersisted entry at or below index.
func (l *memLog) installSnapshot(index uint64) {
	kept := l.pending[:0]
	for _, e := range l.pending {
		if e.Slot > index {
			kept = append(kept, e)
		} else {
			delete(l.bySlot, e.Slot)
		}
	}
	clear(l.pending[len(kept):])
	l.pending = kept
	l.snapIndex = max(l.snapIndex, index)
	l.lastSlot = max(l.lastSlot, index)
}

// takePending moves the pending entries to handed and returns them.
func (l *memLog) takePending() []Entry {
	if len(l.handed) != 0 {
		panic("paxos: Ready called twice without Advance")
	}
	l.handed, l.pending = l.pending, nil
	return l.handed
}

// stabilize forgets handed entries: the caller has persisted them.
func (l *memLog) stabilize() {
	for _, e := range l.handed {
		// A pending entry for the same slot may have replaced e in bySlot;
		// only an identical one may now be read from Storage instead.
		if cur, ok := l.bySlot[e.Slot]; ok && cur.Ballot == e.Ballot && cur.SameValue(e) {
			delete(l.bySlot, e.Slot)
		}
	}
	l.handed = nil
}

// entries returns held entries in [lo, hi), in slot order, skipping empty
// slots, bounded by maxEntries and maxBytes (at least one if any is held).
// It returns ErrCompacted if lo is at or below the snapshot index.
func (l *memLog) entries(lo, hi uint64, maxEntries int, maxBytes uint64) ([]Entry, error) {
	if lo <= l.snapIndex {
		return nil, ErrCompacted
	}
	hi = min(hi, l.lastSlot+1)
	if lo >= hi {
		return nil, nil
	}
	stored, err := l.storage.Entries(lo, hi, maxBytes)
	if errors.Is(err, ErrCompacted) {
		// A snapshot in the Ready being processed compacted storage
		// further than the overlay knows; treat as compacted.
		return nil, ErrCompacted
	}
	if err != nil {
		return nil, err
	}
	if len(l.bySlot) == 0 {
		return truncateEntries(stored, maxEntries, maxBytes), nil
	}
	// Storage stops early once maxBytes is passed: do not look past what it
	// returned, or a held slot could be skipped as empty.
	if storedBytes(stored) > maxBytes && len(stored) > 0 {
		hi = stored[len(stored)-1].Slot + 1
	}
	out := make([]Entry, 0, min(uint64(maxEntries), hi-lo))
	si := 0
	var size uint64
	for s := lo; s < hi && len(out) < maxEntries; s++ {
		for si < len(stored) && stored[si].Slot < s {
			si++
		}
		e, ok := l.bySlot[s]
		if !ok && si < len(stored) && stored[si].Slot == s {
			e, ok = stored[si], true
		}
		if !ok {
			continue
		}
		if len(out) > 0 && size+EntrySize(e) > maxBytes {
			break
		}
		out = append(out, e)
		size += EntrySize(e)
	}
	return out, nil
}

func storedBytes(es []Entry) uint64 {
	var n uint64
	for _, e := range es {
		n += EntrySize(e)
	}
	return n
}

func truncateEntries(es []Entry, maxEntries int, maxBytes uint64) []Entry {
	var size uint64
	for i, e := range es {
		if i >= maxEntries || (i > 0 && size+EntrySize(e) > maxBytes) {
			return es[:i]
		}
		size += EntrySize(e)
	}
	return es
}

package paxos

import (
	"errors"
	"fmt"
	"math"
)

// memLog overlays Storage with the entries the core still needs at hand:
// those the caller has not yet persisted, and those persisted but not yet
// applied (so that applying and sending them does not read them back from
// disk). Entries go through three stages: pending (produced since the last
// Ready), in flight (handed out in a Ready whose write has not been
// confirmed; several may be, in order) and stable (in Storage); a stable
// entry leaves memory once it is applied.
//
// Below the newest snapshot the log may keep a tail: the slots from
// compacted+1 through snapIndex stay readable (from Storage), so that a
// peer a little behind is caught up with entries rather than a snapshot.
type memLog struct {
	storage  Storage
	pending  []Entry              // at most one per slot (put)
	inflight [][]Entry            // entries of each unconfirmed Ready, oldest first
	bySlot   map[uint64]heldEntry // newest entry per slot, for slots not yet pruned
	// batch numbers the pending batch: takePending starts the next one.
	// It starts at 1, so that 0 marks an entry not pending.
	batch     uint64
	pruned    uint64 // bySlot holds nothing at or below this slot
	snapIndex uint64 // the newest snapshot's index, in Storage or pending
	compacted uint64 // entries at or below it are gone, or about to be (<= snapIndex)
	lastSlot  uint64 // the highest slot held anywhere
}

// heldEntry is the newest entry of a slot, and where it is pending: at
// pending[at] if batch is the log's current batch.
type heldEntry struct {
	Entry
	batch uint64
	at    int
}

func newMemLog(s Storage, snapIndex uint64) (*memLog, error) {
	last, err := s.LastSlot()
	if err != nil {
		return nil, fmt.Errorf("paxos: reading last slot: %w", err)
	}
	if last < snapIndex {
		return nil, fmt.Errorf("paxos: storage last slot %d below snapshot index %d", last, snapIndex)
	}
	first, err := s.FirstSlot()
	if err != nil {
		return nil, fmt.Errorf("paxos: reading first slot: %w", err)
	}
	if first == 0 || first > snapIndex+1 {
		return nil, fmt.Errorf("paxos: storage first slot %d outside [1, snapshot index %d + 1]", first, snapIndex)
	}
	return &memLog{storage: s, bySlot: map[uint64]heldEntry{}, batch: 1, pruned: snapIndex, snapIndex: snapIndex,
		compacted: first - 1, lastSlot: last}, nil
}

// put records e as accepted (or learned) for its slot. An entry the slot
// already holds as its newest, under the same ballot, is not recorded
// again: held at all, it is pending, in flight or stable, so it is durable
// by the time the next Ready's write is, and so before any reply to the
// message that brought it again. A leader resends the accepts a follower
// has not answered every two heartbeats, and a follower whose caller
// takes no Ready answers none: each resend of a slot not yet known chosen
// once joined pending again, which grew with every resend for as long as
// the caller held off (a replica decoding a snapshot from the leader;
// found in review).
//
// Another entry for a slot whose newest is still pending (a newer
// leader's accept of it, or its chosen value) takes that entry's place:
// the write would have put the newer one over it anyway, and no reply
// leaves before that write. Appended, each new leader's resends added a
// window of entries per ballot while the caller held off (found in
// review). An entry already handed out stays in its Ready: its write may
// be under way and a reply counted on it; the newer one is written after.
func (l *memLog) put(e Entry) {
	if e.Slot <= l.snapIndex || e.Slot <= l.pruned {
		panic(fmt.Sprintf("paxos: put of slot %d at or below snapshot %d or applied %d", e.Slot, l.snapIndex, l.pruned))
	}
	held, ok := l.bySlot[e.Slot]
	if ok && held.Ballot == e.Ballot && held.SameValue(e) {
		return
	}
	if ok && held.batch == l.batch {
		if p := l.pending[held.at]; p.Slot != e.Slot {
			panic(fmt.Sprintf("paxos: slot %d indexed at pending %d, which holds slot %d", e.Slot, held.at, p.Slot))
		}
		l.pending[held.at] = e
		l.bySlot[e.Slot] = heldEntry{Entry: e, batch: l.batch, at: held.at}
		return
	}
	l.bySlot[e.Slot] = heldEntry{Entry: e, batch: l.batch, at: len(l.pending)}
	l.pending = append(l.pending, e)
	l.lastSlot = max(l.lastSlot, e.Slot)
}

// installSnapshot records a snapshot learned from a peer: it replaces the
// whole log at or below index, so every entry held in memory there is
// dropped. Entries in flight stay in flight (the caller writes them before
// the snapshot, which then deletes those it covers).
func (l *memLog) installSnapshot(index uint64) {
	l.dropThrough(index)
	l.snapIndex = max(l.snapIndex, index)
	l.compacted = max(l.compacted, index)
	l.pruned = max(l.pruned, index)
	l.lastSlot = max(l.lastSlot, index)
}

// compact records a snapshot the caller took at index, whose write deletes
// the log at or below through and keeps the tail above it.
func (l *memLog) compact(index, through uint64) {
	l.dropThrough(through)
	l.snapIndex = max(l.snapIndex, index)
	l.compacted = max(l.compacted, through)
	l.pruned = max(l.pruned, through)
	l.lastSlot = max(l.lastSlot, index)
}

// dropThrough forgets every entry held in memory at or below index.
func (l *memLog) dropThrough(index uint64) {
	kept := l.pending[:0]
	for _, e := range l.pending {
		if e.Slot > index {
			kept = append(kept, e)
		}
	}
	clear(l.pending[len(kept):])
	l.pending = kept
	// Persisted entries above index stay readable from Storage; rebuilding
	// the map from the unpersisted ones is cheaper than walking every slot.
	// Older batches first, so that the newest entry for a slot wins.
	l.bySlot = make(map[uint64]heldEntry, len(kept))
	for _, batch := range l.inflight {
		for _, e := range batch {
			if e.Slot > index {
				l.bySlot[e.Slot] = heldEntry{Entry: e}
			}
		}
	}
	for i, e := range kept {
		l.bySlot[e.Slot] = heldEntry{Entry: e, batch: l.batch, at: i}
	}
}

// takePending moves the pending entries in flight and returns them.
func (l *memLog) takePending() []Entry {
	es := l.pending
	l.pending = nil
	l.batch++ // what bySlot marked pending is in flight now
	l.inflight = append(l.inflight, es)
	return es
}

// stabilize records that the oldest batch in flight is persisted.
func (l *memLog) stabilize() {
	if len(l.inflight) == 0 {
		panic("paxos: a write confirmed with none in flight")
	}
	l.inflight[0] = nil
	l.inflight = l.inflight[1:]
}

// prune forgets entries at or below applied, which must all be persisted:
// they will only be read again for catch-up. (Entries still in flight are
// all above it: a slot is applied only after the Ready that chose it was
// confirmed, and later Readys only carry slots above the chosen index.)
func (l *memLog) prune(applied uint64) {
	if applied <= l.pruned {
		return
	}
	if applied-l.pruned > 4*uint64(len(l.bySlot))+64 {
		//detlint:maprange deleting entries; the order cannot matter
		for s := range l.bySlot {
			if s <= applied {
				delete(l.bySlot, s)
			}
		}
	} else {
		for s := l.pruned + 1; s <= applied; s++ {
			delete(l.bySlot, s)
		}
	}
	l.pruned = applied
}

// entries returns held entries in [lo, hi), in slot order, skipping empty
// slots, bounded by maxEntries and maxBytes (at least one if any is held).
// It returns ErrCompacted if lo is at or below the compaction point; slots
// of the tail below the snapshot index are read from Storage.
func (l *memLog) entries(lo, hi uint64, maxEntries int, maxBytes uint64) ([]Entry, error) {
	if lo <= l.compacted {
		return nil, ErrCompacted
	}
	hi = min(hi, l.lastSlot+1)
	if lo >= hi {
		return nil, nil
	}
	// Fast path: the whole range is in memory, as it is for entries being
	// sent, applied, or both.
	var out []Entry
	var size uint64
	for s := lo; s < hi && len(out) < maxEntries; s++ {
		h, ok := l.bySlot[s]
		if !ok {
			break
		}
		if len(out) > 0 && size+EntrySize(h.Entry) > maxBytes {
			return out, nil
		}
		out = append(out, h.Entry)
		size += EntrySize(h.Entry)
	}
	if len(out) == maxEntries || lo+uint64(len(out)) == hi {
		return out, nil
	}
	return l.entriesMerged(lo, hi, maxEntries, maxBytes)
}

// entriesMerged reads [lo, hi) from Storage and overlays what memory holds.
func (l *memLog) entriesMerged(lo, hi uint64, maxEntries int, maxBytes uint64) ([]Entry, error) {
	// Storage bounds a read by bytes only: read no more slots than
	// maxEntries can use. (A restarted replica applying its log in Readys
	// of 128 entries read 4 MiB of it from Pebble for each and kept 128:
	// at a million jobs its catch-up of 80,000 entries took 22 s, 3.7 s
	// with this; BENCHMARKS.md.) Should the window hold only empty slots,
	// the whole range is read.
	if span := uint64(maxEntries); hi-lo > span {
		out, err := l.entriesMerged(lo, lo+span, maxEntries, maxBytes)
		if err != nil || len(out) > 0 {
			return out, err
		}
	}
	stored, err := l.storage.Entries(lo, hi, maxBytes)
	if errors.Is(err, ErrCompacted) {
		// Storage was compacted further than the overlay knows (a caller
		// that compacts must tell the node; see Node.Compacted); treat
		// the slots as compacted.
		return nil, ErrCompacted
	}
	if err != nil {
		return nil, err
	}
	if len(l.bySlot) == 0 {
		return truncateEntries(stored, maxEntries, maxBytes), nil
	}
	// A bounded read may have stopped at its byte budget, before the entry
	// that would pass it (the stores do) or after it: either way, do not
	// look past what it returned, or a held slot it did not read would be
	// taken for an empty one and the result would skip it (found in
	// review: a restarted follower's apply read panicked on the gap). The
	// slots after it are read next time. An unbounded read (a promise's)
	// is never cut.
	if maxBytes != math.MaxUint64 && len(stored) > 0 {
		hi = min(hi, stored[len(stored)-1].Slot+1)
	}
	out := make([]Entry, 0, min(uint64(maxEntries), hi-lo))
	si := 0
	var size uint64
	for s := lo; s < hi && len(out) < maxEntries; s++ {
		for si < len(stored) && stored[si].Slot < s {
			si++
		}
		h, ok := l.bySlot[s]
		e := h.Entry
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

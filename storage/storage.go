package storage

import (
	"errors"
	"fmt"

	"paxcron/paxos"
)

// Update is one synced write: everything a paxos.Ready asks to persist, or
// a snapshot the caller took of its own state machine.
type Update struct {
	// HardState, when set, replaces the stored hard state.
	HardState *paxos.HardState
	// Entries replace whatever their slots held. Entries at or below the
	// stored snapshot index, or deleted by this update's snapshot, are
	// dropped (see Store.Save).
	Entries []paxos.Entry
	// Snapshot, when set, replaces the stored snapshot and deletes every
	// entry at or below its index, except the last TailSlots slots.
	Snapshot *paxos.Snapshot
	// TailSlots, with a Snapshot, keeps the entries of the last TailSlots
	// slots at or below its index as the log's tail: with index I, entries
	// in (I-TailSlots, I] stay readable (until a later snapshot deletes
	// them), so that a peer a little behind I is caught up with
	// entries rather than the whole snapshot. Only a snapshot the replica
	// took of values it applied from this very log may keep a tail; one
	// learned from another replica must leave it zero, since what the log
	// holds below it need not be the chosen values.
	TailSlots uint64
}

// IsEmpty reports whether u writes nothing.
func (u Update) IsEmpty() bool {
	return u.HardState == nil && len(u.Entries) == 0 && u.Snapshot == nil
}

// DeleteThrough is the slot at or below which u's snapshot deletes every
// entry: its index less its tail (0 without a snapshot).
func (u Update) DeleteThrough() uint64 {
	if u.Snapshot == nil {
		return 0
	}
	return u.Snapshot.Meta.Index - min(u.TailSlots, u.Snapshot.Meta.Index)
}

// Store is a replica's durable state: the read side the paxos core uses plus
// the write side its caller drives from each Ready. A replica that writes
// asynchronously calls Save from a writer goroutine while the core reads on
// its own: reads and one writer must be safe together.
type Store interface {
	paxos.Storage

	// Save writes u atomically in one synced write (group commit: one fsync
	// per call). It returns only once the write is durable; after any error
	// the store must be treated as lost (closed and reopened), since it can
	// no longer tell what reached the disk.
	//
	// Entries replace what their slots held. A Snapshot replaces the stored
	// snapshot and deletes every entry with slot <= u.DeleteThrough() (its
	// index, less the TailSlots it keeps); entries above are kept. When
	// both are set, the snapshot is applied first, then the entries. An
	// entry is dropped if its slot is at or below the snapshot index stored
	// before the write (that slot is chosen and covered by the snapshot, and
	// the log is never written below it again) or at or below
	// u.DeleteThrough(); entries of the same update in its snapshot's tail
	// are written. A snapshot older than the stored one, TailSlots without
	// a snapshot, or an entry for slot 0, is rejected with ErrInvalid and
	// nothing is written. An empty Update writes nothing and does not sync.
	Save(u Update) error

	// Close releases the store. Later calls return ErrClosed.
	Close() error
}

// SnapshotStager is a Store that can write a snapshot's image ahead of the
// Save that stores it, on another goroutine while Saves and reads go on, so
// that the Save writes little more than the snapshot's metadata: a large
// state's image need not hold the log's appends for as long as it takes
// to reach the disk.
type SnapshotStager interface {
	// StageSnapshot writes snap's image durably where a later Save of
	// snap will find it. It may run concurrently with every other call
	// of the store. Staging changes nothing the store reads: until a Save
	// stores snap, the store holds what it held, and a staged image no
	// Save stores (superseded, or cut short by a crash) is deleted. A
	// snapshot below the stored one is rejected with ErrInvalid.
	StageSnapshot(snap paxos.Snapshot) error
}

var (
	// ErrCorrupt is wrapped by every error reporting a record whose bytes
	// fail their checksum or validation, or damage the database beneath a
	// store finds with checksums of its own (Pebble's); the message names
	// the record, or what was being read.
	ErrCorrupt = errors.New("storage: corrupt record")
	// ErrClosed is returned by every call on a closed store.
	ErrClosed = errors.New("storage: store is closed")
	// ErrInvalid is returned for a request that breaks the Store contract.
	ErrInvalid = errors.New("storage: invalid request")
)

// CheckUpdate validates u against the stored snapshot index, as every Store
// does before writing anything.
func CheckUpdate(u Update, storedSnapIndex uint64) error {
	if u.Snapshot != nil && u.Snapshot.Meta.Index < storedSnapIndex {
		return fmt.Errorf("%w: snapshot index %d is below the stored snapshot index %d",
			ErrInvalid, u.Snapshot.Meta.Index, storedSnapIndex)
	}
	if u.Snapshot == nil && u.TailSlots > 0 {
		return fmt.Errorf("%w: TailSlots %d without a snapshot", ErrInvalid, u.TailSlots)
	}
	for _, e := range u.Entries {
		if e.Slot == 0 {
			return fmt.Errorf("%w: entry for slot 0 (slots start at 1)", ErrInvalid)
		}
	}
	return nil
}

// KeepsEntry reports whether Save(u) writes e over a store whose snapshot
// index was storedSnapIndex before the write (see Store.Save).
func KeepsEntry(u Update, e paxos.Entry, storedSnapIndex uint64) bool {
	return e.Slot > storedSnapIndex && e.Slot > u.DeleteThrough()
}

// FirstSlot computes paxos.Storage.FirstSlot from the lowest held entry
// slot (held false if none is held) and the snapshot index.
func FirstSlot(lowest uint64, held bool, snapIndex uint64) uint64 {
	if held && lowest <= snapIndex {
		return lowest
	}
	return snapIndex + 1
}

// CheckEntriesRange validates the arguments of Storage.Entries: lo must not
// lie below the first slot held (Storage.FirstSlot). It returns
// paxos.ErrCompacted itself, unwrapped, so that callers written in etcd's
// style (err == ErrCompacted) work.
func CheckEntriesRange(lo, firstSlot uint64) error {
	if lo < firstSlot {
		return paxos.ErrCompacted
	}
	return nil
}

// SizeBudget tracks the maxBytes limit of Storage.Entries: entries are taken
// while their summed paxos.EntrySize stays within MaxBytes, and the first one
// always, so that a caller asking for a too-small batch still makes progress.
type SizeBudget struct {
	MaxBytes  uint64
	usedBytes uint64
	taken     int
}

// Take reports whether an entry of sizeBytes still fits, and counts it if so.
func (b *SizeBudget) Take(sizeBytes uint64) bool {
	if b.taken > 0 && b.usedBytes+sizeBytes > b.MaxBytes {
		return false
	}
	b.usedBytes += sizeBytes
	b.taken++
	return true
}

// Merge combines updates, given in the order they were produced, into one
// whose Save leaves the store exactly as saving them one by one would:
// entries in order (a later one for the same slot wins), the last hard
// state, and the newest snapshot, whose tail shrinks so that it deletes
// every entry any of the snapshots would have deleted. An entry at or
// below the index of a snapshot in an earlier update is left out, as the
// store would drop it once that snapshot is stored. A writer that falls
// behind merges what queued up and pays one sync for all of it.
func Merge(us []Update) Update {
	if len(us) == 1 {
		return us[0]
	}
	var m Update
	n := 0
	for _, u := range us {
		n += len(u.Entries)
	}
	m.Entries = make([]paxos.Entry, 0, n)
	var snapIndex, deleteThrough uint64 // of the snapshots merged so far
	for _, u := range us {
		for _, e := range u.Entries {
			if m.Snapshot == nil || e.Slot > snapIndex {
				m.Entries = append(m.Entries, e)
			}
		}
		if u.HardState != nil {
			m.HardState = u.HardState
		}
		if u.Snapshot != nil {
			deleteThrough = max(deleteThrough, u.DeleteThrough())
			if m.Snapshot == nil || m.Snapshot.Meta.Index <= u.Snapshot.Meta.Index {
				m.Snapshot = u.Snapshot
			}
			snapIndex = max(snapIndex, u.Snapshot.Meta.Index)
		}
	}
	if m.Snapshot != nil {
		m.TailSlots = m.Snapshot.Meta.Index - min(deleteThrough, m.Snapshot.Meta.Index)
	}
	return m
}

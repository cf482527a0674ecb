package storage

import (
	"errors"
	"fmt"

	"paxcron/paxos"
)

// Update is one synced write: everything a paxos.Ready asks to persist.
type Update struct {
	// HardState, when set, replaces the stored hard state.
	HardState *paxos.HardState
	// Entries replace whatever their slots held. Entries at or below the
	// snapshot index in effect after the write are dropped (see Store.Save).
	Entries []paxos.Entry
	// Snapshot, when set, replaces the stored snapshot and deletes every
	// entry at or below its index.
	Snapshot *paxos.Snapshot
}

// IsEmpty reports whether u writes nothing.
func (u Update) IsEmpty() bool {
	return u.HardState == nil && len(u.Entries) == 0 && u.Snapshot == nil
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
	// snapshot and deletes every entry with slot <= its index; entries above
	// are kept. When both are set, the snapshot is applied first, then the
	// entries above its index. Entries at or below the snapshot index in
	// effect are dropped: their slots are chosen and covered by the snapshot,
	// and keeping them would hold entries Entries could never return.
	// A snapshot older than the stored one, or an entry for slot 0, is
	// rejected with ErrInvalid and nothing is written. An empty Update
	// writes nothing and does not sync.
	Save(u Update) error

	// Compact deletes entries with slot <= upTo. upTo must not exceed the
	// stored snapshot's index (else ErrInvalid), so that no slot is lost
	// that the snapshot does not cover.
	Compact(upTo uint64) error

	// Close releases the store. Later calls return ErrClosed.
	Close() error
}

var (
	// ErrCorrupt is wrapped by every error reporting a record whose bytes
	// fail their checksum or validation; the message names the record.
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
	for _, e := range u.Entries {
		if e.Slot == 0 {
			return fmt.Errorf("%w: entry for slot 0 (slots start at 1)", ErrInvalid)
		}
	}
	return nil
}

// SnapIndexAfter returns the snapshot index in effect once u is written
// over a store whose snapshot index is stored.
func SnapIndexAfter(u Update, stored uint64) uint64 {
	if u.Snapshot != nil {
		return max(u.Snapshot.Meta.Index, stored)
	}
	return stored
}

// CheckCompact validates a Compact(upTo) against the stored snapshot index.
func CheckCompact(upTo, storedSnapIndex uint64) error {
	if upTo > storedSnapIndex {
		return fmt.Errorf("%w: compact up to %d is above the snapshot index %d",
			ErrInvalid, upTo, storedSnapIndex)
	}
	return nil
}

// CheckEntriesRange validates the arguments of Storage.Entries: lo must lie
// above the snapshot index. It returns paxos.ErrCompacted itself, unwrapped,
// so that callers written in etcd's style (err == ErrCompacted) work.
func CheckEntriesRange(lo, snapIndex uint64) error {
	if lo <= snapIndex {
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
// state, and the newest snapshot (which deletes every entry at or below it,
// as each older one would have). A writer that falls behind merges what
// queued up and pays one sync for all of it.
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
	for _, u := range us {
		m.Entries = append(m.Entries, u.Entries...)
		if u.HardState != nil {
			m.HardState = u.HardState
		}
		if u.Snapshot != nil && (m.Snapshot == nil || m.Snapshot.Meta.Index <= u.Snapshot.Meta.Index) {
			m.Snapshot = u.Snapshot
		}
	}
	return m
}

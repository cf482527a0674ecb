package paxos

import "errors"

// ErrCompacted is returned by Storage when the asked-for slots lie below
// the first slot it still holds (FirstSlot): they were compacted into a
// snapshot and are no longer held as entries.
var ErrCompacted = errors.New("paxos: slots compacted into a snapshot")

// ErrSnapshotTemporarilyUnavailable is returned by Storage.Snapshot when
// the snapshot is being read in the background and is not in memory yet.
// The core then sends no snapshot this time and asks again at its next
// catch-up of the peer (every two heartbeats): a snapshot of hundreds of
// megabytes takes seconds to read, longer than a leader may go without
// heartbeating.
var ErrSnapshotTemporarilyUnavailable = errors.New("paxos: snapshot temporarily unavailable")

// Storage is the read side of a replica's durable state. The caller writes
// it (from Ready) and the core only reads it. Implementations must return
// exactly what was last written; a read that finds corrupted bytes returns
// an error and the core refuses to go on (it panics through Step, Tick or
// Ready), since serving from bad state would break agreement.
type Storage interface {
	// InitialState returns the persisted HardState and the metadata of the
	// newest snapshot (zero when there is none).
	InitialState() (HardState, SnapshotMeta, error)
	// Entries returns the held entries with lo <= slot < hi in increasing
	// slot order, skipping slots that hold nothing, and stopping before
	// the entry that would take their encoded size past maxBytes (at least
	// one entry is returned if any is held; the core also copes with a
	// store that stops just after that entry). It returns ErrCompacted if
	// lo < FirstSlot().
	Entries(lo, hi, maxBytes uint64) ([]Entry, error)
	// FirstSlot returns the lowest slot Entries serves: the lowest held
	// slot if it lies at or below the snapshot index, else the snapshot
	// index + 1. Entries from it through the snapshot index are the log's
	// tail, kept after a local snapshot so that a peer a little behind is
	// caught up with entries rather than the whole snapshot; every slot
	// below it was compacted away.
	FirstSlot() (uint64, error)
	// LastSlot returns the highest slot holding an entry, or the snapshot
	// index when no entry is held above it.
	LastSlot() (uint64, error)
	// Snapshot returns the newest snapshot, or
	// ErrSnapshotTemporarilyUnavailable while it is being read elsewhere.
	// The core calls it only to send the snapshot to a peer; it may get an
	// older snapshot than the newest one saved, and asks again later.
	Snapshot() (Snapshot, error)
}

// EntrySize is the size an entry counts for in byte limits.
func EntrySize(e Entry) uint64 { return uint64(len(e.Data)) + 32 }

package pebblestore

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"paxcron/paxos"
	"paxcron/storage"
)

// Save implements storage.Store: one batch, committed with pebble.Sync.
func (s *Store) Save(u storage.Update) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if err := storage.CheckUpdate(u, s.snapIndex); err != nil {
		return err
	}
	if u.IsEmpty() {
		return nil
	}
	b := s.newBatch(u)
	defer b.Close()
	lastSlot, err := s.fillBatch(b, u)
	if err != nil {
		return s.fail("save", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return s.fail("save", err)
	}
	if u.Snapshot != nil {
		s.hasSnapshot, s.snapIndex = true, u.Snapshot.Meta.Index
	}
	s.lastSlot = max(s.lastSlot, s.snapIndex, lastSlot)
	if u.Snapshot != nil {
		if err := s.loadFirstSlot(); err != nil {
			return s.fail("save", err)
		}
	}
	return nil
}

// fillBatch puts u into b and returns the highest entry slot it writes.
func (s *Store) fillBatch(b *pebble.Batch, u storage.Update) (uint64, error) {
	if u.HardState != nil {
		s.value = s.codec.AppendHardState(s.value[:0], *u.HardState)
		if err := b.Set(hardStateKey, s.value, nil); err != nil {
			return 0, err
		}
	}
	if u.Snapshot != nil {
		if err := s.putSnapshot(b, *u.Snapshot, u.DeleteThrough()); err != nil {
			return 0, err
		}
	}
	var lastSlot uint64
	for _, e := range u.Entries {
		if !storage.KeepsEntry(u, e, s.snapIndex) {
			continue
		}
		if err := s.putEntry(b, e); err != nil {
			return 0, err
		}
		lastSlot = max(lastSlot, e.Slot)
	}
	return lastSlot, nil
}

// snapshotChunkBytes is the size of a snapshot image's chunks (the last
// may be shorter): small enough that copying or checksumming one takes
// well under a millisecond (keys.go says why it matters). Tests may set
// a store's own (Options.snapshotChunkBytes).
const snapshotChunkBytes = 1 << 20

// newBatch returns a batch for u. One that holds a snapshot is sized for
// it up front: a batch grows by doubling its buffer, and each doubling
// copies everything so far in one step.
func (s *Store) newBatch(u storage.Update) *pebble.Batch {
	if u.Snapshot == nil {
		return s.db.NewBatch()
	}
	size := len(u.Snapshot.Data) + (len(u.Snapshot.Data)/s.chunkBytes+1)*batchRecordOverhead
	for _, e := range u.Entries {
		size += len(e.Data) + batchRecordOverhead
	}
	return s.db.NewBatchWithSize(size + 4096)
}

// batchRecordOverhead is a generous bound on what a batch and our record
// framing add to a value: the key, its and the value's lengths, the
// record's header, checksum and msgpack framing.
const batchRecordOverhead = 128

// putSnapshot replaces the stored snapshot with snap and deletes the
// entries at or below deleteThrough (its index, less the tail it keeps).
// The snapshot is a header under its key and its image in chunks.
func (s *Store) putSnapshot(b *pebble.Batch, snap paxos.Snapshot, deleteThrough uint64) error {
	index := snap.Meta.Index
	if err := b.DeleteRange(entryKey(0), entryKeyAfter(deleteThrough), nil); err != nil {
		return err
	}
	if s.hasSnapshot && s.snapIndex != index {
		if err := b.Delete(snapshotKey(s.snapIndex), nil); err != nil {
			return err
		}
	}
	// Every chunk at or below index goes, this index's own included
	// (written again): the Sets below come later in the batch, so they
	// stand.
	if err := b.DeleteRange([]byte{snapshotChunkTag}, chunksUpperBound(index), nil); err != nil {
		return err
	}
	size := uint64(len(snap.Data))
	chunkBytes := uint64(s.chunkBytes)
	chunks := (size + chunkBytes - 1) / chunkBytes
	s.value = s.codec.AppendSnapshotHeader(s.value[:0], storage.SnapshotHeader{Meta: snap.Meta, Size: size, Chunks: chunks})
	if err := b.Set(snapshotKey(index), s.value, nil); err != nil {
		return err
	}
	for n := range chunks {
		data := snap.Data[n*chunkBytes : min((n+1)*chunkBytes, size)]
		s.key = appendChunkKey(s.key[:0], index, n)
		s.value = s.codec.AppendSnapshotChunk(s.value[:0], index, n, data)
		if err := b.Set(s.key, s.value, nil); err != nil {
			return err
		}
	}
	if cap(s.value) > 2*s.chunkBytes {
		s.value = nil
	}
	return nil
}

func (s *Store) putEntry(b *pebble.Batch, e paxos.Entry) error {
	s.key = appendNumberedKey(s.key[:0], entryTag, e.Slot)
	s.value = s.codec.AppendEntry(s.value[:0], e)
	return b.Set(s.key, s.value, nil)
}

// Compact implements storage.Store. It writes (and syncs) only if some
// entry at or below upTo is held, which after a snapshot is rare.
func (s *Store) Compact(upTo uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if err := storage.CheckCompact(upTo, s.snapIndex); err != nil {
		return err
	}
	held, err := s.holdsEntriesThrough(upTo)
	if err != nil || !held {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(entryKey(0), entryKeyAfter(upTo), nil); err != nil {
		return s.fail("compact", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return s.fail("compact", err)
	}
	if err := s.loadFirstSlot(); err != nil {
		return s.fail("compact", err)
	}
	return nil
}

func (s *Store) holdsEntriesThrough(upTo uint64) (bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: entryKey(0), UpperBound: entryKeyAfter(upTo)})
	if err != nil {
		return false, fmt.Errorf("storage: pebblestore: %w", err)
	}
	held := it.First()
	return held, closeIter(it, nil)
}

// fail makes a write error sticky: after a failed commit the batch may be
// readable in Pebble's memtable without being durable, so no later read
// may be served.
func (s *Store) fail(op string, err error) error {
	s.err = fmt.Errorf("storage: pebblestore: %s: %w", op, err)
	return s.err
}

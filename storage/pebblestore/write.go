package pebblestore

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"paxcron/paxos"
	"paxcron/storage"
)

// Save implements storage.Store: one batch, committed with pebble.Sync.
// A snapshot's image is written to its file first, unless StageSnapshot
// did it already; the batch holds only its header.
func (s *Store) Save(u storage.Update) error {
	var img stagedImage
	if u.Snapshot != nil && len(u.Snapshot.Data) > 0 {
		var err error
		if img, err = s.imageFor(u); err != nil {
			return err
		}
	}
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
	b := s.db.NewBatch()
	defer b.Close()
	lastSlot, err := s.fillBatch(b, u, img.header)
	if err != nil {
		return s.fail("save", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return s.fail("save", err)
	}
	if u.Snapshot != nil {
		unused := s.stagedThrough(u.Snapshot.Meta.Index)
		if s.snapFile != 0 {
			unused = append(unused, s.snapFile)
		}
		s.hasSnapshot, s.snapIndex, s.snapFile, s.snapFileUnknown = true, u.Snapshot.Meta.Index, img.header.File, false
		s.snapshotSaves++
		// Readers that opened an old file keep it readable.
		for _, file := range unused {
			s.removeImage(file)
		}
	}
	s.lastSlot = max(s.lastSlot, s.snapIndex, lastSlot)
	if u.Snapshot != nil {
		if err := s.loadFirstSlot(); err != nil {
			return s.fail("save", err)
		}
	}
	return nil
}

// imageFor returns the image file of u's snapshot: the one staged for it,
// else one written now. Only the writer calls Save, so the stored
// snapshot cannot change between the check and the write that follows.
func (s *Store) imageFor(u storage.Update) (stagedImage, error) {
	s.mu.RLock()
	err := s.err
	if err == nil {
		err = storage.CheckUpdate(u, s.snapIndex)
	}
	s.mu.RUnlock()
	if err != nil {
		return stagedImage{}, err
	}
	if img, ok := s.takeStaged(*u.Snapshot); ok {
		return img, nil
	}
	if err := s.StageSnapshot(*u.Snapshot); err != nil {
		return stagedImage{}, err
	}
	img, ok := s.takeStaged(*u.Snapshot)
	if !ok {
		// StageSnapshot drops an image a snapshot saved meanwhile made
		// useless: only a Save running beside this one does that.
		return stagedImage{}, fmt.Errorf("%w: a snapshot at or above index %d was saved while this one's image was written",
			storage.ErrInvalid, u.Snapshot.Meta.Index)
	}
	return img, nil
}

// fillBatch puts u into b, with img the header of its snapshot's image
// file (zero for an empty image), and returns the highest entry slot it
// writes.
func (s *Store) fillBatch(b *pebble.Batch, u storage.Update, img storage.SnapshotHeader) (uint64, error) {
	if u.HardState != nil {
		s.value = s.codec.AppendHardState(s.value[:0], *u.HardState)
		if err := b.Set(hardStateKey, s.value, nil); err != nil {
			return 0, err
		}
	}
	if u.Snapshot != nil {
		if err := s.putSnapshot(b, *u.Snapshot, u.DeleteThrough(), img); err != nil {
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

// batchRecordOverhead is a generous bound on what our record framing adds
// to a value: the record's header, checksum and msgpack framing.
const batchRecordOverhead = 128

// putSnapshot replaces the stored snapshot with snap, whose image is in
// the file img names (img is zero for an empty image), and deletes the
// entries at or below deleteThrough (its index, less the tail it keeps).
func (s *Store) putSnapshot(b *pebble.Batch, snap paxos.Snapshot, deleteThrough uint64, img storage.SnapshotHeader) error {
	index := snap.Meta.Index
	if img.File == 0 && len(snap.Data) > 0 {
		panic(fmt.Sprintf("pebblestore: the snapshot at index %d holds %d bytes and has no image file", index, len(snap.Data)))
	}
	if err := b.DeleteRange(entryKey(0), entryKeyAfter(deleteThrough), nil); err != nil {
		return err
	}
	if s.hasSnapshot && s.snapIndex != index {
		if err := b.Delete(snapshotKey(s.snapIndex), nil); err != nil {
			return err
		}
	}
	// Chunks kept in the database by stores written before image files.
	if err := b.DeleteRange([]byte{snapshotChunkTag}, chunksUpperBound(index), nil); err != nil {
		return err
	}
	h := img
	h.Meta = snap.Meta
	s.value = s.codec.AppendSnapshotHeader(s.value[:0], h)
	return b.Set(snapshotKey(index), s.value, nil)
}

func (s *Store) putEntry(b *pebble.Batch, e paxos.Entry) error {
	s.key = appendNumberedKey(s.key[:0], entryTag, e.Slot)
	s.value = s.codec.AppendEntry(s.value[:0], e)
	return b.Set(s.key, s.value, nil)
}

// fail makes a write error sticky: after a failed commit the batch may be
// readable in Pebble's memtable without being durable, so no later read
// may be served.
func (s *Store) fail(op string, err error) error {
	s.err = pebbleError(err, op)
	return s.err
}

package pebblestore

import (
	"encoding/binary"
	"fmt"
	"math"

	"paxcron/storage"
)

// Key layout. Each kind of record owns one key range, told apart by a
// one-byte tag. Numbers after the tag are big-endian, so that byte order is
// numeric order and an iterator walks entries in slot order:
//
//	"C" + index (8 bytes) + n (8 bytes)
//	                         chunk n of the image of the snapshot at index,
//	                         in stores written before image files (images.go)
//	"S" + index (8 bytes)    the snapshot at index, as a header naming its
//	                         image file (or chunks under "C", or, in stores
//	                         written before chunks, as one whole record);
//	                         only the newest is kept
//	"e" + slot (8 bytes)     the entry accepted for slot
//	"h"                      the hard state (a single record)
//
// Values are records framed and checksummed by storage.Codec.
//
// A snapshot's image is kept in chunks of snapshotChunkBytes so that no
// step of writing or reading it copies, encodes or checksums the whole
// image at once. The Go runtime cannot preempt such a step (a memmove of
// 174 MiB, a checksum over it), and a collection that must stop the world
// meanwhile waits for it with every other goroutine stopped: in the scale
// benchmark (a million jobs) a replica's writer encoding its snapshot held
// one for 885 ms, long enough for a leader to lose its lease.
//
// The snapshot sorts before the entries on purpose. Its value was once
// one block of its own in an sstable, as large as the state (180 MB at a
// million jobs), and too large for the block cache. When the snapshot
// sorted after the entries ("s", which stores written before the change
// still hold until Open moves it), a read of entries newer than every
// flushed one ran past the last entry block onto it, and every such read
// loaded the whole block again: a leader sending accepts spent nine
// tenths of its CPU there. Reads of entries only move forward from a
// slot, and a backward read (the last entry) stops at the entries' lower
// bound.
const (
	snapshotChunkTag byte = 'C'
	snapshotTag      byte = 'S'
	entryTag         byte = 'e'
	hardStateTag     byte = 'h'
	// legacySnapshotTag is where stores written before the snapshot
	// moved kept it; Open moves it to snapshotTag.
	legacySnapshotTag byte = 's'

	numberedKeyBytes = 9
	chunkKeyBytes    = 17
)

var hardStateKey = []byte{hardStateTag}

// appendNumberedKey appends the key of the entry at slot or the snapshot at
// index (tag entryTag or snapshotTag) to dst.
func appendNumberedKey(dst []byte, tag byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, tag), n)
}

func entryKey(slot uint64) []byte { return appendNumberedKey(nil, entryTag, slot) }

func snapshotKey(index uint64) []byte { return appendNumberedKey(nil, snapshotTag, index) }

func legacySnapshotKey(index uint64) []byte { return appendNumberedKey(nil, legacySnapshotTag, index) }

// appendChunkKey appends the key of chunk n of the snapshot at index.
func appendChunkKey(dst []byte, index, n uint64) []byte {
	return binary.BigEndian.AppendUint64(appendNumberedKey(dst, snapshotChunkTag, index), n)
}

// chunksUpperBound is the first key above every chunk of the snapshots
// at index and below: the exclusive end of their range.
func chunksUpperBound(index uint64) []byte {
	if index == math.MaxUint64 {
		return tagUpperBound(snapshotChunkTag)
	}
	return appendNumberedKey(nil, snapshotChunkTag, index+1)
}

// parseChunkKey returns the index and chunk number in a chunk's key.
func parseChunkKey(key []byte) (index, n uint64, err error) {
	if len(key) != chunkKeyBytes || key[0] != snapshotChunkTag {
		return 0, 0, fmt.Errorf("%w: key %q in the %q range is not %d bytes long",
			storage.ErrCorrupt, key, snapshotChunkTag, chunkKeyBytes)
	}
	return binary.BigEndian.Uint64(key[1:9]), binary.BigEndian.Uint64(key[9:]), nil
}

// tagUpperBound returns the first key above every key of tag's range.
func tagUpperBound(tag byte) []byte { return []byte{tag + 1} }

// entryKeyAfter returns the first key above the entry at slot: the
// exclusive end of a range of entries up to and including slot.
func entryKeyAfter(slot uint64) []byte {
	if slot == math.MaxUint64 {
		return tagUpperBound(entryTag)
	}
	return entryKey(slot + 1)
}

// parseNumberedKey returns the slot or index in a key of tag's range.
func parseNumberedKey(tag byte, key []byte) (uint64, error) {
	if len(key) != numberedKeyBytes || key[0] != tag {
		return 0, fmt.Errorf("%w: key %q in the %q range is not %d bytes long",
			storage.ErrCorrupt, key, tag, numberedKeyBytes)
	}
	return binary.BigEndian.Uint64(key[1:]), nil
}

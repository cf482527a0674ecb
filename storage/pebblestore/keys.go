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
//	"h"                      the hard state (a single record)
//	"e" + slot (8 bytes)     the entry accepted for slot
//	"s" + index (8 bytes)    the snapshot at index; only the newest is kept
//
// Values are records framed and checksummed by storage.Codec.
const (
	hardStateTag byte = 'h'
	entryTag     byte = 'e'
	snapshotTag  byte = 's'

	numberedKeyBytes = 9
)

var hardStateKey = []byte{hardStateTag}

// appendNumberedKey appends the key of the entry at slot or the snapshot at
// index (tag entryTag or snapshotTag) to dst.
func appendNumberedKey(dst []byte, tag byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, tag), n)
}

func entryKey(slot uint64) []byte { return appendNumberedKey(nil, entryTag, slot) }

func snapshotKey(index uint64) []byte { return appendNumberedKey(nil, snapshotTag, index) }

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

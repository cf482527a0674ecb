package pebblestore

import (
	"bytes"
	"errors"
	"testing"

	"paxcron/storage"
)

// FuzzParseNumberedKey: a key read back from the store parses as an
// entry's slot or a snapshot's index only if it is exactly the key built
// for that number, and every other key is refused as ErrCorrupt.
func FuzzParseNumberedKey(f *testing.F) {
	f.Add(entryKey(1))
	f.Add(entryKey(1<<64 - 1))
	f.Add(snapshotKey(42))
	f.Add(hardStateKey)
	f.Add(entryKeyAfter(1<<64 - 1))
	f.Add(append(entryKey(7), 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, key []byte) {
		for _, tag := range []byte{entryTag, snapshotTag} {
			n, err := parseNumberedKey(tag, key)
			if err != nil {
				if !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("refused with %v, want ErrCorrupt", err)
				}
				continue
			}
			if again := appendNumberedKey(nil, tag, n); !bytes.Equal(again, key) {
				t.Fatalf("%x parsed as %c %d, whose key is %x", key, tag, n, again)
			}
		}
	})
}

package pebblestore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/paxos"
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

// FuzzReadImage: any bytes read as a snapshot image file, under any
// header, are either refused as ErrCorrupt or read as exactly the number
// of bytes its header says; a file written by the store reads back as
// the image it holds.
func FuzzReadImage(f *testing.F) {
	image := []byte("the state of a cron service at index 7, in chunks of 16 bytes")
	written := writtenImage(f, image)
	f.Add(written, uint64(len(image)), uint64(4))
	f.Add([]byte{}, uint64(0), uint64(0))
	f.Add([]byte{1, 0, 0, 0, 0}, uint64(1), uint64(1))
	f.Fuzz(func(t *testing.T, file []byte, size, chunks uint64) {
		fs := vfs.NewMem()
		w, err := fs.Create("image-1", vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(file); err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
		r, err := fs.Open("image-1")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		h := storage.SnapshotHeader{Meta: paxos.SnapshotMeta{Index: 7}, Size: size % (1 << 20), Chunks: chunks % 1024, File: 1}
		data, err := readImage(r, storage.NewCodec(), h)
		own := bytes.Equal(file, written) && h.Size == uint64(len(image)) && h.Chunks == 4
		switch {
		case err != nil && !errors.Is(err, storage.ErrCorrupt):
			t.Fatalf("refused with %v, want ErrCorrupt", err)
		case err == nil && uint64(len(data)) != h.Size:
			t.Fatalf("read %d bytes, the header says %d", len(data), h.Size)
		case own && (err != nil || !bytes.Equal(data, image)):
			t.Fatalf("the store's own file under its own header read back as %q (%v)", data, err)
		}
	})
}

// writtenImage is the image file a store with 16-byte chunks writes for
// image at index 7.
func writtenImage(tb testing.TB, image []byte) []byte {
	tb.Helper()
	fs := vfs.NewMem()
	s, err := Open("store", WithSnapshotChunkBytes(Options{FS: fs, Logger: quietLogger{}}, 16))
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	if _, err := s.writeImage(1, paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 7}, Data: image}); err != nil {
		tb.Fatal(err)
	}
	return readAll(tb, fs, s.imagePath(1))
}

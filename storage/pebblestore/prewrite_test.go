package pebblestore

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// scribblingFS's files overwrite what Write was given once they have
// copied it, as vfs.File's contract allows (Pebble's memory file system
// does so in invariant builds).
type scribblingFS struct{ vfs.FS }

func (fs scribblingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return scribblingFile{f}, err
}

type scribblingFile struct{ vfs.File }

func (f scribblingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	for i := range p {
		//lint:ignore SA1023 vfs.File.Write may modify its buffer, unlike io.Writer's; this one does, on purpose
		p[i] = 0xcc
	}
	return n, err
}

// A new WAL is written through with zeros, every byte of it, even on a
// file system whose Write scribbles on its buffer: Pebble reads zeros
// after a log's last record as its end, and anything else as a record
// to decode. The buffer was written again as it was left: a -race test's
// WALs held 0xCC-like bytes past their records.
func TestPrewrittenWALIsZerosWhateverWriteDoes(t *testing.T) {
	mem := vfs.NewMem()
	fs := prewrittenWALs{FS: scribblingFS{mem}, bytes: 600 << 10} // three buffers' worth
	f, err := fs.Create("000002.log", walCategory)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	b := readAll(t, mem, "000002.log")
	if len(b) != 600<<10 {
		t.Fatalf("the new WAL holds %d bytes, want %d", len(b), 600<<10)
	}
	if i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("the new WAL holds a byte other than zero at %d of %d", i, len(b))
	}
}

package server

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/pebblestore"
)

// A replica whose store is damaged does not start, and its error names
// the store's folder and what to do about it (the operator otherwise
// meets a line from deep inside Pebble).
func TestDamagedStoreIsNamedAtStart(t *testing.T) {
	dataDir := t.TempDir()
	dir := filepath.Join(dataDir, "store")
	st, err := pebblestore.Open(dir, pebblestore.Options{FS: vfs.Default})
	if err != nil {
		t.Fatal(err)
	}
	for slot := uint64(1); slot <= 400; slot++ {
		e := paxos.Entry{Slot: slot, Kind: paxos.EntryCommand, Data: make([]byte, 256)}
		if err := st.Save(storage.Update{Entries: []paxos.Entry{e}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	damageEarlyInLargestWAL(t, dir)

	_, err = New(testConfig(t, 1, dataDir, newFakeNomad()), false)
	if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "empty store rejoins") {
		t.Fatalf("New on a damaged store: %v; want ErrCorrupt, naming %s and what to do", err, dir)
	}
}

// damageEarlyInLargestWAL flips a byte a hundredth of the way into the
// records of the WAL in dir that holds the most.
func damageEarlyInLargestWAL(t *testing.T, dir string) {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var path string
	var data []byte
	var written int
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if end := len(bytes.TrimRight(b, "\x00")); end > written {
			path, data, written = p, b, end
		}
	}
	if written < 3*32<<10 {
		t.Fatalf("the largest WAL in %s holds %d bytes; want several blocks", dir, written)
	}
	data[written/100] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

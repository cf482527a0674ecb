package pebblestore

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/paxos"
	"paxcron/storage"
)

// diskUse counts the files under dir and their bytes.
func diskUse(t *testing.T, dir string) (files int, bytes int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files++
		bytes += info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, bytes
}

// TestLongLogKeepsItsDiskBounded: a log appended and snapshotted for a
// long time keeps a disk footprint set by what is live (the newest
// snapshot and the entries after it), not by the entries ever written:
// superseded image files are deleted, the log below a snapshot is
// deleted and compacted away, and WAL files are recycled.
func TestLongLogKeepsItsDiskBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a few thousand synced writes")
	}
	dir := t.TempDir()
	s, err := Open(dir, Options{FS: vfs.Default, MemTableBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, 1024)
	image := make([]byte, 64<<10)
	slot := uint64(0)
	round := func() {
		es := make([]paxos.Entry, 200)
		for i := range es {
			slot++
			es[i] = paxos.Entry{Slot: slot, Ballot: paxos.Ballot{Round: 1, Replica: 1}, Kind: paxos.EntryCommand, Data: data}
		}
		if err := s.Save(storage.Update{Entries: es}); err != nil {
			t.Fatal(err)
		}
		snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: slot, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}}, Data: image}
		if err := s.Save(storage.Update{Snapshot: &snap, TailSlots: 50}); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		round()
	}
	files1, bytes1 := diskUse(t, dir)
	for range 500 {
		round()
	}
	files2, bytes2 := diskUse(t, dir)
	t.Logf("after 50 rounds: %d files, %d bytes; after 550: %d files, %d bytes", files1, bytes1, files2, bytes2)
	if files2 > files1+8 || bytes2 > 2*bytes1 {
		t.Fatalf("the store grew with the entries ever written")
	}
}

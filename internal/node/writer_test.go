package node

import (
	"testing"
	"time"

	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/memstore"
)

// TestWriterDoesNotWaitForALocalSnapshot: the writes queued after a local
// snapshot are saved and reported while it is still being encoded; a
// write that carries the leader's snapshot waits until the local one is
// saved, so that the newer snapshot lands last.
func TestWriterDoesNotWaitForALocalSnapshot(t *testing.T) {
	n := &Node{}
	n.store = &countingStore{Store: memstore.New(), n: n}
	writer := n.writerFor(true).(queueWriter)
	go n.write()
	defer func() {
		close(n.writes)
		<-n.wrote
	}()
	entry := func(slot uint64) storage.Update {
		return storage.Update{Entries: []paxos.Entry{{Slot: slot, Ballot: paxos.Ballot{Round: 1, Replica: 1}, Kind: paxos.EntryCommand, Data: []byte{byte(slot)}}}}
	}
	expect := func(what string, ch chan error) {
		t.Helper()
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not reported", what)
		}
	}
	quiet := func(what string, ch chan error) {
		t.Helper()
		select {
		case err := <-ch:
			t.Fatalf("%s reported (%v) too early", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}

	for slot := uint64(1); slot <= 4; slot++ {
		writer.Write(entry(slot))
	}
	release := make(chan struct{})
	local := &paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 3}}
	writer.WriteSnapshot(storage.Update{Snapshot: local, TailSlots: 1}, func() ([]byte, error) {
		<-release
		return []byte("local state at 3"), nil
	})
	writer.Write(entry(5))
	for i := range 5 {
		expect("entry write "+string(rune('1'+i)), n.written)
	}
	quiet("the local snapshot, still encoding,", n.snapWritten)

	leaders := &paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 10}, Data: []byte("leader's state at 10")}
	writer.Write(storage.Update{Snapshot: leaders})
	writer.Write(entry(11))
	quiet("the leader's snapshot, behind the local one,", n.written)

	close(release)
	expect("the local snapshot", n.snapWritten)
	expect("the leader's snapshot", n.written)
	expect("entry write 11", n.written)
	snap, err := n.store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Meta.Index != 10 || string(snap.Data) != "leader's state at 10" {
		t.Fatalf("stored snapshot at %d (%q); want the leader's, at 10", snap.Meta.Index, snap.Data)
	}
	if last, err := n.store.LastSlot(); err != nil || last != 11 {
		t.Fatalf("last slot %d (%v), want 11", last, err)
	}
}

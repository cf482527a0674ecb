package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"paxcron/cron/replica"
	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/memstore"
)

// startWriter runs a node's writer goroutine alone over store, behind
// the node's counting store, until the test ends.
func startWriter(t *testing.T, store storage.Store) (*Node, queueWriter) {
	n := &Node{}
	n.store = &countingStore{Store: store, n: n}
	writer := n.writerFor(true).(queueWriter)
	go n.write()
	t.Cleanup(func() {
		close(n.writes)
		<-n.wrote
	})
	return n, writer
}

// entry is the write of one command at slot.
func entry(slot uint64) storage.Update {
	return storage.Update{Entries: []paxos.Entry{{Slot: slot, Ballot: paxos.Ballot{Round: 1, Replica: 1}, Kind: paxos.EntryCommand, Data: []byte{byte(slot)}}}}
}

// TestWriterDoesNotWaitForALocalSnapshot: the writes queued after a local
// snapshot are saved and reported while it is still being encoded; a
// write that carries the leader's snapshot waits until the local one is
// saved, so that the newer snapshot lands last.
func TestWriterDoesNotWaitForALocalSnapshot(t *testing.T) {
	n, writer := startWriter(t, memstore.New())
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

// stagingStore is a store that can stage, whose staging waits for
// release, and which records the order of stagings and saves of
// snapshots.
type stagingStore struct {
	storage.Store
	release chan struct{}
	mu      sync.Mutex
	events  []string
}

func (s *stagingStore) note(event string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, event)
}

func (s *stagingStore) StageSnapshot(snap paxos.Snapshot) error {
	s.note(fmt.Sprintf("stage %d %q", snap.Meta.Index, snap.Data))
	<-s.release
	return nil
}

func (s *stagingStore) Save(u storage.Update) error {
	if u.Snapshot != nil {
		s.note(fmt.Sprintf("save %d %q", u.Snapshot.Meta.Index, u.Snapshot.Data))
	}
	return s.Store.Save(u)
}

// TestLocalSnapshotIsStagedOffTheWriter: a local snapshot's image is
// staged on the encode's goroutine, the node's counting store passing it
// through, while the writes queued behind it are saved; its Save comes
// after, with the image staged.
func TestLocalSnapshotIsStagedOffTheWriter(t *testing.T) {
	inner := &stagingStore{Store: memstore.New(), release: make(chan struct{})}
	n, writer := startWriter(t, inner)
	writer.Write(entry(1))
	writer.WriteSnapshot(storage.Update{Snapshot: &paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 1}}}, func() ([]byte, error) {
		return []byte("state at 1"), nil
	})
	writer.Write(entry(2))
	writer.Write(entry(3))
	for i := range 3 {
		select {
		case err := <-n.written:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("entry write %d not reported while the image was being staged", i+1)
		}
	}
	close(inner.release)
	select {
	case err := <-n.snapWritten:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the local snapshot was not reported saved")
	}
	inner.mu.Lock()
	defer inner.mu.Unlock()
	want := []string{`stage 1 "state at 1"`, `save 1 "state at 1"`}
	if !slices.Equal(inner.events, want) {
		t.Fatalf("events %q, want %q", inner.events, want)
	}
}

// heldStore holds its first Save until release is closed.
type heldStore struct {
	storage.Store
	once    sync.Once
	holding chan struct{}
	release chan struct{}
}

func (s *heldStore) Save(u storage.Update) error {
	s.once.Do(func() {
		close(s.holding)
		<-s.release
	})
	return s.Store.Save(u)
}

// TestWriterSavesEveryWritePastAFullBatch: while one sync is slow, more
// writes queue than one batch holds (the loop's maxWritesInFlight is a
// bound on what it takes, not on what a completion's Process may queue).
// Every one of them is saved and reported, in order; the writer once read
// the write after a full batch and then neither saved nor reported it, so
// the next write's completion was taken for its own and the replica acked
// an entry it never saved.
func TestWriterSavesEveryWritePastAFullBatch(t *testing.T) {
	store := &heldStore{Store: memstore.New(), holding: make(chan struct{}), release: make(chan struct{})}
	n, writer := startWriter(t, store)
	writer.Write(entry(1))
	<-store.holding
	last := uint64(1 + maxWritesInFlight + 2)
	for slot := uint64(2); slot <= last; slot++ {
		writer.Write(entry(slot))
	}
	close(store.release)
	for done := uint64(1); done <= last; done++ {
		select {
		case err := <-n.written:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d writes reported done", done-1, last)
		}
	}
	es, err := store.Entries(1, last+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != int(last) {
		t.Fatalf("%d of %d entries saved", len(es), last)
	}
	for i, e := range es {
		if e.Slot != uint64(i+1) {
			t.Fatalf("entry %d is slot %d: slot %d was never saved", i, e.Slot, i+1)
		}
	}
}

// TestNoMessageSteppedWhileTheWriterIsFull: once maxWritesInFlight
// writes wait for the writer, the loop takes no Ready, and it must not
// step peers' messages into the core either: nothing they change can be
// written or answered, so the core's unwritten state would grow with
// every accept a leader resends, for as long as the disk stalls. They
// wait in the inbox (Deliver drops what does not fit) and are stepped
// once writes complete.
func TestNoMessageSteppedWhileTheWriterIsFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &heldStore{Store: memstore.New(), holding: make(chan struct{}), release: make(chan struct{})}
		const inbox = 16
		n, err := New(Config{
			ID: 2, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}, Store: store,
			Send: func(paxos.Message) {}, TickInterval: 10 * time.Millisecond, Timing: paxos.DefaultTiming(),
			Limits: paxos.DefaultLimits(), InboxMessages: inbox,
		})
		if err != nil {
			t.Fatal(err)
		}
		n.Start()
		defer n.Stop()
		release := sync.OnceFunc(func() { close(store.release) })
		defer release() // before Stop, which waits for the writer
		ballot := paxos.Ballot{Round: 1, Replica: 1}
		accept := func(slot uint64) paxos.Message {
			return paxos.Message{Type: paxos.MsgAccept, From: 1, To: 2, Ballot: ballot, Start: 1,
				Entries: []paxos.Entry{{Slot: slot, Ballot: ballot, Kind: paxos.EntryCommand, Data: []byte{byte(slot)}}}}
		}
		ctx := context.Background()
		var inFlight int
		var last uint64
		look := func() {
			t.Helper()
			if err := n.Call(ctx, func(r *replica.Replica) { inFlight, last = r.InFlight(), r.Node().Status().LastSlot }); err != nil {
				t.Fatal(err)
			}
		}
		// One accept a turn, each turn's Ready a write, until the writer,
		// stuck in its first Save, holds as many as the loop hands it.
		for slot := uint64(1); inFlight < maxWritesInFlight; slot++ {
			if slot > 2*maxWritesInFlight {
				t.Fatalf("%d writes in flight after %d accepts", inFlight, slot-1)
			}
			if err := n.Call(ctx, func(r *replica.Replica) { _ = r.Node().Step(accept(slot)) }); err != nil {
				t.Fatal(err)
			}
			look()
		}
		full := last
		for slot := full + 1; slot <= full+4*inbox; slot++ {
			n.Deliver(accept(slot))
		}
		synctest.Wait()
		look()
		if last != full {
			t.Fatalf("the core took accepts up to slot %d (from %d) with %d writes in flight", last, full, inFlight)
		}
		release()
		synctest.Wait()
		look()
		if last != full+inbox || inFlight != 0 {
			t.Fatalf("after the writes: last slot %d, %d writes in flight; want %d (the inbox's), 0", last, inFlight, full+inbox)
		}
		if st := n.Status(); st.Err != nil {
			t.Fatal(st.Err)
		}
	})
}

package replica

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/memstore"
)

// listMachine applies commands into a list.
type listMachine struct{ cmds []string }

func (m *listMachine) Apply(_ uint64, cmd []byte) { m.cmds = append(m.cmds, string(cmd)) }
func (m *listMachine) Snapshot() ([]byte, error)  { return []byte(strings.Join(m.cmds, ",")), nil }
func (m *listMachine) Restore(data []byte) error {
	m.cmds = nil
	if len(data) > 0 {
		m.cmds = strings.Split(string(data), ",")
	}
	return nil
}

func newSolo(t *testing.T, store *memstore.Store, policy SnapshotPolicy) (*Replica, *listMachine) {
	t.Helper()
	sm := &listMachine{}
	r, err := New(Config{
		ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1}},
		Timing: paxos.DefaultTiming(), Limits: paxos.DefaultLimits(), Rand: rand.New(rand.NewPCG(1, 1)),
		Store: store, StateMachine: sm, Send: func(paxos.Message) { t.Fatal("a lone replica sent a message") },
		Snapshots: policy, Observer: NopObserver{},
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 * paxos.DefaultTiming().ElectionTicks {
		if r.Node().Status().Role == paxos.Leader {
			return r, sm
		}
		if err := r.Tick(); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("a lone replica did not become leader")
	return nil, nil
}

func propose(t *testing.T, r *Replica, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := r.Propose([]byte(c)); err != nil {
			t.Fatal(err)
		}
		if err := r.Process(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSnapshotPolicyAndRestart(t *testing.T) {
	store := memstore.New()
	r, sm := newSolo(t, store, SnapshotPolicy{EveryEntries: 4})
	propose(t, r, "a", "b", "c", "d", "e", "f", "g")
	if got := strings.Join(sm.cmds, ","); got != "a,b,c,d,e,f,g" {
		t.Fatalf("applied %q", got)
	}
	snap, err := store.Snapshot()
	if err != nil || snap.Meta.Index == 0 {
		t.Fatalf("no snapshot taken: %v %+v", err, snap.Meta)
	}
	if _, err := store.Entries(1, 2, 1<<20); !errors.Is(err, paxos.ErrCompacted) {
		t.Fatalf("log below the snapshot not compacted: %v", err)
	}
	// Restart: snapshot plus the log after it rebuild the same state.
	store.Crash()
	r2, sm2 := newSolo(t, store, SnapshotPolicy{EveryEntries: 4})
	if got := strings.Join(sm2.cmds, ","); got != "a,b,c,d,e,f,g" {
		t.Fatalf("after restart applied %q", got)
	}
	propose(t, r2, "h")
	if got := strings.Join(sm2.cmds, ","); got != "a,b,c,d,e,f,g,h" {
		t.Fatalf("after restart and a proposal: %q", got)
	}
}

// A snapshot keeps the policy's tail of the log below it, readable as
// entries; the next snapshot trims it to its own tail, and a restart reads
// the tail back from the store.
func TestSnapshotKeepsTail(t *testing.T) {
	store := memstore.New()
	policy := SnapshotPolicy{EveryEntries: 4, TailEntries: 2}
	r, _ := newSolo(t, store, policy)
	tail := func(when string) uint64 {
		t.Helper()
		snap, err := store.Snapshot()
		if err != nil || snap.Meta.Index < 3 {
			t.Fatalf("%s: no snapshot taken: %v %+v", when, err, snap.Meta)
		}
		first, err := store.FirstSlot()
		if err != nil || first != snap.Meta.Index-1 {
			t.Fatalf("%s: FirstSlot %d, %v; want the snapshot index %d less a tail of 2", when, first, err, snap.Meta.Index)
		}
		es, err := store.Entries(first, snap.Meta.Index+1, 1<<20)
		if err != nil || len(es) != 2 || es[0].Slot != first {
			t.Fatalf("%s: the tail reads %v, %v", when, es, err)
		}
		if _, err := store.Entries(first-1, first, 1<<20); !errors.Is(err, paxos.ErrCompacted) {
			t.Fatalf("%s: slot %d below the tail: %v, want ErrCompacted", when, first-1, err)
		}
		return snap.Meta.Index
	}
	propose(t, r, "a", "b", "c", "d")
	first := tail("first snapshot")
	propose(t, r, "e", "f", "g", "h")
	if second := tail("second snapshot"); second <= first {
		t.Fatalf("no second snapshot: %d then %d", first, second)
	}
	store.Crash()
	r2, sm2 := newSolo(t, store, policy)
	propose(t, r2, "i")
	if got := strings.Join(sm2.cmds, ","); got != "a,b,c,d,e,f,g,h,i" {
		t.Fatalf("after restart and a proposal: %q", got)
	}
}

func TestSnapshotByTicks(t *testing.T) {
	store := memstore.New()
	r, _ := newSolo(t, store, SnapshotPolicy{EveryTicks: 5})
	propose(t, r, "a")
	for range 6 {
		if err := r.Tick(); err != nil {
			t.Fatal(err)
		}
	}
	if snap, _ := store.Snapshot(); snap.Meta.Index < 2 {
		t.Fatalf("no snapshot after 6 ticks: index %d", snap.Meta.Index)
	}
}

func TestConfigRequiresDependencies(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("got %v, want ErrConfig", err)
	}
}

func TestCrashedWriteHaltsReplica(t *testing.T) {
	store := memstore.New()
	r, _ := newSolo(t, store, SnapshotPolicy{})
	store.CrashDuringNextSave()
	if _, err := r.Propose([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := r.Process(); !errors.Is(err, memstore.ErrCrashed) {
		t.Fatalf("got %v, want the write's crash", err)
	}
}

// A replica that lost its disk must have its rebuilding mark on disk before
// New returns: a crash right after must not bring it back as a voter.
func TestRebuildingMarkDurableAtStart(t *testing.T) {
	store := memstore.New()
	_, err := New(Config{
		ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}},
		Timing: paxos.DefaultTiming(), Limits: paxos.DefaultLimits(), Rand: rand.New(rand.NewPCG(1, 1)),
		Store: store, StateMachine: &listMachine{}, Send: func(paxos.Message) {},
		Observer: NopObserver{}, Rebuilding: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	store.Crash() // power loss right after start
	hs, _, err := store.InitialState()
	if err != nil || !hs.Rebuilding {
		t.Fatalf("rebuilding mark lost in a crash right after start: %+v, %v", hs, err)
	}
}

// queueWriter holds writes until the test completes them.
type queueWriter struct {
	store *memstore.Store
	queue []storage.Update
}

func (w *queueWriter) Write(u storage.Update) { w.queue = append(w.queue, u) }

// completeAll makes every queued write durable, in order, and reports each.
func (w *queueWriter) completeAll(t *testing.T, r *Replica) {
	t.Helper()
	for len(w.queue) > 0 {
		u := w.queue[0]
		w.queue = w.queue[1:]
		if !u.IsEmpty() {
			if err := w.store.Save(u); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.WriteDone(nil); err != nil {
			t.Fatal(err)
		}
	}
}

// completer is a test Writer that completes what is queued on demand.
type completer interface {
	Writer
	completeAll(t *testing.T, r *Replica)
}

// newLoneLeaderWith is a lone replica with writer w, snapshotting every
// 3 entries, once it leads.
func newLoneLeaderWith(t *testing.T, store *memstore.Store, sm StateMachine, w completer, obs Observer) *Replica {
	t.Helper()
	r, err := New(Config{
		ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1}},
		Timing: paxos.DefaultTiming(), Limits: paxos.DefaultLimits(), Rand: rand.New(rand.NewPCG(1, 1)),
		Store: store, StateMachine: sm, Send: func(paxos.Message) {},
		Snapshots: SnapshotPolicy{EveryEntries: 3}, Observer: obs, Writer: w,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; r.Node().Status().Role != paxos.Leader; i++ {
		if i > 200 {
			t.Fatal("no leader")
		}
		if err := r.Tick(); err != nil {
			t.Fatal(err)
		}
		w.completeAll(t, r)
	}
	return r
}

// With a Writer, a lone leader chooses (and so applies) nothing before its
// own write is done, since its vote is the quorum; it keeps taking
// proposals meanwhile, and snapshots go through the same queue.
func TestAsyncWriter(t *testing.T) {
	store := memstore.New()
	w := &queueWriter{store: store}
	sm := &listMachine{}
	r := newLoneLeaderWith(t, store, sm, w, NopObserver{})
	for _, c := range []string{"a", "b", "c", "d"} {
		if _, err := r.Propose([]byte(c)); err != nil {
			t.Fatal(err)
		}
		if err := r.Process(); err != nil {
			t.Fatal(err)
		}
	}
	if len(sm.cmds) != 0 || r.InFlight() == 0 {
		t.Fatalf("applied %v with %d writes in flight; want nothing applied before the writes", sm.cmds, r.InFlight())
	}
	w.completeAll(t, r)
	w.completeAll(t, r) // the snapshot queued behind them
	if got := strings.Join(sm.cmds, ","); got != "a,b,c,d" {
		t.Fatalf("applied %q", got)
	}
	if snap, _ := store.Snapshot(); snap.Meta.Index < 3 {
		t.Fatalf("snapshot through the writer not saved: index %d", snap.Meta.Index)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("WriteDone with nothing in flight did not panic")
		}
	}()
	_ = r.WriteDone(nil)
}

// TestSnapshotWaitsForLogAsLargeAsState: with LogPerState, a large state
// is snapshotted only once the log since its last snapshot is as large.
func TestSnapshotWaitsForLogAsLargeAsState(t *testing.T) {
	store := memstore.New()
	r, _ := newSolo(t, store, SnapshotPolicy{EveryEntries: 2, LogPerState: 1})
	snapIndex := func() uint64 {
		t.Helper()
		s, err := store.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return s.Meta.Index
	}
	big := strings.Repeat("x", 1000)
	propose(t, r, big, big)
	if err := r.TakeSnapshot(); err != nil { // a state of about 2 KB
		t.Fatal(err)
	}
	first := snapIndex()
	if first == 0 {
		t.Fatal("no first snapshot")
	}
	for range 10 {
		propose(t, r, "c") // EveryEntries is met, but 10 bytes of log < 2 KB of state
	}
	if got := snapIndex(); got != first {
		t.Fatalf("snapshot at %d, want none after %d: the log is smaller than the state", got, first)
	}
	propose(t, r, big, big, big)
	if got := snapIndex(); got <= first {
		t.Fatalf("no snapshot once the log passed the state: still at %d", got)
	}
}

func TestCurrentSnapshotSavesNothing(t *testing.T) {
	sm := &listMachine{}
	store := memstore.New()
	r, err := New(Config{
		ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1}}, Timing: paxos.DefaultTiming(),
		Limits: paxos.DefaultLimits(), Rand: rand.New(rand.NewPCG(1, 1)), Store: store, StateMachine: sm,
		Send: func(paxos.Message) {}, Observer: NopObserver{},
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := r.CurrentSnapshot()
	if err != nil || snap.Meta.Index != r.Applied() || len(snap.Meta.Membership.Voters) != 1 {
		t.Fatalf("CurrentSnapshot: %+v, %v", snap.Meta, err)
	}
	if stored, _ := store.Snapshot(); stored.Meta.Index != 0 {
		t.Fatalf("CurrentSnapshot saved a snapshot at %d", stored.Meta.Index)
	}
}

// A bounded Process applies at most about MaxApplyPerProcess entries and
// leaves the rest for the next, which HasWork announces: a restarted
// replica with a long log to apply takes many short turns, in order.
func TestProcessBoundsItsApplies(t *testing.T) {
	store := memstore.New()
	r, _ := newSolo(t, store, SnapshotPolicy{})
	var want []string
	for i := range 100 {
		want = append(want, string(rune('a'+i%26))+strings.Repeat("x", i/26))
	}
	propose(t, r, want...)
	store.Crash()

	limits := paxos.DefaultLimits()
	limits.MaxApplyEntries = 4 // a Ready's Committed; the bound is checked between Readys
	sm := &listMachine{}
	r2, err := New(Config{
		ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1}},
		Timing: paxos.DefaultTiming(), Limits: limits, Rand: rand.New(rand.NewPCG(1, 1)),
		Store: store, StateMachine: sm, Send: func(paxos.Message) { t.Fatal("a lone replica sent a message") },
		Observer: NopObserver{}, MaxApplyPerProcess: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	chosen := r2.Node().Status().Chosen
	calls := 0
	for r2.HasWork() {
		before := r2.Applied()
		if err := r2.Process(); err != nil {
			t.Fatal(err)
		}
		calls++
		// The bound is checked between Readys of at most 4 entries.
		if got := r2.Applied() - before; got == 0 || got > 10+4-1 {
			t.Fatalf("Process %d applied %d entries, want 1 to 13", calls, got)
		}
	}
	// Slot 1 is the leader's no-op; the store knows all but the last
	// few slots chosen (the rest a new ballot will choose again).
	if chosen < 90 || r2.Applied() != chosen || calls < int(chosen)/13 {
		t.Fatalf("applied %d of %d chosen in %d calls; want all, at most 13 a call", r2.Applied(), chosen, calls)
	}
	if got := strings.Join(sm.cmds, ","); got != strings.Join(want[:chosen-1], ",") {
		t.Fatalf("applied %q", got)
	}
}

// fakeSnapshots is a store whose Snapshot answers what it is told.
type fakeSnapshots struct {
	storage.Store
	snap  paxos.Snapshot
	err   error
	reads int
}

func (f *fakeSnapshots) Snapshot() (paxos.Snapshot, error) {
	f.reads++
	return f.snap, f.err
}

// Reads of the snapshot for the core start in the background: the first
// ask finds it unavailable, the read is started once however often the
// core asks meanwhile, the snapshot read is handed over once, and a later
// ask reads again; a failed read is handed over as the error.
func TestSnapshotReadsInTheBackground(t *testing.T) {
	store := &fakeSnapshots{Store: memstore.New(), snap: paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 7}, Data: []byte("state")}}
	var started []func()
	s := &snapshotReads{Store: store, start: func(read func()) { started = append(started, read) }}
	ask := func(wantIndex uint64, wantErr error) {
		t.Helper()
		snap, err := s.Snapshot()
		if !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) || snap.Meta.Index != wantIndex {
			t.Fatalf("Snapshot = index %d, %v; want index %d, %v", snap.Meta.Index, err, wantIndex, wantErr)
		}
	}
	ask(0, paxos.ErrSnapshotTemporarilyUnavailable)
	ask(0, paxos.ErrSnapshotTemporarilyUnavailable)
	if len(started) != 1 || store.reads != 0 {
		t.Fatalf("%d reads started, %d done; want 1 started, none done yet", len(started), store.reads)
	}
	started[0]()
	ask(7, nil)
	ask(0, paxos.ErrSnapshotTemporarilyUnavailable) // handed over once: a new read
	if len(started) != 2 {
		t.Fatalf("%d reads started, want 2", len(started))
	}
	store.err = errors.New("disk on fire")
	started[1]()
	snap, err := s.Snapshot()
	if err == nil || err.Error() != "disk on fire" || snap.Meta.Index != 0 {
		t.Fatalf("after a failed read: %d, %v; want the read's error", snap.Meta.Index, err)
	}
	ask(0, paxos.ErrSnapshotTemporarilyUnavailable)
}

// snapQueueWriter is a queueWriter that also takes local snapshots, held
// until the test saves them.
type snapQueueWriter struct {
	queueWriter
	snaps []heldSnapshot
}

type heldSnapshot struct {
	u      storage.Update
	encode func() ([]byte, error)
}

func (w *snapQueueWriter) WriteSnapshot(u storage.Update, encode func() ([]byte, error)) {
	w.snaps = append(w.snaps, heldSnapshot{u, encode})
}

// freezingMachine is a listMachine that freezes its state for an encode
// later.
type freezingMachine struct{ listMachine }

func (m *freezingMachine) FreezeSnapshot() func() ([]byte, error) {
	frozen := strings.Join(m.cmds, ",")
	return func() ([]byte, error) { return []byte(frozen), nil }
}

type takenObserver struct {
	NopObserver
	taken []uint64
}

func (o *takenObserver) SnapshotTaken(index uint64) { o.taken = append(o.taken, index) }

// TestLocalSnapshotCompletesApart: a local snapshot handed to a
// SnapshotWriter stays out of the writes' order: the writes after it
// complete while it is held, no second one is taken meanwhile, and its
// own completion (SnapshotWritten) reports it taken.
func TestLocalSnapshotCompletesApart(t *testing.T) {
	store := memstore.New()
	w := &snapQueueWriter{queueWriter: queueWriter{store: store}}
	sm := &freezingMachine{}
	obs := &takenObserver{}
	r := newLoneLeaderWith(t, store, sm, w, obs)
	proposeAll := func(cmds ...string) {
		t.Helper()
		for _, c := range cmds {
			propose(t, r, c)
			w.completeAll(t, r)
		}
	}
	proposeAll("a", "b", "c", "d")
	if len(w.snaps) != 1 {
		t.Fatalf("%d local snapshots handed out after 4 commands, want 1", len(w.snaps))
	}
	// Past the policy's count again, with the first still held: the
	// writes complete, and no second snapshot is taken.
	proposeAll("e", "f", "g", "h")
	if got := strings.Join(sm.cmds, ","); got != "a,b,c,d,e,f,g,h" {
		t.Fatalf("applied %q while the snapshot is held", got)
	}
	if len(w.snaps) != 1 || len(obs.taken) != 0 || r.InFlight() != 0 {
		t.Fatalf("%d snapshots handed out, %v reported taken, %d writes in flight; want 1, none, 0", len(w.snaps), obs.taken, r.InFlight())
	}
	held := w.snaps[0]
	data, err := held.encode()
	if err != nil {
		t.Fatal(err)
	}
	held.u.Snapshot.Data = data
	if err := r.SnapshotWritten(store.Save(held.u)); err != nil {
		t.Fatal(err)
	}
	snap, err := store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.taken) != 1 || obs.taken[0] != snap.Meta.Index || string(snap.Data) != strings.Join(sm.cmds[:len(strings.Split(string(snap.Data), ","))], ",") {
		t.Fatalf("taken %v; stored snapshot at %d holds %q", obs.taken, snap.Meta.Index, snap.Data)
	}
	// The next one may now be taken.
	proposeAll("i")
	if len(w.snaps) != 2 {
		t.Fatalf("%d local snapshots handed out once the first was saved and more applied, want 2", len(w.snaps))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second SnapshotWritten for one snapshot did not panic")
		}
	}()
	_ = r.SnapshotWritten(nil)
	_ = r.SnapshotWritten(nil)
}

// orderWriter is a queueWriter that records, beside the messages its
// replica sent, when a write with entries was handed over.
type orderWriter struct {
	queueWriter
	events []string
}

func (w *orderWriter) Write(u storage.Update) {
	if u.IsEmpty() {
		w.events = append(w.events, "empty write")
	} else {
		w.events = append(w.events, "write")
	}
	w.queueWriter.Write(u)
}

// A leader hands its write to the Writer between its accepts: each wakes
// a goroutine in the node, and Go runs the one woken last first, then the
// others in order, so the accepts, which the commit waits for, leave
// before the leader's own sync starts. Its commit, which has nothing to
// write, is applied without a trip through the Writer.
func TestWriteQueuedBetweenAccepts(t *testing.T) {
	voters := paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}
	var wire []paxos.Message
	reps := map[paxos.ReplicaID]*Replica{}
	writers := map[paxos.ReplicaID]*orderWriter{}
	for _, id := range voters.Voters {
		w := &orderWriter{queueWriter: queueWriter{store: memstore.New()}}
		r, err := New(Config{
			ID: id, Membership: voters,
			Timing: paxos.DefaultTiming(), Limits: paxos.DefaultLimits(), Rand: rand.New(rand.NewPCG(uint64(id), 1)),
			Store: w.store, StateMachine: &listMachine{}, Observer: NopObserver{}, Writer: w,
			Send: func(m paxos.Message) {
				w.events = append(w.events, m.Type.String())
				wire = append(wire, m)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		reps[id], writers[id] = r, w
	}
	settle := func() {
		t.Helper()
		for range 10000 {
			for id, w := range writers {
				w.completeAll(t, reps[id])
			}
			if len(wire) == 0 {
				return
			}
			m := wire[0]
			wire = wire[1:]
			if err := reps[m.To].Step(m); err != nil {
				t.Fatal(err)
			}
			if err := reps[m.To].Process(); err != nil {
				t.Fatal(err)
			}
		}
		t.Fatal("the three replicas did not settle")
	}
	var leader paxos.ReplicaID
	for i := 0; leader == 0; i++ {
		if i > 1000 {
			t.Fatal("no leader")
		}
		for _, id := range voters.Voters {
			if err := reps[id].Tick(); err != nil {
				t.Fatal(err)
			}
			if err := reps[id].Process(); err != nil {
				t.Fatal(err)
			}
			settle()
			if reps[id].Node().Status().Role == paxos.Leader {
				leader = id
			}
		}
	}
	w := writers[leader]
	w.events = nil
	applied := reps[leader].Applied()
	if _, err := reps[leader].Propose([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := reps[leader].Process(); err != nil {
		t.Fatal(err)
	}
	want := paxos.MsgAccept.String() + ",write," + paxos.MsgAccept.String()
	if got := strings.Join(w.events, ","); got != want {
		t.Fatalf("the leader's proposal went out as %q; want %q (the write handed over between the accepts)", got, want)
	}
	w.events = nil
	settle()
	if got := reps[leader].Applied(); got != applied+1 {
		t.Fatalf("the leader applied through %d after the proposal; want %d", got, applied+1)
	}
	if got := strings.Join(w.events, ","); got != "" {
		t.Fatalf("the leader's commit went through the Writer as %q; want nothing written", got)
	}
}

// A snapshot read that the core does not come back for (leadership lost
// while it ran, or the peer gone) is let go after maxHeldTicks of the
// replica's ticks; it used to stay in memory until the next transfer,
// which then sent it stale. One asked for in time is handed over.
func TestSnapshotReadNotAskedForIsLetGo(t *testing.T) {
	var started []func()
	r, err := New(Config{
		ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1}},
		Timing: paxos.DefaultTiming(), Limits: paxos.DefaultLimits(), Rand: rand.New(rand.NewPCG(1, 1)),
		Store: memstore.New(), StateMachine: &listMachine{}, Send: func(paxos.Message) {},
		Observer: NopObserver{}, ReadSnapshots: func(read func()) { started = append(started, read) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ask := func() (paxos.Snapshot, error) { return r.snapshotReads.Snapshot() }
	if _, err := ask(); !errors.Is(err, paxos.ErrSnapshotTemporarilyUnavailable) || len(started) != 1 {
		t.Fatalf("first ask: %v, %d reads started", err, len(started))
	}
	started[0]()
	for range maxHeldTicks {
		if err := r.Tick(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ask(); err != nil {
		t.Fatalf("asked within %d ticks: %v; want the read handed over", maxHeldTicks, err)
	}
	if _, err := ask(); !errors.Is(err, paxos.ErrSnapshotTemporarilyUnavailable) || len(started) != 2 {
		t.Fatalf("second ask: %v, %d reads started", err, len(started))
	}
	started[1]()
	for range maxHeldTicks + 1 {
		if err := r.Tick(); err != nil {
			t.Fatal(err)
		}
	}
	r.snapshotReads.mu.Lock()
	held := r.snapshotReads.read != nil
	r.snapshotReads.mu.Unlock()
	if held {
		t.Fatalf("a read left for %d ticks is still held", maxHeldTicks+1)
	}
	if _, err := ask(); !errors.Is(err, paxos.ErrSnapshotTemporarilyUnavailable) || len(started) != 3 {
		t.Fatalf("ask after the read was let go: %v, %d reads started; want a new read", err, len(started))
	}
}

package replica

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"paxcron/paxos"
	"paxcron/storage/memstore"
)

// decodingMachine is a listMachine that restores in two steps.
type decodingMachine struct{ listMachine }

func (m *decodingMachine) DecodeSnapshot(data []byte) (func(), error) {
	var decoded listMachine
	if err := decoded.Restore(data); err != nil {
		return nil, err
	}
	return func() { m.cmds = decoded.cmds }, nil
}

// trio is three replicas whose messages go through a queue the test
// delivers, with replica 3 cut off until joined.
type trio struct {
	t        *testing.T
	reps     [4]*Replica // by ID
	sms      [4]*decodingMachine
	queue    []paxos.Message
	isolated bool
	decodes  []func() // replica 3's decodes, held by the test
}

func newTrio(t *testing.T) *trio { return newTrioBounded(t, 0) }

// newTrioBounded is newTrio with replica 3's Processes bounded to
// maxApply entries (Config.MaxApplyPerProcess; 0: unbounded).
func newTrioBounded(t *testing.T, maxApply uint64) *trio {
	return newTrioWith(t, func(id paxos.ReplicaID, cfg *Config) {
		if id == 3 {
			cfg.MaxApplyPerProcess = maxApply
		}
	})
}

// newTrioWith is newTrio with each replica's Config changed by adjust
// before the replica starts.
func newTrioWith(t *testing.T, adjust func(paxos.ReplicaID, *Config)) *trio {
	tr := &trio{t: t, isolated: true}
	members := paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		tr.sms[id] = &decodingMachine{}
		cfg := Config{
			ID: id, Membership: members, Timing: paxos.DefaultTiming(), Limits: paxos.DefaultLimits(),
			Rand: rand.New(rand.NewPCG(uint64(id), 7)), Store: memstore.New(), StateMachine: tr.sms[id],
			Send:      func(m paxos.Message) { tr.queue = append(tr.queue, m) },
			Snapshots: SnapshotPolicy{EveryEntries: 5}, Observer: NopObserver{},
		}
		if id == 3 {
			cfg.DecodeSnapshots = func(decode func()) { tr.decodes = append(tr.decodes, decode) }
		}
		adjust(id, &cfg)
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tr.reps[id] = r
	}
	return tr
}

// deliver delivers every queued message (none to or from replica 3 while
// it is cut off) until none is left.
func (tr *trio) deliver() {
	tr.t.Helper()
	for len(tr.queue) > 0 {
		m := tr.queue[0]
		tr.queue = tr.queue[1:]
		if tr.isolated && (m.To == 3 || m.From == 3) {
			continue
		}
		if err := tr.reps[m.To].Step(m); err != nil {
			tr.t.Fatal(err)
		}
	}
}

func (tr *trio) tick() {
	tr.t.Helper()
	for id := 1; id <= 3; id++ {
		if err := tr.reps[id].Tick(); err != nil {
			tr.t.Fatal(err)
		}
	}
	tr.deliver()
}

func (tr *trio) leader() *Replica {
	for id := 1; id <= 3; id++ {
		if tr.reps[id].Node().Status().Role == paxos.Leader {
			return tr.reps[id]
		}
	}
	return nil
}

// TestSnapshotDecodedOffThread: a follower that receives the leader's
// snapshot decodes it off its thread (Config.DecodeSnapshots): meanwhile
// its state and Applied stay as they were, it keeps acknowledging, holds
// the entries chosen after the snapshot, and takes no snapshot of its
// own; once SnapshotDecoded, it holds the leader's state and has applied
// everything chosen.
func TestSnapshotDecodedOffThread(t *testing.T) {
	tr := newTrio(t)
	lead, follower := sendSnapshotToThree(t, tr)
	if follower.Applied() != 0 || len(tr.sms[3].cmds) != 0 {
		t.Fatalf("while decoding: applied %d, state %q; want nothing yet", follower.Applied(), tr.sms[3].cmds)
	}
	held := follower.HeldEntries() // what was chosen past the snapshot when it came
	// Chosen meanwhile: replica 3 acknowledges (its vote counts) and holds.
	for i := range 4 {
		propose(t, lead, fmt.Sprint("b", i))
		tr.deliver()
	}
	for i := 0; follower.HeldEntries() < held+4 && i < 50; i++ {
		tr.tick() // the chosen index reaches followers with the next accept or heartbeat
	}
	if follower.HeldEntries() < held+4 || follower.Applied() != 0 {
		t.Fatalf("after 4 more choices: held %d (%d before), applied %d; want them held and none applied", follower.HeldEntries(), held, follower.Applied())
	}
	if err := follower.TakeSnapshot(); err == nil {
		t.Fatal("a replica took a snapshot of a state it is replacing")
	}
	if err := follower.SnapshotDecoded(); err != nil || follower.Applied() != 0 {
		t.Fatalf("SnapshotDecoded before the decode ran: %v, applied %d; want no change", err, follower.Applied())
	}
	for _, decode := range tr.decodes {
		decode()
	}
	if err := follower.SnapshotDecoded(); err != nil {
		t.Fatal(err)
	}
	tr.tick()
	if follower.Applied() != lead.Applied() || !slices.Equal(tr.sms[3].cmds, tr.sms[lead.Node().ID()].cmds) {
		t.Fatalf("after the install: applied %d, state %q; the leader's %d, %q",
			follower.Applied(), tr.sms[3].cmds, lead.Applied(), tr.sms[lead.Node().ID()].cmds)
	}
	if follower.HeldEntries() != 0 {
		t.Fatalf("%d entries still held", follower.HeldEntries())
	}
}

// TestHeldEntriesAreAppliedWithinTheProcessBound: the entries held
// behind a decoding snapshot are applied, once it is installed, at most
// MaxApplyPerProcess at a time, the rest by later Processes (HasWork),
// as entries from the core are. SnapshotDecoded applied every one of
// them in one call, up to 100,000: at a million jobs about 1.7 s of the
// node's loop, past its MaxApplyPerTurn, with no heartbeat answered.
func TestHeldEntriesAreAppliedWithinTheProcessBound(t *testing.T) {
	const bound = 3
	tr := newTrioBounded(t, bound)
	lead, follower := sendSnapshotToThree(t, tr)
	for i := range 10 {
		propose(t, lead, fmt.Sprint("b", i))
		tr.deliver()
	}
	at := follower.restoring.meta.Index
	for i := 0; at+uint64(follower.HeldEntries()) < lead.Applied() && i < 50; i++ {
		tr.tick() // the chosen index reaches followers with the next accept or heartbeat
	}
	held := follower.HeldEntries()
	if held <= 2*bound {
		t.Fatalf("%d entries held behind the snapshot at %d; want more than %d", held, at, 2*bound)
	}
	for _, decode := range tr.decodes {
		decode()
	}
	if err := follower.SnapshotDecoded(); err != nil {
		t.Fatal(err)
	}
	if follower.Applied() > at+bound {
		t.Fatalf("SnapshotDecoded applied %d held entries of %d; want at most %d (MaxApplyPerProcess)",
			follower.Applied()-at, held, bound)
	}
	for i := 0; follower.HasWork(); i++ {
		if i > held {
			t.Fatalf("still work after %d Processes (applied %d, held %d)", i, follower.Applied(), follower.HeldEntries())
		}
		before := follower.Applied()
		if err := follower.Process(); err != nil {
			t.Fatal(err)
		}
		if follower.Applied()-before > bound {
			t.Fatalf("a Process applied %d entries; want at most %d", follower.Applied()-before, bound)
		}
	}
	if follower.Applied() != lead.Applied() || !slices.Equal(tr.sms[3].cmds, tr.sms[lead.Node().ID()].cmds) {
		t.Fatalf("after the install: applied %d, state %q; the leader's %d, %q",
			follower.Applied(), tr.sms[3].cmds, lead.Applied(), tr.sms[lead.Node().ID()].cmds)
	}
}

// appliedOrder records the value a replica applies at each slot, and the
// first slot not applied right after the one before it (or the snapshot
// restored before it).
type appliedOrder struct {
	NopObserver
	last    uint64
	values  map[uint64]string // by slot; empty for a no-op
	misstep error
}

func (o *appliedOrder) Restored(index uint64) { o.last = index }
func (o *appliedOrder) Applied(e paxos.Entry) {
	if e.Slot != o.last+1 && o.misstep == nil {
		o.misstep = fmt.Errorf("slot %d applied after %d", e.Slot, o.last)
	}
	o.last = e.Slot
	o.values[e.Slot] = string(e.Data)
}

// TestEntriesHeldBehindASlowDecode: while a follower decodes the
// leader's snapshot, the entries chosen meanwhile are held until it
// holds its bound (maxHeldWhileRestoring, lowered here); from then on it
// takes no Ready (HasWork is false though its core has one) and holds no
// more, while the others go on choosing. Once the decode is done, every
// held entry is applied in slot order, each once, as the leader applied
// it, and the follower then catches up to the leader's state.
func TestEntriesHeldBehindASlowDecode(t *testing.T) {
	const maxHeld = 40
	var orders [4]*appliedOrder
	tr := newTrioWith(t, func(id paxos.ReplicaID, cfg *Config) {
		orders[id] = &appliedOrder{values: map[uint64]string{}}
		cfg.Observer = orders[id]
	})
	lead, follower := sendSnapshotToThree(t, tr)
	follower.maxHeld = maxHeld
	at := follower.restoring.meta.Index
	// No more snapshots: the follower is to catch up with the entries its
	// core accepted while it took no Ready, not with a newer snapshot.
	for id := 1; id <= 3; id++ {
		tr.reps[id].policy = SnapshotPolicy{}
	}
	next := 0
	choose := func(n int) {
		t.Helper()
		for range n {
			propose(t, lead, fmt.Sprint("c", next))
			next++
			tr.deliver()
		}
		tr.tick() // the chosen index reaches followers with the next accept or heartbeat
	}
	for i := 0; follower.HeldEntries() < maxHeld; i++ {
		if i > 100 {
			t.Fatalf("%d entries held after %d chosen; want %d", follower.HeldEntries(), next, maxHeld)
		}
		choose(5)
	}
	held := follower.HeldEntries()
	for range 10 {
		if follower.HasWork() || follower.HeldEntries() != held || follower.Applied() != 0 {
			t.Fatalf("at its bound: work %t, held %d (%d at the bound), applied %d; want no work, no more held, none applied",
				follower.HasWork(), follower.HeldEntries(), held, follower.Applied())
		}
		choose(5)
	}
	if !follower.Node().HasReady() {
		t.Fatal("the follower's core has no Ready: the bound is not what holds it")
	}
	if lead.Applied() < at+uint64(held)+40 {
		t.Fatalf("the leader applied through %d; want the others to go on choosing past %d", lead.Applied(), at+uint64(held))
	}
	for _, decode := range tr.decodes {
		decode()
	}
	tr.decodes = nil
	if err := follower.SnapshotDecoded(); err != nil {
		t.Fatal(err)
	}
	if follower.Applied() != at+uint64(held) || follower.HeldEntries() != 0 {
		t.Fatalf("once decoded: applied through %d, %d still held; want through %d, none held",
			follower.Applied(), follower.HeldEntries(), at+uint64(held))
	}
	leadOrder, own := orders[lead.Node().ID()], orders[3]
	appliedAsLeader := func(through uint64) {
		t.Helper()
		if own.misstep != nil {
			t.Fatal(own.misstep)
		}
		for slot := at + 1; slot <= through; slot++ {
			got, ok := own.values[slot]
			if want := leadOrder.values[slot]; !ok || got != want {
				t.Fatalf("slot %d applied (%t) as %q; the leader applied %q", slot, ok, got, want)
			}
		}
	}
	appliedAsLeader(at + uint64(held))
	for i := 0; follower.Applied() < lead.Applied() || follower.HasWork(); i++ {
		if i > 500 {
			t.Fatalf("the follower did not catch up: applied %d, the leader %d", follower.Applied(), lead.Applied())
		}
		if err := follower.Process(); err != nil {
			t.Fatal(err)
		}
		tr.tick()
		if len(tr.decodes) > 0 {
			t.Fatalf("the follower was sent another snapshot, at applied %d", follower.Applied())
		}
	}
	appliedAsLeader(lead.Applied())
	if !slices.Equal(tr.sms[3].cmds, tr.sms[lead.Node().ID()].cmds) {
		t.Fatalf("the follower's state %q; the leader's %q", tr.sms[3].cmds, tr.sms[lead.Node().ID()].cmds)
	}
}

// snapshotEvents records the snapshots an observer hears of, in order.
type snapshotEvents struct {
	NopObserver
	events []string
}

func (o *snapshotEvents) Restored(index uint64) {
	o.events = append(o.events, fmt.Sprint("restored ", index))
}
func (o *snapshotEvents) SnapshotTaken(index uint64) {
	o.events = append(o.events, fmt.Sprint("taken ", index))
}

// A local snapshot queued through a plain Writer that completes after a
// newer snapshot from the leader was installed is not reported taken:
// it is no longer the replica's newest (as SnapshotWritten already held
// for a SnapshotWriter). It was, and the node's Status.SnapshotIndex
// went back from the leader's snapshot to the older local one.
func TestLocalSnapshotOvertakenByLeadersIsNotReportedTaken(t *testing.T) {
	tr := newTrio(t)
	store := memstore.New()
	w := &queueWriter{store: store}
	obs := &snapshotEvents{}
	r, err := New(Config{
		ID: 3, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}, Timing: paxos.DefaultTiming(),
		Limits: paxos.DefaultLimits(), Rand: rand.New(rand.NewPCG(3, 7)), Store: store, StateMachine: tr.sms[3],
		Send:      func(m paxos.Message) { tr.queue = append(tr.queue, m) },
		Snapshots: SnapshotPolicy{EveryEntries: 5}, Observer: obs, Writer: w,
		DecodeSnapshots: func(decode func()) { tr.decodes = append(tr.decodes, decode) },
	})
	if err != nil {
		t.Fatal(err)
	}
	tr.reps[3] = r
	for i := 0; tr.leader() == nil || tr.leader().Node().ID() == 3; i++ {
		if i > 500 {
			t.Fatal("no leader among replicas 1 and 2")
		}
		tr.tick()
	}
	lead := tr.leader()
	tr.isolated = false
	held := func() bool {
		for _, q := range r.inflight {
			if q.ready == nil {
				return true
			}
		}
		return false
	}
	// Replica 3 catches up, then follows with its writes held until it
	// has queued a local snapshot.
	for i := 0; r.Applied() == 0 || r.Applied() < lead.Applied(); i++ {
		if i > 500 {
			t.Fatalf("replica 3 did not catch up (applied %d, the leader %d)", r.Applied(), lead.Applied())
		}
		tr.tick()
		w.completeAll(t, r)
		tr.deliver()
	}
	for i := 0; !held(); i++ {
		if i > 200 {
			t.Fatalf("replica 3 queued no local snapshot (applied %d)", r.Applied())
		}
		propose(t, lead, fmt.Sprint("a", i))
		tr.tick()
	}
	var local uint64
	for _, q := range r.inflight {
		if q.ready == nil {
			local = q.snapIndex
		}
	}
	// Cut off, it falls behind the leader's log, and is sent its
	// snapshot when it comes back.
	tr.isolated = true
	for i := range 12 {
		propose(t, lead, fmt.Sprint("b", i))
		tr.deliver()
	}
	tr.isolated = false
	for i := 0; len(tr.decodes) == 0; i++ {
		if i > 500 {
			t.Fatal("replica 3 was never sent the leader's snapshot")
		}
		tr.tick()
	}
	for _, decode := range tr.decodes {
		decode()
	}
	if err := r.SnapshotDecoded(); err != nil {
		t.Fatal(err)
	}
	w.completeAll(t, r)
	restored := slices.IndexFunc(obs.events, func(e string) bool { return len(e) > 8 && e[:8] == "restored" })
	if restored < 0 {
		t.Fatalf("no snapshot restored: %v", obs.events)
	}
	if i := slices.Index(obs.events, fmt.Sprint("taken ", local)); i > restored {
		t.Fatalf("the local snapshot at %d reported taken after the leader's was installed: %v", local, obs.events)
	}
}

// sendSnapshotToThree elects replica 1 or 2 while replica 3 is cut off,
// chooses 12 commands, and reconnects 3 until the leader has sent it a
// snapshot, whose decode waits in tr.decodes.
func sendSnapshotToThree(t *testing.T, tr *trio) (lead, follower *Replica) {
	t.Helper()
	for i := 0; tr.leader() == nil || tr.leader().Node().ID() == 3; i++ {
		if i > 500 {
			t.Fatal("no leader among replicas 1 and 2")
		}
		tr.tick()
	}
	lead = tr.leader()
	for i := range 12 {
		propose(t, lead, fmt.Sprint("a", i))
		tr.deliver()
	}
	follower = tr.reps[3]
	tr.isolated = false
	for i := 0; len(tr.decodes) == 0; i++ {
		if i > 500 {
			t.Fatal("replica 3 was never sent the leader's snapshot")
		}
		tr.tick()
	}
	return lead, follower
}

// Package replica owns the deterministic glue that drives one replica: the
// paxos core, its durable store and the replicated state machine, with the
// snapshot policy. It owns no goroutines, clocks or sockets: the server and
// the simulator both feed it ticks and messages and hand it a function to
// send with, so they run the same code.
package replica

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"paxcron/paxos"
	"paxcron/storage"
)

// StateMachine is the application the log replicates. Apply must be
// deterministic: every replica applies the same commands in the same order
// and must reach the same state.
type StateMachine interface {
	// Apply applies the command chosen at slot.
	Apply(slot uint64, cmd []byte)
	// Snapshot encodes the whole state.
	Snapshot() ([]byte, error)
	// Restore replaces the whole state with a decoded snapshot.
	Restore(data []byte) error
}

// Observer hears what the replica does; the simulator checks invariants
// with it. Every method is optional through NopObserver.
type Observer interface {
	// Persisted is called after a Ready's write returned.
	Persisted(rd *paxos.Ready)
	// Sent is called for each message handed to Send.
	Sent(m paxos.Message)
	// Applied is called for every chosen entry applied (no-ops included).
	Applied(e paxos.Entry)
	// Restored is called after the state machine was restored from a
	// snapshot at index (at start-up or from a peer).
	Restored(index uint64)
	// SnapshotTaken is called after a local snapshot at index was saved.
	SnapshotTaken(index uint64)
}

// NopObserver ignores everything.
type NopObserver struct{}

func (NopObserver) Persisted(*paxos.Ready) {}
func (NopObserver) Sent(paxos.Message)     {}
func (NopObserver) Applied(paxos.Entry)    {}
func (NopObserver) Restored(uint64)        {}
func (NopObserver) SnapshotTaken(uint64)   {}

// SnapshotPolicy says when a replica snapshots its state machine and
// compacts its log: after EveryEntries applied slots or EveryTicks ticks,
// whichever comes first (zero disables that trigger), and how much of the
// log it keeps below the snapshot.
type SnapshotPolicy struct {
	EveryEntries uint64
	EveryTicks   uint64
	// LogPerState, when positive, holds the EveryEntries trigger back
	// until the commands applied since the last snapshot add up to at
	// least LogPerState times its size: a snapshot costs the whole state,
	// so a large state is snapshotted less often and the cost per applied
	// byte stays bounded. (Measured: a 20 MB state snapshotted every
	// 10,000 entries spent 40% of a midnight herd's CPU on snapshots, and
	// the long loop turns cost the leader its lease.) EveryTicks is not
	// held back.
	LogPerState float64
	// TailEntries is how many entries at or below a snapshot's index the
	// log keeps (the log's tail; storage.Update.TailSlots): a peer whose
	// chosen index is at most TailEntries behind the snapshot is caught up
	// with entries rather than the whole snapshot. The next snapshot
	// deletes the previous tail. Zero deletes the whole log at or below
	// the snapshot.
	TailEntries uint64
}

// DefaultSnapshotPolicy snapshots every 10,000 entries or, with a 50 ms
// tick, every 10 minutes, and keeps a tail of 10,000 entries. The tail is
// no longer than the log between two entry-triggered snapshots, so disk
// use stays within twice that log, and it covers a follower that missed
// a few seconds of a busy leader (a restart, a short partition) without
// streaming a state of hundreds of megabytes.
func DefaultSnapshotPolicy() SnapshotPolicy {
	return SnapshotPolicy{EveryEntries: 10_000, EveryTicks: 12_000, LogPerState: 1, TailEntries: 10_000}
}

// Config configures a Replica. Every dependency is required.
type Config struct {
	ID           paxos.ReplicaID
	Membership   paxos.Membership
	Timing       paxos.Timing
	Limits       paxos.Limits
	Rand         *rand.Rand
	Store        storage.Store
	StateMachine StateMachine
	// Send hands a message to the transport. It must not block; a message
	// it cannot deliver may be dropped (the protocol retransmits).
	Send      func(paxos.Message)
	Snapshots SnapshotPolicy
	Observer  Observer
	// Rebuilding starts a replica whose disk was lost as a learner that
	// rejoins from its peers (see paxos.HardState.Rebuilding).
	Rebuilding bool
	// Writer, when set, takes the replica's writes off its thread: the
	// replica keeps stepping while a write is in flight, and the caller
	// calls WriteDone once it is durable. Nil writes to Store inline.
	Writer Writer
	// ReadSnapshots, when set, runs the core's reads of the snapshot it
	// sends to a peer off the replica's thread (on a goroutine; in the
	// simulator, as a later event): read must be called once, on any
	// thread, unless the replica is being discarded. Nil reads them
	// inline, on the replica's thread.
	ReadSnapshots func(read func())
	// DecodeSnapshots, when set and the state machine is a Decoder, runs
	// the decode of a snapshot received from the leader off the
	// replica's thread (on a goroutine; in the simulator, as a later
	// event): decode must be called once, on any thread, and then
	// SnapshotDecoded on the replica's, unless the replica is being
	// discarded. Nil restores on the replica's thread.
	DecodeSnapshots func(decode func())
	// MaxApplyPerProcess, when positive, bounds the entries one Process
	// applies: it stops after the Ready that reaches the bound, and
	// HasWork reports what is left, for the caller to process in its next
	// turn. A restarted replica may have tens of thousands of chosen
	// entries to apply (1.2-1.4 s of one turn at a million jobs), and a
	// turn that long holds up its heartbeats and replies. Zero applies
	// everything at once.
	MaxApplyPerProcess uint64
}

// Freezer is a StateMachine that can capture its state in a moment and
// encode it later: FreezeSnapshot returns the encoder, which may run on
// any thread while the machine goes on applying, and must then return
// what Snapshot would have returned at the freeze.
type Freezer interface {
	FreezeSnapshot() (encode func() ([]byte, error))
}

// Decoder is a StateMachine that can restore a snapshot in two steps:
// DecodeSnapshot decodes it into a new state, on any thread, touching
// nothing the machine holds while it goes on applying; install, on the
// replica's thread, puts the decoded state in place. Every check is in
// the decode: install cannot fail.
type Decoder interface {
	DecodeSnapshot(data []byte) (install func(), err error)
}

// SnapshotWriter is a Writer that also encodes a frozen snapshot off the
// replica's thread: WriteSnapshot queues u, whose Snapshot.Data is empty,
// to be saved once encode has filled it in. With a Freezer state machine
// it keeps a snapshot of a large state from holding the replica's thread
// (and a leader's heartbeats) for seconds.
//
// The snapshot must land after every write queued before it, and before
// any later write that carries a snapshot (one from the leader, newer);
// other writes queued after it may be saved, and reported with WriteDone,
// while it is still being encoded or saved, so that a large state's
// snapshot does not hold up the log's appends (and with them every
// reply). Its own completion is reported with Replica.SnapshotWritten.
type SnapshotWriter interface {
	Writer
	WriteSnapshot(u storage.Update, encode func() ([]byte, error))
}

// Writer persists the replica's writes asynchronously. Writes must become
// durable in the order Write was called (one queue per replica); the caller
// reports each, in that order, with Replica.WriteDone on the replica's own
// thread.
type Writer interface {
	Write(u storage.Update)
}

var (
	// ErrConfig wraps every configuration error.
	ErrConfig = errors.New("replica: invalid config")
	// ErrSnapshotInFlight is returned by TakeSnapshot while a snapshot
	// write is still queued; try again once it is done.
	ErrSnapshotInFlight = errors.New("replica: a snapshot is still being written")
)

// Replica drives one replica. It is not safe for concurrent use.
type Replica struct {
	node  *paxos.Node
	store storage.Store
	// snapshotReads is the core's store when Config.ReadSnapshots is set.
	snapshotReads *snapshotReads
	sm            StateMachine
	send          func(paxos.Message)
	obs           Observer
	policy        SnapshotPolicy
	snapAt        uint64 // index of the newest snapshot
	// snapBytes is the newest snapshot's size, logBytes the size of the
	// commands applied since.
	snapBytes, logBytes int
	snapTick            uint64 // node tick when it was taken or restored
	applied             uint64
	writer              Writer
	inflight            []write // handed to writer, oldest first
	// ownSnap is the local snapshot being encoded and saved off the
	// thread (SnapshotWriter), outside inflight; its Data is filled in by
	// the time SnapshotWritten reports it.
	ownSnap  *paxos.Snapshot
	maxApply uint64 // Config.MaxApplyPerProcess
	// restoring is the leader's snapshot being decoded off the thread
	// (Config.DecodeSnapshots).
	restoring       *pendingRestore
	decodeSnapshots func(decode func())
	// backlog are the chosen entries the core handed out that wait to be
	// applied, in order: those that follow a snapshot being decoded, then,
	// once it is installed, those Process has not yet applied (at most
	// MaxApplyPerProcess each time, as entries from the core are).
	backlog []paxos.Entry
	// maxHeld is maxHeldWhileRestoring; a test lowers it to reach it.
	maxHeld int
}

// pendingRestore is a snapshot from the leader whose decode runs off the
// replica's thread.
type pendingRestore struct {
	meta paxos.SnapshotMeta
	size int

	mu      sync.Mutex // the decode's outcome, set on its thread
	decoded bool
	install func()
	err     error
}

// maxHeldWhileRestoring bounds the chosen entries a replica holds while a
// snapshot decodes (a million jobs: 2-4.5 s, during which a busy cluster
// chooses tens of thousands) and after, until they are applied: past it,
// the replica takes no Ready until the snapshot is installed and some are
// applied, and the leader treats it as lagging.
const maxHeldWhileRestoring = 100_000

// write is one write in flight: a Ready's, or a local snapshot's.
type write struct {
	ready     *paxos.Ready
	snapIndex uint64 // set for a local snapshot
}

// New opens a replica from its store: it restores the newest snapshot into
// the state machine and resumes the log after it.
func New(cfg Config) (*Replica, error) {
	switch {
	case cfg.Store == nil || cfg.StateMachine == nil || cfg.Send == nil || cfg.Observer == nil:
		return nil, fmt.Errorf("%w: Store, StateMachine, Send and Observer are required", ErrConfig)
	}
	snap, err := cfg.Store.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("replica: reading snapshot: %w", err)
	}
	if snap.Meta.Index > 0 {
		if err := cfg.StateMachine.Restore(snap.Data); err != nil {
			return nil, fmt.Errorf("replica: restoring snapshot at %d: %w", snap.Meta.Index, err)
		}
	}
	var coreStore paxos.Storage = cfg.Store
	var reads *snapshotReads
	if cfg.ReadSnapshots != nil {
		reads = &snapshotReads{Store: cfg.Store, start: cfg.ReadSnapshots}
		coreStore = reads
	}
	node, err := paxos.NewNode(paxos.Config{
		ID: cfg.ID, Membership: cfg.Membership, Storage: coreStore, Rand: cfg.Rand,
		Applied: snap.Meta.Index, Timing: cfg.Timing, Limits: cfg.Limits, Rebuilding: cfg.Rebuilding,
	})
	if err != nil {
		return nil, err
	}
	r := &Replica{
		node: node, store: cfg.Store, sm: cfg.StateMachine, send: cfg.Send, obs: cfg.Observer,
		policy: cfg.Snapshots, snapAt: snap.Meta.Index, applied: snap.Meta.Index, snapBytes: len(snap.Data),
		writer: cfg.Writer, maxApply: cfg.MaxApplyPerProcess, decodeSnapshots: cfg.DecodeSnapshots,
		snapshotReads: reads, maxHeld: maxHeldWhileRestoring,
	}
	if snap.Meta.Index > 0 {
		r.obs.Restored(snap.Meta.Index)
	}
	// Persist what the node starts with before anything else happens: a
	// rebuilding replica's mark must be durable before it talks to anyone,
	// or a crash would bring it back with an empty disk as a voter. This
	// first write is always inline.
	if r.node.HasReady() {
		if err := r.handleReady(r.node.Ready(), true); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Node exposes the consensus core for queries (status, lease).
func (r *Replica) Node() *paxos.Node { return r.node }

// Applied is the highest slot applied to the state machine.
func (r *Replica) Applied() uint64 { return r.applied }

// Tick advances local time by one tick and processes the outcome.
func (r *Replica) Tick() error {
	r.TickTime()
	if err := r.Process(); err != nil {
		return err
	}
	return r.maybeSnapshot() // time alone may make a snapshot due
}

// TickTime advances local time by one tick without processing the
// outcome, for a caller that runs Process once for many inputs
// (internal/node). It ages a snapshot read the core did not come back
// for, as Tick does.
func (r *Replica) TickTime() {
	r.node.Tick()
	if r.snapshotReads != nil {
		r.snapshotReads.tick()
	}
}

// Step feeds a message from a peer. A malformed message is returned as an
// error and changes nothing; a storage failure halts the replica.
func (r *Replica) Step(m paxos.Message) error {
	if err := r.node.Step(m); err != nil {
		return err
	}
	return r.Process()
}

// Propose proposes a command; it is chosen when it is applied at the
// returned slot. The caller calls Process (or the next Tick or Step does).
func (r *Replica) Propose(cmd []byte) (uint64, error) { return r.node.Propose(cmd) }

// Process runs every pending Ready: persist, send, apply, snapshot,
// advance. A storage error halts the replica: it must be restarted from
// its store (or rebuilt from peers), never go on from state it cannot
// trust.
//
// With Config.MaxApplyPerProcess it may stop with work left (HasWork).
// While entries wait in the backlog, a Ready's chosen entries join it
// instead of being applied, so its Readys are taken first (their replies
// go out) and the backlog is then applied within the same bound.
func (r *Replica) Process() error {
	from := r.applied
	for r.node.HasReady() && r.applyBudgetLeft(from) && !r.holdsTooMuch() {
		if err := r.processReady(); err != nil {
			return err
		}
	}
	r.applyBacklog(from)
	return r.node.Err()
}

// applyBudgetLeft reports whether a Process that began at applied index
// from may apply more (Config.MaxApplyPerProcess).
func (r *Replica) applyBudgetLeft(from uint64) bool {
	return r.maxApply == 0 || r.applied-from < r.maxApply
}

// applyBacklog applies the backlog's entries, once no snapshot is being
// decoded, until the Process that began at from has applied its bound.
func (r *Replica) applyBacklog(from uint64) {
	if r.restoring != nil {
		return
	}
	k := 0
	for ; k < len(r.backlog) && r.applyBudgetLeft(from); k++ {
		r.applyEntry(r.backlog[k])
	}
	clear(r.backlog[:k])
	r.backlog = r.backlog[k:]
	if len(r.backlog) == 0 {
		r.backlog = nil
	}
}

// HasWork reports whether Process has anything to do: work a bounded
// Process left, or what inputs since the last one brought. A replica
// holding as many entries as it may while a snapshot decodes has none
// until SnapshotDecoded.
func (r *Replica) HasWork() bool {
	return r.node.HasReady() && !r.holdsTooMuch() || r.restoring == nil && len(r.backlog) > 0
}

func (r *Replica) holdsTooMuch() bool { return len(r.backlog) >= r.maxHeld }

// HeldEntries is the number of chosen entries handed out by the core and
// not yet applied: those held behind a snapshot from the leader that is
// being decoded, and those its install left to later Processes. Until
// they are applied, the state and Applied are from before them.
func (r *Replica) HeldEntries() int { return len(r.backlog) }

// lastHeld is the last slot the state will have reached once the snapshot
// being decoded, if any, is installed and the backlog applied.
func (r *Replica) lastHeld() uint64 {
	base := r.applied
	if r.restoring != nil {
		base = r.restoring.meta.Index
	}
	return base + uint64(len(r.backlog))
}

func (r *Replica) processReady() error {
	return r.handleReady(r.node.Ready(), false)
}

// handleReady sends, applies and writes (inline, or through the Writer
// unless inline is forced) what a Ready asks.
//
// A Ready with nothing to write and no write ahead of it (a leader's
// commit, most often) is finished here: through the Writer it would wake
// the writer goroutine and then the loop again, two hand-offs on the
// answer's path for a write of nothing.
//
// The order of the hand-offs counts in the node: each wakes a goroutine,
// and Go runs the one woken last first, then the others in the order
// they were woken. The write is handed over between the last early
// message and the others, so that every accept (which the commit waits
// for) leaves before the leader's own sync starts: handed over last, the
// sync ran first and held the accepts back by a median 100 µs at one
// client; handed over first, it held back all but the last
// (BENCHMARKS.md, "Where a lone write's time goes, hop by hop").
func (r *Replica) handleReady(rd paxos.Ready, inline bool) error {
	async := r.writer != nil && !inline
	if async && len(r.inflight) == 0 && update(&rd).IsEmpty() {
		async = false
	}
	early := rd.EarlyMessages
	if async {
		for ; len(early) > 1; early = early[1:] {
			r.obs.Sent(early[0])
			r.send(early[0])
		}
		r.inflight = append(r.inflight, write{ready: &rd})
		r.writer.Write(update(&rd)) // an empty update too: completions stay in order
	}
	for _, m := range early {
		r.obs.Sent(m)
		r.send(m)
	}
	// Chosen entries are durable on a quorum whatever this replica's own
	// write does, so they are applied now rather than one sync later.
	if err := r.apply(&rd); err != nil {
		return err
	}
	if !async {
		return r.processInline(rd)
	}
	return nil
}

// InFlight is the number of writes handed to the Writer and not done.
func (r *Replica) InFlight() int { return len(r.inflight) }

// WriteDone reports that the oldest write handed to the Writer is durable
// (err nil) or failed (the replica must then be restarted from its store).
func (r *Replica) WriteDone(err error) error {
	if len(r.inflight) == 0 {
		panic(fmt.Sprintf("replica %d: WriteDone with no write in flight", r.node.ID()))
	}
	w := r.inflight[0]
	r.inflight = r.inflight[1:]
	if err != nil {
		return fmt.Errorf("replica %d: persisting: %w", r.node.ID(), err)
	}
	if w.ready == nil {
		// As in SnapshotWritten: a newer snapshot from the leader
		// restored since (its write comes next) is the replica's newest.
		if r.snapAt == w.snapIndex {
			r.obs.SnapshotTaken(w.snapIndex)
		}
		return nil
	}
	if err := r.finish(*w.ready); err != nil {
		return err
	}
	return r.Process()
}

// SnapshotWritten reports that the local snapshot handed to the
// SnapshotWriter is durable (err nil) or failed (the replica must then be
// restarted from its store).
func (r *Replica) SnapshotWritten(err error) error {
	if r.ownSnap == nil {
		panic(fmt.Sprintf("replica %d: SnapshotWritten with no snapshot in flight", r.node.ID()))
	}
	snap := r.ownSnap
	r.ownSnap = nil
	if err != nil {
		return fmt.Errorf("replica %d: persisting the snapshot at %d: %w", r.node.ID(), snap.Meta.Index, err)
	}
	if r.snapAt != snap.Meta.Index {
		// A newer snapshot from the leader was restored since (its write
		// comes next): this one is no longer the replica's newest.
		return nil
	}
	r.snapBytes = len(snap.Data)
	r.obs.SnapshotTaken(snap.Meta.Index)
	return nil
}

func update(rd *paxos.Ready) storage.Update {
	u := storage.Update{Entries: rd.Entries, Snapshot: rd.Snapshot}
	if rd.HardStateChanged {
		hs := rd.HardState
		u.HardState = &hs
	}
	return u
}

func (r *Replica) processInline(rd paxos.Ready) error {
	if u := update(&rd); !u.IsEmpty() {
		if err := r.store.Save(u); err != nil {
			return fmt.Errorf("replica %d: persisting: %w", r.node.ID(), err)
		}
	}
	return r.finish(rd)
}

// finish does what follows a durable write: replies, confirmation to the
// core, and the snapshot policy.
func (r *Replica) finish(rd paxos.Ready) error {
	r.obs.Persisted(&rd)
	for _, m := range rd.Messages {
		r.obs.Sent(m)
		r.send(m)
	}
	r.node.Persisted()
	return r.maybeSnapshot()
}

// apply installs a snapshot from the leader (or starts its decode off the
// thread) and applies chosen entries (or, while a decode runs, holds
// them).
func (r *Replica) apply(rd *paxos.Ready) error {
	if rd.Snapshot != nil {
		if err := r.restore(rd.Snapshot); err != nil {
			return err
		}
	}
	for _, e := range rd.Committed {
		if r.restoring != nil || len(r.backlog) > 0 {
			if e.Slot != r.lastHeld()+1 {
				panic(fmt.Sprintf("replica %d: holding slot %d after %d", r.node.ID(), e.Slot, r.lastHeld()))
			}
			r.backlog = append(r.backlog, e)
			continue
		}
		r.applyEntry(e)
	}
	return nil
}

func (r *Replica) applyEntry(e paxos.Entry) {
	if e.Slot != r.applied+1 {
		panic(fmt.Sprintf("replica %d: applying slot %d after %d", r.node.ID(), e.Slot, r.applied))
	}
	if e.Kind == paxos.EntryCommand {
		r.sm.Apply(e.Slot, e.Data)
		r.logBytes += len(e.Data)
	}
	r.applied = e.Slot
	r.obs.Applied(e)
}

// restore replaces the state with snap, received from the leader: at once,
// or, with Config.DecodeSnapshots and a Decoder, once its decode off the
// thread is done (SnapshotDecoded). A snapshot that comes while another
// decodes supersedes it.
func (r *Replica) restore(snap *paxos.Snapshot) error {
	dec, ok := r.sm.(Decoder)
	if r.decodeSnapshots == nil || !ok {
		if err := r.sm.Restore(snap.Data); err != nil {
			return fmt.Errorf("replica %d: restoring snapshot at %d: %w", r.node.ID(), snap.Meta.Index, err)
		}
		r.installed(snap.Meta, len(snap.Data))
		return nil
	}
	if (r.restoring != nil || len(r.backlog) > 0) && snap.Meta.Index < r.lastHeld() {
		// The core installs a snapshot only past what it has chosen.
		panic(fmt.Sprintf("replica %d: a snapshot at %d while holding slots up to %d", r.node.ID(),
			snap.Meta.Index, r.lastHeld()))
	}
	p := &pendingRestore{meta: snap.Meta, size: len(snap.Data)}
	r.restoring = p
	r.backlog = nil // the snapshot covers every entry held
	data := snap.Data
	r.decodeSnapshots(func() {
		install, err := dec.DecodeSnapshot(data)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.decoded, p.install, p.err = true, install, err
	})
	return nil
}

// installed records a snapshot from the leader as the state.
func (r *Replica) installed(meta paxos.SnapshotMeta, size int) {
	r.applied, r.snapAt, r.snapTick = meta.Index, meta.Index, r.node.Now()
	r.snapBytes, r.logBytes = size, 0
	r.obs.Restored(meta.Index)
}

// SnapshotDecoded reports that a decode Config.DecodeSnapshots ran is
// done. If it is the newest snapshot's, the decoded state replaces the
// state and Process runs, which applies the entries held behind it, at
// most Config.MaxApplyPerProcess of them (HasWork reports the rest, as
// for any bounded Process: up to 100,000 entries in one call would hold
// the caller's loop for seconds); a superseded snapshot's decode changes
// nothing. A snapshot that fails to decode halts the replica, as a failed
// Restore does.
func (r *Replica) SnapshotDecoded() error {
	p := r.restoring
	if p == nil {
		return nil
	}
	p.mu.Lock()
	decoded, install, err := p.decoded, p.install, p.err
	p.mu.Unlock()
	if !decoded {
		return nil // a superseded decode; the newest goes on
	}
	r.restoring = nil
	if err != nil {
		return fmt.Errorf("replica %d: restoring snapshot at %d: %w", r.node.ID(), p.meta.Index, err)
	}
	install()
	r.installed(p.meta, p.size)
	if err := r.Process(); err != nil {
		return err
	}
	return r.maybeSnapshot()
}

func (r *Replica) maybeSnapshot() error {
	byEntries := r.policy.EveryEntries > 0 && r.applied-r.snapAt >= r.policy.EveryEntries &&
		float64(r.logBytes) >= r.policy.LogPerState*float64(r.snapBytes)
	due := byEntries ||
		(r.policy.EveryTicks > 0 && r.node.Now()-r.snapTick >= r.policy.EveryTicks)
	if !due || r.applied == r.snapAt || r.snapshotInFlight() {
		return nil
	}
	return r.TakeSnapshot()
}

// snapshotInFlight reports whether a snapshot write is queued or one from
// the leader is decoding: one from the leader is newer than anything
// applied, and a local one would land behind it, older than the store's.
func (r *Replica) snapshotInFlight() bool {
	if r.ownSnap != nil || r.restoring != nil {
		return true
	}
	for _, w := range r.inflight {
		if w.ready == nil || w.ready.Snapshot != nil {
			return true
		}
	}
	return false
}

// CurrentSnapshot encodes the state machine at the applied index, with
// the membership, without saving it or compacting anything: a copy of
// the replica's state for an operator (a backup, a file).
func (r *Replica) CurrentSnapshot() (paxos.Snapshot, error) {
	data, err := r.sm.Snapshot()
	if err != nil {
		return paxos.Snapshot{}, fmt.Errorf("replica %d: snapshot at %d: %w", r.node.ID(), r.applied, err)
	}
	return paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: r.applied, Membership: r.membership()}, Data: data}, nil
}

// TakeSnapshot snapshots the state machine at the applied index, saves it
// and compacts the log below it, but for the policy's tail.
func (r *Replica) TakeSnapshot() error {
	if r.snapshotInFlight() {
		return fmt.Errorf("%w (replica %d)", ErrSnapshotInFlight, r.node.ID())
	}
	if sw, ok := r.writer.(SnapshotWriter); ok {
		if f, ok := r.sm.(Freezer); ok {
			r.takeSnapshotOffThread(sw, f)
			return nil
		}
	}
	data, err := r.sm.Snapshot()
	if err != nil {
		return fmt.Errorf("replica %d: snapshot at %d: %w", r.node.ID(), r.applied, err)
	}
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: r.applied, Membership: r.membership()}, Data: data}
	// The tail holds values this replica applied from its own log: the
	// chosen values, which a peer may be caught up with.
	u := storage.Update{Snapshot: &snap, TailSlots: min(r.policy.TailEntries, r.applied)}
	through := u.DeleteThrough()
	if r.writer != nil {
		// Through the same queue as every other write, so it lands after
		// the entries it covers. The core treats the log as compacted from
		// now on: it must not read slots the write is about to delete.
		r.inflight = append(r.inflight, write{snapIndex: r.applied})
		r.writer.Write(u)
		r.node.Compacted(r.applied, through)
		r.snapAt, r.snapTick = r.applied, r.node.Now()
		r.snapBytes, r.logBytes = len(data), 0
		return nil
	}
	if err := r.store.Save(u); err != nil {
		return fmt.Errorf("replica %d: saving snapshot at %d: %w", r.node.ID(), r.applied, err)
	}
	r.node.Compacted(r.applied, through)
	r.snapAt, r.snapTick = r.applied, r.node.Now()
	r.snapBytes, r.logBytes = len(data), 0
	r.obs.SnapshotTaken(r.applied)
	return nil
}

// takeSnapshotOffThread freezes the state here and has the writer encode
// and save it after the writes queued so far (SnapshotWriter). The core
// treats the log as compacted from now on, as for any queued snapshot.
func (r *Replica) takeSnapshotOffThread(sw SnapshotWriter, f Freezer) {
	snap := &paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: r.applied, Membership: r.membership()}}
	u := storage.Update{Snapshot: snap, TailSlots: min(r.policy.TailEntries, r.applied)}
	through := u.DeleteThrough()
	r.ownSnap = snap
	sw.WriteSnapshot(u, f.FreezeSnapshot())
	r.node.Compacted(r.applied, through)
	r.snapAt, r.snapTick, r.logBytes = r.applied, r.node.Now(), 0
}

func (r *Replica) membership() paxos.Membership {
	return r.node.Membership()
}

// Package node owns the goroutines that drive one replica in real time:
// the loop that alone touches the replica's cron/replica.Replica, store
// and state machine; the wall-clock ticker that feeds it ticks; its writer
// goroutine; and proposal tracking, so that a caller of Propose waits until
// this replica has applied its command. It is the server-style wrapper over
// the deterministic glue of cron/replica, as etcd raft's node.go is over
// RawNode. The server runs one Node behind its network transport;
// internal/localcluster runs several in one process over channels.
//
// Each loop turn drains every queued message and proposal before one
// Process, so that many inputs become one Ready and one synced Save (group
// commit). With Config.Cron the replica runs the cron layer: the launcher
// (cron/launcher) over the cron state, stepped after every loop turn,
// calling a Dispatcher whose results come back to the loop. Otherwise the
// state machine is a counter with a running hash of what it applied
// (internal/hashsm), enough to check agreement and to benchmark the write
// path.
//
// Commands are framed: an 8-byte proposal id, then the command. The frame
// lets the proposing replica recognise its own command in a slot; the
// launcher's proposals carry id 0, which no Propose call waits for.
package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/replica"
	"paxcron/cron/state"
	"paxcron/internal/hashsm"
	"paxcron/internal/hoptrace"
	"paxcron/paxos"
	"paxcron/storage"
)

// Config configures New.
type Config struct {
	ID         paxos.ReplicaID
	Membership paxos.Membership
	// Store is the replica's durable store. The Node uses it from its own
	// goroutines while it runs; the caller closes it after Stop.
	Store storage.Store
	// Send hands a message to the transport. It must not block: a message
	// it cannot deliver is dropped (the protocol retransmits).
	Send func(paxos.Message)
	// TickInterval is the wall-clock length of one paxos tick.
	TickInterval time.Duration
	Timing       paxos.Timing
	Limits       paxos.Limits
	// Snapshots is the replica's snapshot policy (zero: never snapshot).
	Snapshots replica.SnapshotPolicy
	// Seed seeds the replica's election randomness (with its ID).
	Seed uint64
	// Rebuilding starts a replica whose disk was lost as a learner that
	// rejoins from its peers (paxos.HardState.Rebuilding).
	Rebuilding bool
	// InlineWrites makes the replica write on its loop goroutine, which
	// then batches what arrives during each sync. By default a writer
	// goroutine merges the writes queued up into one synced batch while
	// the loop keeps stepping: the replica answers its peers while its own
	// write is in flight (BENCHMARKS.md: 1.1-1.3x the commits at 8
	// proposers).
	InlineWrites bool
	// OnSave, when set, is called on the goroutine that saved, after each
	// successful non-empty Save. It must be quick and safe for concurrent
	// use (benchmarks record batch sizes with it).
	OnSave func(id paxos.ReplicaID, u storage.Update)
	// OnSaveTimed, when set, hears every successful non-empty Save: its
	// entries and how long it took (metrics). Same rules as OnSave.
	OnSaveTimed func(entries int, took time.Duration)
	// OnCommit, when set, hears how long each Propose took from the call
	// to its command applied here (from the loop: it must not block).
	OnCommit func(took time.Duration)
	// OnChange, when set, is called after the loop published a changed
	// Status (from the loop goroutine: it must not block).
	OnChange func()
	// OnSlowTurn, when set, hears every turn of the loop that took at
	// least SlowTurn (zero: DefaultSlowTurn), with where its time went
	// (from the loop goroutine: it must not block).
	OnSlowTurn func(Turn)
	SlowTurn   time.Duration
	// MaxApplyPerTurn bounds the entries a turn of the loop applies (zero:
	// DefaultMaxApplyPerTurn): once a turn has applied that many it takes
	// no more inputs, so the last one it took may bring it to about twice
	// that. The loop takes the rest in the next turns, reading messages
	// and ticks between them.
	MaxApplyPerTurn uint64
	// OnSnapshot, when set, is called once a local snapshot at index is
	// durable in the store (from the loop goroutine: it must not block).
	OnSnapshot func(index uint64)
	// InboxMessages bounds the incoming message queue; Deliver drops a
	// message that finds it full. Zero means DefaultInboxMessages.
	InboxMessages int
	// QueuedProposals bounds the proposals not yet handed to the core;
	// Propose waits for room. Zero means DefaultQueuedProposals.
	QueuedProposals int
	// NextID returns proposal ids, unique across every replica of the
	// cluster and never 0. Nil: the replica's ID in the top 16 bits and a
	// counter from a random start below.
	NextID func() uint64
	// Cron, when set, makes the replica run the cron layer; commands are
	// then encoded state.Commands.
	Cron *CronOptions
}

const (
	// DefaultInboxMessages holds several rounds of pipelined accepts and
	// their replies from every peer.
	DefaultInboxMessages = 4096
	// DefaultQueuedProposals lets one loop turn take a batch of this many
	// proposals into a single Ready.
	DefaultQueuedProposals = 1024
)

var (
	// ErrConfig wraps every configuration error.
	ErrConfig = errors.New("node: invalid config")
	// ErrDropped is returned by Propose when another value was chosen for
	// the command's slot (a leader change): the command was not chosen
	// anywhere, so retrying it cannot apply it twice.
	ErrDropped = errors.New("node: command not chosen (its slot went to another value); safe to retry")
	// ErrOutcomeUnknown is returned by Propose when the replica restored a
	// snapshot past the command's slot before seeing the slot applied: the
	// command may or may not have been chosen.
	ErrOutcomeUnknown = errors.New("node: outcome unknown (state restored from a snapshot past the command's slot)")
	// ErrStopped is the status error of a Node that Stop stopped, and what
	// its pending proposals fail with: like a crash, their commands may or
	// may not be chosen.
	ErrStopped = errors.New("node: replica stopped")
)

// idBytes is the length of the proposal id framing each command.
const idBytes = 8

// Status is what a replica's loop last published about itself.
type Status struct {
	ID     paxos.ReplicaID
	Role   paxos.Role
	Leader paxos.ReplicaID
	// Ballot is the ballot led, when Role is paxos.Leader.
	Ballot  paxos.Ballot
	Chosen  uint64
	Applied uint64
	// Commands and Hash are the running hash machine (kept beside the cron
	// state in cron mode): the count of commands applied and a hash over
	// them and their slots.
	Commands uint64
	Hash     uint64
	// Saves counts synced Saves and SavedEntries the entries they wrote.
	Saves        uint64
	SavedEntries uint64
	// BusyRefusals counts proposals the core refused with paxos.ErrBusy
	// (each was queued and offered again, not failed).
	BusyRefusals uint64
	// LongestTurn is the longest a turn of the loop took, from the input
	// that woke it to its end: that input's handling, the other inputs
	// taken with it, Process with its writes and snapshots, and in cron
	// mode the launcher's Step (Turn). While a turn runs the replica reads
	// no message and no tick, so a turn as long as the election timeout
	// can cost a leader its leadership.
	LongestTurn time.Duration
	// Restores counts the snapshots restored into the state machine: the
	// store's at start-up, and those a leader sent because this replica
	// had fallen behind the start of its log.
	Restores uint64
	// SnapshotIndex is the index of the newest local snapshot (taken or
	// restored), 0 if none.
	SnapshotIndex uint64
	// Lease is how long, from Now, this replica may still act as the
	// leader: positive only while it leads and holds the lease.
	Lease time.Duration
	// Launching: in cron mode, the replica's launcher acts as the
	// leader's (promoted: it leads, holds the lease and caught up).
	Launching bool
	// Rebuilding: the replica lost its disk and learns from its peers
	// without voting yet (paxos.HardState.Rebuilding).
	Rebuilding bool
	// ClusterID is the cluster's ID as this replica's cron state holds
	// it (zero until a SetClusterID is applied, or outside cron mode).
	ClusterID state.ClusterID
	// QuorumLost counts the leaderships this replica gave up because no
	// quorum answered it for an election timeout (paxos.Stats).
	QuorumLost uint64
	// Now is when the status was published.
	Now time.Time
	// Err is the failure that stopped the replica, if any.
	Err error
}

// Node is one replica's goroutines. Its methods are safe for concurrent
// use.
type Node struct {
	cfg       Config
	id        paxos.ReplicaID
	inbox     chan paxos.Message
	proposals chan *proposal
	quit      chan struct{} // closed by Stop
	stopOnce  sync.Once
	startOnce sync.Once
	stopped   chan struct{} // closed when run returns
	nextID    func() uint64
	dropped   atomic.Uint64

	// Owned by the loop goroutine (set up before it starts).
	rep *replica.Replica
	// sm is the replicated state machine: hash alone, or in cron mode the
	// launcher over the cron state with hash beside it.
	sm          replica.StateMachine
	hash        *hashsm.Machine
	store       *countingStore
	pending     map[uint64]*proposal // proposed, by slot, until that slot is applied
	busy        []*proposal          // refused with paxos.ErrBusy, oldest first
	ticks       int64                // ticks fed to the core since run started
	started     time.Time            // when run started: ticks count from it
	refused     uint64               // proposals the core refused as busy
	longestTurn time.Duration        // see Status.LongestTurn
	restores    uint64               // see Status.Restores
	snapIndex   uint64               // see Status.SnapshotIndex
	calls       chan func()          // run on the loop: Call, Cron

	// Cron mode only (nil otherwise); see cron.go.
	cron             *cronMachine
	results          *resultQueue
	now              func() time.Time
	launcherProposed bool  // the launcher proposed during this Step
	launcherErr      error // the launcher's proposal could not be encoded
	wake             launcherWake

	// writes and written connect the loop to its writer goroutine when
	// writes are asynchronous (nil otherwise).
	writes  chan queuedWrite
	written chan error
	// snapWritten reports the local snapshot saved off the queue's order
	// (replica.SnapshotWriter).
	snapWritten chan error
	wrote       chan struct{} // closed when the writer goroutine returns
	// decoded signals that a decode of a snapshot from the leader ended
	// (replica.Config.DecodeSnapshots); one signal pending is enough, as
	// SnapshotDecoded looks at the newest.
	decoded chan struct{}

	mu     sync.Mutex
	status Status
}

// New builds a replica from its store (restoring the store's newest
// snapshot into the state machine) without starting it: Start does.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.InboxMessages == 0 {
		cfg.InboxMessages = DefaultInboxMessages
	}
	if cfg.QueuedProposals == 0 {
		cfg.QueuedProposals = DefaultQueuedProposals
	}
	if cfg.SlowTurn == 0 {
		cfg.SlowTurn = DefaultSlowTurn
	}
	if cfg.MaxApplyPerTurn == 0 {
		cfg.MaxApplyPerTurn = DefaultMaxApplyPerTurn
	}
	// The replica stops between Readys: smaller Readys keep a turn near
	// its bound.
	applyBatch := max(1, min(int(cfg.MaxApplyPerTurn/4), cfg.Limits.MaxBatchEntries))
	if cfg.Limits.MaxApplyEntries == 0 || cfg.Limits.MaxApplyEntries > applyBatch {
		cfg.Limits.MaxApplyEntries = applyBatch
	}
	n := &Node{
		cfg: cfg, id: cfg.ID,
		inbox:     make(chan paxos.Message, cfg.InboxMessages),
		proposals: make(chan *proposal, cfg.QueuedProposals),
		quit:      make(chan struct{}),
		stopped:   make(chan struct{}),
		decoded:   make(chan struct{}, 1),
		calls:     make(chan func()),
		hash:      &hashsm.Machine{},
		pending:   map[uint64]*proposal{},
		nextID:    cfg.NextID,
	}
	if n.nextID == nil {
		n.nextID = counterIDs(cfg.ID)
	}
	n.sm = n.hash
	if cfg.Cron != nil {
		if err := n.startCron(cfg.Cron); err != nil {
			return nil, err
		}
	}
	n.store = &countingStore{Store: cfg.Store, n: n}
	rep, err := replica.New(replica.Config{
		ID: cfg.ID, Membership: cfg.Membership, Timing: cfg.Timing, Limits: cfg.Limits,
		Rand:  rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.ID))),
		Store: n.store, StateMachine: n.sm, Send: cfg.Send,
		Snapshots: cfg.Snapshots, Observer: observer{n: n},
		Writer:     n.writerFor(!cfg.InlineWrites),
		Rebuilding: cfg.Rebuilding,
		// A snapshot to send is read on a goroutine of its own (a large
		// one takes seconds); the store is safe for concurrent use and
		// its reads do not hold up its writes.
		ReadSnapshots: func(read func()) { go read() },
		// A snapshot from the leader is decoded on a goroutine of its own
		// (a million jobs take 2-4.5 s), the loop going on meanwhile.
		DecodeSnapshots:    n.decodeSnapshot,
		MaxApplyPerProcess: cfg.MaxApplyPerTurn,
	})
	if err != nil {
		return nil, fmt.Errorf("node: replica %d: %w", cfg.ID, err)
	}
	n.rep = rep
	n.publish()
	return n, nil
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.ID == paxos.None:
		return bad("ID is required")
	case c.ID > MaxReplicaID:
		return bad("ID %d is over %d", c.ID, MaxReplicaID)
	case c.Store == nil || c.Send == nil:
		return bad("Store and Send are required")
	case c.TickInterval <= 0:
		return bad("TickInterval must be positive: %v", c.TickInterval)
	case c.SlowTurn < 0:
		return bad("SlowTurn must not be negative: %v", c.SlowTurn)
	case c.InboxMessages < 0 || c.QueuedProposals < 0:
		return bad("queue bounds must not be negative: %d, %d", c.InboxMessages, c.QueuedProposals)
	case c.Cron != nil:
		return c.Cron.validate()
	}
	return nil
}

// MaxReplicaID is the highest replica ID: proposal IDs carry it in 16
// bits (counterIDs), so two replicas above it could share theirs.
const MaxReplicaID = 1<<16 - 1

// counterIDs numbers proposals with id in the top 16 bits and a counter
// from a random start below, so that a restarted replica does not reuse
// the ids of its previous run.
func counterIDs(id paxos.ReplicaID) func() uint64 {
	var next atomic.Uint64
	next.Store(uint64(id)<<48 | rand.Uint64()&(1<<32-1))
	return func() uint64 { return next.Add(1) }
}

// Start starts the replica's goroutines, labelled with its ID so that a
// CPU profile tells replicas apart (pprof -tagfocus replica=1). A second
// call does nothing.
func (n *Node) Start() {
	n.startOnce.Do(func() {
		labels := pprof.Labels("replica", strconv.Itoa(int(n.id)))
		go pprof.Do(context.Background(), labels, func(context.Context) { n.run() })
	})
}

// Stop stops the replica as a crash of its process would: its synced
// writes stay in its store, its status says ErrStopped, and its pending
// proposals fail with ErrStopped. It waits until the loop has returned
// (the store is then free to close). Stop on a Node never started returns
// at once.
func (n *Node) Stop() {
	n.stopOnce.Do(func() { close(n.quit) })
	started := true
	n.startOnce.Do(func() {
		// Never started: the loop will never run, so stop here what it
		// would have stopped (nothing was taken, nothing is pending).
		started = false
		n.publishErr(ErrStopped)
		close(n.stopped)
	})
	if !started {
		return
	}
	<-n.stopped
}

// Done is closed when the replica's loop has returned (after Stop, or a
// failure: Status().Err says which).
func (n *Node) Done() <-chan struct{} { return n.stopped }

// Deliver hands a message from a peer to the replica. It never blocks: a
// message that finds the inbox full is dropped and counted (Dropped).
func (n *Node) Deliver(m paxos.Message) {
	select {
	case n.inbox <- m:
	default:
		n.dropped.Add(1)
	}
}

// Dropped is how many messages Deliver dropped for a full inbox.
func (n *Node) Dropped() uint64 { return n.dropped.Load() }

// Call runs fn on the replica's loop between two turns, with the replica
// (not safe to touch from anywhere else; fn must not keep it), and
// processes what fn changed. It returns an error if the replica stopped
// or ctx ended before fn ran.
func (n *Node) Call(ctx context.Context, fn func(*replica.Replica)) error {
	return n.call(ctx, func() { fn(n.rep) })
}

// ReportSuspect tells the replica's core that a failure detector suspects
// peer id (see paxos.Node.ReportSuspect).
func (n *Node) ReportSuspect(ctx context.Context, id paxos.ReplicaID) error {
	return n.Call(ctx, func(r *replica.Replica) { r.Node().ReportSuspect(id) })
}

// StepDown gives up this replica's leadership and names a successor
// (paxos.Node.StepDown); paxos.ErrNotLeader if it does not lead.
func (n *Node) StepDown(ctx context.Context) (paxos.ReplicaID, error) {
	var successor paxos.ReplicaID
	var err error
	if cerr := n.Call(ctx, func(r *replica.Replica) { successor, err = r.Node().StepDown() }); cerr != nil {
		return paxos.None, cerr
	}
	return successor, err
}

func (n *Node) call(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	call := func() {
		defer close(done)
		fn()
	}
	if err := n.sendCall(ctx, call); err != nil {
		return err
	}
	<-done // the loop runs a call as soon as it takes it
	return nil
}

// sendCall hands fn to the loop, which runs it as soon as it takes it.
func (n *Node) sendCall(ctx context.Context, fn func()) error {
	select {
	case n.calls <- fn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopped:
		return n.stopErr()
	}
}

// maxWritesInFlight bounds the writes handed to the writer goroutine and
// not yet done; past it the loop stops taking Readys until one completes,
// and with them it stops sending anything: heartbeats, their replies and
// accepts, and it steps no peer's message (inboxQueue), which the core
// would take without bound. A leader's proposals the core bounds itself
// (MaxUncommittedSlots), so for them the bound is only a backstop. It was
// 64: with 512 writers on three processes sharing a slow disk, a loop
// turn takes about a millisecond, so 64 turns fill it during one sync of
// 100-500 ms, and a leader whose heartbeats and followers' replies waited
// so for several syncs gave up its leadership for want of a quorum (2 runs
// in 25 of the etcd comparison). It is not a hard ceiling: a completed
// write's Process (replica.WriteDone) may queue a few Readys past it, so
// the writer never assumes a queue that fits in one batch, and the
// channels hold twice as many.
const maxWritesInFlight = 4096

// writerFor returns the replica.Writer for the cluster's options: nil for
// synchronous writes, else a queue to a writer goroutine that run starts.
func (n *Node) writerFor(async bool) replica.Writer {
	if !async {
		return nil
	}
	// Capacities exceed what can be in flight: neither side ever blocks
	// on the other.
	n.writes = make(chan queuedWrite, 2*maxWritesInFlight)
	n.written = make(chan error, 2*maxWritesInFlight)
	n.snapWritten = make(chan error, 1) // the replica has one in flight at most
	n.wrote = make(chan struct{})
	return queueWriter(n.writes)
}

// decodeSnapshot is the replica's Config.DecodeSnapshots: the decode on a
// goroutine of its own, then a signal to the loop.
func (n *Node) decodeSnapshot(decode func()) {
	go func() {
		decode()
		select {
		case n.decoded <- struct{}{}:
		default: // a signal is pending: the loop will look at the newest
		}
	}()
}

// queuedWrite is a write for the writer goroutine; encode, when set,
// fills in u's snapshot data first (replica.SnapshotWriter).
type queuedWrite struct {
	u      storage.Update
	encode func() ([]byte, error)
}

type queueWriter chan queuedWrite

func (q queueWriter) Write(u storage.Update) { q <- queuedWrite{u: u} }

func (q queueWriter) WriteSnapshot(u storage.Update, encode func() ([]byte, error)) {
	q <- queuedWrite{u: u, encode: encode}
}

// write is the writer goroutine: it takes every write queued up, saves them
// as one merged, synced batch (group commit across Readys), and reports a
// result for each, in order.
//
// A local snapshot (queued with its encoder) is encoded, and its image
// written, on a goroutine of its own, and saved as soon as that is done,
// between two batches; the writes queued after it go on meanwhile (a
// large state's snapshot would otherwise hold every append, and every
// reply, for as long as its encode and its save take: with the state
// growing by 8,000 job writes a second, it made the p99 two to three
// times longer). A write that carries a snapshot from the leader waits
// for it: that one is newer.
func (n *Node) write() {
	defer close(n.wrote)
	var snap *localSnapshot // being encoded
	saveSnap := func() {
		<-snap.encoded
		err := snap.err
		if err == nil {
			err = n.store.Save(snap.u)
		}
		snap = nil
		n.snapWritten <- err
	}
	batch := make([]storage.Update, 0, maxWritesInFlight)
	take := func(q queuedWrite) {
		switch {
		case q.encode != nil:
			if snap != nil {
				panic("node: a local snapshot queued while another is in flight")
			}
			snap = encodeLocalSnapshot(q, n.store)
			return
		case q.u.Snapshot != nil && snap != nil:
			// The leader's snapshot lands after the local one.
			n.saveBatch(batch)
			batch = batch[:0]
			saveSnap()
		}
		batch = append(batch, q.u)
	}
	for {
		var encoded <-chan struct{} // nil, which blocks, with no snapshot
		if snap != nil {
			encoded = snap.encoded
		}
		var q queuedWrite
		var ok bool
		select {
		case <-encoded:
			saveSnap()
			continue
		case q, ok = <-n.writes:
		}
		// Stopping (!ok): a snapshot not yet saved is not taken (the log
		// on disk still holds everything it covers).
		batch = batch[:0]
	drain:
		for ok {
			take(q)
			if len(batch) == cap(batch) {
				// Full: the next write waits for the next batch. Reading
				// it here, before this check, would drop it unsaved.
				break drain
			}
			select {
			case q, ok = <-n.writes:
			default:
				break drain
			}
		}
		n.saveBatch(batch)
		if !ok {
			return
		}
	}
}

// saveBatch saves batch as one synced write and reports each of its
// writes, in order.
func (n *Node) saveBatch(batch []storage.Update) {
	if len(batch) == 0 {
		return
	}
	var err error
	hoptrace.Mark(hoptrace.NodeSaveStart, uint32(len(batch)))
	if merged := storage.Merge(batch); !merged.IsEmpty() {
		err = n.store.Save(merged)
	}
	hoptrace.Mark(hoptrace.NodeSaveEnd, 0)
	for range batch {
		n.written <- err
	}
}

// localSnapshot is a local snapshot being encoded off the writer's
// queue: encoded is closed once u holds the image, or err why not.
type localSnapshot struct {
	u       storage.Update
	err     error
	encoded chan struct{}
}

// encodeLocalSnapshot encodes q's snapshot on a goroutine of its own and,
// if the store can, stages its image there too (storage.SnapshotStager):
// its Save on the writer then writes only the snapshot's header, and the
// appends queued behind it wait for no image to reach the disk.
func encodeLocalSnapshot(q queuedWrite, store storage.Store) *localSnapshot {
	ls := &localSnapshot{u: q.u, encoded: make(chan struct{})}
	index := q.u.Snapshot.Meta.Index
	go func() {
		defer close(ls.encoded)
		ls.u.Snapshot.Data, ls.err = q.encode()
		if ls.err != nil {
			ls.err = fmt.Errorf("encoding the snapshot at %d: %w", index, ls.err)
			return
		}
		if stager, ok := store.(storage.SnapshotStager); ok {
			if err := stager.StageSnapshot(*ls.u.Snapshot); err != nil {
				ls.err = fmt.Errorf("writing the image of the snapshot at %d: %w", index, err)
			}
		}
	}()
	return ls
}

// proposal is one Propose call waiting for its command to be applied.
type proposal struct {
	at   time.Time // when Propose was called
	ctx  context.Context
	id   uint64
	data []byte     // id, then the command
	done chan error // buffered: receives exactly one result
	// then, in cron mode, runs on the loop right after the command
	// applied without error, before done is answered: it reads the state
	// the command left without another visit to the loop.
	then func(*launcher.Launcher)
}

// ID returns the replica's ID.
func (n *Node) ID() paxos.ReplicaID { return n.id }

// Status returns what the replica last published about itself.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.status
}

// Propose proposes cmd through this replica and returns once this replica
// has applied it (in cron mode, with the state's verdict: nil, or why the
// state refused the command, wrapping state.ErrConflict, state.ErrDecode
// and the like). It returns paxos.ErrNotLeader if the replica is not
// leader (retry on the leader), ErrDropped if a leader change gave the
// command's slot to another value (safe to retry), or ctx's error if ctx
// ends first (the command may still be applied later).
func (n *Node) Propose(ctx context.Context, cmd []byte) error {
	return n.propose(ctx, cmd, nil)
}

func (n *Node) propose(ctx context.Context, cmd []byte, then func(*launcher.Launcher)) error {
	p := n.newProposal(ctx, cmd, then)
	select {
	case n.proposals <- p:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopped:
		return n.stopErr()
	}
	return n.await(ctx, p)
}

// newProposal frames cmd behind a fresh proposal ID. It is safe to call
// from any goroutine (nextID is atomic).
func (n *Node) newProposal(ctx context.Context, cmd []byte, then func(*launcher.Launcher)) *proposal {
	id := n.nextID()
	return &proposal{at: time.Now(), ctx: ctx, id: id, data: frameCommand(id, cmd), done: make(chan error, 1), then: then}
}

// frameCommand puts proposal id in front of cmd.
func frameCommand(id uint64, cmd []byte) []byte {
	data := make([]byte, idBytes+len(cmd))
	binary.BigEndian.PutUint64(data, id)
	copy(data[idBytes:], cmd)
	return data
}

// await waits for the answer to p, which the loop has taken.
func (n *Node) await(ctx context.Context, p *proposal) error {
	select {
	case err := <-p.done:
		hoptrace.Mark(hoptrace.NodeAwaitDone, 0)
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopped:
		// The loop answered every proposal it took before stopping.
		select {
		case err := <-p.done:
			return err
		default:
			return n.stopErr()
		}
	}
}

func (n *Node) stopErr() error {
	if err := n.Status().Err; err != nil {
		return err
	}
	return ErrStopped
}

// run is the replica's loop: wait for any input, drain every input queued
// behind it, then Process once, so that a burst of proposals and messages
// costs one Ready and one synced Save.
func (n *Node) run() {
	defer close(n.stopped)
	if n.writes != nil {
		go n.write()
		defer func() {
			close(n.writes)
			<-n.wrote // the store must not close under a write
		}()
	}
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	started := time.Now()
	n.started = started
	maxDrain := cap(n.inbox) + cap(n.proposals)
	var clock turnClock
	for {
		select {
		case <-n.workLeft():
			// A bounded Process left entries to apply: this turn's
			// Process goes on with them.
			clock.begin(InputWorkLeft, n.rep.Applied())
		case <-n.quit:
			n.failAll(ErrStopped)
			n.publishErr(ErrStopped)
			return
		case m := <-n.inboxQueue():
			clock.begin(InputMessage, n.rep.Applied())
			n.step(m)
		case p := <-n.proposalQueue():
			clock.begin(InputProposal, n.rep.Applied())
			n.take(p)
		case now := <-ticker.C:
			clock.begin(InputTick, n.rep.Applied())
			n.tick(now.Sub(started))
		case err := <-n.written:
			clock.begin(InputWrite, n.rep.Applied())
			if !n.writeDone(err) {
				return
			}
		case err := <-n.snapWritten:
			clock.begin(InputSnapshotWritten, n.rep.Applied())
			if err := n.rep.SnapshotWritten(err); err != nil {
				n.fail(err)
				return
			}
		case <-n.decoded:
			clock.begin(InputSnapshotDecoded, n.rep.Applied())
			if err := n.rep.SnapshotDecoded(); err != nil {
				n.fail(err)
				return
			}
		case <-n.resultsReady():
			clock.begin(InputResults, n.rep.Applied())
			n.deliverResults()
		case call := <-n.calls:
			clock.begin(InputCall, n.rep.Applied())
			call()
		case <-n.wake.c:
			// The launcher's next due time: the Step below acts on it.
			clock.begin(InputWake, n.rep.Applied())
		}
		clock.t.First = clock.lap()
		// Each completed write's Process may apply MaxApplyPerTurn
		// entries (and a Ready more): once the turn has applied that many
		// it takes no more inputs and leaves Process to the next turn,
		// which workLeft starts at once.
		budgetLeft := func() bool { return n.rep.Applied()-clock.applied < n.cfg.MaxApplyPerTurn }
	drain:
		// Bounded, so that a flood of inputs cannot postpone the Save
		// (and with it every reply) indefinitely.
		for range maxDrain {
			if !budgetLeft() {
				break
			}
			select {
			case m := <-n.inboxQueue():
				n.step(m)
			case p := <-n.proposalQueue():
				n.take(p)
			case now := <-ticker.C:
				n.tick(now.Sub(started))
			case err := <-n.written:
				if !n.writeDone(err) {
					return
				}
			case <-n.resultsReady():
				n.deliverResults()
			default:
				break drain
			}
			clock.t.Drained++
		}
		n.retryBusy()
		clock.t.Drain = clock.lap()
		if budgetLeft() && !n.process() {
			return
		}
		clock.t.Process = clock.lap()
		if n.cron != nil && !n.stepLauncher() {
			return
		}
		if n.cron != nil {
			n.armWake()
		}
		clock.t.Launcher = clock.lap()
		n.endTurn(clock.end(n.rep.Applied()))
		n.publish()
	}
}

// endTurn keeps the longest turn for Status and reports a slow one.
func (n *Node) endTurn(t Turn) {
	n.longestTurn = max(n.longestTurn, t.Took)
	if t.Took >= n.cfg.SlowTurn && n.cfg.OnSlowTurn != nil {
		n.cfg.OnSlowTurn(t)
	}
}

// workLeft is a closed channel, ready at once, while the replica has work
// that a bounded Process left and can go on with it; nil, which blocks,
// otherwise.
func (n *Node) workLeft() <-chan struct{} {
	if n.rep.InFlight() < maxWritesInFlight && n.rep.HasWork() {
		return closedChan
	}
	return nil
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// process runs the core's pending Readys, unless too many asynchronous
// writes are in flight; false means the replica failed.
func (n *Node) process() bool {
	if n.rep.InFlight() >= maxWritesInFlight {
		return true
	}
	if err := n.rep.Process(); err != nil {
		n.fail(err)
		return false
	}
	return true
}

// writeDone hands a completed write to the replica; false means the
// replica failed and the loop must stop.
func (n *Node) writeDone(err error) bool {
	hoptrace.Mark(hoptrace.NodeWriteDone, 0)
	if err := n.rep.WriteDone(err); err != nil {
		n.fail(err)
		return false
	}
	return true
}

func (n *Node) fail(err error) {
	n.failAll(err)
	n.publishErr(err)
}

// inboxQueue is nil, which blocks, while maxWritesInFlight writes wait
// for the writer: the core then hands out no Ready, so nothing a message
// changes could be written or answered, and stepping them would only
// grow the core's unwritten state (a follower's log by every batch a
// leader resends) for as long as the disk stalls. Messages wait in the
// inbox meanwhile, and Deliver drops those that do not fit (the protocol
// retransmits).
func (n *Node) inboxQueue() chan paxos.Message {
	if n.rep.InFlight() >= maxWritesInFlight {
		return nil
	}
	return n.inbox
}

// proposalQueue is nil, which blocks, while the core refuses proposals as
// busy: the queue then pushes back on callers instead of spinning.
func (n *Node) proposalQueue() chan *proposal {
	if len(n.busy) > 0 {
		return nil
	}
	return n.proposals
}

// step feeds a message to the core without processing it yet. A malformed
// message changes nothing; a halt shows in the next Process.
//
// The core's clock is caught up first: a lease granted on a heartbeat or
// a prepare counts LeaseTicks from the core's now, and after a stall of
// the loop the ticker's input may wait behind the message, so the grant
// would count from before the stall and lapse early, while the leader
// counts its lease from its send (found in review).
func (n *Node) step(m paxos.Message) {
	hoptrace.Mark(hoptrace.NodeStep, hoptrace.Message(uint8(m.Type), uint64(m.From)))
	n.catchUpTicks()
	_ = n.rep.Node().Step(m)
}

// tick feeds the core every tick due since the loop started. Counting from
// elapsed wall time, not ticker fires (the ticker drops fires while a slow
// Save holds the loop), keeps the replica's clock from running slow, which
// would make a leader overestimate its lease.
func (n *Node) tick(elapsed time.Duration) {
	due := int64(elapsed / n.cfg.TickInterval)
	for ; n.ticks < due; n.ticks++ {
		n.rep.TickTime()
	}
}

// catchUpTicks feeds the core the ticks due by now, before a decision
// that rests on its lease. After a stall of the loop (a GC or VM pause, a
// slow Save) the ticker's input waits among the others and a turn may run
// a call or the launcher first: the core's clock would then still be at
// the stall's start, and a lease that ran out during it would look held.
func (n *Node) catchUpTicks() {
	if !n.started.IsZero() {
		n.tick(time.Since(n.started))
	}
}

// take hands a new proposal to the core, or queues it while the core is
// busy, behind the proposals it refused before, in order.
func (n *Node) take(p *proposal) {
	hoptrace.Mark(hoptrace.NodeTake, 0)
	if len(n.busy) > 0 || n.offer(p) {
		n.busy = append(n.busy, p)
	}
}

// retryBusy offers the queued busy proposals again, in order, since the
// messages just stepped may have let the chosen index advance.
func (n *Node) retryBusy() {
	for len(n.busy) > 0 && !n.offer(n.busy[0]) {
		n.busy[0] = nil
		n.busy = n.busy[1:]
	}
}

// offer proposes p and reports whether the core refused it as busy; any
// other outcome is final (p is pending or answered).
func (n *Node) offer(p *proposal) (busy bool) {
	if err := p.ctx.Err(); err != nil {
		p.done <- err // nobody waits: do not spend a slot on it
		return false
	}
	slot, err := n.rep.Propose(p.data)
	switch {
	case errors.Is(err, paxos.ErrBusy):
		n.refused++
		return true
	case err != nil:
		p.done <- err
	default:
		n.pending[slot] = p
	}
	return false
}

// applied answers the proposal waiting for e's slot, if any: the slot holds
// either its command or, after a leader change, another value.
func (n *Node) applied(e paxos.Entry) {
	hoptrace.Mark(hoptrace.NodeApplied, uint32(e.Slot))
	p, ok := n.pending[e.Slot]
	if !ok {
		return
	}
	delete(n.pending, e.Slot)
	id, ok := frameID(e.Data)
	switch {
	case e.Kind != paxos.EntryCommand || !ok || id != p.id:
		p.done <- ErrDropped
	case n.cron != nil:
		n.committed(p)
		verdict := n.cron.verdictOf(e.Slot)
		if verdict == nil && p.then != nil {
			p.then(n.cron.l)
		}
		p.done <- verdict
	default:
		n.committed(p)
		p.done <- nil
	}
}

func (n *Node) committed(p *proposal) {
	if n.cfg.OnCommit != nil {
		n.cfg.OnCommit(time.Since(p.at))
	}
}

// restored fails the proposals whose slots a snapshot skipped over.
func (n *Node) restored(index uint64) {
	n.restores++
	for slot, p := range n.pending {
		if slot <= index {
			delete(n.pending, slot)
			p.done <- ErrOutcomeUnknown
		}
	}
}

func (n *Node) failAll(err error) {
	for slot, p := range n.pending {
		delete(n.pending, slot)
		p.done <- err
	}
	for _, p := range n.busy {
		p.done <- err
	}
	n.busy = nil
}

// publish makes the replica's state visible to other goroutines and wakes
// waiters if it changed.
func (n *Node) publish() {
	core := n.rep.Node()
	ns := core.Status()
	s := Status{
		ID: n.id, Role: ns.Role, Leader: ns.Leader, Ballot: ns.Ballot,
		Chosen: ns.Chosen, Applied: n.rep.Applied(),
		Commands: n.hash.Commands(), Hash: n.hash.Hash(),
		Saves: n.store.saves.Load(), SavedEntries: n.store.savedEntries.Load(),
		BusyRefusals:  n.refused,
		LongestTurn:   n.longestTurn,
		Restores:      n.restores,
		SnapshotIndex: n.snapIndex,
		Launching:     n.cron != nil && n.cron.l.Leading(),
		Rebuilding:    ns.Rebuilding,
		QuorumLost:    core.Stats().QuorumLost,
	}
	if n.cron != nil {
		s.ClusterID = n.cron.l.Machine().ClusterID()
	}
	if until, ok := core.LeaseValidUntil(); ok && until > core.Now() {
		s.Lease = time.Duration(until-core.Now()) * n.cfg.TickInterval
	}
	n.mu.Lock()
	// Now and Lease change every turn; a change of anything else wakes
	// the waiters (OnChange).
	prev := n.status
	prev.Now, prev.Lease = s.Now, s.Lease
	changed := s != prev
	s.Now = time.Now()
	n.status = s
	n.mu.Unlock()
	if changed {
		n.changed()
	}
}

func (n *Node) publishErr(err error) {
	n.mu.Lock()
	n.status.Err = err
	n.mu.Unlock()
	n.changed()
}

// observer matches applied entries to waiting proposals.
type observer struct {
	replica.NopObserver
	n *Node
}

func (o observer) Applied(e paxos.Entry) { o.n.applied(e) }
func (o observer) Restored(index uint64) {
	o.n.snapIndex = index
	o.n.restored(index)
}
func (o observer) SnapshotTaken(index uint64) {
	o.n.snapIndex = index
	if o.n.cfg.OnSnapshot != nil {
		o.n.cfg.OnSnapshot(index)
	}
}

// changed tells OnChange that the published status changed.
func (n *Node) changed() {
	if n.cfg.OnChange != nil {
		n.cfg.OnChange()
	}
}

// frameID returns the proposal id a framed entry carries.
func frameID(data []byte) (uint64, bool) {
	if len(data) < idBytes {
		return 0, false
	}
	return binary.BigEndian.Uint64(data), true
}

// countingStore counts Saves for Status and reports them to OnSave. Save
// runs on the writer goroutine (or the loop, with InlineWrites); the
// counters are read by the loop.
type countingStore struct {
	storage.Store
	n            *Node
	saves        atomic.Uint64
	savedEntries atomic.Uint64
}

// StageSnapshot passes staging on to a store that can stage; one that
// cannot writes the image in its Save, so there is nothing to do ahead.
func (s *countingStore) StageSnapshot(snap paxos.Snapshot) error {
	if stager, ok := s.Store.(storage.SnapshotStager); ok {
		return stager.StageSnapshot(snap)
	}
	return nil
}

func (s *countingStore) Save(u storage.Update) error {
	began := time.Now()
	if err := s.Store.Save(u); err != nil {
		return err
	}
	if !u.IsEmpty() {
		s.saves.Add(1)
		s.savedEntries.Add(uint64(len(u.Entries)))
		if s.n.cfg.OnSave != nil {
			s.n.cfg.OnSave(s.n.id, u)
		}
		if s.n.cfg.OnSaveTimed != nil {
			s.n.cfg.OnSaveTimed(len(u.Entries), time.Since(began))
		}
	}
	return nil
}

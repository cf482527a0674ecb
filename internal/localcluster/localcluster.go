// Package localcluster owns a real-time, multi-goroutine driver for a
// cluster of replicas in one process: the server-style wrapper over the
// deterministic glue of cron/replica, as etcd raft's node.go is over
// RawNode.
//
// It owns, per replica, the one goroutine that touches that replica's
// replica.Replica, store and state machine; the wall-clock ticker that
// feeds it ticks; the in-process transport between replicas (bounded
// channels that drop a message when full, since the protocol retransmits);
// and proposal tracking, so that a caller of Propose waits until the leader
// has applied its command. Each loop turn drains every queued message and
// proposal before one Process, so that many inputs become one Ready and one
// synced Save (group commit).
//
// By default the replicated state machine is a counter with a running hash
// of what it applied, enough to check agreement and to benchmark the write
// path on a real disk. With Options.Cron, each replica runs the cron layer
// instead: the launcher (cron/launcher) over the cron state, stepped on
// the replica's goroutine after every loop turn, calling a Dispatcher
// whose results come back to that goroutine, so that the launch protocol
// can be tested and measured end to end on a real disk. The package exists
// for benchmarks and tests; a networked server would replace the transport
// and the Dispatcher, not the loop.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/cron/replica"
	"paxcron/internal/hashsm"
	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/pebblestore"
)

// Options configures Start.
type Options struct {
	// Dir holds one Pebble store per replica (Dir/replica-<id>), on the real
	// disk with every Save synced. Required unless OpenStore is set.
	Dir string
	// Replicas is the number of voters, with IDs 1..Replicas.
	Replicas int
	// TickInterval is the wall-clock length of one paxos tick.
	TickInterval time.Duration
	// Timing and Limits configure every replica's paxos core.
	Timing paxos.Timing
	Limits paxos.Limits
	// Snapshots is every replica's snapshot policy (zero: never snapshot).
	Snapshots replica.SnapshotPolicy
	// Seed seeds each replica's election randomness (with its ID).
	Seed uint64
	// OpenStore, when set, opens replica id's store instead of Pebble in
	// Dir (tests pass in-memory stores). The cluster closes what it opens.
	OpenStore func(id paxos.ReplicaID) (storage.Store, error)
	// InlineWrites makes each replica write on its own goroutine, which
	// then batches what arrives during each sync. By default each replica
	// has a writer goroutine that merges the writes queued up into one
	// synced batch while the replica keeps stepping: it answers its peers
	// while its own write is in flight, which measured 1.4-1.8 times the
	// commits per second at 8 proposers (BENCHMARKS.md).
	InlineWrites bool
	// OnSave, when set, is called on the replica's writer goroutine after
	// each successful Save (benchmarks record batch sizes with it). It must
	// be quick and safe for concurrent use by several replicas.
	OnSave func(id paxos.ReplicaID, u storage.Update)
	// InboxMessages bounds each replica's incoming message queue; a message
	// that finds it full is dropped. Zero means DefaultInboxMessages.
	InboxMessages int
	// QueuedProposals bounds each replica's queue of proposals not yet
	// handed to the core; Propose waits for room. Zero means
	// DefaultQueuedProposals.
	QueuedProposals int
	// Cron, when set, makes every replica run the cron layer instead of
	// the hash machine; commands are then encoded state.Commands
	// (ProposeCommand).
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

// DefaultOptions returns options for a three-replica cluster on the real
// disk under dir with a 50 ms tick (the tick paxos.DefaultTiming suits).
func DefaultOptions(dir string) Options {
	return Options{
		Dir:          dir,
		Replicas:     3,
		TickInterval: 50 * time.Millisecond,
		Timing:       paxos.DefaultTiming(),
		Limits:       paxos.DefaultLimits(),
		Snapshots:    replica.DefaultSnapshotPolicy(),
	}
}

var (
	// ErrConfig wraps every configuration error.
	ErrConfig = errors.New("localcluster: invalid options")
	// ErrClosed is returned by calls on a closed cluster.
	ErrClosed = errors.New("localcluster: closed")
	// ErrDropped is returned by Propose when another value was chosen for
	// the command's slot (a leader change): the command was not chosen
	// anywhere, so retrying it cannot apply it twice.
	ErrDropped = errors.New("localcluster: command not chosen (its slot went to another value); safe to retry")
	// ErrOutcomeUnknown is returned by Propose when the replica restored a
	// snapshot past the command's slot before seeing the slot applied: the
	// command may or may not have been chosen.
	ErrOutcomeUnknown = errors.New("localcluster: outcome unknown (state restored from a snapshot past the command's slot)")
	// ErrStopped is the status error of a replica Stop stopped, and what
	// its pending proposals fail with: like a crash, their commands may
	// or may not be chosen.
	ErrStopped = errors.New("localcluster: replica stopped")
)

// idBytes is the length of the unique id Propose puts before each command,
// by which the proposing replica recognises its command when applied.
const idBytes = 8

// Status is what a replica's goroutine last published about itself.
type Status struct {
	ID     paxos.ReplicaID
	Role   paxos.Role
	Leader paxos.ReplicaID
	// Ballot is the ballot led, when Role is paxos.Leader.
	Ballot  paxos.Ballot
	Chosen  uint64
	Applied uint64
	// Commands and Hash are the state machine: the count of commands
	// applied and a running hash over them and their slots.
	Commands uint64
	Hash     uint64
	// Saves counts synced Saves and SavedEntries the entries they wrote.
	Saves        uint64
	SavedEntries uint64
	// BusyRefusals counts proposals the core refused with paxos.ErrBusy
	// (each was queued and offered again, not failed).
	BusyRefusals uint64
	// LongestTurn is the longest a turn of the replica's loop took, from
	// the input that woke it (that input's own handling not counted) to
	// its end: its other inputs, Process with its synced writes and
	// snapshots, and in cron mode the launcher's Step. While a turn runs
	// the replica reads no message and no tick, so a turn as long as the
	// election timeout can cost a leader its leadership.
	LongestTurn time.Duration
	// Restores counts the snapshots restored into the state machine: the
	// store's at start-up, and those a leader sent because this replica
	// had fallen behind the start of its log.
	Restores uint64
	// Launching: in cron mode, the replica's launcher acts as the
	// leader's (promoted: it leads, holds the lease and caught up).
	Launching bool
	// Err is the failure that stopped the replica, if any.
	Err error
}

// Cluster is a running local cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	opts     Options
	replicas []*Replica // replicas[id-1]
	nextID   atomic.Uint64
	dropped  atomic.Uint64
	quit     chan struct{}

	closeOnce sync.Once
	closeErr  error

	mu sync.Mutex
	// changed is closed and replaced whenever a replica publishes a new
	// status, so that waiters block on a channel instead of polling.
	changed chan struct{}
}

// Start opens every replica's store and starts its goroutine.
func Start(opts Options) (*Cluster, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.InboxMessages == 0 {
		opts.InboxMessages = DefaultInboxMessages
	}
	if opts.QueuedProposals == 0 {
		opts.QueuedProposals = DefaultQueuedProposals
	}
	c := &Cluster{opts: opts, quit: make(chan struct{}), changed: make(chan struct{})}
	var members paxos.Membership
	for i := 1; i <= opts.Replicas; i++ {
		members.Voters = append(members.Voters, paxos.ReplicaID(i))
	}
	for _, id := range members.Voters {
		r, err := c.newReplica(id, members)
		if err != nil {
			for _, r := range c.replicas {
				_ = r.store.Close()
			}
			return nil, err
		}
		c.replicas = append(c.replicas, r)
	}
	for _, r := range c.replicas {
		r.publish()
		// Labelled, so that a CPU profile tells each replica's loop (the
		// leader's from its followers') apart: pprof -tagfocus replica=1.
		go pprof.Do(context.Background(), pprof.Labels("replica", strconv.Itoa(int(r.id))), func(context.Context) { r.run() })
	}
	return c, nil
}

func (o *Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case o.Replicas <= 0:
		return bad("Replicas must be positive: %d", o.Replicas)
	case o.TickInterval <= 0:
		return bad("TickInterval must be positive: %v", o.TickInterval)
	case o.Dir == "" && o.OpenStore == nil:
		return bad("Dir or OpenStore is required")
	case o.InboxMessages < 0 || o.QueuedProposals < 0:
		return bad("queue bounds must not be negative: %d, %d", o.InboxMessages, o.QueuedProposals)
	case o.Cron != nil:
		return o.Cron.validate()
	}
	return nil
}

func (c *Cluster) newReplica(id paxos.ReplicaID, members paxos.Membership) (*Replica, error) {
	store, err := c.openStore(id)
	if err != nil {
		return nil, err
	}
	r := &Replica{
		id: id, c: c,
		inbox:     make(chan paxos.Message, c.opts.InboxMessages),
		proposals: make(chan *proposal, c.opts.QueuedProposals),
		quit:      make(chan struct{}),
		stopped:   make(chan struct{}),
		hash:      &hashsm.Machine{},
		pending:   map[uint64]*proposal{},
	}
	r.sm = r.hash
	if c.opts.Cron != nil {
		if err := r.startCron(c.opts.Cron); err != nil {
			_ = store.Close()
			return nil, err
		}
	}
	r.store = &countingStore{Store: store, r: r}
	r.rep, err = replica.New(replica.Config{
		ID: id, Membership: members, Timing: c.opts.Timing, Limits: c.opts.Limits,
		Rand:  rand.New(rand.NewPCG(c.opts.Seed, uint64(id))),
		Store: r.store, StateMachine: r.sm, Send: c.send,
		Snapshots: c.opts.Snapshots, Observer: observer{r: r},
		Writer: r.writerFor(!c.opts.InlineWrites),
	})
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("localcluster: replica %d: %w", id, err)
	}
	return r, nil
}

func (c *Cluster) openStore(id paxos.ReplicaID) (storage.Store, error) {
	if c.opts.OpenStore != nil {
		return c.opts.OpenStore(id)
	}
	dir := filepath.Join(c.opts.Dir, fmt.Sprintf("replica-%d", id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	return pebblestore.Open(dir, pebblestore.Options{FS: vfs.Default, Logger: quietLogger{}})
}

// send is every replica's transport: it never blocks, and drops a message
// whose receiver's inbox is full.
func (c *Cluster) send(m paxos.Message) {
	if m.To == paxos.None || int(m.To) > len(c.replicas) {
		c.dropped.Add(1)
		return
	}
	select {
	case c.replicas[m.To-1].inbox <- m:
	default:
		c.dropped.Add(1)
	}
}

// Dropped returns how many messages the transport dropped.
func (c *Cluster) Dropped() uint64 { return c.dropped.Load() }

// Replica returns the replica with the given ID (1..Replicas), or nil.
func (c *Cluster) Replica(id paxos.ReplicaID) *Replica {
	if id == paxos.None || int(id) > len(c.replicas) {
		return nil
	}
	return c.replicas[id-1]
}

// Statuses returns every replica's last published status, by ID.
func (c *Cluster) Statuses() []Status {
	out := make([]Status, len(c.replicas))
	for i, r := range c.replicas {
		out[i] = r.Status()
	}
	return out
}

// Leader returns the replica that last reported itself leader (the one
// with the highest ballot if several still do), and whether there is one.
func (c *Cluster) Leader() (paxos.ReplicaID, bool) {
	var best Status
	for _, r := range c.replicas {
		s := r.Status()
		if s.Role == paxos.Leader && s.Err == nil && (best.ID == paxos.None || best.Ballot.Less(s.Ballot)) {
			best = s
		}
	}
	return best.ID, best.ID != paxos.None
}

// WaitLeader waits until some replica reports itself leader and returns it.
func (c *Cluster) WaitLeader(ctx context.Context) (paxos.ReplicaID, error) {
	var id paxos.ReplicaID
	err := c.waitUntil(ctx, func() bool {
		var ok bool
		id, ok = c.Leader()
		return ok
	})
	return id, err
}

// WaitApplied waits until every replica has applied through slot.
func (c *Cluster) WaitApplied(ctx context.Context, slot uint64) error {
	return c.waitUntil(ctx, func() bool {
		for _, r := range c.replicas {
			if r.Status().Applied < slot {
				return false
			}
		}
		return true
	})
}

// waitUntil re-checks cond after every published status change until it
// holds or ctx ends.
func (c *Cluster) waitUntil(ctx context.Context, cond func() bool) error {
	for {
		ch := c.changedChan()
		select {
		case <-c.quit:
			return ErrClosed
		default:
		}
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.quit:
			return ErrClosed
		}
	}
}

func (c *Cluster) changedChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *Cluster) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.changed)
	c.changed = make(chan struct{})
}

// Propose proposes cmd on the current leader and returns once the leader
// has applied it. It retries on another replica when the one asked is not
// (or no longer) leader or lost the command's slot in a leader change, and
// gives up when ctx ends: then, as after ErrOutcomeUnknown, the command
// may still be applied later. In cron mode cmd is an encoded
// state.Command, and once applied the error is the state's verdict on it:
// nil, or why it was refused (wrapping state.ErrConflict, state.ErrDecode
// and the like).
func (c *Cluster) Propose(ctx context.Context, cmd []byte) error {
	for {
		ch := c.changedChan()
		if id, ok := c.Leader(); ok {
			err := c.replicas[id-1].Propose(ctx, cmd)
			if !errors.Is(err, paxos.ErrNotLeader) && !errors.Is(err, ErrDropped) {
				return err
			}
		}
		// Wait for a status change (a new leader), or one tick in case
		// the status we read was already stale and nothing else changes.
		t := time.NewTimer(c.opts.TickInterval)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-c.quit:
			t.Stop()
			return ErrClosed
		}
		t.Stop()
	}
}

// Close stops every replica's goroutine, fails the proposals they held
// with ErrClosed and closes the stores. It returns the failures that
// stopped replicas, if any, and store close errors.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		close(c.quit)
		var errs []error
		for _, r := range c.replicas {
			<-r.stopped
			if err := r.Status().Err; !errors.Is(err, ErrStopped) {
				errs = append(errs, err)
			}
			errs = append(errs, r.store.Close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// Stop stops replica id's goroutine as a crash of its process would: its
// synced writes stay in its store (which Close closes), its status says
// ErrStopped so that Leader passes it over, and the others go on without
// it. It waits until the goroutine has returned.
func (c *Cluster) Stop(id paxos.ReplicaID) error {
	r := c.Replica(id)
	if r == nil {
		return fmt.Errorf("localcluster: no replica %d", id)
	}
	r.stopOnce.Do(func() { close(r.quit) })
	<-r.stopped
	return nil
}

// quietLogger drops Pebble's informational chatter and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)              {}
func (quietLogger) Errorf(format string, args ...any) { pebble.DefaultLogger.Errorf(format, args...) }
func (quietLogger) Fatalf(format string, args ...any) { pebble.DefaultLogger.Fatalf(format, args...) }

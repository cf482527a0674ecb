// Package localcluster owns an in-process cluster of replicas for tests,
// benchmarks and the demo: several internal/node replicas, each on its own
// store, connected by an in-process transport (bounded channels that drop
// a message when full, since the protocol retransmits), with a Propose
// that finds the leader and retries on another replica after a leader
// change. The server runs the same node behind a network transport
// instead.
//
// By default the replicated state machine is a counter with a running
// hash of what it applied, enough to check agreement and to benchmark the
// write path on a real disk. With Options.Cron, each replica runs the cron
// layer instead (node.CronOptions), so that the launch protocol can be
// tested and measured end to end on a real disk.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/cron/replica"
	"paxcron/cron/state"
	"paxcron/internal/node"
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
	// InlineWrites makes each replica write on its loop goroutine
	// (node.Config.InlineWrites); by default each has a writer goroutine.
	InlineWrites bool
	// OnSave, when set, is called after each successful Save of every
	// replica (node.Config.OnSave).
	OnSave func(id paxos.ReplicaID, u storage.Update)
	// InboxMessages and QueuedProposals bound each replica's queues (zero:
	// the node's defaults).
	InboxMessages   int
	QueuedProposals int
	// Cron, when set, makes every replica run the cron layer instead of
	// the hash machine; commands are then encoded state.Commands
	// (ProposeCommand).
	Cron *CronOptions
}

// CronOptions is every replica's cron layer (node.CronOptions).
type CronOptions = node.CronOptions

// Status is what a replica last published about itself.
type Status = node.Status

// Replica is one replica of the cluster.
type Replica = node.Node

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
	// ErrNotCron is returned by the calls that need Options.Cron.
	ErrNotCron = node.ErrNotCron
	// ErrDropped, ErrOutcomeUnknown and ErrStopped are the node's (see
	// there).
	ErrDropped        = node.ErrDropped
	ErrOutcomeUnknown = node.ErrOutcomeUnknown
	ErrStopped        = node.ErrStopped
)

// Cluster is a running local cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	opts     Options
	replicas []*node.Node // replicas[id-1]
	stores   []storage.Store
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

// Start opens every replica's store and starts its goroutines.
func Start(opts Options) (*Cluster, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, quit: make(chan struct{}), changed: make(chan struct{})}
	var members paxos.Membership
	for i := 1; i <= opts.Replicas; i++ {
		members.Voters = append(members.Voters, paxos.ReplicaID(i))
	}
	for _, id := range members.Voters {
		if err := c.addReplica(id, members); err != nil {
			for _, s := range c.stores {
				_ = s.Close()
			}
			return nil, err
		}
	}
	for _, r := range c.replicas {
		r.Start()
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
	}
	return nil
}

func (c *Cluster) addReplica(id paxos.ReplicaID, members paxos.Membership) error {
	store, err := c.openStore(id)
	if err != nil {
		return err
	}
	r, err := node.New(node.Config{
		ID: id, Membership: members, Store: store, Send: c.send,
		TickInterval: c.opts.TickInterval, Timing: c.opts.Timing, Limits: c.opts.Limits,
		Snapshots: c.opts.Snapshots, Seed: c.opts.Seed,
		InlineWrites: c.opts.InlineWrites, OnSave: c.opts.OnSave, OnChange: c.notify,
		InboxMessages: c.opts.InboxMessages, QueuedProposals: c.opts.QueuedProposals,
		NextID: func() uint64 { return c.nextID.Add(1) },
		Cron:   c.opts.Cron,
	})
	if err != nil {
		_ = store.Close()
		if errors.Is(err, node.ErrConfig) {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return fmt.Errorf("localcluster: %w", err)
	}
	c.replicas = append(c.replicas, r)
	c.stores = append(c.stores, store)
	return nil
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
	c.replicas[m.To-1].Deliver(m)
}

// Dropped returns how many messages the transport dropped.
func (c *Cluster) Dropped() uint64 {
	n := c.dropped.Load()
	for _, r := range c.replicas {
		n += r.Dropped()
	}
	return n
}

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
		select {
		case <-c.quit:
			return ErrClosed
		default:
		}
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

// ProposeCommand encodes cmd and proposes it as Propose does, returning
// the state's verdict on it. It returns ErrNotCron outside cron mode.
func (c *Cluster) ProposeCommand(ctx context.Context, cmd state.Command) error {
	if c.opts.Cron == nil {
		return ErrNotCron
	}
	enc, err := state.Encode(cmd)
	if err != nil {
		return err
	}
	return c.Propose(ctx, enc)
}

// Close stops every replica's goroutines, fails the proposals they held
// with ErrStopped and closes the stores. It returns the failures that
// stopped replicas, if any, and store close errors.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		close(c.quit)
		var errs []error
		for i, r := range c.replicas {
			r.Stop()
			if err := r.Status().Err; !errors.Is(err, ErrStopped) {
				errs = append(errs, err)
			}
			errs = append(errs, c.stores[i].Close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// Stop stops replica id's goroutines as a crash of its process would: its
// synced writes stay in its store (which Close closes), its status says
// ErrStopped so that Leader passes it over, and the others go on without
// it. It waits until the goroutines have returned.
func (c *Cluster) Stop(id paxos.ReplicaID) error {
	r := c.Replica(id)
	if r == nil {
		return fmt.Errorf("localcluster: no replica %d", id)
	}
	r.Stop()
	return nil
}

// quietLogger drops Pebble's informational chatter and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)              {}
func (quietLogger) Errorf(format string, args ...any) { pebble.DefaultLogger.Errorf(format, args...) }
func (quietLogger) Fatalf(format string, args ...any) { pebble.DefaultLogger.Fatalf(format, args...) }

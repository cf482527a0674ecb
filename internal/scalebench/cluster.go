package scalebench

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/cron/state"
	"paxcron/internal/node"
	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/pebblestore"
)

// replicas is the cluster's size: the three.
const replicas = 3

// cluster is three internal/node replicas in one process over an in-process
// transport, like internal/localcluster's, but one whose replicas can be
// stopped and started again from their disks (localcluster's cannot be
// restarted, and this package must not change it under the benchmarks that
// use it).
type cluster struct {
	dir   string
	base  node.Config // everything but ID and Store
	nodes [replicas]atomic.Pointer[node.Node]
	// stores are touched only by the goroutine that opens and stops
	// replicas (Run's).
	stores [replicas]*pebblestore.Store

	counts launchCounts
	snaps  snapshotLog
	slow   slowLog
}

func (c *cluster) storeDir(id paxos.ReplicaID) string {
	return filepath.Join(c.dir, fmt.Sprintf("replica-%d", id), "store")
}

// send is every replica's transport: never blocks; a message to a stopped
// replica is lost, as over a network.
func (c *cluster) send(m paxos.Message) {
	if m.To == paxos.None || int(m.To) > replicas {
		return
	}
	if n := c.nodes[m.To-1].Load(); n != nil {
		n.Deliver(m)
	}
}

// openTimes is how long a replica took to come back from its disk.
type openTimes struct {
	Store time.Duration // pebble.Open and the store's indexes
	Node  time.Duration // node.New: the snapshot restored, the log resumed
}

// open opens replica id's store and builds its node from it (restoring
// its snapshot), without starting it.
func (c *cluster) open(id paxos.ReplicaID) (openTimes, error) {
	return c.openAs(id, false)
}

// openRebuilding opens replica id on an empty store as a rebuilding
// learner (node.Config.Rebuilding), as after the loss of its disk.
func (c *cluster) openRebuilding(id paxos.ReplicaID) (openTimes, error) {
	return c.openAs(id, true)
}

func (c *cluster) openAs(id paxos.ReplicaID, rebuilding bool) (openTimes, error) {
	var t openTimes
	began := time.Now()
	st, err := pebblestore.Open(c.storeDir(id), pebblestore.Options{FS: vfs.Default, Logger: quietLogger{}})
	if err != nil {
		return t, err
	}
	t.Store = time.Since(began)
	cfg := c.base
	cfg.ID, cfg.Store, cfg.Rebuilding = id, st, rebuilding
	cfg.OnSnapshot = func(index uint64) { c.snaps.taken(id, index) }
	cfg.SlowTurn, cfg.OnSlowTurn = slowTurn, func(t node.Turn) { c.slow.note(id, t) }
	cfg.OnSaveTimed = func(entries int, took time.Duration) { c.slow.saved(id, entries, took) }
	began = time.Now()
	n, err := node.New(cfg)
	if err != nil {
		return t, errors.Join(err, st.Close())
	}
	t.Node = time.Since(began)
	c.stores[id-1] = st
	c.nodes[id-1].Store(n)
	return t, nil
}

// openAll opens the three replicas at once, as three processes starting
// together would.
func (c *cluster) openAll() ([replicas]openTimes, error) {
	var times [replicas]openTimes
	var errs [replicas]error
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { times[i], errs[i] = c.open(paxos.ReplicaID(i + 1)) })
	}
	wg.Wait()
	return times, errors.Join(errs[:]...)
}

func (c *cluster) node(id paxos.ReplicaID) *node.Node { return c.nodes[id-1].Load() }

func (c *cluster) start(id paxos.ReplicaID) { c.node(id).Start() }

// stop stops replica id as a crash would and closes its store.
func (c *cluster) stop(id paxos.ReplicaID) error {
	n := c.nodes[id-1].Swap(nil)
	if n == nil {
		return nil
	}
	n.Stop()
	st := c.stores[id-1]
	c.stores[id-1] = nil
	if err := n.Status().Err; !errors.Is(err, node.ErrStopped) {
		return errors.Join(fmt.Errorf("scalebench: replica %d failed: %w", id, err), st.Close())
	}
	return st.Close()
}

func (c *cluster) close() error {
	var errs []error
	for id := range paxos.ReplicaID(replicas) {
		errs = append(errs, c.stop(id+1))
	}
	return errors.Join(errs...)
}

// status is replica id's last published status (zero if it is stopped).
func (c *cluster) status(id paxos.ReplicaID) node.Status {
	if n := c.node(id); n != nil {
		return n.Status()
	}
	return node.Status{}
}

// launching returns the replica whose launcher acts as the leader's.
func (c *cluster) launching() (paxos.ReplicaID, bool) {
	for id := range paxos.ReplicaID(replicas) {
		if s := c.status(id + 1); s.Launching && s.Err == nil {
			return id + 1, true
		}
	}
	return paxos.None, false
}

// failed returns the first replica failure, if any.
func (c *cluster) failed() error {
	for id := range paxos.ReplicaID(replicas) {
		if err := c.status(id + 1).Err; err != nil && !errors.Is(err, node.ErrStopped) {
			return fmt.Errorf("scalebench: replica %d failed: %w", id+1, err)
		}
	}
	return nil
}

// launchCounts counts, per replica, the launches its state accepted.
type launchCounts struct {
	started, finished [replicas + 1]atomic.Int64 // by replica ID
}

// applied is node.CronOptions.Applied.
func (l *launchCounts) applied(id paxos.ReplicaID, _ uint64, c state.Command, err error) {
	if err != nil {
		return
	}
	switch c.(type) {
	case state.LaunchStarted:
		l.started[id].Add(1)
	case state.LaunchFinished:
		l.finished[id].Add(1)
	}
}

// snapshotLog follows the snapshot the harness asks a replica to take: its
// bytes (kept only for that one, to check what it holds) and when it became
// durable.
type snapshotLog struct {
	mu       sync.Mutex
	id       paxos.ReplicaID
	index    uint64
	data     []byte
	durable  chan struct{} // closed once the wanted snapshot is durable
	savedLen map[paxos.ReplicaID]int
}

// want names the snapshot to follow; the channel closes once it is durable.
func (s *snapshotLog) want(id paxos.ReplicaID, index uint64) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.index, s.data = id, index, nil
	s.durable = make(chan struct{})
	return s.durable
}

// saved is node.Config.OnSave (the writer goroutine, after a Save).
func (s *snapshotLog) saved(id paxos.ReplicaID, u storage.Update) {
	if u.Snapshot == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.savedLen == nil {
		s.savedLen = map[paxos.ReplicaID]int{}
	}
	s.savedLen[id] = len(u.Snapshot.Data)
	if id == s.id && u.Snapshot.Meta.Index == s.index {
		s.data = u.Snapshot.Data
	}
}

// taken is node.Config.OnSnapshot for replica id (its loop, once durable).
func (s *snapshotLog) taken(id paxos.ReplicaID, index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == s.id && index == s.index && s.durable != nil {
		close(s.durable)
		s.durable = nil
	}
}

// take returns the followed snapshot's bytes and forgets them.
func (s *snapshotLog) take() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.data
	s.data = nil
	return d
}

// quietLogger drops Pebble's informational chatter and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)              {}
func (quietLogger) Errorf(format string, args ...any) { pebble.DefaultLogger.Errorf(format, args...) }
func (quietLogger) Fatalf(format string, args ...any) { pebble.DefaultLogger.Fatalf(format, args...) }

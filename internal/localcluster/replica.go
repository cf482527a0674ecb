package localcluster

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"paxcron/cron/replica"
	"paxcron/internal/hashsm"
	"paxcron/paxos"
	"paxcron/storage"
)

// Replica is one replica of a local cluster: a goroutine that owns a
// replica.Replica and feeds it messages, proposals and ticks.
type Replica struct {
	id        paxos.ReplicaID
	c         *Cluster
	inbox     chan paxos.Message
	proposals chan *proposal
	quit      chan struct{} // closed by Stop
	stopOnce  sync.Once
	stopped   chan struct{} // closed when run returns

	// Owned by the goroutine running run (set up before it starts).
	rep *replica.Replica
	// sm is the replicated state machine: hash alone, or in cron mode the
	// launcher over the cron state with hash beside it.
	sm          replica.StateMachine
	hash        *hashsm.Machine
	store       *countingStore
	pending     map[uint64]*proposal // proposed, by slot, until that slot is applied
	busy        []*proposal          // refused with paxos.ErrBusy, oldest first
	ticks       int64                // ticks fed to the core since run started
	refused     uint64               // proposals the core refused as busy
	longestTurn time.Duration        // see Status.LongestTurn
	restores    uint64               // see Status.Restores

	// Cron mode only (nil otherwise); see cron.go.
	cron             *cronMachine
	results          *resultQueue
	calls            chan func() // from Cron
	now              func() time.Time
	launcherProposed bool  // the launcher proposed during this Step
	launcherErr      error // the launcher's proposal could not be encoded

	// writes and written connect the replica to its writer goroutine when
	// writes are asynchronous (nil otherwise).
	writes  chan storage.Update
	written chan error
	wrote   chan struct{} // closed when the writer goroutine returns

	mu     sync.Mutex
	status Status
}

// maxWritesInFlight bounds the writes handed to the writer goroutine and
// not yet done; past it the loop stops taking Readys until one completes.
const maxWritesInFlight = 64

// writerFor returns the replica.Writer for the cluster's options: nil for
// synchronous writes, else a queue to a writer goroutine that run starts.
func (r *Replica) writerFor(async bool) replica.Writer {
	if !async {
		return nil
	}
	// Capacities exceed what can be in flight: neither side ever blocks
	// on the other.
	r.writes = make(chan storage.Update, 2*maxWritesInFlight)
	r.written = make(chan error, 2*maxWritesInFlight)
	r.wrote = make(chan struct{})
	return queueWriter(r.writes)
}

type queueWriter chan storage.Update

func (q queueWriter) Write(u storage.Update) { q <- u }

// write is the writer goroutine: it takes every write queued up, saves them
// as one merged, synced batch (group commit across Readys), and reports a
// result for each, in order.
func (r *Replica) write() {
	defer close(r.wrote)
	batch := make([]storage.Update, 0, maxWritesInFlight)
	for u := range r.writes {
		batch = append(batch[:0], u)
	drain:
		for len(batch) < cap(batch) {
			select {
			case u, ok := <-r.writes:
				if !ok {
					break drain
				}
				batch = append(batch, u)
			default:
				break drain
			}
		}
		var err error
		if merged := storage.Merge(batch); !merged.IsEmpty() {
			err = r.store.Save(merged)
		}
		for range batch {
			r.written <- err
		}
	}
}

// proposal is one Propose call waiting for its command to be applied.
type proposal struct {
	ctx  context.Context
	id   uint64
	data []byte     // id, then the command
	done chan error // buffered: receives exactly one result
}

// ID returns the replica's ID.
func (r *Replica) ID() paxos.ReplicaID { return r.id }

// Status returns what the replica last published about itself.
func (r *Replica) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Propose proposes cmd through this replica and returns once this replica
// has applied it (in cron mode, with the state's verdict: see
// Cluster.Propose). It returns paxos.ErrNotLeader if the replica is not
// leader (retry on the leader), ErrDropped if a leader change gave the
// command's slot to another value (safe to retry), or ctx's error if ctx
// ends first (the command may still be applied later).
func (r *Replica) Propose(ctx context.Context, cmd []byte) error {
	id := r.c.nextID.Add(1)
	data := make([]byte, idBytes+len(cmd))
	binary.BigEndian.PutUint64(data, id)
	copy(data[idBytes:], cmd)
	p := &proposal{ctx: ctx, id: id, data: data, done: make(chan error, 1)}
	select {
	case r.proposals <- p:
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stopped:
		return r.stopErr()
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stopped:
		// The loop answered every proposal it took before stopping.
		select {
		case err := <-p.done:
			return err
		default:
			return r.stopErr()
		}
	}
}

func (r *Replica) stopErr() error {
	if err := r.Status().Err; err != nil {
		return err
	}
	return ErrClosed
}

// run is the replica's loop: wait for any input, drain every input queued
// behind it, then Process once, so that a burst of proposals and messages
// costs one Ready and one synced Save.
func (r *Replica) run() {
	defer close(r.stopped)
	if r.writes != nil {
		go r.write()
		defer func() {
			close(r.writes)
			<-r.wrote // the store must not close under a write
		}()
	}
	ticker := time.NewTicker(r.c.opts.TickInterval)
	defer ticker.Stop()
	started := time.Now()
	maxDrain := cap(r.inbox) + cap(r.proposals)
	for {
		select {
		case <-r.c.quit:
			r.failAll(ErrClosed)
			return
		case <-r.quit:
			r.failAll(ErrStopped)
			r.publishErr(ErrStopped)
			return
		case m := <-r.inbox:
			r.step(m)
		case p := <-r.proposalQueue():
			r.take(p)
		case now := <-ticker.C:
			r.tick(now.Sub(started))
		case err := <-r.written:
			if !r.writeDone(err) {
				return
			}
		case <-r.resultsReady():
			r.deliverResults()
		case call := <-r.calls:
			call()
		}
		turn := time.Now()
	drain:
		// Bounded, so that a flood of inputs cannot postpone the Save
		// (and with it every reply) indefinitely.
		for range maxDrain {
			select {
			case m := <-r.inbox:
				r.step(m)
			case p := <-r.proposalQueue():
				r.take(p)
			case now := <-ticker.C:
				r.tick(now.Sub(started))
			case err := <-r.written:
				if !r.writeDone(err) {
					return
				}
			case <-r.resultsReady():
				r.deliverResults()
			default:
				break drain
			}
		}
		r.retryBusy()
		if !r.process() {
			return
		}
		if r.cron != nil && !r.stepLauncher() {
			return
		}
		r.longestTurn = max(r.longestTurn, time.Since(turn))
		r.publish()
	}
}

// process runs the core's pending Readys, unless too many asynchronous
// writes are in flight; false means the replica failed.
func (r *Replica) process() bool {
	if r.rep.InFlight() >= maxWritesInFlight {
		return true
	}
	if err := r.rep.Process(); err != nil {
		r.fail(err)
		return false
	}
	return true
}

// writeDone hands a completed write to the replica; false means the
// replica failed and the loop must stop.
func (r *Replica) writeDone(err error) bool {
	if err := r.rep.WriteDone(err); err != nil {
		r.fail(err)
		return false
	}
	return true
}

func (r *Replica) fail(err error) {
	r.failAll(err)
	r.publishErr(err)
}

// proposalQueue is nil, which blocks, while the core refuses proposals as
// busy: the queue then pushes back on callers instead of spinning.
func (r *Replica) proposalQueue() chan *proposal {
	if len(r.busy) > 0 {
		return nil
	}
	return r.proposals
}

// step feeds a message to the core without processing it yet. A malformed
// message changes nothing; a halt shows in the next Process.
func (r *Replica) step(m paxos.Message) { _ = r.rep.Node().Step(m) }

// tick feeds the core every tick due since the loop started. Counting from
// elapsed wall time, not ticker fires (the ticker drops fires while a slow
// Save holds the loop), keeps the replica's clock from running slow, which
// would make a leader overestimate its lease.
func (r *Replica) tick(elapsed time.Duration) {
	due := int64(elapsed / r.c.opts.TickInterval)
	for ; r.ticks < due; r.ticks++ {
		r.rep.Node().Tick()
	}
}

// take hands a new proposal to the core, or queues it while the core is
// busy.
func (r *Replica) take(p *proposal) {
	if r.offer(p) {
		r.busy = append(r.busy, p)
	}
}

// retryBusy offers the queued busy proposals again, in order, since the
// messages just stepped may have let the chosen index advance.
func (r *Replica) retryBusy() {
	for len(r.busy) > 0 && !r.offer(r.busy[0]) {
		r.busy[0] = nil
		r.busy = r.busy[1:]
	}
}

// offer proposes p and reports whether the core refused it as busy; any
// other outcome is final (p is pending or answered).
func (r *Replica) offer(p *proposal) (busy bool) {
	if err := p.ctx.Err(); err != nil {
		p.done <- err // nobody waits: do not spend a slot on it
		return false
	}
	slot, err := r.rep.Propose(p.data)
	switch {
	case errors.Is(err, paxos.ErrBusy):
		r.refused++
		return true
	case err != nil:
		p.done <- err
	default:
		r.pending[slot] = p
	}
	return false
}

// applied answers the proposal waiting for e's slot, if any: the slot holds
// either its command or, after a leader change, another value.
func (r *Replica) applied(e paxos.Entry) {
	p, ok := r.pending[e.Slot]
	if !ok {
		return
	}
	delete(r.pending, e.Slot)
	id, ok := frameID(e.Data)
	switch {
	case e.Kind != paxos.EntryCommand || !ok || id != p.id:
		p.done <- ErrDropped
	case r.cron != nil:
		p.done <- r.cron.verdictOf(e.Slot)
	default:
		p.done <- nil
	}
}

// restored fails the proposals whose slots a snapshot skipped over.
func (r *Replica) restored(index uint64) {
	r.restores++
	for slot, p := range r.pending {
		if slot <= index {
			delete(r.pending, slot)
			p.done <- ErrOutcomeUnknown
		}
	}
}

func (r *Replica) failAll(err error) {
	for slot, p := range r.pending {
		delete(r.pending, slot)
		p.done <- err
	}
	for _, p := range r.busy {
		p.done <- err
	}
	r.busy = nil
}

// publish makes the replica's state visible to other goroutines and wakes
// waiters if it changed.
func (r *Replica) publish() {
	ns := r.rep.Node().Status()
	s := Status{
		ID: r.id, Role: ns.Role, Leader: ns.Leader, Ballot: ns.Ballot,
		Chosen: ns.Chosen, Applied: r.rep.Applied(),
		Commands: r.hash.Commands(), Hash: r.hash.Hash(),
		Saves: r.store.saves.Load(), SavedEntries: r.store.savedEntries.Load(),
		BusyRefusals: r.refused,
		LongestTurn:  r.longestTurn,
		Restores:     r.restores,
		Launching:    r.cron != nil && r.cron.l.Leading(),
	}
	r.mu.Lock()
	changed := s != r.status
	r.status = s
	r.mu.Unlock()
	if changed {
		r.c.notify()
	}
}

func (r *Replica) publishErr(err error) {
	r.mu.Lock()
	r.status.Err = err
	r.mu.Unlock()
	r.c.notify()
}

// observer matches applied entries to waiting proposals.
type observer struct {
	replica.NopObserver
	r *Replica
}

func (o observer) Applied(e paxos.Entry) { o.r.applied(e) }
func (o observer) Restored(index uint64) { o.r.restored(index) }

// countingStore counts Saves for Status and reports them to OnSave. Save
// runs on the replica's writer goroutine (or its own, with SyncWrites);
// the counters are read by the replica's goroutine.
type countingStore struct {
	storage.Store
	r            *Replica
	saves        atomic.Uint64
	savedEntries atomic.Uint64
}

func (s *countingStore) Save(u storage.Update) error {
	if err := s.Store.Save(u); err != nil {
		return err
	}
	if !u.IsEmpty() {
		s.saves.Add(1)
		s.savedEntries.Add(uint64(len(u.Entries)))
		if s.r.c.opts.OnSave != nil {
			s.r.c.opts.OnSave(s.r.id, u)
		}
	}
	return nil
}

package localcluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/internal/hashsm"
	"paxcron/paxos"
)

// CronOptions makes every replica run the cron layer: the launcher over
// the cron state, instead of the hash machine.
type CronOptions struct {
	// Launcher holds every replica's launcher limits: MemoryHorizon is
	// required, a zero limit takes the launcher's default. The cluster
	// supplies Machine, Propose, Dispatcher and Applied, so those must be
	// left unset.
	Launcher launcher.Config
	// NewDispatcher returns replica id's Dispatcher (a shared one will
	// do). done hands a Result back to that replica's launcher: it never
	// blocks, may be called from any goroutine, Submit's own included, and
	// drops what arrives after the replica stopped. Required.
	NewDispatcher func(id paxos.ReplicaID, done func(launcher.Result)) launcher.Dispatcher
	// Now is the launchers' wall clock; nil means time.Now. A benchmark
	// passes a shifted clock to bring a chosen instant (a midnight) near.
	// It must advance at the real rate: the lease is counted in real
	// ticks and converted to this clock.
	Now func() time.Time
	// Applied, when set, hears every command applied on every replica,
	// with the state's verdict (launcher.Config.Applied). It runs on the
	// replica's goroutine, so it must be quick, safe for concurrent use by
	// several replicas, and must not call into the cluster.
	Applied func(id paxos.ReplicaID, slot uint64, c state.Command, err error)
}

// ErrNotCron is returned by the calls that need Options.Cron.
var ErrNotCron = errors.New("localcluster: the cluster does not run the cron layer (Options.Cron)")

func (o *CronOptions) validate() error {
	switch {
	case o.NewDispatcher == nil:
		return fmt.Errorf("%w: Cron.NewDispatcher is required", ErrConfig)
	case o.Launcher.Machine != nil || o.Launcher.Propose != nil || o.Launcher.Dispatcher != nil || o.Launcher.Applied != nil:
		return fmt.Errorf("%w: Cron.Launcher's Machine, Propose, Dispatcher and Applied are the cluster's to set (use Cron.NewDispatcher and Cron.Applied)", ErrConfig)
	}
	return nil
}

// cronMachine is a replica's state machine in cron mode. Every log entry
// is framed as Propose frames it, an 8-byte id then the command, whoever
// proposed it: the frame lets a proposer recognise its own command in a
// slot, and the launcher's proposals carry id 0, which no Propose call
// waits for. Apply strips the frame, so the launcher sees bare commands.
// The running hash over the framed entries is kept beside the cron state
// (and in the snapshot), so Status compares replicas as in hash mode.
type cronMachine struct {
	hash *hashsm.Machine
	l    *launcher.Launcher
	// verdict is the state's answer to the command in verdictSlot: the
	// Applied hook hears it for every command that decodes, and a Propose
	// waiting for that slot is answered with it.
	verdictSlot uint64
	verdict     error
}

// hashSnapshotBytes is the length of the hash machine's snapshot, which
// comes before the cron state's.
const hashSnapshotBytes = 16

func (m *cronMachine) Apply(slot uint64, data []byte) {
	m.hash.Apply(slot, data)
	m.verdictSlot, m.verdict = 0, nil
	cmd := data
	if len(data) >= idBytes {
		cmd = data[idBytes:]
	}
	m.l.Apply(slot, cmd)
}

func (m *cronMachine) Snapshot() ([]byte, error) {
	h, err := m.hash.Snapshot()
	if err != nil {
		return nil, err
	}
	s, err := m.l.Snapshot()
	if err != nil {
		return nil, err
	}
	return append(h, s...), nil
}

func (m *cronMachine) Restore(data []byte) error {
	if len(data) < hashSnapshotBytes {
		return fmt.Errorf("localcluster: cron snapshot of %d bytes, shorter than its hash", len(data))
	}
	if err := m.hash.Restore(data[:hashSnapshotBytes]); err != nil {
		return err
	}
	return m.l.Restore(data[hashSnapshotBytes:])
}

// verdictOf is the state's answer to the command just applied at slot.
func (m *cronMachine) verdictOf(slot uint64) error {
	if m.verdictSlot != slot {
		// The launcher reports every command that decodes; this one did
		// not, and the state counted it as undecodable.
		return fmt.Errorf("localcluster: slot %d: %w", slot, state.ErrDecode)
	}
	return m.verdict
}

// resultQueue carries a Dispatcher's results to the replica's goroutine.
// It is unbounded so that done never blocks, even when called from Submit
// on the replica's own goroutine; what it holds is bounded in practice by
// the launcher's MaxInflight.
type resultQueue struct {
	mu      sync.Mutex
	results []launcher.Result
	spare   []launcher.Result
	// ready holds a signal while results wait.
	ready chan struct{}
}

func (q *resultQueue) push(res launcher.Result) {
	q.mu.Lock()
	q.results = append(q.results, res)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the waiting results; they are valid until the next take.
func (q *resultQueue) take() []launcher.Result {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.results
	q.results, q.spare = q.spare[:0], out
	return out
}

// startCron makes r run the cron layer: called by newReplica before
// replica.New, which may restore a snapshot into the state machine.
func (r *Replica) startCron(o *CronOptions) error {
	m := &cronMachine{hash: r.hash}
	r.results = &resultQueue{ready: make(chan struct{}, 1)}
	r.calls = make(chan func())
	r.now = o.Now
	if r.now == nil {
		r.now = time.Now
	}
	cfg := o.Launcher
	cfg.Machine = state.New()
	cfg.Propose = r.proposeCommand
	cfg.Dispatcher = o.NewDispatcher(r.id, r.deliverResult)
	user, id := o.Applied, r.id
	cfg.Applied = func(slot uint64, c state.Command, err error) {
		m.verdictSlot, m.verdict = slot, err
		if user != nil {
			user(id, slot, c, err)
		}
	}
	l, err := launcher.New(cfg)
	if err != nil {
		return fmt.Errorf("localcluster: replica %d: %w", r.id, err)
	}
	m.l = l
	r.cron, r.sm = m, m
	return nil
}

// deliverResult is the done function every Dispatcher of r is given.
func (r *Replica) deliverResult(res launcher.Result) {
	select {
	case <-r.stopped:
		return // nobody will read it
	default:
	}
	r.results.push(res)
}

// proposeCommand is the launcher's way into the paxos node: on the
// replica's goroutine (the launcher runs only there), with no waiter, so
// the launcher's own retries handle ErrBusy and ErrNotLeader.
func (r *Replica) proposeCommand(c state.Command) error {
	enc, err := state.Encode(c)
	if err != nil {
		// The launcher built a command the state would refuse: a bug that
		// retrying cannot cure, so the replica stops.
		r.launcherErr = fmt.Errorf("localcluster: replica %d: the launcher proposed an invalid %s: %w", r.id, c.Kind(), err)
		return err
	}
	data := make([]byte, idBytes+len(enc)) // id 0: no Propose call waits
	copy(data[idBytes:], enc)
	_, err = r.rep.Propose(data)
	if err == nil {
		r.launcherProposed = true
	}
	return err
}

// deliverResults hands the waiting Dispatcher results to the launcher;
// the Step that follows in the same loop turn acts on them.
func (r *Replica) deliverResults() {
	for _, res := range r.results.take() {
		r.cron.l.Done(res)
	}
}

// stepLauncher gives the launcher the time and the replica's role after a
// Process, then processes what it proposed, so that a start or a finish
// does not wait for the next input. False means the replica failed.
func (r *Replica) stepLauncher() bool {
	now := r.now()
	lead := launcher.LeadershipOf(r.rep.Node().Status(), r.rep.Applied(), now, r.c.opts.TickInterval)
	r.launcherProposed = false
	r.cron.l.Step(now, lead)
	if r.launcherErr != nil {
		r.fail(r.launcherErr)
		return false
	}
	if r.launcherProposed {
		return r.process()
	}
	return true
}

// resultsReady is nil, which blocks, outside cron mode.
func (r *Replica) resultsReady() chan struct{} {
	if r.results == nil {
		return nil
	}
	return r.results.ready
}

// Cron runs fn on the replica's goroutine, between two loop turns, with
// the replica's launcher and through it the cron state (Machine), which
// are not safe to touch from anywhere else; fn must not keep them. It
// returns ErrNotCron outside cron mode, and an error if the replica
// stopped or ctx ended before fn ran.
func (r *Replica) Cron(ctx context.Context, fn func(*launcher.Launcher)) error {
	if r.cron == nil {
		return ErrNotCron
	}
	done := make(chan struct{})
	call := func() {
		defer close(done)
		fn(r.cron.l)
	}
	select {
	case r.calls <- call:
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stopped:
		return r.stopErr()
	}
	<-done // the loop runs a call as soon as it takes it
	return nil
}

// ProposeCommand encodes c and proposes it as Propose does, returning the
// state's verdict on it. It returns ErrNotCron outside cron mode.
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

// frameID returns the proposer id a framed entry carries.
func frameID(data []byte) (uint64, bool) {
	if len(data) < idBytes {
		return 0, false
	}
	return binary.BigEndian.Uint64(data), true
}

package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/replica"
	"paxcron/cron/state"
	"paxcron/internal/hashsm"
	"paxcron/paxos"
)

// CronOptions makes the replica run the cron layer: the launcher over the
// cron state, instead of the hash machine alone.
type CronOptions struct {
	// Launcher holds the launcher's limits: MemoryHorizon is required, a
	// zero limit takes the launcher's default. The node supplies Machine,
	// Propose, Dispatcher, Applied and NewClusterID (drawn from
	// crypto/rand), so those must be left unset.
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
	// Applied, when set, hears every command applied, with the state's
	// verdict (launcher.Config.Applied). It runs on the replica's loop, so
	// it must be quick, safe for concurrent use (a cluster may share one
	// among its replicas), and must not call into the node.
	Applied func(id paxos.ReplicaID, slot uint64, c state.Command, err error)
	// CanLaunch, when set, holds the launcher back while it returns
	// false: the replica then never acts as the launching leader (the
	// server waits until Nomad passed its version checks).
	CanLaunch func() bool
}

// ErrNotCron is returned by the calls that need Config.Cron.
var ErrNotCron = errors.New("node: the replica does not run the cron layer (Config.Cron)")

func (o *CronOptions) validate() error {
	switch {
	case o.NewDispatcher == nil:
		return fmt.Errorf("%w: Cron.NewDispatcher is required", ErrConfig)
	case o.Launcher.Machine != nil || o.Launcher.Propose != nil || o.Launcher.Dispatcher != nil || o.Launcher.Applied != nil || o.Launcher.NewClusterID != nil:
		return fmt.Errorf("%w: Cron.Launcher's Machine, Propose, Dispatcher, Applied and NewClusterID are the node's to set (use Cron.NewDispatcher and Cron.Applied)", ErrConfig)
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

// FreezeSnapshot implements replica.Freezer: the hash now, and the cron
// state frozen now, encoded later off the loop.
func (m *cronMachine) FreezeSnapshot() func() ([]byte, error) {
	h, err := m.hash.Snapshot()
	encode := m.l.FreezeSnapshot()
	return func() ([]byte, error) {
		if err != nil {
			return nil, err
		}
		s, err := encode()
		if err != nil {
			return nil, err
		}
		return append(h, s...), nil
	}
}

func (m *cronMachine) Restore(data []byte) error {
	hash, cron, err := splitCronSnapshot(data)
	if err != nil {
		return err
	}
	if err := m.hash.Restore(hash); err != nil {
		return err
	}
	return m.l.Restore(cron)
}

// splitCronSnapshot splits a cron snapshot into the hash's and the cron
// state's.
func splitCronSnapshot(data []byte) (hash, cron []byte, err error) {
	if len(data) < hashSnapshotBytes {
		return nil, nil, fmt.Errorf("node: cron snapshot of %d bytes, shorter than its hash", len(data))
	}
	return data[:hashSnapshotBytes], data[hashSnapshotBytes:], nil
}

// DecodeSnapshot implements replica.Decoder for both parts of the state.
func (m *cronMachine) DecodeSnapshot(data []byte) (install func(), err error) {
	hash, cron, err := splitCronSnapshot(data)
	if err != nil {
		return nil, err
	}
	installHash, err := m.hash.DecodeSnapshot(hash)
	if err != nil {
		return nil, err
	}
	installCron, err := m.l.DecodeSnapshot(cron)
	if err != nil {
		return nil, err
	}
	return func() {
		installHash()
		installCron()
	}, nil
}

// verdictOf is the state's answer to the command just applied at slot.
func (m *cronMachine) verdictOf(slot uint64) error {
	if m.verdictSlot != slot {
		// The launcher reports every command that decodes; this one did
		// not, and the state counted it as undecodable.
		return fmt.Errorf("node: slot %d: %w", slot, state.ErrDecode)
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

// startCron makes n run the cron layer: called by New before
// replica.New, which may restore a snapshot into the state machine.
func (n *Node) startCron(o *CronOptions) error {
	m := &cronMachine{hash: n.hash}
	n.results = &resultQueue{ready: make(chan struct{}, 1)}
	n.calls = make(chan func())
	n.now = o.Now
	if n.now == nil {
		n.now = time.Now
	}
	cfg := o.Launcher
	cfg.Machine = state.New()
	cfg.Propose = n.proposeCommand
	cfg.Dispatcher = o.NewDispatcher(n.id, n.deliverResult)
	cfg.NewClusterID = DrawClusterID
	user, id := o.Applied, n.id
	cfg.Applied = func(slot uint64, c state.Command, err error) {
		m.verdictSlot, m.verdict = slot, err
		if user != nil {
			user(id, slot, c, err)
		}
	}
	l, err := launcher.New(cfg)
	if err != nil {
		return fmt.Errorf("node: replica %d: %w", n.id, err)
	}
	m.l = l
	n.cron, n.sm = m, m
	return nil
}

// DrawClusterID draws a cluster ID from crypto/rand: two clusters must
// never draw the same (a seeded generator could, for two clusters started
// from one image). The leader of an unnamed state draws one, and so does
// a restore as a new cluster.
func DrawClusterID() state.ClusterID {
	var id state.ClusterID
	for id.IsZero() {
		if _, err := rand.Read(id[:]); err != nil {
			panic(fmt.Sprintf("node: crypto/rand failed: %v", err))
		}
	}
	return id
}

// deliverResult is the done function every Dispatcher of r is given.
func (n *Node) deliverResult(res launcher.Result) {
	select {
	case <-n.stopped:
		return // nobody will read it
	default:
	}
	n.results.push(res)
}

// proposeCommand is the launcher's way into the paxos node: on the
// replica's goroutine (the launcher runs only there), with no waiter, so
// the launcher's own retries handle ErrBusy and ErrNotLeader.
func (n *Node) proposeCommand(c state.Command) error {
	enc, err := state.Encode(c)
	if err != nil {
		// The launcher built a command the state would refuse: a bug that
		// retrying cannot cure, so the replica stops.
		n.launcherErr = fmt.Errorf("node: replica %d: the launcher proposed an invalid %s: %w", n.id, c.Kind(), err)
		return err
	}
	data := make([]byte, idBytes+len(enc)) // id 0: no Propose call waits
	copy(data[idBytes:], enc)
	_, err = n.rep.Propose(data)
	if err == nil {
		n.launcherProposed = true
	}
	return err
}

// deliverResults hands the waiting Dispatcher results to the launcher;
// the Step that follows in the same loop turn acts on them.
func (n *Node) deliverResults() {
	for _, res := range n.results.take() {
		n.cron.l.Done(res)
	}
}

// stepLauncher gives the launcher the time and the replica's role after a
// Process, then processes what it proposed, so that a start or a finish
// does not wait for the next input. False means the replica failed.
func (n *Node) stepLauncher() bool {
	n.catchUpTicks()
	now := n.now()
	lead := launcher.LeadershipOf(n.rep.Node().Status(), n.rep.Applied(), now, n.cfg.TickInterval)
	n.launcherProposed = false
	if n.cfg.Cron.CanLaunch != nil && !n.cfg.Cron.CanLaunch() {
		// Held back from launching, a leader still names its cluster:
		// the transport binds the name, whether or not Nomad answers.
		n.cron.l.NameCluster(now, lead)
		lead = launcher.Leadership{}
	}
	n.cron.l.Step(now, lead)
	if n.launcherErr != nil {
		n.fail(n.launcherErr)
		return false
	}
	if n.launcherProposed {
		return n.process()
	}
	return true
}

// launcherWake is a timer for the launcher's next due time
// (Launcher.NextWake): the loop otherwise wakes only on an input, the
// ticker's included, and a launch would start up to a tick (50 ms) late.
type launcherWake struct {
	t *time.Timer
	c <-chan time.Time // t.C while armed, nil (blocks) otherwise
}

// minWake keeps a launcher that cannot act on what is due (its proposals
// refused as busy) from waking the loop in a spin.
const minWake = 2 * time.Millisecond

// armWake sets the wake timer to the launcher's next due time, or
// disarms it.
func (n *Node) armWake() {
	at, ok := n.cron.l.NextWake()
	if !ok {
		if n.wake.t != nil {
			n.wake.t.Stop()
		}
		n.wake.c = nil
		return
	}
	d := max(at.Sub(n.now()), minWake)
	if n.wake.t == nil {
		n.wake.t = time.NewTimer(d)
	} else {
		n.wake.t.Reset(d)
	}
	n.wake.c = n.wake.t.C
}

// resultsReady is nil, which blocks, outside cron mode.
func (n *Node) resultsReady() chan struct{} {
	if n.results == nil {
		return nil
	}
	return n.results.ready
}

// Cron runs fn on the replica's loop, between two turns, with the
// replica's launcher and through it the cron state (Machine), which are
// not safe to touch from anywhere else; fn must not keep them. It returns
// ErrNotCron outside cron mode, and an error if the replica stopped or
// ctx ended before fn ran.
func (n *Node) Cron(ctx context.Context, fn func(*launcher.Launcher)) error {
	if n.cron == nil {
		return ErrNotCron
	}
	return n.call(ctx, func() { fn(n.cron.l) })
}

// Leadership is the replica's role as the launcher sees it, computed now
// on the loop: Cron's fn may check it to serve a linearizable read (a
// leader that holds the lease and applied everything chosen before its
// term has every write acknowledged so far). It ignores CanLaunch. Call
// it only from inside fn (it reads the replica, which the loop owns).
func (n *Node) Leadership() launcher.Leadership {
	n.catchUpTicks()
	return launcher.LeadershipOf(n.rep.Node().Status(), n.rep.Applied(), n.now(), n.cfg.TickInterval)
}

// ServesReads reports whether this replica may answer a linearizable
// read now: Leadership's lease checked on the clock it is kept on, the
// launchers' (CronOptions.Now), not the caller's. Call it only from
// inside Cron's fn, as Leadership.
func (n *Node) ServesReads() bool { return n.Leadership().Serves(n.now()) }

// ProposeCommand encodes c and proposes it as Propose does, returning the
// state's verdict on it. It returns ErrNotCron outside cron mode.
func (n *Node) ProposeCommand(ctx context.Context, c state.Command) error {
	if n.cron == nil {
		return ErrNotCron
	}
	enc, err := state.Encode(c)
	if err != nil {
		return err
	}
	return n.Propose(ctx, enc)
}

// ProposeCommandFrom runs build on the loop, as Cron runs its fn, and
// proposes the command build returns in the same visit; then it waits as
// ProposeCommandThen does, with then run as there. A write that depends
// on what it reads (a job's version) so costs one visit to the loop
// instead of two, and nothing is applied between the read and the
// proposal. build returning a nil command proposes nothing.
//
// proposed says whether a command was proposed: when it is false, err is
// build's error or why build did not run (ErrNotCron, the replica
// stopped, ctx ended), and nothing was proposed; when it is true, err is
// the proposal's outcome, as ProposeCommandThen returns it.
func (n *Node) ProposeCommandFrom(ctx context.Context, build func(l *launcher.Launcher) (state.Command, error), then func(l *launcher.Launcher)) (proposed bool, err error) {
	if n.cron == nil {
		return false, ErrNotCron
	}
	// The caller is not woken when the loop has run build, only when the
	// proposal is answered: on a busy machine a goroutine woken only to
	// wait again costs a switch and a wait for a CPU on every write.
	// build's outcome, when it proposes nothing, comes through done as
	// errNotProposed; ran tells a caller whose ctx ended when it may read
	// what build set.
	p := n.newProposal(ctx, nil, then)
	var buildErr error
	ran := make(chan struct{})
	call := func() {
		defer close(ran)
		c, err := build(n.cron.l)
		if err == nil && c != nil {
			var enc []byte
			if enc, err = state.Encode(c); err == nil {
				p.data = frameCommand(p.id, enc)
				proposed = true
				n.take(p)
				return
			}
		}
		buildErr = err
		p.done <- errNotProposed
	}
	if err := n.sendCall(ctx, call); err != nil {
		return false, err
	}
	err = n.await(ctx, p)
	<-ran // the loop ran the call when it took it
	if !proposed {
		return false, buildErr
	}
	return true, err
}

// errNotProposed answers ProposeCommandFrom's proposal when build
// proposed nothing; it never leaves ProposeCommandFrom.
var errNotProposed = errors.New("node: nothing proposed")

// ProposeCommandThen is ProposeCommand, and then, when the state accepted
// the command, runs then on the replica's loop right after the command
// applied, before any later command: then sees the state as the command
// left it (a job's new version) and must be quick, must not keep l, and
// must not call into the node.
func (n *Node) ProposeCommandThen(ctx context.Context, c state.Command, then func(l *launcher.Launcher)) error {
	if n.cron == nil {
		return ErrNotCron
	}
	enc, err := state.Encode(c)
	if err != nil {
		return err
	}
	return n.propose(ctx, enc, then)
}

// Snapshot encodes the replica's whole state now, at its applied index,
// without saving it (replica.CurrentSnapshot): what an operator backs up
// or saves to a file.
func (n *Node) Snapshot(ctx context.Context) (paxos.Snapshot, error) {
	var snap paxos.Snapshot
	var err error
	if cerr := n.Call(ctx, func(r *replica.Replica) { snap, err = r.CurrentSnapshot() }); cerr != nil {
		return paxos.Snapshot{}, cerr
	}
	return snap, err
}

// SnapshotSummary says what a cron-mode snapshot holds.
type SnapshotSummary struct {
	Jobs     int
	Paused   int
	Open     int
	LastSlot uint64
	// Commands and Hash are the running hash machine's.
	Commands uint64
	Hash     uint64
	Stats    state.Stats
	// Term is the last Takeover's (zero before the first).
	Term state.Term
	// ClusterID is the cluster's (zero if the snapshot predates it).
	ClusterID state.ClusterID
}

// SnapshotTerm reads the term of the last Takeover a cron-mode snapshot's
// data records, from its header alone (state.SnapshotTerm).
func SnapshotTerm(data []byte) (state.Term, error) {
	if len(data) < hashSnapshotBytes {
		return state.Term{}, fmt.Errorf("node: a snapshot of %d bytes, shorter than its hash", len(data))
	}
	return state.SnapshotTerm(data[hashSnapshotBytes:])
}

// SnapshotClusterID reads the cluster ID a cron-mode snapshot's data
// records, from its header alone (state.SnapshotClusterID).
func SnapshotClusterID(data []byte) (state.ClusterID, error) {
	if len(data) < hashSnapshotBytes {
		return state.ClusterID{}, fmt.Errorf("node: a snapshot of %d bytes, shorter than its hash", len(data))
	}
	return state.SnapshotClusterID(data[hashSnapshotBytes:])
}

// SnapshotWithClusterID is a cron-mode snapshot's data with its state's
// cluster ID replaced by id (state.SnapshotWithClusterID); the command
// hash is kept, the history it sums being the same.
func SnapshotWithClusterID(data []byte, id state.ClusterID) ([]byte, error) {
	if len(data) < hashSnapshotBytes {
		return nil, fmt.Errorf("node: a snapshot of %d bytes, shorter than its hash", len(data))
	}
	st, err := state.SnapshotWithClusterID(data[hashSnapshotBytes:], id)
	if err != nil {
		return nil, err
	}
	// Capped at the hash: append copies it, leaving data as it was.
	return append(data[:hashSnapshotBytes:hashSnapshotBytes], st...), nil
}

// RestoreState decodes the cron state of a cron-mode snapshot's data.
func RestoreState(data []byte) (*state.Machine, error) {
	if len(data) < hashSnapshotBytes {
		return nil, fmt.Errorf("node: a snapshot of %d bytes, shorter than its hash", len(data))
	}
	m := state.New()
	if err := m.Restore(data[hashSnapshotBytes:]); err != nil {
		return nil, err
	}
	return m, nil
}

// DescribeSnapshot decodes a cron-mode snapshot's data (as Snapshot and
// the store hold it) and summarises it; an error if it does not decode.
func DescribeSnapshot(data []byte) (SnapshotSummary, error) {
	if len(data) < hashSnapshotBytes {
		return SnapshotSummary{}, fmt.Errorf("node: a snapshot of %d bytes, shorter than its hash", len(data))
	}
	h := &hashsm.Machine{}
	if err := h.Restore(data[:hashSnapshotBytes]); err != nil {
		return SnapshotSummary{}, err
	}
	m := state.New()
	if err := m.Restore(data[hashSnapshotBytes:]); err != nil {
		return SnapshotSummary{}, err
	}
	sum := SnapshotSummary{Jobs: m.JobCount(), Open: m.OpenCount(), LastSlot: m.LastSlot(), Commands: h.Commands(), Hash: h.Hash(), Stats: m.Stats(), Term: m.Term(), ClusterID: m.ClusterID()}
	for after := ""; ; {
		page, more := m.JobsPage("", after, 1000)
		for _, j := range page {
			if j.Paused {
				sum.Paused++
			}
		}
		if !more {
			break
		}
		after = page[len(page)-1].Name
	}
	return sum, nil
}

package paxos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// testStorage is a plain in-memory Storage: what Save wrote is durable.
// Entries at or below the snapshot index are the log's tail (see compact).
type testStorage struct {
	hs      HardState
	entries map[uint64]Entry
	snap    Snapshot
	last    uint64
	first   uint64 // FirstSlot: entries below it are compacted
	// unavailable is how many more Snapshot calls answer
	// ErrSnapshotTemporarilyUnavailable (a read still in the background).
	unavailable int
	// widest is the widest range (hi - lo) Entries was asked for.
	widest uint64
	// snapErr, when set, is what Snapshot answers (a failing disk).
	snapErr error
}

func newTestStorage() *testStorage { return &testStorage{entries: map[uint64]Entry{}, first: 1} }

func (s *testStorage) InitialState() (HardState, SnapshotMeta, error) {
	return s.hs, s.snap.Meta, nil
}

func (s *testStorage) Entries(lo, hi, maxBytes uint64) ([]Entry, error) {
	if lo < s.first {
		return nil, ErrCompacted
	}
	s.widest = max(s.widest, hi-lo)
	var out []Entry
	var size uint64
	for slot := lo; slot < hi && slot <= s.last; slot++ {
		e, ok := s.entries[slot]
		if !ok {
			continue
		}
		// As the stores do (storage.SizeBudget): stop before the entry
		// that would pass maxBytes, unless it is the first.
		if len(out) > 0 && size+EntrySize(e) > maxBytes {
			break
		}
		out = append(out, e)
		size += EntrySize(e)
	}
	return out, nil
}

func (s *testStorage) LastSlot() (uint64, error)  { return s.last, nil }
func (s *testStorage) FirstSlot() (uint64, error) { return s.first, nil }
func (s *testStorage) Snapshot() (Snapshot, error) {
	if s.unavailable > 0 {
		s.unavailable--
		return Snapshot{}, ErrSnapshotTemporarilyUnavailable
	}
	if s.snapErr != nil {
		return Snapshot{}, s.snapErr
	}
	return s.snap, nil
}

func (s *testStorage) save(rd Ready) {
	if rd.Snapshot != nil {
		s.snap = *rd.Snapshot
		s.deleteThrough(rd.Snapshot.Meta.Index)
		s.last = max(s.last, rd.Snapshot.Meta.Index)
	}
	if rd.HardStateChanged {
		s.hs = rd.HardState
	}
	for _, e := range rd.Entries {
		s.entries[e.Slot] = e
		s.last = max(s.last, e.Slot)
	}
}

// compact takes a snapshot at index (the applied log as data) and drops
// the entries at or below through, keeping those in (through, index] as
// the log's tail.
func (s *testStorage) compact(index, through uint64, data []byte, m Membership) {
	s.snap = Snapshot{Meta: SnapshotMeta{Index: index, Membership: m}, Data: data}
	s.deleteThrough(through)
}

func (s *testStorage) deleteThrough(through uint64) {
	for slot := range s.entries {
		if slot <= through {
			delete(s.entries, slot)
		}
	}
	s.first = max(s.first, through+1)
}

// testReplica is one node of a test cluster with its storage and the
// values it applied.
type testReplica struct {
	node    *Node
	storage *testStorage
	applied []string // value per applied slot, from slot 1 (snapshots included)
	down    bool
}

// testCluster runs nodes with a manually driven network: messages queue up
// until deliver is called.
type testCluster struct {
	t        testing.TB
	members  Membership
	timing   Timing
	limits   Limits
	seed     uint64
	replicas map[ReplicaID]*testReplica
	queue    []Message
	blocked  map[[2]ReplicaID]bool
	trace    *strings.Builder
}

func newTestCluster(t testing.TB, n int, seed uint64) *testCluster {
	c := &testCluster{t: t, timing: DefaultTiming(), limits: DefaultLimits(), seed: seed,
		replicas: map[ReplicaID]*testReplica{}, blocked: map[[2]ReplicaID]bool{}}
	for i := 1; i <= n; i++ {
		c.members.Voters = append(c.members.Voters, ReplicaID(i))
	}
	for _, id := range c.members.Voters {
		c.replicas[id] = &testReplica{storage: newTestStorage()}
		c.start(id)
	}
	return c
}

func (c *testCluster) ids() []ReplicaID { return c.members.Voters }

// setLimits gives every replica, running or restarted later, limits.
func (c *testCluster) setLimits(limits Limits) {
	c.limits = limits
	for _, id := range c.ids() {
		c.replicas[id].node.limits = limits
	}
}

func (c *testCluster) start(id ReplicaID) { c.startWith(id, false) }

// wipe loses a replica's disk and restarts it as a rebuilding learner.
func (c *testCluster) wipe(id ReplicaID) {
	c.replicas[id].storage = newTestStorage()
	c.startWith(id, true)
}

func (c *testCluster) startWith(id ReplicaID, rebuilding bool) {
	r := c.replicas[id]
	applied := r.storage.snap.Meta.Index
	node, err := NewNode(Config{
		ID: id, Membership: c.members, Storage: r.storage,
		Rand:    rand.New(rand.NewPCG(c.seed, uint64(id))),
		Applied: applied, Timing: c.timing, Limits: c.limits, Rebuilding: rebuilding,
	})
	if err != nil {
		c.t.Fatalf("starting %d: %v", id, err)
	}
	r.node, r.down = node, false
	r.applied = decodeSnapshotValues(r.storage.snap)
}

func decodeSnapshotValues(s Snapshot) []string {
	if len(s.Data) == 0 {
		return nil
	}
	return strings.Split(string(s.Data), ",")
}

// crash loses everything not saved: the node is rebuilt from storage.
func (c *testCluster) crash(id ReplicaID) {
	c.replicas[id].down = true
}

func (c *testCluster) restart(id ReplicaID) { c.start(id) }

// process runs every pending Ready of every live node.
func (c *testCluster) process() {
	for progress := true; progress; {
		progress = false
		for _, id := range c.ids() {
			r := c.replicas[id]
			if r.down || !r.node.HasReady() {
				continue
			}
			progress = true
			rd := r.node.Ready()
			r.storage.save(rd)
			c.queue = append(c.queue, rd.EarlyMessages...)
			c.queue = append(c.queue, rd.Messages...)
			if rd.Snapshot != nil {
				r.applied = decodeSnapshotValues(*rd.Snapshot)
			}
			for _, e := range rd.Committed {
				if uint64(len(r.applied))+1 != e.Slot {
					c.t.Fatalf("replica %d applied slot %d after %d", id, e.Slot, len(r.applied))
				}
				r.applied = append(r.applied, valueOf(e))
			}
			r.node.Advance()
			c.checkAgreement()
		}
	}
}

func valueOf(e Entry) string {
	if e.Kind == EntryNoop {
		return "_"
	}
	return string(e.Data)
}

// checkAgreement fails the test if two replicas applied different values
// for one slot.
func (c *testCluster) checkAgreement() {
	var longest []string
	for _, id := range c.ids() {
		a := c.replicas[id].applied
		for i := 0; i < min(len(a), len(longest)); i++ {
			if a[i] != longest[i] {
				c.t.Fatalf("agreement broken at slot %d: %q vs %q", i+1, a[i], longest[i])
			}
		}
		if len(a) > len(longest) {
			longest = a
		}
	}
}

// deliver delivers queued messages (and the ones they cause) until the
// network is quiet or limit messages went through; filter may drop some.
func (c *testCluster) deliver(limit int, filter func(Message) bool) int {
	delivered := 0
	c.process()
	for len(c.queue) > 0 && delivered < limit {
		m := c.queue[0]
		c.queue = c.queue[1:]
		to := c.replicas[m.To]
		if to.down || c.blocked[[2]ReplicaID{m.From, m.To}] || (filter != nil && !filter(m)) {
			c.logf("drop %s", m)
			continue
		}
		if c.trace != nil {
			c.logf("%s", m)
		}
		if err := to.node.Step(m); err != nil {
			c.t.Fatalf("step %s: %v", m, err)
		}
		delivered++
		c.process()
	}
	return delivered
}

func (c *testCluster) logf(format string, args ...any) {
	if c.trace != nil {
		fmt.Fprintf(c.trace, format+"\n", args...)
	}
}

func (c *testCluster) tick(id ReplicaID, n int) {
	for range n {
		if !c.replicas[id].down {
			c.replicas[id].node.Tick()
		}
	}
}

func (c *testCluster) tickAll(n int) {
	for range n {
		for _, id := range c.ids() {
			c.tick(id, 1)
		}
	}
}

// run advances every live replica one tick at a time, delivering all
// messages after each tick.
func (c *testCluster) run(ticks int) {
	for range ticks {
		c.tickAll(1)
		c.deliver(1<<20, nil)
	}
}

// elect makes id the leader: it campaigns as soon as its timer allows, and
// the others wait (their timers are held back) until it wins.
func (c *testCluster) elect(id ReplicaID) {
	c.t.Helper()
	for range 20 * c.timing.ElectionTicks {
		for _, o := range c.ids() {
			if n := c.replicas[o].node; o != id && n.role != Leader {
				n.electionElapsed = 0
			}
		}
		n := c.replicas[id].node
		if n.role == Leader {
			return
		}
		if n.role == Follower {
			n.electionElapsed = max(n.electionElapsed, n.electionTimeout-1)
		}
		c.run(1)
	}
	c.t.Fatalf("replica %d did not become leader:\n%s", id, c.describe())
}

func (c *testCluster) leader() ReplicaID {
	for _, id := range c.ids() {
		r := c.replicas[id]
		if !r.down && r.node.role == Leader {
			return id
		}
	}
	return None
}

func (c *testCluster) propose(id ReplicaID, values ...string) {
	c.t.Helper()
	for _, v := range values {
		if _, err := c.replicas[id].node.Propose([]byte(v)); err != nil {
			c.t.Fatalf("propose %q at %d: %v", v, id, err)
		}
	}
}

func (c *testCluster) block(from, to ReplicaID) { c.blocked[[2]ReplicaID{from, to}] = true }
func (c *testCluster) unblockAll()              { clear(c.blocked) }
func (c *testCluster) isolate(id ReplicaID) {
	for _, o := range c.ids() {
		if o != id {
			c.block(id, o)
			c.block(o, id)
		}
	}
}

func (c *testCluster) describe() string {
	var b strings.Builder
	for _, id := range c.ids() {
		r := c.replicas[id]
		s := r.node.Status()
		state := s.Role.String()
		if r.down {
			state = "down"
		}
		fmt.Fprintf(&b, "%d: %s promised=%s chosen=%d applied=%v\n", id, state, s.Promised, s.Chosen, strings.Join(r.applied, ","))
	}
	return b.String()
}

// acceptEarly hands follower the accept among leader's early messages in
// rd (sent before the leader's own write is done), has it save and
// answer, and steps its MsgAccepted into the leader, whose write stays in
// flight.
func (c *testCluster) acceptEarly(rd Ready, leader, follower ReplicaID) {
	c.t.Helper()
	f := c.replicas[follower]
	for _, m := range rd.EarlyMessages {
		if m.Type != MsgAccept || m.To != follower {
			continue
		}
		if err := f.node.Step(m); err != nil {
			c.t.Fatal(err)
		}
		frd := f.node.Ready()
		f.storage.save(frd)
		f.node.Advance()
		for _, r := range frd.Messages {
			if r.Type == MsgAccepted {
				if err := c.replicas[leader].node.Step(r); err != nil {
					c.t.Fatal(err)
				}
				return
			}
		}
		c.t.Fatalf("replica %d did not answer the accept with a MsgAccepted: %v", follower, frd.Messages)
	}
	c.t.Fatalf("no accept for replica %d among the early messages: %v", follower, rd.EarlyMessages)
}

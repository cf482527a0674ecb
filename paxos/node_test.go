package paxos

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// appliedOf returns the commands a replica applied, without no-ops (every
// new leader chooses one).
func appliedOf(c *testCluster, id ReplicaID) string {
	var cmds []string
	for _, v := range c.replicas[id].applied {
		if v != "_" {
			cmds = append(cmds, v)
		}
	}
	return strings.Join(cmds, ",")
}

// settle lets heartbeats carry the commit index to every follower.
func (c *testCluster) settle() { c.run(3 * c.timing.HeartbeatTicks) }

func TestElectProposeApply(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := newTestCluster(t, n, 1)
			c.elect(1)
			c.propose(1, "a", "b", "c")
			c.deliver(1<<20, nil)
			c.settle()
			for _, id := range c.ids() {
				if got := appliedOf(c, id); got != "a,b,c" {
					t.Fatalf("replica %d applied %q\n%s", id, got, c.describe())
				}
			}
		})
	}
}

func TestProposeOnFollowerFails(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	if _, err := c.replicas[2].node.Propose([]byte("x")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("got %v, want ErrNotLeader", err)
	}
}

func TestBatchingAndPipelining(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.limits.MaxBatchEntries = 4
	c.limits.MaxInflightAccepts = 3
	for _, id := range c.ids() {
		c.replicas[id].node.limits = c.limits
	}
	c.elect(1)
	var vals []string
	for i := range 30 {
		vals = append(vals, fmt.Sprint(i))
	}
	c.propose(1, vals...)
	c.process()
	// One Ready: three accepts of four entries each went to each follower,
	// and no more until one is answered.
	accepts := 0
	for _, m := range c.queue {
		if m.Type == MsgAccept && m.To == 2 {
			accepts++
			if len(m.Entries) != 4 {
				t.Fatalf("batch of %d entries, want 4", len(m.Entries))
			}
		}
	}
	if accepts != 3 {
		t.Fatalf("%d accepts in flight to replica 2, want 3", accepts)
	}
	c.deliver(1<<20, nil)
	c.settle()
	for _, id := range c.ids() {
		if got := appliedOf(c, id); got != strings.Join(vals, ",") {
			t.Fatalf("replica %d applied %q", id, got)
		}
	}
	// 30 proposals and the election's no-op, in batches of at most 4.
	st := c.replicas[1].node.Stats()
	if st.Proposals != 30 || st.BecameLeader != 1 || st.Elections != 1 {
		t.Fatalf("stats %+v", st)
	}
	if st.EntriesSent < 2*31 || st.AcceptsSent < 2*8 {
		t.Fatalf("sent %d entries in %d accepts; want each of 31 slots to both followers, 4 per accept", st.EntriesSent, st.AcceptsSent)
	}
}

// A leader crashes after phase 1, before any accept left: the next leader
// finds nothing and fills the gap-free log; nothing is lost that was chosen.
func TestLeaderCrashBetweenPhases(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a")
	c.deliver(1<<20, nil)
	c.settle()
	// Replica 2 campaigns; its promises arrive but it crashes before its
	// accepts are sent.
	c.isolate(1) // the leader goes quiet; replica 2 campaigns
	noPhase2 := func(m Message) bool { return m.Type != MsgAccept && m.Type != MsgHeartbeat }
	for i := 0; c.replicas[2].node.role != Leader; i++ {
		if i > 10*c.timing.ElectionTicks {
			t.Fatalf("replica 2 did not win phase 1:\n%s", c.describe())
		}
		c.replicas[3].node.electionElapsed = 0
		c.tickAll(1)
		c.deliver(1<<20, noPhase2)
	}
	c.unblockAll()
	c.crash(2)
	c.queue = nil
	c.run(6 * c.timing.ElectionTicks)
	l := c.leader()
	if l == None || l == 2 {
		t.Fatalf("no new leader:\n%s", c.describe())
	}
	c.propose(l, "b")
	c.deliver(1<<20, nil)
	c.restart(2)
	c.run(2 * c.timing.ElectionTicks)
	for _, id := range c.ids() {
		if got := appliedOf(c, id); got != "a,b" {
			t.Fatalf("replica %d applied %q\n%s", id, got, c.describe())
		}
	}
}

// A value accepted by a minority before the leader died is found by the next
// leader in a promise and re-proposed, not lost or replaced.
func TestNewLeaderReproposesHighestBallotValue(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a")
	// Only replica 2 receives the accept; replica 3 gets nothing.
	c.deliver(1<<20, func(m Message) bool { return m.To != 3 })
	c.crash(1)
	c.queue = nil
	c.elect(3)
	c.propose(3, "b")
	c.deliver(1<<20, nil)
	c.settle()
	for _, id := range []ReplicaID{2, 3} {
		if got := appliedOf(c, id); got != "a,b" {
			t.Fatalf("replica %d applied %q\n%s", id, got, c.describe())
		}
	}
}

func TestNoopFillsGap(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	// Replica 2 accepted slots 1 and 3 under an old ballot; nobody holds
	// slot 2. (Within one ballot followers never accept across a gap, but
	// holes across ballots and acceptors are ordinary Paxos.)
	old := Ballot{Round: 1, Replica: 1}
	st := c.replicas[2].storage
	st.hs.Promised = old
	st.entries[1] = Entry{Slot: 1, Ballot: old, Kind: EntryCommand, Data: []byte("a")}
	st.entries[3] = Entry{Slot: 3, Ballot: old, Kind: EntryCommand, Data: []byte("c")}
	st.last = 3
	c.crash(1)
	c.restart(2)
	c.elect(2)
	c.settle()
	for _, id := range []ReplicaID{2, 3} {
		if got := strings.Join(c.replicas[id].applied, ","); got != "a,_,c" {
			t.Fatalf("replica %d applied %q, want a,_,c\n%s", id, got, c.describe())
		}
	}
}

// An old leader's accepts that arrive after a new leader was promised are
// refused with a nack, and the old leader steps down.
func TestOldLeaderLateAccepts(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a")
	c.deliver(1<<20, nil)
	c.settle()
	c.propose(1, "late")
	c.process()
	var late []Message
	for _, m := range c.queue {
		if m.Type == MsgAccept {
			late = append(late, m)
		}
	}
	c.queue = nil
	c.isolate(1)
	c.run(6 * c.timing.ElectionTicks)
	l := c.leader()
	if l == None || l == 1 {
		t.Fatalf("no new leader among 2 and 3:\n%s", c.describe())
	}
	c.propose(l, "b")
	c.deliver(1<<20, nil)
	c.unblockAll()
	c.queue = append(c.queue, late...)
	nacks := 0
	c.deliver(1<<20, func(m Message) bool {
		if m.Type == MsgNack {
			nacks++
		}
		return true
	})
	if nacks == 0 {
		t.Fatalf("late accepts were not refused")
	}
	c.settle()
	for _, id := range c.ids() {
		got := appliedOf(c, id)
		if got != "a,b" {
			t.Fatalf("replica %d applied %q\n%s", id, got, c.describe())
		}
	}
}

// Two replicas campaign at once: at most one wins each ballot, and the log
// stays in agreement (checked after every Ready by the harness).
func TestDuelingProposers(t *testing.T) {
	for seed := range uint64(20) {
		c := newTestCluster(t, 3, seed)
		c.elect(1)
		c.propose(1, "a")
		c.deliver(1<<20, func(m Message) bool { return m.To == 2 })
		c.isolate(1)
		c.run(c.timing.LeaseTicks)
		for _, id := range []ReplicaID{2, 3} {
			n := c.replicas[id].node
			n.electionElapsed = n.electionTimeout - 1
		}
		c.tick(2, 1)
		c.tick(3, 1)
		c.deliver(1<<20, nil)
		c.run(10 * c.timing.ElectionTicks)
		c.unblockAll()
		c.run(4 * c.timing.ElectionTicks)
		l := c.leader()
		if l == None {
			t.Fatalf("seed %d: no leader\n%s", seed, c.describe())
		}
		c.propose(l, "z")
		c.deliver(1<<20, nil)
		c.settle()
		for _, id := range c.ids() {
			if got := appliedOf(c, id); !strings.HasSuffix(got, "z") || !strings.HasPrefix(got, "a") {
				t.Fatalf("seed %d: replica %d applied %q\n%s", seed, id, got, c.describe())
			}
		}
	}
}

// The promise a replica sends is in the same Ready as the hard state that
// records it: the caller persists it before the message leaves, so a crash
// before the sync loses the promise and the message together.
func TestPromiseIsPersistedBeforeItIsSent(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.tickAll(c.timing.LeaseTicks)
	n1 := c.replicas[1].node
	n1.electionElapsed = n1.electionTimeout - 1
	c.tick(1, 1)
	var prepare Message
	c.deliver(1<<20, func(m Message) bool {
		if m.Type == MsgPrepare && m.To == 2 {
			prepare = m
		}
		return m.Type == MsgPreVote || m.Type == MsgPreVoteReply
	})
	c.queue = nil
	n2 := c.replicas[2].node
	if err := n2.Step(prepare); err != nil {
		t.Fatal(err)
	}
	rd := n2.Ready()
	if !rd.HardStateChanged || rd.HardState.Promised != prepare.Ballot {
		t.Fatalf("promise not handed out for persistence: %+v", rd.HardState)
	}
	if !slices.ContainsFunc(rd.Messages, func(m Message) bool { return m.Type == MsgPromise && !m.Reject }) {
		t.Fatalf("no promise in the same Ready")
	}
	// The replica crashes before persisting: the promise is gone, and so
	// is the message that would have told anyone about it.
	c.crash(2)
	c.restart(2)
	if got := c.replicas[2].node.hs.Promised; !got.IsZero() {
		t.Fatalf("promise survived a crash before its sync: %s", got)
	}
}

// A follower that missed entries the leader has compacted away is caught up
// with a snapshot, which overtakes whatever partial log it had.
func TestSnapshotCatchUp(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a")
	c.deliver(1<<20, nil)
	c.settle()
	c.crash(3)
	c.propose(1, "b", "c", "d")
	c.deliver(1<<20, nil)
	c.settle()
	// The leader and replica 2 snapshot and compact through slot 3.
	for _, id := range []ReplicaID{1, 2} {
		r := c.replicas[id]
		r.storage.compact(3, 3, []byte(strings.Join(r.applied[:3], ",")), c.members)
		r.node.Compacted(3, 3)
	}
	c.restart(3)
	c.run(c.timing.LeaseTicks)
	c.propose(1, "e")
	c.deliver(1<<20, nil)
	c.run(c.timing.ElectionTicks)
	if got := appliedOf(c, 3); got != "a,b,c,d,e" {
		t.Fatalf("replica 3 applied %q\n%s", got, c.describe())
	}
	if c.replicas[3].storage.snap.Meta.Index != 3 {
		t.Fatalf("replica 3 did not install the snapshot")
	}
	if st := c.replicas[1].node.Stats(); st.CatchUps == 0 {
		t.Fatalf("the leader counted no catch-up: %+v", st)
	}
}

// A leader halted by its storage leads nothing: its status must not
// say Leader, or a server publishing it (gossip's leader hint, the
// status API, the leader metric) points clients at a replica that will
// never answer. Found in review: the status kept the role it had.
func TestHaltedLeaderDoesNotReportLeading(t *testing.T) {
	c := chosenThenThirdDown(t)
	c.propose(1, "d")
	c.deliver(1<<20, nil)
	c.settle()
	r := c.replicas[1]
	r.storage.compact(4, 4, []byte(strings.Join(r.applied[:4], ",")), c.members)
	r.node.Compacted(4, 4)
	r.storage.snapErr = errors.New("read error on the snapshot")
	c.restart(3)
	c.run(c.timing.LeaseTicks)
	if err := r.node.Err(); !errors.Is(err, ErrHalted) {
		t.Fatalf("the leader did not halt on its snapshot's read error: %v\n%s", err, c.describe())
	}
	if st := r.node.Status(); st.Role == Leader || st.Leader == 1 || st.LeaseUntil != 0 || st.Ballot != (Ballot{}) {
		t.Fatalf("a halted leader's status: %+v", st)
	}
	if _, ok := r.node.LeaseValidUntil(); ok {
		t.Fatal("a halted leader holds the lease")
	}
}

func TestInvalidMessagesRejected(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	n := c.replicas[1].node
	cases := map[string]Message{
		"unknown type":   {Type: 99, From: 2, To: 1},
		"wrong receiver": {Type: MsgHeartbeat, From: 2, To: 3, Start: 1},
		"non-member":     {Type: MsgHeartbeat, From: 9, To: 1, Start: 1},
		"from self":      {Type: MsgHeartbeat, From: 1, To: 1, Start: 1},
		"gap in accept": {Type: MsgAccept, From: 2, To: 1, Start: 1, Ballot: Ballot{1, 2},
			Entries: []Entry{{Slot: 1, Ballot: Ballot{1, 2}, Kind: EntryNoop}, {Slot: 3, Ballot: Ballot{1, 2}, Kind: EntryNoop}}},
		"foreign ballot": {Type: MsgAccept, From: 2, To: 1, Start: 1, Ballot: Ballot{1, 2},
			Entries: []Entry{{Slot: 1, Ballot: Ballot{1, 3}, Kind: EntryNoop}}},
		"bad kind":       {Type: MsgChosen, From: 2, To: 1, Entries: []Entry{{Slot: 1, Kind: 7}}},
		"stray snapshot": {Type: MsgAccept, From: 2, To: 1, Start: 1, Snapshot: &Snapshot{}},
		"transfer without id": {Type: MsgSnapshot, From: 2, To: 1, Last: 3,
			Snapshot: &Snapshot{Meta: SnapshotMeta{Index: 5}, Data: []byte("abc")}},
		"chunk beyond its snapshot": {Type: MsgSnapshot, From: 2, To: 1, Round: 1, Start: 1, Last: 3,
			Snapshot: &Snapshot{Meta: SnapshotMeta{Index: 5}, Data: []byte("abc")}},
		"ack beyond its snapshot": {Type: MsgSnapshotAck, From: 2, To: 1, Round: 1, Start: 4, Last: 3},
		// Found in review: a heartbeat from slot 0 made the follower's
		// accepted-through wrap to the top and mark chosen slots it never
		// held; a prepare from slot 0 with chosen at the top passed
		// Start == Chosen+1 (wrapped) and halted the replica.
		"heartbeat from slot zero": {Type: MsgHeartbeat, From: 2, To: 1, Ballot: Ballot{5, 2}, Commit: 10, Round: 1},
		"prepare from slot zero":   {Type: MsgPrepare, From: 2, To: 1, Ballot: Ballot{5, 2}, Chosen: math.MaxUint64},
		// Found in review: the next ballot after a round at the top
		// wrapped to 0 and the replica panicked; a snapshot at the top
		// index wrapped chosen+1 and halted it.
		"round at the top": {Type: MsgSnapshotAck, From: 2, To: 1, Ballot: Ballot{math.MaxUint64, 3}, Round: 1, Start: 1, Last: 3},
		"snapshot index at the top": {Type: MsgSnapshot, From: 2, To: 1, Round: 1, Start: 0, Last: 3,
			Snapshot: &Snapshot{Meta: SnapshotMeta{Index: math.MaxUint64}, Data: []byte("abc")}},
		// Found in review: an accept at the top slot made the follower's
		// last slot 2^64-1, past which its log read nothing, so it never
		// applied again; the other slots are bounded alike.
		"accept at the top slot": {Type: MsgAccept, From: 2, To: 1, Ballot: Ballot{5, 2}, Start: math.MaxUint64,
			Entries: []Entry{{Slot: math.MaxUint64, Ballot: Ballot{5, 2}, Kind: EntryNoop}}},
		"entry past the slots": {Type: MsgAccept, From: 2, To: 1, Ballot: Ballot{5, 2}, Start: 1 << 62,
			Entries: []Entry{{Slot: 1 << 62, Ballot: Ballot{5, 2}, Kind: EntryNoop}}},
		"commit at the top":  {Type: MsgHeartbeat, From: 2, To: 1, Ballot: Ballot{5, 2}, Start: 1, Commit: math.MaxUint64, Round: 1},
		"through at the top": {Type: MsgAccepted, From: 2, To: 1, Ballot: Ballot{5, 1}, Through: math.MaxUint64, Last: 1},
		"chosen at the top":  {Type: MsgChosen, From: 2, To: 1, Chosen: math.MaxUint64},
		"last at the top":    {Type: MsgAccepted, From: 2, To: 1, Ballot: Ballot{5, 1}, Through: 1, Last: math.MaxUint64},
	}
	for name, m := range cases {
		if err := n.Step(m); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s: got %v, want ErrInvalidMessage", name, err)
		}
	}
}

// TestBadPromiseIsRefused: a promise to a candidacy that reports slots
// below the candidacy's start, or further above it than an eligible
// acceptor holds (MaxPromiseLagSlots), is refused and the candidate goes
// on. Found in review: the first halted the candidate for good; the
// second would have had the new leader fill every slot up to it with a
// no-op (2^62 of them at most).
func TestBadPromiseIsRefused(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a", "b", "c")
	c.run(3 * c.timing.HeartbeatTicks)
	n := c.replicas[2].node
	c.isolate(2)
	c.run(c.timing.LeaseTicks + 1)
	n.startPrepare() // what a quorum of pre-votes leads to
	if n.role != Candidate {
		t.Fatalf("replica 2 is %s, want a candidate", n.role)
	}
	b, start := n.cand.ballot, n.cand.start
	lag := uint64(n.limits.MaxPromiseLagSlots)
	for name, slot := range map[string]uint64{"below start": start - 1, "past the lag": start + lag} {
		m := Message{Type: MsgPromise, From: 3, To: 2, Ballot: b, Entries: []Entry{{Slot: slot, Ballot: b, Kind: EntryCommand, Data: []byte("z")}}}
		if err := n.Step(m); !errors.Is(err, ErrInvalidMessage) || n.Err() != nil {
			t.Fatalf("%s: Step = %v, replica's error %v; want ErrInvalidMessage and no halt", name, err, n.Err())
		}
		if n.role != Candidate || len(n.cand.promises) != 1 {
			t.Fatalf("%s: the promise counted (%s, %d promises)", name, n.role, len(n.cand.promises))
		}
	}
	// The last slot an eligible acceptor can report is taken.
	m := Message{Type: MsgPromise, From: 3, To: 2, Ballot: b, Entries: []Entry{{Slot: start + lag - 1, Ballot: b, Kind: EntryNoop}}}
	if err := n.Step(m); err != nil {
		t.Fatalf("a promise at the lag's end: %v", err)
	}
}

// A replica that lost its disk learns without voting until a ballot
// prepared after it rejoined chose a slot; then it votes again, and the
// cluster survives losing another replica.
func TestRebuildAfterDiskLoss(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a", "b")
	c.deliver(1<<20, nil)
	c.settle()
	c.crash(3)
	c.wipe(3)
	if !c.replicas[3].node.Status().Rebuilding {
		t.Fatal("wiped replica is not rebuilding")
	}
	c.run(4 * c.timing.ElectionTicks)
	if c.replicas[3].node.Status().Rebuilding {
		t.Fatalf("replica 3 still rebuilding:\n%s", c.describe())
	}
	if got := appliedOf(c, 3); got != "a,b" {
		t.Fatalf("replica 3 applied %q", got)
	}
	// Replica 3 now votes: with 2 down, 1 and 3 still commit.
	c.crash(2)
	l := c.leader()
	if l != 1 {
		t.Fatalf("leader is %d, want 1:\n%s", l, c.describe())
	}
	c.propose(1, "c")
	c.deliver(1<<20, nil)
	c.settle()
	if got := appliedOf(c, 3); got != "a,b,c" {
		t.Fatalf("replica 3 applied %q:\n%s", got, c.describe())
	}
}

// While rebuilding, a replica never answers with a vote.
func TestRebuildingReplicaCastsNoVote(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.crash(3)
	c.wipe(3)
	c.crash(2)
	c.propose(1, "x")
	c.run(2 * c.timing.ElectionTicks)
	if got := appliedOf(c, 1); got != "" {
		t.Fatalf("leader chose %q with a rebuilding replica's vote", got)
	}
}

// A failure detector's suspicion of the leader makes a follower campaign at
// its next tick instead of waiting out its timeout; the acceptors' leases
// still hold it back while the leader is alive.
func TestReportSuspectSpeedsUpElection(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	n2 := c.replicas[2].node
	// A wrong suspicion while the leader is alive changes nothing.
	n2.ReportSuspect(1)
	c.run(2)
	if c.leader() != 1 || n2.hs.Promised != c.replicas[1].node.lead.ballot {
		t.Fatalf("a wrong suspicion disrupted the leader:\n%s", c.describe())
	}
	// The leader dies: told once, replica 2 campaigns as soon as the
	// leases it granted lapse, well before its own election timeout.
	c.crash(1)
	n2.ReportSuspect(1)
	for i := 0; ; i++ {
		if c.leader() == 2 {
			if i > c.timing.LeaseTicks+5 {
				t.Fatalf("elected %d ticks after the crash; leases last %d", i, c.timing.LeaseTicks)
			}
			return
		}
		if i > 4*c.timing.ElectionTicks {
			t.Fatalf("no election:\n%s", c.describe())
		}
		c.replicas[3].node.electionElapsed = 0 // let replica 2 be the one
		c.run(1)
	}
}

// With writes in flight, a leader's own accept counts toward choosing only
// once Persisted confirms it: with one follower cut off, the other
// follower's vote alone must not choose the slot.
func TestLeaderVoteCountsOnlyOncePersisted(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.settle()
	c.isolate(3)
	leader := c.replicas[1].node
	if _, err := leader.Propose([]byte("x")); err != nil {
		t.Fatal(err)
	}
	rd := leader.Ready() // its write is now "in flight"
	chosenBefore := leader.Status().Chosen
	// Replica 2 accepts and answers; the leader steps the answer while its
	// own write is still in flight, and takes another Ready meanwhile.
	c.acceptEarly(rd, 1, 2)
	if got := leader.Status().Chosen; got != chosenBefore {
		t.Fatalf("chose slot %d with its own write unconfirmed", got)
	}
	if leader.InFlight() != 1 {
		t.Fatalf("%d Readys in flight, want 1", leader.InFlight())
	}
	c.replicas[1].storage.save(rd)
	leader.Persisted()
	if got := leader.Status().Chosen; got != chosenBefore+1 {
		t.Fatalf("chosen %d after the write was confirmed, want %d", got, chosenBefore+1)
	}
}

// snapshotCluster has a follower (3) that missed slots its peers compacted
// away, so that it can only be caught up with the leader's snapshot,
// streamed in chunks of chunkBytes: replica 1 leads, 3 restarts behind.
func snapshotCluster(t *testing.T, chunkBytes uint64, values int) *testCluster {
	t.Helper()
	c := newTestCluster(t, 3, 1)
	limits := c.limits
	limits.MaxSnapshotChunkBytes = chunkBytes
	c.setLimits(limits)
	c.elect(1)
	c.crash(3)
	for i := range values {
		c.propose(1, fmt.Sprintf("value-%03d", i))
	}
	c.deliver(1<<20, nil)
	c.settle()
	for _, id := range []ReplicaID{1, 2} {
		r := c.replicas[id]
		index := uint64(len(r.applied))
		r.storage.compact(index, index, []byte(strings.Join(r.applied, ",")), c.members)
		r.node.Compacted(index, index)
	}
	c.restart(3)
	return c
}

// A snapshot of many chunks reaches a follower through a network that
// loses a third of the chunks and acks: retries resend from what the
// follower holds, and once it is installed neither side keeps anything of
// the transfer.
func TestSnapshotTransferSurvivesLoss(t *testing.T) {
	c := snapshotCluster(t, 16, 40)
	snapBytes := len(c.replicas[1].storage.snap.Data)
	n := 0
	lossy := func(m Message) bool {
		if m.Type != MsgSnapshot && m.Type != MsgSnapshotAck {
			return true
		}
		n++
		return n%3 != 0
	}
	for range 40 * c.timing.ElectionTicks {
		c.tickAll(1)
		c.deliver(1<<20, lossy)
		if c.replicas[3].storage.snap.Meta.Index > 0 && len(c.replicas[1].node.sends) == 0 {
			break
		}
	}
	if got, want := appliedOf(c, 3), appliedOf(c, 1); got != want {
		t.Fatalf("replica 3 applied %q, want %q\n%s", got, want, c.describe())
	}
	leader, follower := c.replicas[1].node, c.replicas[3].node
	st := leader.Stats()
	chunks := uint64((snapBytes + 15) / 16)
	if st.SnapshotsSent == 0 || st.SnapshotChunks <= chunks || st.Retransmissions == 0 {
		t.Fatalf("a %d-byte snapshot in 16-byte chunks: stats %+v, want more than %d chunks sent, some again", snapBytes, st, chunks)
	}
	if len(leader.sends) != 0 || leader.image != nil || follower.recv != nil {
		t.Fatalf("transfer state left behind: sends %v, image %v, recv %v", leader.sends, leader.image != nil, follower.recv)
	}
}

// chunk is a MsgSnapshot of transfer id from 'from' under ballot b: bytes
// [start, start+len(data)) of a snapshot at index of total bytes.
func chunk(from ReplicaID, b Ballot, id, index, start, total uint64, data string) Message {
	return Message{Type: MsgSnapshot, From: from, To: 3, Ballot: b, Round: id, Start: start, Last: total,
		Snapshot: &Snapshot{Meta: SnapshotMeta{Index: index, Membership: Membership{Voters: []ReplicaID{1, 2, 3}}}, Data: []byte(data)}}
}

// acksOf steps m into n and returns the acks it answers with.
func acksOf(t *testing.T, n *Node, m Message) []string {
	t.Helper()
	if err := n.Step(m); err != nil {
		t.Fatalf("step %s: %v", m, err)
	}
	rd := n.Ready()
	n.Advance()
	var acks []string
	for _, o := range slices.Concat(rd.EarlyMessages, rd.Messages) {
		if o.Type == MsgSnapshotAck {
			acks = append(acks, fmt.Sprintf("to %d id %d holds %d reject %t", o.To, o.Round, o.Start, o.Reject))
		}
	}
	return acks
}

// The receiver holds one transfer: a chunk of another is refused unless
// it is a newer leader's, its sender's next transfer, or the held one
// stalled, so that two senders cannot keep restarting each other.
func TestSnapshotReceiverKeepsOneTransfer(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	n := c.replicas[3].node
	b1, b2 := Ballot{Round: 2, Replica: 1}, Ballot{Round: 4, Replica: 2}
	steps := []struct {
		name string
		m    Message
		want string
	}{
		{"first chunk", chunk(1, b1, 7, 8, 0, 9, "abc"), "to 1 id 7 holds 3 reject false"},
		{"duplicate", chunk(1, b1, 7, 8, 0, 9, "abc"), "to 1 id 7 holds 3 reject false"},
		{"gap", chunk(1, b1, 7, 8, 6, 9, "ghi"), "to 1 id 7 holds 3 reject false"},
		{"older transfer of the same sender", chunk(1, b1, 5, 4, 0, 9, "xyz"), "to 1 id 5 holds 0 reject true"},
		{"another replica under a lower ballot", chunk(2, Ballot{}, 9, 8, 0, 9, "abc"), "to 2 id 9 holds 0 reject true"},
		{"in order", chunk(1, b1, 7, 8, 3, 9, "def"), "to 1 id 7 holds 6 reject false"},
		{"a newer leader's transfer replaces it", chunk(2, b2, 11, 8, 3, 9, "def"), "to 2 id 11 holds 0 reject false"},
		{"the old leader's is refused", chunk(1, b1, 7, 8, 6, 9, "ghi"), "to 1 id 7 holds 0 reject true"},
		{"from the start", chunk(2, b2, 11, 8, 0, 9, "abc"), "to 2 id 11 holds 3 reject false"},
	}
	for _, s := range steps {
		if got := acksOf(t, n, s.m); len(got) != 1 || got[0] != s.want {
			t.Fatalf("%s: acks %v, want [%s]", s.name, got, s.want)
		}
	}
	// A transfer that stalls is dropped, with its memory, and another may
	// take its place.
	for range snapshotStallTicks(c.timing) {
		n.Tick()
	}
	if n.recv != nil {
		t.Fatalf("a stalled transfer is still held: %+v", n.recv)
	}
	if got := acksOf(t, n, chunk(1, b1, 13, 8, 0, 9, "abc")); len(got) != 1 || got[0] != "to 1 id 13 holds 3 reject false" {
		t.Fatalf("after the stall: acks %v", got)
	}
}

// A transfer announcing more than MaxSnapshotBytes is refused with
// ErrSnapshotTooLarge before the receiver holds any of it.
func TestSnapshotOverLimitRefused(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	limits := c.limits
	limits.MaxSnapshotBytes = 8
	c.setLimits(limits)
	n := c.replicas[3].node
	err := n.Step(chunk(1, Ballot{Round: 2, Replica: 1}, 7, 8, 0, 9, "abc"))
	if !errors.Is(err, ErrSnapshotTooLarge) || errors.Is(err, ErrInvalidMessage) || !strings.Contains(err.Error(), "of 9 bytes, over MaxSnapshotBytes (8)") {
		t.Fatalf("got %v, want ErrSnapshotTooLarge naming the sizes", err)
	}
	if n.recv != nil || n.HasReady() {
		t.Fatalf("a refused transfer left state: recv %+v, ready %t", n.recv, n.HasReady())
	}
	if err := n.Step(chunk(1, Ballot{Round: 2, Replica: 1}, 7, 8, 0, 8, "abc")); err != nil {
		t.Fatalf("a snapshot at the limit: %v", err)
	}
}

// A follower that restarts in the middle of a transfer has forgotten the
// bytes it held: its answer to the next chunk (it holds none) sends the
// leader back to the start of the snapshot.
func TestSnapshotTransferAfterReceiverRestart(t *testing.T) {
	c := snapshotCluster(t, 16, 20)
	restarted := false
	for range 20 * c.timing.ElectionTicks {
		c.tickAll(1)
		c.deliver(1<<20, func(m Message) bool {
			if !restarted && m.Type == MsgSnapshotAck && m.Start >= 64 {
				// 3 holds 64 bytes or more; it crashes before this ack
				// leaves and comes back with none.
				restarted = true
				c.crash(3)
				c.restart(3)
				return false
			}
			return true
		})
		if c.replicas[3].storage.snap.Meta.Index > 0 {
			break
		}
	}
	if !restarted {
		t.Fatal("the transfer never reached 64 bytes")
	}
	if got, want := appliedOf(c, 3), appliedOf(c, 1); got != want {
		t.Fatalf("replica 3 applied %q, want %q\n%s", got, want, c.describe())
	}
}

// A candidate trailing in chosen entries whose bytes pass MaxPromiseBytes
// is caught up instead of promised (found in review: a promise was
// bounded in slots only, and 65,536 slots of 2 MiB commands would not
// fit a frame); caught up, it can win.
func TestPromiseIsBoundedInBytes(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	limits := DefaultLimits()
	limits.MaxPromiseBytes = 512
	c.setLimits(limits)
	c.elect(1)
	c.crash(3)
	var values []string
	for i := range 20 {
		values = append(values, fmt.Sprintf("%03d%s", i, strings.Repeat("x", 97)))
	}
	c.propose(1, values...)
	c.deliver(1<<20, nil)
	c.settle()
	c.crash(1)
	c.restart(3)
	refused, promised := 0, 0
	inspect := func(m Message) bool {
		if m.Type != MsgPromise || m.From != 2 {
			return true
		}
		if m.Reject {
			refused++
			return true
		}
		promised++
		if got := chosenBytes(m.Entries, m.Chosen); got > limits.MaxPromiseBytes {
			t.Fatalf("replica 2 promised %d bytes of chosen entries (limit %d): %s", got, limits.MaxPromiseBytes, m)
		}
		return true
	}
	// Replica 2's timer is held back: 3, far behind, campaigns until it
	// has been caught up enough to win.
	for range 40 * c.timing.ElectionTicks {
		c.replicas[2].node.electionElapsed = 0
		c.tickAll(1)
		c.deliver(1<<20, inspect)
		if c.leader() == 3 {
			break
		}
	}
	if c.leader() != 3 || refused == 0 || promised == 0 {
		t.Fatalf("leader %d, %d refusals and %d promises from 2; want 3 leading after both\n%s", c.leader(), refused, promised, c.describe())
	}
	c.propose(3, "z")
	c.deliver(1<<20, nil)
	c.settle()
	if got, want := appliedOf(c, 3), strings.Join(append(values, "_", "z"), ","); !strings.HasSuffix(got, ",z") || len(c.replicas[3].applied) < len(values)+1 {
		t.Fatalf("replica 3 applied %q, want the 20 values then z (%q, with no-ops)", got, want)
	}
}

// A leader's proposals not yet chosen are bounded in bytes as well as in
// slots (found in review: an acceptor sends every entry it accepted and
// does not know chosen in each promise, and with the leader's own disk
// slow they could pass a frame, which the transport drops: no candidate
// needing that promise could win). Past MaxUncommittedBytes Propose
// answers ErrBusy; a command alone is proposed whatever its size; what
// is chosen stops counting.
func TestUncommittedProposalsAreBoundedInBytes(t *testing.T) {
	c := ledWithUncommittedBound(t, 1000)
	leader := c.replicas[1].node
	value := strings.Repeat("x", 168) // 200 bytes with EntrySize's 32
	c.isolate(1)
	proposed := 0
	for {
		_, err := leader.Propose([]byte(value))
		if errors.Is(err, ErrBusy) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		proposed++
		if proposed > 10 {
			t.Fatalf("%d proposals of 200 bytes taken under a bound of 1,000, nothing chosen", proposed)
		}
	}
	if proposed != 5 || leader.lead.pendingBytes != 1000 {
		t.Fatalf("%d proposals taken, %d bytes pending; want 5 and 1,000", proposed, leader.lead.pendingBytes)
	}
	c.unblockAll()
	c.deliver(1<<20, nil)
	c.settle()
	if leader.lead.pendingBytes != 0 || leader.hs.Chosen != leader.log.lastSlot {
		t.Fatalf("after everything was chosen: %d bytes pending, chosen %d of %d", leader.lead.pendingBytes, leader.hs.Chosen, leader.log.lastSlot)
	}
	// Nothing pending: one command over the bound is taken, a second is not.
	big := strings.Repeat("y", 1500)
	if _, err := leader.Propose([]byte(big)); err != nil {
		t.Fatalf("a lone command over the bound: %v", err)
	}
	if _, err := leader.Propose([]byte("z")); !errors.Is(err, ErrBusy) {
		t.Fatalf("a command behind one over the bound: %v, want ErrBusy", err)
	}
	c.deliver(1<<20, nil)
	c.settle()
	c.propose(1, "z")
	c.deliver(1<<20, nil)
	c.settle()
	if got := appliedOf(c, 2); !strings.HasSuffix(got, ","+big+",z") {
		t.Fatalf("replica 2 applied %q, want the big command then z at the end", got)
	}
}

// ledWithUncommittedBound is a cluster of three led by replica 1, whose
// leaders keep at most bound bytes unchosen.
func ledWithUncommittedBound(t *testing.T, bound uint64) *testCluster {
	c := newTestCluster(t, 3, 1)
	limits := DefaultLimits()
	limits.MaxUncommittedBytes = bound
	c.setLimits(limits)
	c.elect(1)
	c.settle()
	return c
}

// A new leader counts its re-proposals: a tail accepted under the last
// leader, up to its bound, leaves the new one no room until it is chosen.
func TestReproposalsCountAgainstTheBound(t *testing.T) {
	c := ledWithUncommittedBound(t, 1000)
	// 1's accepts reach 2 only; 2 never answers, so nothing is chosen.
	c.block(1, 3)
	c.block(2, 1)
	value := strings.Repeat("x", 168) // 200 bytes with EntrySize's 32
	c.propose(1, value, value, value, value, value)
	c.deliver(1<<20, nil)
	c.crash(1)
	c.unblockAll()
	// 2 wins with 3's promise, but 3's answers to its accepts are lost:
	// its re-proposals stay pending.
	unanswered := func(m Message) bool {
		return m.From != 3 || (m.Type != MsgAccepted && m.Type != MsgHeartbeatReply)
	}
	n2 := c.replicas[2].node
	for range 20 * c.timing.ElectionTicks {
		if n2.role == Leader {
			break
		}
		c.replicas[3].node.electionElapsed = 0
		if n2.role == Follower {
			n2.electionElapsed = max(n2.electionElapsed, n2.electionTimeout-1)
		}
		c.tickAll(1)
		c.deliver(1<<20, unanswered)
	}
	if n2.role != Leader {
		t.Fatalf("2 did not win:\n%s", c.describe())
	}
	if n2.lead.pendingBytes != 1000 {
		t.Fatalf("the new leader counts %d bytes of re-proposals, want the 1,000 it took over", n2.lead.pendingBytes)
	}
	if _, err := n2.Propose([]byte("z")); !errors.Is(err, ErrBusy) {
		t.Fatalf("a proposal behind re-proposals that fill the bound: %v, want ErrBusy", err)
	}
	c.deliver(1<<20, nil)
	c.settle()
	if n2.lead.pendingBytes != 0 {
		t.Fatalf("%d bytes still pending once the re-proposals were chosen", n2.lead.pendingBytes)
	}
	c.propose(2, value)
}

// chosenThenThirdDown is a cluster of three whose leader, replica 1,
// had a, b and c chosen everywhere before replica 3 crashed.
func chosenThenThirdDown(t *testing.T) *testCluster {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a", "b", "c")
	c.deliver(1<<20, nil)
	c.settle()
	c.crash(3)
	return c
}

// A follower whose disk was lost reports a chosen index far below the one
// it reported before. The leader catches it up from its latest report:
// from the older, higher one, catch-up would start past what it holds, it
// could use none of it, and each of its answers would ask for the same
// useless batch again.
func TestCatchUpFollowsTheLatestChosenReport(t *testing.T) {
	c := chosenThenThirdDown(t)
	c.wipe(3)
	c.propose(1, "d") // the leader's chosen index moves past what 3 reported
	useless := 0
	for range 4 * c.timing.ElectionTicks {
		c.tickAll(1)
		// Bounded, so that a ping-pong of catch-ups fails fast.
		c.deliver(200, func(m Message) bool {
			if m.Type == MsgChosen && m.To == 3 && m.Entries[0].Slot > c.replicas[3].node.hs.Chosen+1 {
				useless++
			}
			return true
		})
	}
	if got := appliedOf(c, 3); got != "a,b,c,d" {
		t.Fatalf("replica 3 applied %q:\n%s", got, c.describe())
	}
	if useless > 2 {
		t.Fatalf("%d catch-ups to 3 started past its chosen index", useless)
	}
}

func TestConfigValidatesSnapshotLimits(t *testing.T) {
	for name, change := range map[string]func(*Limits){
		"no chunk":                   func(l *Limits) { l.MaxSnapshotChunkBytes = 0 },
		"chunk over a half":          func(l *Limits) { l.MaxSnapshotChunkBytes = MaxMessageBytes/2 + 1 },
		"no snapshot":                func(l *Limits) { l.MaxSnapshotBytes = 0 },
		"negative apply":             func(l *Limits) { l.MaxApplyEntries = -1 },
		"no promise bytes":           func(l *Limits) { l.MaxPromiseBytes = 0 },
		"promise over a half":        func(l *Limits) { l.MaxPromiseBytes = MaxMessageBytes/2 + 1 },
		"no uncommitted bytes":       func(l *Limits) { l.MaxUncommittedBytes = 0 },
		"uncommitted over an eighth": func(l *Limits) { l.MaxUncommittedBytes = MaxMessageBytes/8 + 1 },
	} {
		limits := DefaultLimits()
		change(&limits)
		_, err := NewNode(Config{ID: 1, Membership: Membership{Voters: []ReplicaID{1}}, Storage: newTestStorage(),
			Rand: rand.New(rand.NewPCG(1, 1)), Timing: DefaultTiming(), Limits: limits})
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", name, err)
		}
	}
}

// A leader that steps down stops leading at once, and a follower takes
// over as soon as the leases lapse, well before any election timeout.
func TestStepDownHandsOver(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.settle()
	old := c.replicas[1].node
	if _, err := c.replicas[2].node.StepDown(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower stepping down: %v, want ErrNotLeader", err)
	}
	successor, err := old.StepDown()
	if err != nil || successor == None || successor == 1 {
		t.Fatalf("StepDown: successor %d, %v", successor, err)
	}
	if old.Status().Role == Leader {
		t.Fatal("still leads after StepDown")
	}
	if _, ok := old.LeaseValidUntil(); ok {
		t.Fatal("still claims the lease after StepDown")
	}
	for i := 0; ; i++ {
		if l := c.leader(); l != None && l != 1 {
			if l != successor {
				t.Errorf("replica %d leads, the successor was %d", l, successor)
			}
			if i > c.timing.LeaseTicks+c.timing.HeartbeatTicks+5 {
				t.Fatalf("replica %d leads %d ticks after the step-down; leases last %d", l, i, c.timing.LeaseTicks)
			}
			break
		}
		if i > 4*c.timing.ElectionTicks {
			t.Fatalf("no new leader:\n%s", c.describe())
		}
		c.run(1)
	}
	if got := old.Stats().StepDowns; got != 1 {
		t.Errorf("StepDowns = %d, want 1", got)
	}
}

// A heartbeat reply does not wait behind the writes in flight when the
// promise of the leader's ballot is already durable: it goes out early,
// claiming only the durable position. The first heartbeat of a new
// ballot waits for the promise's write.
func TestHeartbeatReplyEarlyOnlyWithWhatIsDurable(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a")
	c.deliver(1<<20, nil)
	c.settle()
	f := c.replicas[2].node
	b := c.replicas[1].node.lead.ballot
	start, through := f.follow.start, f.follow.through
	heartbeat := func(from ReplicaID, b Ballot, round uint64) Ready {
		t.Helper()
		if err := f.Step(Message{Type: MsgHeartbeat, From: from, To: 2, Ballot: b, Start: start, Commit: f.hs.Chosen, Round: round}); err != nil {
			t.Fatal(err)
		}
		return f.Ready()
	}
	reply := func(ms []Message, round uint64) *Message {
		for i := range ms {
			if ms[i].Type == MsgHeartbeatReply && ms[i].Round == round {
				return &ms[i]
			}
		}
		return nil
	}
	// An accept whose write is still in flight.
	err := f.Step(Message{Type: MsgAccept, From: 1, To: 2, Ballot: b, Start: start, Commit: f.hs.Chosen,
		Entries: []Entry{{Slot: through + 1, Ballot: b, Kind: EntryCommand, Data: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	if rd := f.Ready(); len(rd.Entries) != 1 {
		t.Fatalf("the accept's Ready writes %d entries, want 1", len(rd.Entries))
	}
	rd := heartbeat(1, b, 101)
	if m := reply(rd.EarlyMessages, 101); m == nil || m.Through != through {
		t.Fatalf("with a write in flight: early reply %+v, want one through the durable %d", m, through)
	}
	f.Persisted()
	f.Persisted()
	rd = heartbeat(1, b, 102)
	if m := reply(rd.EarlyMessages, 102); m == nil || m.Through != through+1 {
		t.Fatalf("once written: early reply %+v, want one through %d", m, through+1)
	}
	f.Persisted()
	// A new leader's first heartbeat: its ballot is promised by this
	// very Ready, so the reply waits for the write.
	b3 := Ballot{Round: b.Round + 1, Replica: 3}
	rd = heartbeat(3, b3, 1)
	if reply(rd.EarlyMessages, 1) != nil || reply(rd.Messages, 1) == nil || !rd.HardStateChanged {
		t.Fatalf("new ballot: early %v, late %v, hard state written %t; want the reply after the promise's write",
			rd.EarlyMessages, rd.Messages, rd.HardStateChanged)
	}
}

// A replica restarted with a long chosen log applies it in Readys of at
// most MaxApplyEntries, and reads no more of it from Storage per Ready
// than it hands over: a read bounded only by bytes once read 4 MiB of the
// log for each 128 entries applied.
func TestRestartReadsTheLogItApplies(t *testing.T) {
	st := newTestStorage()
	const chosen = 1000
	for slot := uint64(1); slot <= chosen; slot++ {
		st.entries[slot] = Entry{Slot: slot, Kind: EntryCommand, Ballot: Ballot{Round: 1, Replica: 1}, Data: []byte{byte(slot)}}
	}
	st.last = chosen
	st.hs = HardState{Promised: Ballot{Round: 1, Replica: 1}, Chosen: chosen}
	limits := DefaultLimits()
	limits.MaxApplyEntries = 16
	n, err := NewNode(Config{ID: 1, Membership: Membership{Voters: []ReplicaID{1, 2, 3}}, Storage: st,
		Rand: rand.New(rand.NewPCG(1, 1)), Timing: DefaultTiming(), Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(1)
	for n.HasReady() {
		rd := n.Ready()
		if len(rd.Committed) > 16 {
			t.Fatalf("a Ready of %d entries to apply, want at most 16", len(rd.Committed))
		}
		for _, e := range rd.Committed {
			if e.Slot != next {
				t.Fatalf("applied slot %d, want %d", e.Slot, next)
			}
			next++
		}
		n.Advance()
	}
	if next != chosen+1 {
		t.Fatalf("applied through %d, want %d", next-1, chosen)
	}
	if st.widest > 16 {
		t.Fatalf("Storage was asked for %d slots at once, want at most 16", st.widest)
	}
}

// TestRebuildEndsUnderSteadyLoad: a replica that lost its disk and
// restarted while a leader led votes again although the leader chooses a
// slot in every round trip to it. Its reply to each catch-up leaves after
// its own sync, so it always trails by a few slots; the leader once ran
// the phase 1 that ends a rebuild only for a follower wholly caught up,
// so the cluster ran on two voters for as long as the writes went on
// (found in review).
func TestRebuildEndsUnderSteadyLoad(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a")
	c.deliver(1<<20, nil)
	c.settle()
	c.crash(3)
	c.wipe(3)
	// exceptToOrFrom3 delivers everything but what goes to or from 3.
	exceptToOrFrom3 := func() {
		for {
			c.process()
			i := slices.IndexFunc(c.queue, func(m Message) bool { return m.To != 3 && m.From != 3 })
			if i < 0 {
				return
			}
			m := c.queue[i]
			c.queue = slices.Delete(c.queue, i, i+1)
			if err := c.replicas[m.To].node.Step(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	writes := 0
	for range 8 * c.timing.ElectionTicks {
		c.tickAll(1)
		for range 60 {
			c.process()
			if len(c.queue) == 0 {
				break
			}
			m := c.queue[0]
			c.queue = c.queue[1:]
			if m.From == 3 && m.To == 1 && c.replicas[1].node.role == Leader {
				// Meanwhile the leader chose one more command.
				writes++
				c.propose(1, fmt.Sprint("v", writes))
				exceptToOrFrom3()
			}
			if err := c.replicas[m.To].node.Step(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s1, s3 := c.replicas[1].node.Status(), c.replicas[3].node.Status(); s3.Rebuilding {
		t.Fatalf("replica 3 still rebuilds after %d writes: chosen %d, the leader's %d", writes, s3.Chosen, s1.Chosen)
	}
}

// readyNoPanic takes a Ready, turning a panic into an error.
func readyNoPanic(n *Node) (rd Ready, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return n.Ready(), nil
}

// TestHeartbeatWithEntriesIsRefused (found in review): a heartbeat carries no entries; one
// that does (non-contiguous, under another ballot) must be refused like
// the same entries on an accept, not taken as accepted.
func TestHeartbeatWithEntriesIsRefused(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	n := c.replicas[1].node
	b := Ballot{Round: 5, Replica: 2}
	m := Message{Type: MsgHeartbeat, From: 2, To: 1, Ballot: b, Start: 1, Commit: 3, Round: 1,
		Entries: []Entry{{Slot: 1, Ballot: b, Kind: EntryNoop}, {Slot: 3, Ballot: Ballot{Round: 99, Replica: 3}, Kind: EntryNoop}}}
	err := n.Step(m)
	if errors.Is(err, ErrInvalidMessage) {
		return
	}
	if _, perr := readyNoPanic(n); perr != nil {
		t.Fatalf("heartbeat with a gap in its entries accepted (Step = %v), then Ready: %v", err, perr)
	}
	t.Fatalf("heartbeat with entries accepted: Step = %v, chosen %d, through %d", err, n.hs.Chosen, n.follow.through)
}

// TestChosenEntryBallotIsBounded (found in review): an entry's ballot in a catch-up (or a
// promise) is bounded like the message's own ballot. A rebuilding replica
// promises the ballot of the chosen entry that ends its rebuild; one at
// the top of uint64 left it promised past MaxRound (no valid message could
// reach it again), and its next campaign's ballot wrapped to round 0 and
// it panicked lowering its promise.
func TestChosenEntryBallotIsBounded(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.wipe(3)
	n := c.replicas[3].node
	if err := n.Step(Message{Type: MsgPrepare, From: 2, To: 3, Ballot: Ballot{Round: 5, Replica: 2}, Start: 1}); err != nil {
		t.Fatal(err)
	}
	for range rebuildQuietTicks(c.timing) {
		n.Tick()
	}
	top := Ballot{Round: math.MaxUint64, Replica: 2}
	err := n.Step(Message{Type: MsgChosen, From: 2, To: 3, Commit: 1,
		Entries: []Entry{{Slot: 1, Ballot: top, Kind: EntryNoop}}})
	if errors.Is(err, ErrInvalidMessage) {
		return
	}
	promised := n.hs.Promised
	// Campaign: a pre-vote granted by 2, then the prepare.
	perr := func() (perr error) {
		defer func() {
			if r := recover(); r != nil {
				perr = fmt.Errorf("panic: %v", r)
			}
		}()
		for range 4 * c.timing.ElectionTicks {
			n.Tick()
			if n.role == PreCandidate {
				n.Step(Message{Type: MsgPreVoteReply, From: 2, To: 3, Ballot: n.cand.ballot})
				break
			}
		}
		return nil
	}()
	t.Fatalf("catch-up entry under ballot %s taken (Step = %v): promised %s (MaxRound %d); campaigning: %v",
		top, err, promised, uint64(MaxRound), perr)
}

// TestRebuildingFollowerLosesItsMatch (found in review): a follower that
// comes back rebuilding has lost what it accepted, so the leader no
// longer counts it. Before, the leader kept its old match, and with its
// own write still in flight it chose a slot on the other follower's copy
// alone: one durable copy where a quorum's are needed.
func TestRebuildingFollowerLosesItsMatch(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a", "b")
	c.deliver(1<<20, nil)
	c.settle()
	// Replica 2 leads a ballot begun after a and b were chosen: a
	// replica that rejoins without them cannot vote in it until a new
	// phase 1 (a rejoiner that lacks nothing makes the leader re-prepare
	// at once, and no stale match is ever counted).
	c.crash(1)
	c.elect(2)
	c.restart(1)
	c.settle()
	leader := c.replicas[2].node
	if _, err := leader.Propose([]byte("x")); err != nil {
		t.Fatal(err)
	}
	rd := leader.Ready() // the leader's own write stays in flight
	chosenBefore := leader.Status().Chosen
	c.acceptEarly(rd, 2, 3)
	// Replica 3 loses its disk and answers the leader's next heartbeat
	// as a learner.
	c.wipe(3)
	err := leader.Step(Message{Type: MsgHeartbeatReply, From: 3, To: 2, Ballot: leader.lead.ballot,
		Round: leader.lead.round, Reject: true, Chosen: c.replicas[3].node.Status().Chosen})
	if err != nil {
		t.Fatal(err)
	}
	if leader.role != Leader {
		t.Fatalf("replica 2 is %s after the learner's reply", leader.role)
	}
	c.acceptEarly(rd, 2, 1)
	if got := leader.Status().Chosen; got != chosenBefore {
		t.Fatalf("chose slot %d on replica 1's copy alone (3 lost its disk, the leader's write is in flight)", got)
	}
	c.replicas[2].storage.save(rd)
	leader.Persisted()
	if got := leader.Status().Chosen; got != chosenBefore+1 {
		t.Fatalf("chosen %d once the leader's write was confirmed, want %d", got, chosenBefore+1)
	}
}

// TestRebuildEndsOnlyOnceItsLossIsReplicated (found in review): a replica
// that lost its disk votes again once it learns a slot chosen under a
// ballot prepared after it rejoined. That ballot re-proposes every slot a
// quorum may have chosen before the loss, but those it has not chosen yet
// may still be held by one replica alone, since the lost disk held the
// other copy. The rebuilt replica learned the ballot's first slot and
// voted again while c and d (chosen on 1 and 2 before 1 lost its disk)
// were on 2 alone; 2 then lost its disk, the others elected a leader
// without them, and slot 4 was chosen twice. Now the leader teaches a
// rebuilding follower none of its ballot's slots before it has chosen
// all it re-proposed.
func TestRebuildEndsOnlyOnceItsLossIsReplicated(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	lim := c.limits
	lim.MaxBatchEntries, lim.MaxInflightAccepts = 1, 1
	c.setLimits(lim)
	c.elect(1)
	c.propose(1, "a")
	c.deliver(1<<20, nil)
	c.settle()
	// b, c and d are chosen on 1 and 2; 3 hears nothing of them, and 2
	// not that they were chosen.
	c.block(1, 3)
	c.setLimits(DefaultLimits())
	c.propose(1, "b", "c", "d")
	c.deliver(1<<20, func(m Message) bool { return m.From == 2 || m.Type == MsgAccept })
	if got := appliedOf(c, 1); got != "a,b,c,d" {
		t.Fatalf("replica 1 applied %q, want a,b,c,d", got)
	}
	// 1 loses its disk and rejoins; 2 campaigns with 3 but its accepts
	// of c and d do not reach 3.
	c.crash(1)
	c.queue = nil
	c.unblockAll()
	c.wipe(1)
	c.setLimits(lim)
	c.tick(1, int(rebuildQuietTicks(c.timing)))
	onlyB := func(m Message) bool {
		return m.Type != MsgAccept || m.To != 3 || m.Entries[0].Slot <= 3
	}
	// Run until replica 1 votes again: with onlyB for a while, then with
	// every message delivered.
	rebuilt := func() bool { return !c.replicas[1].node.hs.Rebuilding }
	for i := 0; i < 20*c.timing.ElectionTicks && !rebuilt(); i++ {
		filter := onlyB
		if i >= 10*c.timing.ElectionTicks {
			filter = nil
		}
		for _, o := range c.ids() {
			if n := c.replicas[o].node; o != 2 && n.role != Leader {
				n.electionElapsed = 0
			}
		}
		if n := c.replicas[2].node; n.role == Follower {
			n.electionElapsed = max(n.electionElapsed, n.electionTimeout-1)
		}
		c.tickAll(1)
		c.process()
		for !rebuilt() && len(c.queue) > 0 {
			c.deliver(1, filter)
		}
	}
	if !rebuilt() {
		t.Fatalf("replica 1 still rebuilds:\n%s", c.describe())
	}
	// At once, 2 loses its disk too. 1 votes again, so it must be safe:
	// c and d must be on 1 or 3.
	c.crash(2)
	c.queue = nil
	c.wipe(2)
	c.setLimits(DefaultLimits())
	c.elect(3)
	c.propose(3, "e")
	c.deliver(1<<20, nil)
	c.settle()
	if got := appliedOf(c, 3); got != "a,b,c,d,e" {
		t.Fatalf("replica 3 applied %q, want a,b,c,d,e:\n%s", got, c.describe())
	}
}

// TestPromiseDuringPreVoteEndsIt: a replica in pre-vote that promises a
// prepare (here a duplicate of one it promised before, whose ballot is
// still its promise) grants that candidate a lease, so its own pre-vote
// is over: a grant arriving afterwards must not make it promise itself a
// higher ballot within that lease. It stayed a pre-candidate, since the
// promise changed no ballot, and a quorum of grants then had it prepare.
func TestPromiseDuringPreVoteEndsIt(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	n1, n2 := c.replicas[1].node, c.replicas[2].node
	for range c.timing.LeaseTicks { // past the lease a restart assumes
		n2.electionElapsed = 0
		n2.Tick()
	}
	n1.startPrepare()
	c.process()
	var prepare Message
	for _, m := range c.queue {
		if m.Type == MsgPrepare && m.To == 2 {
			prepare = m
		}
	}
	c.queue = nil
	if err := n2.Step(prepare); err != nil || n2.hs.Promised != prepare.Ballot {
		t.Fatalf("replica 2 did not promise %s: %v, promised %s", prepare.Ballot, err, n2.hs.Promised)
	}
	c.process()
	c.queue = nil
	for i := 0; n2.role != PreCandidate; i++ {
		if i > 4*c.timing.ElectionTicks {
			t.Fatal("replica 2 never started a pre-vote")
		}
		n2.Tick()
	}
	preVote := n2.cand.ballot
	if err := n2.Step(prepare); err != nil { // the duplicate
		t.Fatal(err)
	}
	c.process()
	granted := slices.ContainsFunc(c.queue, func(m Message) bool {
		return m.Type == MsgPromise && m.To == 1 && !m.Reject
	})
	if !granted {
		t.Fatalf("replica 2 did not promise the duplicate again: %v", c.queue)
	}
	if err := n2.Step(Message{Type: MsgPreVoteReply, From: 3, To: 2, Ballot: preVote}); err != nil {
		t.Fatal(err)
	}
	if n2.hs.Promised != prepare.Ballot || n2.role == Candidate {
		t.Fatalf("replica 2 promised itself %s (%s) within the lease it had just granted replica 1 under %s",
			n2.hs.Promised, n2.role, prepare.Ballot)
	}
}

// TestLoneVoterKeepsItsLeadership: a one-voter cluster's leader is its
// own quorum for its lease as it is for choosing. Its heartbeat rounds
// had no replies to count, so it "lost its quorum" every election
// timeout, ran phase 1 again under a new ballot (re-proposing what it
// had not chosen), and held no lease most of the time (found in review).
func TestLoneVoterKeepsItsLeadership(t *testing.T) {
	timing := DefaultTiming()
	n, err := NewNode(Config{ID: 1, Membership: Membership{Voters: []ReplicaID{1}}, Storage: newTestStorage(),
		Rand: rand.New(rand.NewPCG(1, 1)), Timing: timing, Limits: DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	process := func() {
		for n.HasReady() {
			n.Ready()
			n.Advance()
		}
	}
	for n.Status().Role != Leader {
		n.Tick()
		process()
		if n.Now() > uint64(4*timing.ElectionTicks) {
			t.Fatalf("no leader after %d ticks", n.Now())
		}
	}
	ballot := n.Status().Ballot
	for range 20 * timing.ElectionTicks {
		n.Tick()
		process()
		st := n.Status()
		if st.Role != Leader || st.Ballot != ballot {
			t.Fatalf("tick %d: role %s ballot %s, want leader under %s throughout (stats %+v)", st.Now, st.Role, st.Ballot, ballot, n.Stats())
		}
		if _, held := n.LeaseValidUntil(); !held {
			t.Fatalf("tick %d: the lone leader holds no lease", st.Now)
		}
	}
	if s := n.Stats(); s.Elections != 1 || s.QuorumLost != 0 {
		t.Fatalf("stats %+v: want one election and no quorum lost", s)
	}
}

// A follower whose caller takes no Ready for a while (a replica holding
// as many chosen entries as it may while a snapshot decodes) answers
// nothing, so the leader resends the same accepts every two heartbeats.
// Each resend of a slot it already holds under the same ballot, not yet
// written, once joined the unwritten entries again: 100 resends of 32
// entries of 1 KiB held 3,200 entries, 3.3 MB. (In a cluster the
// leader's commit index soon makes most resent slots chosen, which are
// skipped; the slots not yet chosen grew so.) They are held once, and
// the reply to a resend still waits for the write that makes them
// durable.
func TestResentAcceptIsHeldOnce(t *testing.T) {
	const batch, resends = 32, 100
	c, accept := unchosenAcceptTo2(t, batch)
	f := c.replicas[2].node
	step := func() {
		t.Helper()
		if err := f.Step(*accept); err != nil {
			t.Fatal(err)
		}
	}
	first, last := accept.Entries[0].Slot, accept.Entries[batch-1].Slot
	for range resends {
		step()
	}
	checkUnwritten(t, f, batch, fmt.Sprintf("%d resends of %d entries", resends, batch))
	rd := f.Ready()
	checkWritesOnce(t, rd, first, last)
	checkAcceptedAfterWrite(t, rd, last)
	// Resent while that write is in flight: nothing to write again, and
	// the reply goes out after the next write, so after the one in flight.
	step()
	rd = f.Ready()
	if len(rd.Entries) != 0 {
		t.Fatalf("a resend during the write rewrites slots %v", slotsOf(rd.Entries))
	}
	checkAcceptedAfterWrite(t, rd, last)
	f.Advance()
	step()
	if rd := f.Ready(); len(rd.Entries) != 0 {
		t.Fatalf("a resend of written entries rewrites slots %v", slotsOf(rd.Entries))
	}
	f.Advance()
	// A new leader's accept of the same slots under its own ballot is a
	// new vote: it replaces them.
	b := Ballot{Round: accept.Ballot.Round + 1, Replica: 3}
	renewed := *accept
	renewed.From, renewed.Ballot, renewed.Entries = 3, b, slices.Clone(accept.Entries)
	for i := range renewed.Entries {
		renewed.Entries[i].Ballot = b
	}
	if err := f.Step(renewed); err != nil {
		t.Fatal(err)
	}
	if rd := f.Ready(); len(rd.Entries) != batch || rd.Entries[0].Ballot != b {
		t.Fatalf("a new ballot's accept writes %d entries (first under %v), want %d under %s",
			len(rd.Entries), rd.Entries, batch, b)
	}
}

// unchosenAcceptTo2 elects replica 1 of three and has it propose batch
// commands of 1 KiB; it returns the cluster and the leader's accept of
// them to replica 2, not yet delivered, none of them chosen.
func unchosenAcceptTo2(t *testing.T, batch int) (*testCluster, *Message) {
	t.Helper()
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	c.propose(1, "a")
	c.deliver(1<<20, nil)
	c.settle()
	for i := range batch {
		c.propose(1, fmt.Sprintf("%04d%s", i, strings.Repeat("x", 1020)))
	}
	for _, m := range c.replicas[1].node.Ready().EarlyMessages {
		if m.Type == MsgAccept && m.To == 2 {
			if len(m.Entries) != batch || m.Commit >= m.Entries[0].Slot {
				t.Fatalf("leader's accept to 2: %+v, want %d entries none of them chosen", m, batch)
			}
			return c, &m
		}
	}
	t.Fatal("the leader sent no accept to 2")
	return nil, nil
}

// checkUnwritten fails the test unless f holds want unwritten entries.
func checkUnwritten(t *testing.T, f *Node, want int, after string) {
	t.Helper()
	if got := len(f.log.pending); got != want {
		t.Fatalf("after %s the follower holds %d unwritten (%d bytes), want %d", after, got, entriesBytes(f.log.pending), want)
	}
}

// checkWritesOnce fails the test unless rd writes slots first to last,
// each once.
func checkWritesOnce(t *testing.T, rd Ready, first, last uint64) {
	t.Helper()
	slots := slotsOf(rd.Entries)
	if uint64(len(slots)) != last-first+1 || slots[0] != first || slots[len(slots)-1] != last {
		t.Fatalf("the Ready writes slots %v, want %d-%d once each", slots, first, last)
	}
}

// checkAcceptedAfterWrite fails the test unless rd answers accepts only
// once its write is durable, with one through last.
func checkAcceptedAfterWrite(t *testing.T, rd Ready, last uint64) {
	t.Helper()
	for _, m := range rd.EarlyMessages {
		if m.Type == MsgAccepted {
			t.Fatalf("an accept answered before the write: %s", m)
		}
	}
	for _, m := range rd.Messages {
		if m.Type == MsgAccepted && m.Through == last {
			return
		}
	}
	t.Fatalf("no reply through %d after the write: %v", last, rd.Messages)
}

func entriesBytes(es []Entry) uint64 {
	var n uint64
	for _, e := range es {
		n += EntrySize(e)
	}
	return n
}

// The same follower as in TestResentAcceptIsHeldOnce, taking no Ready,
// while leaders change: each new leader resends the same window under its
// own ballot. Each ballot's copy of a slot not yet handed out once joined
// the unwritten entries again, a window per leader: 100 leaders' resends
// of 32 entries of 1 KiB held 3,200. A newer ballot's entry takes the
// place of the one pending, so the write is of each slot once, under the
// newest ballot, and the reply to the newest leader follows it. An entry
// already handed out in a Ready stays in it; the newer one is written
// after it.
func TestNewLeadersReplaceUnwrittenEntries(t *testing.T) {
	const batch, leaders = 32, 100
	c, accept := unchosenAcceptTo2(t, batch)
	first, last := accept.Entries[0].Slot, accept.Entries[batch-1].Slot
	f := c.replicas[2].node
	b := accept.Ballot
	// next steps the window resent by the next leader, 3 and 1 by turns.
	next := func() Ballot {
		t.Helper()
		owner := ReplicaID(3)
		if b.Replica == 3 {
			owner = 1
		}
		b = Ballot{Round: b.Round + 1, Replica: owner}
		m := *accept
		m.From, m.Ballot, m.Entries = b.Replica, b, slices.Clone(accept.Entries)
		for i := range m.Entries {
			m.Entries[i].Ballot = b
		}
		if err := f.Step(m); err != nil {
			t.Fatal(err)
		}
		return b
	}
	checkWrite := func(rd Ready, b Ballot) {
		t.Helper()
		checkWritesOnce(t, rd, first, last)
		for _, e := range rd.Entries {
			if e.Ballot != b {
				t.Fatalf("the Ready writes slot %d under %s, want the newest ballot %s", e.Slot, e.Ballot, b)
			}
		}
		for _, m := range rd.Messages {
			if m.Type == MsgAccepted && m.To == b.Replica && m.Ballot == b && m.Through == last {
				checkAcceptedAfterWrite(t, rd, last)
				return
			}
		}
		t.Fatalf("no reply to %d under %s through %d: %v", b.Replica, b, last, rd.Messages)
	}
	for range leaders {
		next()
	}
	checkUnwritten(t, f, batch, fmt.Sprintf("%d leaders resent %d entries", leaders, batch))
	rd := f.Ready()
	checkWrite(rd, b)
	// Two more leaders while that write is in flight: it keeps its
	// entries, and the next write puts the newest ballot's over them.
	handedOut := slices.Clone(rd.Entries)
	next()
	newest := next()
	checkUnwritten(t, f, batch, "two more leaders")
	if !slices.EqualFunc(f.log.inflight[0], handedOut, func(a, b Entry) bool { return a.Ballot == b.Ballot && a.Slot == b.Slot }) {
		t.Fatalf("the write in flight changed: %v", f.log.inflight[0])
	}
	es, err := f.log.entries(first, last+1, batch, math.MaxUint64)
	if err != nil || len(es) != batch || es[0].Ballot != newest || es[batch-1].Ballot != newest {
		t.Fatalf("a promise would report %v (%v), want %d-%d under %s", es, err, first, last, newest)
	}
	rd2 := f.Ready()
	checkWrite(rd2, newest)
	s := c.replicas[2].storage
	s.save(rd)
	s.save(rd2)
	f.Advance()
	for slot := first; slot <= last; slot++ {
		if s.entries[slot].Ballot != newest {
			t.Fatalf("slot %d written under %s, want %s", slot, s.entries[slot].Ballot, newest)
		}
	}
}

// A replica whose caller takes no Ready sends nothing, yet still steps
// every message and tick: each answer (to the leader's heartbeats and
// resent accepts, to a candidate's pre-votes and prepares, to a deposed
// leader's heartbeats) and each request of its own once joined the
// messages the next Ready sends, 100 rounds of them 500 messages. A
// message of the same kind to the same peer supersedes the one queued
// under a lower ballot, or the same ballot (an answer to an accept: the
// same batch), so the queues hold one of each, the newest.
func TestQueuedMessagesAreBounded(t *testing.T) {
	c, accept := unchosenAcceptTo2(t, 1)
	l, f := c.replicas[1].node, c.replicas[2].node
	lb, start, chosen := l.lead.ballot, l.lead.start, l.hs.Chosen
	if len(f.msgs)+len(f.early) != 0 {
		t.Fatalf("replica 2 has messages queued: %v %v", f.msgs, f.early)
	}
	const rounds = 100
	var candidate Ballot
	for i := range uint64(rounds) {
		// The candidate asks within the lease the follower granted the
		// leader: refused every time, under a higher ballot each time.
		candidate = Ballot{Round: lb.Round + 1 + i, Replica: 3}
		for _, m := range []Message{
			{Type: MsgHeartbeat, From: 1, Ballot: lb, Start: start, Commit: chosen, Round: 1000 + i},
			*accept,
			{Type: MsgPreVote, From: 3, Ballot: candidate, Start: chosen + 1, Chosen: chosen},
			{Type: MsgPrepare, From: 3, Ballot: candidate, Start: chosen + 1, Chosen: chosen},
			{Type: MsgHeartbeat, From: 3, Ballot: Ballot{Round: i % lb.Round, Replica: 3}, Start: 1, Round: i + 1},
		} {
			m.To = 2
			if err := f.Step(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := len(f.msgs) + len(f.early); got != 5 {
		t.Fatalf("after %d rounds of 5 messages, %d queued, want 5:\n%v\n%v", rounds, got, f.early, f.msgs)
	}
	rd := f.Ready()
	want := map[MessageType]func(Message) bool{
		MsgHeartbeatReply: func(m Message) bool { return m.To == 1 && m.Round == 1000+rounds-1 },
		MsgAccepted:       func(m Message) bool { return m.To == 1 && m.Last == accept.Entries[len(accept.Entries)-1].Slot },
		MsgPreVoteReply:   func(m Message) bool { return m.To == 3 && m.Ballot == candidate && m.Reject },
		MsgPromise:        func(m Message) bool { return m.To == 3 && m.Ballot == candidate && m.Reject },
		MsgNack:           func(m Message) bool { return m.To == 3 && m.Ballot.Round == (rounds-1)%lb.Round },
	}
	for _, m := range append(rd.EarlyMessages, rd.Messages...) {
		if ok := want[m.Type]; ok == nil || !ok(m) {
			t.Fatalf("sends %s, want only the newest of each kind", m)
		}
		delete(want, m.Type)
	}
	if len(want) > 0 {
		t.Fatalf("sends none of %v", slices.Collect(maps.Keys(want)))
	}
	f.Advance()

	// A replica cut off from the others campaigns every election timeout:
	// one pre-vote per peer is queued, the newest.
	n := c.replicas[3].node
	n.Ready()
	n.Advance()
	for range rounds * 2 * c.timing.ElectionTicks {
		n.Tick()
	}
	if n.Stats().Elections != 0 || n.role != PreCandidate {
		t.Fatalf("replica 3 is %s after %d elections", n.role, n.Stats().Elections)
	}
	if got := len(n.msgs) + len(n.early); got != 2 {
		t.Fatalf("after %d election timeouts, %d queued, want a pre-vote to each peer:\n%v\n%v", rounds, got, n.early, n.msgs)
	}
	for _, m := range n.early {
		if m.Type != MsgPreVote || m.Ballot != n.cand.ballot {
			t.Fatalf("queued %s, want a pre-vote under %s", m, n.cand.ballot)
		}
	}
}

// A candidate holding, not yet handed out, entries it accepted from the
// leader before, puts its own ballot's entries in their place (put): the
// last entry of its first Ready is then not its highest slot (the slots
// below, written already, are appended after). Counted from the last
// entry, its own vote covered only those, and a quorum of it and one
// follower chose nothing above them.
func TestLeaderCountsItsVoteForReplacedEntries(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	n := c.replicas[3].node
	old := Ballot{Round: 1, Replica: 1}
	acceptOf := func(slots ...uint64) Message {
		m := Message{Type: MsgAccept, From: 1, To: 3, Ballot: old, Start: 1}
		for _, s := range slots {
			m.Entries = append(m.Entries, Entry{Slot: s, Ballot: old, Kind: EntryCommand, Data: []byte{byte('a' + s)}})
		}
		return m
	}
	step := func(m Message) {
		t.Helper()
		if err := n.Step(m); err != nil {
			t.Fatal(err)
		}
	}
	step(acceptOf(1, 2))
	c.replicas[3].storage.save(n.Ready())
	n.Advance()
	step(acceptOf(3, 4, 5, 6, 7)) // held, not handed out
	for i := 0; n.role != PreCandidate; i++ {
		if i > 10*c.timing.ElectionTicks {
			t.Fatalf("replica 3 did not campaign: %s", n.role)
		}
		n.Tick()
	}
	step(Message{Type: MsgPreVoteReply, From: 2, To: 3, Ballot: n.cand.ballot})
	if n.role != Candidate {
		t.Fatalf("replica 3 is %s, want candidate", n.role)
	}
	b := n.cand.ballot
	step(Message{Type: MsgPromise, From: 2, To: 3, Ballot: b})
	if n.role != Leader {
		t.Fatalf("replica 3 is %s, want leader", n.role)
	}
	rd := n.Ready()
	if slots := slotsOf(rd.Entries); len(slots) != 7 || slots[len(slots)-1] == 7 {
		t.Fatalf("the leader writes slots %v, want 1-7 with 7 not last", slots)
	}
	c.replicas[3].storage.save(rd)
	n.Advance()
	step(Message{Type: MsgAccepted, From: 2, To: 3, Ballot: b, Through: 7, Last: 7})
	if got := n.Status().Chosen; got != 7 {
		t.Fatalf("chosen %d once the leader wrote slots 1-7 and a follower accepted them, want 7", got)
	}
}

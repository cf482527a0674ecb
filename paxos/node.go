package paxos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Role is what a replica currently does in the protocol.
type Role uint8

const (
	// Follower accepts what a leader proposes.
	Follower Role = iota + 1
	// PreCandidate asks for pre-votes before it dares to prepare.
	PreCandidate
	// Candidate runs phase 1 (prepare/promise) for its ballot.
	Candidate
	// Leader runs phase 2 for every slot from its start on.
	Leader
)

func (r Role) String() string {
	switch r {
	case Follower:
		return "follower"
	case PreCandidate:
		return "precandidate"
	case Candidate:
		return "candidate"
	case Leader:
		return "leader"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

var (
	// ErrNotLeader is returned by Propose on a replica that is not leader.
	ErrNotLeader = errors.New("paxos: not the leader")
	// ErrBusy is returned by Propose when MaxUncommittedSlots proposals,
	// or MaxUncommittedBytes of them, are not yet chosen; the caller
	// should retry later.
	ErrBusy = errors.New("paxos: too many uncommitted proposals")
	// ErrTooLarge is returned by Propose for a command over MaxBatchBytes.
	ErrTooLarge = errors.New("paxos: command too large")
	// ErrInvalidMessage is returned by Step for a malformed message.
	ErrInvalidMessage = errors.New("paxos: invalid message")
	// ErrHalted wraps the storage error that stopped the node.
	ErrHalted = errors.New("paxos: node halted")
)

// Node is one replica's consensus state machine. It is not safe for
// concurrent use; the caller serialises every call.
type Node struct {
	id        ReplicaID
	members   Membership
	peers     []ReplicaID // every voter but id, sorted
	rand      *rand.Rand
	timing    Timing
	limits    Limits
	leaseSpan uint64 // leaderLeaseTicks(timing)

	now    uint64 // ticks since the node was created
	halted error

	hs      HardState
	hsDirty bool      // Promised or Rebuilding changed: must be written
	savedHS HardState // what was last handed out to be written
	// durable is what the writes confirmed so far (Persisted) made
	// durable of the acceptor's promise and of the followed leader's
	// entries: a heartbeat reply that claims no more than this need not
	// wait for the writes still in flight.
	durable durableState
	log     *memLog
	applied uint64
	snap    *Snapshot // received, to hand out in the next Ready
	msgs    []Message // sent after the Ready's write
	early   []Message // may be sent before it
	// readies are the Readys handed out whose write is not yet confirmed,
	// oldest first.
	readies []readyRecord

	role     Role
	leader   ReplicaID // the replica whose ballot we follow, if known
	maxRound uint64    // the highest round seen in any ballot

	// rebuildPrepared is the highest ballot seen prepared since this
	// rebuilding replica started.
	rebuildPrepared Ballot
	// rebuildSeen is the highest ballot of any prepare, accept or
	// heartbeat received while rebuilding.
	rebuildSeen Ballot
	// reprepareAt is when this replica, as leader, last ran a phase 1 to
	// let a rebuilt follower vote again.
	reprepareAt uint64
	reprepared  bool

	electionElapsed int
	electionTimeout int

	// suspectedLeader is the leader a failure detector suspects (None if
	// no suspicion stands): this follower then campaigns at
	// suspectRetryAt, once the lease it granted that leader has lapsed,
	// and again every HeartbeatTicks while no leader is heard, instead of
	// waiting out its election timeout. Any accept or heartbeat from a
	// leader clears it.
	suspectedLeader ReplicaID
	suspectRetryAt  uint64

	// Acceptor lease: no promise to anyone but leaseHolder before
	// leaseUntil (local ticks). After a restart nobody is promised anything
	// for LeaseTicks, since a lease granted before the crash is forgotten.
	leaseHolder ReplicaID
	leaseUntil  uint64

	// Follower: the ballot followed, its start slot and how far this
	// replica accepted under it without a gap.
	follow follower

	cand  *candidacy
	lead  *leadership
	stats Stats

	// Snapshot transfers (snapshot.go): those this replica sends, by
	// peer, the snapshot they send, and the one it receives.
	sends map[ReplicaID]*snapshotSend
	image *Snapshot
	recv  *snapshotRecv
}

type follower struct {
	ballot  Ballot
	start   uint64
	through uint64
}

// readyRecord is what the node must remember of a Ready until its write
// is confirmed.
type readyRecord struct {
	applied  uint64 // the applied index once this Ready is processed
	ballot   Ballot // the ballot led when it was handed out (zero if none)
	lastSlot uint64 // the highest slot it carried under ballot (0 if none)
	// durable is what is durable once this Ready (and every one before
	// it) is written.
	durable durableState
}

// durableState is an acceptor's state known to be on disk.
type durableState struct {
	promised Ballot
	// followBallot and followThrough are the follower's position
	// (follower.ballot, follower.through): every slot from its start to
	// followThrough accepted under followBallot, or chosen.
	followBallot  Ballot
	followThrough uint64
}

// Stats counts protocol events, for tests, metrics and the simulator.
type Stats struct {
	Elections       uint64 // phase 1 runs started
	BecameLeader    uint64
	Proposals       uint64
	AcceptsSent     uint64
	EntriesSent     uint64
	Retransmissions uint64
	CatchUps        uint64 // catch-ups sent: MsgChosen, or a snapshot transfer asked for
	SnapshotsSent   uint64 // snapshot transfers started
	// SnapshotsDeferred counts transfers put off because Storage was
	// still reading the snapshot (ErrSnapshotTemporarilyUnavailable).
	SnapshotsDeferred uint64
	SnapshotChunks    uint64 // MsgSnapshot chunks sent, resent ones included
	StepDowns         uint64 // leaderships given up by StepDown
	QuorumLost        uint64 // leaderships given up for want of a quorum's replies
}

// NewNode restores a node from cfg.Storage.
func NewNode(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	hs, meta, err := cfg.Storage.InitialState()
	if err != nil {
		return nil, fmt.Errorf("paxos: reading initial state: %w", err)
	}
	if cfg.Rebuilding && hs == (HardState{}) && meta.Index == 0 {
		hs.Rebuilding = true
	}
	if hs.Chosen < meta.Index {
		hs.Chosen = meta.Index
	}
	if cfg.Applied > hs.Chosen || cfg.Applied < meta.Index {
		return nil, fmt.Errorf("%w: Applied %d outside [snapshot %d, chosen %d]", ErrConfig, cfg.Applied, meta.Index, hs.Chosen)
	}
	l, err := newMemLog(cfg.Storage, meta.Index)
	if err != nil {
		return nil, err
	}
	if hs.Chosen > l.lastSlot {
		// Every save writes the chosen index with the entries it covers:
		// only a store that lost keys unseen holds this, and the first
		// Ready would find a chosen slot missing.
		return nil, fmt.Errorf("paxos: storage's chosen index %d is past its last slot %d: the store is damaged", hs.Chosen, l.lastSlot)
	}
	n := &Node{
		id:         cfg.ID,
		members:    Membership{Voters: slices.Clone(cfg.Membership.Voters)},
		rand:       cfg.Rand,
		timing:     cfg.Timing,
		limits:     cfg.Limits,
		leaseSpan:  uint64(leaderLeaseTicks(cfg.Timing)),
		hs:         hs,
		savedHS:    hs,
		durable:    durableState{promised: hs.Promised},
		log:        l,
		applied:    cfg.Applied,
		maxRound:   hs.Promised.Round,
		leaseUntil: uint64(cfg.Timing.LeaseTicks),
		sends:      map[ReplicaID]*snapshotSend{},
	}
	for _, v := range n.members.Voters {
		if v != n.id {
			n.peers = append(n.peers, v)
		}
	}
	slices.Sort(n.peers)
	n.becomeFollower(None)
	if hs.Rebuilding {
		n.hsDirty = true // persist the mark before anything else
	}
	return n, nil
}

// ID returns the replica's ID.
func (n *Node) ID() ReplicaID { return n.id }

// Now returns the node's local time in ticks since it was created.
func (n *Node) Now() uint64 { return n.now }

// Err returns the storage error that halted the node, if any.
func (n *Node) Err() error { return n.halted }

// Stats returns the node's event counters.
func (n *Node) Stats() Stats { return n.stats }

// Tick advances the node's local time by one tick.
func (n *Node) Tick() {
	if n.halted != nil {
		return
	}
	n.now++
	n.tickSnapshots()
	switch n.role {
	case Leader:
		n.tickLeader()
	default:
		n.electionElapsed++
		if n.hs.Rebuilding {
			return
		}
		if n.electionElapsed >= n.electionTimeout || n.suspicionDue() {
			n.startPreVote()
		}
	}
}

// ReportSuspect tells the node a failure detector suspects peer id is
// down. If id is the leader this replica follows, it campaigns as soon as
// the lease it granted that leader lapses (plus a random part of a
// heartbeat interval, so that followers told at once do not duel), and
// every heartbeat interval after that until it hears a leader, instead of
// waiting out its election timeout. The acceptors' leases and pre-votes
// still keep a live leader in place if the suspicion is wrong, and its
// next heartbeat clears the suspicion.
func (n *Node) ReportSuspect(id ReplicaID) {
	if n.role != Follower || id == n.id || id != n.leader || n.suspectedLeader == id {
		return
	}
	n.suspectedLeader = id
	n.suspectRetryAt = max(n.now+1, n.leaseUntil) + uint64(n.rand.IntN(n.timing.HeartbeatTicks))
}

// suspicionDue reports whether a standing suspicion of the leader makes
// this follower campaign now, and schedules the next attempt.
func (n *Node) suspicionDue() bool {
	if n.suspectedLeader == None || n.role != Follower || n.now < n.suspectRetryAt {
		return false
	}
	n.suspectRetryAt = n.now + uint64(n.timing.HeartbeatTicks)
	return true
}

// Propose asks the leader to replicate data; it returns the slot the
// command was given. The command is chosen once a later Ready hands it out
// in Committed at that slot (a leader change may choose another value
// there, so compare the value).
func (n *Node) Propose(data []byte) (uint64, error) {
	if n.halted != nil {
		return 0, n.halted
	}
	if n.role != Leader {
		return 0, ErrNotLeader
	}
	if uint64(len(data)) > n.limits.MaxBatchBytes/2 {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(data), n.limits.MaxBatchBytes/2)
	}
	if n.log.lastSlot-n.hs.Chosen >= uint64(n.limits.MaxUncommittedSlots) {
		return 0, ErrBusy
	}
	slot := n.log.lastSlot + 1
	e := Entry{Slot: slot, Ballot: n.lead.ballot, Kind: EntryCommand, Data: data}
	n.lead.releaseChosen(n.hs.Chosen)
	if n.lead.pendingBytes > 0 && n.lead.pendingBytes+EntrySize(e) > n.limits.MaxUncommittedBytes {
		return 0, ErrBusy
	}
	e.Data = slices.Clone(data)
	n.log.put(e)
	n.lead.addPending(e)
	n.stats.Proposals++
	return slot, nil
}

// Step feeds a message from a peer into the node.
func (n *Node) Step(m Message) error {
	if n.halted != nil {
		return n.halted
	}
	if err := n.validate(m); err != nil {
		return err
	}
	if m.Ballot.Round > n.maxRound {
		n.maxRound = m.Ballot.Round
	}
	if m.Promised.Round > n.maxRound {
		n.maxRound = m.Promised.Round
	}
	if n.hs.Rebuilding {
		n.stepRebuilding(m)
		return n.halted
	}
	switch m.Type {
	case MsgPreVote:
		n.onPreVote(m)
	case MsgPrepare:
		n.onPrepare(m)
	case MsgAccept, MsgHeartbeat:
		n.onAccept(m)
	case MsgChosen, MsgSnapshot:
		// A leader already holds every chosen value below its start and
		// chooses the rest itself; a late catch-up from an old leader would
		// overwrite its proposals with entries under other ballots.
		switch {
		case n.role != Leader && m.Type == MsgChosen:
			n.onChosen(m)
		case n.role != Leader:
			n.onSnapshot(m)
		case m.Type == MsgSnapshot:
			n.ackSnapshot(m, 0, true) // the sender may stop
		}
	case MsgSnapshotAck:
		n.onSnapshotAck(m)
	case MsgPreVoteReply:
		n.onPreVoteReply(m)
	case MsgPromise:
		n.onPromise(m)
	case MsgAccepted, MsgHeartbeatReply:
		n.onAccepted(m)
	case MsgNack:
		n.onNack(m)
	case MsgStepDown:
		if m.Ballot == n.hs.Promised {
			n.ReportSuspect(m.From) // only if it is the leader this replica follows
		}
	}
	return n.halted
}

// StepDown makes a leader give up its leadership, for a graceful
// shutdown: it becomes a follower at once, so it stops acting as the
// leader (LeaseValidUntil says it holds no lease), and tells its most
// up-to-date voting follower (the highest match, then the most recent
// reply, then the lowest ID), which campaigns once the lease it granted
// lapses instead of waiting out its election timeout. One successor, so
// that two do not duel. Values it proposed and a quorum did not yet
// accept are concluded by the next leader's phase 1, as after a crash.
// It returns the successor, or ErrNotLeader on a replica that does not
// lead.
func (n *Node) StepDown() (ReplicaID, error) {
	if n.halted != nil {
		return None, n.halted
	}
	if n.role != Leader {
		return None, ErrNotLeader
	}
	ballot := n.lead.ballot
	successor := None
	var best *progress
	for _, p := range n.peers {
		pr := n.lead.progress[p]
		if pr.rebuilding {
			continue
		}
		if best == nil || pr.match > best.match || (pr.match == best.match && pr.lastAckAt > best.lastAckAt) {
			successor, best = p, pr
		}
	}
	if successor != None {
		n.send(Message{Type: MsgStepDown, To: successor, Ballot: ballot})
	}
	n.stats.StepDowns++
	n.becomeFollower(None)
	return successor, nil
}

// MaxRound and maxSlot bound the rounds and the slots a message may
// carry: unreachable in practice, far enough from the top of uint64 that
// nothing computed from them wraps. A replica promised to a
// round at or above MaxRound could never be reached by a valid message.
const (
	MaxRound = 1 << 62
	maxSlot  = 1 << 62
)

func (n *Node) validate(m Message) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidMessage, m.Type, fmt.Sprintf(format, args...))
	}
	switch {
	case !m.Type.Valid():
		return bad("unknown type")
	case m.To != n.id:
		return bad("addressed to %d, this is %d", m.To, n.id)
	case m.From == n.id || !n.members.Contains(m.From):
		return bad("sender %d is not a peer", m.From)
	case (m.Type == MsgSnapshot) != (m.Snapshot != nil):
		return bad("snapshot present only on MsgSnapshot")
	case !fromBallotOwner(m):
		return bad("ballot %s is not sender %d's", m.Ballot, m.From)
	case m.Ballot.Round >= MaxRound || m.Promised.Round >= MaxRound:
		// A round this high is no real election's; the next ballot after
		// it would wrap to round 0 (found in review: the replica panicked
		// lowering its promise).
		return bad("ballot round %d or %d out of range", m.Ballot.Round, m.Promised.Round)
	case m.Snapshot != nil && m.Snapshot.Meta.Index >= maxSlot:
		// chosen+1 past it would wrap (found in review: the replica
		// halted at its next campaign).
		return bad("snapshot index %d out of range", m.Snapshot.Meta.Index)
	case m.Commit >= maxSlot || m.Through >= maxSlot || m.Chosen >= maxSlot:
		return bad("slot %d, %d or %d out of range", m.Commit, m.Through, m.Chosen)
	case m.Type != MsgSnapshot && m.Type != MsgSnapshotAck && (m.Start >= maxSlot || m.Last >= maxSlot):
		// On a transfer they count bytes (validateTransfer). An accept
		// at the top slot once made a follower's last slot 2^64-1, past
		// which its log read nothing: it never applied again (found in
		// review).
		return bad("slot %d or %d out of range", m.Start, m.Last)
	}
	if len(m.Entries) > 0 && !carriesEntries(m.Type) {
		// Only these carry entries; a heartbeat's were once accepted
		// unchecked (gaps, foreign ballots) and chose slots never held.
		return bad("carries %d entries", len(m.Entries))
	}
	for i, e := range m.Entries {
		if e.Kind != EntryNoop && e.Kind != EntryCommand {
			return bad("entry %d has kind %d", e.Slot, e.Kind)
		}
		if e.Ballot.Round >= MaxRound {
			// A rebuilding replica promises the ballot of the entry that
			// ends its rebuild: one past MaxRound wrapped its next ballot.
			return bad("entry %d under ballot round %d out of range", e.Slot, e.Ballot.Round)
		}
		if e.Slot == 0 || e.Slot >= maxSlot || (i > 0 && e.Slot <= m.Entries[i-1].Slot) {
			return bad("entry slots not increasing from 1 at %d, or past %d", e.Slot, uint64(maxSlot))
		}
		if (m.Type == MsgAccept || m.Type == MsgChosen) && i > 0 && e.Slot != m.Entries[i-1].Slot+1 {
			return bad("entry slots not contiguous at %d", e.Slot)
		}
		if m.Type == MsgAccept && (e.Ballot != m.Ballot || e.Slot < m.Start) {
			return bad("entry %d under ballot %s or below start %d", e.Slot, e.Ballot, m.Start)
		}
	}
	if err := n.validatePromise(m); err != nil {
		return bad("%v", err)
	}
	// Slots start at 1: a zero start would wrap below it (a heartbeat's
	// accepted-through, a prepare's Start == Chosen+1 check).
	if (m.Type == MsgAccept || m.Type == MsgHeartbeat || m.Type == MsgPrepare) && m.Start == 0 {
		return bad("start slot is zero")
	}
	if m.Type == MsgSnapshot || m.Type == MsgSnapshotAck {
		return n.validateTransfer(m, bad)
	}
	return nil
}

// validatePromise checks a promise to this replica's candidacy (its
// entries' slots known to increase): it reports slots from the
// candidacy's start, and at most MaxPromiseLagSlots of them, since an
// acceptor holding more refuses the candidate (eligible). A promise reporting slots up to 2^62 would have
// the new leader fill every one with a no-op; one below start once halted
// the candidate (found in review).
func (n *Node) validatePromise(m Message) error {
	if m.Type != MsgPromise || m.Reject || n.role != Candidate || m.Ballot != n.cand.ballot || len(m.Entries) == 0 {
		return nil
	}
	first, last := m.Entries[0].Slot, m.Entries[len(m.Entries)-1].Slot
	if first < n.cand.start || last-n.cand.start >= uint64(n.limits.MaxPromiseLagSlots) {
		return fmt.Errorf("reports slots %d-%d, outside %d-%d", first, last, n.cand.start, n.cand.start+uint64(n.limits.MaxPromiseLagSlots)-1)
	}
	return nil
}

// fromBallotOwner reports whether m comes from the replica whose ballot
// it carries, if it is a message only that replica sends: a candidate's
// or a leader's. Catch-up (MsgChosen, MsgSnapshot) may also come from an
// acceptor, under ballot zero. The transport pins a peer's ID, so such a
// message under another replica's ballot is a replay or a forgery, and
// following it would let one replica speak for another's ballot.
func fromBallotOwner(m Message) bool {
	switch m.Type {
	case MsgChosen, MsgSnapshot:
		return m.Ballot.IsZero() || m.Ballot.Replica == m.From
	case MsgPreVote, MsgPrepare, MsgAccept, MsgHeartbeat, MsgStepDown:
		return m.Ballot.Replica == m.From
	}
	return true
}

// HasReady reports whether Ready would return anything.
func (n *Node) HasReady() bool {
	if n.halted != nil {
		return false
	}
	if n.role == Leader && n.lead.wantsSend(n) {
		return true
	}
	return n.hsDirty || len(n.log.pending) > 0 || n.snap != nil || len(n.msgs) > 0 || len(n.early) > 0 || n.hs.Chosen > n.applied
}

// Ready returns what the caller must persist, send and apply. The caller
// confirms it with Persisted (or Advance) once processed; see the package
// documentation for the order.
func (n *Node) Ready() Ready {
	if n.halted != nil {
		return Ready{}
	}
	if n.role == Leader {
		n.lead.sendAccepts(n)
		n.lead.advanceCommit(n) // alone, a leader is its own quorum
	}
	rd := Ready{HardState: n.hs, Entries: n.log.takePending(), Snapshot: n.snap}
	rd.HardStateChanged = n.hsDirty || (n.hs != n.savedHS && (len(rd.Entries) > 0 || rd.Snapshot != nil))
	if rd.HardStateChanged {
		n.savedHS = n.hs
	}
	rec := readyRecord{}
	if n.role == Leader {
		rec.ballot = n.lead.ballot
		// The leader puts its ballot's slots in order, each into pending,
		// so every one up to the highest here is in this Ready or an
		// earlier one. The last entry need not be that highest: one that
		// replaced an older ballot's pending entry took its place (put).
		for _, e := range rd.Entries {
			if e.Ballot == rec.ballot {
				rec.lastSlot = max(rec.lastSlot, e.Slot)
			}
		}
	}
	if n.snap != nil {
		n.applied = n.snap.Meta.Index
	}
	rd.Committed = n.committedEntries()
	if len(rd.Committed) > 0 {
		n.applied = rd.Committed[len(rd.Committed)-1].Slot
	}
	rd.Messages, n.msgs = n.msgs, nil
	rd.EarlyMessages, n.early = n.early, nil
	n.hsDirty, n.snap = false, nil
	rec.applied = n.applied
	// Every entry accepted so far is in this Ready or an earlier one, and
	// savedHS is the hard state written by now.
	rec.durable = durableState{promised: n.savedHS.Promised, followBallot: n.follow.ballot, followThrough: n.follow.through}
	n.readies = append(n.readies, rec)
	return rd
}

// Advance tells the node every Ready handed out was processed: written,
// its messages sent and its entries applied.
func (n *Node) Advance() {
	for len(n.readies) > 0 {
		n.Persisted()
	}
}

// Persisted tells the node the oldest unconfirmed Ready was processed: its
// write is durable, its Messages were sent, its snapshot installed and its
// Committed entries applied. A caller that writes asynchronously may keep
// stepping the node and take further Readys meanwhile, as long as it writes
// them in order and confirms each with Persisted, in order.
func (n *Node) Persisted() {
	if len(n.readies) == 0 {
		panic(fmt.Sprintf("paxos: replica %d: Persisted with no Ready in flight", n.id))
	}
	rec := n.readies[0]
	n.readies = n.readies[1:]
	n.durable = rec.durable
	n.log.stabilize()
	n.log.prune(rec.applied)
	if n.role == Leader && rec.ballot == n.lead.ballot && rec.lastSlot > 0 {
		// The leader's own accepts now count toward choosing. Its entries
		// go out in slot order, so everything up to rec.lastSlot is written.
		n.lead.persisted = max(n.lead.persisted, rec.lastSlot)
		n.lead.advanceCommit(n)
	}
}

// InFlight is the number of Readys handed out and not yet confirmed.
func (n *Node) InFlight() int { return len(n.readies) }

func (n *Node) committedEntries() []Entry {
	if n.applied >= n.hs.Chosen {
		return nil
	}
	es, err := n.log.entries(n.applied+1, n.hs.Chosen+1, n.limits.applyEntries(), n.limits.MaxBatchBytes)
	if err != nil {
		n.halt(fmt.Errorf("reading chosen entries from %d: %w", n.applied+1, err))
		return nil
	}
	for i, e := range es {
		if e.Slot != n.applied+1+uint64(i) {
			panic(fmt.Sprintf("paxos: replica %d: chosen slot %d missing (chosen %d)", n.id, n.applied+1+uint64(i), n.hs.Chosen))
		}
	}
	return es
}

func (n *Node) halt(err error) {
	if n.halted == nil {
		n.halted = fmt.Errorf("%w: %w", ErrHalted, err)
	}
}

// sendEarly queues m to go out before the next Ready's write: m must
// acknowledge nothing that is not durable already.
func (n *Node) sendEarly(m Message) {
	m.From = n.id
	n.early = enqueue(n.early, m)
}

func (n *Node) send(m Message) {
	m.From = n.id
	switch m.Type {
	case MsgPreVote, MsgAccept, MsgHeartbeat, MsgChosen, MsgSnapshot, MsgSnapshotAck:
		n.early = enqueue(n.early, m)
	default:
		n.msgs = enqueue(n.msgs, m)
	}
}

// enqueue adds m to the queue q of messages for the next Ready, dropping
// the message of q that m supersedes, or m if q holds a newer one. Only
// Ready empties a queue, and a caller may take none for seconds (a
// replica decoding a snapshot from the leader) while the node still steps
// the leader's heartbeats and resent accepts, a candidate's prepares, and
// ticks: appended, the queues grew by a message for each (found in
// review). Paxos tolerates the loss of any message; one dropped here is
// one whose receiver learns at least as much from the message kept:
//
//   - one of the same kind to the same peer under a lower ballot: that
//     peer has moved on to the higher one (its ballots only grow), so
//     what answers or asks under the lower one is of no use to it;
//   - under the same ballot, an earlier one of the same kind to the same
//     peer, which m restates as this replica stands now. An answer to an
//     accept is kept per last slot of the batch it answers (Last): the
//     leader counts its accepts in flight by their answers, and one
//     answer for two batches would leave it counting one in flight that
//     is not. A rebuilding replica's answer to catch-up (a heartbeat
//     reply with Round zero) is kept apart from its answer to a
//     heartbeat, as the leader sends the next catch-up only on the
//     former;
//   - whatever the ballots, an earlier catch-up, snapshot chunk or chunk
//     acknowledgement to the same peer: the newer catch-up starts from
//     what the peer last reported, the newer chunk is of the one
//     transfer this replica still runs to it, and the newer
//     acknowledgement answers the newest chunk received.
//
// A leader's accepts are never dropped: each carries entries no other
// carries, and Ready sends them only while fewer than
// MaxInflightAccepts are unanswered. So a queue holds at most one message
// of each kind per peer (a rebuilding replica's heartbeat replies, two),
// but for the answers to accepts: one per batch of the leader's window,
// which spans the slots it resends.
func enqueue(q []Message, m Message) []Message {
	if m.Type == MsgAccept {
		return append(q, m)
	}
	for _, old := range q {
		if old.To == m.To && old.Type == m.Type && byBallot(m.Type) && m.Ballot.Less(old.Ballot) {
			return q
		}
	}
	// m goes last, as appended: after every message queued before it,
	// as the peer would have read them over one connection.
	kept := q[:0]
	for _, old := range q {
		if !supersedes(m, old) {
			kept = append(kept, old)
		}
	}
	clear(q[len(kept):])
	return append(kept, m)
}

// supersedes reports whether m, queued after old, leaves old of no use to
// its receiver (see enqueue).
func supersedes(m, old Message) bool {
	switch {
	case old.To != m.To || old.Type != m.Type:
		return false
	case byBallot(m.Type) && old.Ballot != m.Ballot:
		return old.Ballot.Less(m.Ballot)
	case m.Type == MsgAccepted:
		return old.Last == m.Last
	case m.Type == MsgHeartbeatReply:
		return (old.Round == 0) == (m.Round == 0)
	}
	return true
}

// byBallot reports whether a message of kind t is of use to its receiver
// only under the highest ballot it was sent: the receiver's campaign or
// leadership (or this replica's own, for its requests). Catch-up and
// snapshot transfers carry chosen values, whatever the ballot.
func byBallot(t MessageType) bool {
	switch t {
	case MsgChosen, MsgSnapshot, MsgSnapshotAck:
		return false
	}
	return true
}

func (n *Node) setPromised(b Ballot) {
	if b.Less(n.hs.Promised) {
		panic(fmt.Sprintf("paxos: replica %d lowering promise %s to %s", n.id, n.hs.Promised, b))
	}
	if b != n.hs.Promised {
		n.hs.Promised = b
		n.hsDirty = true
	}
}

func (n *Node) setChosen(c uint64) {
	if c > n.hs.Chosen {
		n.hs.Chosen = c
	}
}

func (n *Node) resetElectionTimer() {
	n.electionElapsed = 0
	n.electionTimeout = n.timing.ElectionTicks + n.rand.IntN(n.timing.ElectionTicks)
}

func (n *Node) becomeFollower(leader ReplicaID) {
	n.role = Follower
	n.leader = leader
	n.cand = nil
	n.lead = nil
	n.resetElectionTimer()
}

// Status describes the node for callers and operators.
type Status struct {
	ID       ReplicaID
	Role     Role
	Leader   ReplicaID
	Promised Ballot
	Ballot   Ballot // the ballot led, when Leader
	Chosen   uint64
	Applied  uint64
	LastSlot uint64
	Now      uint64
	// LeaseUntil is the local tick before which this leader is sure no
	// other replica can be leader (zero when not leader).
	LeaseUntil uint64
	// Rebuilding is set while the replica learns without voting.
	Rebuilding bool
	// CaughtUpAt is, on a leader, the slot through which it must have
	// applied to have seen every command chosen before its leadership.
	CaughtUpAt uint64
}

// Status returns the node's current status. A halted node (Err) reports
// itself a follower of no one, whatever role it had: it will neither
// lead nor forward again, and a status that still said Leader would
// point clients and peers at it.
func (n *Node) Status() Status {
	s := Status{
		ID: n.id, Role: n.role, Leader: n.leader, Promised: n.hs.Promised,
		Chosen: n.hs.Chosen, Applied: n.applied, LastSlot: n.log.lastSlot, Now: n.now,
		Rebuilding: n.hs.Rebuilding,
	}
	if n.halted != nil {
		s.Role, s.Leader = Follower, None
		return s
	}
	if n.role == Leader {
		s.Ballot = n.lead.ballot
		s.LeaseUntil = n.lead.leaseUntil
		s.CaughtUpAt = n.lead.caughtUpAt
	}
	return s
}

// LeaseValidUntil returns the local tick before which this replica holds
// the leader lease, and whether it holds it now. A replica holding it is
// the only one that can be leader, provided clocks keep within
// MaxClockDriftPPM and no process pause outlasts the lease.
func (n *Node) LeaseValidUntil() (uint64, bool) {
	if n.role != Leader || n.halted != nil {
		return 0, false
	}
	return n.lead.leaseUntil, n.now < n.lead.leaseUntil
}

// Compacted tells the node the caller saved (or queued the write of) a
// snapshot of its state machine at index and deleted the log at or below
// through, keeping the entries in (through, index] as the log's tail. The
// node serves catch-up from the tail and never reads below through again.
// Call it after Advance (or Persisted), before any other input, and again
// with the same index if the caller later compacts more of the tail (see
// storage.Store.Compact). index must not pass the applied index, nor
// through the index.
func (n *Node) Compacted(index, through uint64) {
	if index > n.applied || through > index {
		panic(fmt.Sprintf("paxos: replica %d compacted through %d, snapshot %d, beyond applied %d", n.id, through, index, n.applied))
	}
	n.log.compact(index, through)
}

// Membership returns the voters.
func (n *Node) Membership() Membership {
	return Membership{Voters: slices.Clone(n.members.Voters)}
}

package paxos

import (
	"fmt"
	"slices"
)

// This file holds the proposer's side: pre-vote, phase 1 and leadership.

// candidacy is the state of a pre-vote or a phase 1 in progress.
type candidacy struct {
	ballot   Ballot
	start    uint64 // first slot asked about: chosen+1 when it began
	sentAt   uint64 // local tick the prepare went out: the lease counts from it
	granted  map[ReplicaID]bool
	rejected map[ReplicaID]bool
	promises map[ReplicaID][]Entry
	chosen   map[ReplicaID]uint64 // each promiser's chosen index
}

func (n *Node) nextBallot() Ballot {
	round := max(n.maxRound, n.hs.Promised.Round) + 1
	return Ballot{Round: round, Replica: n.id}
}

func (n *Node) startPreVote() {
	n.resetElectionTimer()
	if !n.leaseFree(n.id) {
		return // our own acceptor still honours someone's lease
	}
	n.role = PreCandidate
	n.leader = None
	n.lead = nil
	n.cand = &candidacy{ballot: n.nextBallot(), granted: map[ReplicaID]bool{n.id: true}, rejected: map[ReplicaID]bool{}}
	if n.quorum(n.cand.granted) {
		n.startPrepare()
		return
	}
	for _, p := range n.peers {
		n.send(Message{Type: MsgPreVote, To: p, Ballot: n.cand.ballot, Start: n.hs.Chosen + 1, Chosen: n.hs.Chosen})
	}
}

func (n *Node) onPreVoteReply(m Message) {
	if n.role != PreCandidate || m.Ballot != n.cand.ballot {
		return
	}
	if m.Reject {
		n.cand.rejected[m.From] = true
		if len(n.cand.rejected) >= n.members.Quorum() {
			n.becomeFollower(None)
		}
		return
	}
	n.cand.granted[m.From] = true
	if n.quorum(n.cand.granted) {
		n.startPrepare()
	}
}

func (n *Node) startPrepare() {
	n.stats.Elections++
	b := n.nextBallot()
	n.role = Candidate
	n.setPromised(b)
	n.maxRound = b.Round
	n.leaseHolder, n.leaseUntil = n.id, n.now+uint64(n.timing.LeaseTicks)
	start := n.hs.Chosen + 1
	own, err := n.log.entries(start, n.log.lastSlot+1, int(^uint(0)>>1), ^uint64(0))
	if err != nil {
		n.halt(err)
		return
	}
	n.cand = &candidacy{
		ballot: b, start: start, sentAt: n.now,
		granted: map[ReplicaID]bool{}, rejected: map[ReplicaID]bool{},
		promises: map[ReplicaID][]Entry{n.id: own},
		chosen:   map[ReplicaID]uint64{},
	}
	for _, p := range n.peers {
		n.send(Message{Type: MsgPrepare, To: p, Ballot: b, Start: start, Chosen: n.hs.Chosen})
	}
	n.maybeWin()
}

func (n *Node) onPromise(m Message) {
	if n.role != Candidate || m.Ballot != n.cand.ballot {
		return
	}
	if m.Reject {
		n.cand.rejected[m.From] = true
		if n.cand.ballot.Less(m.Promised) || len(n.cand.rejected) >= n.members.Quorum() {
			n.becomeFollower(None)
		}
		return
	}
	n.cand.promises[m.From] = m.Entries // in range: validatePromise
	n.cand.chosen[m.From] = m.Chosen
	n.maybeWin()
}

func (n *Node) maybeWin() {
	if len(n.cand.promises) < n.members.Quorum() {
		return
	}
	n.becomeLeader()
}

// becomeLeader re-proposes, for every slot from the candidacy's start to
// the highest slot any promise reported, the value accepted under the
// highest ballot among the promises, and a no-op where none was.
//
// Slots this replica learned were chosen while it campaigned are not
// re-proposed: followers learn them by catch-up, like all below start.
func (n *Node) becomeLeader() {
	c := n.cand
	n.suspectedLeader = None
	c.start = max(c.start, n.hs.Chosen+1)
	highest := map[uint64]Entry{}
	top := c.start - 1
	for _, id := range n.members.Voters {
		for _, e := range c.promises[id] {
			if e.Slot < c.start {
				continue
			}
			if cur, ok := highest[e.Slot]; !ok || cur.Ballot.Less(e.Ballot) {
				highest[e.Slot] = e
			}
			top = max(top, e.Slot)
		}
	}
	// A new leader always chooses at least one slot under its ballot: the
	// mark that ends a follower's rebuild, and proof to itself that its
	// phase 2 works.
	top = max(top, c.start)
	n.lead = newLeadership(n, c, top)
	for s := c.start; s <= top; s++ {
		e, ok := highest[s]
		if !ok {
			e = Entry{Slot: s, Kind: EntryNoop}
		}
		e.Ballot = c.ballot
		n.log.put(e)
		n.lead.addPending(e)
	}
	n.role = Leader
	n.leader = n.id
	n.cand = nil
	n.stats.BecameLeader++
	n.lead.heartbeat(n)
}

func (n *Node) onNack(m Message) {
	var mine Ballot
	switch n.role {
	case Leader:
		mine = n.lead.ballot
	case Candidate, PreCandidate:
		mine = n.cand.ballot
	default:
		return
	}
	if m.Ballot == mine && mine.Less(m.Promised) {
		n.becomeFollower(None)
	}
}

func (n *Node) quorum(votes map[ReplicaID]bool) bool {
	return len(votes) >= n.members.Quorum()
}

// leadership is the state of a leader.
type leadership struct {
	ballot     Ballot
	start      uint64
	caughtUpAt uint64
	progress   map[ReplicaID]*progress

	heartbeatElapsed int
	round            uint64
	rounds           []leaseRound // recent heartbeat rounds, oldest first
	leaseUntil       uint64
	lastQuorumAt     uint64 // the send tick of the newest round a quorum acknowledged
	// persisted is the highest slot of the leader's own proposals known
	// durable; only that far does its own vote count.
	persisted uint64
	// pending holds the sizes (EntrySize) of this ballot's slots from
	// pendingFrom on, not yet chosen; pendingBytes is their sum, which
	// Propose keeps under MaxUncommittedBytes.
	pendingFrom  uint64
	pending      []uint64
	pendingBytes uint64
}

// addPending counts e, the entry just put at the log's last slot.
func (l *leadership) addPending(e Entry) {
	if e.Slot != l.pendingFrom+uint64(len(l.pending)) {
		panic(fmt.Sprintf("paxos: pending slot %d after %d from %d", e.Slot, len(l.pending), l.pendingFrom))
	}
	size := EntrySize(e)
	l.pending = append(l.pending, size)
	l.pendingBytes += size
}

// releaseChosen stops counting the slots through chosen.
func (l *leadership) releaseChosen(chosen uint64) {
	k := 0
	for k < len(l.pending) && l.pendingFrom+uint64(k) <= chosen {
		l.pendingBytes -= l.pending[k]
		k++
	}
	l.pending = l.pending[k:]
	l.pendingFrom += uint64(k)
}

// progress is what the leader knows of one follower.
type progress struct {
	next      uint64 // next slot to send
	match     uint64 // highest slot known accepted under our ballot (or chosen)
	inflight  int    // accepts sent and not answered
	lastAckAt uint64 // local tick of the last reply
	// chosen is the follower's latest report of its chosen index, which
	// catch-up starts after. Like through it can go down: a follower that
	// lost its disk (or restarted with an older chosen index, which is not
	// written alone) would never connect to catch-up sent after an older,
	// higher report, and would ask for the same useless batch again.
	chosen uint64
	// through is the follower's own latest report of how far it accepted
	// without a gap. Unlike match it can go down (a restarted follower
	// forgets its position), so resends start from it.
	through     uint64
	resetAt     uint64 // the through a gap reset last restarted from
	resetTick   uint64 // and when, to ignore echoes of one gap for a heartbeat
	catchUpAt   uint64 // local tick of the last catch-up sent
	catchUpSent bool
	// known is set once the follower's chosen index is known (from its
	// promise or a reply): catch-up waits for it.
	known bool
	// rebuilding is set while the follower answers as a learner.
	rebuilding bool
}

type leaseRound struct {
	round  uint64
	sentAt uint64
	acks   map[ReplicaID]bool
}

const maxLeaseRounds = 8

func newLeadership(n *Node, c *candidacy, top uint64) *leadership {
	l := &leadership{
		ballot: c.ballot, start: c.start, caughtUpAt: top,
		progress: map[ReplicaID]*progress{}, lastQuorumAt: c.sentAt, persisted: c.start - 1,
		pendingFrom: c.start,
		leaseUntil:  c.sentAt + n.leaseSpan,
	}
	for _, p := range n.peers {
		pr := &progress{next: c.start, match: c.start - 1, through: c.start - 1, lastAckAt: n.now}
		if chosen, ok := c.chosen[p]; ok {
			pr.chosen, pr.known = chosen, true
		}
		l.progress[p] = pr
	}
	return l
}

func (n *Node) tickLeader() {
	l := n.lead
	l.heartbeatElapsed++
	if l.heartbeatElapsed >= n.timing.HeartbeatTicks {
		l.heartbeat(n)
	}
	// Check quorum: a leader that has not heard a quorum for an election
	// timeout steps down, so a partitioned leader stops believing in itself.
	if n.now-l.lastQuorumAt >= uint64(n.timing.ElectionTicks) {
		n.stats.QuorumLost++
		n.becomeFollower(None)
	}
}

// holdsQuorum reports whether a quorum answered recently enough that this
// leader should refuse pre-votes.
func (l *leadership) holdsQuorum(n *Node) bool {
	return n.now-l.lastQuorumAt < uint64(n.timing.ElectionTicks)
}

func (l *leadership) heartbeat(n *Node) {
	l.heartbeatElapsed = 0
	l.round++
	r := leaseRound{round: l.round, sentAt: n.now, acks: map[ReplicaID]bool{n.id: true}}
	l.rounds = append(l.rounds, r)
	if len(l.rounds) > maxLeaseRounds {
		l.rounds = slices.Delete(l.rounds, 0, 1)
	}
	// A lone voter is its own quorum, for its lease as for choosing: no
	// reply will count its round (it once lost its "quorum" every
	// election timeout and ran phase 1 again).
	l.countRound(n, &l.rounds[len(l.rounds)-1])
	n.leaseHolder, n.leaseUntil = n.id, n.now+uint64(n.timing.LeaseTicks)
	for _, p := range n.peers {
		pr := l.progress[p]
		n.send(Message{Type: MsgHeartbeat, To: p, Ballot: l.ballot, Start: l.start, Commit: n.hs.Chosen, Round: l.round})
		l.maybeRetransmit(n, pr)
		l.maybeCatchUp(n, p, pr)
	}
}

// maybeRetransmit restarts sending from the follower's last known
// position when accepts seem lost: none was answered for two heartbeats.
func (l *leadership) maybeRetransmit(n *Node, pr *progress) {
	if pr.inflight > 0 && n.now-pr.lastAckAt >= 2*uint64(n.timing.HeartbeatTicks) {
		pr.inflight = 0
		pr.next = max(pr.through+1, l.start)
		pr.lastAckAt = n.now
		n.stats.Retransmissions++
	}
}

// maybeCatchUp sends chosen entries (or a snapshot) below the leader's
// start to a follower that lacks them: it cannot learn them under our
// ballot.
func (l *leadership) maybeCatchUp(n *Node, to ReplicaID, pr *progress) {
	behind := pr.chosen+1 < l.start || pr.next <= n.log.compacted || (pr.rebuilding && pr.chosen < n.hs.Chosen)
	if !pr.known || !behind {
		return
	}
	if pr.catchUpSent && n.now-pr.catchUpAt < 2*uint64(n.timing.HeartbeatTicks) {
		return
	}
	through := n.hs.Chosen
	if pr.rebuilding && through < l.caughtUpAt {
		// A rebuilding follower votes again once it learns a slot chosen
		// under this ballot. Until this ballot has chosen every slot it
		// re-proposed, some of them (chosen before, on a quorum that may
		// have counted the follower's lost disk) may be held by fewer
		// than a quorum of the others: teach it none of this ballot's
		// slots before then, or one more disk loss loses them.
		through = min(through, l.start-1)
	}
	pr.catchUpSent, pr.catchUpAt = true, n.now
	n.sendCatchUpThrough(to, pr.chosen, through, l.ballot)
}

func (l *leadership) wantsSend(n *Node) bool {
	for _, p := range n.peers {
		pr := l.progress[p]
		if pr.next <= n.log.lastSlot && pr.inflight < n.limits.MaxInflightAccepts && pr.next > n.log.compacted {
			return true
		}
	}
	return false
}

// sendAccepts sends every follower the proposals it has not been sent,
// in batches, with at most MaxInflightAccepts unanswered.
func (l *leadership) sendAccepts(n *Node) {
	for _, p := range n.peers {
		pr := l.progress[p]
		for pr.next <= n.log.lastSlot && pr.inflight < n.limits.MaxInflightAccepts {
			if pr.next <= n.log.compacted {
				l.maybeCatchUp(n, p, pr)
				break
			}
			es, err := n.log.entries(pr.next, n.log.lastSlot+1, n.limits.MaxBatchEntries, n.limits.MaxBatchBytes)
			if err != nil {
				n.halt(err)
				return
			}
			if len(es) == 0 || es[0].Slot != pr.next {
				panic(fmt.Sprintf("paxos: leader %d lacks its own proposal for slot %d", n.id, pr.next))
			}
			n.send(Message{Type: MsgAccept, To: p, Ballot: l.ballot, Start: l.start, Entries: es, Commit: n.hs.Chosen})
			n.stats.AcceptsSent++
			n.stats.EntriesSent += uint64(len(es))
			pr.next = es[len(es)-1].Slot + 1
			pr.inflight++
		}
	}
}

// onAccepted handles MsgAccepted and MsgHeartbeatReply.
func (n *Node) onAccepted(m Message) {
	if n.role != Leader || m.Ballot != n.lead.ballot {
		return
	}
	l := n.lead
	pr := l.progress[m.From]
	pr.known = true
	pr.chosen = m.Chosen
	if m.Reject {
		// A rebuilding replica: catch it up, never count its vote. What it
		// accepted before it lost its disk is gone, so its match falls to
		// what it has learned chosen since (slots a quorum already holds).
		pr.rebuilding = true
		pr.match = min(pr.match, pr.chosen)
		pr.through = min(pr.through, pr.chosen)
		if pr.chosen < n.hs.Chosen {
			if m.Round == 0 {
				pr.catchUpSent = false // a catch-up answered: send the next chunk
			}
			l.maybeCatchUp(n, m.From, pr)
		}
		if l.rebuildCaughtUp(n, pr) {
			n.startPrepare()
		}
		return
	}
	pr.rebuilding = false
	// match only grows while the follower keeps its disk: what it accepted
	// under our ballot is on it even if it restarted and forgot how far it
	// got (a follower that lost its disk answers as a learner, above).
	pr.match = max(pr.match, m.Through)
	pr.through = m.Through
	if pr.next <= m.Through {
		pr.next = m.Through + 1
	}
	switch m.Type {
	case MsgAccepted:
		pr.lastAckAt = n.now
		if pr.inflight > 0 && m.Last > 0 {
			pr.inflight--
		}
		echo := m.Through == pr.resetAt && n.now-pr.resetTick < uint64(n.timing.HeartbeatTicks)
		if m.Last > m.Through && !echo {
			// The follower found a gap: resend from where it stands. Other
			// replies to accepts sent before now report the same gap.
			l.resendFrom(n, pr, m.Through)
		}
		if m.Last == 0 {
			pr.catchUpSent = false
			l.maybeCatchUp(n, m.From, pr)
		}
	case MsgHeartbeatReply:
		l.ackRound(n, m.From, m.Round)
		if pr.inflight == 0 && m.Through+1 < pr.next {
			// Every accept was answered, yet the follower stands behind
			// them: it restarted, or its answers were lost.
			l.resendFrom(n, pr, m.Through)
		}
	}
	l.advanceCommit(n)
}

// resendFrom restarts sending after through. A follower may report a
// position below our start (a catch-up reply carries its chosen index);
// slots below start it learns by catch-up, never by accept.
func (l *leadership) resendFrom(n *Node, pr *progress, through uint64) {
	pr.resetAt, pr.resetTick = through, n.now
	pr.next = max(through+1, l.start)
	pr.inflight = 0
	n.stats.Retransmissions++
}

func (l *leadership) ackRound(n *Node, from ReplicaID, round uint64) {
	for i := range l.rounds {
		r := &l.rounds[i]
		if r.round != round {
			continue
		}
		r.acks[from] = true
		l.countRound(n, r)
		return
	}
}

// countRound renews the lease and the quorum's last word from round r
// once a quorum acknowledged it.
func (l *leadership) countRound(n *Node, r *leaseRound) {
	if len(r.acks) >= n.members.Quorum() && r.sentAt > l.lastQuorumAt {
		l.lastQuorumAt = r.sentAt
		l.leaseUntil = max(l.leaseUntil, r.sentAt+n.leaseSpan)
	}
}

// advanceCommit chooses the highest slot a quorum has accepted.
func (l *leadership) advanceCommit(n *Node) {
	matches := make([]uint64, 0, len(n.members.Voters))
	matches = append(matches, l.persisted)
	for _, p := range n.peers {
		matches = append(matches, l.progress[p].match)
	}
	slices.Sort(matches)
	commit := matches[len(matches)-n.members.Quorum()]
	if commit > n.hs.Chosen && commit >= l.start {
		n.setChosen(commit)
		l.releaseChosen(commit)
	}
}

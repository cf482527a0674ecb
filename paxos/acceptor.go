package paxos

import "errors"

// This file holds the acceptor's and learner's side of the protocol: what a
// replica does with requests from a candidate or a leader.

// leaseFree reports whether this acceptor may promise candidate now: no
// other replica's lease is running here.
func (n *Node) leaseFree(candidate ReplicaID) bool {
	return n.now >= n.leaseUntil || n.leaseHolder == candidate
}

// eligible reports whether a candidate whose chosen index is chosen can be
// promised: this acceptor still holds every entry above it (in its log or
// the log's tail below its snapshot), and holds at most MaxPromiseLagSlots
// slots above it, which bounds the promise. The replica with the highest
// chosen index is eligible everywhere as long as no acceptor holds entries
// further than that beyond it.
func (n *Node) eligible(chosen uint64) bool {
	// lastSlot-chosen, not chosen+lag: a peer's chosen index near the top
	// of uint64 would wrap the sum.
	return chosen >= n.log.compacted && (n.log.lastSlot <= chosen || n.log.lastSlot-chosen <= uint64(n.limits.MaxPromiseLagSlots))
}

func (n *Node) onPreVote(m Message) {
	grant := n.hs.Promised.Less(m.Ballot) && n.leaseFree(m.From) && n.eligible(m.Chosen)
	if n.role == Leader && n.lead.holdsQuorum(n) {
		grant = false
	}
	n.send(Message{Type: MsgPreVoteReply, To: m.From, Ballot: m.Ballot, Reject: !grant, Promised: n.hs.Promised, Chosen: n.hs.Chosen})
	if !n.eligible(m.Chosen) {
		n.sendCatchUp(m.From, m.Chosen, Ballot{})
	}
}

func (n *Node) onPrepare(m Message) {
	reject := func() {
		n.send(Message{Type: MsgPromise, To: m.From, Ballot: m.Ballot, Reject: true, Promised: n.hs.Promised, Chosen: n.hs.Chosen})
	}
	switch {
	case m.Ballot.Less(n.hs.Promised):
		reject()
		return
	case m.Ballot != n.hs.Promised && !n.leaseFree(m.From):
		reject()
		return
	case !n.eligible(m.Chosen) || m.Start != m.Chosen+1:
		reject()
		n.sendCatchUp(m.From, m.Chosen, Ballot{})
		return
	}
	es, err := n.log.entries(m.Start, n.log.lastSlot+1, int(^uint(0)>>1), ^uint64(0))
	if err != nil {
		n.halt(err)
		return
	}
	if m.Chosen < n.hs.Chosen && chosenBytes(es, n.hs.Chosen) > n.limits.MaxPromiseBytes {
		reject()
		n.sendCatchUp(m.From, m.Chosen, Ballot{})
		return
	}
	// A promise grants m.From a lease, so whatever this replica was doing
	// ends, a pre-vote too: a duplicate of a prepare it promised before
	// changes no ballot, and once left a pre-candidate that prepared on
	// the next grant, within the lease it had just granted.
	if n.role != Follower {
		n.becomeFollower(None)
	}
	n.setPromised(m.Ballot)
	n.leaseHolder, n.leaseUntil = m.From, n.now+uint64(n.timing.LeaseTicks)
	n.resetElectionTimer()
	n.send(Message{Type: MsgPromise, To: m.From, Ballot: m.Ballot, Entries: es, Chosen: n.hs.Chosen})
}

// chosenBytes is the size of the entries of es at or below chosen.
func chosenBytes(es []Entry, chosen uint64) uint64 {
	var n uint64
	for _, e := range es {
		if e.Slot > chosen {
			break
		}
		n += EntrySize(e)
	}
	return n
}

// onAccept handles MsgAccept and MsgHeartbeat from a leader.
func (n *Node) onAccept(m Message) {
	if m.Ballot.Less(n.hs.Promised) {
		n.send(Message{Type: MsgNack, To: m.From, Ballot: m.Ballot, Promised: n.hs.Promised})
		return
	}
	if n.role != Follower || n.leader != m.From {
		n.becomeFollower(m.From)
	}
	n.setPromised(m.Ballot)
	n.leaseHolder, n.leaseUntil = m.From, n.now+uint64(n.timing.LeaseTicks)
	n.electionElapsed = 0
	n.suspectedLeader = None // a leader is alive
	if n.follow.ballot != m.Ballot {
		n.follow = follower{ballot: m.Ballot, start: m.Start, through: m.Start - 1}
	}
	n.followChosen()
	if len(m.Entries) > 0 && m.Entries[0].Slot <= n.follow.through+1 {
		for _, e := range m.Entries {
			// Chosen slots never change value; re-accepting them would
			// only write the same value again.
			if e.Slot > n.hs.Chosen {
				n.log.put(e)
			}
		}
		n.follow.through = max(n.follow.through, m.Entries[len(m.Entries)-1].Slot)
	}
	if n.hs.Chosen+1 >= n.follow.start {
		n.setChosen(min(m.Commit, n.follow.through))
	}
	n.followChosen()
	if m.Type == MsgHeartbeat {
		n.replyHeartbeat(m)
		return
	}
	var last uint64
	if len(m.Entries) > 0 {
		last = m.Entries[len(m.Entries)-1].Slot
	}
	n.send(Message{Type: MsgAccepted, To: m.From, Ballot: m.Ballot, Through: n.follow.through, Chosen: n.hs.Chosen, Last: last})
}

// replyHeartbeat acknowledges a heartbeat round. The reply renews the
// leader's lease and reports how far this replica accepted, so it must
// claim only what is durable: the promise of the leader's ballot and the
// accepted entries. When the promise is already on disk, it goes out at
// once with the durable position, instead of waiting behind the writes
// in flight: on a slow disk those can take longer than an election
// timeout, and a leader whose followers answer that late gives up
// (measured: 512 writers on three server processes sharing one disk).
// Otherwise (the first heartbeat of a new ballot) it waits for the write.
func (n *Node) replyHeartbeat(m Message) {
	d := n.durable
	if d.promised == m.Ballot && d.followBallot == m.Ballot {
		n.sendEarly(Message{Type: MsgHeartbeatReply, To: m.From, Ballot: m.Ballot, Round: m.Round, Through: d.followThrough, Chosen: n.hs.Chosen})
		return
	}
	n.send(Message{Type: MsgHeartbeatReply, To: m.From, Ballot: m.Ballot, Round: m.Round, Through: n.follow.through, Chosen: n.hs.Chosen})
}

// followChosen counts chosen slots as accepted under the followed ballot:
// their value is the one any leader proposes for them.
func (n *Node) followChosen() {
	if n.hs.Chosen+1 >= n.follow.start && n.hs.Chosen > n.follow.through {
		n.follow.through = n.hs.Chosen
	}
}

// onChosen learns chosen entries sent to catch this replica up.
func (n *Node) onChosen(m Message) {
	if len(m.Entries) > 0 {
		first, last := m.Entries[0].Slot, m.Entries[len(m.Entries)-1].Slot
		if first <= n.hs.Chosen+1 && last > n.hs.Chosen {
			for _, e := range m.Entries[n.hs.Chosen+1-first:] {
				n.log.put(e)
			}
			n.setChosen(last)
			n.followChosen()
		}
	}
	n.replyCaughtUp(m)
}

func (n *Node) replyCaughtUp(m Message) {
	if m.Ballot.IsZero() || m.Ballot.Less(n.hs.Promised) {
		// Sent by an acceptor that refused us a promise, or by a leader we
		// no longer follow: an answer under its ballot would read as an
		// accept below our promise.
		return
	}
	if n.hs.Rebuilding {
		n.sendLearnerReply(m.From, m.Ballot, 0)
		return
	}
	through := n.hs.Chosen
	if n.follow.ballot == m.Ballot {
		through = max(through, n.follow.through)
	}
	n.send(Message{Type: MsgAccepted, To: m.From, Ballot: m.Ballot, Through: through, Chosen: n.hs.Chosen})
}

// sendCatchUp sends to a replica whose chosen index is peerChosen the
// chosen entries that follow it, or streams this replica's snapshot when
// they were compacted away (snapshot.go). ballot is the sender's leader
// ballot, or zero.
func (n *Node) sendCatchUp(to ReplicaID, peerChosen uint64, ballot Ballot) {
	n.sendCatchUpThrough(to, peerChosen, n.hs.Chosen, ballot)
}

// sendCatchUpThrough is sendCatchUp sending no chosen entry past through
// (at most the chosen index).
func (n *Node) sendCatchUpThrough(to ReplicaID, peerChosen, through uint64, ballot Ballot) {
	if peerChosen >= through {
		return
	}
	n.stats.CatchUps++
	es, err := n.log.entries(peerChosen+1, through+1, n.limits.MaxBatchEntries, n.limits.MaxBatchBytes)
	if errors.Is(err, ErrCompacted) {
		n.sendSnapshot(to, peerChosen, ballot)
		return
	}
	if err != nil {
		n.halt(err)
		return
	}
	if len(es) == 0 || es[0].Slot != peerChosen+1 {
		panic("paxos: chosen entries missing from the log")
	}
	n.send(Message{Type: MsgChosen, To: to, Ballot: ballot, Entries: es, Commit: n.hs.Chosen})
}

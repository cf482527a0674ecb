package paxos

// This file holds what a rebuilding replica does: it lost its disk, so it
// may have promised or accepted things it no longer remembers. Following
// "Paxos Made Live", it takes part only as a learner (catch-up from the
// leader) until it has seen a slot chosen under a ballot whose prepare it
// saw after it rejoined. Such a ballot was promised by a quorum without it,
// which intersects any quorum it helped before the loss; from then on it
// promises that ballot and votes as usual.

func (n *Node) stepRebuilding(m Message) {
	if m.Type == MsgPrepare || m.Type == MsgAccept || m.Type == MsgHeartbeat {
		n.rebuildSeen = maxBallot(n.rebuildSeen, m.Ballot)
	}
	switch m.Type {
	case MsgPreVote:
		n.send(Message{Type: MsgPreVoteReply, To: m.From, Ballot: m.Ballot, Reject: true, Promised: n.hs.Promised, Chosen: n.hs.Chosen})
	case MsgPrepare:
		if n.rebuildPrepared.Less(m.Ballot) {
			n.rebuildPrepared = m.Ballot
		}
	case MsgAccept, MsgHeartbeat:
		n.leader = m.From
		n.electionElapsed = 0
		n.sendLearnerReply(m.From, m.Ballot, m.Round)
	case MsgChosen:
		n.onChosen(m)
		n.maybeFinishRebuild(m.Entries)
	case MsgSnapshot:
		n.onSnapshot(m)
	case MsgSnapshotAck:
		n.onSnapshotAck(m)
	}
}

// sendLearnerReply reports a rebuilding replica's chosen index. It is a
// heartbeat reply marked Reject, never a MsgAccepted, which would read as
// a vote. Round is zero when answering a catch-up, so the leader sends the
// next chunk at once.
func (n *Node) sendLearnerReply(to ReplicaID, b Ballot, round uint64) {
	n.send(Message{Type: MsgHeartbeatReply, To: to, Ballot: b, Round: round, Reject: true, Chosen: n.hs.Chosen})
}

// maybeFinishRebuild ends the rebuild once a slot was chosen under a
// ballot prepared after the replica rejoined, and the replica has listened
// for RebuildQuietTicks. It then promises the highest ballot any leader or
// candidate used in a message since it rejoined. The quiet period lets a
// live leader of a higher ballot be heard: a promise given to it before the
// loss is then honoured again. What remains assumed is that no leader
// elected with that lost promise stays silent to this replica for the whole
// period (see DESIGN.md, "Disk loss").
func (n *Node) maybeFinishRebuild(learned []Entry) {
	if n.rebuildPrepared.IsZero() || n.now < rebuildQuietTicks(n.timing) {
		return
	}
	for _, e := range learned {
		if e.Slot <= n.hs.Chosen && !e.Ballot.Less(n.rebuildPrepared) {
			n.hs.Rebuilding = false
			n.hsDirty = true
			n.setPromised(maxBallot(maxBallot(n.hs.Promised, e.Ballot), n.rebuildSeen))
			n.becomeFollower(None)
			return
		}
	}
}

// rebuildQuietTicks is how long a rebuilding replica listens before it may
// vote again: several heartbeat rounds past an election timeout.
func rebuildQuietTicks(t Timing) uint64 {
	return uint64(2*t.ElectionTicks + 4*t.HeartbeatTicks)
}

func maxBallot(a, b Ballot) Ballot {
	if a.Less(b) {
		return b
	}
	return a
}

// rebuildCaughtUp is the leader's side: a rebuilding follower that has
// learned everything chosen before this ballot began can only vote again
// after a new phase 1, so the leader runs one (once per election timeout
// at most). It need not have learned everything chosen since: under
// steady writes its reply, sent after its own sync, always trailed the
// leader by a few slots, no phase 1 ran and it never voted again (found
// in review). What the new ballot chooses reaches it by catch-up.
func (l *leadership) rebuildCaughtUp(n *Node, pr *progress) bool {
	if pr.chosen+1 < l.start || (n.reprepared && n.now-n.reprepareAt < uint64(n.timing.ElectionTicks)) {
		return false
	}
	n.reprepared, n.reprepareAt = true, n.now
	return true
}

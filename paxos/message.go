package paxos

import "fmt"

// MessageType names a protocol message.
type MessageType uint8

const (
	// MsgPreVote asks whether the receiver would promise Ballot; it changes
	// no state. A candidate prepares only after a quorum said yes, so a
	// replica cut off from a live leader cannot disrupt it.
	MsgPreVote MessageType = iota + 1
	// MsgPreVoteReply answers MsgPreVote (Reject set when denied).
	MsgPreVoteReply
	// MsgPrepare is phase 1a: promise Ballot, and report what you accepted
	// from slot Start on.
	MsgPrepare
	// MsgPromise is phase 1b: the promise, with every accepted entry from
	// the prepare's Start on (Reject set when denied).
	MsgPromise
	// MsgAccept is phase 2a: accept Entries (contiguous slots) under Ballot.
	// It also carries the leader's Commit.
	MsgAccept
	// MsgAccepted is phase 2b: the sender accepted every slot from the
	// leader's Start through Through under Ballot.
	MsgAccepted
	// MsgHeartbeat keeps followers from electing, renews the leader's lease
	// (Round numbers the renewal) and carries Commit.
	MsgHeartbeat
	// MsgHeartbeatReply acknowledges a heartbeat round.
	MsgHeartbeatReply
	// MsgNack tells a proposer that the sender promised a higher ballot
	// (Promised).
	MsgNack
	// MsgChosen carries chosen entries to a replica that lacks them
	// (catch-up); the first one is the receiver's Chosen+1.
	MsgChosen
	// MsgSnapshot carries one chunk of a snapshot to a replica whose
	// missing entries were compacted away: bytes [Start, Start+len(Data))
	// of the Last bytes of Snapshot.Data, in transfer Round (see
	// snapshot.go).
	MsgSnapshot
	// MsgSnapshotAck tells the sender of transfer Round that the receiver
	// holds its first Start bytes (all Last of them once installed, or
	// when it needs the snapshot no more); Reject asks it to stop.
	MsgSnapshotAck
	// MsgStepDown tells a follower that the leader of Ballot stepped down
	// (a graceful shutdown) and chose it to succeed: it campaigns once
	// the lease it granted lapses, as after a failure detector's
	// suspicion, instead of waiting out its election timeout.
	MsgStepDown
)

var messageTypeNames = [...]string{
	MsgPreVote:        "PreVote",
	MsgPreVoteReply:   "PreVoteReply",
	MsgPrepare:        "Prepare",
	MsgPromise:        "Promise",
	MsgAccept:         "Accept",
	MsgAccepted:       "Accepted",
	MsgHeartbeat:      "Heartbeat",
	MsgHeartbeatReply: "HeartbeatReply",
	MsgNack:           "Nack",
	MsgChosen:         "Chosen",
	MsgSnapshot:       "Snapshot",
	MsgSnapshotAck:    "SnapshotAck",
	MsgStepDown:       "StepDown",
}

func (t MessageType) String() string {
	if int(t) < len(messageTypeNames) && messageTypeNames[t] != "" {
		return messageTypeNames[t]
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}

// Valid reports whether t is a known message type.
func (t MessageType) Valid() bool { return t >= MsgPreVote && t <= MsgStepDown }

// Message is one protocol message. Fields that a type does not use are zero.
//
// A snapshot transfer (MsgSnapshot, MsgSnapshotAck) reuses fields rather
// than adding its own, to keep one flat message: Round is the transfer's
// id, Start a byte offset into the snapshot's data and Last that data's
// whole length.
type Message struct {
	Type MessageType
	From ReplicaID
	To   ReplicaID
	// Ballot is the proposer's ballot in requests and the ballot answered
	// in replies.
	Ballot Ballot
	// Promised is the sender's promised ballot (MsgNack, rejections).
	Promised Ballot
	// Start is the first slot the leader runs phase 2 for under Ballot
	// (MsgAccept, MsgHeartbeat) or the first slot a prepare asks about. On
	// MsgSnapshot it is the chunk's byte offset in the snapshot's data; on
	// MsgSnapshotAck, how many bytes of it the receiver holds.
	Start uint64
	// Entries are accepted values (MsgPromise), proposals (MsgAccept) or
	// chosen values (MsgChosen), in increasing slot order.
	Entries []Entry
	// Commit is the leader's chosen index.
	Commit uint64
	// Through is the highest slot the sender accepted under Ballot with no
	// gap from Start, or its chosen index if higher (MsgAccepted,
	// MsgHeartbeatReply).
	Through uint64
	// Chosen is the sender's chosen index.
	Chosen uint64
	// Last is, on MsgAccepted, the last slot of the MsgAccept answered; a
	// Through below it tells the leader the follower found a gap. On
	// MsgSnapshot and MsgSnapshotAck it is the length of the snapshot's
	// whole data.
	Last uint64
	// Round numbers heartbeat rounds for the leader's lease; on
	// MsgSnapshot and MsgSnapshotAck it is the transfer's id (non-zero).
	Round uint64
	// Reject marks a denied MsgPreVoteReply or MsgPromise, a
	// MsgHeartbeatReply from a rebuilding replica, which reports its chosen
	// index but casts no vote, and a MsgSnapshotAck refusing a transfer.
	Reject bool
	// Snapshot is set on MsgSnapshot: the snapshot's metadata, and the
	// chunk's bytes as its Data.
	Snapshot *Snapshot
}

func (m Message) String() string {
	s := fmt.Sprintf("%s %d->%d b=%s", m.Type, m.From, m.To, m.Ballot)
	switch m.Type {
	case MsgPrepare, MsgPreVote:
		s += fmt.Sprintf(" start=%d chosen=%d", m.Start, m.Chosen)
	case MsgPromise, MsgPreVoteReply:
		s += fmt.Sprintf(" reject=%t chosen=%d entries=%s", m.Reject, m.Chosen, describeEntries(m.Entries))
		if m.Reject {
			s += fmt.Sprintf(" promised=%s", m.Promised)
		}
	case MsgAccept:
		s += fmt.Sprintf(" start=%d commit=%d entries=%s", m.Start, m.Commit, describeEntries(m.Entries))
	case MsgAccepted:
		s += fmt.Sprintf(" through=%d chosen=%d last=%d", m.Through, m.Chosen, m.Last)
	case MsgHeartbeatReply:
		s += fmt.Sprintf(" through=%d chosen=%d round=%d", m.Through, m.Chosen, m.Round)
	case MsgHeartbeat:
		s += fmt.Sprintf(" start=%d commit=%d round=%d", m.Start, m.Commit, m.Round)
	case MsgNack:
		s += fmt.Sprintf(" promised=%s", m.Promised)
	case MsgChosen:
		s += fmt.Sprintf(" commit=%d entries=%s", m.Commit, describeEntries(m.Entries))
	case MsgSnapshot:
		if m.Snapshot != nil {
			s += fmt.Sprintf(" index=%d id=%d bytes=[%d,%d) of %d", m.Snapshot.Meta.Index, m.Round,
				m.Start, m.Start+uint64(len(m.Snapshot.Data)), m.Last)
		}
	case MsgSnapshotAck:
		s += fmt.Sprintf(" id=%d holds=%d of %d chosen=%d", m.Round, m.Start, m.Last, m.Chosen)
		if m.Reject {
			s += " reject"
		}
	}
	return s
}

func describeEntries(es []Entry) string {
	switch len(es) {
	case 0:
		return "[]"
	case 1:
		return fmt.Sprintf("[%d]", es[0].Slot)
	}
	return fmt.Sprintf("[%d..%d]", es[0].Slot, es[len(es)-1].Slot)
}

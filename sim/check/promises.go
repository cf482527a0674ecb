package check

import (
	"paxcron/paxos"
)

// Promises checks invariant 5, promise safety, from the messages acceptors
// send. A non-rejecting MsgPromise for ballot b, or a MsgNack or rejecting
// MsgPromise reporting Promised b, says the sender promised b; a
// MsgAccepted for b says it accepted under b, which implies a promise of at
// least b. An acceptor that then sends a MsgAccepted or a non-rejecting
// MsgPromise for a lower ballot broke its promise.
//
// The checker's memory outlives the replica's crashes, which is the point:
// a promise whose write was not synced before the reply left is forgotten
// by the replica on a crash, not by the checker.
//
// The rule holds the core to answering a stale MsgAccept with MsgNack,
// never with a MsgAccepted for the stale ballot.
type Promises struct {
	acceptors map[paxos.ReplicaID]promise
}

// promise is the highest ballot an acceptor has committed to in a sent
// message, and the message that did it (for the report).
type promise struct {
	ballot paxos.Ballot
	by     string
}

// NewPromises returns a promise checker that has seen no messages.
func NewPromises() *Promises {
	return &Promises{acceptors: make(map[paxos.ReplicaID]promise)}
}

// Sent checks a message that replica m.From sent, and records the promise
// it makes.
func (p *Promises) Sent(m paxos.Message) error {
	switch {
	case m.Type == paxos.MsgPromise && !m.Reject, m.Type == paxos.MsgAccepted:
		if prev := p.acceptors[m.From]; m.Ballot.Less(prev.ballot) {
			return violation(InvPromiseSafety, "replica %d sent %s for ballot %s after promising ballot %s (in %s)",
				m.From, m.Type, m.Ballot, prev.ballot, prev.by)
		}
		p.raise(m, m.Ballot)
	case m.Type == paxos.MsgPromise, m.Type == paxos.MsgNack:
		p.raise(m, m.Promised)
	}
	return nil
}

func (p *Promises) raise(m paxos.Message, b paxos.Ballot) {
	if prev := p.acceptors[m.From]; prev.ballot.Less(b) {
		p.acceptors[m.From] = promise{ballot: b, by: m.String()}
	}
}

// Promised returns the highest ballot replica r has promised in a message.
func (p *Promises) Promised(r paxos.ReplicaID) paxos.Ballot { return p.acceptors[r].ballot }

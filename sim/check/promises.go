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
//
// A disk loss (DiskLost) forgets an acceptor's promises of its own
// ballots, and only those. Its promise of another's ballot may have let
// that candidate win, and the rebuild must still honour it (DESIGN.md,
// "Disk loss"); its own was given to a candidacy the crash ended, which
// no restart resumes (a new campaign takes a ballot above its promise),
// so nobody relies on it any more.
type Promises struct {
	acceptors map[paxos.ReplicaID]acceptorPromises
}

// acceptorPromises is the highest ballot an acceptor has committed to in a
// sent message, of its own candidacies and of other candidates'.
type acceptorPromises struct {
	own, others promise
}

// highest is the promise the acceptor is held to.
func (a acceptorPromises) highest() promise {
	if a.own.ballot.Less(a.others.ballot) {
		return a.others
	}
	return a.own
}

// promise is a ballot an acceptor committed to, and the message that did
// it (for the report).
type promise struct {
	ballot paxos.Ballot
	by     string
}

// NewPromises returns a promise checker that has seen no messages.
func NewPromises() *Promises {
	return &Promises{acceptors: make(map[paxos.ReplicaID]acceptorPromises)}
}

// Sent checks a message that replica m.From sent, and records the promise
// it makes.
func (p *Promises) Sent(m paxos.Message) error {
	switch {
	case m.Type == paxos.MsgPromise && !m.Reject, m.Type == paxos.MsgAccepted:
		if prev := p.acceptors[m.From].highest(); m.Ballot.Less(prev.ballot) {
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
	a := p.acceptors[m.From]
	kept := &a.others
	if b.Replica == m.From {
		kept = &a.own
	}
	if kept.ballot.Less(b) {
		*kept = promise{ballot: b, by: m.String()}
	}
	p.acceptors[m.From] = a
}

// DiskLost records that replica r lost its disk: from now on it is held
// to its promises of other replicas' ballots only.
func (p *Promises) DiskLost(r paxos.ReplicaID) {
	a := p.acceptors[r]
	a.own = promise{}
	p.acceptors[r] = a
}

// Promised returns the highest ballot replica r has promised in a message.
func (p *Promises) Promised(r paxos.ReplicaID) paxos.Ballot { return p.acceptors[r].highest().ballot }

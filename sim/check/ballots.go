package check

import (
	"fmt"

	"paxcron/paxos"
)

// Ballots checks the ballot discipline that agreement rests on, from the
// messages replicas send:
//
//   - a replica prepares and proposes only under ballots it owns
//     (Ballot.Replica is itself), so no two proposers share a ballot;
//   - a ballot proposes at most one value per slot, across every MsgAccept
//     and every crash and restart of its owner (a leader that forgets it
//     proposed and proposes again under the same ballot breaks Paxos);
//   - an acceptor reports in MsgPromise only values that were proposed
//     under the ballot it reports them with, when that proposal was seen.
//
// A violation here breaks the precondition of agreement, so it is reported
// as invariant 1.
type Ballots struct {
	// proposals maps (slot, ballot) to a summary of the value proposed,
	// which keeps memory small whatever the commands' sizes.
	proposals map[slotBallot]summary
}

type slotBallot struct {
	slot   uint64
	ballot paxos.Ballot
}

// summary stands for a value: a hash to compare it by (a collision could
// hide a violation only with odds of 2^-64) and its head for the report.
type summary struct {
	hash uint64
	kind paxos.EntryKind
	size int
	head []byte
}

func summarize(e paxos.Entry) summary {
	head := e.Data[:min(len(e.Data), maxShownBytes)]
	return summary{hash: valueHash(e), kind: e.Kind, size: len(e.Data), head: append([]byte(nil), head...)}
}

// matches reports whether e carries the value s stands for.
func (s summary) matches(e paxos.Entry) bool {
	return s.kind == e.Kind && s.size == len(e.Data) && s.hash == valueHash(e)
}

func (s summary) String() string {
	if s.kind == paxos.EntryNoop && s.size == 0 {
		return "noop"
	}
	if s.size > len(s.head) {
		return fmt.Sprintf("%s %q...(%d bytes)", s.kind, s.head, s.size)
	}
	return fmt.Sprintf("%s %q", s.kind, s.head)
}

// NewBallots returns a ballot checker that has seen no messages.
func NewBallots() *Ballots {
	return &Ballots{proposals: make(map[slotBallot]summary)}
}

// Sent checks a message that replica m.From sent.
func (b *Ballots) Sent(m paxos.Message) error {
	switch m.Type {
	case paxos.MsgPrepare, paxos.MsgAccept:
		if m.Ballot.Replica != m.From {
			return violation(InvAgreement, "replica %d sent %s under ballot %s, which belongs to replica %d",
				m.From, m.Type, m.Ballot, m.Ballot.Replica)
		}
	}
	switch m.Type {
	case paxos.MsgAccept:
		for _, e := range m.Entries {
			if err := b.proposed(m, e); err != nil {
				return err
			}
		}
	case paxos.MsgPromise:
		for _, e := range m.Entries {
			if err := b.reported(m, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// proposed records a value that m proposes, under m's ballot.
func (b *Ballots) proposed(m paxos.Message, e paxos.Entry) error {
	key := slotBallot{e.Slot, m.Ballot}
	prev, ok := b.proposals[key]
	if !ok {
		b.proposals[key] = summarize(e)
		return nil
	}
	if !prev.matches(e) {
		return violation(InvAgreement, "ballot %s proposed %s at slot %d (replica %d), after proposing %s there",
			m.Ballot, describeValue(e), e.Slot, m.From, prev)
	}
	return nil
}

// reported checks an accepted value an acceptor reports in a promise.
func (b *Ballots) reported(m paxos.Message, e paxos.Entry) error {
	prev, ok := b.proposals[slotBallot{e.Slot, e.Ballot}]
	if ok && !prev.matches(e) {
		return violation(InvAgreement, "replica %d reported in %s that it accepted %s at slot %d, but ballot %s proposed %s there",
			m.From, m.Type, describe(e), e.Slot, e.Ballot, prev)
	}
	return nil
}

// valueHash hashes an entry's kind and data (FNV-1a).
func valueHash(e paxos.Entry) uint64 {
	return fnvBytes(fnvByte(fnvOffset, byte(e.Kind)), e.Data)
}

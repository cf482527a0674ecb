package paxos

import "fmt"

// ReplicaID names one replica of the cluster. Zero is never a valid ID.
type ReplicaID uint64

// None is the zero ReplicaID: no replica (for example, no known leader).
const None ReplicaID = 0

// Ballot orders leadership attempts. Ballots compare by Round, then by
// Replica, so two replicas never share a ballot.
type Ballot struct {
	Round   uint64
	Replica ReplicaID
}

// Less reports whether b orders strictly before o.
func (b Ballot) Less(o Ballot) bool {
	if b.Round != o.Round {
		return b.Round < o.Round
	}
	return b.Replica < o.Replica
}

// IsZero reports whether b is the zero ballot, lower than every real one.
func (b Ballot) IsZero() bool { return b == Ballot{} }

func (b Ballot) String() string { return fmt.Sprintf("%d.%d", b.Round, b.Replica) }

// EntryKind says what a log entry holds.
type EntryKind uint8

const (
	// EntryNoop fills a slot that a new leader found empty in every promise.
	EntryNoop EntryKind = 1
	// EntryCommand carries a command proposed by the application.
	EntryCommand EntryKind = 2
)

func (k EntryKind) String() string {
	switch k {
	case EntryNoop:
		return "noop"
	case EntryCommand:
		return "cmd"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry is a value accepted for one slot of the log, with the ballot under
// which it was accepted. Slots start at 1.
type Entry struct {
	Slot   uint64
	Ballot Ballot
	Kind   EntryKind
	Data   []byte
}

// SameValue reports whether e and o carry the same value (kind and data),
// whatever their ballots.
func (e Entry) SameValue(o Entry) bool {
	return e.Kind == o.Kind && string(e.Data) == string(o.Data)
}

// HardState is the acceptor state that must survive a crash.
type HardState struct {
	// Promised is the highest ballot this acceptor promised (or accepted
	// under). It never accepts or promises a lower one.
	Promised Ballot
	// Chosen is the highest slot such that this replica knows every slot up
	// to it is chosen and holds their values (in its log or its snapshot).
	Chosen uint64
	// Rebuilding marks a replica that lost its disk and rejoined: it has
	// forgotten what it promised and accepted, so it does not vote (it only
	// learns chosen entries) until a ballot prepared after it rejoined has
	// chosen a slot. That ballot is then higher than any it could have
	// promised before (a quorum that did not include it promised it).
	Rebuilding bool
}

// Membership is the set of voting replicas. It is a type of its own so that a
// later reconfiguration can change it through the log.
type Membership struct {
	Voters []ReplicaID
}

// Quorum is the number of votes that make a majority.
func (m Membership) Quorum() int { return len(m.Voters)/2 + 1 }

// Contains reports whether id is a voter.
func (m Membership) Contains(id ReplicaID) bool {
	for _, v := range m.Voters {
		if v == id {
			return true
		}
	}
	return false
}

// SnapshotMeta describes a snapshot: the state machine's state after
// applying every slot up to and including Index.
type SnapshotMeta struct {
	Index      uint64
	Membership Membership
}

// Snapshot is an opaque image of the application state machine.
type Snapshot struct {
	Meta SnapshotMeta
	Data []byte
}

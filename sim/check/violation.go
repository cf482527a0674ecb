package check

import (
	"fmt"
	"strconv"

	"paxcron/paxos"
)

// Invariant numbers an invariant as invariants.md does.
type Invariant int

// The invariants these checkers watch.
const (
	InvAgreement     Invariant = 1
	InvValidity      Invariant = 2
	InvDurability    Invariant = 3
	InvPrefixOrder   Invariant = 4
	InvPromiseSafety Invariant = 5
	InvLiveness      Invariant = 6
	InvAtMostOnce    Invariant = 7
	InvNoSilentSkip  Invariant = 8
	InvLease         Invariant = 9
	InvReplicasAgree Invariant = 10
	InvCorruption    Invariant = 12
	InvDeterminism   Invariant = 13
	// InvClusterID is not in the brief's list (its numbers go to 14):
	// one cluster ID, the same on every replica, never changed.
	InvClusterID Invariant = 15
)

var invariantNames = map[Invariant]string{
	InvAgreement:     "agreement",
	InvValidity:      "validity",
	InvDurability:    "durability",
	InvPrefixOrder:   "prefix order",
	InvPromiseSafety: "promise safety",
	InvLiveness:      "liveness",
	InvAtMostOnce:    "at most once",
	InvNoSilentSkip:  "no silent skip",
	InvLease:         "lease mutual exclusion",
	InvReplicasAgree: "replicas agree",
	InvCorruption:    "corruption never applied",
	InvDeterminism:   "determinism",
	InvClusterID:     "one cluster ID",
}

func (i Invariant) String() string {
	if name, ok := invariantNames[i]; ok {
		return name
	}
	return "invariant(" + strconv.Itoa(int(i)) + ")"
}

// Violation is the error every checker returns: which invariant broke, and
// a description naming the replicas, slots, ballots and values involved.
// Use errors.As to tell a violation from other errors.
type Violation struct {
	Invariant Invariant
	Detail    string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("check: invariant %d (%s) violated: %s", int(v.Invariant), v.Invariant, v.Detail)
}

func violation(inv Invariant, format string, args ...any) *Violation {
	return &Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)}
}

// maxShownBytes bounds how much of a value a violation quotes.
const maxShownBytes = 48

// describe renders an entry's value and ballot for a violation message.
func describe(e paxos.Entry) string {
	return describeValue(e) + " (ballot " + e.Ballot.String() + ")"
}

// describeValue renders an entry's kind and data, quoting at most
// maxShownBytes of the data.
func describeValue(e paxos.Entry) string {
	if e.Kind == paxos.EntryNoop && len(e.Data) == 0 {
		return "noop"
	}
	data := e.Data
	suffix := ""
	if len(data) > maxShownBytes {
		data = data[:maxShownBytes]
		suffix = fmt.Sprintf("...(%d bytes)", len(e.Data))
	}
	return fmt.Sprintf("%s %q%s", e.Kind, data, suffix)
}

// cloneEntry copies e so that the caller may reuse its buffer.
func cloneEntry(e paxos.Entry) paxos.Entry {
	if e.Data != nil {
		e.Data = append([]byte(nil), e.Data...)
	}
	return e
}

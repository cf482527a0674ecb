package check

import (
	"errors"
	"strings"
	"testing"

	"paxcron/paxos"
)

func cmd(slot uint64, round uint64, by paxos.ReplicaID, data string) paxos.Entry {
	return paxos.Entry{Slot: slot, Ballot: paxos.Ballot{Round: round, Replica: by}, Kind: paxos.EntryCommand, Data: []byte(data)}
}

func noop(slot uint64, round uint64, by paxos.ReplicaID) paxos.Entry {
	return paxos.Entry{Slot: slot, Ballot: paxos.Ballot{Round: round, Replica: by}, Kind: paxos.EntryNoop}
}

func b(round uint64, r paxos.ReplicaID) paxos.Ballot { return paxos.Ballot{Round: round, Replica: r} }

// wantOK fails the test on any error.
func wantOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected violation: %v", err)
	}
}

// wantViolation fails the test unless err is a *Violation of inv whose
// message names every one of parts.
func wantViolation(t *testing.T, err error, inv Invariant, parts ...string) {
	t.Helper()
	var v *Violation
	if !errors.As(err, &v) {
		t.Fatalf("want a violation of %s, got %v", inv, err)
	}
	if v.Invariant != inv {
		t.Fatalf("want a violation of %s, got %v", inv, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("violation %q does not mention %q", err, p)
		}
	}
}

// step is one observation in a table test; it returns the checker's answer.
type step func() error

// runSteps runs steps and checks that all but the last pass; the last must
// raise a violation of inv naming parts (or pass, if inv is zero).
func runSteps(t *testing.T, steps []step, inv Invariant, parts ...string) {
	t.Helper()
	for i, s := range steps {
		err := s()
		if i < len(steps)-1 || inv == 0 {
			if err != nil {
				t.Fatalf("step %d: unexpected violation: %v", i, err)
			}
			continue
		}
		wantViolation(t, err, inv, parts...)
	}
}

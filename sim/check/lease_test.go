package check

import (
	"strings"
	"testing"

	"paxcron/paxos"
)

func TestLease(t *testing.T) {
	l := NewLease()
	steps := []struct {
		holders []paxos.ReplicaID
		bad     bool
	}{
		{nil, false},
		{[]paxos.ReplicaID{1}, false},
		{[]paxos.ReplicaID{1}, false},
		{nil, false},
		{[]paxos.ReplicaID{2}, false},
		{[]paxos.ReplicaID{2, 3}, true}, // planted: two holders at once
	}
	for i, s := range steps {
		err := l.Holders(0, s.holders)
		if (err != nil) != s.bad {
			t.Fatalf("step %d (%v): error %v, want violation %t", i, s.holders, err, s.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "invariant 9") {
			t.Fatalf("step %d: wrong report %v", i, err)
		}
	}
}

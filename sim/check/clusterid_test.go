package check

import (
	"errors"
	"testing"

	"paxcron/cron/state"
	"paxcron/paxos"
)

// TestClusterIDs: the checker takes an unnamed state, the one ID on
// every replica and a restart that starts unnamed again; it catches a
// replica holding another ID than the cluster's, and a replica whose ID
// changes, to another or back to none, within one life.
func TestClusterIDs(t *testing.T) {
	a, b := state.ClusterID{0xa}, state.ClusterID{0xb}
	c := NewClusterIDs()
	for _, obs := range []struct {
		id  uint64
		got state.ClusterID
	}{{1, state.ClusterID{}}, {1, a}, {2, state.ClusterID{}}, {2, a}, {1, a}, {3, a}} {
		if err := c.Observe(paxos.ReplicaID(obs.id), obs.got); err != nil {
			t.Fatal(err)
		}
	}
	c.Started(2)
	if err := c.Observe(2, state.ClusterID{}); err != nil {
		t.Fatalf("a restarted replica, unnamed until it applies the ID again: %v", err)
	}
	if c.Named() != a {
		t.Fatalf("Named: %s", c.Named())
	}
	for name, plant := range map[string]func(*ClusterIDs) error{
		"another replica, another ID": func(c *ClusterIDs) error { return c.Observe(2, b) },
		"changed":                     func(c *ClusterIDs) error { return c.Observe(1, b) },
		"unset within a life":         func(c *ClusterIDs) error { return c.Observe(3, state.ClusterID{}) },
	} {
		c := NewClusterIDs()
		_ = c.Observe(1, a)
		_ = c.Observe(3, a)
		var v *Violation
		if err := plant(c); !errors.As(err, &v) || v.Invariant != InvClusterID {
			t.Errorf("%s: %v, want a violation of invariant 15", name, err)
		}
	}
}

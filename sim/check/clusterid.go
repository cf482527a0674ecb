package check

import (
	"paxcron/cron/state"
	"paxcron/paxos"
)

// ClusterIDs checks invariant 15: a cluster has one ID. Every replica's
// cluster ID, once its state holds one, is the one every other replica's
// holds, and it never changes within the replica's life (a restart
// rebuilds the state from the disk, unnamed until it is applied again: a
// replica's record starts over at each start, the cluster's never does).
// The runner feeds it each replica's ID after every slot applied and
// every snapshot restored.
type ClusterIDs struct {
	cluster state.ClusterID
	first   paxos.ReplicaID // the replica it was first seen on
	held    map[paxos.ReplicaID]state.ClusterID
}

// NewClusterIDs returns a checker that has seen nothing.
func NewClusterIDs() *ClusterIDs {
	return &ClusterIDs{held: map[paxos.ReplicaID]state.ClusterID{}}
}

// Started forgets what replica id's state held: it restarted, and
// rebuilds its state from its disk, or from its peers if the disk was
// lost.
func (c *ClusterIDs) Started(id paxos.ReplicaID) { delete(c.held, id) }

// Observe records that replica id's state holds cluster ID got (zero:
// not named yet).
func (c *ClusterIDs) Observe(id paxos.ReplicaID, got state.ClusterID) error {
	prev := c.held[id]
	switch {
	case !prev.IsZero() && got != prev:
		return violation(InvClusterID, "replica %d's cluster ID changed from %s to %q", id, prev, got.String())
	case got.IsZero():
		return nil
	case c.cluster.IsZero():
		c.cluster, c.first = got, id
	case got != c.cluster:
		return violation(InvClusterID, "replica %d holds cluster ID %s, replica %d held %s first", id, got, c.first, c.cluster)
	}
	c.held[id] = got
	return nil
}

// Named returns the cluster's ID, zero if no replica held one yet.
func (c *ClusterIDs) Named() state.ClusterID { return c.cluster }

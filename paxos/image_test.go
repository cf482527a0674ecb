package paxos

import (
	"fmt"
	"strings"
	"testing"
)

// TestSnapshotReadButNotSentIsLetGo: a leader that reads its snapshot to
// catch a peer up, finds it no newer than the peer (the newer snapshot's
// write is still queued) and sends nothing, keeps nothing of it. It used
// to keep the whole image until its next transfer, however much later.
func TestSnapshotReadButNotSentIsLetGo(t *testing.T) {
	c := newTestCluster(t, 3, 1)
	c.elect(1)
	for i := range 25 {
		c.propose(1, fmt.Sprintf("value-%03d", i))
	}
	c.deliver(1<<20, nil)
	c.settle()
	c.crash(3)
	for i := 25; i < 40; i++ {
		c.propose(1, fmt.Sprintf("value-%03d", i))
	}
	c.deliver(1<<20, nil)
	c.settle()
	leader := c.replicas[1]
	// The store holds a snapshot at 20; the core was told of a newer one,
	// whose write has not landed yet.
	leader.storage.compact(20, 20, []byte(strings.Join(leader.applied[:20], ",")), c.members)
	index := uint64(len(leader.applied))
	leader.node.Compacted(index, index)
	c.restart(3)
	c.settle()
	if leader.node.Stats().CatchUps == 0 {
		t.Fatalf("no catch-up tried:\n%s", c.describe())
	}
	c.crash(3)
	c.run(10 * c.timing.ElectionTicks)
	if len(leader.node.sends) == 0 && leader.node.image != nil {
		t.Fatalf("no transfer runs, yet the leader holds the snapshot at %d", leader.node.image.Meta.Index)
	}
}

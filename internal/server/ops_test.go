package server

// The day-two procedures an operator performs on a running cluster, each
// walked through end to end while launches are due.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"paxcron/internal/api"
	"paxcron/paxos"
)

// restartGracefully stops replica id as SIGTERM does (Shutdown: a leader
// drains and hands over) and starts it again on its data folder, on new
// ports (every replica is told, as gossip would); it returns once the
// replica applied what the cluster had chosen when it came back, as an
// operator waits on `paxcron operator status` before the next replica.
func (c *cluster) restartGracefully(id paxos.ReplicaID) {
	c.t.Helper()
	if err := c.servers[id-1].Shutdown(context.Background()); err != nil {
		c.t.Fatalf("shutting replica %d down: %v", id, err)
	}
	c.servers[id-1] = nil
	lead := c.leader() // another replica leads, the old leader handed over
	target := c.servers[lead-1].Node().Status().Applied
	c.start(id, false)
	eventually(c.t, fmt.Sprintf("replica %d to catch up to index %d", id, target), func() bool {
		return c.servers[id-1].Node().Status().Applied >= target
	})
}

// checkEverySecondOnce checks that every second from the first launch of
// job to its last has exactly one child and was dispatched once: none
// doubled, none missed.
func (c *cluster) checkEverySecondOnce(job string) {
	c.t.Helper()
	if rep := c.nomad.Repeated(); len(rep) > 0 {
		c.t.Errorf("dispatched more than once: %v", rep)
	}
	var secs []int64
	for identity := range c.nomad.Children() {
		s, ok := strings.CutPrefix(identity, job+"-")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			c.t.Fatalf("identity %q", identity)
		}
		secs = append(secs, n)
	}
	slices.Sort(secs)
	if len(secs) == 0 {
		c.t.Fatal("no launch")
	}
	var missed []int64
	for i := 1; i < len(secs); i++ {
		for s := secs[i-1] + 1; s < secs[i]; s++ {
			missed = append(missed, s)
		}
	}
	if len(missed) > 0 {
		c.t.Errorf("seconds missed between %d and %d: %v", secs[0], secs[len(secs)-1], missed)
	}
}

// A rolling restart (the upgrade path): every replica stopped gracefully
// and started again, one at a time, the leader last or first. Launches go
// on throughout; none is doubled or missed.
func TestRollingRestartNeitherDoublesNorMisses(t *testing.T) {
	for _, leaderFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("leader first %v", leaderFirst), func(t *testing.T) {
			c := startCluster(t)
			leader := c.leader()
			if _, err := c.client(leader, writeToken).PutJobs(context.Background(), everySecond("tick")); err != nil {
				t.Fatal(err)
			}
			c.waitChildren(2)
			order := []paxos.ReplicaID{leader%3 + 1, (leader+1)%3 + 1, leader}
			if leaderFirst {
				order = []paxos.ReplicaID{leader, leader%3 + 1, (leader+1)%3 + 1}
			}
			for _, id := range order {
				c.restartGracefully(id)
				c.waitChildren(len(c.nomad.Children()) + 2)
			}
			// Launches the restarts delayed are caught up: wait for a few more.
			c.waitChildren(len(c.nomad.Children()) + 3)
			c.checkEverySecondOnce("tick")
			st, err := c.client(c.leader(), readToken).Job(context.Background(), "tick", 0, api.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range st.History {
				if l.Outcome != "dispatched" {
					t.Errorf("launch %s concluded %s (%s)", l.Identity, l.Outcome, l.Reason)
				}
			}
		})
	}
}

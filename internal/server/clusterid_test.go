package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"paxcron/cron/state"
	"paxcron/paxos"
)

// namedAlike waits until every running replica of c holds one cluster
// ID, and returns it.
func (c *cluster) namedAlike() state.ClusterID {
	c.t.Helper()
	var id state.ClusterID
	eventually(c.t, "every replica to hold one cluster ID", func() bool {
		id = state.ClusterID{}
		for _, s := range c.servers {
			if s == nil {
				continue
			}
			got := s.ClusterID()
			if got.IsZero() || !id.IsZero() && got != id {
				return false
			}
			id = got
		}
		return true
	}, func() string {
		var ids []string
		for _, s := range c.servers {
			if s != nil {
				ids = append(ids, fmt.Sprintf("%d:%q", s.cfg.ID, s.ClusterID().String()))
			}
		}
		return strings.Join(ids, " ")
	})
	return id
}

// A cluster started with -bootstrap is named once, the same ID on all
// three replicas and in their status; a restart keeps it (read from the
// store before any handshake), and a replica whose disk is lost rejoins
// and learns it from its peers, saying so once.
func TestClusterIsNamedOnceAndKept(t *testing.T) {
	logs := map[paxos.ReplicaID]*syncBuffer{1: {}, 2: {}, 3: {}}
	c := startClusterWith(t, func(cfg *Config) { cfg.Logger = slog.New(slog.NewTextHandler(logs[cfg.ID], nil)) })
	ctx := context.Background()
	id := c.namedAlike()
	for _, s := range c.servers {
		st, err := c.client(s.cfg.ID, readToken).Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.ClusterID != id.String() {
			t.Errorf("replica %d's status says cluster %q, want %s", s.cfg.ID, st.ClusterID, id)
		}
		if page := httpDo(t, "GET", "http://"+s.HTTPAddr()+"/", readToken, "", nil); !strings.Contains(page.body, id.String()) {
			t.Errorf("replica %d's status page does not show the cluster ID", s.cfg.ID)
		}
	}
	leader := c.leader()
	c.putEverySecond(leader, "tick")
	c.waitChildren(2)

	restarted := leader%3 + 1
	c.servers[restarted-1].Close()
	c.servers[restarted-1] = nil
	c.start(restarted, false)
	if got := c.servers[restarted-1].ClusterID(); got != id {
		t.Fatalf("restarted, replica %d holds cluster ID %q at start, want %s", restarted, got.String(), id)
	}

	lost := 6 - leader - restarted
	c.servers[lost-1].Close()
	c.servers[lost-1] = nil
	c.dirs[lost-1] = t.TempDir() // the disk is gone
	logs[lost] = &syncBuffer{}
	c.start(lost, false)
	if got := c.servers[lost-1].ClusterID(); !got.IsZero() {
		t.Fatalf("a replica on an empty disk holds cluster ID %s before it caught up", got)
	}
	if got := c.namedAlike(); got != id {
		t.Fatalf("after a restart and a lost disk the cluster is named %s, was %s", got, id)
	}
	eventually(t, "the rebuilt replica to log the ID it learned", func() bool {
		return strings.Contains(logs[lost].String(), "cluster ID learned") && strings.Contains(logs[lost].String(), id.String())
	})
	if n := strings.Count(logs[lost].String(), "cluster ID learned"); n != 1 {
		t.Errorf("the rebuilt replica logged the ID learned %d times", n)
	}
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
}

// A replica started on another cluster's data folder: clusters A and B
// share the cluster key and the member IDs (a key file copied from
// staging to production). One of A's replicas is stopped and its folder
// replaced by a copy of B's replica's; started, it is refused by A's
// other replicas and refuses them, each logging both cluster IDs, and A
// goes on launching with no launch doubled or missed.
func TestReplicaOfAnotherClusterIsRefused(t *testing.T) {
	logs := map[paxos.ReplicaID]*syncBuffer{1: {}, 2: {}, 3: {}}
	a := startClusterWith(t, func(cfg *Config) { cfg.Logger = slog.New(slog.NewTextHandler(logs[cfg.ID], nil)) })
	b := startCluster(t)
	idA, idB := a.namedAlike(), b.namedAlike()
	if idA == idB {
		t.Fatalf("two clusters drew one ID, %s", idA)
	}
	leader := a.leader()
	a.putEverySecond(leader, "tick")
	b.putEverySecond(b.leader(), "other")
	a.waitChildren(2)
	b.waitChildren(2)

	victim := leader%3 + 1
	for i, s := range b.servers {
		s.Close()
		b.servers[i] = nil
	}
	a.servers[victim-1].Close()
	a.servers[victim-1] = nil
	a.dirs[victim-1] = t.TempDir()
	if err := os.CopyFS(a.dirs[victim-1], os.DirFS(b.dirs[victim-1])); err != nil {
		t.Fatal(err)
	}
	a.start(victim, false)
	if got := a.servers[victim-1].ClusterID(); got != idB {
		t.Fatalf("started on B's folder, replica %d holds cluster ID %q, want B's %s", victim, got.String(), idB)
	}
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		eventually(t, fmt.Sprintf("replica %d's log to name both clusters in a refusal", id), func() bool {
			for _, line := range strings.Split(logs[id].String(), "\n") {
				if strings.Contains(line, "a replica-to-replica connection was refused") &&
					strings.Contains(line, idA.String()) && strings.Contains(line, idB.String()) && strings.Contains(line, "data_dir=") {
					return true
				}
			}
			return false
		})
	}
	applied := a.servers[victim-1].Node().Status().Applied
	before := len(a.nomad.Children())
	a.waitChildren(before + 3)
	a.putEverySecond(a.leader(), "during") // a quorum of A's own two
	a.waitChildren(len(a.nomad.Children()) + 2)
	if st := a.servers[victim-1].Node().Status(); st.Applied != applied || st.ClusterID != idB {
		t.Errorf("the replica of cluster B applied %d -> %d (cluster %s): it learned from cluster A", applied, st.Applied, st.ClusterID)
	}
	for _, s := range a.servers {
		if s != nil && s.cfg.ID != victim && s.ClusterID() != idA {
			t.Errorf("replica %d of cluster A now holds %s", s.cfg.ID, s.ClusterID())
		}
	}
	a.checkEverySecondOnce("tick")
	t.Logf("replica %d's log:\n%s", victim, logs[victim])
}

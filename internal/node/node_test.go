package node

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"paxcron/cron/replica"
	"paxcron/paxos"
	"paxcron/storage/memstore"
)

// trio wires three nodes on in-memory stores through Deliver.
func trio(t *testing.T, cfg func(*Config)) []*Node {
	t.Helper()
	members := paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}
	nodes := make([]*Node, 3)
	send := func(m paxos.Message) {
		if m.To >= 1 && int(m.To) <= len(nodes) {
			nodes[m.To-1].Deliver(m)
		}
	}
	for i := range nodes {
		c := Config{
			ID: paxos.ReplicaID(i + 1), Membership: members, Store: memstore.New(), Send: send,
			TickInterval: 10 * time.Millisecond, Timing: paxos.DefaultTiming(), Limits: paxos.DefaultLimits(),
			Snapshots: replica.SnapshotPolicy{EveryEntries: 50, TailEntries: 10},
		}
		if cfg != nil {
			cfg(&c)
		}
		n, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	for _, n := range nodes {
		n.Start()
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Stop()
		}
	})
	return nodes
}

// leaderOf waits, in fake time, until one node says it leads.
func leaderOf(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	for range 1000 {
		for _, n := range nodes {
			if n.Status().Role == paxos.Leader {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader after 10 s")
	return nil
}

func TestProposeAppliesEverywhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := trio(t, nil)
		leader := leaderOf(t, nodes)
		ctx := context.Background()
		for i := range 120 {
			if err := leader.Propose(ctx, []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		// Propose returns once the command is applied, but Status is
		// published at the end of the loop's turn: wait for it.
		for leader.Status().Commands < 120 {
			time.Sleep(10 * time.Millisecond)
		}
		want := leader.Status()
		for _, n := range nodes {
			for n.Status().Applied < want.Applied {
				time.Sleep(10 * time.Millisecond)
			}
			if s := n.Status(); s.Commands != 120 || (s.Applied == want.Applied && s.Hash != want.Hash) {
				t.Errorf("replica %d: %d commands, hash %x; leader %x", s.ID, s.Commands, s.Hash, want.Hash)
			}
		}
		if s := leader.Status(); s.SnapshotIndex == 0 || s.Lease <= 0 || s.Saves == 0 {
			t.Errorf("leader status %+v: want a snapshot, a lease and saves", s)
		}
		follower := nodes[leader.ID()%3]
		if err := follower.Propose(ctx, []byte("x")); !errors.Is(err, paxos.ErrNotLeader) {
			t.Errorf("propose on a follower: %v, want paxos.ErrNotLeader", err)
		}
		if err := leader.Cron(ctx, nil); !errors.Is(err, ErrNotCron) {
			t.Errorf("Cron outside cron mode: %v, want ErrNotCron", err)
		}
	})
}

// A suspicion of the leader makes a follower campaign at once, without
// waiting out its election timeout; the acceptors' leases still hold.
func TestReportSuspectCampaigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Elections after 1-2 s of silence, a lease of 200 ms.
		nodes := trio(t, func(c *Config) {
			c.Timing = paxos.Timing{HeartbeatTicks: 4, ElectionTicks: 100, LeaseTicks: 20, MaxClockDriftPPM: 10_000}
		})
		leader := leaderOf(t, nodes)
		leader.Stop()
		follower := nodes[leader.ID()%3]
		if err := follower.ReportSuspect(context.Background(), leader.ID()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for follower.Status().Role != paxos.Leader && nodes[follower.ID()%3].Status().Role != paxos.Leader {
			time.Sleep(10 * time.Millisecond)
		}
		// Without the suspicion no one would campaign for a second.
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("a new leader after %v", took)
		}
	})
}

func TestStopFailsPendingAndLaterCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := trio(t, nil)
		leader := leaderOf(t, nodes)
		leader.Stop()
		<-leader.Done()
		if err := leader.Propose(context.Background(), []byte("x")); !errors.Is(err, ErrStopped) {
			t.Errorf("Propose after Stop: %v, want ErrStopped", err)
		}
		if err := leader.Call(context.Background(), func(*replica.Replica) {}); !errors.Is(err, ErrStopped) {
			t.Errorf("Call after Stop: %v, want ErrStopped", err)
		}
		if s := leader.Status(); !errors.Is(s.Err, ErrStopped) {
			t.Errorf("status error %v, want ErrStopped", s.Err)
		}
	})
}

func TestDeliverDropsWhenFull(t *testing.T) {
	n, err := New(Config{
		ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}, Store: memstore.New(),
		Send: func(paxos.Message) {}, TickInterval: time.Millisecond, Timing: paxos.DefaultTiming(),
		Limits: paxos.DefaultLimits(), InboxMessages: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop() // never started: returns at once
	for range 5 {
		n.Deliver(paxos.Message{Type: paxos.MsgHeartbeat, From: 2, To: 1})
	}
	if got := n.Dropped(); got != 3 {
		t.Errorf("dropped %d of 5 into an inbox of 2, want 3", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	ok := Config{
		ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1}}, Store: memstore.New(),
		Send: func(paxos.Message) {}, TickInterval: time.Millisecond, Timing: paxos.DefaultTiming(),
		Limits: paxos.DefaultLimits(),
	}
	for name, mutate := range map[string]func(*Config){
		"no ID":           func(c *Config) { c.ID = 0 },
		"ID over 16 bits": func(c *Config) { c.ID = MaxReplicaID + 1 },
		"no store":        func(c *Config) { c.Store = nil },
		"no send":         func(c *Config) { c.Send = nil },
		"no tick":         func(c *Config) { c.TickInterval = 0 },
		"negative inbox":  func(c *Config) { c.InboxMessages = -1 },
		"cron without a dispatcher": func(c *Config) {
			c.Cron = &CronOptions{}
		},
	} {
		c := ok
		mutate(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// Found in review: a node stopped before it was started is stopped: Done closes, its
// status says ErrStopped, and Propose and Call fail with ErrStopped
// rather than wait forever for a loop that will never run.
func TestStopBeforeStartStops(t *testing.T) {
	n, err := New(Config{
		ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}, Store: memstore.New(),
		Send: func(paxos.Message) {}, TickInterval: time.Millisecond, Timing: paxos.DefaultTiming(),
		Limits: paxos.DefaultLimits(),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Stop()
	select {
	case <-n.Done():
	case <-time.After(time.Second):
		t.Error("Done not closed after Stop")
	}
	if s := n.Status(); !errors.Is(s.Err, ErrStopped) {
		t.Errorf("status error %v, want ErrStopped", s.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := n.Propose(ctx, []byte("x")); !errors.Is(err, ErrStopped) {
		t.Errorf("Propose after Stop: %v, want ErrStopped", err)
	}
	if err := n.Call(ctx, func(*replica.Replica) {}); !errors.Is(err, ErrStopped) {
		t.Errorf("Call after Stop: %v, want ErrStopped", err)
	}
}

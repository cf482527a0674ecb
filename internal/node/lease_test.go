package node

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"paxcron/paxos"
	"paxcron/storage/memstore"
)

// TestLeaseGrantedAfterAStallCountsFromNow: a follower whose loop stalled
// (a slow Save, a GC pause) and then takes a leader's heartbeat before
// the ticker's input must count the lease it grants from now, not from
// the tick its clock stood at before the stall. Counted from there, the
// lease had run out by the time the follower's clock caught up, and it
// promised another candidate at once, while the leader, counting from
// its send, held the lease for most of LeaseTicks more: two leaders.
func TestLeaseGrantedAfterAStallCountsFromNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sent []paxos.Message
		n, err := New(Config{
			ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}, Store: memstore.New(),
			Send: func(m paxos.Message) {
				mu.Lock()
				sent = append(sent, m)
				mu.Unlock()
			},
			TickInterval: 10 * time.Millisecond,
			// Elections only after 10 s of silence: replica 1 stays a
			// follower; a lease of 200 ms.
			Timing: paxos.Timing{HeartbeatTicks: 4, ElectionTicks: 1000, LeaseTicks: 20, MaxClockDriftPPM: 10_000},
			Limits: paxos.DefaultLimits(),
		})
		if err != nil {
			t.Fatal(err)
		}
		n.Start()
		defer n.Stop()
		time.Sleep(50 * time.Millisecond)
		ctx := context.Background()
		// The loop stalls for a second; the heartbeat of leader 2 is the
		// first input it takes after the stall.
		if err := n.call(ctx, func() {
			time.Sleep(time.Second)
			n.step(paxos.Message{Type: paxos.MsgHeartbeat, From: 2, To: 1, Ballot: paxos.Ballot{Round: 1, Replica: 2}, Start: 1, Round: 1})
		}); err != nil {
			t.Fatal(err)
		}
		// 20 ms later, well within the lease granted to 2, replica 3
		// asks for a promise.
		time.Sleep(20 * time.Millisecond)
		if err := n.call(ctx, func() {
			n.step(paxos.Message{Type: paxos.MsgPrepare, From: 3, To: 1, Ballot: paxos.Ballot{Round: 2, Replica: 3}, Start: 1})
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range sent {
			if m.Type == paxos.MsgPromise && m.To == 3 && !m.Reject {
				t.Fatalf("promised replica 3 20 ms after granting replica 2 a lease of 200 ms: %+v", m)
			}
		}
	})
}

// TestSnapshotReadNotAskedForIsLetGoByTheNode: the node's ticks age a
// snapshot read the core did not come back for, as replica.Tick does. The
// node fed its ticks to the core alone, so such a read stayed in memory
// (a whole snapshot) until the next catch-up, however much later, which
// then sent it stale: older than the replica's newest snapshot.
func TestSnapshotReadNotAskedForIsLetGoByTheNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var snaps []paxos.Message
		nodes := trio(t, func(c *Config) {
			send := c.Send
			c.Send = func(m paxos.Message) {
				if m.Type == paxos.MsgSnapshot {
					mu.Lock()
					snaps = append(snaps, m)
					mu.Unlock()
				}
				send(m)
			}
		})
		leader := leaderOf(t, nodes)
		ctx := context.Background()
		propose := func(k int) {
			for i := range k {
				if err := leader.Propose(ctx, []byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		follower := nodes[leader.ID()%3]
		// Snapshots follow the follower's applied batches, so how many
		// commands bring one to 100 varies: propose until one does.
		untilSnapshotPast := func(index uint64) {
			for tries := 0; follower.Status().SnapshotIndex < index; tries++ {
				if tries == 100 {
					t.Fatalf("the follower's snapshot is at %d after 100 rounds of proposals, want %d", follower.Status().SnapshotIndex, index)
				}
				propose(10)
				time.Sleep(20 * time.Millisecond)
			}
		}
		untilSnapshotPast(100)
		// A peer far behind asks for a pre-vote: the follower refuses it
		// and starts reading its snapshot to catch it up. Nobody asks again.
		peer := nodes[(leader.ID()+1)%3].ID()
		preVote := paxos.Message{Type: paxos.MsgPreVote, From: peer, To: follower.ID(), Ballot: paxos.Ballot{Round: 1 << 20, Replica: peer}, Start: 1}
		if err := follower.call(ctx, func() { follower.step(preVote) }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		first := follower.Status().SnapshotIndex
		// Much later, after newer snapshots, the same ask.
		propose(200)
		untilSnapshotPast(first + 1)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		newest := follower.Status().SnapshotIndex
		mu.Lock()
		snaps = nil
		mu.Unlock()
		if err := follower.call(ctx, func() { follower.step(preVote) }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range snaps {
			if m.From == follower.ID() && m.Snapshot.Meta.Index < newest {
				t.Fatalf("sent the snapshot at %d, read long before; the newest is at %d", m.Snapshot.Meta.Index, newest)
			}
		}
	})
}

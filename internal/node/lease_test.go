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

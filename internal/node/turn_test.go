package node

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"paxcron/cron/replica"
	"paxcron/paxos"
	"paxcron/storage/memstore"
)

// TestSlowTurnsReported: a turn of the loop as long as SlowTurn is
// reported with where its time went, the input that woke the loop
// included; a shorter one is not. LongestTurn counts that input too.
func TestSlowTurnsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var turns []Turn
		nodes := trio(t, func(c *Config) {
			c.SlowTurn = 200 * time.Millisecond
			c.OnSlowTurn = func(tn Turn) {
				mu.Lock()
				turns = append(turns, tn)
				mu.Unlock()
			}
		})
		reported := func() []Turn {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return append([]Turn(nil), turns...)
		}
		ctx := context.Background()
		n := nodes[0]
		if err := n.Call(ctx, func(*replica.Replica) { time.Sleep(150 * time.Millisecond) }); err != nil {
			t.Fatal(err)
		}
		if got := reported(); len(got) != 0 {
			t.Fatalf("a 150 ms turn reported as slow (SlowTurn 200 ms): %v", got)
		}
		if err := n.Call(ctx, func(*replica.Replica) { time.Sleep(300 * time.Millisecond) }); err != nil {
			t.Fatal(err)
		}
		got := reported()
		if len(got) != 1 {
			t.Fatalf("%d slow turns reported, want the one: %v", len(got), got)
		}
		tn := got[0]
		if tn.Woke != InputCall || tn.First < 300*time.Millisecond || tn.Took != tn.First+tn.Drain+tn.Process+tn.Launcher {
			t.Fatalf("turn %+v: want woken by a call that took 300 ms, its phases adding up to the whole", tn)
		}
		if !strings.Contains(tn.String(), "woken by call") || InputCall.String() != "call" || Input(99).String() != "input(99)" {
			t.Fatalf("turn %q, inputs %q and %q", tn.String(), InputCall, Input(99))
		}
		for range 100 {
			if n.Status().LongestTurn >= 300*time.Millisecond {
				return
			}
			time.Sleep(10 * time.Millisecond) // published at the end of the turn
		}
		t.Fatalf("LongestTurn %v after a 300 ms turn", n.Status().LongestTurn)
	})
}

// TestRestartAppliesItsLogInBoundedTurns: a replica restarted with a long
// log to apply takes it in turns of at most MaxApplyPerTurn entries (give
// or take one Ready's, which the node lowers to a quarter of the bound),
// not in one long turn, and still applies it all.
func TestRestartAppliesItsLogInBoundedTurns(t *testing.T) {
	store := memstore.New()
	limits := paxos.DefaultLimits() // Readys of 4,096 entries, lowered by the node
	cfg := Config{
		ID: 1, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1}}, Store: store,
		Send: func(paxos.Message) {}, TickInterval: 10 * time.Millisecond, Timing: paxos.DefaultTiming(), Limits: limits,
	}
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first.Start()
	leaderOf(t, []*Node{first})
	ctx := context.Background()
	const commands = 1000
	for i := 0; i < commands; {
		err := first.Propose(ctx, []byte{byte(i), byte(i >> 8)})
		if errors.Is(err, paxos.ErrNotLeader) || errors.Is(err, ErrDropped) {
			// A loop starved for longer than its lease (CI under -race
			// with other work) stands down and is elected again: both
			// errors say the command was not applied, so it goes again.
			leaderOf(t, []*Node{first})
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		i++
	}
	// Status is published at the end of a turn, which may come after
	// Propose returned: a stale want would let the wait below end at an
	// intermediate turn of the restarted node (CI saw 999 of 1,000).
	want := first.Status()
	for deadline := time.Now().Add(10 * time.Second); want.Commands < commands; want = first.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("the first node published %d commands of %d", want.Commands, commands)
		}
		time.Sleep(time.Millisecond)
	}
	first.Stop()

	var mu sync.Mutex
	var turns []Turn
	cfg.MaxApplyPerTurn = 50
	cfg.SlowTurn = time.Nanosecond // every turn is heard
	cfg.OnSlowTurn = func(tn Turn) {
		mu.Lock()
		turns = append(turns, tn)
		mu.Unlock()
	}
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again.Start()
	defer again.Stop()
	for again.Status().Applied < want.Applied {
		time.Sleep(10 * time.Millisecond)
	}
	if s := again.Status(); s.Commands != commands || s.Hash != want.Hash {
		t.Fatalf("restarted: %d commands, hash %x; want %d, %x", s.Commands, s.Hash, commands, want.Hash)
	}
	mu.Lock()
	defer mu.Unlock()
	var most uint64
	workLeft := 0
	for _, tn := range turns {
		most = max(most, tn.Applied)
		if tn.Woke == InputWorkLeft {
			workLeft++
		}
	}
	// Completed writes wake some of the turns, the work left the others.
	if most > 50+12 || len(turns) < commands/(50+12) || workLeft == 0 {
		t.Fatalf("at most %d entries applied in a turn (want at most 62), %d turns woken by work left of %d", most, workLeft, len(turns))
	}
}

package simnet

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"paxcron/paxos"
	"paxcron/sim/simclock"
)

// arrival is one delivered message and when it arrived.
type arrival struct {
	at  time.Duration
	msg paxos.Message
}

// harness is a network over a fresh scheduler that records deliveries.
type harness struct {
	sched *simclock.Scheduler
	net   *Network
	got   []arrival
}

func newHarness(t testing.TB, seed uint64, cfg Config) *harness {
	t.Helper()
	h := &harness{sched: simclock.NewScheduler()}
	net, err := New(h.sched, rand.New(rand.NewPCG(seed, 0)), cfg, func(m paxos.Message) {
		h.got = append(h.got, arrival{h.sched.Now(), m})
	})
	if err != nil {
		t.Fatal(err)
	}
	h.net = net
	return h
}

func (h *harness) drain() {
	for h.sched.Step() {
	}
}

func msg(from, to paxos.ReplicaID, round uint64) paxos.Message {
	return paxos.Message{Type: paxos.MsgHeartbeat, From: from, To: to, Round: round}
}

// perfectConfig is a network with a fixed delay and no faults.
func perfectConfig() Config {
	return Config{DelayBase: time.Millisecond, MaxInFlightMessages: 1 << 20}
}

// sendAll sends n messages round-robin between three replicas, one every
// 100 µs of simulated time, skipping senders that are down.
func sendAll(h *harness, n int) {
	for i := range n {
		from := paxos.ReplicaID(i%3 + 1)
		to := paxos.ReplicaID((i+1)%3 + 1)
		h.sched.At(time.Duration(i)*100*time.Microsecond, func() {
			if h.net.Up(from) {
				h.net.Send(msg(from, to, uint64(i)))
			}
		})
	}
	h.drain()
}

func TestDeterministicForASeed(t *testing.T) {
	run := func(seed uint64) ([]arrival, Stats) {
		h := newHarness(t, seed, DefaultLossyConfig())
		sendAll(h, 5000)
		return h.got, h.net.Stats()
	}
	got1, stats1 := run(42)
	got2, stats2 := run(42)
	if stats1 != stats2 {
		t.Fatalf("same seed, different stats:\n%+v\n%+v", stats1, stats2)
	}
	if !slices.EqualFunc(got1, got2, func(a, b arrival) bool { return a.at == b.at && a.msg.String() == b.msg.String() }) {
		t.Fatal("same seed, different delivery order")
	}
	got3, stats3 := run(43)
	if stats3 == stats1 && len(got3) == len(got1) && got3[0].at == got1[0].at {
		t.Fatal("different seeds produced the same run")
	}
}

func TestStatsAccountForEveryMessage(t *testing.T) {
	cfg := DefaultLossyConfig()
	h := newHarness(t, 1, cfg)
	h.net.Partition([]paxos.ReplicaID{1}, []paxos.ReplicaID{2})
	h.sched.At(200*time.Millisecond, func() { h.net.SetUp(3, false) })
	sendAll(h, 10_000)
	s := h.net.Stats()
	out := s.Delivered + s.DroppedLoss + s.DroppedPartition + s.DroppedDown + s.DroppedOverflow
	if s.Sent+s.Duplicated != out {
		t.Fatalf("sent %d + duplicated %d != accounted %d: %+v", s.Sent, s.Duplicated, out, s)
	}
	if s.Delivered != uint64(len(h.got)) || h.net.InFlight() != 0 {
		t.Fatalf("Delivered %d, callback saw %d, in flight %d", s.Delivered, len(h.got), h.net.InFlight())
	}
	for _, c := range []struct {
		name string
		n    uint64
	}{{"loss", s.DroppedLoss}, {"partition", s.DroppedPartition}, {"down", s.DroppedDown},
		{"duplicate", s.Duplicated}, {"tail", s.DelayedTail}, {"reorder", s.Reordered}} {
		if c.n == 0 {
			t.Errorf("fault %s never injected: %+v", c.name, s)
		}
	}
}

// within reports whether got is within 5 standard deviations of the
// binomial mean n*p.
func within(got uint64, n int, p float64) bool {
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(got)-mean) <= 5*sd
}

func TestFaultRates(t *testing.T) {
	const n = 100_000
	cfg := perfectConfig()
	cfg.LossProbability = 0.1
	cfg.DuplicateProbability = 0.05
	cfg.DelayTailProbability = 0.02
	cfg.DelayTailMin, cfg.DelayTailMax = 10*time.Millisecond, 20*time.Millisecond
	h := newHarness(t, 9, cfg)
	sendAll(h, n)
	s := h.net.Stats()
	kept := n - int(s.DroppedLoss)
	copies := kept + int(s.Duplicated)
	for _, c := range []struct {
		name   string
		got    uint64
		trials int
		p      float64
	}{
		{"loss", s.DroppedLoss, n, cfg.LossProbability},
		{"duplicate", s.Duplicated, kept, cfg.DuplicateProbability},
		{"tail", s.DelayedTail, copies, cfg.DelayTailProbability},
	} {
		if !within(c.got, c.trials, c.p) {
			t.Errorf("%s: %d of %d, want about %.0f", c.name, c.got, c.trials, float64(c.trials)*c.p)
		}
	}
}

func TestDelayBounds(t *testing.T) {
	cfg := perfectConfig()
	cfg.DelayJitterKind = JitterUniform
	cfg.DelayJitter = 2 * time.Millisecond
	h := newHarness(t, 3, cfg)
	h.net.Send(msg(1, 2, 0))
	var sendAt []time.Duration
	for i := range 1000 {
		at := time.Duration(i) * time.Millisecond
		sendAt = append(sendAt, at)
		h.sched.At(at, func() { h.net.Send(msg(1, 2, uint64(i+1))) })
	}
	h.drain()
	var minD, maxD time.Duration = time.Hour, 0
	for _, a := range h.got[1:] {
		d := a.at - sendAt[a.msg.Round-1]
		minD, maxD = min(minD, d), max(maxD, d)
	}
	if minD < cfg.DelayBase || maxD >= cfg.DelayBase+cfg.DelayJitter {
		t.Fatalf("delays in [%v, %v], want within [1ms, 3ms)", minD, maxD)
	}
	if maxD-minD < cfg.DelayJitter/2 {
		t.Fatalf("uniform jitter barely spread: [%v, %v]", minD, maxD)
	}
}

func TestReordering(t *testing.T) {
	rounds := func(cfg Config) (order []uint64, reordered uint64) {
		h := newHarness(t, 5, cfg)
		for i := range 200 {
			h.sched.At(time.Duration(i)*100*time.Microsecond, func() { h.net.Send(msg(1, 2, uint64(i))) })
		}
		h.drain()
		for _, a := range h.got {
			order = append(order, a.msg.Round)
		}
		return order, h.net.Stats().Reordered
	}
	fifo, n := rounds(perfectConfig())
	if !slices.IsSorted(fifo) || n != 0 {
		t.Fatalf("fixed delay reordered messages (%d): %v", n, fifo)
	}
	cfg := perfectConfig()
	cfg.DelayJitterKind = JitterExponential
	cfg.DelayJitter = time.Millisecond
	jittered, n := rounds(cfg)
	if slices.IsSorted(jittered) || n == 0 {
		t.Fatalf("jitter 10x the send interval did not reorder (counted %d)", n)
	}
	if len(jittered) != 200 {
		t.Fatalf("delivered %d, want 200", len(jittered))
	}
}

// delivered reports which of the six directed links among 1, 2, 3 carried
// a message, after sending one on each.
func delivered(t *testing.T, cut func(n *Network)) map[string]bool {
	t.Helper()
	h := newHarness(t, 1, perfectConfig())
	cut(h.net)
	for from := paxos.ReplicaID(1); from <= 3; from++ {
		for to := paxos.ReplicaID(1); to <= 3; to++ {
			if from != to {
				h.net.Send(msg(from, to, 0))
			}
		}
	}
	h.drain()
	got := make(map[string]bool)
	for _, a := range h.got {
		got[fmt.Sprintf("%d>%d", a.msg.From, a.msg.To)] = true
	}
	return got
}

func TestPartitions(t *testing.T) {
	all := []string{"1>2", "1>3", "2>1", "2>3", "3>1", "3>2"}
	for _, tc := range []struct {
		name string
		cut  func(n *Network)
		open []string
	}{
		{"none", func(n *Network) {}, all},
		{"asymmetric block", func(n *Network) { n.Block(1, 2) }, []string{"1>3", "2>1", "2>3", "3>1", "3>2"}},
		{"block then unblock", func(n *Network) { n.Block(1, 2); n.Unblock(1, 2) }, all},
		{"two groups", func(n *Network) { n.Partition([]paxos.ReplicaID{1, 2}, []paxos.ReplicaID{3}) }, []string{"1>2", "2>1"}},
		{"unlisted replica untouched", func(n *Network) { n.Partition([]paxos.ReplicaID{1}, []paxos.ReplicaID{2}) },
			[]string{"1>3", "2>3", "3>1", "3>2"}},
		{"isolate", func(n *Network) { n.Isolate(2) }, []string{"1>3", "3>1"}},
		{"heal", func(n *Network) {
			n.Isolate(2)
			n.Block(3, 1)
			n.Partition([]paxos.ReplicaID{1}, []paxos.ReplicaID{2, 3})
			n.Heal()
		}, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := delivered(t, tc.cut)
			for _, l := range all {
				if want := slices.Contains(tc.open, l); got[l] != want {
					t.Errorf("link %s delivered=%t, want %t", l, got[l], want)
				}
			}
		})
	}
}

func TestPartitionCutsMessagesInFlight(t *testing.T) {
	h := newHarness(t, 1, perfectConfig())
	h.net.Send(msg(1, 2, 1))
	h.net.Send(msg(2, 1, 2))
	h.sched.RunUntil(500 * time.Microsecond) // both in flight (1 ms delay)
	h.net.Block(1, 2)
	h.drain()
	if len(h.got) != 1 || h.got[0].msg.Round != 2 || h.net.Stats().DroppedPartition != 1 {
		t.Fatalf("got %v, stats %+v; want only 2->1 delivered", h.got, h.net.Stats())
	}
}

func TestDownReplica(t *testing.T) {
	h := newHarness(t, 1, perfectConfig())
	h.net.Send(msg(1, 2, 1)) // in flight when 2 crashes: dropped on arrival
	h.net.SetUp(2, false)
	if h.net.Up(2) {
		t.Fatal("replica 2 still up")
	}
	h.drain()
	h.net.SetUp(2, true)
	h.net.Send(msg(1, 2, 2))
	h.drain()
	if len(h.got) != 1 || h.got[0].msg.Round != 2 || h.net.Stats().DroppedDown != 1 {
		t.Fatalf("got %v, stats %+v", h.got, h.net.Stats())
	}
	h.net.SetUp(1, false)
	defer func() {
		if recover() == nil {
			t.Fatal("send from a down replica did not panic")
		}
	}()
	h.net.Send(msg(1, 2, 3))
}

func TestOverflow(t *testing.T) {
	cfg := perfectConfig()
	cfg.MaxInFlightMessages = 10
	h := newHarness(t, 1, cfg)
	for i := range 15 {
		h.net.Send(msg(1, 2, uint64(i)))
	}
	h.drain()
	if s := h.net.Stats(); s.Delivered != 10 || s.DroppedOverflow != 5 {
		t.Fatalf("stats %+v, want 10 delivered and 5 overflowed", s)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(c *Config)
		ok   bool
	}{
		{"lan", func(c *Config) { *c = DefaultLANConfig() }, true},
		{"lossy", func(c *Config) { *c = DefaultLossyConfig() }, true},
		{"negative base", func(c *Config) { c.DelayBase = -1 }, false},
		{"tail min above max", func(c *Config) { c.DelayTailMin, c.DelayTailMax = 2, 1 }, false},
		{"loss above one", func(c *Config) { c.LossProbability = 1.5 }, false},
		{"negative duplicate", func(c *Config) { c.DuplicateProbability = -0.1 }, false},
		{"NaN tail", func(c *Config) { c.DelayTailProbability = math.NaN() }, false},
		{"unknown jitter", func(c *Config) { c.DelayJitterKind = 9 }, false},
		{"no in-flight bound", func(c *Config) { c.MaxInFlightMessages = 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultLANConfig()
			tc.mod(&c)
			err := c.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("Validate = %v, want ok=%t", err, tc.ok)
			}
		})
	}
	if _, err := New(nil, nil, DefaultLANConfig(), nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("New without dependencies: %v", err)
	}
}

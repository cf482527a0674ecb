package paxos

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// These benchmarks measure the core alone: no disk, no transport, no
// goroutines. Storage is benchStorage, a slice, so that what allocates is
// the core and not the store.

const (
	benchBatch     = 64  // commands per Ready
	benchDataBytes = 256 // bytes per command
	// benchCompactEvery bounds the benchmark's memory: every this many
	// slots, each replica compacts its log as a snapshot would.
	benchCompactEvery = 1 << 16
)

// BenchmarkLeaderAcceptedCommand drives a three-replica cluster in process
// and measures, per command, everything from the leader's Propose through
// the MsgAccepts, both followers' Step/Ready/Advance and MsgAccepted, to
// the leader choosing and handing the command out in Committed: commands
// go in batches of 64 per Ready. ns/op and allocs/op are per command and
// cover all three replicas' core work (see BenchmarkFollowerStepAccept for
// one follower's share).
func BenchmarkLeaderAcceptedCommand(b *testing.B) {
	c := newBenchCluster(b)
	leader := c.nodes[0]
	data := make([]byte, benchDataBytes)
	b.ReportAllocs()
	allocs := startAllocCount()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(benchBatch, b.N-done)
		for range n {
			if _, err := leader.Propose(data); err != nil {
				b.Fatal(err)
			}
		}
		c.settle()
		done += n
		c.maybeCompact()
	}
	b.StopTimer()
	allocs.report(b, "allocs/cmd")
	if want := c.firstCommand + uint64(b.N) - 1; c.applied[0] < want {
		b.Fatalf("leader applied through %d, want %d", c.applied[0], want)
	}
}

// BenchmarkFollowerStepAccept measures a follower handling one MsgAccept
// of 64 entries (which also carries the commit of the previous batch):
// Step, Ready, persisting to benchStorage, Advance. ns/op and allocs/op are
// per entry.
func BenchmarkFollowerStepAccept(b *testing.B) {
	store := newBenchStorage()
	members := Membership{Voters: []ReplicaID{1, 2, 3}}
	n, err := NewNode(Config{
		ID: 2, Membership: members, Storage: store, Rand: rand.New(rand.NewPCG(1, 2)),
		Timing: DefaultTiming(), Limits: DefaultLimits(),
	})
	if err != nil {
		b.Fatal(err)
	}
	ballot := Ballot{Round: 1, Replica: 1}
	data := make([]byte, benchDataBytes)
	entries := make([]Entry, benchBatch)
	var slot, applied uint64
	b.ReportAllocs()
	allocs := startAllocCount()
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(benchBatch, b.N-done)
		es := entries[:k]
		for i := range es {
			es[i] = Entry{Slot: slot + 1 + uint64(i), Ballot: ballot, Kind: EntryCommand, Data: data}
		}
		m := Message{Type: MsgAccept, From: 1, To: 2, Ballot: ballot, Start: 1, Entries: es, Commit: slot}
		if err := n.Step(m); err != nil {
			b.Fatal(err)
		}
		rd := n.Ready()
		store.save(&rd)
		if len(rd.Committed) > 0 {
			applied = rd.Committed[len(rd.Committed)-1].Slot
		}
		n.Advance()
		slot += uint64(k)
		done += k
		if applied-store.snapIndex >= benchCompactEvery {
			store.compact(applied)
			n.Compacted(applied, applied)
		}
	}
	b.StopTimer()
	allocs.report(b, "allocs/entry")
	if n.Status().Chosen+uint64(benchBatch) < slot {
		b.Fatalf("follower chose through %d of %d", n.Status().Chosen, slot)
	}
}

// allocCount measures allocations per op more finely than allocs/op,
// which truncates: many of the core's allocations are per batch, that is
// a fraction per command.
type allocCount struct{ mallocs uint64 }

func startAllocCount() allocCount {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return allocCount{mallocs: ms.Mallocs}
}

func (a allocCount) report(b *testing.B, unit string) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Mallocs-a.mallocs)/float64(b.N), unit)
}

// benchCluster is a three-replica cluster whose messages are delivered in
// order, at once, by settle.
type benchCluster struct {
	b       *testing.B
	nodes   []*Node
	stores  []*benchStorage
	applied []uint64 // highest slot each replica was handed in Committed
	queue   []Message
	next    []Message // double buffer for queue
	// firstCommand is the first slot after the election's no-op.
	firstCommand uint64
}

func newBenchCluster(b *testing.B) *benchCluster {
	members := Membership{Voters: []ReplicaID{1, 2, 3}}
	c := &benchCluster{b: b}
	for _, id := range members.Voters {
		s := newBenchStorage()
		n, err := NewNode(Config{
			ID: id, Membership: members, Storage: s, Rand: rand.New(rand.NewPCG(1, uint64(id))),
			Timing: DefaultTiming(), Limits: DefaultLimits(),
		})
		if err != nil {
			b.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
		c.stores = append(c.stores, s)
		c.applied = append(c.applied, 0)
	}
	// Elect replica 1: hold the others' election timers back and let its
	// own run out, one tick at a time, until it leads.
	for range 10 * DefaultTiming().ElectionTicks {
		if c.nodes[0].role == Leader {
			break
		}
		for i, n := range c.nodes {
			if i > 0 {
				n.electionElapsed = 0
			} else if n.role == Follower {
				n.electionElapsed = max(n.electionElapsed, n.electionTimeout-1)
			}
			n.Tick()
		}
		c.settle()
	}
	if c.nodes[0].role != Leader {
		b.Fatalf("replica 1 did not become leader: %+v", c.nodes[0].Status())
	}
	c.settle()
	c.firstCommand = c.nodes[0].log.lastSlot + 1
	return c
}

// settle runs every Ready and delivers every message until the cluster is
// quiet.
func (c *benchCluster) settle() {
	for {
		for i, n := range c.nodes {
			for n.HasReady() {
				rd := n.Ready()
				c.stores[i].save(&rd)
				c.queue = append(c.queue, rd.EarlyMessages...)
				c.queue = append(c.queue, rd.Messages...)
				if len(rd.Committed) > 0 {
					c.applied[i] = rd.Committed[len(rd.Committed)-1].Slot
				}
				n.Advance()
			}
		}
		if len(c.queue) == 0 {
			return
		}
		c.queue, c.next = c.next[:0], c.queue
		for _, m := range c.next {
			if err := c.nodes[m.To-1].Step(m); err != nil {
				c.b.Fatal(err)
			}
		}
		clear(c.next) // drop references to entries
	}
}

// maybeCompact compacts each replica's log through what it applied, every
// benchCompactEvery slots, so that memory stays bounded.
func (c *benchCluster) maybeCompact() {
	for i, n := range c.nodes {
		if c.applied[i]-c.stores[i].snapIndex >= benchCompactEvery {
			c.stores[i].compact(c.applied[i])
			n.Compacted(c.applied[i], c.applied[i])
		}
	}
}

// benchStorage is a lean in-memory Storage: entries[i] holds slot
// snapIndex+1+i. Slots are written without gaps, as a leader and its
// followers write them here.
type benchStorage struct {
	hs        HardState
	snapIndex uint64
	entries   []Entry
}

// newBenchStorage preallocates room for the slots kept between
// compactions, so that the store's own growth does not count as the core's
// allocations.
func newBenchStorage() *benchStorage {
	return &benchStorage{entries: make([]Entry, 0, 2*benchCompactEvery+2*benchBatch)}
}

func (s *benchStorage) InitialState() (HardState, SnapshotMeta, error) {
	return s.hs, SnapshotMeta{Index: s.snapIndex}, nil
}

func (s *benchStorage) Entries(lo, hi, maxBytes uint64) ([]Entry, error) {
	if lo <= s.snapIndex {
		return nil, ErrCompacted
	}
	first := lo - s.snapIndex - 1
	end := min(hi-s.snapIndex-1, uint64(len(s.entries)))
	if first >= end {
		return nil, nil
	}
	var size uint64
	for i := first; i < end; i++ {
		size += EntrySize(s.entries[i])
		if i > first && size > maxBytes {
			end = i
			break
		}
	}
	// Clipped, so that a caller appending cannot write into the store.
	return slices.Clip(s.entries[first:end]), nil
}

func (s *benchStorage) FirstSlot() (uint64, error) { return s.snapIndex + 1, nil }

func (s *benchStorage) LastSlot() (uint64, error) {
	return s.snapIndex + uint64(len(s.entries)), nil
}

func (s *benchStorage) Snapshot() (Snapshot, error) {
	return Snapshot{Meta: SnapshotMeta{Index: s.snapIndex}}, nil
}

func (s *benchStorage) save(rd *Ready) {
	if rd.HardStateChanged {
		s.hs = rd.HardState
	}
	if rd.Snapshot != nil {
		panic("benchStorage: snapshots are not sent in benchmarks")
	}
	for _, e := range rd.Entries {
		i := e.Slot - s.snapIndex - 1
		switch {
		case e.Slot <= s.snapIndex:
		case i < uint64(len(s.entries)):
			s.entries[i] = e
		case i == uint64(len(s.entries)):
			s.entries = append(s.entries, e)
		default:
			panic("benchStorage: gap in slots")
		}
	}
}

// compact drops the entries through index, as saving a snapshot at index
// would. It moves the rest down in place: the callers compact only when no
// message holding a slice of the store is in flight.
func (s *benchStorage) compact(index uint64) {
	drop := min(index-s.snapIndex, uint64(len(s.entries)))
	kept := copy(s.entries, s.entries[drop:])
	clear(s.entries[kept:])
	s.entries = s.entries[:kept]
	s.snapIndex = index
}

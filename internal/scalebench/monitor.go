package scalebench

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/trace"
	"slices"
	"sync"
	"time"

	"paxcron/internal/node"
	"paxcron/paxos"
)

// Event is a change of leadership: which replica leads, under which ballot,
// and whose launcher acts.
type Event struct {
	At   time.Duration // since the monitor started (just before the replicas open)
	What string
}

// monitor polls the replicas' statuses and records every change of the
// leader's ballot and of the launching replica: a leader that loses its
// lease (a loop turn as long as the election timeout) shows here, and
// explains lookups and late launches.
type monitor struct {
	c     *cluster
	began time.Time
	quit  chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	events []Event

	// recorder and its folder, when stalls are traced; used by run's
	// goroutine alone, and stopped once it has ended.
	recorder *trace.FlightRecorder
	traceDir string
	traces   int
	logf     func(string, ...any)
}

// stallTraceAfter is the shortest stop-the-world a stall trace is written
// for; maxStallTraces bounds how many are (each is up to
// flightRecorderBytes).
const (
	stallTraceAfter     = 200 * time.Millisecond
	maxStallTraces      = 4
	flightRecorderBytes = 256 << 20
)

// traceStall writes the flight recorder's window, if a stall trace is
// due: the stop-the-world ended just before, so it is in the window.
func (m *monitor) traceStall(stw time.Duration) {
	if m.recorder == nil || stw < stallTraceAfter || m.traces >= maxStallTraces {
		return
	}
	m.traces++
	path := filepath.Join(m.traceDir, fmt.Sprintf("stall-%02d.trace", m.traces))
	f, err := os.Create(path)
	if err == nil {
		_, err = m.recorder.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		m.logf("scalebench: writing a stall trace: %v", err)
		return
	}
	m.add(fmt.Sprintf("its execution trace written to %s", path))
}

// monitorEvery is how often the monitor polls: well below the election
// timeout (1-2 s), cheap beside the replicas.
const monitorEvery = 5 * time.Millisecond

// stallAfter is how late a poll must come to be listed as a stall.
const stallAfter = 100 * time.Millisecond

// gcReading is what the runtime says of its collector at one moment.
type gcReading struct {
	cycles uint64
	// stopping and total count the collector's stop-the-world pauses by
	// bucket: the time from deciding to stop the world until every
	// goroutine stopped (a goroutine that cannot be preempted holds it
	// up), and the whole pause, that time included.
	stopping, total *metrics.Float64Histogram
}

func readGCNow() gcReading {
	s := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/sched/pauses/stopping/gc:seconds"},
		{Name: "/sched/pauses/total/gc:seconds"},
	}
	metrics.Read(s)
	return gcReading{cycles: s[0].Value.Uint64(), stopping: s[1].Value.Float64Histogram(), total: s[2].Value.Float64Histogram()}
}

// longestSince is the upper bound of the highest bucket that gained a
// count between before and after (zero if none did).
func longestSince(before, after *metrics.Float64Histogram) time.Duration {
	for i := len(after.Counts) - 1; i >= 0; i-- {
		if after.Counts[i] > before.Counts[i] {
			upper := after.Buckets[i+1]
			if math.IsInf(upper, 1) {
				upper = after.Buckets[i]
			}
			return time.Duration(upper * float64(time.Second))
		}
	}
	return 0
}

// describe says what the collector did between r and later.
func (r gcReading) describe(later gcReading) string {
	return fmt.Sprintf("%d GC cycles ended meanwhile; longest stop-the-world up to %v, of which stopping up to %v",
		later.cycles-r.cycles, longestSince(r.total, later.total).Round(time.Millisecond),
		longestSince(r.stopping, later.stopping).Round(time.Millisecond))
}

// startMonitor starts polling c; with traceDir set, it also keeps a flight
// recorder and writes stall traces there (Config.StallTraceDir).
func startMonitor(c *cluster, traceDir string, logf func(string, ...any)) (*monitor, error) {
	m := &monitor{c: c, began: time.Now(), quit: make(chan struct{}), done: make(chan struct{}), traceDir: traceDir, logf: logf}
	if traceDir != "" {
		if err := os.MkdirAll(traceDir, 0o755); err != nil {
			return nil, fmt.Errorf("scalebench: %w", err)
		}
		m.recorder = trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 3 * time.Second, MaxBytes: flightRecorderBytes})
		if err := m.recorder.Start(); err != nil {
			return nil, fmt.Errorf("scalebench: starting the flight recorder: %w", err)
		}
	}
	go m.run()
	return m, nil
}

func (m *monitor) run() {
	defer close(m.done)
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	var lastLeader, lastLaunching string
	lastPoll, lastGC := time.Now(), readGCNow()
	for {
		select {
		case <-m.quit:
			return
		case <-t.C:
		}
		// A poll this late means the whole process stood still (every
		// replica's loop with it), or the monitor got no CPU for as long:
		// all three replicas share it, so such a stall looks to each like
		// silence from the others, and to each one's clock like the ticks
		// it missed, fed at once.
		now, gc := time.Now(), readGCNow()
		if late := now.Sub(lastPoll) - monitorEvery; late >= stallAfter {
			m.add(fmt.Sprintf("the monitor's %v poll came %v late (%s)", monitorEvery, late.Round(time.Millisecond), lastGC.describe(gc)))
			m.traceStall(longestSince(lastGC.total, gc.total))
			// Writing the trace held this goroutine: not a stall.
			now, gc = time.Now(), readGCNow()
		}
		lastPoll, lastGC = now, gc
		leader, launching := "no leader", "no launcher"
		for id := range paxos.ReplicaID(replicas) {
			s := m.c.status(id + 1)
			if s.Role == paxos.Leader && s.Err == nil {
				leader = fmt.Sprintf("replica %d leads at ballot %d.%d", s.ID, s.Ballot.Round, s.Ballot.Replica)
			}
			if s.Launching && s.Err == nil {
				launching = fmt.Sprintf("replica %d launches", s.ID)
			}
		}
		if leader != lastLeader {
			m.add(leader)
			lastLeader = leader
		}
		if launching != lastLaunching {
			m.add(launching)
			lastLaunching = launching
		}
	}
}

func (m *monitor) add(what string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, Event{At: time.Since(m.began), What: what})
}

// slowLog holds the replicas' loop turns (node.Config.OnSlowTurn) and
// synced writes (OnSaveTimed) of at least slowTurn, kept for the events:
// while a replica's loop or its writer is held up, its replies wait.
type slowLog struct {
	mu     sync.Mutex
	events []slowEvent
}

type slowEvent struct {
	at   time.Time
	what string
	turn bool // a loop turn, not a write
}

// slowTurn is the shortest turn or write listed among the events: two
// ticks.
const slowTurn = 100 * time.Millisecond

// maxSlowTurns bounds the turns and writes kept (a run going badly has
// many).
const maxSlowTurns = 200

func (s *slowLog) add(e slowEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) < maxSlowTurns {
		s.events = append(s.events, e)
	}
}

// count is how many events the log holds.
func (s *slowLog) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// since lists the slow loop turns among the events after the first n.
func (s *slowLog) since(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events[min(n, len(s.events)):] {
		if e.turn {
			out = append(out, e.what)
		}
	}
	return out
}

func (s *slowLog) note(id paxos.ReplicaID, t node.Turn) {
	s.add(slowEvent{at: t.At, what: fmt.Sprintf("replica %d: a slow loop turn, %v", id, t), turn: true})
}

// saved notes a synced write that took took, ending now.
func (s *slowLog) saved(id paxos.ReplicaID, entries int, took time.Duration) {
	if took >= slowTurn {
		s.add(slowEvent{at: time.Now().Add(-took), what: fmt.Sprintf("replica %d: a slow synced write, %v (%d entries)", id, took.Round(time.Microsecond), entries)})
	}
}

// timed returns the turns and writes as events, timed from began.
func (s *slowLog) timed(began time.Time) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, e := range s.events {
		out = append(out, Event{At: e.at.Sub(began), What: e.what})
	}
	return out
}

// stop ends the polling and returns the events, the cluster's slow loop
// turns among them, in time order.
func (m *monitor) stop() []Event {
	close(m.quit)
	<-m.done
	if m.recorder != nil {
		m.recorder.Stop()
		m.recorder = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	events := append(m.events, m.c.slow.timed(m.began)...)
	slices.SortStableFunc(events, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	return events
}

package scalebench

import (
	"cmp"
	"fmt"
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
}

// monitorEvery is how often the monitor polls: well below the election
// timeout (1-2 s), cheap beside the replicas.
const monitorEvery = 5 * time.Millisecond

func startMonitor(c *cluster) *monitor {
	m := &monitor{c: c, began: time.Now(), quit: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	return m
}

func (m *monitor) run() {
	defer close(m.done)
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	var lastLeader, lastLaunching string
	for {
		select {
		case <-m.quit:
			return
		case <-t.C:
		}
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

// slowTurns are the replicas' loop turns of at least slowTurn
// (node.Config.OnSlowTurn), kept for the events.
type slowTurns struct {
	mu    sync.Mutex
	turns []replicaTurn
}

type replicaTurn struct {
	id paxos.ReplicaID
	t  node.Turn
}

// slowTurn is the shortest turn listed among the events: two ticks.
const slowTurn = 100 * time.Millisecond

// maxSlowTurns bounds the turns kept (a run going badly has many).
const maxSlowTurns = 200

func (s *slowTurns) note(id paxos.ReplicaID, t node.Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.turns) < maxSlowTurns {
		s.turns = append(s.turns, replicaTurn{id, t})
	}
}

// events returns the turns as events, timed from began.
func (s *slowTurns) events(began time.Time) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, rt := range s.turns {
		out = append(out, Event{At: rt.t.At.Sub(began), What: fmt.Sprintf("replica %d: a slow loop turn, %v", rt.id, rt.t)})
	}
	return out
}

// stop ends the polling and returns the events.
// stop ends the polling and returns the events, the cluster's slow loop
// turns among them, in time order.
func (m *monitor) stop() []Event {
	close(m.quit)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	events := append(m.events, m.c.slow.events(m.began)...)
	slices.SortStableFunc(events, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	return events
}

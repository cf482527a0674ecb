package scalebench

import (
	"fmt"
	"sync"
	"time"

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

// stop ends the polling and returns the events.
func (m *monitor) stop() []Event {
	close(m.quit)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events
}

package replica

import (
	"sync"

	"paxcron/paxos"
	"paxcron/storage"
)

// snapshotReads is the store as the core sees it when Config.ReadSnapshots
// is set: the core reads a snapshot only to send it to a peer that fell
// behind the log, and reading a large one takes seconds (a million jobs,
// 174 MiB: 1.5 s, which once cost a leader its lease). The first ask starts
// a read through ReadSnapshots and answers
// paxos.ErrSnapshotTemporarilyUnavailable; the core asks again at its next
// catch-up of the peer and gets the snapshot read. It is handed over once
// and forgotten: the core keeps it for as long as a transfer sends it, and
// a later ask reads the newest again.
//
// A read the core does not come back for (it lost its leadership while
// the read ran, or the peer went away) is let go after maxHeldTicks of
// the replica's ticks: held, it kept the whole snapshot in memory until
// the next transfer, however much later, and that transfer then sent a
// stale image (found in review).
type snapshotReads struct {
	storage.Store
	start func(read func())

	mu      sync.Mutex
	reading bool
	read    *paxos.Snapshot
	heldFor int // ticks since read was done
	err     error
}

// maxHeldTicks is how long a finished read waits for the core: eight
// catch-up rounds at the default timing (the core asks again at each, every
// two heartbeats).
const maxHeldTicks = 8 * 2 * 4

// tick ages a finished read, letting it go once it has waited
// maxHeldTicks. An error is kept: the core halts on it when it asks.
func (s *snapshotReads) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read == nil {
		return
	}
	if s.heldFor++; s.heldFor > maxHeldTicks {
		s.read = nil
	}
}

func (s *snapshotReads) Snapshot() (paxos.Snapshot, error) {
	s.mu.Lock()
	switch {
	case s.read != nil:
		snap := *s.read
		s.read = nil
		s.mu.Unlock()
		return snap, nil
	case s.err != nil:
		err := s.err
		s.err = nil
		s.mu.Unlock()
		return paxos.Snapshot{}, err
	case s.reading:
		s.mu.Unlock()
		return paxos.Snapshot{}, paxos.ErrSnapshotTemporarilyUnavailable
	}
	s.reading = true
	s.mu.Unlock()
	s.start(s.readNow)
	return paxos.Snapshot{}, paxos.ErrSnapshotTemporarilyUnavailable
}

func (s *snapshotReads) readNow() {
	snap, err := s.Store.Snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reading = false
	if err != nil {
		s.err = err // the core halts on it: a snapshot it cannot read
		return
	}
	s.read, s.heldFor = &snap, 0
}

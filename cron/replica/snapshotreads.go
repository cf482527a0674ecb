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
type snapshotReads struct {
	storage.Store
	start func(read func())

	mu      sync.Mutex
	reading bool
	read    *paxos.Snapshot
	err     error
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
	s.read = &snap
}

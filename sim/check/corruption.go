package check

import "paxcron/paxos"

// Corruption keeps the books for invariant 12: corrupted bytes on disk
// (flipped by the simulator) are detected and never applied.
//
// The runner reports each record it corrupts (CorruptionInjected), each
// time a corrupted record's bytes are read back by storage
// (CorruptRecordRead), each corruption storage reports
// (CorruptionDetected), and any value it finds applied from corrupted bytes
// (CorruptValueApplied, always a violation). Check, run after every step,
// fails if a corrupted record was read and storage has not reported it.
// Detection where nothing was ever injected is a false alarm and fails too:
// a checker that cries wolf hides the real wolves.
type Corruption struct {
	replicas map[paxos.ReplicaID]*corruptionState
	stats    CorruptionStats
	// unreported is the sum over replicas, so Check is free when zero.
	unreported uint64
}

// CorruptionStats counts what the simulator injected and saw.
type CorruptionStats struct {
	Injected uint64
	Read     uint64
	Detected uint64
}

type corruptionState struct {
	injected uint64
	// unreported counts corrupt reads since the last detection; the core
	// stops at the first corrupt read, so one detection covers them all.
	unreported uint64
}

// NewCorruption returns empty books.
func NewCorruption() *Corruption {
	return &Corruption{replicas: make(map[paxos.ReplicaID]*corruptionState)}
}

func (c *Corruption) state(r paxos.ReplicaID) *corruptionState {
	s, ok := c.replicas[r]
	if !ok {
		s = &corruptionState{}
		c.replicas[r] = s
	}
	return s
}

// CorruptionInjected records that the simulator flipped bytes of a record
// on replica r's disk.
func (c *Corruption) CorruptionInjected(r paxos.ReplicaID) {
	c.state(r).injected++
	c.stats.Injected++
}

// DiskWiped records that replica r's disk was wiped: the records
// corrupted on it are gone, so a later report of corruption on it, before
// any new injection, is a false alarm.
func (c *Corruption) DiskWiped(r paxos.ReplicaID) {
	s := c.state(r)
	c.unreported -= s.unreported
	s.injected, s.unreported = 0, 0
}

// CorruptRecordRead records that replica r's storage read back a record
// whose bytes were flipped.
func (c *Corruption) CorruptRecordRead(r paxos.ReplicaID) {
	s := c.state(r)
	if s.injected == 0 {
		panic("check: CorruptRecordRead on a replica with no injected corruption")
	}
	s.unreported++
	c.unreported++
	c.stats.Read++
}

// CorruptionDetected records that replica r's storage reported corruption.
// It is a violation if nothing was ever injected on r.
func (c *Corruption) CorruptionDetected(r paxos.ReplicaID) error {
	s := c.state(r)
	c.stats.Detected++
	if s.injected == 0 {
		return violation(InvCorruption, "replica %d reported corruption, but none was injected on its disk", r)
	}
	c.unreported -= s.unreported
	s.unreported = 0
	return nil
}

// CorruptValueApplied reports that replica r applied a value read from
// corrupted bytes: always a violation.
func (c *Corruption) CorruptValueApplied(r paxos.ReplicaID) error {
	return violation(InvCorruption, "replica %d applied a value read from corrupted bytes", r)
}

// Check reports a violation for the lowest-numbered replica that read a
// corrupted record without storage reporting it.
func (c *Corruption) Check() error {
	if c.unreported == 0 {
		return nil
	}
	worst := paxos.None
	//detlint:maprange taking the minimum ID does not depend on order
	for id, s := range c.replicas {
		if s.unreported > 0 && (worst == paxos.None || id < worst) {
			worst = id
		}
	}
	if worst != paxos.None {
		return violation(InvCorruption, "replica %d read %d corrupted record(s) and storage did not report it",
			worst, c.replicas[worst].unreported)
	}
	return nil
}

// Stats returns the counts so far.
func (c *Corruption) Stats() CorruptionStats { return c.stats }

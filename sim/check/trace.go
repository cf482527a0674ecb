package check

import (
	"time"

	"paxcron/paxos"
)

// FNV-1a, 64 bits, written out so that hashing allocates nothing.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func fnvBytes(h uint64, bs []byte) uint64 {
	for _, b := range bs {
		h = fnvByte(h, b)
	}
	return h
}

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = fnvByte(h, s[i])
	}
	return h
}

func fnvUint64(h, v uint64) uint64 {
	for range 8 {
		h = fnvByte(h, byte(v))
		v >>= 8
	}
	return h
}

// Trace folds a run's events into one running hash for invariant 13: two
// runs of one seed must end with the same Sum. Every field is written with
// its length or at a fixed width, so that different event sequences do not
// run together into the same bytes.
type Trace struct {
	h      uint64
	events uint64
}

// NewTrace returns an empty trace.
func NewTrace() *Trace { return &Trace{h: fnvOffset} }

// Sum returns the hash of everything recorded so far.
func (t *Trace) Sum() uint64 { return t.h }

// Events returns the number of events recorded.
func (t *Trace) Events() uint64 { return t.events }

// Event tags keep typed records apart from each other and from Record.
const (
	tagString byte = iota + 1
	tagUint64s
	tagMessage
	tagEntry
)

func (t *Trace) begin(tag byte) {
	t.events++
	t.h = fnvByte(t.h, tag)
}

func (t *Trace) str(s string) {
	t.h = fnvString(fnvUint64(t.h, uint64(len(s))), s)
}

func (t *Trace) bytes(b []byte) {
	t.h = fnvBytes(fnvUint64(t.h, uint64(len(b))), b)
}

func (t *Trace) u64(v uint64) { t.h = fnvUint64(t.h, v) }

func (t *Trace) bool(b bool) {
	if b {
		t.u64(1)
	} else {
		t.u64(0)
	}
}

// Record adds a free-form event, such as "crash 2" or a fault's name.
func (t *Trace) Record(event string) {
	t.begin(tagString)
	t.str(event)
}

// RecordUint64s adds an event made of numbers (a tick, a timer firing...).
func (t *Trace) RecordUint64s(vs ...uint64) {
	t.begin(tagUint64s)
	t.u64(uint64(len(vs)))
	for _, v := range vs {
		t.u64(v)
	}
}

// RecordMessage adds a message and the true time it was sent or delivered.
// Every field counts (a test keeps this in step with paxos.Message).
func (t *Trace) RecordMessage(at time.Duration, m paxos.Message) {
	t.begin(tagMessage)
	t.u64(uint64(at))
	t.u64(uint64(m.Type))
	t.u64(uint64(m.From))
	t.u64(uint64(m.To))
	t.ballot(m.Ballot)
	t.ballot(m.Promised)
	t.u64(m.Start)
	t.u64(uint64(len(m.Entries)))
	for _, e := range m.Entries {
		t.entry(e)
	}
	t.u64(m.Commit)
	t.u64(m.Through)
	t.u64(m.Chosen)
	t.u64(m.Last)
	t.u64(m.Round)
	t.bool(m.Reject)
	t.snapshot(m.Snapshot)
}

// RecordEntry adds an entry that replica r learned, applied or persisted
// at true time at.
func (t *Trace) RecordEntry(at time.Duration, r paxos.ReplicaID, e paxos.Entry) {
	t.begin(tagEntry)
	t.u64(uint64(at))
	t.u64(uint64(r))
	t.entry(e)
}

func (t *Trace) ballot(b paxos.Ballot) {
	t.u64(b.Round)
	t.u64(uint64(b.Replica))
}

func (t *Trace) entry(e paxos.Entry) {
	t.u64(e.Slot)
	t.ballot(e.Ballot)
	t.u64(uint64(e.Kind))
	t.bytes(e.Data)
}

func (t *Trace) snapshot(s *paxos.Snapshot) {
	t.bool(s != nil)
	if s == nil {
		return
	}
	t.u64(s.Meta.Index)
	t.u64(uint64(len(s.Meta.Membership.Voters)))
	for _, v := range s.Meta.Membership.Voters {
		t.u64(uint64(v))
	}
	t.bytes(s.Data)
}

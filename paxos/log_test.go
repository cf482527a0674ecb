package paxos

import (
	"bytes"
	"testing"
)

// TestMergedReadStopsWhereStorageStopped: a bounded read of a range held
// partly in Storage and partly in memory is a contiguous run from its
// start. The stores stop before the entry that would pass the byte
// budget; the merge once took that for the end of what Storage held, read
// the unread stored slots as empty and went on with the entries held in
// memory after them. A restarted follower's apply read then skipped
// chosen slots, and the core panicked.
func TestMergedReadStopsWhereStorageStopped(t *testing.T) {
	s := newTestStorage()
	b := Ballot{Round: 1, Replica: 2}
	big := bytes.Repeat([]byte("x"), 400)
	for slot := uint64(1); slot <= 6; slot++ {
		s.entries[slot] = Entry{Slot: slot, Ballot: b, Kind: EntryCommand, Data: big}
	}
	s.last = 6
	l, err := newMemLog(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	for slot := uint64(7); slot <= 8; slot++ {
		l.put(Entry{Slot: slot, Ballot: b, Kind: EntryNoop})
	}
	const budget = 1000 // two stored entries fit, not three
	for lo := uint64(1); lo <= 8; {
		es, err := l.entries(lo, 9, 100, budget)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			t.Fatalf("read from %d returned nothing", lo)
		}
		for i, e := range es {
			if e.Slot != lo+uint64(i) {
				t.Fatalf("read from %d returned slots %v: slot %d skipped", lo, slotsOf(es), lo+uint64(i))
			}
		}
		lo += uint64(len(es))
	}
}

func slotsOf(es []Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Slot
	}
	return out
}

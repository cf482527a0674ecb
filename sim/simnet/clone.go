package simnet

import (
	"slices"

	"paxcron/paxos"
)

// CloneMessage returns a deep copy of m: no slice or pointer in the result
// shares memory with m, so a sender may reuse its buffers and a receiver
// may scribble on what it got. Nil stays nil and empty stays empty.
func CloneMessage(m paxos.Message) paxos.Message {
	c := m
	c.Entries = CloneEntries(m.Entries)
	if m.Snapshot != nil {
		s := *m.Snapshot
		s.Data = slices.Clone(s.Data)
		s.Meta.Membership.Voters = slices.Clone(s.Meta.Membership.Voters)
		c.Snapshot = &s
	}
	return c
}

// CloneEntries deep-copies entries with two allocations: one for the slice
// and one buffer shared by every Data, each capped so that appending to one
// cannot overwrite the next.
func CloneEntries(es []paxos.Entry) []paxos.Entry {
	if es == nil {
		return nil
	}
	total := 0
	for _, e := range es {
		total += len(e.Data)
	}
	buf := make([]byte, 0, total)
	out := make([]paxos.Entry, len(es))
	for i, e := range es {
		out[i] = e
		if e.Data != nil {
			start := len(buf)
			buf = append(buf, e.Data...)
			out[i].Data = buf[start:len(buf):len(buf)]
		}
	}
	return out
}

package paxos

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// FuzzStep feeds a follower the messages a peer holding the cluster key
// could send, in any order: the stream is frames of a 2-byte length and a
// message as DecodeMessage reads it (an empty frame is a tick). Each
// message that decodes is addressed to replica 1 from replica 2 or 3 and
// stepped; every Ready is persisted and applied. Paxos trusts its peers'
// values, so the property is not what is chosen but that the replica
// stays sound: Step never panics nor halts it, it follows only the owner
// of the ballot it promised, the promised ballot and the chosen index
// never go back, committed entries come in slot order
// without a gap, and a snapshot transfer allocates no more than
// MaxSnapshotBytes.
func FuzzStep(f *testing.F) {
	for _, tc := range codecMessages() {
		m := tc.m
		m.From, m.To = 2, 1
		if frame, err := AppendMessage(nil, m); err == nil && len(frame) <= maxSeedBytes {
			f.Add(stepFrames(frame))
		}
	}
	// A leader's prepare, then its accepts, then a commit: a follower's
	// ordinary life.
	b := Ballot{Round: 5, Replica: 2}
	var life [][]byte
	for _, m := range []Message{
		{Type: MsgPrepare, From: 2, To: 1, Ballot: b, Start: 1},
		{Type: MsgAccept, From: 2, To: 1, Ballot: b, Start: 1, Entries: []Entry{{Slot: 1, Ballot: b, Kind: EntryCommand, Data: []byte("a")}}},
		{Type: MsgHeartbeat, From: 2, To: 1, Ballot: b, Start: 1, Commit: 1, Round: 1},
	} {
		frame, err := AppendMessage(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		life = append(life, frame)
	}
	f.Add(stepFrames(life...))
	f.Add(stepFrames(nil, nil, nil))
	f.Fuzz(func(t *testing.T, stream []byte) {
		newStepHarness(t).run(stream)
	})
}

// FuzzStepLeader is FuzzStep for a replica that leads: elected by its
// peers, with three values chosen, it then hears whatever a key holder
// sends as replica 2 or 3 (replies to its ballot, other ballots, catch-up,
// snapshot chunks), with the same checks.
func FuzzStepLeader(f *testing.F) {
	b := Ballot{Round: 1, Replica: 1}
	for _, ms := range [][]Message{
		{{Type: MsgAccepted, From: 2, To: 1, Ballot: b, Start: 1, Through: 4}},
		{{Type: MsgNack, From: 2, To: 1, Ballot: b, Promised: Ballot{Round: 9, Replica: 2}}},
		{{Type: MsgHeartbeatReply, From: 3, To: 1, Ballot: b, Round: 1 << 20, Chosen: 4}},
		{{Type: MsgPromise, From: 2, To: 1, Ballot: b, Start: 1, Entries: []Entry{{Slot: 9, Ballot: b, Kind: EntryCommand, Data: []byte("z")}}}},
		{{Type: MsgPrepare, From: 3, To: 1, Ballot: Ballot{Round: 2, Replica: 3}, Start: 1}},
		{{Type: MsgSnapshotAck, From: 2, To: 1, Ballot: b, Round: 1, Start: 1, Last: 2}},
	} {
		var frames [][]byte
		for _, m := range ms {
			frame, err := AppendMessage(nil, m)
			if err != nil {
				f.Fatal(err)
			}
			frames = append(frames, frame)
		}
		f.Add(stepFrames(frames...))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		newLeaderHarness(t).run(stream)
	})
}

// stepFrames joins frames as FuzzStep reads them.
func stepFrames(frames ...[]byte) []byte {
	var out []byte
	for _, f := range frames {
		out = binary.BigEndian.AppendUint16(out, uint16(len(f)))
		out = append(out, f...)
	}
	return out
}

// stepHarness is one follower, its storage, and what it applied.
type stepHarness struct {
	t       *testing.T
	node    *Node
	storage *testStorage
	hs      HardState
	applied uint64
}

func newStepHarness(t *testing.T) *stepHarness {
	s := newTestStorage()
	n, err := NewNode(Config{ID: 1, Membership: Membership{Voters: []ReplicaID{1, 2, 3}}, Storage: s,
		Rand: rand.New(rand.NewPCG(1, 1)), Timing: DefaultTiming(), Limits: stepLimits()})
	if err != nil {
		t.Fatal(err)
	}
	return &stepHarness{t: t, node: n, storage: s}
}

// newLeaderHarness elects replica 1 of a test cluster and has it choose
// three values, then takes it out of the cluster: from then on it hears
// only the fuzzer.
func newLeaderHarness(t *testing.T) *stepHarness {
	c := newTestCluster(t, 3, 1)
	c.setLimits(stepLimits())
	c.elect(1)
	c.propose(1, "a", "b", "c")
	c.run(3 * c.timing.HeartbeatTicks)
	r := c.replicas[1]
	if r.node.role != Leader || len(r.applied) < 3 {
		t.Fatalf("replica 1 leads: %v, applied %d", r.node.role == Leader, len(r.applied))
	}
	return &stepHarness{t: t, node: r.node, storage: r.storage, hs: r.node.hs, applied: uint64(len(r.applied))}
}

// run steps the frames of stream (see FuzzStep), processing after each.
func (h *stepHarness) run(stream []byte) {
	for len(stream) >= 2 {
		n := int(binary.BigEndian.Uint16(stream))
		stream = stream[2:]
		if n > len(stream) {
			return
		}
		frame := stream[:n]
		stream = stream[n:]
		if n == 0 {
			h.node.Tick()
		} else if m, err := DecodeMessage(frame); err == nil {
			m.To, m.From = 1, 2+m.From%2
			h.node.Step(m)
		}
		h.process()
	}
}

func stepLimits() Limits {
	limits := DefaultLimits()
	limits.MaxSnapshotBytes = 1 << 20 // what one fuzz input may make it hold
	return limits
}

// process persists and applies every Ready, checking what the replica
// promised and chose only moves forward.
func (h *stepHarness) process() {
	t := h.t
	for h.node.HasReady() {
		rd := h.node.Ready()
		if rd.HardStateChanged {
			if rd.HardState.Promised.Less(h.hs.Promised) || rd.HardState.Chosen < h.hs.Chosen {
				t.Fatalf("hard state went back: %+v after %+v", rd.HardState, h.hs)
			}
			h.hs = rd.HardState
		}
		h.storage.save(rd)
		if rd.Snapshot != nil {
			if rd.Snapshot.Meta.Index <= h.applied {
				t.Fatalf("a snapshot at %d after applying %d", rd.Snapshot.Meta.Index, h.applied)
			}
			h.applied = rd.Snapshot.Meta.Index
		}
		for _, e := range rd.Committed {
			if e.Slot != h.applied+1 {
				t.Fatalf("applied slot %d after %d", e.Slot, h.applied)
			}
			h.applied = e.Slot
		}
		h.node.Advance()
	}
	if n := h.node; n.role == Follower && n.leader != None && n.leader != n.hs.Promised.Replica {
		t.Fatalf("follows replica %d under replica %d's ballot %s", n.leader, n.hs.Promised.Replica, n.hs.Promised)
	}
	if h.node.halted != nil {
		t.Fatalf("a peer's messages halted the replica: %v", h.node.halted)
	}
	if r := h.node.recv; r != nil && uint64(cap(r.data)) > h.node.limits.MaxSnapshotBytes {
		t.Fatalf("a snapshot transfer holds %d bytes, over MaxSnapshotBytes", cap(r.data))
	}
}

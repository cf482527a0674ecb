package paxos

import (
	"errors"
	"fmt"
)

// This file streams snapshots in chunks. A replica catches a peer up with
// its snapshot when the chosen entries the peer lacks were compacted away
// (sendCatchUp). A snapshot may be far larger than a message
// (MaxMessageBytes), so it travels as a transfer: chunks of at most
// MaxSnapshotChunkBytes, one in flight per peer.
//
//	sender                                     receiver
//	MsgSnapshot{Round: id, Start: 0, Last: n} ->  holds [0, c)
//	                          <- MsgSnapshotAck{Round: id, Start: c}
//	MsgSnapshot{Round: id, Start: c, ...}     ->  holds [0, 2c)
//	...                                           installs at n bytes
//	                          <- MsgSnapshotAck{Round: id, Start: n}
//
// The sender sends the next chunk when the receiver acknowledges the bytes
// before it, resends from what the receiver holds when a chunk or an ack
// seems lost (snapshotRetryTicks, driven by Tick), and gives up a transfer
// that hears nothing for snapshotStallTicks; a leader starts a new one at
// its next catch-up. Whoever sends catch-up may run a transfer: a leader
// under its ballot, or an acceptor (ballot zero) that refused a candidate
// behind it; transfers do not stop with a role, since a snapshot holds
// only chosen values.
//
// The receiver holds one transfer, named by its sender and id (a random
// number, so that a restarted sender's transfer is never taken for an
// older one's), and takes its chunks in order only. It answers every chunk
// with what it holds, so an out-of-order or duplicate chunk makes the
// sender resume from there. A chunk of another transfer replaces the one
// held only if it is a newer leader's (higher ballot), the same sender's
// next transfer, or the held one has stalled; otherwise it is refused
// (Reject), so that two senders cannot keep restarting each other. A chunk
// for a snapshot at or below the chosen index is answered as complete: the
// sender stops. The snapshot is installed once all Last bytes arrived; the
// state machine checks its data when it restores it.

// snapshotSend is a transfer this replica streams to one peer.
type snapshotSend struct {
	id      uint64
	ballot  Ballot
	image   *Snapshot // the snapshot sent, shared with other transfers
	acked   uint64    // bytes the peer holds
	sent    uint64    // end of the chunk in flight (acked if none is)
	sentAt  uint64    // tick the chunk in flight was last sent
	heardAt uint64    // tick of the last ack (or of the start)
}

// snapshotRecv is the transfer this replica receives.
type snapshotRecv struct {
	from    ReplicaID
	id      uint64
	ballot  Ballot
	meta    SnapshotMeta
	total   uint64
	data    []byte // the first len(data) bytes of the snapshot's data
	heardAt uint64 // tick the last chunk was taken (or the transfer began)
}

// snapshotRetryTicks is how long a chunk may go unanswered before it is
// sent again: two heartbeats, like other catch-up.
func snapshotRetryTicks(t Timing) uint64 { return uint64(2 * t.HeartbeatTicks) }

// snapshotStallTicks is how long a transfer may make no progress before
// the sender gives it up and the receiver lets another replace it.
func snapshotStallTicks(t Timing) uint64 { return uint64(2 * t.ElectionTicks) }

// ErrSnapshotTooLarge is returned by Step for a snapshot transfer that
// announces more than MaxSnapshotBytes.
var ErrSnapshotTooLarge = errors.New("paxos: snapshot over MaxSnapshotBytes")

// sendSnapshot streams this replica's newest snapshot to a peer whose
// chosen index is peerChosen, unless a transfer to it is under way whose
// snapshot is still at or above the compaction point: the peer can go on
// from it with entries, and the transfer's own retries cover losses. A
// transfer of an older snapshot is superseded by a new one.
func (n *Node) sendSnapshot(to ReplicaID, peerChosen uint64, ballot Ballot) {
	running := n.sends[to]
	if running != nil && running.image.Meta.Index >= n.log.compacted {
		return
	}
	image, err := n.snapshotImage()
	if errors.Is(err, ErrSnapshotTemporarilyUnavailable) {
		// The next catch-up asks again; the peer misses nothing meanwhile
		// but the time it waits.
		n.stats.SnapshotsDeferred++
		return
	}
	if err != nil {
		n.halt(fmt.Errorf("reading the snapshot to send: %w", err))
		return
	}
	if image.Meta.Index <= peerChosen || (running != nil && image.Meta.Index <= running.image.Meta.Index) {
		// The newer snapshot's write is still queued: nothing better to
		// send yet. The image read is kept only if a transfer sends it
		// (found in review: kept until the next transfer, however much
		// later).
		n.releaseImage()
		return
	}
	t := &snapshotSend{id: uint64(n.rand.Uint32()) + 1, ballot: ballot, image: image, heardAt: n.now}
	n.sends[to] = t
	n.stats.SnapshotsSent++
	n.sendChunk(to, t, 0)
}

// snapshotImage returns the newest snapshot, read from Storage once and
// shared by the transfers that send it.
func (n *Node) snapshotImage() (*Snapshot, error) {
	if n.image != nil && n.image.Meta.Index >= n.log.snapIndex {
		return n.image, nil
	}
	snap, err := n.log.storage.Snapshot()
	if err != nil {
		return nil, err
	}
	if n.image == nil || snap.Meta.Index > n.image.Meta.Index {
		n.image = &snap
	}
	return n.image, nil
}

// sendChunk sends t's chunk starting at byte from; the peer holds the
// bytes before it.
func (n *Node) sendChunk(to ReplicaID, t *snapshotSend, from uint64) {
	data := t.image.Data
	end := from + min(n.limits.MaxSnapshotChunkBytes, uint64(len(data))-from)
	n.send(Message{
		Type: MsgSnapshot, To: to, Ballot: t.ballot, Round: t.id, Commit: n.hs.Chosen,
		Start: from, Last: uint64(len(data)),
		Snapshot: &Snapshot{Meta: t.image.Meta, Data: data[from:end:end]},
	})
	t.acked, t.sent, t.sentAt = from, end, n.now
	n.stats.SnapshotChunks++
}

// endSend forgets the transfer to a peer, and the shared snapshot once no
// transfer sends it.
func (n *Node) endSend(to ReplicaID) {
	delete(n.sends, to)
	n.releaseImage()
}

// releaseImage forgets the shared snapshot unless a transfer sends it.
func (n *Node) releaseImage() {
	for _, p := range n.peers {
		if t := n.sends[p]; t != nil && t.image == n.image {
			return
		}
	}
	n.image = nil
}

// onSnapshotAck moves a transfer on: the next chunk once the one in flight
// arrived, the chunk the peer lacks if it holds less than it did, nothing
// more once it holds everything or refused.
func (n *Node) onSnapshotAck(m Message) {
	t := n.sends[m.From]
	if t == nil || t.id != m.Round || m.Last != uint64(len(t.image.Data)) {
		return // a transfer given up or superseded
	}
	t.heardAt = n.now
	switch {
	case m.Reject || m.Start == m.Last:
		n.endSend(m.From)
	case m.Start == t.sent, m.Start < t.acked:
		n.sendChunk(m.From, t, m.Start)
	}
	// Otherwise the ack is stale (a duplicate, or older than the chunk in
	// flight): the retry timer covers a lost chunk.
}

// tickSnapshots resends chunks that seem lost, gives up stalled transfers,
// and drops a received transfer that stalled or is no longer needed.
func (n *Node) tickSnapshots() {
	for _, p := range n.peers {
		t := n.sends[p]
		switch {
		case t == nil:
		case n.now-t.heardAt >= snapshotStallTicks(n.timing):
			n.endSend(p)
		case n.now-t.sentAt >= snapshotRetryTicks(n.timing):
			n.stats.Retransmissions++
			n.sendChunk(p, t, t.acked)
		}
	}
	if r := n.recv; r != nil && (r.meta.Index <= n.hs.Chosen || n.now-r.heardAt >= snapshotStallTicks(n.timing)) {
		n.recv = nil
	}
}

// onSnapshot takes a chunk of a snapshot transfer, and installs the
// snapshot once every byte arrived.
func (n *Node) onSnapshot(m Message) {
	index := m.Snapshot.Meta.Index
	if index <= n.hs.Chosen {
		// Learned already (by entries, or another transfer): the sender
		// may stop, and a leader learns where this replica stands.
		n.ackSnapshot(m, m.Last, false)
		n.replyCaughtUp(m)
		return
	}
	r := n.recv
	if r == nil || !r.same(m) {
		if r != nil && !n.replaces(m, r) {
			n.ackSnapshot(m, 0, true)
			return
		}
		r = &snapshotRecv{from: m.From, id: m.Round, ballot: m.Ballot, meta: m.Snapshot.Meta, total: m.Last, heardAt: n.now}
		n.recv = r
	}
	if m.Start != uint64(len(r.data)) {
		// Out of order, or a duplicate: the sender resumes from what is
		// held.
		n.ackSnapshot(m, uint64(len(r.data)), false)
		return
	}
	if r.data == nil {
		// Bounded by MaxSnapshotBytes (validate).
		r.data = make([]byte, 0, r.total)
	}
	r.data = append(r.data, m.Snapshot.Data...)
	r.heardAt = n.now
	if uint64(len(r.data)) < r.total {
		n.ackSnapshot(m, uint64(len(r.data)), false)
		return
	}
	n.recv = nil
	n.installSnapshot(&Snapshot{Meta: r.meta, Data: r.data})
	n.ackSnapshot(m, r.total, false)
	n.replyCaughtUp(m)
}

// same reports whether m is a chunk of r's transfer.
func (r *snapshotRecv) same(m Message) bool {
	return r.from == m.From && r.id == m.Round && r.ballot == m.Ballot &&
		r.meta.Index == m.Snapshot.Meta.Index && r.total == m.Last
}

// replaces reports whether the transfer of chunk m should replace r: it is
// a newer leader's, or its sender's next transfer (a new one starts at
// offset 0), or r stalled. Two transfers that each replaced the other
// would never finish.
func (n *Node) replaces(m Message, r *snapshotRecv) bool {
	switch {
	case n.now-r.heardAt >= snapshotStallTicks(n.timing):
		return true
	case r.ballot.Less(m.Ballot):
		return true
	case m.Ballot.Less(r.ballot) || m.From != r.from:
		return false
	}
	index := m.Snapshot.Meta.Index
	return index > r.meta.Index || (index == r.meta.Index && m.Start == 0)
}

func (n *Node) ackSnapshot(m Message, held uint64, reject bool) {
	n.send(Message{Type: MsgSnapshotAck, To: m.From, Ballot: m.Ballot, Round: m.Round,
		Start: held, Last: m.Last, Reject: reject, Chosen: n.hs.Chosen})
}

// installSnapshot takes a snapshot learned from a peer, ahead of the
// chosen index: it replaces the log at or below its index (entries not yet
// persisted there are dropped: a snapshot can overtake entries) and is
// handed to the caller in the next Ready.
func (n *Node) installSnapshot(snap *Snapshot) {
	n.log.installSnapshot(snap.Meta.Index)
	n.snap = snap
	n.setChosen(snap.Meta.Index)
	n.followChosen()
}

// validateTransfer checks a MsgSnapshot or MsgSnapshotAck.
func (n *Node) validateTransfer(m Message, bad func(string, ...any) error) error {
	switch {
	case m.Round == 0:
		return bad("transfer id is zero")
	case m.Type == MsgSnapshotAck && m.Start > m.Last:
		return bad("acknowledges %d of %d bytes", m.Start, m.Last)
	case m.Type == MsgSnapshot && !chunkFits(m.Start, uint64(len(m.Snapshot.Data)), m.Last):
		return bad("chunk of %d bytes at %d beyond the snapshot's %d", len(m.Snapshot.Data), m.Start, m.Last)
	case m.Type == MsgSnapshot && m.Last > n.limits.MaxSnapshotBytes:
		return fmt.Errorf("%w: replica %d sends a snapshot at index %d of %d bytes, over MaxSnapshotBytes (%d)",
			ErrSnapshotTooLarge, m.From, m.Snapshot.Meta.Index, m.Last, n.limits.MaxSnapshotBytes)
	}
	return nil
}

// chunkFits reports whether size bytes at offset lie within total bytes.
func chunkFits(offset, size, total uint64) bool {
	return size <= total && offset <= total-size
}

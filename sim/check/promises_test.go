package check

import (
	"testing"

	"paxcron/paxos"
)

func promiseMsg(from paxos.ReplicaID, ballot paxos.Ballot) paxos.Message {
	return paxos.Message{Type: paxos.MsgPromise, From: from, To: ballot.Replica, Ballot: ballot}
}

func acceptedMsg(from paxos.ReplicaID, ballot paxos.Ballot) paxos.Message {
	return paxos.Message{Type: paxos.MsgAccepted, From: from, To: ballot.Replica, Ballot: ballot, Through: 5, Last: 5}
}

func TestPromises(t *testing.T) {
	rejectAt := func(from paxos.ReplicaID, asked, promised paxos.Ballot) paxos.Message {
		m := promiseMsg(from, asked)
		m.Reject, m.Promised = true, promised
		return m
	}
	nack := paxos.Message{Type: paxos.MsgNack, From: 2, To: 1, Ballot: b(1, 1), Promised: b(4, 3)}
	for _, tc := range []struct {
		name  string
		sent  []paxos.Message
		inv   Invariant
		parts []string
	}{
		{"monotonic promises and accepts", []paxos.Message{
			promiseMsg(2, b(1, 1)),
			acceptedMsg(2, b(1, 1)),
			promiseMsg(2, b(1, 1)), // a duplicate prepare answered again
			promiseMsg(2, b(2, 3)),
			rejectAt(2, b(1, 1), b(2, 3)),
			acceptedMsg(2, b(2, 3)),
			acceptedMsg(3, b(1, 1)), // other acceptors are independent
			{Type: paxos.MsgPreVoteReply, From: 2, To: 1, Ballot: b(1, 1)},
			{Type: paxos.MsgHeartbeatReply, From: 2, To: 1, Ballot: b(1, 1)},
		}, 0, nil},
		{"accepted below a promise", []paxos.Message{
			promiseMsg(2, b(3, 3)),
			acceptedMsg(2, b(2, 1)),
		}, InvPromiseSafety, []string{"replica 2", "Accepted", "ballot 2.1", "promising ballot 3.3", "Promise 2->3"}},
		{"promise lost in a crash: promised again lower", []paxos.Message{
			promiseMsg(1, b(5, 2)),
			// replica 1 crashes; its promise was not synced; it comes back
			// with an older promise and promises a lower ballot.
			promiseMsg(1, b(4, 3)),
		}, InvPromiseSafety, []string{"replica 1", "Promise for ballot 4.3", "promising ballot 5.2"}},
		{"accept implies promise", []paxos.Message{
			acceptedMsg(2, b(6, 1)),
			promiseMsg(2, b(5, 3)),
		}, InvPromiseSafety, []string{"ballot 5.3", "promising ballot 6.1"}},
		{"nack reports a promise", []paxos.Message{
			nack,
			acceptedMsg(2, b(3, 1)),
		}, InvPromiseSafety, []string{"ballot 3.1", "promising ballot 4.3", "Nack"}},
		{"rejecting promise reports a promise", []paxos.Message{
			rejectAt(2, b(1, 1), b(4, 3)),
			promiseMsg(2, b(2, 1)),
		}, InvPromiseSafety, []string{"ballot 2.1", "promising ballot 4.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPromises()
			var steps []step
			for _, m := range tc.sent {
				steps = append(steps, func() error { return p.Sent(m) })
			}
			runSteps(t, steps, tc.inv, tc.parts...)
		})
	}
}

// A disk loss forgets an acceptor's promises of its own ballots (given
// to a candidacy the crash ended), never those of another's: seed
// 18016477 failed where a replica that lost its disk promised below the
// ballot of its own dead candidacy, which nobody else had promised.
func TestPromisesAcrossADiskLoss(t *testing.T) {
	own := func(p *Promises) error {
		m := promiseMsg(3, b(15, 2))
		m.Reject, m.Promised = true, b(18, 3) // 3 campaigns under 18.3
		return p.Sent(m)
	}
	// afterDiskLoss: replica 3 promised 12.1, campaigned under 18.3 and
	// lost its disk; then it promises ballot next.
	afterDiskLoss := func(t *testing.T, next paxos.Ballot, inv Invariant, parts ...string) {
		p := NewPromises()
		runSteps(t, []step{
			func() error { return p.Sent(promiseMsg(3, b(12, 1))) },
			func() error { return own(p) },
			func() error { p.DiskLost(3); return nil },
			func() error { return p.Sent(promiseMsg(3, next)) },
		}, inv, parts...)
	}
	t.Run("its own candidacy's ballot is forgotten", func(t *testing.T) {
		afterDiskLoss(t, b(18, 1), 0)
	})
	t.Run("another's ballot is still held", func(t *testing.T) {
		afterDiskLoss(t, b(11, 2), InvPromiseSafety, "replica 3", "ballot 11.2", "promising ballot 12.1")
	})
	t.Run("without a disk loss its own ballot binds it", func(t *testing.T) {
		p := NewPromises()
		runSteps(t, []step{
			func() error { return own(p) },
			func() error { return p.Sent(promiseMsg(3, b(18, 1))) },
		}, InvPromiseSafety, "replica 3", "ballot 18.1", "promising ballot 18.3")
	})
}

func TestPromisesPromised(t *testing.T) {
	p := NewPromises()
	wantOK(t, p.Sent(promiseMsg(2, b(3, 1))))
	wantOK(t, p.Sent(acceptedMsg(2, b(3, 1))))
	if got := p.Promised(2); got != b(3, 1) {
		t.Fatalf("Promised = %s, want 3.1", got)
	}
}

func TestBallots(t *testing.T) {
	accept := func(from paxos.ReplicaID, bal paxos.Ballot, es ...paxos.Entry) paxos.Message {
		return paxos.Message{Type: paxos.MsgAccept, From: from, To: 9, Ballot: bal, Entries: es}
	}
	promise := func(from paxos.ReplicaID, es ...paxos.Entry) paxos.Message {
		m := promiseMsg(from, b(9, 3))
		m.Entries = es
		return m
	}
	big := string(make([]byte, 100))
	for _, tc := range []struct {
		name  string
		sent  []paxos.Message
		inv   Invariant
		parts []string
	}{
		{"one value per ballot and slot", []paxos.Message{
			{Type: paxos.MsgPrepare, From: 1, To: 2, Ballot: b(1, 1)},
			accept(1, b(1, 1), cmd(1, 1, 1, "a"), cmd(2, 1, 1, "b")),
			accept(1, b(1, 1), cmd(2, 1, 1, "b"), noop(3, 1, 1)), // retransmission
			accept(2, b(2, 2), cmd(3, 2, 2, "c")),                // another ballot may differ
			promise(3, cmd(1, 1, 1, "a"), cmd(3, 2, 2, "c")),
			promise(3, cmd(7, 8, 1, "never seen proposed")),
			accept(1, b(3, 1), cmd(5, 3, 1, big)),
		}, 0, nil},
		{"prepare under a foreign ballot", []paxos.Message{
			{Type: paxos.MsgPrepare, From: 1, To: 2, Ballot: b(4, 2)},
		}, InvAgreement, []string{"replica 1", "Prepare", "ballot 4.2", "belongs to replica 2"}},
		{"accept under a foreign ballot", []paxos.Message{
			accept(3, b(4, 2), cmd(1, 4, 2, "a")),
		}, InvAgreement, []string{"replica 3", "Accept", "ballot 4.2"}},
		{"ballot reused for another value", []paxos.Message{
			accept(1, b(2, 1), cmd(4, 2, 1, "a")),
			// the leader crashes, forgets, and proposes again under 2.1
			accept(1, b(2, 1), cmd(4, 2, 1, "b")),
		}, InvAgreement, []string{"ballot 2.1", "slot 4", `"b"`, `"a"`}},
		{"long values are compared in full", []paxos.Message{
			accept(1, b(2, 1), cmd(4, 2, 1, big+"a")),
			accept(1, b(2, 1), cmd(4, 2, 1, big+"b")),
		}, InvAgreement, []string{"slot 4", "(101 bytes)"}},
		{"promise reports a value not proposed under its ballot", []paxos.Message{
			accept(1, b(2, 1), cmd(4, 2, 1, "a")),
			promise(3, cmd(4, 2, 1, "evil")),
		}, InvAgreement, []string{"replica 3", "slot 4", `"evil"`, "ballot 2.1 proposed", `"a"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewBallots()
			var steps []step
			for _, m := range tc.sent {
				steps = append(steps, func() error { return c.Sent(m) })
			}
			runSteps(t, steps, tc.inv, tc.parts...)
		})
	}
}

package check

import (
	"testing"

	"paxcron/paxos"
)

// TestConsensusValidHistory plays a small but complete history: an
// election, proposals, a crash and restart that re-applies, a snapshot
// install, acknowledgements, and the final check.
func TestConsensusValidHistory(t *testing.T) {
	c := NewConsensus()
	c.Proposed([]byte("a"))
	c.Proposed([]byte("b"))
	leader := b(1, 1)
	steps := []step{
		func() error {
			return c.Sent(paxos.Message{Type: paxos.MsgPrepare, From: 1, To: 2, Ballot: leader, Start: 1})
		},
		func() error { return c.Sent(promiseMsg(2, leader)) },
		func() error {
			return c.Sent(paxos.Message{Type: paxos.MsgAccept, From: 1, To: 2, Ballot: leader, Start: 1,
				Entries: []paxos.Entry{cmd(1, 1, 1, "a"), noop(2, 1, 1), cmd(3, 1, 1, "b")}})
		},
		func() error { return c.Sent(acceptedMsg(2, leader)) },
	}
	for _, r := range []paxos.ReplicaID{1, 2} {
		for _, e := range []paxos.Entry{cmd(1, 1, 1, "a"), noop(2, 1, 1), cmd(3, 1, 1, "b")} {
			steps = append(steps,
				func() error { return c.Learned(r, e) },
				func() error { return c.Applied(r, e) })
		}
	}
	steps = append(steps,
		func() error { return c.Acknowledged(1, cmd(0, 1, 1, "a")) },
		func() error { return c.Acknowledged(3, cmd(3, 1, 1, "b")) },
		func() error { c.Crashed(2); return c.Restored(2, 1) },
		func() error { return c.Applied(2, noop(2, 1, 1)) },
		func() error { return c.Restored(3, 3) },
		func() error {
			return c.CheckFinal([]ReplicaFinal{{ID: 1, Up: true, Chosen: 3}, {ID: 2, Up: true, Chosen: 3}, {ID: 3, Up: false}})
		},
	)
	runSteps(t, steps, 0)
}

func TestConsensusCatchesEachKind(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(c *Consensus) []step
		inv   Invariant
	}{
		{"validity on learn", func(c *Consensus) []step {
			return []step{func() error { return c.Learned(1, cmd(1, 1, 1, "never proposed")) }}
		}, InvValidity},
		{"validity on apply", func(c *Consensus) []step {
			return []step{func() error { return c.Applied(1, cmd(1, 1, 1, "never proposed")) }}
		}, InvValidity},
		{"agreement", func(c *Consensus) []step {
			return []step{
				func() error { return c.Learned(1, noop(1, 1, 1)) },
				func() error { c.Proposed([]byte("x")); return c.Learned(2, cmd(1, 2, 2, "x")) },
			}
		}, InvAgreement},
		{"durability before agreement", func(c *Consensus) []step {
			return []step{
				func() error { return c.Acknowledged(1, noop(1, 1, 1)) },
				func() error { c.Proposed([]byte("x")); return c.Applied(2, cmd(1, 2, 2, "x")) },
			}
		}, InvDurability},
		{"prefix", func(c *Consensus) []step {
			return []step{func() error { return c.Applied(1, noop(2, 1, 1)) }}
		}, InvPrefixOrder},
		{"promise", func(c *Consensus) []step {
			return []step{
				func() error { return c.Sent(promiseMsg(2, b(2, 1))) },
				func() error { return c.Sent(acceptedMsg(2, b(1, 3))) },
			}
		}, InvPromiseSafety},
		{"ballot", func(c *Consensus) []step {
			return []step{func() error {
				return c.Sent(paxos.Message{Type: paxos.MsgPrepare, From: 1, To: 2, Ballot: b(1, 2)})
			}}
		}, InvAgreement},
		{"final", func(c *Consensus) []step {
			return []step{
				func() error { return c.Acknowledged(1, noop(1, 1, 1)) },
				func() error { return c.CheckFinal([]ReplicaFinal{{ID: 1, Up: true, Chosen: 1}, {ID: 2}, {ID: 3}}) },
			}
		}, InvDurability},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runSteps(t, tc.steps(NewConsensus()), tc.inv)
		})
	}
}

package check

import "paxcron/paxos"

// Consensus wires the consensus checkers together so that the runner
// reports each observation once: what replicas learn and apply goes to
// Agreement, Validity, Durability and Prefix; what they send goes to
// Promises and Ballots. The parts stay reachable for their own queries.
type Consensus struct {
	Agreement  *Agreement
	Validity   *Validity
	Prefix     *Prefix
	Durability *Durability
	Promises   *Promises
	Ballots    *Ballots
}

// NewConsensus returns the consensus checkers over one shared Agreement.
func NewConsensus() *Consensus {
	a := NewAgreement()
	return &Consensus{
		Agreement:  a,
		Validity:   NewValidity(),
		Prefix:     NewPrefix(a),
		Durability: NewDurability(a),
		Promises:   NewPromises(),
		Ballots:    NewBallots(),
	}
}

// Proposed registers a command handed to a replica's Propose.
func (c *Consensus) Proposed(data []byte) { c.Validity.Proposed(data) }

// Learned checks an entry replica r learned as chosen (Ready.Committed).
func (c *Consensus) Learned(r paxos.ReplicaID, e paxos.Entry) error {
	if err := c.Validity.Learned(r, e); err != nil {
		return err
	}
	if err := c.Durability.Learned(r, e); err != nil {
		return err
	}
	return c.Agreement.Learned(r, e)
}

// Applied checks an entry replica r applied to its state machine.
func (c *Consensus) Applied(r paxos.ReplicaID, e paxos.Entry) error {
	if err := c.Validity.Learned(r, e); err != nil {
		return err
	}
	if err := c.Durability.Learned(r, e); err != nil {
		return err
	}
	return c.Prefix.Applied(r, e)
}

// Restored records that replica r's state machine stands at a snapshot's
// index (a snapshot install, or a restart from one; 0 for none).
func (c *Consensus) Restored(r paxos.ReplicaID, index uint64) error {
	return c.Prefix.Restored(r, index)
}

// Crashed records that replica r crashed and lost its volatile state.
func (c *Consensus) Crashed(r paxos.ReplicaID) { c.Prefix.Crashed(r) }

// DiskLost records that replica r, crashed, lost its disk too.
func (c *Consensus) DiskLost(r paxos.ReplicaID) { c.Promises.DiskLost(r) }

// Acknowledged records that a client was told e committed at slot.
func (c *Consensus) Acknowledged(slot uint64, e paxos.Entry) error {
	return c.Durability.Acknowledged(slot, e)
}

// Sent checks a message replica m.From sent.
func (c *Consensus) Sent(m paxos.Message) error {
	if err := c.Promises.Sent(m); err != nil {
		return err
	}
	return c.Ballots.Sent(m)
}

// CheckFinal runs the end-of-run durability check (see
// Durability.CheckFinal).
func (c *Consensus) CheckFinal(replicas []ReplicaFinal) error {
	return c.Durability.CheckFinal(replicas)
}

package check

import (
	"time"

	"paxcron/paxos"
)

// Lease checks the consensus half of invariant 9: at any instant of true
// (simulated) time at most one replica believes it holds the leader lease,
// as long as every clock keeps within the drift bound the core was
// configured with. The cron layer will talk to Nomad only under the lease,
// so this is its mutual exclusion.
type Lease struct {
	holder paxos.ReplicaID
	since  time.Duration
}

// NewLease returns a lease checker that has seen no holder.
func NewLease() *Lease { return &Lease{} }

// Holders checks the replicas that believe they hold the lease at true
// time at; it must be called whenever any replica's belief may change.
func (l *Lease) Holders(at time.Duration, holders []paxos.ReplicaID) error {
	switch len(holders) {
	case 0:
		l.holder = paxos.None
		return nil
	case 1:
		if holders[0] != l.holder {
			l.holder, l.since = holders[0], at
		}
		return nil
	}
	return violation(InvLease, "at %v replicas %v all believe they hold the lease (replica %d since %v)", at, holders, l.holder, l.since)
}

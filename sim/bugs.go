package sim

import (
	"paxcron/storage"
	"paxcron/storage/memstore"
)

// plantedBug is a known defect the simulator can plant to prove that its
// checkers catch it: a checker that cannot fail proves nothing.
type plantedBug struct {
	// wrapStore replaces a replica's store.
	wrapStore func(*memstore.Store) storage.Store
	// wipeAsVoter restarts a replica that lost its disk as a voter.
	wipeAsVoter bool
	// ackOnPropose tells the client a command committed as soon as the
	// leader took it.
	ackOnPropose bool
	// clockDriftPPM lets clocks drift further than the core assumes.
	clockDriftPPM int
}

var plantedBugs = map[string]*plantedBug{
	// A store that acknowledges a promise without making it durable: a
	// crash then lets the acceptor promise or accept a lower ballot.
	"unsynced-promise": {wrapStore: func(s *memstore.Store) storage.Store { return &forgetfulStore{Store: s} }},
	"wipe-as-voter":    {wipeAsVoter: true},
	"ack-on-propose":   {ackOnPropose: true},
	// Clocks 30% off true time while the core budgets 1%: leases overlap.
	"clock-beyond-bound": {clockDriftPPM: 300_000},
}

// PlantedBugs lists the bugs Options.Bug accepts.
func PlantedBugs() []string {
	return []string{"ack-on-propose", "clock-beyond-bound", "unsynced-promise", "wipe-as-voter"}
}

// forgetfulStore drops every hard state write: promises never reach the
// disk, though the replica believes they did.
type forgetfulStore struct {
	*memstore.Store
}

func (s *forgetfulStore) Save(u storage.Update) error {
	u.HardState = nil
	return s.Store.Save(u)
}

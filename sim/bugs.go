package sim

import (
	"time"

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
	// forgetHorizon gives the launchers a memory horizon far beyond
	// Nomad's, which nomadGC makes short: old open launches are then
	// dispatched again after Nomad forgot their first child.
	forgetHorizon bool
	nomadGC       time.Duration
	// noToken dispatches without the launch identity as the token.
	noToken bool
	// fakeSuccess answers every dispatch with success, without Nomad.
	fakeSuccess bool
	// ignoreLease tells a leader's launcher it holds the lease whether or
	// not it does.
	ignoreLease bool
}

var plantedBugs = map[string]*plantedBug{
	// A store that acknowledges a promise without making it durable: a
	// crash then lets the acceptor promise or accept a lower ballot.
	"unsynced-promise": {wrapStore: func(s *memstore.Store) storage.Store { return &forgetfulStore{Store: s} }},
	"wipe-as-voter":    {wipeAsVoter: true},
	"ack-on-propose":   {ackOnPropose: true},
	// Clocks 30% off true time while the core budgets 1%: leases overlap.
	"clock-beyond-bound": {clockDriftPPM: 300_000},
	"forget-horizon":     {forgetHorizon: true, nomadGC: 500 * time.Millisecond},
	"no-token":           {noToken: true},
	"fake-success":       {fakeSuccess: true},
	"ignore-lease":       {ignoreLease: true},
}

// PlantedBugs lists the bugs Options.Bug accepts.
func PlantedBugs() []string {
	return []string{"ack-on-propose", "clock-beyond-bound", "fake-success", "forget-horizon", "ignore-lease", "no-token", "unsynced-promise", "wipe-as-voter"}
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

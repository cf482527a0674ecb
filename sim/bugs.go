package sim

import (
	"hash/fnv"
	"slices"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
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
	// falseSkip is a launcher that concludes some of the launches it
	// starts as skipped, for a reason that does not hold: given replica
	// n's start, it returns that skip, or the zero Outcome to leave the
	// launch alone.
	// The skip is proposed right behind the start, in the leader's term,
	// and the launcher's own dispatch of it is held back until it is
	// applied, so that no child betrays it: only the reason is false.
	falseSkip func(c *cluster, n *node, start state.LaunchStarted) state.Outcome
	// runningLooksDone answers every question whether a child still runs
	// with "no", without asking Nomad: a client that misreads a child's
	// status.
	runningLooksDone bool
	// stallBeforeHeal leaves the launchers unstepped for 6 s of every 10
	// until the faults heal, as a launcher stuck in a loop would be while
	// its replica keeps the lease: launches come due and wait.
	stallBeforeHeal bool
	// slowManual holds each dispatch of a manual launch this long before
	// sending it to Nomad, as a launcher that queued manual launches
	// behind a timer would (simDispatcher.holdManual).
	slowManual time.Duration
	// hideSuperseded hides from the cron checker the record a schedule
	// edit makes of the slot the old schedule owed and the new one does
	// not have (state.ReasonSuperseded), as a state that dropped that
	// slot would show the job: with nothing recorded for it.
	hideSuperseded bool
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
	"stall-before-heal":  {stallBeforeHeal: true},
	"running-looks-done": {runningLooksDone: true},
	// A launcher that sends a manual launch's dispatch 5 s after deciding
	// it (the lateness bound is 4 s).
	"slow-manual": {slowManual: 5 * time.Second},
	// A state that drops a due slot a schedule edit supersedes.
	"edit-drops-owed-slot": {hideSuperseded: true},
	// A launcher that says "job paused" of one launch in three of jobs
	// that are not paused.
	"false-pause": {falseSkip: func(c *cluster, n *node, start state.LaunchStarted) state.Outcome {
		if info, ok := n.machine.Info(start.Job); !ok || info.Paused || !picked(start.Identity, 3) {
			return state.Outcome{}
		}
		return state.Outcome{Kind: state.OutcomeSkipped, Reason: launcher.ReasonPaused}
	}},
	// A launcher that applies concurrency forbid to jobs whose policy is
	// allow: their previous child "still runs".
	"forbid-on-allow": {falseSkip: func(c *cluster, n *node, start state.LaunchStarted) state.Outcome {
		info, ok := n.machine.Info(start.Job)
		if !ok || info.Spec.Concurrency != state.ConcurrencyAllow || info.LastChild.ID == "" {
			return state.Outcome{}
		}
		return forbidSkip(info.LastChild.ID)
	}},
	// A launcher whose forbid policy does not ask Nomad: it skips a forbid
	// job's launch although Nomad's record says the previous child has
	// finished.
	"stale-forbid": {falseSkip: func(c *cluster, n *node, start state.LaunchStarted) state.Outcome {
		info, ok := n.machine.Info(start.Job)
		if !ok || info.Spec.Concurrency != state.ConcurrencyForbid || info.LastChild.ID == "" {
			return state.Outcome{}
		}
		if ch, ok := c.nomad.ChildByID(info.LastChild.ID); !ok || ch.FinishedAt > c.sched.Now() {
			return state.Outcome{} // still running: a forbid skip would be true
		}
		return forbidSkip(info.LastChild.ID)
	}},
}

// forbidSkip is the launcher's forbid skip, naming child.
func forbidSkip(child string) state.Outcome {
	return state.Outcome{Kind: state.OutcomeSkipped, ChildID: child, Reason: launcher.ReasonForbid(child)}
}

// picked reports whether s is one of one in n, by its hash: a stable
// choice of the launches a planted bug touches.
func picked(s string, n uint32) bool {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()%n == 0
}

// PlantedBugs lists the bugs Options.Bug accepts.
func PlantedBugs() []string {
	return []string{"ack-on-propose", "clock-beyond-bound", "edit-drops-owed-slot", "fake-success", "false-pause", "forbid-on-allow", "forget-horizon", "ignore-lease",
		"no-token", "running-looks-done", "slow-manual", "stale-forbid", "stall-before-heal", "unsynced-promise", "wipe-as-voter"}
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

// withoutSuperseded is job j as the state holds it after the PutJob at
// slot, less the record of a slot that edit superseded: the only history
// entry a PutJob's slot concludes.
func withoutSuperseded(j state.Job, slot uint64) state.Job {
	j.History = slices.DeleteFunc(j.History, func(l state.Launch) bool { return l.FinishedSlot == slot })
	return j
}

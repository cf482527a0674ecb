package sim

import (
	"paxcron/cron/state"
	"slices"
	"strings"
	"testing"
	"time"

	"paxcron/sim/check"
)

// skipUnderRace skips a test that runs many seeds when the race detector
// is on (see raceEnabled); `make test` runs it without.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("many seeds on one goroutine each: run without -race (make test does)")
	}
}

func TestSeedsPass(t *testing.T) {
	skipUnderRace(t)
	seeds := uint64(30)
	if testing.Short() {
		seeds = 5
	}
	for seed := range seeds {
		for _, replicas := range []int{3, 5} {
			o := DefaultOptions(seed)
			o.Replicas = replicas
			if r := Run(o); r.Err != nil {
				t.Fatalf("seed %d, %d replicas: %v\nfaults: %s\nreplay: go run ./cmd/paxcron-sim -seeds 1 -start %d -replicas %d -v",
					seed, replicas, r.Err, r.FaultSummary(), seed, replicas)
			}
		}
	}
}

// Invariant 13: the same seed yields the same trace, bit for bit.
func TestDeterminism(t *testing.T) {
	for seed := range uint64(5) {
		a, b := Run(DefaultOptions(seed)), Run(DefaultOptions(seed))
		if a.TraceHash != b.TraceHash || a.Events != b.Events || a.Acked != b.Acked {
			t.Fatalf("seed %d: two runs differ: trace %x/%x events %d/%d acked %d/%d",
				seed, a.TraceHash, b.TraceHash, a.Events, b.Events, a.Acked, b.Acked)
		}
		if c := Run(DefaultOptions(seed + 1000)); c.TraceHash == a.TraceHash {
			t.Fatalf("seeds %d and %d share a trace hash", seed, seed+1000)
		}
	}
}

// Invariant 14: a swarm of seeds injects every fault type, and the runs
// commit work (a run that commits nothing proves nothing).
func TestEveryFaultIsExercised(t *testing.T) {
	skipUnderRace(t)
	seen := map[string]int{}
	acked := 0
	var lost, duplicated, reordered, partitioned uint64
	for seed := range uint64(20) {
		r := Run(DefaultOptions(seed))
		if r.Err != nil {
			t.Fatalf("seed %d: %v", seed, r.Err)
		}
		for _, k := range sortedKeys(r.Faults) {
			seen[k] += r.Faults[k]
		}
		acked += r.Acked
		lost += r.Network.DroppedLoss
		duplicated += r.Network.Duplicated
		reordered += r.Network.Reordered
		partitioned += r.Network.DroppedPartition
	}
	if lost == 0 || duplicated == 0 || reordered == 0 || partitioned == 0 {
		t.Errorf("network faults across 20 seeds: lost %d, duplicated %d, reordered %d, cut by partitions %d; each must happen",
			lost, duplicated, reordered, partitioned)
	}
	for _, k := range append(FaultKinds(), "corruption detected", "snapshot taken", "overlapping writes", "snapshot off thread", "snapshot saved after later writes",
		"snapshot read in the background", "work left by a bounded Process",
		"snapshot decoded in the background", "entries held behind a decoding snapshot",
		"held entries left to later Processes") {
		if seen[k] == 0 {
			t.Errorf("fault %q never injected across 20 seeds: %v", k, seen)
		}
	}
	if acked < 20*100 {
		t.Errorf("only %d commands acknowledged across 20 seeds", acked)
	}
}

// Each planted bug must be caught by the checker that guards it: a checker
// that cannot fail proves nothing. Other invariants may break first on
// some seeds (a beyond-bound clock also slows elections), which is fine.
func TestPlantedBugsAreCaught(t *testing.T) {
	skipUnderRace(t)
	want := map[string][]string{
		"unsynced-promise": {"invariant 5"},
		// A voter that forgot its promises breaks promise safety, then
		// agreement or durability, whichever a seed reaches first.
		"wipe-as-voter":        {"invariant 1", "invariant 3", "invariant 5"},
		"ack-on-propose":       {"invariant 3"},
		"clock-beyond-bound":   {"invariant 9"},
		"forget-horizon":       {"invariant 7"},
		"no-token":             {"invariant 7"},
		"fake-success":         {"invariant 8"},
		"false-pause":          {"invariant 8"},
		"forbid-on-allow":      {"invariant 8"},
		"stale-forbid":         {"invariant 8"},
		"ignore-lease":         {"invariant 9"},
		"stall-before-heal":    {"invariant 8"},
		"running-looks-done":   {"invariant 7"},
		"slow-manual":          {"invariant 8"},
		"edit-drops-owed-slot": {"invariant 8"},
	}
	// A bug also caught by an older check (a manual launch held past the
	// run's end is still open there) must show in the check that guards
	// it: a manual launch dispatched late while healthy.
	says := map[string][]string{"slow-manual": {"violated: manual launch ", "late (bound"}}
	// A bug that shows only between faults needs runs calm enough to
	// have healthy intervals before the heal (see health.go).
	calm := map[string]bool{"stall-before-heal": true}
	// Clocks that far off make most runs miss launches (invariant 8, by
	// design beyond the bound) before a deposed leader calls Nomad: about
	// one seed in 40 shows the overlap (8 of 300: paxcron-sim -seeds 300
	// -bug clock-beyond-bound), so this one gets more seeds.
	seeds := map[string]uint64{"clock-beyond-bound": 240}
	for _, bug := range PlantedBugs() {
		caught := 0
		n := seeds[bug]
		if n == 0 {
			n = 40
		}
		for seed := range n {
			o := DefaultOptions(seed)
			o.Bug = bug
			if calm[bug] {
				o.FaultEvery = calmFaultEvery
			}
			r := Run(o)
			if r.Err == nil {
				continue
			}
			if !strings.Contains(r.Err.Error(), "check: invariant") {
				t.Errorf("bug %s, seed %d: failed without an invariant report: %v", bug, seed, r.Err)
			}
			for _, inv := range want[bug] {
				if strings.Contains(r.Err.Error(), inv+" (") && !slices.ContainsFunc(says[bug], func(s string) bool { return !strings.Contains(r.Err.Error(), s) }) {
					caught++
				}
			}
			if caught > 0 {
				break
			}
		}
		if caught == 0 {
			t.Errorf("planted bug %s was never caught by %s in %d seeds", bug, want[bug], n)
		}
	}
}

// TestAtLeastOnceIsExercised: in some seeds an at-least-once launch's
// child is forgotten by Nomad while the launch is open, and a later leader
// dispatches it again; the checker allows the second child only then.
// About 1 seed in 150 does this; the test searches the first 1,000 for two
// (pinned seeds went stale whenever a new fault kind shifted the draws).
func TestAtLeastOnceIsExercised(t *testing.T) {
	skipUnderRace(t)
	var found []uint64
	for seed := uint64(1); seed <= 1000 && len(found) < 2; seed++ {
		r := Run(DefaultOptions(seed))
		if r.Err != nil {
			t.Fatalf("seed %d: %v", seed, r.Err)
		}
		if r.Cron.SecondChildren > 0 {
			found = append(found, seed)
		}
	}
	if len(found) < 2 {
		t.Fatalf("only seeds %v of the first 1,000 dispatch an at-least-once launch again; want 2", found)
	}
	t.Logf("seeds %v dispatch an at-least-once launch again", found)
}

// The cron workload must exercise every path of the launch protocol: a
// run where nothing is dispatched, skipped or looked up proves nothing.
func TestCronIsExercised(t *testing.T) {
	skipUnderRace(t)
	var l CronStats
	justified := map[string]uint64{}
	forbidJudged := uint64(0)
	for seed := range uint64(exercisedSeeds) {
		r := Run(DefaultOptions(seed))
		if r.Err != nil {
			t.Fatalf("seed %d: %v", seed, r.Err)
		}
		c := r.Cron
		l.Launches.Started += c.Launches.Started
		l.Launches.Dispatched += c.Launches.Dispatched
		l.Launches.Skipped += c.Launches.Skipped
		l.Launches.Failed += c.Launches.Failed
		l.Launches.Unknown += c.Launches.Unknown
		l.Calls += c.Calls
		l.Promotions += c.Promotions
		l.StateMapRebuilds += c.StateMapRebuilds
		l.LeaderMapRebuilds += c.LeaderMapRebuilds
		l.RestoreMoves += c.RestoreMoves
		l.Manual += c.Manual
		l.Backfilled += c.Backfilled
		l.Nomad.CallsLookup += c.Nomad.CallsLookup
		l.Nomad.CallsRunning += c.Nomad.CallsRunning
		l.Nomad.CallsStop += c.Nomad.CallsStop
		l.Nomad.RepliesLost += c.Nomad.RepliesLost
		l.Nomad.NotSent += c.Nomad.NotSent
		l.Nomad.FailedDown += c.Nomad.FailedDown
		l.Nomad.Rejected += c.Nomad.Rejected
		l.Nomad.Collected += c.Nomad.Collected
		for k, n := range c.Checked.Justified {
			justified[k] += n
		}
		forbidJudged += c.Checked.ForbidJudged
	}
	// The checker judged every kind of skip and failure against its own
	// view, the failures of forbid and replace too (the workload's
	// short-window policy jobs see Nomad outages outlast their window).
	for _, k := range check.ReasonClasses() {
		if justified[k] == 0 {
			t.Errorf("across %d seeds, the checker justified no skip or failure as %q: %v", exercisedSeeds, k, justified)
		}
	}
	for what, n := range map[string]uint64{
		"launches started": l.Launches.Started, "dispatched": l.Launches.Dispatched, "skipped": l.Launches.Skipped,
		"failed": l.Launches.Failed, "concluded unknown": l.Launches.Unknown, "launcher takeovers": l.Promotions,
		"lookups": l.Nomad.CallsLookup, "running checks (forbid)": l.Nomad.CallsRunning, "stops (replace)": l.Nomad.CallsStop,
		"replies lost": l.Nomad.RepliesLost, "calls never sent": l.Nomad.NotSent, "calls while Nomad was down": l.Nomad.FailedDown,
		"dispatches refused": l.Nomad.Rejected, "children collected": l.Nomad.Collected,
		"forbid children judged against the job's others": forbidJudged,
		"state maps rebuilt far below their peak":         l.StateMapRebuilds, "leader maps rebuilt": l.LeaderMapRebuilds,
		"restored states moved out of the restore's memory": l.RestoreMoves,
	} {
		if n == 0 {
			t.Errorf("across %d seeds, %s: none", exercisedSeeds, what)
		}
	}
	if l.Launches.Dispatched < 20*exercisedSeeds {
		t.Errorf("only %d launches dispatched across %d seeds", l.Launches.Dispatched, exercisedSeeds)
	}
}

// exercisedSeeds is how many seeds TestCronIsExercised runs: the rarest
// reason, a policy applied without looking up an unknown launch, came in
// 2 of seeds 0-99 at 8b47e29 (none in 0-19 once 878d10c moved the runs;
// `paxcron-sim -seeds 100` prints the counts).
const exercisedSeeds = 100

// calmFaultEvery is a fault rate that leaves healthy intervals before the
// heal: at the default, a leader holds no lease half of that time.
const calmFaultEvery = 5 * time.Second

// Launches are held to the lateness bound in the healthy intervals
// between faults, not only in the healed tail: in calm runs the checker
// judges launches there, manual ones too, and they pass.
func TestHealthyIntervalsAreJudged(t *testing.T) {
	skipUnderRace(t)
	var early, manual uint64
	for seed := range uint64(10) {
		o := DefaultOptions(seed)
		o.FaultEvery = calmFaultEvery
		r := Run(o)
		if r.Err != nil {
			t.Fatalf("seed %d (faults every %v): %v", seed, calmFaultEvery, r.Err)
		}
		early += r.Cron.Checked.OnTimeEarly
		manual += r.Cron.Checked.OnTimeManualEarly
	}
	if early == 0 || manual == 0 {
		t.Errorf("10 calm seeds judged %d launches, %d of them manual, in a healthy interval before the heal: want both", early+manual, manual)
	}
	t.Logf("%d scheduled and %d manual launches judged on time before the heal", early, manual)
}

func TestOptionsValidated(t *testing.T) {
	o := DefaultOptions(1)
	o.Bug = "no-such-bug"
	if r := Run(o); r.Err == nil {
		t.Fatal("unknown bug accepted")
	}
	o = DefaultOptions(1)
	o.HealAt = o.Duration
	if r := Run(o); r.Err == nil {
		t.Fatal("no time left for liveness accepted")
	}
}

// Seeds that once failed, kept as regressions. Each names what it caught.
var regressionSeeds = []struct {
	seed     uint64
	replicas int
	why      string
}{
	{16238, 3, "an at-least-once launch dispatched again past the horizon, its job deleted before the call: it was recorded skipped though an earlier child ran"},
	{3924, 3, "a lost disk's rebuilding mark not yet durable when a power cut hit: it came back a voter"},
	{12836, 3, "same, a no-op chosen over an acknowledged command"},
	{14235, 3, "same"},
	{15333, 3, "same"},
	{12617, 3, "a resend started below the leader's start after a catch-up reply"},
	{15562, 3, "same"},
	{100723, 5, "same, five replicas"},
	{101602, 5, "same, five replicas"},
	{3677, 3, "async disk: a local snapshot queued behind a newer one from the leader"},
	{8113, 3, "same"},
	{16883, 3, "same"},
	{1953, 3, "cron: a job re-created by a client whose clock was behind started a launch its namesake had started (same identity)"},
	{63, 3, "cron: an isolated old leader's skip, re-proposed by a later leader, overwrote a dispatch its successor had made"},
	{95, 3, "same"},
	{10076, 3, "cron: a re-created job's manual trigger reused its namesake's manual launch identity"},
	{3166, 3, "cron: a deleted job's open launch, its name re-created, waited for ever on the new job's forbid policy"},
	{14028, 3, "same"},
	{19455, 3, "same, a manual launch"},
	{11004399, 3, "the simulator: a graceful handover draining at the heal, its leader's launches held to the lateness bound"},
	{11012839, 3, "same"},
	{11017030, 3, "same"},
}

// Regression seeds recorded since DefaultOptions draws the state's
// limits; those above ran with the defaults when they failed, and still
// do.
var regressionSeedsDrawnLimits = []struct {
	seed     uint64
	replicas int
	why      string
}{
	{14000935, 3, "the simulator: a launch that waited for room among all jobs' open launches held to the lateness bound in the healed tail"},
	{18016477, 3, "the simulator: a replica that lost its disk held to its promise of its own dead candidacy's ballot"},
}

func TestRegressionSeeds(t *testing.T) {
	skipUnderRace(t)
	for i, r := range append(regressionSeeds, regressionSeedsDrawnLimits...) {
		o := DefaultOptions(r.seed)
		o.Replicas = r.replicas
		if i < len(regressionSeeds) {
			o.State = state.DefaultLimits()
		}
		if res := Run(o); res.Err != nil {
			t.Errorf("seed %d (%d replicas), which once caught %q: %v", r.seed, r.replicas, r.why, res.Err)
		}
	}
}

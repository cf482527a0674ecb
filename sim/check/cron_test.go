package check

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

var cronT0 = time.Date(2026, 3, 8, 6, 59, 40, 0, time.UTC)

func cronJob(name, expr string, version uint64) state.Job {
	return state.Job{Name: name, Spec: state.JobSpec{Schedule: expr, NomadJob: "batch"}, Version: version, CreatedVersion: version, CreatedAt: cronT0}
}

func startCmd(job string, at time.Time) state.LaunchStarted {
	return state.LaunchStarted{Job: job, ScheduledAt: at, Identity: state.Identity(job, at), SpecVersion: 1, At: at}
}

func finishCmd(job string, at time.Time, o state.Outcome) state.LaunchFinished {
	return state.LaunchFinished{Job: job, ScheduledAt: at, Outcome: o}
}

func dispatched(child string) state.Outcome {
	return state.Outcome{Kind: state.OutcomeDispatched, ChildID: child}
}

func sec(n int) time.Time { return cronT0.Add(time.Duration(n) * time.Second) }

// fakeNomad is the checker's view of a Nomad with the parent jobs that
// refused does not list, and children.
type fakeNomad struct {
	refused  map[string]bool // by NomadJob
	children map[string]NomadChild
}

func (n *fakeNomad) Refuses(t state.Target) bool { return n.refused[t.NomadJob] }

func (n *fakeNomad) Child(id string) (NomadChild, bool) {
	ch, ok := n.children[id]
	return ch, ok
}

func newCron() *Cron { return NewCron(CronConfig{Nomad: &fakeNomad{}}) }

// put records job j created (or replaced) at slot, as the log chose it
// at j.CreatedAt.
func put(t *testing.T, c *Cron, slot uint64, j state.Job) {
	t.Helper()
	wantOK(t, c.Applied(slot, j.CreatedAt, state.PutJob{Name: j.Name, Spec: j.Spec, At: j.CreatedAt}, j))
}

// endJob is job "a" as the state holds it at the end, under expr (the
// checker counts its next slot from the last launch it saw), its NextAt
// the state's.
func endJob(expr string, next time.Time) state.Job {
	j := cronJob("a", expr, 1)
	j.NextAt = next
	return j
}

func TestCronStartedFollowsSchedule(t *testing.T) {
	j := cronJob("a", "*/5 * * * * *", 1)
	c := newCron()
	runSteps(t, []step{
		func() error { return c.Started(1, sec(5), startCmd("a", sec(5)), j) },    // 06:59:45
		func() error { return c.Started(2, sec(10), startCmd("a", sec(10)), j) },  // 06:59:50
		func() error { return c.Started(3, sec(20), startCmd("a", sec(20)), j) }}, // planted: 06:59:55 jumped over
		InvNoSilentSkip, `job "a"`, "06:59:55", "jumped over")
}

func TestCronStartedAcrossDSTAndRecreation(t *testing.T) {
	// New York springs forward at 07:00:00Z (02:00 local becomes 03:00):
	// an every-10-seconds schedule in local time keeps its cadence.
	j := cronJob("ny", "*/10 * * * * *", 1)
	j.Spec.TimeZone = "America/New_York"
	c := newCron()
	for i, s := range []int{10, 20, 30, 40} {
		wantOK(t, c.Started(uint64(i+1), sec(s), startCmd("ny", sec(s)), j))
	}
	// Deleted with its 06:59:40+40 launch open, re-created at version 2:
	// it counts from that launch.
	j2 := cronJob("ny", "*/10 * * * * *", 2)
	j2.Spec.TimeZone = "America/New_York"
	j2.CreatedAt = sec(35)
	wantOK(t, c.Started(5, sec(50), startCmd("ny", sec(50)), j2))
	// A launch already started is a double start.
	wantViolation(t, c.Started(6, sec(50), startCmd("ny", sec(50)), j2), InvAtMostOnce, "ny-", "slot 5", "slot 6")
}

func TestCronFinished(t *testing.T) {
	c := newCron()
	j := cronJob("a", "* * * * * *", 1)
	runSteps(t, []step{
		func() error { return c.Started(1, sec(1), startCmd("a", sec(1)), j) },
		func() error { return c.Finished(2, sec(10), finishCmd("a", sec(1), dispatched("x"))) },
		func() error { return c.Finished(3, sec(10), finishCmd("a", sec(2), dispatched("y"))) }}, // planted: never started
		InvNoSilentSkip, "never started")
	wantViolation(t, c.Finished(4, sec(10), finishCmd("a", sec(1), dispatched("x"))), InvNoSilentSkip, "finished twice")
}

func TestCronCallNeedsLease(t *testing.T) {
	c := newCron()
	req := launcher.Request{Op: launcher.OpDispatch, Identity: "a-1"}
	wantOK(t, c.Call(time.Second, 1, req, true))
	wantViolation(t, c.Call(time.Second, 2, req, false), InvLease, "replica 2", "dispatch a-1", "without holding the lease")
}

func TestCronLeaseToldIsHeld(t *testing.T) {
	c := newCron()
	end := time.Unix(100, 0)
	wantOK(t, c.LeaseTold(time.Second, 1, 3, end, end, true))
	wantOK(t, c.LeaseTold(time.Second, 1, 3, time.Time{}, time.Time{}, false)) // a stint ended
	wantViolation(t, c.LeaseTold(time.Second, 1, 3, end, end, false), InvLease, "replica 1", "stint 3", "without holding the lease")
	wantViolation(t, c.LeaseTold(time.Second, 2, 3, end.Add(time.Millisecond), end, true), InvLease, "replica 2", "past its own")
}

func TestCronCallInTheToldStint(t *testing.T) {
	c := newCron()
	req := launcher.Request{Op: launcher.OpDispatch, Identity: "a-1", Stint: 2}
	wantOK(t, c.CallStint(time.Second, 1, req, 2, true))
	wantOK(t, c.CallStint(time.Second, 1, req, 0, false)) // no lease told
	wantViolation(t, c.CallStint(time.Second, 1, req, 3, true), InvLease, "replica 1", "in stint 2", "stint 3")
	wantViolation(t, c.CallStint(time.Second, 1, req, 2, false), InvLease, "lease live: false")
}

// cronRun is a small history: job a every second, launches 1-3 started;
// the caller finishes them and gives Nomad's children.
func cronRun(t *testing.T) *Cron {
	t.Helper()
	c := newCron()
	j := cronJob("a", "* * * * * *", 1)
	put(t, c, 1, j)
	for s := 1; s <= 3; s++ {
		wantOK(t, c.Started(uint64(1+s), sec(s), startCmd("a", sec(s)), j))
	}
	return c
}

func child(s int, id string, late time.Duration) NomadChild {
	return NomadChild{ID: id, Token: state.Identity("a", sec(s)), CreatedAt: sec(s).Add(late)}
}

func TestCronFinal(t *testing.T) {
	ms := 100 * time.Millisecond
	good := []NomadChild{child(1, "c1", ms), child(2, "c2", ms), child(3, "c3", ms)}
	finishAll := func(t *testing.T, c *Cron, outcomes ...state.Outcome) {
		for i, o := range outcomes {
			wantOK(t, c.Finished(uint64(10+i), sec(10), finishCmd("a", sec(i+1), o)))
		}
	}
	final := func(children []NomadChild) CronFinal {
		return CronFinal{End: sec(10), Bound: 2 * time.Second, Healthy: []Interval{{From: sec(1), To: sec(10)}}, Children: children,
			Jobs: []state.Job{endJob("0 0 * * *", sec(9))}}
	}
	skippedLate := state.Outcome{Kind: state.OutcomeSkipped, Reason: "missed: no leader could launch it within its catch-up window (3s late, window 2s)"}
	window2s := func(t *testing.T, c *Cron) {
		j := cronJob("a", "* * * * * *", 1)
		j.Spec.CatchupWindow = 2 * time.Second
		put(t, c, 5, j)
	}
	for _, tc := range []struct {
		name     string
		before   func(*testing.T, *Cron) // before the outcomes
		outcomes []state.Outcome
		mutate   func(*CronFinal)
		inv      Invariant
		parts    []string
	}{
		{name: "all dispatched", outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), dispatched("c3")}},
		{name: "paused is fine while healthy", before: func(t *testing.T, c *Cron) { wantOK(t, c.Applied(5, sec(3), state.Pause{Name: "a"}, state.Job{})) }, outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), {Kind: state.OutcomeSkipped, Reason: "job paused"}},
			mutate: func(f *CronFinal) { f.Children = f.Children[:2] }},
		{name: "two children for one launch", outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), dispatched("c3")},
			mutate: func(f *CronFinal) { f.Children = append(f.Children, child(2, "c2-again", time.Second)) },
			inv:    InvAtMostOnce, parts: []string{"2 children", "c2, c2-again"}},
		{name: "child of a launch never started", outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), dispatched("c3")},
			mutate: func(f *CronFinal) { f.Children = append(f.Children, child(7, "c7", 0)) },
			inv:    InvAtMostOnce, parts: []string{"c7", "never started"}},
		{name: "dispatched without a child", outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), dispatched("c3")},
			mutate: func(f *CronFinal) { f.Children = f.Children[:2] },
			inv:    InvNoSilentSkip, parts: []string{"recorded dispatched as c3", "no child"}},
		{name: "a child recorded as failed", outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), {Kind: state.OutcomeFailed, Reason: "dispatch failed 3 times, last: timeout"}},
			inv: InvNoSilentSkip, parts: []string{"recorded failed", "made child c3"}},
		{name: "open at the end", outcomes: []state.Outcome{dispatched("c1"), dispatched("c2")},
			inv: InvNoSilentSkip, parts: []string{"still open at the end"}},
		{name: "a due launch never started", outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), dispatched("c3")},
			mutate: func(f *CronFinal) { f.Jobs[0].NextAt = sec(4) },
			inv:    InvNoSilentSkip, parts: []string{"never started"}},
		// The state lost the every-second job's next slot: by its own
		// count the checker knows sec(4) was due.
		{name: "a next slot the state forgot", outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), dispatched("c3")},
			mutate: func(f *CronFinal) { f.Jobs[0] = endJob("* * * * * *", time.Time{}) },
			inv:    InvNoSilentSkip, parts: []string{"slot " + sec(4).Format(time.RFC3339), "never started"}},
		{name: "missed while healthy", before: window2s, outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), skippedLate},
			mutate: func(f *CronFinal) { f.Children = f.Children[:2] },
			inv:    InvNoSilentSkip, parts: []string{"while the cluster and Nomad were healthy", "catch-up window"}},
		{name: "missed before healthy is recorded, fine", before: window2s, outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), skippedLate},
			mutate: func(f *CronFinal) { f.Children = f.Children[:2]; f.Healthy[0].From = sec(4) }},
		{name: "dispatched too late while healthy", outcomes: []state.Outcome{dispatched("c1"), dispatched("c2"), dispatched("c3")},
			mutate: func(f *CronFinal) { f.Children[2].CreatedAt = sec(3).Add(3 * time.Second) },
			inv:    InvNoSilentSkip, parts: []string{"3s late", "bound 2s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cronRun(t)
			if tc.before != nil {
				tc.before(t, c)
			}
			finishAll(t, c, tc.outcomes...)
			f := final(append([]NomadChild(nil), good...))
			if tc.mutate != nil {
				tc.mutate(&f)
			}
			err := c.Final(f)
			if tc.inv == 0 {
				wantOK(t, err)
				return
			}
			wantViolation(t, err, tc.inv, tc.parts...)
		})
	}
}

func TestCronOpened(t *testing.T) {
	skipped := state.Outcome{Kind: state.OutcomeSkipped, Reason: "job paused"}
	manual := func(s int) state.Launch {
		return state.Launch{Job: "a", ScheduledAt: sec(s), StartedAt: sec(s), Kind: state.LaunchManual, Identity: state.LaunchIdentity("a", sec(s), state.LaunchManual)}
	}
	backfill := func(s int, force bool) state.Launch {
		return state.Launch{Job: "a", ScheduledAt: sec(s), StartedAt: sec(5), Kind: state.LaunchBackfill, Identity: state.Identity("a", sec(s)), Force: force}
	}
	c := cronRun(t) // slots 1-3 started
	wantOK(t, c.Applied(9, sec(5), state.Pause{Name: "a"}, state.Job{}))
	wantOK(t, c.Finished(10, sec(10), finishCmd("a", sec(1), dispatched("c1"))))
	wantOK(t, c.Finished(11, sec(10), finishCmd("a", sec(2), skipped)))
	wantOK(t, c.Finished(12, sec(10), finishCmd("a", sec(3), state.Outcome{Kind: state.OutcomeUnknown})))
	wantOK(t, c.Opened(13, sec(5), manual(4), state.Job{}))
	wantViolation(t, c.Opened(14, sec(5), manual(4), state.Job{}), InvAtMostOnce, "manual launch", "slot 13", "slot 14")
	wantViolation(t, c.Opened(15, sec(5), backfill(1, true), state.Job{}), InvAtMostOnce, "which ran", "c1")
	wantViolation(t, c.Opened(16, sec(5), backfill(3, false), state.Job{}), InvAtMostOnce, "unknown, without force")
	wantViolation(t, c.Opened(17, sec(5), backfill(8, false), state.Job{}), InvAtMostOnce, "never saw start")
	wantOK(t, c.Opened(18, sec(5), backfill(2, false), state.Job{}))
	wantViolation(t, c.Opened(19, sec(5), backfill(2, false), state.Job{}), InvAtMostOnce, "while its launch from slot 18 is open")
	f := finishCmd("a", sec(2), dispatched("c2"))
	f.LaunchKind = state.LaunchBackfill
	wantOK(t, c.Finished(20, sec(10), f))
	mf := finishCmd("a", sec(4), dispatched("m4"))
	mf.LaunchKind = state.LaunchManual
	wantOK(t, c.Finished(21, sec(10), mf))
	// The backfilled slot's child exists, its first record said skipped:
	// fine, the latest says dispatched (and the child was made after the
	// backfill opened, at sec(5): one made before would be the skipped
	// attempt's).
	err := c.Final(CronFinal{End: sec(10), Bound: 2 * time.Second, Children: []NomadChild{
		child(1, "c1", 0), child(2, "c2", 4*time.Second), {ID: "m4", Token: state.LaunchIdentity("a", sec(4), state.LaunchManual), CreatedAt: sec(4)},
	}})
	wantOK(t, err)
}

// TestCronAtLeastOnce: a job that asked for at least once may have a
// second child for a launch, but only after Nomad forgot the first.
func TestCronAtLeastOnce(t *testing.T) {
	run := func(children []NomadChild) error {
		c := newCron()
		j := cronJob("a", "* * * * * *", 1)
		j.Spec.AtLeastOnce = true
		wantOK(t, c.Started(1, sec(1), startCmd("a", sec(1)), j))
		wantOK(t, c.Finished(2, sec(10), finishCmd("a", sec(1), dispatched("c1-again"))))
		return c.Final(CronFinal{End: sec(10), Bound: 2 * time.Second, Children: children, Jobs: []state.Job{endJob("0 0 * * *", sec(9))}})
	}
	first := child(1, "c1", 0)
	again := child(1, "c1-again", 5*time.Second)
	collected := first
	collected.CollectedAt = sec(1).Add(4 * time.Second)
	wantOK(t, run([]NomadChild{collected, again}))
	wantViolation(t, run([]NomadChild{first, again}), InvAtMostOnce, "got child c1-again while Nomad still had c1")
	late := first
	late.CollectedAt = sec(1).Add(6 * time.Second) // collected after the second was made
	wantViolation(t, run([]NomadChild{late, again}), InvAtMostOnce, "while Nomad still had c1")
	// At most once (the default) allows no second child, collected or not.
	c := newCron()
	wantOK(t, c.Started(1, sec(1), startCmd("a", sec(1)), cronJob("a", "* * * * * *", 1)))
	wantOK(t, c.Finished(2, sec(10), finishCmd("a", sec(1), dispatched("c1-again"))))
	err := c.Final(CronFinal{End: sec(10), Bound: 2 * time.Second, Children: []NomadChild{collected, again}, Jobs: []state.Job{{Name: "a", NextAt: sec(9)}}})
	wantViolation(t, err, InvAtMostOnce, "2 children")
}

// TestCronForbidOverlap: a forbid job's child made while another ran is
// a violation, unless either launch was not held to forbid all along
// (another policy, forced or at least once), or one that was not took the
// last child's place between them.
func TestCronForbidOverlap(t *testing.T) {
	const short, long = 300 * time.Millisecond, 2500 * time.Millisecond
	// run starts slots 1-3 of a forbid job, with allow in force while
	// the launches in allowWhile are open, and finishes them dispatched
	// as c1-c3, each child running for its runs.
	run := func(atLeastOnce bool, runs [3]time.Duration, allowWhile ...int) error {
		c := newCron()
		j := cronJob("a", "* * * * * *", 1)
		j.Spec.Concurrency, j.Spec.AtLeastOnce = state.ConcurrencyForbid, atLeastOnce
		put(t, c, 1, j)
		slot := uint64(1)
		var children []NomadChild
		for s := 1; s <= 3; s++ {
			slot++
			wantOK(t, c.Started(slot, sec(s), startCmd("a", sec(s)), j))
			if slices.Contains(allowWhile, s) {
				allow := j
				allow.Spec.Concurrency = state.ConcurrencyAllow
				slot++
				put(t, c, slot, allow)
				slot++
				put(t, c, slot, j)
			}
			slot++
			id := fmt.Sprintf("c%d", s)
			wantOK(t, c.Finished(slot, sec(s).Add(200*time.Millisecond), finishCmd("a", sec(s), dispatched(id))))
			ch := child(s, id, 100*time.Millisecond)
			ch.FinishedAt = ch.CreatedAt.Add(runs[s-1])
			children = append(children, ch)
		}
		j.NextAt, j.Spec.Schedule = sec(9), "0 0 * * *"
		return c.Final(CronFinal{End: sec(10), Bound: 2 * time.Second, Children: children, Jobs: []state.Job{j}})
	}
	wantOK(t, run(false, [3]time.Duration{short, short, short}))
	wantViolation(t, run(false, [3]time.Duration{long, short, short}), InvAtMostOnce, `forbid job "a"`, "got child c2", "while c1")
	wantViolation(t, run(false, [3]time.Duration{short, long, short}, 1), InvAtMostOnce, "got child c3", "while c2")
	// Slot 2 decided under allow may run beside c1: not judged.
	wantOK(t, run(false, [3]time.Duration{long, short, short}, 2))
	// c3 beside c1: c2, made under allow, took c1's place.
	wantOK(t, run(false, [3]time.Duration{long + time.Second, short, short}, 2))
	// An at least once job's launch may be dispatched again without
	// asking: not judged.
	wantOK(t, run(true, [3]time.Duration{long, long, short}))
}

// TestCronFirstLaunchFollowsOnlyANamesake: a re-created job may count its
// first launch from a launch of its deleted namesake, never from one of
// its own: a job whose first scheduled start came after its own manual
// trigger jumped over the slots between its creation and the trigger.
func TestCronFirstLaunchFollowsOnlyANamesake(t *testing.T) {
	c := newCron()
	j := cronJob("a", "*/10 * * * * *", 1)
	j.CreatedAt = sec(0)
	put(t, c, 1, j)
	manual := state.Launch{Job: "a", ScheduledAt: sec(25), StartedAt: sec(25), Kind: state.LaunchManual,
		Identity: state.LaunchIdentity("a", sec(25), state.LaunchManual)}
	wantOK(t, c.Opened(2, sec(25), manual, j))
	// Planted: the slots at sec(10) and sec(20) never started.
	wantViolation(t, c.Started(3, sec(30), startCmd("a", sec(30)), j), InvNoSilentSkip,
		`job "a"`, sec(10).Format(time.RFC3339), "jumped over")
}

// TestCronBackfilledAttemptsAnswerForTheirChildren: each attempt of a
// launch is judged by the children made while it was the latest. A first
// attempt recorded failed whose child Nomad made is a silent lie, even
// once a backfill reopened the slot (and concluded it unknown, or, at
// least once, dispatched again after Nomad forgot the first child).
func TestCronBackfilledAttemptsAnswerForTheirChildren(t *testing.T) {
	failed := state.Outcome{Kind: state.OutcomeFailed, Reason: "dispatch failed 3 times, last: timeout"}
	run := func(atLeastOnce bool, latest state.Outcome, children ...NomadChild) error {
		c := newCron()
		j := cronJob("a", "* * * * * *", 1)
		j.Spec.AtLeastOnce = atLeastOnce
		put(t, c, 1, j)
		wantOK(t, c.Started(2, sec(1), startCmd("a", sec(1)), j))
		wantOK(t, c.Finished(3, sec(3), finishCmd("a", sec(1), failed)))
		bf := state.Launch{Job: "a", ScheduledAt: sec(1), StartedAt: sec(5), Kind: state.LaunchBackfill, Identity: state.Identity("a", sec(1))}
		wantOK(t, c.Opened(4, sec(5), bf, j))
		f := finishCmd("a", sec(1), latest)
		f.LaunchKind = state.LaunchBackfill
		wantOK(t, c.Finished(5, sec(8), f))
		return c.Final(CronFinal{End: sec(10), Bound: 2 * time.Second, Children: children, Jobs: []state.Job{endJob("0 0 * * *", sec(30))}})
	}
	unknown := state.Outcome{Kind: state.OutcomeUnknown}
	first := child(1, "c1", 100*time.Millisecond) // made by the first attempt
	second := child(1, "c2", 5*time.Second)       // made by the backfill
	wantOK(t, run(false, dispatched("c2"), second))
	wantOK(t, run(false, unknown, second))
	// Planted: the first attempt, recorded failed, made c1.
	wantViolation(t, run(false, unknown, first), InvNoSilentSkip, "child c1", "backfill", "failed")
	collected := first
	collected.CollectedAt = sec(4)
	wantViolation(t, run(true, dispatched("c2"), collected, second), InvNoSilentSkip, "child c1", "backfill", "failed")
}

// TestCronForbidChildrenMadeAtOnce: two children of a forbid job made at
// the same instant run side by side as surely as two made a moment apart.
func TestCronForbidChildrenMadeAtOnce(t *testing.T) {
	c := newCron()
	j := cronJob("a", "* * * * * *", 1)
	j.Spec.Concurrency = state.ConcurrencyForbid
	put(t, c, 1, j)
	wantOK(t, c.Started(2, sec(1), startCmd("a", sec(1)), j))
	wantOK(t, c.Started(3, sec(2), startCmd("a", sec(2)), j))
	wantOK(t, c.Finished(4, sec(3), finishCmd("a", sec(1), dispatched("c1"))))
	wantOK(t, c.Finished(5, sec(3), finishCmd("a", sec(2), dispatched("c2"))))
	// Planted: both dispatched at once, each running 2 s.
	c1, c2 := child(1, "c1", 1100*time.Millisecond), child(2, "c2", 100*time.Millisecond)
	c1.FinishedAt, c2.FinishedAt = c1.CreatedAt.Add(2*time.Second), c2.CreatedAt.Add(2*time.Second)
	j.NextAt, j.Spec.Schedule = sec(9), "0 0 * * *"
	err := c.Final(CronFinal{End: sec(10), Bound: 2 * time.Second, Children: []NomadChild{c1, c2}, Jobs: []state.Job{j}})
	wantViolation(t, err, InvAtMostOnce, `forbid job "a"`, "got child c2", "while c1")
}

// TestCronConclusionNamesItsOpening: a conclusion names the opening it
// concludes (StartedSlot); one naming an earlier opening (a stale copy of
// the first attempt's) must not close a backfill's reopening, which then
// ended without anyone deciding on it.
func TestCronConclusionNamesItsOpening(t *testing.T) {
	failed := state.Outcome{Kind: state.OutcomeFailed, Reason: "dispatch failed 3 times, last: timeout"}
	c := newCron()
	j := cronJob("a", "* * * * * *", 1)
	put(t, c, 1, j)
	wantOK(t, c.Started(2, sec(1), startCmd("a", sec(1)), j))
	first := finishCmd("a", sec(1), failed)
	first.StartedSlot = 2
	wantOK(t, c.Finished(3, sec(3), first))
	bf := state.Launch{Job: "a", ScheduledAt: sec(1), StartedAt: sec(5), Kind: state.LaunchBackfill, Identity: state.Identity("a", sec(1))}
	wantOK(t, c.Opened(4, sec(5), bf, j))
	// Planted: the first attempt's conclusion again, applied to the backfill.
	stale := first
	stale.LaunchKind = state.LaunchBackfill
	wantViolation(t, c.Finished(5, sec(6), stale), InvNoSilentSkip, "slot 5", "opening at slot 2", "last opened at slot 4")
	// The backfill's own conclusion is fine.
	own := stale
	own.StartedSlot = 4
	wantOK(t, c.Finished(6, sec(6), own))
}

// TestCronScheduleEditCountsFromTheEdit: the checker counts a new
// schedule's slots as the state does (state.EditFrom): from the edit, or
// from the first slot the old schedule still owed by then. It counted
// from the creation, so a start at the edit's first slot was "jumped
// over" and the slots on no schedule of the job were owed.
func TestCronScheduleEditCountsFromTheEdit(t *testing.T) {
	edit := func(c *Cron, slot uint64, j state.Job, expr string, at time.Time) {
		t.Helper()
		j.Spec.Schedule = expr
		wantOK(t, c.Applied(slot, at, state.PutJob{Name: j.Name, Spec: j.Spec, IfVersion: 1, At: at}, j))
	}
	five := "*/5 * * * * *"
	// Hourly, next at 07:00:00 (sec(20)); edited at 06:59:52 to every 5
	// seconds: nothing was owed, so the first slot is 06:59:55.
	c := newCron()
	j := cronJob("a", "0 0 * * * *", 1)
	put(t, c, 1, j)
	edit(c, 2, j, five, sec(12))
	j.Spec.Schedule = five
	wantOK(t, c.Started(3, sec(15), startCmd("a", sec(15)), j))
	wantOK(t, c.Started(4, sec(20), startCmd("a", sec(20)), j))
	c = newCron()
	put(t, c, 1, cronJob("a", "0 0 * * * *", 1))
	edit(c, 2, cronJob("a", "0 0 * * * *", 1), five, sec(12))
	wantViolation(t, c.Final(CronFinal{End: sec(21), Jobs: []state.Job{endJob(five, sec(15))}}), InvNoSilentSkip,
		`job "a"'s slot `+sec(15).Format(time.RFC3339))

	// Every 10 seconds, next at 06:59:50 (sec(10)), still owed at the
	// edit at 06:59:57: the new schedule owes its slots from 06:59:50.
	c = newCron()
	j = cronJob("a", "*/10 * * * * *", 1)
	put(t, c, 1, j)
	edit(c, 2, j, five, sec(17))
	j.Spec.Schedule = five
	wantViolation(t, c.Started(3, sec(15), startCmd("a", sec(15)), j), InvNoSilentSkip,
		`job "a"`, sec(10).Format(time.RFC3339), "jumped over")
}

// TestCronScheduleEditMustRecordTheSlotItSupersedes: a slot the old
// schedule owed at an edit, which the new schedule does not have, must be
// recorded skipped by the edit (state.ReasonSuperseded) and be the job's
// last start; the checker reads the job the real state holds after the
// edit. Before, the checker took the state's word that the new schedule
// counted from just before the slot, and a state that dropped it without
// a trace passed.
func TestCronScheduleEditMustRecordTheSlotItSupersedes(t *testing.T) {
	every10, every3 := "*/10 * * * * *", "*/3 * * * * *" // 06:59:50 is no slot of every third second
	spec := func(expr string) state.JobSpec { return state.JobSpec{Schedule: expr, NomadJob: "batch"} }
	// edited runs the real state and the checker over job "a" created at
	// sec(0) every 10 seconds, owing sec(10) when it is edited to every 3
	// seconds at editAt; hide changes the job the checker is given after
	// the edit.
	edited := func(t *testing.T, editAt time.Time, hide func(*state.Job)) (*Cron, error) {
		t.Helper()
		m := state.New()
		c := newCron()
		for slot, cmd := range []state.PutJob{{Name: "a", Spec: spec(every10), At: sec(0)}, {Name: "a", Spec: spec(every3), IfVersion: 1, At: editAt}} {
			if err := m.ApplyCommand(uint64(slot+1), cmd); err != nil {
				t.Fatal(err)
			}
			j, _ := m.Job("a")
			if slot == 1 && hide != nil {
				hide(&j)
			}
			if err := c.Applied(uint64(slot+1), cmd.At, cmd, j); err != nil {
				return c, err
			}
		}
		return c, nil
	}
	c, err := edited(t, sec(11), nil)
	wantOK(t, err)
	if n := c.Counts().Justified["superseded by an edit"]; n != 1 {
		t.Fatalf("justified %d superseded slots, want 1", n)
	}
	// The new schedule's first slot is the one after: no slot jumped over.
	j := cronJob("a", every3, 1)
	wantOK(t, c.Started(3, sec(11), startCmd("a", sec(11)), j))
	// A start of the superseded slot itself would be its second launch.
	wantViolation(t, c.Started(4, sec(11), startCmd("a", sec(10)), j), InvAtMostOnce, state.Identity("a", sec(10)), "started at slot 2")

	// The old state's behaviour: no record, the last start unchanged.
	_, err = edited(t, sec(11), func(j *state.Job) { j.History, j.LastStartedAt = nil, time.Time{} })
	wantViolation(t, err, InvNoSilentSkip, `job "a"'s slot `+sec(10).Format(time.RFC3339), "no record", "dropped silently")
	_, err = edited(t, sec(11), func(j *state.Job) { j.LastStartedAt = time.Time{} })
	wantViolation(t, err, InvNoSilentSkip, "a start of it could still be accepted")
	_, err = edited(t, sec(11), func(j *state.Job) { j.History[0].Outcome.Reason = launcher.ReasonPaused })
	wantViolation(t, err, InvNoSilentSkip, "not the reason of a slot an edit superseded")
	_, err = edited(t, sec(11), func(j *state.Job) { j.History[0].Outcome.Reason = state.ReasonSuperseded(sec(11), 1) })
	wantViolation(t, err, InvNoSilentSkip, "does not name the edit")
	// A history at its limit of reasons keeps the skip without its own.
	_, err = edited(t, sec(11), func(j *state.Job) { j.History[0].Outcome.Reason = state.ReasonNotKept })
	wantOK(t, err)

	// Superseded within the lateness bound of its slot: not late. A
	// bound after it, while healthy: late, and the edit hid it.
	final := CronFinal{End: sec(30), Bound: 2 * time.Second, Healthy: []Interval{{From: sec(0), To: sec(30)}}}
	c, err = edited(t, sec(11), nil)
	wantOK(t, err)
	wantOK(t, c.Final(final))
	if n := c.Counts().SupersededJudged; n != 1 {
		t.Fatalf("judged %d superseded slots against the bound, want 1", n)
	}
	c, err = edited(t, sec(13), nil)
	wantOK(t, err)
	wantViolation(t, c.Final(final), InvNoSilentSkip, state.Identity("a", sec(10)), "never started before an edit superseded it")
}

// TestCronScheduleEditKeepsASlotBothSchedulesHave: when the new schedule
// has the slot the old one owed, it owes it, and nothing is recorded.
func TestCronScheduleEditKeepsASlotBothSchedulesHave(t *testing.T) {
	m, c := state.New(), newCron()
	for slot, cmd := range []state.PutJob{
		{Name: "a", Spec: state.JobSpec{Schedule: "*/10 * * * * *", NomadJob: "batch"}, At: sec(0)},
		{Name: "a", Spec: state.JobSpec{Schedule: "*/5 * * * * *", NomadJob: "batch"}, IfVersion: 1, At: sec(13)},
	} {
		if err := m.ApplyCommand(uint64(slot+1), cmd); err != nil {
			t.Fatal(err)
		}
		j, _ := m.Job("a")
		wantOK(t, c.Applied(uint64(slot+1), cmd.At, cmd, j))
	}
	if j, _ := m.Job("a"); len(j.History) != 0 || !j.NextAt.Equal(sec(10)) {
		t.Fatalf("the state recorded %+v, next %s", j.History, j.NextAt.Format(time.RFC3339))
	}
	wantOK(t, c.Started(3, sec(13), startCmd("a", sec(10)), cronJob("a", "*/5 * * * * *", 1)))
}

package check

import (
	"testing"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

// manualCase is job "a" (no slot in the run, catch-up window window or
// the default) created at sec(0), with one manual launch requested for
// at, its Trigger first applied at applied; before edits (Pause,
// DeleteJob) are chosen, then the launch is concluded with outcome at
// concluded, its child (if dispatched) made at childAt. The run ends at
// sec(30), bound 2 s, with healthy intervals healthy.
type manualCase struct {
	window        time.Duration
	at, applied   time.Time
	edits         []state.Command
	outcome       state.Outcome
	concluded     time.Time
	childAt       time.Time
	healthy       []Interval
	forced        bool
	wantViolation []string // the violation's parts, or none if it passes
}

func (mc manualCase) run(t *testing.T) (*Cron, error) {
	t.Helper()
	c := NewCron(CronConfig{Nomad: &fakeNomad{}, ClockMargin: time.Millisecond})
	j := cronJob("a", "0 0 1 1 *", 1)
	j.CreatedAt = sec(0)
	j.Spec.CatchupWindow = mc.window
	put(t, c, 1, j)
	id := state.LaunchIdentity("a", mc.at, state.LaunchManual)
	l := state.Launch{Job: "a", ScheduledAt: mc.at, StartedAt: mc.at, Kind: state.LaunchManual, Force: mc.forced,
		Identity: id, Target: j.Spec.Target(), SpecVersion: 1}
	wantOK(t, c.Opened(2, mc.applied, l, j))
	slot := uint64(3)
	for _, e := range mc.edits {
		wantOK(t, c.Applied(slot, mc.applied, e, state.Job{}))
		slot++
	}
	f := state.LaunchFinished{Job: "a", ScheduledAt: mc.at, LaunchKind: state.LaunchManual, Outcome: mc.outcome, StartedSlot: 2}
	wantOK(t, c.Finished(slot, mc.concluded, f))
	var children []NomadChild
	if mc.outcome.Kind == state.OutcomeDispatched {
		children = append(children, NomadChild{ID: mc.outcome.ChildID, Token: id, CreatedAt: mc.childAt, FinishedAt: mc.childAt.Add(time.Second)})
	}
	var jobs []state.Job
	if !(len(mc.edits) > 0 && mc.edits[len(mc.edits)-1].Kind() == state.KindDeleteJob) {
		jobs = append(jobs, endJob("0 0 1 1 *", time.Time{}))
	}
	return c, c.Final(CronFinal{End: sec(30), Bound: 2 * time.Second, Healthy: mc.healthy, Children: children, Jobs: jobs})
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// A manual launch is held to the lateness bound in a healthy interval,
// from the later of its request's time and its Trigger's first
// application: one dispatched too late is reported, the same launch
// outside a healthy interval, or skipped for a reason that is no
// lateness, is not.
func TestCronManualLaunchOnTime(t *testing.T) {
	all := []Interval{{From: sec(0), To: sec(30)}}
	skipped := func(r string) state.Outcome { return state.Outcome{Kind: state.OutcomeSkipped, Reason: r} }
	failed := func(r string) state.Outcome { return state.Outcome{Kind: state.OutcomeFailed, Reason: r} }
	for _, tc := range []struct {
		name string
		mc   manualCase
		// judged and short are the counts wanted: held to the bound, and
		// let off for a catch-up window that could end within it.
		judged, short uint64
	}{
		{name: "on time", judged: 1,
			mc: manualCase{at: sec(3), applied: sec(3).Add(ms(200)), outcome: dispatched("m"), childAt: sec(3).Add(ms(300)), concluded: sec(4), healthy: all}},
		// Planted: 2.5 s after its Trigger was applied, while healthy.
		{name: "late while healthy", judged: 1,
			mc: manualCase{at: sec(3), applied: sec(3).Add(ms(200)), outcome: dispatched("m"), childAt: sec(5).Add(ms(700)), concluded: sec(6), healthy: all,
				wantViolation: []string{"manual launch a-", "-manual", "2.5s late", "interval 0", "Trigger first applied " + sec(3).Add(ms(200)).Format(time.RFC3339Nano)}}},
		{name: "late in an earlier interval", judged: 1,
			mc: manualCase{at: sec(3), applied: sec(3), outcome: dispatched("m"), childAt: sec(6), concluded: sec(6),
				healthy: []Interval{{From: sec(1), To: sec(9)}, {From: sec(20), To: sec(30)}}, wantViolation: []string{"3s late", "interval 0"}}},
		// The same launch outside any healthy interval.
		{name: "late, applied before the interval",
			mc: manualCase{at: sec(3), applied: sec(3).Add(ms(200)), outcome: dispatched("m"), childAt: sec(5).Add(ms(700)), concluded: sec(6),
				healthy: []Interval{{From: sec(4), To: sec(30)}}}},
		{name: "late, the interval ends within the bound",
			mc: manualCase{at: sec(3), applied: sec(3).Add(ms(200)), outcome: dispatched("m"), childAt: sec(5).Add(ms(700)), concluded: sec(6),
				healthy: []Interval{{From: sec(0), To: sec(5)}}}},
		{name: "late, the run ends within the bound",
			mc: manualCase{at: sec(28), applied: sec(28), outcome: dispatched("m"), childAt: sec(29).Add(ms(500)), concluded: sec(29).Add(ms(500)), healthy: all}},
		// Written while no leader could choose it (or with the writer's
		// clock behind): due from when its Trigger was applied, 1.5 s
		// before the child, not from its request 5 s before.
		{name: "chosen late, dispatched on time", judged: 1,
			mc: manualCase{at: sec(3), applied: sec(6).Add(ms(500)), outcome: dispatched("m"), childAt: sec(8), concluded: sec(8), healthy: all}},
		{name: "chosen late, dispatched late", judged: 1,
			mc: manualCase{at: sec(3), applied: sec(6).Add(ms(500)), outcome: dispatched("m"), childAt: sec(9), concluded: sec(9), healthy: all,
				wantViolation: []string{"2.5s late"}}},
		// Requested by a writer whose clock runs ahead: not due before its
		// request's time.
		{name: "requested ahead, dispatched then", judged: 1,
			mc: manualCase{at: sec(5), applied: sec(3), outcome: dispatched("m"), childAt: sec(6).Add(ms(500)), concluded: sec(7), healthy: all}},
		{name: "paused", judged: 1,
			mc: manualCase{at: sec(3), applied: sec(3), edits: []state.Command{state.Pause{Name: "a"}}, outcome: skipped(launcher.ReasonPaused), concluded: sec(7), healthy: all}},
		{name: "deleted meanwhile", judged: 1,
			mc: manualCase{at: sec(3), applied: sec(3), edits: []state.Command{state.DeleteJob{Name: "a"}}, outcome: skipped(launcher.ReasonDeleted), concluded: sec(7), healthy: all}},
		{name: "retries ran out while healthy", judged: 1,
			mc: manualCase{at: sec(3), applied: sec(3), outcome: failed(launcher.ReasonRetriesOut(5, "timeout")), concluded: sec(9), healthy: all,
				wantViolation: []string{"ended failed", "dispatch failed 5 times"}}},
		{name: "retries ran out, not healthy",
			mc: manualCase{at: sec(3), applied: sec(3), outcome: failed(launcher.ReasonRetriesOut(5, "timeout")), concluded: sec(9), healthy: []Interval{{From: sec(10), To: sec(30)}}}},
		// Its window (3 s from the request) ends 1.5 s after its Trigger
		// was applied, within the bound: the skip keeps the promise.
		{name: "catch-up window ends within the bound", short: 1,
			mc: manualCase{window: 3 * time.Second, at: sec(3), applied: sec(4).Add(ms(500)), outcome: skipped(launcher.ReasonCatchup(3*time.Second+ms(100), 3*time.Second)),
				concluded: sec(6).Add(ms(100)), healthy: all}},
		// A 10 s window open for the whole bound: the launcher had every
		// chance to dispatch it.
		{name: "catch-up window open for the whole bound", judged: 1,
			mc: manualCase{window: 10 * time.Second, at: sec(3), applied: sec(3).Add(ms(100)), outcome: skipped(launcher.ReasonCatchup(10*time.Second+ms(100), 10*time.Second)),
				concluded: sec(13).Add(ms(100)), healthy: all, wantViolation: []string{"ended skipped", "catch-up window"}}},
		{name: "catch-up window open for the whole bound, not healthy",
			mc: manualCase{window: 10 * time.Second, at: sec(3), applied: sec(3).Add(ms(100)), outcome: skipped(launcher.ReasonCatchup(10*time.Second+ms(100), 10*time.Second)),
				concluded: sec(13).Add(ms(100)), healthy: []Interval{{From: sec(5), To: sec(30)}}}},
		// Concluded unknown while healthy: dispatched and forgotten, or
		// never looked up in time.
		{name: "unknown while healthy", judged: 1,
			mc: manualCase{at: sec(3), applied: sec(3), outcome: state.Outcome{Kind: state.OutcomeUnknown, Reason: "could not look the launch up in Nomad: down"},
				concluded: sec(9), healthy: all, wantViolation: []string{"ended unknown"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.mc.run(t)
			if len(tc.mc.wantViolation) > 0 {
				wantViolation(t, err, InvNoSilentSkip, tc.mc.wantViolation...)
			} else {
				wantOK(t, err)
			}
			if n := c.Counts(); n.OnTimeManual != tc.judged || n.ManualWindowShort != tc.short || n.OnTime != 0 {
				t.Errorf("counts %+v: want %d manual launches judged, %d let off for a short window, no scheduled one", n, tc.judged, tc.short)
			}
		})
	}
}

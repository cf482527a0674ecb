package check

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

// The launcher's reasons, built by cron/launcher's own constructors (so
// that a change of their wording fails here), are read by kind.
func TestCronClassify(t *testing.T) {
	skipped := func(r string) state.Outcome { return state.Outcome{Kind: state.OutcomeSkipped, Reason: r} }
	failed := func(r string) state.Outcome { return state.Outcome{Kind: state.OutcomeFailed, Reason: r} }
	refused := fmt.Errorf("%w: parameterized job %q not found", launcher.ErrRejected, "missing")
	for _, tc := range []struct {
		o      state.Outcome
		class  reasonClass // 0: not the launcher's
		child  string
		launch string
		window time.Duration
		limit  int
		ofJob  bool
	}{
		{o: skipped(launcher.ReasonPaused), class: reasonPaused},
		{o: skipped(launcher.ReasonDeleted), class: reasonDeleted},
		{o: skipped(launcher.ReasonMissed(12*time.Second+400*time.Millisecond, 10*time.Second)), class: reasonCatchup, window: 10 * time.Second},
		{o: skipped(launcher.ReasonCatchup(5*time.Minute+3*time.Second, 5*time.Minute)), class: reasonCatchup, window: 5 * time.Minute},
		{o: skipped(launcher.ReasonNoRoom(1000000, 12*time.Second+400*time.Millisecond, 10*time.Second)), class: reasonNoRoom, window: 10 * time.Second, limit: 1000000},
		{o: skipped(launcher.ReasonNoRoomForJob(64, 2*time.Minute, time.Minute)), class: reasonNoRoom, window: time.Minute, limit: 64, ofJob: true},
		{o: forbidSkip("batch/dispatch-j1-1-2-ab"), class: reasonForbid, child: "batch/dispatch-j1-1-2-ab"},
		{o: failed(launcher.ReasonRefused(refused)), class: reasonRefused},
		{o: failed(launcher.ReasonRunningUnknown("c7", context.DeadlineExceeded)), class: reasonRunningUnknown, child: "c7"},
		{o: failed(launcher.ReasonStopFailed("c7", errors.New("connection refused"))), class: reasonStopFailed, child: "c7"},
		{o: failed(launcher.ReasonDeletedAfterFailure("dial tcp: connection refused (again)")), class: reasonDeletedAfterFailure},
		{o: failed(launcher.ReasonRetriesOut(4, "connection refused")), class: reasonRetriesOut},
		{o: failed(launcher.ReasonUnknownLookupFailed("j1-1772323200", errors.New("timeout"))), class: reasonUnknownLookupFailed, launch: "j1-1772323200"},
		// A reason under the other kind, or any other text, is no reason.
		{o: failed("job paused")},
		{o: skipped("Nomad refused the dispatch: no")},
		{o: skipped("job paused, sort of")},
		{o: skipped("because")},
		{o: skipped("missed: no leader could launch it within its catch-up window (1s late, window soon)")},
		// The state's own skip of a slot an edit superseded: no launcher
		// may conclude a launch with it.
		{o: skipped(state.ReasonSuperseded(sec(3), 2))},
	} {
		r, err := classify(tc.o)
		if tc.class == 0 {
			if err == nil {
				t.Errorf("%s %q read as %s", tc.o.Kind, tc.o.Reason, r.class)
			}
			continue
		}
		if err != nil || r != (reason{class: tc.class, child: tc.child, launch: tc.launch, window: tc.window, limit: tc.limit, ofJob: tc.ofJob}) {
			t.Errorf("%s %q: got %+v, %v; want %s child %q launch %q window %v", tc.o.Kind, tc.o.Reason, r, err, tc.class, tc.child, tc.launch, tc.window)
		}
	}
}

// justifyCase is a history around one launch of job "a" (every second,
// created at slot 1): its launch of sec(1) started at slot 2 and
// dispatched as child x1 at slot 3, its launch of sec(2) started at slot 4
// at sec(2). The case's steps follow from slot 5 (a takeover at slot 10,
// at sec(2), unless they take over themselves), then sec(2)'s launch is
// concluded at slot 20, at now.
type justifyCase struct {
	name    string
	policy  state.Concurrency
	target  string // the Nomad job; "batch" if empty
	steps   []state.Command
	manual  bool // conclude a forced manual launch of sec(2) instead
	outcome state.Outcome
	now     time.Time
	term    state.Term // the conclusion's, if not the takeover's
	x1      NomadChild // Nomad's record of x1, if not running sec(1)-sec(5)
	// openLimit and openJobLimit are the state's limits of open launches
	// (CronConfig), zero for none.
	openLimit, openJobLimit int
	parts                   []string // the violation's, or none if justified
}

func (tc justifyCase) run(t *testing.T) error {
	t.Helper()
	x1 := NomadChild{ID: "x1", CreatedAt: sec(1), FinishedAt: sec(5)}
	if tc.x1.ID != "" {
		x1 = tc.x1
	}
	nomad := &fakeNomad{refused: map[string]bool{"missing": true}, children: map[string]NomadChild{x1.ID: x1}}
	c := NewCron(CronConfig{Nomad: nomad, OpenLimit: tc.openLimit, OpenJobLimit: tc.openJobLimit})
	j := cronJob("a", "* * * * * *", 1)
	j.Spec.Concurrency = tc.policy
	if tc.target != "" {
		j.Spec.NomadJob = tc.target
	}
	put(t, c, 1, j)
	wantOK(t, c.Started(2, sec(1), startCmd("a", sec(1)), j))
	wantOK(t, c.Finished(3, sec(1), finishCmd("a", sec(1), dispatched("x1"))))
	wantOK(t, c.Started(4, sec(2), startCmd("a", sec(2)), j))
	slot, tookOver := uint64(5), false
	for _, cmd := range tc.steps {
		after := j
		if p, ok := cmd.(state.PutJob); ok && p.IfVersion == 0 {
			after = cronJob("a", "* * * * * *", 2) // re-created
		}
		if _, ok := cmd.(state.Takeover); ok {
			tookOver = true
		}
		wantOK(t, c.Applied(slot, sec(2), cmd, after))
		slot++
	}
	if !tookOver {
		wantOK(t, c.Applied(10, sec(2), state.Takeover{Term: state.Term{Round: 1, Replica: 1}}, state.Job{}))
	}
	f := finishCmd("a", sec(2), tc.outcome)
	f.Term = c.term
	if tc.term != (state.Term{}) {
		f.Term = tc.term
	}
	if tc.manual {
		l := state.Launch{Job: "a", ScheduledAt: sec(2), StartedAt: sec(2), Kind: state.LaunchManual, Force: true,
			Identity: state.LaunchIdentity("a", sec(2), state.LaunchManual), Target: j.Spec.Target()}
		wantOK(t, c.Opened(15, sec(2), l, j))
		f.LaunchKind = state.LaunchManual
	}
	now := tc.now
	if now.IsZero() {
		now = sec(3)
	}
	return c.Finished(20, now, f)
}

func TestCronJustifiesSkipsAndFailures(t *testing.T) {
	skipped := func(r string) state.Outcome { return state.Outcome{Kind: state.OutcomeSkipped, Reason: r} }
	failed := func(r string) state.Outcome { return state.Outcome{Kind: state.OutcomeFailed, Reason: r} }
	paused := skipped("job paused")
	deleted := skipped("job deleted before it was dispatched")
	forbid := forbidSkip("x1")
	window2s := cronJob("a", "* * * * * *", 1).Spec
	window2s.CatchupWindow = 2 * time.Second
	pause, resume := state.Pause{Name: "a"}, state.Resume{Name: "a"}
	term2 := state.Takeover{Term: state.Term{Round: 2, Replica: 1}}
	for _, tc := range []justifyCase{
		{name: "paused", steps: []state.Command{pause}, outcome: paused},
		{name: "paused, never", outcome: paused, parts: []string{`"job paused"`, "was not paused", "view from slot 10"}},
		{name: "paused, resumed before the takeover", steps: []state.Command{pause, resume, term2}, outcome: paused, parts: []string{"was not paused"}},
		{name: "paused, resumed after the takeover", steps: []state.Command{pause, term2, resume}, outcome: paused},
		{name: "paused, a forced launch", steps: []state.Command{pause}, manual: true, outcome: paused, parts: []string{"forced"}},
		{name: "deleted", steps: []state.Command{state.DeleteJob{Name: "a"}}, outcome: deleted},
		{name: "deleted and created again", steps: []state.Command{state.DeleteJob{Name: "a"}, state.PutJob{Name: "a", Spec: window2s}}, outcome: deleted},
		{name: "deleted, never", outcome: deleted, parts: []string{"never deleted"}},
		{name: "deleted after a failure", steps: []state.Command{state.DeleteJob{Name: "a"}}, outcome: failed("dispatch failed (timeout) and the job was deleted since")},
		{name: "deleted after a failure, never", outcome: failed("dispatch failed (timeout) and the job was deleted since"), parts: []string{"never deleted"}},
		{name: "catch-up", steps: []state.Command{state.PutJob{Name: "a", Spec: window2s, IfVersion: 1}}, now: sec(5),
			outcome: skipped("not dispatched within its catch-up window (3s late, window 2s)")},
		{name: "catch-up, another window", now: sec(5), outcome: skipped("not dispatched within its catch-up window (3s late, window 2s)"),
			parts: []string{"catch-up window was never 2s"}},
		{name: "catch-up, concluded in time", steps: []state.Command{state.PutJob{Name: "a", Spec: window2s, IfVersion: 1}}, now: sec(4),
			outcome: skipped("missed: no leader could launch it within its catch-up window (3s late, window 2s)"), parts: []string{"before its window ended"}},
		{name: "waited for room", steps: []state.Command{state.PutJob{Name: "a", Spec: window2s, IfVersion: 1}}, now: sec(5), openLimit: 3,
			outcome: skipped(launcher.ReasonNoRoom(3, 3*time.Second, 2*time.Second))},
		{name: "waited for room of the job", steps: []state.Command{state.PutJob{Name: "a", Spec: window2s, IfVersion: 1}}, now: sec(5), openJobLimit: 2,
			outcome: skipped(launcher.ReasonNoRoomForJob(2, 3*time.Second, 2*time.Second))},
		{name: "waited for room, another limit", steps: []state.Command{state.PutJob{Name: "a", Spec: window2s, IfVersion: 1}}, now: sec(5), openLimit: 3, openJobLimit: 2,
			outcome: skipped(launcher.ReasonNoRoom(2, 3*time.Second, 2*time.Second)), parts: []string{"names a limit of 2", "the state's is 3"}},
		{name: "waited for room, no limit", steps: []state.Command{state.PutJob{Name: "a", Spec: window2s, IfVersion: 1}}, now: sec(5),
			outcome: skipped(launcher.ReasonNoRoomForJob(64, 3*time.Second, 2*time.Second)), parts: []string{"names a limit of 64", "the state's is 0"}},
		{name: "waited for room, concluded in time", steps: []state.Command{state.PutJob{Name: "a", Spec: window2s, IfVersion: 1}}, now: sec(4), openLimit: 3,
			outcome: skipped(launcher.ReasonNoRoom(3, 3*time.Second, 2*time.Second)), parts: []string{"before its window ended"}},
		{name: "forbid", policy: state.ConcurrencyForbid, outcome: forbid},
		{name: "forbid, policy allow", policy: state.ConcurrencyAllow, outcome: forbid, parts: []string{"never had policy forbid with last child x1"}},
		{name: "forbid, not the last child", policy: state.ConcurrencyForbid, outcome: forbidSkip("x0"),
			parts: []string{"last child x0"}},
		{name: "forbid, the child not named", policy: state.ConcurrencyForbid, outcome: skipped("previous child x1 still running (concurrency forbid)"),
			parts: []string{`naming child ""`, "only a forbid skip names one"}},
		{name: "forbid, another child named", policy: state.ConcurrencyForbid, outcome: state.Outcome{Kind: state.OutcomeSkipped, ChildID: "x0", Reason: forbid.Reason},
			parts: []string{`naming child "x0"`}},
		{name: "paused, naming a child", steps: []state.Command{state.Pause{Name: "a"}}, outcome: state.Outcome{Kind: state.OutcomeSkipped, ChildID: "x1", Reason: "job paused"},
			parts: []string{`naming child "x1"`}},
		{name: "forbid, a forced launch", policy: state.ConcurrencyForbid, manual: true, outcome: forbid, parts: []string{"forced"}},
		{name: "forbid, the child had finished", policy: state.ConcurrencyForbid, outcome: forbid,
			x1: NomadChild{ID: "x1", CreatedAt: sec(1), FinishedAt: sec(1).Add(500 * time.Millisecond)}, parts: []string{"x1 had finished", "before the launcher could ask"}},
		{name: "forbid, the child finished after the launch opened", policy: state.ConcurrencyForbid, outcome: forbid,
			x1: NomadChild{ID: "x1", CreatedAt: sec(1), FinishedAt: sec(2).Add(time.Millisecond)}},
		{name: "forbid, the child was collected", policy: state.ConcurrencyForbid, outcome: forbid,
			x1: NomadChild{ID: "x1", CreatedAt: sec(1), FinishedAt: sec(5), CollectedAt: sec(1)}, parts: []string{"collected child x1"}},
		{name: "forbid, Nomad never had the child", policy: state.ConcurrencyForbid, outcome: forbid,
			x1: NomadChild{ID: "other"}, parts: []string{"never had child x1"}},
		{name: "forbid without an answer", policy: state.ConcurrencyForbid, outcome: failed("could not tell whether the previous child x1 still runs: timeout")},
		{name: "forbid without an answer, policy replace", policy: state.ConcurrencyReplace, outcome: failed("could not tell whether the previous child x1 still runs: timeout"),
			parts: []string{"policy forbid"}},
		{name: "replace without a stop", policy: state.ConcurrencyReplace, outcome: failed("could not stop the previous child x1 (concurrency replace): timeout")},
		{name: "replace without a stop, policy forbid", policy: state.ConcurrencyForbid, outcome: failed("could not stop the previous child x1 (concurrency replace): timeout"),
			parts: []string{"policy replace"}},
		{name: "refused", target: "missing", outcome: failed("Nomad refused the dispatch: not found")},
		{name: "refused, Nomad has the job", outcome: failed("Nomad refused the dispatch: not found"), parts: []string{`Nomad has job "batch"`}},
		{name: "retries ran out", outcome: failed("dispatch failed 3 times, last: timeout")},
		{name: "no reason of the launcher's", outcome: skipped("it felt right"), parts: []string{`"it felt right"`, "no skipped reason"}},
		{name: "concluded in a term never taken over", term: state.Term{Round: 9, Replica: 2}, outcome: dispatched("x2"), parts: []string{"term 9.2", "last takeover chosen is 1.1's"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(t)
			if len(tc.parts) == 0 {
				wantOK(t, err)
				return
			}
			wantViolation(t, err, InvNoSilentSkip, append(tc.parts, "a-")...)
		})
	}
}

// cronLate is job "a" every second, created at sec(0), its schedule
// chosen at scheduleAt, with launches 1-6 started on time and dispatched,
// that of sec(2) 3 s late.
func cronLate(t *testing.T, scheduleAt time.Time) (*Cron, []NomadChild) {
	t.Helper()
	c := newCron()
	j := cronJob("a", "* * * * * *", 1)
	j.CreatedAt = sec(0)
	wantOK(t, c.Applied(1, scheduleAt, state.PutJob{Name: "a", Spec: j.Spec, At: sec(0)}, j))
	var children []NomadChild
	for s := 1; s <= 6; s++ {
		late := 100 * time.Millisecond
		if s == 2 {
			late = 3 * time.Second
		}
		wantOK(t, c.Started(uint64(2*s), sec(s), startCmd("a", sec(s)), j))
		ch := child(s, "c"+string(rune('0'+s)), late)
		wantOK(t, c.Finished(uint64(2*s+1), ch.CreatedAt, finishCmd("a", sec(s), dispatched(ch.ID))))
		children = append(children, ch)
	}
	return c, children
}

// Every healthy interval is judged, not only the last.
func TestCronOnTimeInEveryInterval(t *testing.T) {
	final := func(children []NomadChild, healthy ...Interval) CronFinal {
		return CronFinal{End: sec(20), Bound: 2 * time.Second, Healthy: healthy, Children: children,
			Jobs: []state.Job{endJob("0 0 * * *", sec(30))}}
	}
	early, tail := Interval{From: sec(1), To: sec(5)}, Interval{From: sec(8), To: sec(20)}
	c, children := cronLate(t, sec(0))
	wantViolation(t, c.Final(final(children, early, tail)), InvNoSilentSkip, "due "+sec(2).Format(time.RFC3339), "interval 0", "3s late")
	if n := c.Counts(); n.OnTime != 2 || n.OnTimeEarly != 2 {
		t.Errorf("counts %+v: want launches 1 and 2 judged, in the early interval", n)
	}
	c, children = cronLate(t, sec(0))
	wantOK(t, c.Final(final(children, Interval{From: sec(3), To: sec(5)}, tail)))
	// The interval must hold the whole lateness window.
	c, children = cronLate(t, sec(0))
	wantOK(t, c.Final(final(children, Interval{From: sec(1), To: sec(4)}, tail)))
	// A slot due before its schedule was chosen was late before anyone
	// knew of it.
	c, children = cronLate(t, sec(2).Add(time.Millisecond))
	wantOK(t, c.Final(final(children, early, tail)))
	if n := c.Counts(); n.OnTime != 0 {
		t.Errorf("counts %+v: want nothing judged", n)
	}
}

// A job deleted with a slot overdue while healthy lost it silently.
func TestCronDeletedWithSlotOverdue(t *testing.T) {
	run := func(deletedAt time.Time, healthy ...Interval) (*Cron, error) {
		c := newCron()
		j := cronJob("a", "* * * * * *", 1)
		j.CreatedAt = sec(0)
		put(t, c, 1, j)
		var children []NomadChild
		for s := 1; s <= 2; s++ {
			wantOK(t, c.Started(uint64(2*s), sec(s), startCmd("a", sec(s)), j))
			children = append(children, child(s, "c"+string(rune('0'+s)), 0))
			wantOK(t, c.Finished(uint64(2*s+1), sec(s), finishCmd("a", sec(s), dispatched(children[s-1].ID))))
		}
		wantOK(t, c.Applied(9, deletedAt, state.DeleteJob{Name: "a"}, state.Job{}))
		return c, c.Final(CronFinal{End: sec(20), Bound: 2 * time.Second, Healthy: healthy, Children: children})
	}
	_, err := run(sec(8), Interval{From: sec(1), To: sec(20)})
	wantViolation(t, err, InvNoSilentSkip, `job "a"'s slot `+sec(3).Format(time.RFC3339), "never started before the job was deleted")
	c, err := run(sec(8), Interval{From: sec(6), To: sec(20)})
	wantOK(t, err)
	if n := c.Counts(); n.DroppedByDelete != 5 || n.OverdueJudged != 0 {
		t.Errorf("counts %+v: want slots 3-7 dropped by the delete, none judged", n)
	}
	// Deleted within the bound of the slot: it could still be starting.
	c, err = run(sec(4), Interval{From: sec(1), To: sec(20)})
	wantOK(t, err)
	if n := c.Counts(); n.DroppedByDelete != 1 {
		t.Errorf("counts %+v: want slot 3 dropped by the delete", n)
	}
}

// A scheduled launch skipped as paused was decided on a state that had
// its job's previous start: a pause lifted before that does not bear the
// skip out, even within one term.
func TestCronPausedBeforeThePreviousStart(t *testing.T) {
	c := newCron()
	j := cronJob("a", "* * * * * *", 1)
	wantOK(t, c.Applied(1, sec(0), state.Takeover{Term: state.Term{Round: 1, Replica: 1}}, state.Job{}))
	put(t, c, 2, j)
	wantOK(t, c.Applied(3, sec(0), state.Pause{Name: "a"}, state.Job{}))
	wantOK(t, c.Applied(4, sec(0), state.Resume{Name: "a"}, state.Job{}))
	wantOK(t, c.Started(5, sec(1), startCmd("a", sec(1)), j))
	wantOK(t, c.Started(6, sec(2), startCmd("a", sec(2)), j))
	paused := state.Outcome{Kind: state.OutcomeSkipped, Reason: "job paused"}
	skip := func(at time.Time) state.LaunchFinished {
		f := finishCmd("a", at, paused)
		f.Term = state.Term{Round: 1, Replica: 1}
		return f
	}
	// The first launch's start may have been decided while it was paused.
	wantOK(t, c.Finished(7, sec(3), skip(sec(1))))
	wantViolation(t, c.Finished(8, sec(3), skip(sec(2))), InvNoSilentSkip, "a-", "was not paused", "view from slot 5")
}

// The forbid and replace policies act on the children of launches
// concluded unknown too: a skip naming one is justified, a skip naming a
// child of no such launch is not, and a failed look-up of an unknown
// launch must name one.
func TestCronJustifiesTheChildOfAnUnknownLaunch(t *testing.T) {
	unknownID := state.LaunchIdentity("a", sec(1), state.LaunchScheduled)
	run := func(o state.Outcome, x0Token string) error {
		t.Helper()
		x0 := NomadChild{ID: "x0", Token: x0Token, CreatedAt: sec(1), FinishedAt: sec(9)}
		c := NewCron(CronConfig{Nomad: &fakeNomad{children: map[string]NomadChild{"x0": x0}}})
		j := cronJob("a", "* * * * * *", 1)
		j.Spec.Concurrency = state.ConcurrencyForbid
		put(t, c, 1, j)
		wantOK(t, c.Applied(2, sec(0), state.Takeover{Term: state.Term{Round: 1, Replica: 1}}, state.Job{}))
		wantOK(t, c.Started(3, sec(1), startCmd("a", sec(1)), j))
		f := finishCmd("a", sec(1), state.Outcome{Kind: state.OutcomeUnknown, Reason: "could not look the launch up in Nomad: down"})
		f.Term = c.term
		wantOK(t, c.Finished(4, sec(1), f))
		wantOK(t, c.Started(5, sec(2), startCmd("a", sec(2)), j))
		f = finishCmd("a", sec(2), o)
		f.Term = c.term
		return c.Finished(6, sec(3), f)
	}
	skip := forbidSkip("x0")
	if err := run(skip, unknownID); err != nil {
		t.Fatalf("a skip naming the unknown launch's child: %v", err)
	}
	if err := run(skip, "a-other"); err == nil || !strings.Contains(err.Error(), "nor is it the child of a launch of the job concluded unknown") {
		t.Fatalf("a skip naming a child of no launch of the job: %v", err)
	}
	failed := state.Outcome{Kind: state.OutcomeFailed, Reason: "could not look up launch " + unknownID + " (outcome unknown) for the concurrency policy: timeout"}
	if err := run(failed, unknownID); err != nil {
		t.Fatalf("a failed look-up of the unknown launch: %v", err)
	}
	failed.Reason = "could not look up launch a-1 (outcome unknown) for the concurrency policy: timeout"
	if err := run(failed, unknownID); err == nil || !strings.Contains(err.Error(), "no launch of the job concluded unknown") {
		t.Fatalf("a failed look-up of no unknown launch: %v", err)
	}
}

// forbidSkip is the launcher's skip under concurrency forbid, naming child.
func forbidSkip(child string) state.Outcome {
	return state.Outcome{Kind: state.OutcomeSkipped, ChildID: child, Reason: launcher.ReasonForbid(child)}
}

// Every class the checker can justify is listed once, so that a swarm's
// report of them cannot leave one out.
func TestReasonClassesListsEveryClass(t *testing.T) {
	names := ReasonClasses()
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] {
			t.Fatalf("ReasonClasses() = %q: empty or repeated %q", names, n)
		}
		seen[n] = true
	}
	for r, n := range reasonNames {
		if !seen[n] {
			t.Errorf("class %d (%q) is missing from ReasonClasses() = %q", r, n, names)
		}
	}
}

// A launch that waited to start while the state held as many launches
// open as it keeps is not held to the lateness bound; one that did not
// wait, or waited with room to spare, is.
func TestCronCrowdedLaunchesWaitForRoom(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	run := func(limit int) (*Cron, error) {
		c := NewCron(CronConfig{Nomad: &fakeNomad{}, OpenLimit: limit})
		j := cronJob("a", "*/5 * * * * *", 1)
		put(t, c, 1, j)
		manual := state.Launch{Job: "a", ScheduledAt: sec(4), StartedAt: sec(4), Kind: state.LaunchManual, Identity: state.LaunchIdentity("a", sec(4), state.LaunchManual)}
		wantOK(t, c.Opened(2, sec(4), manual, j))
		// Slot 5 fills the state (2 of 2) until its conclusion at 11.5 s,
		// and slot 10 starts only then: its child comes 2.5 s late.
		c5, c10 := child(5, "c5", ms(100)), child(10, "c10", ms(2500))
		wantOK(t, c.Started(3, sec(5), startCmd("a", sec(5)), j))
		wantOK(t, c.Finished(4, sec(11).Add(ms(500)), finishCmd("a", sec(5), dispatched(c5.ID))))
		wantOK(t, c.Started(5, sec(11).Add(ms(600)), startCmd("a", sec(10)), j))
		wantOK(t, c.Finished(6, c10.CreatedAt, finishCmd("a", sec(10), dispatched(c10.ID))))
		wantOK(t, c.Finished(7, sec(13), state.LaunchFinished{Job: "a", ScheduledAt: sec(4), LaunchKind: state.LaunchManual, Outcome: dispatched("m4")}))
		return c, c.Final(CronFinal{End: sec(14), Bound: 2 * time.Second, Healthy: []Interval{{From: sec(0), To: sec(14)}},
			Children: []NomadChild{c5, c10, {ID: "m4", Token: manual.Identity, CreatedAt: sec(4)}}, Jobs: []state.Job{endJob("*/5 * * * * *", sec(15))}})
	}
	c, err := run(2)
	wantOK(t, err)
	if n := c.Counts(); n.Crowded != 1 || n.OnTime != 1 {
		t.Errorf("counts %+v: want slot 10 excused and slot 5 judged", n)
	}
	for _, limit := range []int{0, 3} {
		_, err := run(limit)
		wantViolation(t, err, InvNoSilentSkip, "due "+sec(10).Format(time.RFC3339), "2.5s late")
	}
}

// TestCronDeletedJudgesEverySlotOwed: a job that owed more than a handful
// of slots when it was deleted is judged on each, not only on the first
// few: here the first sixteen fall before the healthy interval, and the
// slot due at sec(21), well inside it, was lost.
func TestCronDeletedJudgesEverySlotOwed(t *testing.T) {
	c := newCron()
	j := cronJob("a", "* * * * * *", 1)
	j.CreatedAt = sec(0)
	put(t, c, 1, j)
	// Planted: never started, deleted at sec(40).
	wantOK(t, c.Applied(2, sec(40), state.DeleteJob{Name: "a"}, state.Job{}))
	err := c.Final(CronFinal{End: sec(60), Bound: 2 * time.Second, Healthy: []Interval{{From: sec(21), To: sec(60)}}})
	wantViolation(t, err, InvNoSilentSkip, `job "a"'s slot `+sec(21).Format(time.RFC3339), "never started before the job was deleted")
}

// TestCronScheduleEditExcusesOnlyNewSlots: a slot due before its job's
// schedule was last set is excused from the lateness bound only if the
// schedule in force when it came due did not have it: a slot both
// schedules share was known all along, and an edit while it waited does
// not explain its lateness.
func TestCronScheduleEditExcusesOnlyNewSlots(t *testing.T) {
	// run creates job "a" under from at sec(0), dispatches the slot at
	// first on time, sets the schedule to to at sec(6), dispatches the
	// slots in between on time and the slot at late, 4 s after it was due.
	// The new schedule owes its slots from the first the old one owed by
	// the edit (state.EditFrom).
	run := func(from, to string, first int, between []int, late int) error {
		c := newCron()
		j := cronJob("a", from, 1)
		j.CreatedAt = sec(0)
		wantOK(t, c.Applied(1, sec(0), state.PutJob{Name: "a", Spec: j.Spec, At: sec(0)}, j))
		c1 := child(first, "c1", 100*time.Millisecond)
		wantOK(t, c.Started(2, sec(first), startCmd("a", sec(first)), j))
		wantOK(t, c.Finished(3, c1.CreatedAt, finishCmd("a", sec(first), dispatched(c1.ID))))
		j.Spec.Schedule = to
		wantOK(t, c.Applied(4, sec(6), state.PutJob{Name: "a", Spec: j.Spec, At: sec(6)}, j))
		chs, slot := []NomadChild{c1}, uint64(5)
		for _, s := range between {
			ch := child(s, fmt.Sprintf("b%d", s), 100*time.Millisecond)
			wantOK(t, c.Started(slot, sec(6), startCmd("a", sec(s)), j))
			wantOK(t, c.Finished(slot+1, ch.CreatedAt, finishCmd("a", sec(s), dispatched(ch.ID))))
			chs, slot = append(chs, ch), slot+2
		}
		c2 := child(late, "c2", 4*time.Second)
		wantOK(t, c.Started(slot, sec(7), startCmd("a", sec(late)), j))
		wantOK(t, c.Finished(slot+1, c2.CreatedAt, finishCmd("a", sec(late), dispatched(c2.ID))))
		return c.Final(CronFinal{End: sec(20), Bound: 2 * time.Second, Healthy: []Interval{{From: sec(0), To: sec(20)}},
			Children: append(chs, c2), Jobs: []state.Job{endJob("0 0 * * *", sec(30))}})
	}
	// 06:59:45 is no slot of every other second: it came due unknown.
	wantOK(t, run("*/2 * * * * *", "* * * * * *", 2, []int{4}, 5))
	wantViolation(t, run("* * * * * *", "*/2 * * * * *", 1, nil, 2), InvNoSilentSkip, "due "+sec(2).Format(time.RFC3339), "4s late")
}

package launcher

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"paxcron/cron/scheduler"
	"paxcron/cron/state"
	"paxcron/paxos"
)

func TestScheduledLaunch(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("backup", job("@every 10s")))
	h.lease(1, 10*time.Second)
	h.at(t0.Add(9 * time.Second))
	if !h.l.Leading() {
		t.Fatal("a caught-up leader with a lease did not take over")
	}
	h.wantProposed("") // nothing due yet
	h.at(t0.Add(10 * time.Second))
	h.wantProposed("started backup-1772366410")
	h.wantNoRequest() // not before LaunchStarted is chosen
	h.commit()
	h.wantRequest(OpDispatch, "backup-1772366410")
	h.answer(Result{ChildID: "batch/dispatch-backup-1772366410-1-aa"})
	h.wantProposed("finished backup-1772366410 dispatched batch/dispatch-backup-1772366410-1-aa")
	h.commit()
	j, _ := h.l.Machine().Job("backup")
	if len(j.Open) != 0 || len(j.History) != 1 || j.History[0].Outcome.Kind != state.OutcomeDispatched {
		t.Fatalf("job after the launch: open %v history %v", j.Open, j.History)
	}
	if h.l.Open() != 0 {
		t.Fatalf("%d tasks left", h.l.Open())
	}
}

func TestNoLaunchWithoutLeaseOrCatchUp(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("backup", job("@every 10s")))
	h.lease(1, 10*time.Second)
	h.lead.CaughtUp = false
	h.at(t0.Add(20 * time.Second))
	h.lead.CaughtUp = true
	h.lead.LeaseUntil = time.Time{} // leader, caught up, no lease
	h.step()
	if h.l.Leading() || len(h.proposed) != 0 {
		t.Fatalf("launched without catch-up or lease: leading %t, proposed %d", h.l.Leading(), len(h.proposed))
	}
	// The lease lapses after a launch started: its dispatch waits.
	h.lease(1, 10*time.Second)
	h.at(t0.Add(20 * time.Second))
	h.wantProposed("started backup-1772366410")
	h.lead.LeaseUntil = h.now
	h.commit()
	h.wantNoRequest()
	h.at(h.now.Add(time.Second)) // lease renewed
	h.wantRequest(OpDispatch, "backup-1772366410")
}

func TestPausedAndMissedSlotsAreRecorded(t *testing.T) {
	h := newHarness(t, nil)
	spec := job("@every 1m")
	spec.CatchupWindow = 90 * time.Second
	h.apply(putJob("p", job("@every 1m")), state.Pause{Name: "p"}, putJob("late", spec))
	// The first leader arrives 3m30s after creation: late's slots at 1m
	// and 2m are beyond its 90 s window, 3m is within; p is paused.
	h.lease(1, 10*time.Second)
	h.at(t0.Add(3*time.Minute + 30*time.Second))
	h.wantProposed("started late-1772366460", "started p-1772366460")
	h.commit()
	h.wantProposed(
		"finished late-1772366460 skipped missed: no leader could launch it within its catch-up window (2m30s late, window 1m30s)",
		"finished p-1772366460 skipped job paused",
		"started late-1772366520", "started p-1772366520")
	h.commit()
	// The 2m slot is 1m30s late: inside the window (it is inclusive).
	h.wantProposed("finished p-1772366520 skipped job paused", "started late-1772366580", "started p-1772366580")
	h.wantRequest(OpDispatch, "late-1772366520")
	h.commit()
	h.wantProposed("finished p-1772366580 skipped job paused")
	h.commit()
	if len(h.d.pending) != 2 || h.d.pending[1].Identity != "late-1772366580" {
		t.Fatalf("pending %+v", h.d.pending)
	}
	if c := h.l.Machine().Stats().Launches; c.Started != 6 || c.Skipped != 4 {
		t.Fatalf("counters %+v: want 6 started, 4 skipped", c)
	}
}

// TestPromotionConcludesOpenLaunches: a new leader looks up every open
// launch before it does anything with it.
func TestPromotionConcludesOpenLaunches(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("a", job("@every 1m")), putJob("b", job("@every 1m")), putJob("c", job("@every 1m")), putJob("d", job("@every 1m")))
	at := t0.Add(time.Minute)
	for i, name := range []string{"a", "b", "c", "d"} {
		h.apply(state.LaunchStarted{Job: name, ScheduledAt: at, Identity: state.Identity(name, at), SpecVersion: uint64(i + 1), At: at})
	}
	h.apply(state.DeleteJob{Name: "d"})
	h.lease(2, 10*time.Second)
	h.at(at.Add(30 * time.Second))
	h.wantNoRequest() // calls of the previous leader may still land
	h.settle()
	for _, req := range h.d.pending {
		// The deleted job's launch too is looked up where it was sent.
		if req.Spec.NomadJob != "batch" {
			t.Fatalf("lookup of %s without its target: %+v", req.Identity, req.Spec)
		}
	}
	h.answerFor(OpLookup, "a-1772366460", Result{Found: true, ChildID: "batch/dispatch-a"}) // dispatched before the failover
	h.answerFor(OpLookup, "b-1772366460", Result{})                                         // never dispatched: dispatch it now, with the same token
	h.answerFor(OpLookup, "c-1772366460", Result{Err: errTimeout})                          // Nomad unreachable: try again later
	h.answerFor(OpLookup, "d-1772366460", Result{})                                         // the deleted job's launch: never dispatched now
	h.answerFor(OpDispatch, "b-1772366460", Result{ChildID: "batch/dispatch-b"})
	h.settle()
	h.wantNoRequest()
	if n := len(h.l.Machine().Orphans()); n != 1 {
		t.Fatalf("%d orphans before the commit, want 1", n)
	}
	h.wantProposed(
		"finished a-1772366460 dispatched batch/dispatch-a",
		"finished d-1772366460 skipped job deleted before it was dispatched",
		"finished b-1772366460 dispatched batch/dispatch-b")
	h.commit()
	h.at(h.now.Add(time.Second))
	h.answerFor(OpLookup, "c-1772366460", Result{Found: true, ChildID: "batch/dispatch-c"})
	h.wantProposed("finished c-1772366460 dispatched batch/dispatch-c")
	h.commit()
	if n := len(h.l.Machine().Orphans()); n != 0 {
		t.Fatalf("%d orphans left", n)
	}
}

// TestOpenLaunchPastHorizonIsNeverRedispatched: fail closed.
func TestOpenLaunchPastHorizonIsNeverRedispatched(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MemoryHorizon = time.Hour; c.ClockSkew = time.Minute })
	spec := job("@every 1m")
	spec.CatchupWindow = 2 * time.Hour // the window would allow it
	h.apply(putJob("a", spec))
	at := t0.Add(time.Minute)
	h.apply(state.LaunchStarted{Job: "a", ScheduledAt: at, Identity: state.Identity("a", at), SpecVersion: 1, At: at})
	h.lease(2, 10*time.Second)
	h.at(at.Add(59 * time.Minute)) // horizon 1h less 1m of skew: just past
	h.settle()
	h.wantRequest(OpLookup, "a-1772366460")
	h.answer(Result{})
	h.wantNoRequest()
	got := describe(h.proposed)
	if !strings.Contains(got, "finished a-1772366460 unknown open since 2026-03-01T12:01:00Z, longer than Nomad is sure to remember") {
		t.Fatalf("proposed:\n%s", got)
	}
}

// atLeastOncePastHorizon: an at-least-once launch of job a, due at
// t0+1m with the given catch-up window, left open by an earlier leader;
// a new one looks it up just past the horizon (1 h, less 1 m of skew)
// and finds nothing.
func atLeastOncePastHorizon(t *testing.T, window time.Duration) *harness {
	h := newHarness(t, func(c *Config) { c.MemoryHorizon = time.Hour; c.ClockSkew = time.Minute })
	spec := job("@every 1m")
	spec.CatchupWindow = window
	spec.AtLeastOnce = true
	h.apply(putJob("a", spec))
	at := t0.Add(time.Minute)
	h.apply(state.LaunchStarted{Job: "a", ScheduledAt: at, Identity: state.Identity("a", at), SpecVersion: 1, At: at})
	h.lease(2, 10*time.Second)
	h.at(at.Add(59 * time.Minute))
	h.settle()
	h.wantRequest(OpLookup, "a-1772366460")
	h.answer(Result{})
	return h
}

// TestAtLeastOncePastHorizonIsDispatchedAgain: the job's choice; the
// same token, within the catch-up window.
func TestAtLeastOncePastHorizonIsDispatchedAgain(t *testing.T) {
	pastHorizon := func(window time.Duration) *harness {
		h := atLeastOncePastHorizon(t, window)
		h.settle()
		return h
	}
	wantFinished := func(h *harness, want string) {
		t.Helper()
		if got := describe(h.proposed); !strings.Contains(got, "finished a-1772366460 "+want) {
			t.Fatalf("proposed:\n%s\nwant finished a-1772366460 %s", got, want)
		}
	}

	h := pastHorizon(2 * time.Hour)
	if len(h.d.pending) == 0 || h.d.pending[0].Op != OpDispatch || h.d.pending[0].Identity != "a-1772366460" {
		t.Fatalf("pending %+v, want a's dispatch again", h.d.pending)
	}
	h.answer(Result{ChildID: "batch/dispatch-a-2"})
	wantFinished(h, "dispatched batch/dispatch-a-2")

	// Refused the second time, it may still have run the first: unknown,
	// not failed.
	h = pastHorizon(2 * time.Hour)
	h.answerFor(OpDispatch, "a-1772366460", Result{Err: fmt.Errorf("%w: parameterized job not found", ErrRejected)})
	wantFinished(h, "unknown dispatched again after Nomad may have forgotten an earlier child (at least once), then failed")

	// Past its catch-up window it is not dispatched again, and, since it
	// may have run, recorded unknown rather than skipped.
	wantFinished(pastHorizon(30*time.Minute), "unknown open since")
}

// TestAtLeastOncePastHorizonBacksOff: an at-least-once launch past the
// horizon whose dispatches keep failing, each found by its look-up not to
// have made a child, is sent again after a growing wait, as any failed
// dispatch is. Found in review: it went again as soon as each look-up
// answered, for as long as its catch-up window lasted.
func TestAtLeastOncePastHorizonBacksOff(t *testing.T) {
	const window = 2 * time.Hour
	h := atLeastOncePastHorizon(t, window)
	due := t0.Add(time.Minute)
	for i, wait := range []time.Duration{0, DefaultRetryAfter, 2 * DefaultRetryAfter, 4 * DefaultRetryAfter} {
		if wait > 0 {
			h.wantNoRequest()
			h.at(h.now.Add(wait - time.Millisecond))
			h.wantNoRequest()
			h.settle()
		}
		if len(h.d.pending) != 1 || h.d.pending[0].Op != OpDispatch {
			t.Fatalf("dispatch %d: pending %+v, want a's dispatch again", i+1, h.d.pending)
		}
		h.answer(Result{Err: errTimeout})
		h.settle()
		h.wantRequest(OpLookup, "a-1772366460")
		h.answer(Result{})
	}
	// Near the end of its window, the wait would pass it: concluded
	// unknown (a child of an earlier dispatch may have run), not sent.
	h.at(due.Add(window - 4*DefaultRetryAfter))
	h.wantRequest(OpDispatch, "a-1772366460")
	h.answer(Result{Err: errTimeout})
	h.settle()
	h.wantRequest(OpLookup, "a-1772366460")
	h.answer(Result{})
	h.wantNoRequest()
	if got := describe(h.proposed); !strings.Contains(got, "finished a-1772366460 unknown dispatched again after Nomad may have forgotten an earlier child (at least once), then failed: dispatch failed 5 times") {
		t.Fatalf("proposed:\n%s\nwant the launch concluded unknown once its window would pass", got)
	}
}

func TestOpenLaunchBeyondCatchupWindowIsSkipped(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("a", job("@every 1h")))
	at := t0.Add(time.Hour)
	h.apply(state.LaunchStarted{Job: "a", ScheduledAt: at, Identity: state.Identity("a", at), SpecVersion: 1, At: at})
	h.lease(2, 10*time.Second)
	h.at(at.Add(6 * time.Minute))
	h.settle()
	h.wantRequest(OpLookup, "a-1772370000")
	h.answer(Result{})
	h.wantNoRequest()
	h.wantProposed("finished a-1772370000 skipped not dispatched within its catch-up window (6m0s late, window 5m0s)")
}

func TestAmbiguousDispatchIsLookedUpThenRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("a", job("@every 1h")), putJob("b", job("@every 1h")))
	h.lease(1, 10*time.Second)
	h.at(t0.Add(time.Hour))
	h.commit()
	// a: the reply was lost, but the child exists.
	h.wantRequest(OpDispatch, "a-1772370000")
	h.answer(Result{Err: errTimeout})
	// b: Nomad answered 500 and made nothing.
	h.wantRequest(OpDispatch, "b-1772370000")
	h.answer(Result{Err: fmt.Errorf("500 internal error")})
	h.wantNoRequest() // the dispatches may still be on their way
	h.settle()
	h.wantRequest(OpLookup, "a-1772370000")
	h.answer(Result{Found: true, ChildID: "batch/dispatch-a"})
	h.wantRequest(OpLookup, "b-1772370000")
	h.answer(Result{})
	h.wantNoRequest() // b waits before dispatching again
	h.at(h.now.Add(time.Second))
	h.wantRequest(OpDispatch, "b-1772370000")
	h.answer(Result{ChildID: "batch/dispatch-b"})
	h.wantProposed("finished a-1772370000 dispatched batch/dispatch-a", "finished b-1772370000 dispatched batch/dispatch-b")
}

// TestDispatchNotSentIsSentAgainWithoutLookup: a dispatch that never
// reached Nomad (its request's time ran out waiting for a connection) is
// made again after the retry's wait, not looked up once MaxCallLatency
// has passed; one whose job was deleted meanwhile fails with the error.
func TestDispatchNotSentIsSentAgainWithoutLookup(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxCallLatency = time.Minute })
	h.apply(putJob("a", job("@every 1h")), putJob("b", job("@every 1h")))
	h.lease(1, 10*time.Minute)
	h.at(t0.Add(time.Hour))
	h.commit()
	notSent := fmt.Errorf("%w: 60 calls to Nomad were in flight until the deadline", ErrNotSent)
	h.wantRequest(OpDispatch, "a-1772370000")
	h.answer(Result{Err: notSent})
	h.wantRequest(OpDispatch, "b-1772370000")
	h.answer(Result{Err: notSent})
	h.apply(state.DeleteJob{Name: "b"})
	h.wantNoRequest() // the retry's wait
	h.at(h.now.Add(time.Second))
	h.wantRequest(OpDispatch, "a-1772370000")
	h.answer(Result{ChildID: "batch/dispatch-a"})
	h.wantNoRequest()
	h.wantProposed("finished b-1772370000 failed dispatch failed (launcher: not sent to Nomad: 60 calls to Nomad were in flight until the deadline) and the job was deleted since",
		"finished a-1772370000 dispatched batch/dispatch-a")
	if s := h.l.Stats(); s.Calls[OpLookup] != 0 {
		t.Fatalf("%d lookups for dispatches that never reached Nomad", s.Calls[OpLookup])
	}
}

// TestDeletedWhileWaitingToDispatchAgain: a dispatch that failed, found
// not to have happened, waits to be sent again; the job is deleted in the
// wait. The launch is recorded failed, with the failure, not skipped as
// though no dispatch had been tried. Found in review.
func TestDeletedWhileWaitingToDispatchAgain(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("b", job("@every 1h")))
	h.lease(1, 10*time.Second)
	h.at(t0.Add(time.Hour))
	h.commit()
	h.wantRequest(OpDispatch, "b-1772370000")
	h.answer(Result{Err: fmt.Errorf("500 internal error")})
	h.settle()
	h.wantRequest(OpLookup, "b-1772370000")
	h.answer(Result{})
	h.wantNoRequest() // b waits before dispatching again
	h.apply(state.DeleteJob{Name: "b"})
	h.at(h.now.Add(time.Second))
	h.wantNoRequest()
	h.wantProposed("finished b-1772370000 failed dispatch failed (500 internal error) and the job was deleted since")
}

func TestRejectedDispatchFails(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("a", job("@every 1h")))
	h.lease(1, 10*time.Second)
	h.at(t0.Add(time.Hour))
	h.commit()
	h.answer(Result{Err: fmt.Errorf("%w: job %q not found", ErrRejected, "batch")})
	h.wantNoRequest()
	h.wantProposed(`finished a-1772370000 failed Nomad refused the dispatch: launcher: rejected by Nomad: job "batch" not found`)
}

// TestGivesUpAtTheEndOfTheWindow: a dispatch that keeps failing ends as
// failed when a lookup says no child was made, and as unknown when
// Nomad cannot even be asked.
func TestGivesUpAtTheEndOfTheWindow(t *testing.T) {
	for _, lookupFails := range []bool{false, true} {
		h := newHarness(t, nil)
		spec := job("0 13 1 3 *") // once a year, at t0 + 1h
		spec.CatchupWindow = 10 * time.Second
		h.apply(putJob("a", spec))
		h.lease(1, 10*time.Second)
		h.at(t0.Add(time.Hour))
		h.commit()
		for i := 0; i < 2000 && len(h.proposed) == 0; i++ {
			switch {
			case len(h.d.pending) > 0 && h.d.pending[0].Op == OpDispatch:
				h.answer(Result{Err: errTimeout})
			case len(h.d.pending) > 0 && lookupFails:
				h.answer(Result{Err: errTimeout})
			case len(h.d.pending) > 0:
				h.answer(Result{})
			case lookupFails:
				h.at(h.now.Add(30 * time.Second))
			default:
				h.at(h.now.Add(time.Second))
			}
		}
		want := "finished a-1772370000 failed dispatch failed 3 times, last: context deadline exceeded"
		if lookupFails {
			want = "finished a-1772370000 unknown could not look the launch up in Nomad: context deadline exceeded"
		}
		h.wantProposed(want)
		// A dispatch is retried within the window; a lookup for as long
		// as Nomad is sure to remember.
		end := t0.Add(time.Hour + 10*time.Second)
		if lookupFails {
			end = t0.Add(time.Hour + 4*time.Hour - DefaultClockSkew)
		}
		if h.now.After(end) || h.now.Before(end.Add(-time.Minute)) {
			t.Fatalf("gave up at %v, want just before %v", h.now, end)
		}
	}
}

func TestConcurrencyPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy  state.Concurrency
		running bool
		want    []Op
		outcome string
	}{
		{state.ConcurrencyForbid, true, []Op{OpRunning}, "finished a-1772373600 skipped batch/dispatch-1 previous child batch/dispatch-1 still running (concurrency forbid)"},
		{state.ConcurrencyForbid, false, []Op{OpRunning, OpDispatch}, "finished a-1772373600 dispatched batch/dispatch-2"},
		{state.ConcurrencyReplace, true, []Op{OpStop, OpDispatch}, "finished a-1772373600 dispatched batch/dispatch-2"},
		{state.ConcurrencyAllow, true, []Op{OpDispatch}, "finished a-1772373600 dispatched batch/dispatch-2"},
	} {
		t.Run(fmt.Sprintf("%s-running=%t", tc.policy, tc.running), func(t *testing.T) {
			h := newHarness(t, nil)
			spec := job("@every 1h")
			spec.Concurrency = tc.policy
			h.apply(putJob("a", spec))
			h.lease(1, 10*time.Second)
			h.at(t0.Add(time.Hour))
			h.commit()
			h.answer(Result{ChildID: "batch/dispatch-1"})
			h.commit()
			h.at(t0.Add(2 * time.Hour))
			h.commit()
			var ops []Op
			for len(h.d.pending) > 0 {
				req := h.answer(Result{Found: tc.running, ChildID: "batch/dispatch-2"})
				ops = append(ops, req.Op)
				if req.Op == OpRunning || req.Op == OpStop {
					if req.ChildID != "batch/dispatch-1" {
						t.Fatalf("%s about child %q", req.Op, req.ChildID)
					}
				}
			}
			if fmt.Sprint(ops) != fmt.Sprint(tc.want) {
				t.Fatalf("calls %v, want %v", ops, tc.want)
			}
			h.wantProposed(tc.outcome)
		})
	}
}

// TestForbidWaitsForEarlierOpenLaunch: the policy is about the previous
// child, so a launch waits until the one before it concluded.
func TestForbidWaitsForEarlierOpenLaunch(t *testing.T) {
	h := newHarness(t, nil)
	spec := job("@every 1m")
	spec.Concurrency = state.ConcurrencyForbid
	h.apply(putJob("a", spec))
	h.lease(1, 10*time.Second)
	h.at(t0.Add(time.Minute))
	h.commit()
	first := h.wantRequest(OpDispatch, "a-1772366460")
	h.at(t0.Add(2 * time.Minute))
	h.commit()
	h.at(h.now.Add(2 * time.Second))
	if len(h.d.pending) != 1 {
		t.Fatalf("%d requests pending, want only the first dispatch", len(h.d.pending))
	}
	h.answer(Result{ChildID: "batch/dispatch-1"})
	if first.Op != OpDispatch {
		t.Fatal(first)
	}
	h.commit()
	h.at(h.now.Add(2 * time.Second))
	h.wantRequest(OpRunning, "a-1772366520")
}

func TestDemotionDropsEverything(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("a", job("@every 1h")), putJob("b", job("@every 1h")), putJob("c", job("@every 1h")))
	h.lease(1, 10*time.Second)
	h.at(t0.Add(time.Hour))
	h.commit()
	h.answerFor(OpDispatch, "c-1772370000", Result{Err: errTimeout}) // c: did it happen?
	h.wantRequest(OpDispatch, "a-1772370000")
	h.lead = Leadership{} // a follower now, with a's and b's dispatches in flight
	h.step()
	if h.l.Leading() {
		t.Fatal("still leading")
	}
	h.answerFor(OpDispatch, "a-1772370000", Result{ChildID: "batch/dispatch-a"}) // the answers arrive late
	h.answerFor(OpDispatch, "b-1772370000", Result{Err: errTimeout})
	if len(h.proposed) != 0 || h.l.Stats().StaleResults != 2 {
		t.Fatalf("a result after demotion was acted on: %s", describe(h.proposed))
	}
	// Leader again, no other leader in between: it knows a's child, and
	// looks b and c up only once their dispatches must have landed.
	h.lease(3, 10*time.Second)
	h.at(h.now.Add(time.Second))
	h.wantProposed("finished a-1772370000 dispatched batch/dispatch-a")
	h.settle()
	h.answerFor(OpLookup, "b-1772370000", Result{})
	h.answerFor(OpLookup, "c-1772370000", Result{Found: true, ChildID: "batch/dispatch-c"})
	h.commit()
	// A new term of the same replica is a new leadership too.
	h.lead.Term = paxos.Ballot{Round: 4, Replica: 1}
	h.step()
	if s := h.l.Stats(); s.Promotions != 3 || s.Demotions != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestReelectedLeaderCarriesOn: a leader re-elected with no other
// leader's takeover in between launches what it never dispatched at once;
// after another leader's takeover it looks everything up.
func TestReelectedLeaderCarriesOn(t *testing.T) {
	for _, other := range []bool{false, true} {
		h := newHarness(t, func(c *Config) { c.MaxCallLatency = time.Second })
		h.apply(putJob("a", job("@every 1h")))
		h.lease(1, 10*time.Second)
		h.at(t0.Add(time.Hour))
		h.lead.LeaseUntil = h.now // the lease lapses before the dispatch
		h.commit()
		h.wantNoRequest()
		h.lead = Leadership{}
		h.step()
		if other {
			h.apply(state.Takeover{Term: state.Term{Round: 2, Replica: 2}}) // another leader, briefly
		}
		h.lease(3, 10*time.Second)
		h.at(h.now.Add(100 * time.Millisecond))
		if other {
			h.wantNoRequest() // it waits for the other leader's calls to land
			h.at(h.now.Add(time.Second))
			h.wantRequest(OpLookup, "a-1772370000")
			continue
		}
		h.wantRequest(OpDispatch, "a-1772370000")
	}
}

// TestReelectedLeaderLooksAgainPastTheHorizon: a launch an earlier leader
// left open past Nomad's memory horizon is looked up, found nowhere and
// concluded unknown (its child may have been collected); that conclusion
// is lost as the leader steps down, and the same replica is re-elected
// with no other takeover between. It must look the launch up again and
// fail closed again. Found in review: the look-up had cleared the launch
// from the leader's memory, so the re-elected leader took it for one
// nobody had called Nomad for and decided it afresh: a second child
// within a long catch-up window, or a skip that hides the first.
func TestReelectedLeaderLooksAgainPastTheHorizon(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*state.JobSpec)
		paused bool
	}{
		{"a day's catch-up window", func(s *state.JobSpec) { s.CatchupWindow = 24 * time.Hour }, false},
		{"the default window", func(*state.JobSpec) {}, false},
		{"at least once, paused", func(s *state.JobSpec) { s.CatchupWindow, s.AtLeastOnce = 24*time.Hour, true }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			spec := job("0 0 * * *")
			tc.mutate(&spec)
			h.apply(putJob("pay", spec))
			slot := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
			id := state.Identity("pay", slot)
			h.apply(state.Takeover{Term: state.Term{Round: 1, Replica: 2}})
			h.apply(state.LaunchStarted{Job: "pay", ScheduledAt: slot, Identity: id, SpecVersion: 1, At: slot})
			if tc.paused {
				h.apply(state.Pause{Name: "pay"})
			}
			h.now = slot.Add(5 * time.Hour) // past the 4 h horizon
			for term := uint64(3); term <= 4; term++ {
				h.lease(term, 10*time.Second)
				h.reelect()
				h.wantRequest(OpLookup, id)
				h.busy = true // the conclusion is refused: the node steps down
				h.answer(Result{})
				h.lead.Leader = false
				h.step()
				h.busy = false
				if h.l.Leading() || len(h.proposed) != 0 {
					t.Fatalf("term %d: leading %v after the step-down, proposed %q", term, h.l.Leading(), describe(h.proposed))
				}
			}
			h.lease(5, 10*time.Second)
			h.reelect()
			h.wantRequest(OpLookup, id)
			h.answer(Result{})
			h.wantProposed("finished " + id + " unknown *")
		})
	}
}

// reelect steps the leader a second on, and on past MaxCallLatency if it
// made no call at once (a takeover after another leader's term).
func (h *harness) reelect() {
	h.at(h.now.Add(time.Second))
	if len(h.d.pending) == 0 {
		h.settle()
	}
}

// TestHerdIsBatchedAndBounded: many launches due at once are proposed in
// batches of MaxStartsPerStep, with at most MaxInflight calls in flight,
// and all are dispatched.
func TestHerdIsBatchedAndBounded(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxInflight = 8; c.MaxStartsPerStep = 100 })
	const jobs = 1000
	for i := range jobs {
		h.apply(putJob(fmt.Sprintf("j%04d", i), job("0 0 * * *")))
	}
	midnight := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	h.lease(1, 10*time.Second)
	h.at(midnight)
	if len(h.proposed) != 100 {
		t.Fatalf("%d starts proposed in one step, want 100", len(h.proposed))
	}
	dispatched := 0
	for round := 0; dispatched < jobs && round < 10*jobs; round++ {
		if len(h.d.pending) > 8 {
			t.Fatalf("%d calls in flight, limit 8", len(h.d.pending))
		}
		if len(h.proposed) > 0 {
			for _, c := range h.commit() {
				if f, ok := c.(state.LaunchFinished); ok && f.Outcome.Kind == state.OutcomeDispatched {
					dispatched++
				}
			}
			continue
		}
		if len(h.d.pending) == 0 {
			t.Fatalf("stalled after %d dispatched", dispatched)
		}
		req := h.answer(Result{ChildID: "batch/dispatch-" + req0(h).Identity})
		if req.Op != OpDispatch {
			t.Fatalf("unexpected %s", req.Op)
		}
	}
	if dispatched != jobs {
		t.Fatalf("%d of %d dispatched", dispatched, jobs)
	}
	if s := h.l.Machine().Stats().Launches; s.Started != jobs || s.Dispatched != jobs {
		t.Fatalf("counters %+v", s)
	}
}

func req0(h *harness) Request { return h.d.pending[0] }

// TestDeletedWhileInFlight: the dispatch's outcome is still recorded, on
// the deleted job's orphaned launch.
func TestDeletedWhileInFlight(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("a", job("@every 1h")))
	h.lease(1, 10*time.Second)
	h.at(t0.Add(time.Hour))
	h.commit()
	h.wantRequest(OpDispatch, "a-1772370000")
	h.apply(state.DeleteJob{Name: "a"})
	h.answer(Result{ChildID: "batch/dispatch-a"})
	h.wantProposed("finished a-1772370000 dispatched batch/dispatch-a")
	h.commit()
	if s := h.l.Machine().Stats(); s.Launches.Dispatched != 1 || s.Rejected != 0 || len(h.l.Machine().Orphans()) != 0 {
		t.Fatalf("stats %+v orphans %v", s, h.l.Machine().Orphans())
	}
}

// TestCopyOfAConclusionSparesTheNextBackfill: a conclusion proposed twice
// (the first copy not applied in time) whose second copy is chosen after
// a backfill opened the slot again. Found in review: the launcher took the
// duplicate for the backfill's conclusion and dropped its task (the
// backfill stayed open, never tried), and for a second backfill the state
// closed it with the first's outcome.
func TestCopyOfAConclusionSparesTheNextBackfill(t *testing.T) {
	for _, firstKind := range []state.LaunchKind{state.LaunchScheduled, state.LaunchBackfill} {
		t.Run(firstKind.String(), func(t *testing.T) {
			h := newHarness(t, nil)
			h.apply(putJob("b", job("@every 1h")), state.Pause{Name: "b"})
			h.lease(1, 10*time.Second)
			slot := t0.Add(time.Hour)
			id := state.Identity("b", slot)
			h.at(slot)
			h.commit()
			h.commit() // skipped: paused
			h.apply(state.Resume{Name: "b"})
			if firstKind == state.LaunchBackfill {
				h.apply(state.Backfill{Name: "b", From: slot, To: slot, At: h.now})
				h.step()
				h.answerFor(OpDispatch, id, Result{Err: fmt.Errorf("%w: parameterized job not found", ErrRejected)})
			} else {
				h.apply(state.Pause{Name: "b"})
				h.at(slot.Add(time.Hour))
				h.commit()
				h.apply(state.Resume{Name: "b"})
				id, slot = state.Identity("b", slot.Add(time.Hour)), slot.Add(time.Hour)
			}
			h.wantProposed("finished " + id + " *")
			h.at(h.now.Add(DefaultProposalTimeout)) // not applied in time: proposed again
			copies := h.proposed
			h.proposed = nil
			if len(copies) != 2 {
				t.Fatalf("proposed %q, want the conclusion twice", describe(copies))
			}
			h.apply(copies[0])
			h.apply(state.Backfill{Name: "b", From: slot, To: slot, At: h.now, Force: true})
			h.apply(copies[1])
			h.step()
			if _, ok := h.l.Machine().OpenLaunch("b", slot, state.LaunchBackfill); !ok {
				t.Fatalf("the copy of the conclusion closed the backfill opened after it")
			}
			h.wantRequest(OpDispatch, id)
		})
	}
}

// TestStartAtTheOpenLimitWaitsForAConclusion: a job with as many launches
// open as the state keeps (Nomad unreachable, its look-ups failing) has
// its next start refused once, and proposed again only when one of them
// concludes. Found in review: the refused start put the job straight back
// in the heap as due, so every step wrote another refused start to the
// log for as long as the launches stayed open.
func TestStartAtTheOpenLimitWaitsForAConclusion(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("s", job("@every 1m")))
	h.apply(state.Takeover{Term: state.Term{Round: 1, Replica: 2}})
	for i := 1; i <= state.MaxOpenLaunches; i++ {
		at := t0.Add(time.Duration(i) * time.Minute)
		h.apply(state.LaunchStarted{Job: "s", ScheduledAt: at, Identity: state.Identity("s", at), SpecVersion: 1, At: at})
	}
	next := t0.Add(time.Duration(state.MaxOpenLaunches+1) * time.Minute)
	h.now = next
	h.lease(3, 10*time.Second)
	h.step()
	startsOfNext := func() (n int) {
		for range 20 { // no time passes
			for _, c := range h.commit() {
				if s, ok := c.(state.LaunchStarted); ok && s.ScheduledAt.Equal(next) {
					n++
				}
			}
			if err := h.l.CheckSchedule(); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	if n := startsOfNext(); n != 1 {
		t.Fatalf("the start of %v at the limit was proposed %d times in 20 commits, want once", next, n)
	}
	if _, opened := h.l.Machine().OpenLaunch("s", next, state.LaunchScheduled); opened {
		t.Fatal("a start past the limit was accepted")
	}
	h.settle() // the look-ups of the open launches leave
	first := t0.Add(time.Minute)
	h.answerFor(OpLookup, state.Identity("s", first), Result{Found: true, ChildID: "batch/dispatch-s"})
	h.wantProposed("finished " + state.Identity("s", first) + " dispatched batch/dispatch-s")
	h.commit()
	if n := startsOfNext(); n != 1 {
		t.Fatalf("once a launch concluded, the start of %v was proposed %d times, want once", next, n)
	}
	if _, opened := h.l.Machine().OpenLaunch("s", next, state.LaunchScheduled); !opened {
		t.Fatal("the start was not accepted once a launch concluded")
	}
}

// TestStartsWaitForRoomAmongAllJobs: with as many launches open as the
// state keeps of all jobs, no start is proposed, not even a skip's, until
// one concludes; and a start refused because a client's trigger took the
// room first waits for any job's conclusion, not its own job's (it has
// none open).
func TestStartsWaitForRoomAmongAllJobs(t *testing.T) {
	limits := state.DefaultLimits()
	limits.OpenLaunches = 2
	m, err := state.NewWithLimits(limits)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Machine = m })
	h.apply(putJob("a", job("@every 1m")), putJob("b", job("@every 1m")), putJob("c", job("@every 1m")))
	h.apply(state.Takeover{Term: state.Term{Round: 1, Replica: 2}})
	due := t0.Add(time.Minute)
	for _, name := range []string{"a", "b"} { // started by the leader before
		h.apply(state.LaunchStarted{Job: name, ScheduledAt: due, Identity: state.Identity(name, due), SpecVersion: 1, At: due})
	}
	h.now = due
	h.lease(3, 10*time.Second)
	h.step()
	startsOf := func(job string) (n int) {
		for range 20 { // no time passes
			for _, c := range h.commit() {
				if s, ok := c.(state.LaunchStarted); ok && s.Job == job {
					n++
				}
			}
			if err := h.l.CheckSchedule(); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	if n := startsOf("c"); n != 0 {
		t.Fatalf("with no room, c's start was proposed %d times, want none", n)
	}
	// Nor is a wake asked for it: a conclusion, applied, steps the
	// launcher anyway. Found in review: the due start asked for one at
	// once, and the loop woke every 2 ms for as long as the state was full.
	if at, ok := h.l.NextWake(); ok && !at.After(h.now) {
		t.Fatalf("with no room, NextWake = %v, now %v: a wake at once, again and again", at, h.now)
	}
	h.settle() // the look-ups of a's and b's launches leave
	h.answerFor(OpLookup, state.Identity("a", due), Result{Found: true, ChildID: "batch/dispatch-a"})
	h.wantProposed("finished " + state.Identity("a", due) + " dispatched batch/dispatch-a")
	h.commit()
	// Room for one: c's start is proposed, but a trigger of b applies
	// first and takes it.
	h.wantProposed("started " + state.Identity("c", due))
	h.apply(state.Trigger{Name: "b", At: due})
	if n := startsOf("c"); n != 1 {
		t.Fatalf("c's start was proposed %d times more, want once (refused)", n-1)
	}
	if _, opened := m.OpenLaunch("c", due, state.LaunchScheduled); opened {
		t.Fatal("a start past the room of all jobs was accepted")
	}
	h.answerFor(OpDispatch, state.Identity("b", due), Result{ChildID: "batch/dispatch-b"})
	h.commit()
	if n := startsOf("c"); n != 1 {
		t.Fatalf("once b's launch concluded, c's start was proposed %d times, want once", n)
	}
	if _, opened := m.OpenLaunch("c", due, state.LaunchScheduled); !opened {
		t.Fatal("c's start was not accepted once b's launch concluded")
	}
}

// TestLostProposalsAreProposedAgain: a proposal the node refused (busy)
// or lost is proposed again, and a duplicate is harmless.
func TestLostProposalsAreProposedAgain(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("a", job("@every 1h")))
	h.lease(1, 10*time.Second)
	h.busy = true
	h.at(t0.Add(time.Hour))
	h.busy = false
	h.wantProposed("")
	h.at(h.now.Add(50 * time.Millisecond))
	h.wantProposed("started a-1772370000")
	h.proposed = nil // lost
	h.at(h.now.Add(DefaultProposalTimeout))
	h.wantProposed("started a-1772370000")
	h.commit()
	h.busy = true
	h.answer(Result{ChildID: "batch/dispatch-a"})
	h.busy = false
	h.wantProposed("")
	h.at(h.now.Add(DefaultProposalTimeout / 2))
	h.wantProposed("finished a-1772370000 dispatched batch/dispatch-a")
	h.proposed = append(h.proposed, h.proposed...) // proposed twice
	h.commit()
	if s := h.l.Machine().Stats(); s.Launches.Dispatched != 1 || s.Launches.Duplicates != 1 {
		t.Fatalf("stats %+v", s.Launches)
	}
}

func TestConfigValidation(t *testing.T) {
	d := &fakeDispatcher{}
	ok := Config{Machine: state.New(), Dispatcher: d, MemoryHorizon: time.Hour, Propose: func(state.Command) error { return nil },
		NewClusterID: func() state.ClusterID { return state.ClusterID{1} }}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Config){
		"no machine":    func(c *Config) { c.Machine = nil },
		"no horizon":    func(c *Config) { c.MemoryHorizon = 0 },
		"skew too big":  func(c *Config) { c.ClockSkew = 2 * time.Hour },
		"negative":      func(c *Config) { c.MaxInflight = -1 },
		"no dispatcher": func(c *Config) { c.Dispatcher = nil },
		"no cluster ID": func(c *Config) { c.NewClusterID = nil },
	} {
		c := ok
		mutate(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestLeadershipOf(t *testing.T) {
	now := t0
	st := paxos.Status{Role: paxos.Leader, Ballot: paxos.Ballot{Round: 3, Replica: 2}, Now: 100, LeaseUntil: 120, CaughtUpAt: 50}
	got := LeadershipOf(st, 49, now, 50*time.Millisecond)
	want := Leadership{Leader: true, Term: st.Ballot, CaughtUp: false, LeaseUntil: now.Add(19 * 50 * time.Millisecond)}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := LeadershipOf(st, 50, now, time.Second); !got.CaughtUp {
		t.Fatal("applied at CaughtUpAt is caught up")
	}
	st.LeaseUntil = 101
	if got := LeadershipOf(st, 50, now, time.Second); !got.LeaseUntil.IsZero() {
		t.Fatalf("a lease ending within the tick counts as held: %+v", got)
	}
	st.Role = paxos.Follower
	if got := LeadershipOf(st, 50, now, time.Second); got != (Leadership{}) {
		t.Fatalf("follower: %+v", got)
	}
}

// TestTriggerAndBackfill: launches a client opens through the log obey
// the pause (and policy) unless forced, and count lateness from the
// request, not from their (past) slot.
func TestTriggerAndBackfill(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("a", job("@every 1h")), state.Pause{Name: "a"})
	h.lease(1, 10*time.Second)
	h.at(t0.Add(time.Hour))
	h.commit() // the 13:00 slot: skipped, paused
	h.commit()
	h.apply(state.Trigger{Name: "a", At: h.now.Truncate(time.Second)})
	h.step()
	h.wantNoRequest()
	h.wantProposed("finished a-1772370000-manual skipped job paused")
	h.commit()
	h.apply(state.Trigger{Name: "a", At: h.now.Truncate(time.Second).Add(time.Second), Force: true})
	h.step()
	req := h.wantRequest(OpDispatch, "a-1772370001-manual")
	if req.Spec.NomadJob != "batch" {
		t.Fatalf("dispatch without its target: %+v", req.Spec)
	}
	h.answer(Result{ChildID: "batch/dispatch-manual"})
	h.wantProposed("finished a-1772370001-manual dispatched batch/dispatch-manual")
	h.commit()
	// Resumed; the skipped 13:00 slot is backfilled at 14:50: it
	// keeps its identity and is not "late" (the window counts from the
	// request).
	h.apply(state.Resume{Name: "a"})
	h.at(t0.Add(2 * time.Hour))
	h.commit() // the 14:00 slot, dispatched
	h.answer(Result{ChildID: "batch/dispatch-14"})
	h.commit()
	h.at(t0.Add(2*time.Hour + 50*time.Minute))
	h.apply(state.Backfill{Name: "a", From: t0, To: t0.Add(2 * time.Hour), At: h.now})
	h.step()
	h.wantRequest(OpDispatch, "a-1772370000")
	h.answer(Result{ChildID: "batch/dispatch-13"})
	h.wantProposed("finished a-1772370000 dispatched batch/dispatch-13")
	h.commit()
	j, _ := h.l.Machine().Job("a")
	last := j.History[len(j.History)-1]
	if last.Kind != state.LaunchBackfill || last.Outcome.ChildID != "batch/dispatch-13" || len(j.Open) != 0 {
		t.Fatalf("history %+v open %+v", j.History, j.Open)
	}
}

// TestTakeoverComesFirst: a new leader does nothing until its Takeover is
// applied; what an earlier leader concluded before it is seen, and its
// later conclusions are refused by the state, not raced against.
func TestTakeoverComesFirst(t *testing.T) {
	h := newHarness(t, nil)
	h.holdTakeover = true
	h.apply(putJob("a", job("@every 1m")), putJob("b", job("@every 1m")))
	at := t0.Add(time.Minute)
	old := state.Term{Round: 1, Replica: 3}
	h.apply(state.Takeover{Term: old})
	for i, name := range []string{"a", "b"} {
		h.apply(state.LaunchStarted{Job: name, ScheduledAt: at, Identity: state.Identity(name, at), SpecVersion: uint64(i + 1), At: at})
	}
	h.lease(2, 10*time.Second)
	h.at(at.Add(2 * time.Second))
	h.wantProposed("takeover 2.1")
	h.settle()
	h.wantNoRequest()
	// The deposed leader's conclusion of a lands before the takeover:
	// applied, and seen.
	h.proposed = nil
	h.apply(state.LaunchFinished{Job: "a", ScheduledAt: at, Term: old, Outcome: state.Outcome{Kind: state.OutcomeSkipped, Reason: "job paused"}})
	h.apply(state.Takeover{Term: state.Term{Round: 2, Replica: 1}})
	// Its conclusion of b lands after: refused.
	h.apply(state.LaunchFinished{Job: "b", ScheduledAt: at, Term: old, Outcome: state.Outcome{Kind: state.OutcomeSkipped, Reason: "job paused"}})
	h.step()
	h.settle()
	h.wantRequest(OpLookup, "b-1772366460")
	if len(h.d.pending) != 1 {
		t.Fatalf("%d requests: the launch concluded before the takeover was looked up", len(h.d.pending))
	}
	h.answer(Result{})
	h.answer(Result{ChildID: "batch/dispatch-b"})
	got := h.wantProposed("finished b-1772366460 dispatched batch/dispatch-b")
	if f := got[0].(state.LaunchFinished); f.Term != (state.Term{Round: 2, Replica: 1}) {
		t.Fatalf("conclusion in term %v", f.Term)
	}
	if s := h.l.Machine().Stats(); s.Stale != 1 {
		t.Fatalf("stale %d, want 1", s.Stale)
	}
}

// TestOrphanOfRecreatedJob: a deleted job's open launch is concluded as
// deleted even once a new job has its name (found by seed 3166: the new
// job, with no launch open, made the forbid policy wait for ever).
func TestOrphanOfRecreatedJob(t *testing.T) {
	h := newHarness(t, nil)
	spec := job("@every 1m")
	spec.Concurrency = state.ConcurrencyForbid
	h.apply(putJob("a", spec))
	at := t0.Add(time.Minute)
	h.apply(state.LaunchStarted{Job: "a", ScheduledAt: at, Identity: state.Identity("a", at), SpecVersion: 1, At: at},
		state.DeleteJob{Name: "a"}, state.PutJob{Name: "a", Spec: spec, At: at.Add(time.Second)})
	h.lease(2, 10*time.Second)
	h.at(at.Add(2 * time.Second))
	h.settle()
	h.answerFor(OpLookup, "a-1772366460", Result{})
	h.wantProposed("finished a-1772366460 skipped job deleted before it was dispatched")
}

// TestContentChangedInFlight: a launch dispatches the payload and meta it
// started with, whatever edits the job meanwhile, so that every attempt
// under its identity sends the same thing.
func TestContentChangedInFlight(t *testing.T) {
	h := newHarness(t, nil)
	a := job("@every 1m")
	a.Payload, a.Meta = []byte("v1"), map[string]string{"k": "1"}
	h.apply(putJob("a", a))
	at := t0.Add(time.Minute)
	h.apply(state.LaunchStarted{Job: "a", ScheduledAt: at, Identity: state.Identity("a", at), SpecVersion: 1, At: at})
	edit := putJob("a", state.JobSpec{Schedule: "@every 1m", NomadJob: "batch", Payload: []byte("v2"), Meta: map[string]string{"k": "2"}})
	edit.IfVersion = 1
	h.apply(edit)
	h.lease(2, 10*time.Second)
	h.at(at.Add(30 * time.Second))
	h.settle()
	h.answerFor(OpLookup, "a-1772366460", Result{}) // never dispatched
	h.settle()
	if len(h.d.pending) != 1 || h.d.pending[0].Op != OpDispatch || string(h.d.pending[0].Spec.Payload) != "v1" || h.d.pending[0].Spec.Meta["k"] != "1" {
		t.Fatalf("pending %+v, want a's dispatch with its first content", h.d.pending)
	}
	h.answer(Result{ChildID: "batch/dispatch-a"})
	h.wantProposed("finished a-1772366460 dispatched batch/dispatch-a")
}

// Draining (a graceful shutdown) starts nothing new and concludes what is
// under way; Drained then says so.
func TestDrainingConcludesAndStartsNothing(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("backup", job("@every 10s")))
	h.lease(1, time.Minute)
	h.at(t0.Add(10 * time.Second))
	h.wantProposed("started backup-1772366410")
	if h.l.Drained() {
		t.Fatal("drained with a start proposed")
	}
	h.commit()
	h.wantRequest(OpDispatch, "backup-1772366410")
	h.l.SetDraining(true)
	h.at(t0.Add(30 * time.Second)) // two more slots come due
	h.wantProposed("")             // nothing new while draining
	if h.l.Drained() {
		t.Fatal("drained with a dispatch in flight")
	}
	h.answer(Result{ChildID: "batch/dispatch-backup-1772366410-1-aa"})
	h.wantProposed("finished backup-1772366410 dispatched batch/dispatch-backup-1772366410-1-aa")
	h.commit()
	h.step()
	if !h.l.Drained() {
		t.Fatalf("not drained once the launch finished: %d tasks", h.l.Open())
	}
	h.l.SetDraining(false)
	h.step()
	h.wantProposed("started backup-1772366420")
}

// TestNextWake: a leader that has taken over wakes for its first due job
// and for its first delayed call, whichever comes first; a replica that
// does not lead, or holds no lease, has nothing to wake for.
func TestNextWake(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("backup", job("@every 10s")))
	if _, ok := h.l.NextWake(); ok {
		t.Fatal("a follower has a wake time")
	}
	h.lease(1, time.Minute)
	h.at(t0.Add(time.Second))
	if at, ok := h.l.NextWake(); !ok || !at.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("NextWake = %v, %t; want the first due time %v", at, ok, t0.Add(10*time.Second))
	}
	// The launch starts and its dispatch fails ambiguously: the lookup
	// that follows is delayed, and comes before the next due time.
	h.at(t0.Add(10 * time.Second))
	h.commit()
	h.wantRequest(OpDispatch, "backup-1772366410")
	h.answer(Result{Err: errors.New("connection reset")})
	if at, ok := h.l.NextWake(); !ok || !at.Equal(t0.Add(10*time.Second+time.Millisecond)) {
		t.Fatalf("NextWake = %v, %t; want the delayed lookup at %v", at, ok, t0.Add(10*time.Second+time.Millisecond))
	}
	h.lead.LeaseUntil = h.now
	h.step()
	if _, ok := h.l.NextWake(); ok {
		t.Fatal("a leader without a lease has a wake time")
	}
}

// TestHeapBuiltInSteps: on taking over, the heap is built BuildStep jobs
// at a time; no launch starts before it is built, NextWake asks for the
// next step, and the jobs created, changed or deleted during the build
// are scheduled as the state has them once it is done.
func TestHeapBuiltInSteps(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.BuildStep = 3 })
	for i := range 10 {
		h.apply(putJob(fmt.Sprintf("j%02d", i), job("0 0 * * *")))
	}
	eleven := time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)
	h.lease(1, 10*time.Second)
	h.at(eleven)
	// The harness steps twice: the Takeover is applied in the first.
	if h.l.build == nil || h.l.build.next != 6 {
		t.Fatalf("after the takeover: build %+v; want 6 of 10 jobs read", h.l.build)
	}
	if at, ok := h.l.NextWake(); !ok || !at.Equal(eleven) {
		t.Fatalf("NextWake during the build = %v, %v; want now", at, ok)
	}
	// Changes while the heap is built: a job already read moves earlier,
	// one not read yet is deleted, and a new one sorts before every name
	// the build walks.
	// (j00 and j01 were read; j07 was not).
	j00, _ := h.l.Machine().Info("j00")
	moved := state.PutJob{Name: "j00", Spec: job("30 23 * * *"), At: t0, IfVersion: j00.Version}
	h.apply(moved, state.DeleteJob{Name: "j01"}, state.DeleteJob{Name: "j07"}, putJob("a-new", job("15 23 * * *")))
	if at, _ := h.l.Machine().NextAt("j00"); !at.Equal(time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC)) {
		t.Fatalf("j00's next launch %v after the change", at)
	}
	// Then 3 more names, the last one and 2 of the 4 sift-downs of the
	// 9 jobs read (j07 is gone), the other 2: three more steps.
	more := 0
	for ; h.l.build != nil && more < 10; more++ {
		if len(h.proposed) > 0 {
			t.Fatalf("proposed %s before the heap was built", describe(h.proposed))
		}
		h.l.Step(h.now, h.lead)
	}
	if more != 3 {
		t.Fatalf("built after %d more steps, want 3", more)
	}
	if n := h.l.heap.Len(); n != 9 {
		t.Fatalf("heap of %d jobs, want 9 (8 of the 10, and a-new)", n)
	}
	if err := h.l.CheckSchedule(); err != nil {
		t.Fatal(err)
	}
	h.at(time.Date(2026, 3, 1, 23, 15, 0, 0, time.UTC))
	h.wantProposed("started a-new-*")
	h.commit()
	h.at(time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC))
	h.wantProposed("started j00-*")
	h.commit()
	h.at(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	h.wantProposed("started j02-*", "started j03-*", "started j04-*", "started j05-*",
		"started j06-*", "started j08-*", "started j09-*")
}

// TestCheckScheduleFindsADriftedHeap: CheckSchedule, the simulator's
// check, reports a job missing from the heap, one at another time, and
// one the state no longer has.
func TestCheckScheduleFindsADriftedHeap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drift func(hp *scheduler.Heap)
		want  string
	}{
		{"missing", func(hp *scheduler.Heap) { hp.Remove("j1") }, `job "j1" is due at`},
		{"moved", func(hp *scheduler.Heap) { hp.Set("j1", t0.Add(time.Hour)) }, `job "j1" is due at`},
		{"extra", func(hp *scheduler.Heap) { hp.Set("gone", t0.Add(time.Hour)) }, "the heap holds 4 jobs, 3 of them the state's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			for i := range 3 {
				h.apply(putJob(fmt.Sprintf("j%d", i), job("0 0 * * *")))
			}
			h.lease(1, 10*time.Second)
			h.at(t0)
			if err := h.l.CheckSchedule(); err != nil {
				t.Fatalf("a fresh heap: %v", err)
			}
			tc.drift(&h.l.heap)
			if err := h.l.CheckSchedule(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckSchedule = %v, want %q", err, tc.want)
			}
		})
	}
}

// A refusal's reason carries Nomad's (or a proxy's) text: too long, cut
// inside a character, or not UTF-8 at all, the LaunchFinished would not
// encode and the node would stop the replica (the harness fails on any
// proposal that does not encode).
func TestReasonFromNomadIsClippedToValidText(t *testing.T) {
	for _, tc := range []struct {
		name, body string
	}{
		{"long, cut inside a character", "x" + strings.Repeat("é", 600)},
		{"not UTF-8", "bad \xff\xfe bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.apply(putJob("a", job("@every 1m")))
			h.lease(1, 10*time.Second)
			h.at(t0.Add(time.Minute))
			h.commit()
			h.wantRequest(OpDispatch, "a-1772366460")
			h.answer(Result{Err: fmt.Errorf("%w: %s", ErrRejected, tc.body)})
			cs := h.commit()
			if len(cs) != 1 {
				t.Fatalf("proposed %s, want one LaunchFinished", describe(cs))
			}
			f := cs[0].(state.LaunchFinished)
			reason := f.Outcome.Reason
			if f.Outcome.Kind != state.OutcomeFailed || len(reason) > state.MaxReasonBytes || !utf8.ValidString(reason) {
				t.Fatalf("outcome %s, reason of %d bytes (valid UTF-8: %v)", f.Outcome.Kind, len(reason), utf8.ValidString(reason))
			}
			if !strings.HasPrefix(reason, "Nomad refused the dispatch: ") {
				t.Fatalf("reason %q lost its start", reason)
			}
		})
	}
}

// TestForbidAsksAboutTheLastChildWhereItRuns: under forbid, every slot
// while the first child runs asks Nomad about that child, in the
// namespace it was dispatched to, and is skipped; however many slots pass
// (the history keeps HistoryLen) and though the job moved namespace
// meanwhile. Found in review: after HistoryLen skips the child was
// forgotten and the next slot dispatched beside it, and after a move the
// question went to the new namespace, where Nomad answers "not found",
// taken for "not running".
func TestForbidAsksAboutTheLastChildWhereItRuns(t *testing.T) {
	h := newHarness(t, nil)
	spec := job("@every 1m")
	spec.Concurrency, spec.Namespace = state.ConcurrencyForbid, "ns1"
	h.apply(putJob("a", spec))
	h.lease(1, 10*time.Second)
	h.at(t0.Add(time.Minute))
	h.commit()
	const child = "batch/dispatch-a-1772366460-1772366460-aabbccdd"
	h.answer(Result{ChildID: child})
	h.commit()
	moved := spec
	moved.Namespace = "ns2"
	edit := putJob("a", moved)
	edit.IfVersion = 1
	h.apply(edit)
	for i := 2; i <= state.HistoryLen+3; i++ {
		h.at(t0.Add(time.Duration(i) * time.Minute))
		h.commit()
		if len(h.d.pending) != 1 {
			t.Fatalf("slot %d: %d requests pending", i, len(h.d.pending))
		}
		req := h.d.pending[0]
		if req.Op != OpRunning || req.ChildID != child || req.Spec.Namespace != "ns1" {
			t.Fatalf("slot %d: %s of %q in namespace %q; want a running check of %s in ns1", i, req.Op, req.ChildID, req.Spec.Namespace, child)
		}
		h.answer(Result{Found: true})
		h.commit()
	}
}

// TestBackfillRetriesWithinItsWindow: a backfill of an old slot whose
// dispatch fails for a while is retried within its catch-up window,
// counted from the request as its lateness is, not concluded at the
// first error. Found in review: the give-up time counted from the slot,
// hours gone, so any passing error ended the backfill.
func TestBackfillRetriesWithinItsWindow(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("a", job("1 12 * * *"))) // 12:01 daily: t0's next minute, then not for a day
	h.lease(1, 10*time.Second)
	h.at(t0.Add(time.Minute))
	h.commit()
	h.answer(Result{Err: fmt.Errorf("%w: parameterized job not found", ErrRejected)})
	h.wantProposed("finished a-1772366460 failed Nomad refused the dispatch: launcher: rejected by Nomad: parameterized job not found")
	h.commit()
	h.at(t0.Add(3 * time.Hour))
	h.wantNoRequest()
	h.apply(state.Backfill{Name: "a", From: t0.Add(time.Minute), To: t0.Add(time.Minute), At: h.now})
	h.step()
	dispatches := 0
	for range 20 { // about a minute: within the 5-minute window
		for len(h.d.pending) > 0 {
			switch req := h.d.pending[0]; req.Op {
			case OpDispatch:
				dispatches++
				h.answer(Result{Err: errors.New("connection refused")})
			case OpLookup:
				h.answer(Result{}) // no child: dispatch again
			default:
				t.Fatalf("unexpected %s", req.Op)
			}
		}
		for _, c := range h.commit() {
			if f, ok := c.(state.LaunchFinished); ok {
				t.Fatalf("after %d dispatches the backfill was concluded %s (%s) within its window", dispatches, f.Outcome.Kind, f.Outcome.Reason)
			}
		}
		h.at(h.now.Add(3 * time.Second))
	}
	if dispatches < 3 {
		t.Fatalf("%d dispatches in a minute of errors, want retries", dispatches)
	}
}

// TestForbidDecidesInTheOrderLaunchesOpened: under forbid, a backfill of
// an earlier slot opened while the current slot is being dispatched
// waits for that launch to conclude, then asks about its child. It once
// went ahead because its slot was the earlier one, and two children ran
// at once.
func TestForbidDecidesInTheOrderLaunchesOpened(t *testing.T) {
	h := newHarness(t, nil)
	spec := job("*/10 * * * *")
	spec.Concurrency = state.ConcurrencyForbid
	h.apply(putJob("a", spec))
	h.lease(1, 10*time.Second)
	slot := func(min int) string { return state.Identity("a", t0.Add(time.Duration(min)*time.Minute)) }
	h.at(t0.Add(10 * time.Minute))
	h.commit()
	h.answer(Result{ChildID: "batch/dispatch-a-1210"}) // 12:10 dispatched
	h.commit()
	h.at(t0.Add(20 * time.Minute))
	h.commit()
	h.answer(Result{Found: false}) // 12:20: 12:10's child is done
	h.answer(Result{Err: fmt.Errorf("%w: parameterized job not found", ErrRejected)})
	h.commit() // 12:20 failed
	h.at(t0.Add(30 * time.Minute))
	h.commit()
	h.answer(Result{Found: false})
	h.wantRequest(OpDispatch, slot(30)) // 12:30 on its way to Nomad
	h.apply(state.Backfill{Name: "a", From: t0.Add(20 * time.Minute), To: t0.Add(20 * time.Minute), At: h.now})
	h.step()
	h.settle()
	if len(h.d.pending) != 1 {
		t.Fatalf("the backfill of 12:20 sent %s %s while 12:30 is being dispatched", h.d.pending[1].Op, h.d.pending[1].Identity)
	}
	h.answer(Result{ChildID: "batch/dispatch-a-1230"})
	h.commit()
	h.at(h.now.Add(DefaultRetryAfter)) // the backfill looks again
	req := h.wantRequest(OpRunning, slot(20))
	if req.ChildID != "batch/dispatch-a-1230" {
		t.Fatalf("the backfill asks about %q, want 12:30's child", req.ChildID)
	}
}

// TestLeadershipServes: only a caught-up leader within its lease answers
// from its own state as the cluster's.
func TestLeadershipServes(t *testing.T) {
	now := t0
	held := Leadership{Leader: true, CaughtUp: true, LeaseUntil: now.Add(time.Second)}
	for _, tc := range []struct {
		l    Leadership
		want bool
	}{
		{held, true},
		{Leadership{Leader: true, CaughtUp: true, LeaseUntil: now}, false},
		{Leadership{Leader: true, LeaseUntil: now.Add(time.Second)}, false},
		{Leadership{CaughtUp: true, LeaseUntil: now.Add(time.Second)}, false},
	} {
		if got := tc.l.Serves(now); got != tc.want {
			t.Errorf("%+v: Serves = %v", tc.l, got)
		}
	}
}

// TestPoliciesLookUpLaunchesConcludedUnknown: a launch concluded unknown
// may have a child the state never learnt of. Found in the simulator: a
// forbid job ran two children at once, the next slot having asked only
// about the last child recorded dispatched. The forbid and replace
// policies now look such launches up and act on the children found.
func TestPoliciesLookUpLaunchesConcludedUnknown(t *testing.T) {
	const childA, childB = "batch/dispatch-a-1772366460-1772366460-aaaaaaaa", "batch/dispatch-a-1772366520-1772366521-bbbbbbbb"
	s1, s2, s3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	history := func(h *harness, policy state.Concurrency) {
		spec := job("@every 1m")
		spec.Concurrency = policy
		h.apply(putJob("a", spec),
			state.LaunchStarted{Job: "a", ScheduledAt: s1, Identity: state.Identity("a", s1), SpecVersion: 1, At: s1},
			state.LaunchFinished{Job: "a", ScheduledAt: s1, Outcome: state.Outcome{Kind: state.OutcomeDispatched, ChildID: childA}},
			state.LaunchStarted{Job: "a", ScheduledAt: s2, Identity: state.Identity("a", s2), SpecVersion: 1, At: s2},
			state.LaunchFinished{Job: "a", ScheduledAt: s2, Outcome: state.Outcome{Kind: state.OutcomeUnknown, Reason: "could not look the launch up in Nomad: down"}})
		h.lease(1, 10*time.Second)
		h.at(s3)
		h.commit()
		if req := h.wantRequest(OpLookup, "a-1772366520"); req.Spec.NomadJob != spec.NomadJob {
			t.Fatalf("looked up in %q, want the job's %q", req.Spec.NomadJob, spec.NomadJob)
		}
	}
	t.Run("forbid", func(t *testing.T) {
		h := newHarness(t, nil)
		history(h, state.ConcurrencyForbid)
		h.answer(Result{Found: true, ChildID: childB}) // the lookup of a-1772366520
		h.commit()
		req := h.wantRequest(OpRunning, "a-1772366580")
		if req.ChildID != childA {
			t.Fatalf("asked about %s first, want the last child recorded, %s", req.ChildID, childA)
		}
		h.answer(Result{Found: false})
		h.commit()
		if req := h.wantRequest(OpRunning, "a-1772366580"); req.ChildID != childB {
			t.Fatalf("asked about %s, want the unknown launch's child %s", req.ChildID, childB)
		}
		h.answer(Result{Found: true})
		h.wantProposed("finished a-1772366580 skipped " + childB + " previous child " + childB + " still running (concurrency forbid)")
	})
	// A launch concluded unknown is looked up where it was dispatched,
	// and the child found asked about there, however the job moved
	// since. Found in review: it was looked up in the job's new target,
	// where its child could not be, and a second child ran beside it.
	t.Run("forbid, the job moved since the unknown launch", func(t *testing.T) {
		h := newHarness(t, nil)
		spec := job("@every 1m")
		spec.Concurrency = state.ConcurrencyForbid
		moved := spec
		moved.NomadJob, moved.Namespace = "report", "ops"
		edit := putJob("a", moved)
		edit.IfVersion = 1
		h.apply(putJob("a", spec),
			state.LaunchStarted{Job: "a", ScheduledAt: s1, Identity: state.Identity("a", s1), SpecVersion: 1, At: s1},
			state.LaunchFinished{Job: "a", ScheduledAt: s1, Outcome: state.Outcome{Kind: state.OutcomeDispatched, ChildID: childA}},
			state.LaunchStarted{Job: "a", ScheduledAt: s2, Identity: state.Identity("a", s2), SpecVersion: 1, At: s2},
			state.LaunchFinished{Job: "a", ScheduledAt: s2, Outcome: state.Outcome{Kind: state.OutcomeUnknown, Reason: "could not look the launch up in Nomad: down"}},
			edit)
		h.lease(1, 10*time.Second)
		h.at(s3)
		h.commit()
		if req := h.wantRequest(OpLookup, "a-1772366520"); req.Spec.Target() != spec.Target() {
			t.Fatalf("looked up in %+v, want %+v, where the launch went", req.Spec.Target(), spec.Target())
		}
		h.answer(Result{Found: true, ChildID: childB})
		h.commit()
		for _, child := range []string{childA, childB} {
			req := h.wantRequest(OpRunning, "a-1772366580")
			if req.ChildID != child || req.Spec.Target() != spec.Target() {
				t.Fatalf("asked about %s in %+v, want %s in %+v", req.ChildID, req.Spec.Target(), child, spec.Target())
			}
			h.answer(Result{Found: child == childB})
			if child == childA {
				h.commit()
			}
		}
		h.wantProposed("finished a-1772366580 skipped " + childB + " previous child " + childB + " still running (concurrency forbid)")
	})
	// The child found keeps the job from a second child for as long as
	// it runs, past HistoryLen slots: the skips name it, and it becomes
	// the job's last child (found in review), and the unknown launch
	// stays in the history, looked up at every slot (found in a later
	// review: other outcomes pushed it out; only later unknown launches
	// do now, and then the last child still names it, as state's
	// TestForbidSkipKeepsTheChildItFound checks).
	t.Run("forbid, the child found outliving the history", func(t *testing.T) {
		h := newHarness(t, nil)
		history(h, state.ConcurrencyForbid)
		lookups := 0
		for k := 0; k < state.HistoryLen+3; k++ {
			slot := s3.Add(time.Duration(k) * time.Minute)
			id := state.Identity("a", slot)
			if k > 0 {
				h.at(slot)
				h.commit()
			}
			for {
				if len(h.d.pending) == 0 {
					t.Fatalf("slot %d: no request pending", k)
				}
				req := h.d.pending[0]
				switch {
				case req.Op == OpLookup && req.Identity == "a-1772366520":
					lookups++
					h.answer(Result{Found: true, ChildID: childB})
				case req.Identity != id:
					t.Fatalf("slot %d: %s %s, want a call for %s", k, req.Op, req.Identity, id)
				case req.Op == OpRunning && req.ChildID == childA:
					h.answer(Result{Found: false})
				case req.Op == OpRunning && req.ChildID == childB:
					h.answer(Result{Found: true})
				default:
					t.Fatalf("slot %d: %s %s about %q while %s still runs", k, req.Op, req.Identity, req.ChildID, childB)
				}
				if len(h.proposed) > 0 {
					break
				}
				h.commit()
			}
			h.wantProposed("finished " + id + " skipped " + childB + " previous child " + childB + " still running (concurrency forbid)")
			h.commit()
		}
		if lookups != state.HistoryLen+3 {
			t.Fatalf("%d lookups in %d slots: the unknown launch left the history while skips came", lookups, state.HistoryLen+3)
		}
	})
	t.Run("replace", func(t *testing.T) {
		h := newHarness(t, nil)
		history(h, state.ConcurrencyReplace)
		h.answer(Result{Found: true, ChildID: childB})
		h.commit()
		for _, child := range []string{childA, childB} {
			if req := h.wantRequest(OpStop, "a-1772366580"); req.ChildID != child {
				t.Fatalf("stopped %s, want %s", req.ChildID, child)
			}
			h.answer(Result{})
			h.commit()
		}
		h.wantRequest(OpDispatch, "a-1772366580")
	})
	t.Run("nothing found", func(t *testing.T) {
		h := newHarness(t, nil)
		history(h, state.ConcurrencyForbid)
		h.answer(Result{Found: false})
		h.commit()
		if req := h.wantRequest(OpRunning, "a-1772366580"); req.ChildID != childA {
			t.Fatalf("asked about %s, want %s", req.ChildID, childA)
		}
		h.answer(Result{Found: false})
		h.commit()
		h.wantRequest(OpDispatch, "a-1772366580")
	})
}

// TestForbidRemembersAnUnknownLaunchPastOtherSkips: a forbid job's
// launch concluded unknown may have a child still running, which the
// policy finds through the job's history (HistoryLen entries). Found in
// review: skips that never ask Nomad (paused here; missed slots after an
// outage do the same) pushed it out, and the next launch was dispatched
// without asking about that child. The history now keeps it.
func TestForbidRemembersAnUnknownLaunchPastOtherSkips(t *testing.T) {
	const childA = "batch/dispatch-a-1772366460-1772366460-aaaaaaaa"
	s1, s2, s3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	unknownID := state.Identity("a", s2)
	spec := job("@every 1m")
	spec.Concurrency = state.ConcurrencyForbid
	h := newHarness(t, nil)
	h.apply(putJob("a", spec),
		state.LaunchStarted{Job: "a", ScheduledAt: s1, Identity: state.Identity("a", s1), SpecVersion: 1, At: s1},
		state.LaunchFinished{Job: "a", ScheduledAt: s1, Outcome: state.Outcome{Kind: state.OutcomeDispatched, ChildID: childA}},
		state.LaunchStarted{Job: "a", ScheduledAt: s2, Identity: unknownID, SpecVersion: 1, At: s2},
		// Its child may exist and still run: nobody could tell.
		state.LaunchFinished{Job: "a", ScheduledAt: s2, Outcome: state.Outcome{Kind: state.OutcomeUnknown, Reason: "could not look the launch up in Nomad: down"}},
		state.Pause{Name: "a"})
	h.lease(1, 10*time.Second)
	// HistoryLen slots come due while the job is paused: each is
	// recorded skipped, without a call to Nomad.
	for k := 0; k < state.HistoryLen; k++ {
		h.at(s3.Add(time.Duration(k) * time.Minute))
		h.commit() // the start
		h.commit() // the paused skip
	}
	h.wantNoRequest()
	h.apply(state.Resume{Name: "a"})
	next := s3.Add(time.Duration(state.HistoryLen) * time.Minute)
	h.at(next)
	h.commit()
	// The child of the launch concluded unknown may still run: forbid
	// must look it up (as it did before the pause) before dispatching.
	for len(h.d.pending) > 0 {
		req := h.d.pending[0]
		switch {
		case req.Op == OpLookup && req.Identity == unknownID:
			return // asked: the policy has not forgotten it
		case req.Op == OpRunning:
			h.answer(Result{Found: false}) // childA ended long ago
			h.commit()
		case req.Op == OpDispatch:
			t.Fatalf("dispatched %s under forbid without looking up %s, concluded unknown (its child may still run): it left the history behind %d paused skips",
				req.Identity, unknownID, state.HistoryLen)
		default:
			t.Fatalf("unexpected %s %s", req.Op, req.Identity)
		}
	}
	t.Fatal("no request")
}

// newHarnessWithLimits is a harness over a state whose default limits
// set changed.
func newHarnessWithLimits(t *testing.T, set func(*state.Limits)) *harness {
	t.Helper()
	limits := state.DefaultLimits()
	set(&limits)
	m, err := state.NewWithLimits(limits)
	if err != nil {
		t.Fatal(err)
	}
	return newHarness(t, func(c *Config) { c.Machine = m })
}

// TestSlotThatWaitedForRoomSaysSo: a slot that came due with no room for
// its start (the state's limit of all jobs' open launches, or of its
// job's) and was skipped once its catch-up window had passed says it
// waited for room. It said "missed: no leader could launch it", which was
// false: a leader was there.
func TestSlotThatWaitedForRoomSaysSo(t *testing.T) {
	window := 30 * time.Second
	spec := job("@every 1m")
	spec.CatchupWindow = window
	due := t0.Add(time.Minute)
	t.Run("all jobs", func(t *testing.T) {
		h := newHarnessWithLimits(t, func(l *state.Limits) { l.OpenLaunches = 2 })
		h.apply(putJob("a", spec), putJob("b", spec), putJob("c", spec))
		h.apply(state.Takeover{Term: state.Term{Round: 1, Replica: 2}})
		for i, name := range []string{"a", "b"} {
			h.apply(state.LaunchStarted{Job: name, ScheduledAt: due, Identity: state.Identity(name, due), SpecVersion: uint64(i + 1), At: due})
		}
		h.now = due
		h.lease(3, 10*time.Second)
		h.step()
		h.settle() // c waits; the look-ups of a's and b's launches leave
		h.wantProposed()
		h.at(due.Add(40 * time.Second))
		h.answerFor(OpLookup, state.Identity("a", due), Result{Found: true, ChildID: "batch/dispatch-a"})
		h.commit()
		h.wantProposed("started " + state.Identity("c", due))
		h.commit()
		h.wantProposed("finished " + state.Identity("c", due) + " skipped " + ReasonNoRoom(2, 40*time.Second, window))
	})
	t.Run("one job", func(t *testing.T) {
		h := newHarnessWithLimits(t, func(l *state.Limits) { l.OpenLaunchesJob = 1 })
		h.apply(putJob("s", spec))
		h.apply(state.Takeover{Term: state.Term{Round: 1, Replica: 2}})
		h.apply(state.LaunchStarted{Job: "s", ScheduledAt: due, Identity: state.Identity("s", due), SpecVersion: 1, At: due})
		next := due.Add(time.Minute)
		h.now = next
		h.lease(3, 10*time.Second)
		h.step()
		h.commit() // the start of next, refused: s has its one launch open
		h.settle()
		h.at(next.Add(40 * time.Second))
		h.answerFor(OpLookup, state.Identity("s", due), Result{Found: true, ChildID: "batch/dispatch-s"})
		h.commit()
		h.wantProposed("started " + state.Identity("s", next))
		h.commit()
		h.wantProposed("finished " + state.Identity("s", next) + " skipped " + ReasonNoRoomForJob(1, 40*time.Second, window))
	})
}

// TestStartOfASlotAnEditSupersededIsADuplicate: a start the leader
// proposed for its old schedule's slot, chosen after an edit to a
// schedule without that slot, is refused as a duplicate, the edit having
// recorded the slot skipped (state.ReasonSuperseded): nothing opens or is
// dispatched, and the leader starts the new schedule's next slot.
func TestStartOfASlotAnEditSupersededIsADuplicate(t *testing.T) {
	h := newHarness(t, nil)
	h.apply(putJob("j", job("*/10 * * * * *")))
	h.lease(1, 10*time.Second)
	h.at(t0.Add(10 * time.Second))
	h.wantProposed("started j-1772366410")
	edit := t0.Add(10*time.Second + 500*time.Millisecond)
	h.apply(state.PutJob{Name: "j", Spec: job("*/3 * * * * *"), IfVersion: 1, At: edit}) // chosen first
	h.commit()
	h.wantNoRequest()
	j, _ := h.l.Machine().Job("j")
	if len(j.Open) != 0 || len(j.History) != 1 || j.History[0].Outcome.Reason != state.ReasonSuperseded(edit, 2) || j.Counters.Duplicates != 1 {
		t.Fatalf("open %v, history %+v, counters %+v: want the slot superseded and the start a duplicate", j.Open, j.History, j.Counters)
	}
	if err := h.l.CheckSchedule(); err != nil {
		t.Fatal(err)
	}
	h.at(t0.Add(12 * time.Second))
	h.wantProposed("started j-1772366412")
	h.commit()
	h.wantRequest(OpDispatch, "j-1772366412")
}

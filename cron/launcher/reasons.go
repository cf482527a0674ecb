package launcher

import (
	"fmt"
	"time"

	"paxcron/cron/state"
)

// The reasons the launcher gives its skips and failures, one constructor
// each. They are recorded in the log and read back by people and by the
// two checkers (the simulator's, sim/check, and the chaos test's,
// internal/chaos), which judge each reason by its wording with patterns
// of their own; their tests build every reason here, so that a change of
// wording fails a unit test rather than a simulated or real run.

// Skips.
const (
	// ReasonPaused: the job was paused when the launch came to be
	// decided, and the launch was not forced.
	ReasonPaused = "job paused"
	// ReasonDeleted: the job was deleted (or re-created) before the
	// launch was dispatched.
	ReasonDeleted = "job deleted before it was dispatched"
)

// ReasonMissed is the skip of a slot no leader started within its
// catch-up window: found late when the launch was to be started.
func ReasonMissed(late, window time.Duration) string {
	return fmt.Sprintf("missed: no leader could launch it within its catch-up window (%v late, window %v)", late.Truncate(time.Second), window)
}

// ReasonNoRoom is the skip of a slot that came due while the state held
// as many launches open of all jobs as it keeps (limit,
// state.Limits.OpenLaunches) and whose catch-up window passed while it
// waited for one of them to conclude: a leader was there, with no room.
func ReasonNoRoom(limit int, late, window time.Duration) string {
	return fmt.Sprintf("missed: waited for room past its catch-up window, the state holding its limit of %d open launches of all jobs (%v late, window %v)",
		limit, late.Truncate(time.Second), window)
}

// ReasonNoRoomForJob is ReasonNoRoom for the limit of one job's open
// launches (state.Limits.OpenLaunchesJob): the job's own launches had to
// conclude first.
func ReasonNoRoomForJob(limit int, late, window time.Duration) string {
	return fmt.Sprintf("missed: waited for room past its catch-up window, the state holding its limit of %d open launches of the job (%v late, window %v)",
		limit, late.Truncate(time.Second), window)
}

// ReasonCatchup is the skip of a launch started in time but not
// dispatched within its catch-up window.
func ReasonCatchup(late, window time.Duration) string {
	return fmt.Sprintf("not dispatched within its catch-up window (%v late, window %v)", late.Truncate(time.Second), window)
}

// ReasonForbid is the skip of a launch under concurrency forbid while
// child runs; the skip also names child as its ChildID.
func ReasonForbid(child string) string {
	return "previous child " + child + " still running (concurrency forbid)"
}

// Failures.

// ReasonRefused: Nomad refused the dispatch (ErrRejected).
func ReasonRefused(err error) string { return "Nomad refused the dispatch: " + err.Error() }

// ReasonRunningUnknown: under forbid, Nomad never answered whether child
// still runs.
func ReasonRunningUnknown(child string, err error) string {
	return fmt.Sprintf("could not tell whether the previous child %s still runs: %v", child, err)
}

// ReasonStopFailed: under replace, child could not be stopped.
func ReasonStopFailed(child string, err error) string {
	return fmt.Sprintf("could not stop the previous child %s (concurrency replace): %v", child, err)
}

// ReasonUnknownLookupFailed: under forbid or replace, the job's launch
// identity, concluded unknown, could not be looked up.
func ReasonUnknownLookupFailed(identity string, err error) string {
	return fmt.Sprintf("could not look up launch %s (outcome unknown) for the concurrency policy: %v", identity, err)
}

// ReasonDeletedAfterFailure: a dispatch failed with lastErr, and the job
// was deleted before it could be tried again.
func ReasonDeletedAfterFailure(lastErr string) string {
	return "dispatch failed (" + lastErr + ") and the job was deleted since"
}

// ReasonRetriesOut: the dispatch failed attempts times, the last with
// lastErr, and the launch's time ran out.
func ReasonRetriesOut(attempts int, lastErr string) string {
	return fmt.Sprintf("dispatch failed %d times, last: %s", attempts, lastErr)
}

// Outcomes unknown.

// ReasonLookupFailed: after a dispatch that may have landed, Nomad could
// not be asked for its child until the launch's time ran out.
func ReasonLookupFailed(err error) string {
	return fmt.Sprintf("could not look the launch up in Nomad: %v", err)
}

// ReasonForgotten: a launch open longer than Nomad is sure to remember a
// dispatch, with no child found, is not dispatched again.
func ReasonForgotten(startedAt time.Time, horizon, skew time.Duration) string {
	return fmt.Sprintf("open since %s, longer than Nomad is sure to remember a dispatch (%v less %v of clock skew), and not found: not dispatched again",
		startedAt.Format(time.RFC3339), horizon, skew)
}

// ReasonAfterRedispatch: a launch dispatched again after Nomad may have
// forgotten an earlier child (at least once) that then ended as kind for
// reason is unknown: the earlier child may have run.
func ReasonAfterRedispatch(kind state.OutcomeKind, reason string) string {
	return fmt.Sprintf("dispatched again after Nomad may have forgotten an earlier child (at least once), then %s: %s", kind, reason)
}

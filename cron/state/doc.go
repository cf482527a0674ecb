// Package state owns the replicated cron state: the deterministic state
// machine (Machine, a replica.StateMachine) that every paxcron replica
// applies the chosen log to, and the commands that change it.
//
// # Determinism
//
// Apply reads no clock (every time comes inside a command), starts no
// goroutine, draws no randomness and never takes a decision or an output
// order from ranging over a map: names are sorted first. The only outside
// input is the time zone database behind cron/schedule, which must be the
// same on every replica (the server will have to pin one; see DESIGN.md).
// The package is in internal/detlint's list, so make lint and that
// package's test hold it to this.
//
// # Commands
//
// PutJob, DeleteJob, Pause, Resume, LaunchStarted, LaunchFinished,
// Trigger, Backfill, Takeover and SetClusterID (the cluster's name, set
// once: see ClusterID); see codec.go for their encoding (a version byte,
// a kind byte and msgpack arrays). Writers validate and encode with Encode; Decode validates
// everything again and never panics.
//
// # Versions
//
// Job versions come from one state-wide counter that every accepted PutJob
// increments: a job's version strictly increases, and a job deleted and
// created again never reuses a version, so a compare-and-set (IfVersion)
// written against the old job cannot apply to the new one.
//
// # What a bad command does
//
// Nothing, deterministically. Bytes that do not decode to a valid command
// are counted in
// Stats.Undecodable; a decoded command that is refused (invalid, a version
// conflict, an unknown job or launch, a limit) is counted in
// Stats.Rejected. Both are remembered in Rejections, a ring of the last
// MaxRejections, with the slot and the reason, and change nothing else.
// Every replica refuses the same commands in the same way, since the
// rejection depends only on the state and the command. A LaunchStarted or
// LaunchFinished for a launch already started (or finished) is a
// duplicate, expected after a failover: it is counted in Duplicates and
// changes nothing else. ApplyCommand returns the reason to a caller that
// wants it (the proposer, later).
//
// # Launches
//
// A job's NextAt is the first launch of its schedule after the latest of
// its creation (the creating PutJob's At), LastStartedAt, the latest
// scheduled time a launch was started for (or a schedule edit recorded
// skipped, below), and the point its last schedule edit counts from
// (EditFrom). LaunchStarted accepts a time after LastStartedAt and not
// after NextAt: it can neither repeat a launch (even one long gone from
// the history) nor jump over a due one. A replaced spec keeps CreatedAt,
// and LastStartedAt but in that one case. An edit that keeps the schedule
// and zone keeps NextAt; a new schedule or zone counts from the edit, or,
// if the old schedule already owed a launch then, from that launch, so
// the launches the new schedule owes since come due (the scheduler
// launches or skips them within the catch-up window). That owed launch is
// the new schedule's if it has one at that instant; if not, the PutJob
// records it in the history as a scheduled launch skipped
// (ReasonSuperseded: when, and by which version), counted started and
// skipped, and makes it LastStartedAt, so that a start of it proposed
// under the old schedule is a duplicate. None is skipped silently, and
// none is owed that no schedule of the job had at the time.
package state

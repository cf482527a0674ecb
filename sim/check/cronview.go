package check

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"paxcron/cron/state"
)

// The cron checker's own view, to judge a skip or a failure by what it
// says happened rather than by its text: each job's pause state, policy,
// catch-up window, last child and deletion, kept from the commands chosen
// in the log, and Nomad's record of its children.

// NomadView is what the cron checker asks of Nomad.
type NomadView interface {
	// Refuses reports whether Nomad refuses every dispatch to t: it has
	// no such parameterized job.
	Refuses(t state.Target) bool
	// Child returns Nomad's record of child id, collected or not.
	Child(id string) (NomadChild, bool)
}

// jobEra is one job name's state, as the log set it, from the command
// chosen at slot from until the next era's.
type jobEra struct {
	from uint64
	// inc is the live incarnation's CreatedVersion; 0 while no job of the
	// name exists.
	inc       uint64
	paused    bool
	policy    state.Concurrency
	window    time.Duration
	lastChild string // the child of its latest launch concluded dispatched
}

// jobView is the checker's record of one job name.
type jobView struct {
	// eras are oldest first, from the one in effect at the last takeover
	// on: every conclusion is judged against a leader's state at or after
	// its own takeover (see Cron.justify), so older eras are dropped then.
	eras []jobEra
	// job is the live incarnation: its name, spec, CreatedAt and
	// CreatedVersion, for the slots it owes when it is deleted.
	job state.Job
	// scheduleAt is when the live incarnation's schedule was last set (its
	// creation, or a new schedule or zone): a slot due before it could not
	// be launched on time.
	scheduleAt time.Time
	// schedules are the live incarnation's schedules, oldest first, each
	// with when it was set (the last at scheduleAt), so that knownAt can
	// tell a slot the edit added from one its schedules shared.
	schedules []setSchedule
}

// setSchedule is a schedule (and zone) set for a job at true time at.
type setSchedule struct {
	at  time.Time
	job state.Job // its name and spec, as Cron.schedule reads them
}

// knownAt returns when slot at of v's live incarnation became known: when
// its schedule was last set, or earlier, back over each edit made after
// at to the schedule before it, as long as that one had at as a slot too.
// A slot due before its schedule was set is excused from the lateness
// bound; one the schedule in force when it came due had was known all
// along (scheduleAt alone excused it whenever an edit came while it
// waited, and the simulated edits share many slots).
func (c *Cron) knownAt(v *jobView, at time.Time) time.Time {
	known := v.scheduleAt
	for i := len(v.schedules) - 1; i > 0 && v.schedules[i].at.After(at); i-- {
		prev := v.schedules[i-1]
		s, err := c.schedule(prev.job)
		if err != nil {
			break
		}
		if next, err := s.Next(at.Add(-time.Second), at); err != nil || !next.Equal(at) {
			break
		}
		known = prev.at
	}
	return known
}

// current returns the era in effect now.
func (v *jobView) current() jobEra {
	if len(v.eras) == 0 {
		return jobEra{}
	}
	return v.eras[len(v.eras)-1]
}

// change appends the era that command slot began, as edit makes it from
// the current one.
func (v *jobView) change(slot uint64, edit func(*jobEra)) {
	e := v.current()
	e.from = slot
	edit(&e)
	v.eras = append(v.eras, e)
}

// since returns the eras in effect at some slot at or after lo: a
// state a leader may have decided on, once it had applied slot lo.
func (v *jobView) since(lo uint64) []jobEra {
	i := len(v.eras)
	for i > 0 && v.eras[i-1].from > lo {
		i--
	}
	if i > 0 {
		i-- // the one in effect at lo
	}
	return v.eras[i:]
}

// forget drops the eras no longer in effect at slot lo.
func (v *jobView) forget(lo uint64) {
	keep := v.since(lo)
	v.eras = append(v.eras[:0], keep...)
}

// reasonClass is what a skip or a failure says happened.
type reasonClass uint8

const (
	reasonPaused reasonClass = iota + 1
	// reasonDeleted: skipped, the job deleted before the dispatch.
	reasonDeleted
	// reasonCatchup: skipped, beyond the catch-up window.
	reasonCatchup
	// reasonForbid: skipped, the previous child still running.
	reasonForbid
	// reasonRefused: failed, Nomad refused the dispatch.
	reasonRefused
	// reasonRunningUnknown: failed, forbid could not ask Nomad whether
	// the previous child runs.
	reasonRunningUnknown
	// reasonStopFailed: failed, replace could not stop the previous child.
	reasonStopFailed
	// reasonDeletedAfterFailure: failed, a dispatch failed and the job
	// was deleted since.
	reasonDeletedAfterFailure
	// reasonRetriesOut: failed, the dispatch kept failing until the
	// launch's time was up.
	reasonRetriesOut
	// reasonUnknownLookupFailed: failed, the forbid or replace policy
	// could not look up a launch of the job concluded unknown.
	reasonUnknownLookupFailed
	// reasonNoRoom: skipped, beyond the catch-up window, having waited
	// for room while the state held its limit of open launches (of all
	// jobs, or of the job).
	reasonNoRoom
	// reasonSuperseded: skipped by the state itself, a schedule edit
	// having come after the slot was due and before it started, to a
	// schedule without it (Cron.superseded). No launcher reason: classify
	// never returns it, so a conclusion that claims it is unjustified.
	reasonSuperseded
)

var reasonNames = map[reasonClass]string{
	reasonPaused: "paused", reasonDeleted: "deleted", reasonCatchup: "catch-up window", reasonForbid: "concurrency forbid",
	reasonRefused: "refused by Nomad", reasonRunningUnknown: "forbid without an answer", reasonStopFailed: "replace without a stop",
	reasonDeletedAfterFailure: "deleted after a failed dispatch", reasonRetriesOut: "retries ran out",
	reasonUnknownLookupFailed: "policy without a look-up of an unknown launch",
	reasonNoRoom:              "waited for room",
	reasonSuperseded:          "superseded by an edit",
}

func (r reasonClass) String() string { return reasonNames[r] }

// ReasonClasses names every kind of skip and failure the checker judges,
// as CronCounts.Justified keys them, in a fixed order: a swarm's report
// lists each, so that a kind the workload never produces shows as zero.
func ReasonClasses() []string {
	names := make([]string, 0, len(reasonNames))
	for r := reasonClass(1); int(r) <= len(reasonNames); r++ { // the classes count from 1, one name each
		names = append(names, r.String())
	}
	return names
}

// reason is a skip's or a failure's reason, read.
type reason struct {
	class  reasonClass
	child  string        // the previous child it names (forbid, replace)
	launch string        // the unknown launch it names (its look-up failed)
	window time.Duration // the catch-up window it names
	limit  int           // the limit of open launches it names
	ofJob  bool          // that limit is the job's, not all jobs'
}

// reasonTexts are the launcher's reasons (cron/launcher: startDue, decide,
// Done, lookedUp, retryOrConclude), one pattern each, anchored at both
// ends where the launcher adds nothing after.
var reasonTexts = []struct {
	kind  state.OutcomeKind
	class reasonClass
	re    *regexp.Regexp
}{
	{state.OutcomeSkipped, reasonPaused, regexp.MustCompile(`^job paused$`)},
	{state.OutcomeSkipped, reasonDeleted, regexp.MustCompile(`^job deleted before it was dispatched$`)},
	{state.OutcomeSkipped, reasonCatchup, regexp.MustCompile(`^missed: no leader could launch it within its catch-up window \(\S+ late, window (?P<window>\S+)\)$`)},
	{state.OutcomeSkipped, reasonCatchup, regexp.MustCompile(`^not dispatched within its catch-up window \(\S+ late, window (?P<window>\S+)\)$`)},
	{state.OutcomeSkipped, reasonNoRoom, regexp.MustCompile(`^missed: waited for room past its catch-up window, the state holding its limit of (?P<limit>\d+) open launches of (?P<of>all jobs|the job) \(\S+ late, window (?P<window>\S+)\)$`)},
	{state.OutcomeSkipped, reasonForbid, regexp.MustCompile(`^previous child (?P<child>\S+) still running \(concurrency forbid\)$`)},
	{state.OutcomeFailed, reasonRefused, regexp.MustCompile(`^Nomad refused the dispatch: `)},
	{state.OutcomeFailed, reasonRunningUnknown, regexp.MustCompile(`^could not tell whether the previous child (?P<child>\S+) still runs: `)},
	{state.OutcomeFailed, reasonStopFailed, regexp.MustCompile(`^could not stop the previous child (?P<child>\S+) \(concurrency replace\): `)},
	{state.OutcomeFailed, reasonDeletedAfterFailure, regexp.MustCompile(`^dispatch failed \(.*\) and the job was deleted since$`)},
	{state.OutcomeFailed, reasonRetriesOut, regexp.MustCompile(`^dispatch failed \d+ times, last: `)},
	{state.OutcomeFailed, reasonUnknownLookupFailed, regexp.MustCompile(`^could not look up launch (?P<launch>\S+) \(outcome unknown\) for the concurrency policy: `)},
}

// classify reads the reason of a skipped or failed outcome. A text that
// matches none of the launcher's is an error: the checker cannot judge
// it, and a new reason needs its rule here.
func classify(o state.Outcome) (reason, error) {
	for _, t := range reasonTexts {
		m := t.re.FindStringSubmatch(o.Reason)
		if t.kind != o.Kind || m == nil {
			continue
		}
		r := reason{class: t.class}
		if i := t.re.SubexpIndex("child"); i > 0 {
			r.child = m[i]
		}
		if i := t.re.SubexpIndex("launch"); i > 0 {
			r.launch = m[i]
		}
		if i := t.re.SubexpIndex("window"); i > 0 {
			w, err := time.ParseDuration(m[i])
			if err != nil {
				return reason{}, fmt.Errorf("window %q: %v", m[i], err)
			}
			r.window = w
		}
		if i := t.re.SubexpIndex("limit"); i > 0 {
			n, err := strconv.Atoi(m[i])
			if err != nil {
				return reason{}, fmt.Errorf("limit %q: %v", m[i], err)
			}
			r.limit, r.ofJob = n, m[t.re.SubexpIndex("of")] == "the job"
		}
		return r, nil
	}
	return reason{}, fmt.Errorf("no %s reason of the launcher's reads so", o.Kind)
}

// view returns the checker's view of job name, empty if the log never
// named it.
func (c *Cron) view(name string) *jobView {
	v, ok := c.jobs[name]
	if !ok {
		v = &jobView{}
		c.jobs[name] = v
	}
	return v
}

// Applied records a PutJob, DeleteJob, Pause, Resume or Takeover chosen at
// slot, first applied at true time now, that the state accepted; job is
// the job as the state holds it right after (for a PutJob: its
// CreatedVersion and CreatedAt, the state's own numbering and the instant
// its schedule counts from, and, after a schedule edit that superseded a
// slot, its Version, LastStartedAt and History, which must record it).
// Other commands are a programmer error.
func (c *Cron) Applied(slot uint64, now time.Time, cmd state.Command, job state.Job) error {
	switch cmd := cmd.(type) {
	case state.PutJob:
		return c.putJob(slot, now, cmd, job)
	case state.Pause:
		c.view(cmd.Name).change(slot, func(e *jobEra) { e.paused = true })
	case state.Resume:
		c.view(cmd.Name).change(slot, func(e *jobEra) { e.paused = false })
	case state.DeleteJob:
		return c.deleteJob(slot, now, cmd.Name)
	case state.Takeover:
		c.term, c.termSlot, c.termAt = cmd.Term, slot, now
		//detlint:maprange each view is pruned on its own; the order cannot matter
		for _, v := range c.jobs {
			v.forget(slot)
		}
	default:
		panic(fmt.Sprintf("check: Cron.Applied given a %s", cmd.Kind()))
	}
	return nil
}

// putJob records a job created (none of its name lives) or replaced.
func (c *Cron) putJob(slot uint64, now time.Time, cmd state.PutJob, job state.Job) error {
	v := c.view(cmd.Name)
	created := v.current().inc == 0
	spec := cmd.Spec
	if spec.Concurrency == "" {
		spec.Concurrency = state.ConcurrencyAllow
	}
	if spec.CatchupWindow == 0 {
		spec.CatchupWindow = state.DefaultCatchupWindow
	}
	if created {
		v.schedules = nil
	}
	rescheduled := !created && (spec.Schedule != v.job.Spec.Schedule || spec.TimeZone != v.job.Spec.TimeZone)
	if rescheduled {
		if err := c.editFrom(slot, now, v, cmd, spec, job); err != nil {
			return err
		}
	}
	if created || rescheduled {
		v.scheduleAt = now
		v.schedules = append(v.schedules, setSchedule{at: now, job: state.Job{Name: cmd.Name, Spec: spec}})
	}
	if created {
		v.job = state.Job{Name: cmd.Name, CreatedVersion: job.CreatedVersion, CreatedAt: job.CreatedAt}
	}
	v.job.Spec = spec
	if !created && spec.Concurrency != state.ConcurrencyForbid {
		//detlint:maprange each open launch is marked on its own; the order cannot matter
		for _, l := range c.launches {
			if l.job == cmd.Name && l.inc == v.job.CreatedVersion && !l.finished {
				l.forbidAllAlong = false
			}
		}
	}
	v.change(slot, func(e *jobEra) {
		if created {
			*e = jobEra{from: slot, inc: job.CreatedVersion}
		}
		e.policy, e.window = spec.Concurrency, spec.CatchupWindow
	})
	return nil
}

// editFrom records the point v's live incarnation counts its launches
// from once cmd, chosen at slot and first applied at true time now, puts
// a new schedule (or zone) spec over the old at time cmd.At: cmd.At,
// unless the old schedule owed a slot by then, counting from the job's
// last start (or creation) and its previous edit. That slot is the new
// schedule's if it has one at that instant: then the second before it,
// so that the new schedule owes its slots from there. If not, the old
// schedule's slot must be recorded skipped by the edit (superseded), and
// the new schedule counts from it. The state counts from no earlier than
// its last start (or creation) whatever cmd.At says, as sinceEdit reads
// it. job is the job as the state holds it right after.
func (c *Cron) editFrom(slot uint64, now time.Time, v *jobView, cmd state.PutJob, spec state.JobSpec, job state.Job) error {
	old, at := v.job, cmd.At
	inc := incarnation{name: old.Name, version: old.CreatedVersion}
	from, seen := c.from[inc]
	if !seen {
		from = old.CreatedAt
	}
	s, err := c.schedule(old)
	if err != nil {
		return violation(InvNoSilentSkip, "job %q has a schedule the state accepted and the checker's oracle cannot read: %v", old.Name, err)
	}
	owed, err := s.Next(c.sinceEdit(inc, from), at)
	switch {
	case errors.Is(err, errNoLaunch):
		c.edited[inc] = at
		return nil
	case err != nil:
		return violation(InvNoSilentSkip, "job %q edited at %s: %v", old.Name, at.UTC().Format(time.RFC3339), err)
	}
	c.edited[inc] = owed.Add(-time.Second)
	ns, err := c.schedule(state.Job{Name: old.Name, Spec: spec})
	if err != nil {
		return violation(InvNoSilentSkip, "job %q has a schedule the state accepted and the checker's oracle cannot read: %v", old.Name, err)
	}
	_, err = ns.Next(owed.Add(-time.Second), owed)
	switch {
	case err == nil:
		return nil // the new schedule has the slot: it owes it
	case !errors.Is(err, errNoLaunch):
		return violation(InvNoSilentSkip, "job %q edited at %s: %v", old.Name, at.UTC().Format(time.RFC3339), err)
	}
	c.edited[inc] = owed
	return c.superseded(slot, now, v, owed, at, spec, job)
}

// supersededReason is the state's reason for a slot an edit superseded
// (state.ReasonSuperseded), read: the edit's time and version.
var supersededReason = regexp.MustCompile(`^superseded: the schedule was edited at (?P<at>\S+) \(version (?P<version>\d+)\), after this launch came due and before it started$`)

// superseded checks that slot owed of v's live incarnation, which its old
// schedule owed when the edit chosen at slot (its At edited, first
// applied at true time now) set spec, whose schedule lacks it, is recorded: job,
// the job as the state holds it right after, must have it in its history,
// concluded skipped by that edit, and as its last start, so that no
// start of it proposed under the old schedule is accepted. A state that
// drops it leaves no trace of a slot that came due. It is then a launch
// of the job's, concluded, judged at the end as a slot a deletion drops
// is (onTime) and open to a backfill as any skipped slot.
func (c *Cron) superseded(slot uint64, now time.Time, v *jobView, owed, edited time.Time, spec state.JobSpec, job state.Job) error {
	id := state.Identity(job.Name, owed)
	what := fmt.Sprintf("job %q's slot %s, owed by its old schedule (%s in %s) when the edit chosen at slot %d (at %s) set one without it (%s in %s),",
		job.Name, owed.UTC().Format(time.RFC3339), v.job.Spec.Schedule, zoneName(v.job.Spec.TimeZone), slot, edited.UTC().Format(time.RFC3339Nano),
		spec.Schedule, zoneName(spec.TimeZone))
	i := slices.IndexFunc(job.History, func(l state.Launch) bool {
		return l.Kind == state.LaunchScheduled && l.ScheduledAt.Equal(owed) && l.FinishedSlot == slot
	})
	if i < 0 {
		return violation(InvNoSilentSkip, "%s has no record in the job's history from that edit: it was dropped silently", what)
	}
	rec := job.History[i]
	if why := supersededWhy(rec.Outcome, edited, job.Version); why != "" {
		return violation(InvNoSilentSkip, "%s is recorded %s (%q): %s", what, rec.Outcome.Kind, rec.Outcome.Reason, why)
	}
	if !job.LastStartedAt.Equal(owed) {
		return violation(InvNoSilentSkip, "%s is recorded skipped, but the state's last start is %s, not that slot: a start of it could still be accepted",
			what, job.LastStartedAt.UTC().Format(time.RFC3339))
	}
	if prev, ok := c.launches[id]; ok {
		return violation(InvAtMostOnce, "launch %s started at slot %d and superseded by an edit at slot %d", id, prev.slot, slot)
	}
	c.launches[id] = &cronLaunch{job: job.Name, at: owed, due: owed, kind: state.LaunchScheduled, slot: slot,
		finished: true, outcome: rec.Outcome, inc: job.CreatedVersion, target: job.Spec.Target(),
		finishedAt: now, openedAt: now, decidedFrom: slot, scheduleAt: c.knownAt(v, owed), supersededAt: now}
	c.counts.Justified[reasonSuperseded.String()]++
	return nil
}

// supersededWhy says why o is not the state's record of a slot superseded
// by the edit at time edited that made version version ("" if it is):
// skipped, naming that edit, or with the reason a history at its limit
// did not keep.
func supersededWhy(o state.Outcome, edited time.Time, version uint64) string {
	m := supersededReason.FindStringSubmatch(o.Reason)
	switch {
	case o.Kind != state.OutcomeSkipped || o.ChildID != "":
		return "want skipped, naming no child"
	case o.Reason == state.ReasonNotKept:
		return ""
	case m == nil:
		return "not the reason of a slot an edit superseded"
	}
	at, err := time.Parse(time.RFC3339Nano, m[supersededReason.SubexpIndex("at")])
	if err != nil || !at.Equal(edited) || m[supersededReason.SubexpIndex("version")] != strconv.FormatUint(version, 10) {
		return fmt.Sprintf("it does not name the edit at %s, version %d", edited.UTC().Format(time.RFC3339Nano), version)
	}
	return ""
}

// deleteJob records a job deleted, and the slots it owed: those due
// before now that never started. The state keeps no record of them;
// Final judges them against the healthy intervals (deletedSlot).
func (c *Cron) deleteJob(slot uint64, now time.Time, name string) error {
	v := c.view(name)
	inc := incarnation{name: name, version: v.job.CreatedVersion}
	from, seen := c.from[inc]
	if !seen {
		from = c.namesakeFrom(v.job)
	}
	from = c.sinceEdit(inc, from)
	s, err := c.schedule(v.job)
	if err != nil {
		return violation(InvNoSilentSkip, "job %q has a schedule the state accepted and the checker's oracle cannot read: %v", name, err)
	}
	// Every slot owed is kept: the first few may fall before any healthy
	// interval and a later one inside one (a cap of 16 let a job every
	// second, stalled from before an interval, be deleted with slots lost
	// in it). Next moves on by at least a second, and deletions come within
	// a run of minutes, so the walk is short.
	for {
		next, err := s.Next(from, now)
		if err != nil && !errors.Is(err, errNoLaunch) {
			return violation(InvNoSilentSkip, "job %q deleted, counting its slots from %s: %v", name, from.UTC().Format(time.RFC3339), err)
		}
		if err != nil || !next.Before(now) {
			break
		}
		c.deleted = append(c.deleted, deletedSlot{job: name, at: next.UTC(), deletedAt: now, scheduleAt: c.knownAt(v, next)})
		from = next
	}
	v.change(slot, func(e *jobEra) { *e = jobEra{from: slot} })
	v.job, v.schedules = state.Job{}, nil
	return nil
}

// namesakeFrom is when a job that never started counts its first slot
// from: its creation, or the latest launch of a deleted namesake after it
// (see followsNamesake).
func (c *Cron) namesakeFrom(job state.Job) time.Time {
	from := job.CreatedAt
	//detlint:maprange the latest is taken; the order cannot matter
	for _, l := range c.launches {
		if l.job == job.Name && l.inc != job.CreatedVersion && l.kind != state.LaunchManual && l.at.After(from) {
			from = l.at
		}
	}
	return from
}

// justify judges a launch concluded skipped or failed with o at slot
// (first applied at true time now) against the checker's view: the
// deciding leader's state was the log up to some slot P before slot, at
// or after its own takeover (termSlot: a launcher acts on nothing before
// its Takeover is applied, and the conclusion carries that takeover's
// term), and at or after the launch's decidedFrom; so some era in effect
// in [max(termSlot, decidedFrom), slot) must bear the reason out. A reason
// the launcher gives only for a launch it holds open (a policy, a
// dispatch, a look-up) had the launch's own slot applied too: then from
// the later of that and termSlot. Nomad's answers are judged in true time
// over the same span, from the first application of that slot (the leader
// applied it no earlier) to now (the conclusion was proposed before it
// was chosen).
func (c *Cron) justify(id string, l *cronLaunch, slot uint64, now time.Time, o state.Outcome) error {
	r, err := classify(o)
	if err != nil {
		return violation(InvNoSilentSkip, "launch %s ended %s (%q): %v", id, o.Kind, o.Reason, err)
	}
	if named := r.class == reasonForbid; named != (o.ChildID != "") || named && o.ChildID != r.child {
		// A forbid skip names the running child as its ChildID, which
		// becomes the job's last child; no other skip or failure has one.
		return violation(InvNoSilentSkip, "launch %s ended %s (%q) naming child %q: only a forbid skip names one, the child of its reason", id, o.Kind, o.Reason, o.ChildID)
	}
	lo, loAt := c.termSlot, c.termAt
	switch {
	case r.class == reasonPaused || r.class == reasonCatchup || r.class == reasonNoRoom:
		// Those the launcher also decides as it proposes the start.
		lo = max(lo, l.decidedFrom)
	case l.slot > lo:
		lo, loAt = l.slot, l.openedAt
	}
	eras := c.view(l.job).since(lo)
	mine := func(want func(e jobEra) bool) bool {
		for _, e := range eras {
			if e.inc == l.inc && want(e) {
				return true
			}
		}
		return false
	}
	var why string
	switch r.class {
	case reasonPaused:
		if l.force || !mine(func(e jobEra) bool { return e.paused }) {
			why = "the job was not paused (or the launch was forced)"
		}
	case reasonDeleted, reasonDeletedAfterFailure:
		if c.view(l.job).current().inc == l.inc {
			why = "its job was never deleted"
		}
	case reasonCatchup, reasonNoRoom:
		end := l.due.Add(r.window)
		switch {
		case r.class == reasonNoRoom && r.limit != c.roomLimit(r.ofJob):
			// That the leader waited is its own word (a start in flight
			// or a refused one is no mark in the log); the limit it
			// names is the state's, the same on every replica.
			why = fmt.Sprintf("it names a limit of %d open launches, and the state's is %d", r.limit, c.roomLimit(r.ofJob))
		case !mine(func(e jobEra) bool { return e.window == r.window }):
			why = fmt.Sprintf("the job's catch-up window was never %v", r.window)
		case !now.Add(c.cfg.ClockMargin).After(end):
			why = fmt.Sprintf("it was concluded at %s, before its window ended (%s, less %v of clock margin)",
				now.Format(time.RFC3339Nano), end.Format(time.RFC3339), c.cfg.ClockMargin)
		}
	case reasonForbid, reasonRunningUnknown, reasonStopFailed:
		policy := state.ConcurrencyForbid
		if r.class == reasonStopFailed {
			policy = state.ConcurrencyReplace
		}
		switch {
		case l.force:
			why = "the launch was forced past the policy"
		case !mine(func(e jobEra) bool { return e.policy == policy && e.lastChild == r.child }) &&
			!(mine(func(e jobEra) bool { return e.policy == policy }) && c.childOfUnknown(l, r.child)):
			why = fmt.Sprintf("the job never had policy %s with last child %s, nor is it the child of a launch of the job concluded unknown", policy, r.child)
		case r.class == reasonForbid:
			why = c.stillRunning(r.child, loAt, now)
		}
	case reasonRefused:
		if !c.cfg.Nomad.Refuses(l.target) {
			why = fmt.Sprintf("Nomad has %s and takes its dispatches", targetName(l.target))
		}
	case reasonRetriesOut:
		// Nomad's errors: judged by health alone (Final).
	case reasonUnknownLookupFailed:
		// Nomad's errors, judged by health alone, about a launch that
		// did conclude unknown, under a policy that looks it up.
		u := c.launches[r.launch]
		switch {
		case l.force:
			why = "the launch was forced past the policy"
		case !mine(func(e jobEra) bool {
			return e.policy == state.ConcurrencyForbid || e.policy == state.ConcurrencyReplace
		}):
			why = "the job's policy was never forbid or replace"
		case u == nil || u.job != l.job || u.inc != l.inc || !u.finished || u.outcome.Kind != state.OutcomeUnknown:
			why = fmt.Sprintf("%s is no launch of the job concluded unknown", r.launch)
		}
	}
	if why != "" {
		return violation(InvNoSilentSkip, "launch %s was %s at slot %d for %q (%s), but %s (the checker's view from slot %d)",
			id, o.Kind, slot, o.Reason, r.class, why, lo)
	}
	c.counts.Justified[r.class.String()]++
	return nil
}

// roomLimit is the state's limit on the open launches of one job (ofJob)
// or of all jobs; 0 if the config gives none.
func (c *Cron) roomLimit(ofJob bool) int {
	if ofJob {
		return c.cfg.OpenJobLimit
	}
	return c.cfg.OpenLimit
}

// childOfUnknown reports whether Nomad's child is that of a launch of l's
// job incarnation concluded unknown: the forbid and replace policies look
// those up and act on the children found.
func (c *Cron) childOfUnknown(l *cronLaunch, child string) bool {
	ch, ok := c.cfg.Nomad.Child(child)
	if !ok {
		return false
	}
	u := c.launches[ch.Token]
	return u != nil && u.job == l.job && u.inc == l.inc && u.finished && u.outcome.Kind == state.OutcomeUnknown
}

// stillRunning says why Nomad could not have answered that child ran at
// some instant in [from, to], or "" if it could.
func (c *Cron) stillRunning(child string, from, to time.Time) string {
	ch, ok := c.cfg.Nomad.Child(child)
	switch {
	case !ok:
		return fmt.Sprintf("Nomad never had child %s", child)
	case ch.CreatedAt.After(to):
		return fmt.Sprintf("Nomad made child %s only at %s", child, ch.CreatedAt.Format(time.RFC3339Nano))
	case !ch.FinishedAt.After(from):
		return fmt.Sprintf("Nomad's child %s had finished at %s, before the launcher could ask (from %s)",
			child, ch.FinishedAt.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
	case !ch.CollectedAt.IsZero() && !ch.CollectedAt.After(from):
		return fmt.Sprintf("Nomad had collected child %s at %s, before the launcher could ask (from %s)",
			child, ch.CollectedAt.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
	}
	return ""
}

func targetName(t state.Target) string {
	return fmt.Sprintf("job %q (namespace %q, region %q)", t.NomadJob, t.Namespace, t.Region)
}

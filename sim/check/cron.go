package check

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/paxos"
)

// Cron checks the cron invariants from outside the cron layer: what the
// log records (each chosen command, seen once, with the state's verdict),
// what the replicas ask of Nomad, and which children Nomad made.
//
//   - 7, at most once: no launch identity has two children in Nomad, and
//     Nomad has no child for a launch the log never started; and a forbid
//     job has one child at a time: no child of a launch the job held to
//     forbid all its life was made while another such child of the same
//     incarnation ran (see forbidOverlap for what is left out).
//   - 8, no silent skip: each job's launches follow its schedule with no
//     slot jumped over; every launch is concluded, and a "dispatched"
//     record names a child that exists; a child that exists is recorded
//     dispatched (or unknown, fail closed), never skipped or failed; every
//     skip and failure is justified by its kind against the checker's own
//     view (see justify); at the end nothing due is left unstarted; and in
//     every healthy interval each launch is dispatched within the lateness
//     bound, or skipped by a policy (paused, forbid, deleted), and no job
//     is deleted, or edited past a slot, with that slot overdue. A slot
//     its old schedule owed at an edit, which the new schedule does not
//     have, is recorded skipped by the edit (superseded). A manual launch
//     is due from the later of its request's time and its Trigger's
//     first application (manualOnTime).
//   - 9, the Nomad half: a replica calls Nomad only while it believes it
//     holds the lease (Lease checks that one replica at most believes so).
type Cron struct {
	cfg      CronConfig
	launches map[string]*cronLaunch // by identity
	// from is, per job incarnation, the time its next launch counts
	// from: its creation, or its last accepted start.
	from map[incarnation]time.Time
	// edited is, per job incarnation, the point its latest schedule edit
	// counts from (editFrom); its next launch counts from the later of
	// that and from.
	edited map[incarnation]time.Time
	// startSlot is, per job incarnation, the slot of its last start.
	startSlot map[incarnation]uint64
	// oracles read each job's schedule (Oracle), by job name, expression
	// and zone.
	oracles        map[string]*Oracle
	calls          uint64
	starts         uint64
	secondChildren uint64

	// jobs is the checker's view of each job name, from the log.
	jobs map[string]*jobView
	// term is the last takeover chosen, at slot termSlot, first applied
	// at true time termAt.
	term     state.Term
	termSlot uint64
	termAt   time.Time
	// deleted lists the slots each deleted job still owed, for Final to
	// judge against the healthy intervals.
	deleted []deletedSlot
	counts  CronCounts
	// open counts the launches open in the log's view; full lists the
	// spans of true time in which they were CronConfig.OpenLimit or more
	// (the last one open-ended, To zero, while it lasts).
	open int
	full []Interval
}

// CronConfig configures a Cron checker.
type CronConfig struct {
	// Nomad is the checker's view of Nomad. Required.
	Nomad NomadView
	// ClockMargin bounds how far ahead of true time a replica's wall
	// clock may run: a leader that found a launch beyond its catch-up
	// window on its own clock found it no earlier than that much before
	// the true window's end.
	ClockMargin time.Duration
	// OpenLimit is the state's limit on the launches open of all jobs
	// (state.Limits.OpenLaunches): while the log holds that many, no
	// launch can start, so one due meanwhile is not held to the lateness
	// bound even in a healthy interval. Zero: no limit.
	OpenLimit int
	// OpenJobLimit is the state's limit on the launches open of one job
	// (state.Limits.OpenLaunchesJob), which a skip that waited for room
	// may name. Zero: no limit.
	OpenJobLimit int
}

// CronCounts is what the checker judged: a rule that judged nothing in a
// swarm of runs proves nothing.
type CronCounts struct {
	// Justified counts skips and failures by reason, each checked against
	// the checker's view.
	Justified map[string]uint64
	// OnTime counts the launches judged against the lateness bound in a
	// healthy interval; OnTimeEarly those in an interval before the last.
	OnTime      uint64
	OnTimeEarly uint64
	// DroppedByDelete counts the slots jobs owed when they were deleted,
	// due before the deletion, that no healthy interval held.
	DroppedByDelete uint64
	// OverdueJudged counts those a healthy interval held (each then a
	// violation, so it stays zero in a passing run).
	OverdueJudged uint64
	// SupersededJudged counts the slots schedule edits superseded that
	// came due in a healthy interval, judged against the lateness bound
	// at the edit (supersededOnTime).
	SupersededJudged uint64
	// ForbidJudged counts the children of launches held to forbid all
	// along that were checked against the job's others (forbidOverlap).
	ForbidJudged uint64
	// Crowded counts the launches due in a healthy interval that waited
	// to start while the state held as many launches open as it keeps
	// (CronConfig.OpenLimit): not held to the lateness bound. Once open,
	// a launch needs no room.
	Crowded uint64
	// OnTimeManual counts the manual launches judged against the
	// lateness bound in a healthy interval, from the later of their
	// request's time and their Trigger's first application (manualDue).
	OnTimeManual      uint64
	OnTimeManualEarly uint64 // those in an interval before the last
	// ManualWindowShort counts the manual launches in a healthy interval
	// skipped for their catch-up window, which counts from the request
	// and could end within the bound of when they were judged from: the
	// skip is the product's promise kept, not lateness.
	ManualWindowShort uint64
}

// deletedSlot is a slot a job owed when a DeleteJob removed it.
type deletedSlot struct {
	job        string
	at         time.Time
	deletedAt  time.Time
	scheduleAt time.Time
}

type incarnation struct {
	name    string
	version uint64 // the job's CreatedVersion
}

// cronLaunch is a launch identity's record: a scheduled slot, then
// possibly backfill attempts of it, or a manual launch.
type cronLaunch struct {
	job string
	at  time.Time
	// due is when the latest attempt became due: the slot for a scheduled
	// launch, the request for a manual or backfilled one.
	due  time.Time
	kind state.LaunchKind // of the latest attempt
	slot uint64           // where the latest attempt started
	// finished and outcome are the latest attempt's; earlier lists the
	// outcomes of the attempts before it.
	finished bool
	outcome  state.Outcome
	earlier  []state.Outcome
	// force: the latest attempt was forced past the pause and the
	// concurrency policy.
	force bool
	// atLeastOnce: the job asked for at-least-once launches when it was
	// started, so a second child is allowed once Nomad forgot the first.
	atLeastOnce bool
	// inc is the job incarnation (CreatedVersion) it was opened for, and
	// target where it dispatches.
	inc    uint64
	target state.Target
	// forbidAllAlong: its latest attempt was not forced, and its job's
	// policy was forbid from its start to its end, so whoever decided
	// it decided under forbid.
	forbidAllAlong bool
	// finishedAt is when its latest attempt's finish was first applied.
	finishedAt time.Time
	// openedAt is when its latest attempt's slot was first applied.
	openedAt time.Time
	// decidedFrom is the earliest slot a leader may have decided on it
	// from: its own slot, but for a scheduled launch, which the leader
	// may skip as it proposes the start, the slot of its job's previous
	// start (the state's next launch was this one only from there on).
	decidedFrom uint64
	// scheduleAt is when its slot became known: when its job's schedule
	// was last set before it started, or earlier if the schedules before
	// had the slot too (Cron.knownAt).
	scheduleAt time.Time
	// supersededAt is when the edit that superseded the slot was first
	// applied, zero for a launch that was started (Cron.superseded).
	supersededAt time.Time
}

// NewCron returns an empty cron checker. A config without a Nomad view
// is a programmer error and panics.
func NewCron(cfg CronConfig) *Cron {
	if cfg.Nomad == nil {
		panic("check: NewCron without a Nomad view")
	}
	return &Cron{cfg: cfg, launches: map[string]*cronLaunch{}, from: map[incarnation]time.Time{}, edited: map[incarnation]time.Time{}, startSlot: map[incarnation]uint64{}, oracles: map[string]*Oracle{},
		jobs: map[string]*jobView{}, counts: CronCounts{Justified: map[string]uint64{}}}
}

// Counts returns what the checker judged so far (Final adds its own).
func (c *Cron) Counts() CronCounts { return c.counts }

// Stats reports how much the checker saw: starts accepted and Nomad calls.
func (c *Cron) Stats() (starts, calls uint64) { return c.starts, c.calls }

// SecondChildren counts the launches Final allowed more than one child:
// at-least-once launches dispatched again once Nomad forgot the first.
func (c *Cron) SecondChildren() uint64 { return c.secondChildren }

// Started records a LaunchStarted chosen at slot, first applied at true
// time now, that the state accepted; job is the job as the state holds it
// right after. It checks that the launch is the job's next slot by its
// schedule, counted from its last launch (or its creation), so that no due
// slot was jumped over.
func (c *Cron) Started(slot uint64, now time.Time, cmd state.LaunchStarted, job state.Job) error {
	at := cmd.ScheduledAt.UTC()
	if prev, ok := c.launches[cmd.Identity]; ok {
		return violation(InvAtMostOnce, "launch %s started at slot %d and again at slot %d", cmd.Identity, prev.slot, slot)
	}
	c.opened(now)
	c.launches[cmd.Identity] = &cronLaunch{job: cmd.Job, at: at, due: at, slot: slot, atLeastOnce: job.Spec.AtLeastOnce,
		inc: job.CreatedVersion, target: job.Spec.Target(), openedAt: now, scheduleAt: c.knownAt(c.view(cmd.Job), at),
		forbidAllAlong: job.Spec.Concurrency == state.ConcurrencyForbid}
	c.starts++
	inc := incarnation{name: job.Name, version: job.CreatedVersion}
	c.launches[cmd.Identity].decidedFrom = c.startSlot[inc]
	c.startSlot[inc] = slot
	from, seen := c.from[inc]
	c.from[inc] = at
	s, err := c.schedule(job)
	if err != nil {
		return violation(InvNoSilentSkip, "job %q has a schedule the state accepted and the checker's oracle cannot read: %v", job.Name, err)
	}
	if !seen {
		from = job.CreatedAt
		if c.followsNamesake(s, job, at) {
			return nil
		}
	}
	from = c.sinceEdit(inc, from)
	want, err := s.Next(from, at)
	switch {
	case errors.Is(err, errNoLaunch):
		return violation(InvNoSilentSkip, "job %q (%s in %s) started its launch at %s, but by the checker's oracle it has no slot in (%s, %s]",
			job.Name, job.Spec.Schedule, zoneName(job.Spec.TimeZone), at.Format(time.RFC3339), from.Format(time.RFC3339), at.Format(time.RFC3339))
	case err != nil:
		return violation(InvNoSilentSkip, "job %q started its launch at %s, counting from %s: %v", job.Name, at.Format(time.RFC3339), from.Format(time.RFC3339), err)
	case !want.Equal(at):
		return violation(InvNoSilentSkip, "job %q (%s in %s) started its launch at %s, but its next slot after %s is %s by the checker's oracle: a slot was jumped over",
			job.Name, job.Spec.Schedule, zoneName(job.Spec.TimeZone), at.Format(time.RFC3339), from.Format(time.RFC3339), want.UTC().Format(time.RFC3339))
	}
	return nil
}

// sinceEdit returns the time inc's next launch counts from, from being
// its last start (or creation): the later of that and the point its
// latest schedule edit set.
func (c *Cron) sinceEdit(inc incarnation, from time.Time) time.Time {
	if e, ok := c.edited[inc]; ok && e.After(from) {
		return e
	}
	return from
}

// followsNamesake reports whether a re-created job's first launch at is
// the slot after a launch of its deleted namesake: the state counts a job
// created while such launches are open from the last of them. Only a
// namesake's launches count (another incarnation's, not manual, as
// namesakeFrom reads them): the job's own trigger or backfill before its
// first start excused every slot it jumped over before them.
func (c *Cron) followsNamesake(s *Oracle, job state.Job, at time.Time) bool {
	//detlint:maprange any match will do; the answer does not depend on the order
	for _, l := range c.launches {
		if l.job != job.Name || l.inc == job.CreatedVersion || l.kind == state.LaunchManual || !l.at.After(job.CreatedAt) || !l.at.Before(at) {
			continue
		}
		if next, err := s.Next(l.at, at); err == nil && next.Equal(at) {
			return true
		}
	}
	return false
}

func zoneName(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

// schedule is the checker's own reading of job's schedule: its Oracle,
// not cron/schedule, so that a wrong launch time there is caught here.
func (c *Cron) schedule(job state.Job) (*Oracle, error) {
	key := job.Name + "\x00" + job.Spec.Schedule + "\x00" + job.Spec.TimeZone
	if s, ok := c.oracles[key]; ok {
		return s, nil
	}
	s, err := NewOracle(job.Spec.Schedule, job.Name, job.Spec.TimeZone)
	if err != nil {
		return nil, err
	}
	c.oracles[key] = s
	return s, nil
}

// Opened records a launch a Trigger or Backfill opened at slot, first
// applied at true time now. A manual launch has its own identity; a
// backfill reopens a slot that did not run: its earlier attempts were
// skipped or failed (or, forced, unknown).
func (c *Cron) Opened(slot uint64, now time.Time, l state.Launch, job state.Job) error {
	c.opened(now)
	prev, seen := c.launches[l.Identity]
	opened := func() *cronLaunch {
		return &cronLaunch{job: l.Job, at: l.ScheduledAt, due: l.StartedAt, kind: l.Kind, slot: slot, force: l.Force, atLeastOnce: job.Spec.AtLeastOnce,
			inc: job.CreatedVersion, target: l.Target, openedAt: now, decidedFrom: slot,
			forbidAllAlong: !l.Force && job.Spec.Concurrency == state.ConcurrencyForbid}
	}
	switch {
	case l.Kind == state.LaunchManual && seen:
		return violation(InvAtMostOnce, "manual launch %s opened at slot %d and again at slot %d", l.Identity, prev.slot, slot)
	case l.Kind == state.LaunchManual:
		c.launches[l.Identity] = opened()
		return nil
	case !seen && !l.Force:
		return violation(InvAtMostOnce, "backfill of %s at slot %d, a slot the checker never saw start, without force", l.Identity, slot)
	case !seen:
		c.launches[l.Identity] = opened()
		return nil
	case !prev.finished:
		return violation(InvAtMostOnce, "backfill of %s at slot %d while its launch from slot %d is open", l.Identity, slot, prev.slot)
	}
	switch prev.outcome.Kind {
	case state.OutcomeSkipped, state.OutcomeFailed:
	case state.OutcomeUnknown:
		if !l.Force {
			return violation(InvAtMostOnce, "backfill of %s at slot %d, whose outcome is unknown, without force", l.Identity, slot)
		}
	default:
		return violation(InvAtMostOnce, "backfill of %s at slot %d, which ran (%s %s)", l.Identity, slot, prev.outcome.Kind, prev.outcome.ChildID)
	}
	earlier := append(prev.earlier, prev.outcome)
	*prev = *opened()
	prev.earlier = earlier
	return nil
}

// Finished records a LaunchFinished chosen at slot, first applied at true
// time now, that the state accepted, and judges a skip or a failure
// (justify).
func (c *Cron) Finished(slot uint64, now time.Time, cmd state.LaunchFinished) error {
	id := state.LaunchIdentity(cmd.Job, cmd.ScheduledAt, cmd.LaunchKind)
	l, ok := c.launches[id]
	switch {
	case !ok:
		return violation(InvNoSilentSkip, "launch %s finished at slot %d but never started", id, slot)
	case l.finished:
		return violation(InvNoSilentSkip, "launch %s finished twice (%s, then %s at slot %d)", id, l.outcome.Kind, cmd.Outcome.Kind, slot)
	case cmd.StartedSlot != 0 && cmd.StartedSlot != l.slot:
		// A conclusion names the opening it was proposed for; one for an
		// earlier opening closed a reopened (backfilled) launch that no
		// leader decided on (the state must refuse it).
		return violation(InvNoSilentSkip, "launch %s was concluded %s at slot %d by a conclusion for its opening at slot %d, but it was last opened at slot %d",
			id, cmd.Outcome.Kind, slot, cmd.StartedSlot, l.slot)
	case cmd.Term != c.term:
		// The state refuses an earlier term's; a later one's means a
		// leader concluded before its takeover was chosen, on a state
		// that may lack its predecessor's work.
		return violation(InvNoSilentSkip, "launch %s was concluded %s at slot %d in term %s, but the last takeover chosen is %s's (slot %d)",
			id, cmd.Outcome.Kind, slot, cmd.Term, c.term, c.termSlot)
	}
	l.finished, l.outcome, l.finishedAt = true, cmd.Outcome, now
	c.open--
	if n := len(c.full); n > 0 && c.full[n-1].To.IsZero() && c.open < c.cfg.OpenLimit {
		c.full[n-1].To = now
	}
	v := c.view(l.job)
	if cmd.Outcome.Kind == state.OutcomeDispatched && !l.force && v.current().inc == l.inc && l.inc != 0 {
		// A forced launch ignored the policy, which keeps watching the
		// child it knew.
		v.change(slot, func(e *jobEra) { e.lastChild = cmd.Outcome.ChildID })
	}
	if cmd.Outcome.Kind != state.OutcomeSkipped && cmd.Outcome.Kind != state.OutcomeFailed {
		return nil
	}
	err := c.justify(id, l, slot, now, cmd.Outcome)
	if cmd.Outcome.Kind == state.OutcomeSkipped && cmd.Outcome.ChildID != "" && v.current().inc == l.inc && l.inc != 0 {
		// A forbid skip makes the child it names the job's last child.
		// Judged first: the era it opens must not bear itself out.
		v.change(slot, func(e *jobEra) { e.lastChild = cmd.Outcome.ChildID })
	}
	return err
}

// Call checks a call replica id made to Nomad at true time at.
func (c *Cron) Call(at time.Duration, id paxos.ReplicaID, req launcher.Request, leaseHeld bool) error {
	c.calls++
	if !leaseHeld {
		return violation(InvLease, "at %v replica %d called Nomad (%s %s) without holding the lease", at, id, req.Op, req.Identity)
	}
	return nil
}

// LeaseTold checks a lease replica id's launcher tells its dispatcher
// (launcher.LeaseFollower) at true time at: the dispatcher may start the
// stint's calls until then, so it must be a lease the replica holds, and
// end no later than the replica's own (leaseEnd; both on the launcher's
// clock). A zero until ends the stint's calls and is always allowed.
func (c *Cron) LeaseTold(at time.Duration, id paxos.ReplicaID, stint uint64, until, leaseEnd time.Time, held bool) error {
	switch {
	case until.IsZero():
		return nil
	case !held:
		return violation(InvLease, "at %v replica %d told its dispatcher of a lease to %v in stint %d without holding the lease", at, id, until, stint)
	case until.After(leaseEnd):
		return violation(InvLease, "at %v replica %d told its dispatcher of a lease to %v in stint %d, past its own (%v)", at, id, until, stint, leaseEnd)
	}
	return nil
}

// CallStint checks that replica id makes call req in the stint its
// launcher last told its dispatcher of (told), while that stint's lease
// is told as held (live): the dispatcher starts a request's call only
// while its stint's lease lasts. A launcher that told no lease (told 0)
// is not checked.
func (c *Cron) CallStint(at time.Duration, id paxos.ReplicaID, req launcher.Request, told uint64, live bool) error {
	if told != 0 && (req.Stint != told || !live) {
		return violation(InvLease, "at %v replica %d called Nomad (%s %s) in stint %d, its dispatcher told of stint %d (lease live: %t)", at, id, req.Op, req.Identity, req.Stint, told, live)
	}
	return nil
}

// NomadChild is a child Nomad made, as the final check needs it.
type NomadChild struct {
	ID    string
	Token string
	// CreatedAt is on the same clock as the scheduled times.
	CreatedAt time.Time
	// FinishedAt is when it finished (or was stopped), or, while it runs,
	// when it will unless stopped first.
	FinishedAt time.Time
	// CollectedAt is when Nomad's garbage collection removed it, and its
	// token was forgotten; zero if never.
	CollectedAt time.Time
}

// Interval is a stretch of true time in which the cluster and Nomad were
// healthy, less the settling time at its start: a launch due at or after
// From, and at least the lateness bound before To, must be on time.
type Interval struct {
	From, To time.Time
}

// holds reports whether iv judges a launch due at at: its whole lateness
// window lies inside.
func (iv Interval) holds(at time.Time, bound time.Duration) bool {
	return !at.Before(iv.From) && at.Add(bound).Before(iv.To)
}

// CronFinal is the state at the end of a run.
type CronFinal struct {
	// End is the end of the run, on the scheduled times' clock.
	End time.Time
	// Bound is the lateness bound: a launch due before End-Bound must be
	// concluded, and while healthy, dispatched within Bound of its time.
	Bound time.Duration
	// Healthy are the healthy intervals, in order; the last is usually
	// the healed tail of the run, to End.
	Healthy []Interval
	// Children is every child Nomad ever made.
	Children []NomadChild
	// Jobs and Open are an up-to-date replica's final state.
	Jobs []state.Job
	Open []state.Launch
}

// Final runs the end-of-run checks.
func (c *Cron) Final(f CronFinal) error {
	byToken := map[string][]NomadChild{}
	for _, ch := range f.Children {
		byToken[ch.Token] = append(byToken[ch.Token], ch)
	}
	tokens := sortedStrings(byToken)
	for _, tok := range tokens {
		chs := byToken[tok]
		if l := c.launches[tok]; len(chs) > 1 && (l == nil || !l.atLeastOnce) {
			return violation(InvAtMostOnce, "launch %s has %d children in Nomad: %s", tok, len(chs), childIDs(chs))
		}
		if len(chs) > 1 {
			c.secondChildren++
		}
		for i := 1; i < len(chs); i++ {
			// At least once: a second child only after Nomad forgot the
			// first, never while a look-up could have found it.
			if prev := chs[i-1]; prev.CollectedAt.IsZero() || prev.CollectedAt.After(chs[i].CreatedAt) {
				return violation(InvAtMostOnce, "launch %s (at least once) got child %s while Nomad still had %s", tok, chs[i].ID, prev.ID)
			}
		}
		if _, ok := c.launches[tok]; !ok {
			return violation(InvAtMostOnce, "Nomad has child %s for launch %s, which the log never started", chs[0].ID, tok)
		}
	}
	due := f.End.Add(-f.Bound)
	for _, id := range sortedStrings(c.launches) {
		l := c.launches[id]
		chs := byToken[id]
		if err := earlierChild(id, l, chs); err != nil {
			return err
		}
		switch {
		case !l.finished && l.due.Before(due):
			return violation(InvNoSilentSkip, "%s launch %s, due %s, is still open at the end (%s)", l.kind, id, l.due.Format(time.RFC3339), f.End.Format(time.RFC3339))
		case !l.finished:
			continue
		case l.outcome.Kind == state.OutcomeDispatched && !slices.ContainsFunc(chs, func(ch NomadChild) bool { return ch.ID == l.outcome.ChildID }):
			return violation(InvNoSilentSkip, "launch %s is recorded dispatched as %s, but Nomad has %s", id, l.outcome.ChildID, childIDs(chs))
		case len(chs) > 0 && l.outcome.Kind != state.OutcomeDispatched && l.outcome.Kind != state.OutcomeUnknown:
			return violation(InvNoSilentSkip, "launch %s is recorded %s (%s), but Nomad made child %s", id, l.outcome.Kind, l.outcome.Reason, chs[0].ID)
		}
		if err := c.onTime(id, l, chs, f); err != nil {
			return err
		}
	}
	if err := c.judgeDeleted(f); err != nil {
		return err
	}
	if err := c.forbidOverlap(byToken); err != nil {
		return err
	}
	for _, j := range f.Jobs {
		// The job's next slot by the checker's own count (from its last
		// launch seen, or its creation), not only by the state's NextAt:
		// a state that zeroed or moved NextAt and never started the job
		// again passed (found in review, with a planted bug in Resume).
		inc := incarnation{name: j.Name, version: j.CreatedVersion}
		from, seen := c.from[inc]
		if !seen {
			from = j.CreatedAt
		}
		from = c.sinceEdit(inc, from)
		s, err := c.schedule(j)
		if err != nil {
			return violation(InvNoSilentSkip, "job %q has a schedule the state accepted and the checker's oracle cannot read: %v", j.Name, err)
		}
		want, err := s.Next(from, due)
		if err != nil && !errors.Is(err, errNoLaunch) {
			return violation(InvNoSilentSkip, "job %q, counting from %s: %v", j.Name, from.UTC().Format(time.RFC3339), err)
		}
		if err == nil && want.Before(due) {
			return violation(InvNoSilentSkip, "job %q's slot %s (the next after %s) was never started (the run ended %s; the state says next %s)",
				j.Name, want.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339), f.End.Format(time.RFC3339), j.NextAt.Format(time.RFC3339))
		}
		if !j.NextAt.IsZero() && j.NextAt.Before(due) {
			return violation(InvNoSilentSkip, "job %q's launch due %s was never started (the run ended %s)", j.Name, j.NextAt.Format(time.RFC3339), f.End.Format(time.RFC3339))
		}
	}
	for _, o := range f.Open {
		if _, ok := c.launches[o.Identity]; !ok {
			return violation(InvNoSilentSkip, "the state has open launch %s that the checker never saw start", o.Identity)
		}
	}
	if c.cfg.OpenLimit > 0 && c.open != len(f.Open) {
		// The count that excuses crowded launches must be the state's.
		return violation(InvNoSilentSkip, "the checker counts %d launches open, the state holds %d", c.open, len(f.Open))
	}
	return nil
}

// earlierChild checks the children of a reopened (backfilled) launch
// against its earlier attempts, which the checks on the latest outcome do
// not see: a child Nomad made before the latest attempt was first applied
// is an earlier attempt's, and those were recorded skipped or failed (a
// backfill reopens nothing else) unless one concluded unknown. Without
// this, an attempt recorded failed whose child existed passed once a
// backfill reopened its slot and concluded unknown, or, at least once,
// dispatched again after Nomad forgot the first child.
func earlierChild(id string, l *cronLaunch, chs []NomadChild) error {
	if len(l.earlier) == 0 || slices.ContainsFunc(l.earlier, func(o state.Outcome) bool { return o.Kind == state.OutcomeUnknown }) {
		return nil
	}
	i := slices.IndexFunc(chs, func(ch NomadChild) bool { return ch.CreatedAt.Before(l.openedAt) })
	if i < 0 {
		return nil
	}
	kinds := make([]string, len(l.earlier))
	for k, o := range l.earlier {
		kinds[k] = fmt.Sprintf("%s (%s)", o.Kind, o.Reason)
	}
	return violation(InvNoSilentSkip, "launch %s has child %s, made at %s before its %s attempt was opened at %s, but its earlier attempts were recorded %s",
		id, chs[i].ID, chs[i].CreatedAt.Format(time.RFC3339Nano), l.kind, l.openedAt.Format(time.RFC3339Nano), strings.Join(kinds, ", "))
}

// forbidOverlap checks that no child of a launch held to forbid was made
// while another such child of its job's incarnation ran. Held: unforced,
// under forbid from its start to its end (forbidAllAlong), and not at
// least once (such a launch found missing past the memory horizon is
// dispatched again without asking, by design). The policy asks about the
// last child it knows of, so two children are judged only if no child
// came between them, or concluded, from a launch that was not held and
// not forced: one dispatched under another policy (or again, at least
// once) takes the last child's place, and a child made beside it is the
// change of policy's doing. A forced launch's child runs beside by
// design, and leaves the last child where it was.
func (c *Cron) forbidOverlap(byToken map[string][]NomadChild) error {
	var all []forbidChild
	for _, id := range sortedStrings(byToken) {
		l := c.launches[id]
		if l == nil || l.inc == 0 {
			continue
		}
		held := l.forbidAllAlong && !l.atLeastOnce // forbidAllAlong: unforced too
		for _, ch := range byToken[id] {
			all = append(all, forbidChild{inc: incarnation{name: l.job, version: l.inc}, launch: id, child: ch,
				held: held, displaces: !held && !l.force, finishedAt: l.finishedAt})
		}
	}
	slices.SortStableFunc(all, func(a, b forbidChild) int {
		return cmp.Or(strings.Compare(a.inc.name, b.inc.name), cmp.Compare(a.inc.version, b.inc.version), a.child.CreatedAt.Compare(b.child.CreatedAt))
	})
	for start := 0; start < len(all); {
		end := start + 1
		for end < len(all) && all[end].inc == all[start].inc {
			end++
		}
		if err := c.judgeForbid(all[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// forbidChild is a child as forbidOverlap judges it.
type forbidChild struct {
	inc        incarnation
	launch     string
	child      NomadChild
	held       bool      // its launch was held to forbid
	displaces  bool      // its launch took the last child's place unasked
	finishedAt time.Time // when its launch's finish was first applied
}

// judgeForbid judges the children of one incarnation, in creation order.
func (c *Cron) judgeForbid(chs []forbidChild) error {
	for i, next := range chs {
		if !next.held {
			continue
		}
		c.counts.ForbidJudged++
		for _, prev := range chs[:i] {
			// chs is in creation order, so prev was made no later than
			// next: two made at the same instant ran side by side too
			// (a strict "made before" let such a pair pass).
			ran := prev.held && prev.child.FinishedAt.After(next.child.CreatedAt)
			if ran && !displacedBetween(chs, prev.child.CreatedAt, next.child.CreatedAt) {
				return violation(InvAtMostOnce, "forbid job %q: launch %s got child %s at %s while %s (launch %s, made %s) ran until %s",
					next.inc.name, next.launch, next.child.ID, next.child.CreatedAt.Format(time.RFC3339Nano),
					prev.child.ID, prev.launch, prev.child.CreatedAt.Format(time.RFC3339Nano), prev.child.FinishedAt.Format(time.RFC3339Nano))
			}
		}
	}
	return nil
}

// displacedBetween reports whether a launch that took the last child's
// place unasked made its child, or concluded, strictly between from and
// to.
func displacedBetween(chs []forbidChild, from, to time.Time) bool {
	between := func(t time.Time) bool { return t.After(from) && t.Before(to) }
	return slices.ContainsFunc(chs, func(d forbidChild) bool {
		return d.displaces && (between(d.child.CreatedAt) || between(d.finishedAt))
	})
}

// healthyAt returns the index of a healthy interval that judges a slot due
// at, its schedule set at scheduleAt (a slot due before its job had that
// schedule was late before anyone knew of it), or -1.
func healthyAt(f CronFinal, at, scheduleAt time.Time) int {
	if at.Before(scheduleAt) {
		return -1
	}
	return slices.IndexFunc(f.Healthy, func(iv Interval) bool { return iv.holds(at, f.Bound) })
}

// onTime checks a concluded scheduled launch due in a healthy interval (a
// first attempt: a backfill is the operator's, late by design), or a
// manual launch (manualOnTime): dispatched within the bound, or skipped
// or failed for a reason that has nothing to do with the cluster's health
// (justify has checked that the reason holds).
func (c *Cron) onTime(id string, l *cronLaunch, chs []NomadChild, f CronFinal) error {
	if l.kind == state.LaunchManual {
		return c.manualOnTime(id, l, chs, f)
	}
	if l.kind != state.LaunchScheduled || len(l.earlier) > 0 || !l.at.Add(f.Bound).Before(f.End) {
		return nil
	}
	iv := healthyAt(f, l.at, l.scheduleAt)
	if iv < 0 {
		return nil
	}
	if !l.supersededAt.IsZero() {
		return c.supersededOnTime(id, l, iv, f)
	}
	if c.crowded(l.at, l.openedAt) {
		c.counts.Crowded++
		return nil
	}
	c.counts.OnTime++
	if iv < len(f.Healthy)-1 {
		c.counts.OnTimeEarly++
	}
	return judgeOnTime(id, l, l.at, iv, chs, f, nil)
}

// supersededOnTime judges a slot an edit superseded (Cron.superseded),
// due in healthy interval iv, as judgeDeleted judges one a deletion
// dropped: if it came due a lateness bound before the edit, and not
// while the state held its limit of open launches, it should have been
// launched by then, and the edit only hid that it was late.
func (c *Cron) supersededOnTime(id string, l *cronLaunch, iv int, f CronFinal) error {
	c.counts.SupersededJudged++
	if !c.overdueWhenDropped(l.at, l.supersededAt, f) {
		return nil
	}
	return violation(InvNoSilentSkip, "launch %s, due %s while healthy (interval %d, from %s to %s), was never started before an edit superseded it at %s",
		id, l.at.Format(time.RFC3339), iv, f.Healthy[iv].From.Format(time.RFC3339Nano), f.Healthy[iv].To.Format(time.RFC3339Nano), l.supersededAt.Format(time.RFC3339Nano))
}

// manualDue is when a manual launch is held to the lateness bound from:
// the later of its request's time (the Trigger's At, on the writer's
// clock, whole seconds) and the first application of its Trigger (true
// time: no leader can act on the launch before its Trigger is chosen,
// and one whose writer's clock runs ahead is not due before its At). A
// Trigger refused (a duplicate, a job missing, no room) opens nothing,
// and one chosen outside a healthy interval is not judged.
func manualDue(l *cronLaunch) time.Time {
	if l.openedAt.After(l.due) {
		return l.openedAt
	}
	return l.due
}

// manualOnTime checks a concluded manual launch due (manualDue) in a
// healthy interval as onTime does a scheduled one, with one more excuse:
// its catch-up window counts from the request (l.due), not from when it
// was judged from, so a skip for that window (justify has checked that
// the window was the job's and had ended on the deciding leader's clock)
// is excused if the window could end, by a clock up to ClockMargin ahead,
// within the bound of manualDue. Once open, a manual launch needs no
// room, so none is crowded.
func (c *Cron) manualOnTime(id string, l *cronLaunch, chs []NomadChild, f CronFinal) error {
	due := manualDue(l)
	if !due.Add(f.Bound).Before(f.End) {
		return nil
	}
	iv := healthyAt(f, due, time.Time{})
	if iv < 0 {
		return nil
	}
	if l.outcome.Kind == state.OutcomeSkipped {
		if r, err := classify(l.outcome); err == nil && r.class == reasonCatchup &&
			l.due.Add(r.window).Before(due.Add(f.Bound+c.cfg.ClockMargin)) {
			c.counts.ManualWindowShort++
			return nil
		}
	}
	c.counts.OnTimeManual++
	if iv < len(f.Healthy)-1 {
		c.counts.OnTimeManualEarly++
	}
	return judgeOnTime(id, l, due, iv, chs, f, func() string {
		return fmt.Sprintf("manual launch %s (requested for %s, its Trigger first applied %s)",
			id, l.due.Format(time.RFC3339), l.openedAt.Format(time.RFC3339Nano))
	})
}

// judgeOnTime judges launch l, due at due in healthy interval iv: its
// child made within the bound of due, or skipped or failed by a policy
// (paused, forbid, deleted) or Nomad's refusal. what names the launch in
// a violation (nil: "launch id").
func judgeOnTime(id string, l *cronLaunch, due time.Time, iv int, chs []NomadChild, f CronFinal, what func() string) error {
	name := "launch " + id
	if what != nil {
		name = what()
	}
	o := l.outcome
	switch o.Kind {
	case state.OutcomeDispatched:
		i := slices.IndexFunc(chs, func(ch NomadChild) bool { return ch.ID == o.ChildID })
		if late := chs[i].CreatedAt.Sub(due); late > f.Bound {
			return violation(InvNoSilentSkip, "%s, due %s while healthy (interval %d, from %s to %s), was dispatched %v late (bound %v)",
				name, due.Format(time.RFC3339Nano), iv, f.Healthy[iv].From.Format(time.RFC3339Nano), f.Healthy[iv].To.Format(time.RFC3339Nano), late, f.Bound)
		}
		return nil
	case state.OutcomeSkipped, state.OutcomeFailed:
		if r, err := classify(o); err == nil {
			switch r.class {
			case reasonPaused, reasonForbid, reasonDeleted, reasonRefused:
				return nil
			}
		}
	}
	return violation(InvNoSilentSkip, "%s, due %s while the cluster and Nomad were healthy (interval %d, from %s to %s), ended %s: %s",
		name, due.Format(time.RFC3339Nano), iv, f.Healthy[iv].From.Format(time.RFC3339Nano), f.Healthy[iv].To.Format(time.RFC3339Nano), o.Kind, o.Reason)
}

// opened counts a launch opened at true time now.
func (c *Cron) opened(now time.Time) {
	c.open++
	if c.cfg.OpenLimit > 0 && c.open >= c.cfg.OpenLimit && (len(c.full) == 0 || !c.full[len(c.full)-1].To.IsZero()) {
		c.full = append(c.full, Interval{From: now})
	}
}

// crowded reports whether the state held as many launches open as it
// keeps at some time in [from, to): a launch opened at to (the one that
// filled it, say) did not wait.
func (c *Cron) crowded(from, to time.Time) bool {
	return slices.ContainsFunc(c.full, func(iv Interval) bool {
		return iv.From.Before(to) && (iv.To.IsZero() || !iv.To.Before(from))
	})
}

// judgeDeleted judges the slots deleted jobs owed. A slot due a lateness
// bound before its job's deletion, in a healthy interval, should have
// been launched by then: its loss is a silent skip. Any other is counted:
// the faults (or a schedule set too late) explain it, and the deletion
// was the operator's.
// overdueWhenDropped says whether a slot due at, which a deletion or a
// schedule edit dropped at dropped (true time), should have started by
// then: it came due more than the lateness bound before, and not while
// the state held its limit of open launches.
func (c *Cron) overdueWhenDropped(at, dropped time.Time, f CronFinal) bool {
	return at.Add(f.Bound).Before(dropped) && !c.crowded(at, dropped)
}

func (c *Cron) judgeDeleted(f CronFinal) error {
	for _, d := range c.deleted {
		iv := healthyAt(f, d.at, d.scheduleAt)
		if iv < 0 || !c.overdueWhenDropped(d.at, d.deletedAt, f) {
			c.counts.DroppedByDelete++
			continue
		}
		c.counts.OverdueJudged++
		return violation(InvNoSilentSkip, "job %q's slot %s, due while healthy (interval %d, from %s to %s), never started before the job was deleted at %s",
			d.job, d.at.Format(time.RFC3339), iv, f.Healthy[iv].From.Format(time.RFC3339Nano), f.Healthy[iv].To.Format(time.RFC3339Nano), d.deletedAt.Format(time.RFC3339Nano))
	}
	return nil
}

func childIDs(chs []NomadChild) string {
	if len(chs) == 0 {
		return "no child"
	}
	ids := make([]string, len(chs))
	for i, ch := range chs {
		ids[i] = ch.ID
	}
	return strings.Join(ids, ", ")
}

func sortedStrings[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	//detlint:maprange sorted below
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// String summarises what the checker saw.
func (c *Cron) String() string {
	return fmt.Sprintf("%d launches started, %d Nomad calls", c.starts, c.calls)
}

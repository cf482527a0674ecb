package state

import (
	"slices"
	"strings"
	"time"

	"paxcron/cron/scheduler"
)

// Due is a job whose next launch has come due.
type Due struct {
	Job         string
	ScheduledAt time.Time
	Identity    string
	SpecVersion uint64 // the job's current version
	// Paused jobs are due too: the scheduler records their launches as
	// skipped ("paused") rather than leaving a silent gap.
	Paused bool
}

// Job returns a copy of the named job.
func (m *Machine) Job(name string) (Job, bool) {
	j, ok := m.jobs[name]
	if !ok {
		return Job{}, false
	}
	return j.copy(), true
}

// JobSpec returns a job's spec (a copy, with defaults filled in) and
// version: what a writer needs, without the copy of its launches that
// Job makes.
func (m *Machine) JobSpec(name string) (spec JobSpec, version uint64, ok bool) {
	j, ok := m.jobs[name]
	if !ok {
		return JobSpec{}, 0, false
	}
	return j.spec(), j.Version, true
}

// Jobs returns a copy of every job, sorted by name.
func (m *Machine) Jobs() []Job {
	names := m.sortedNames()
	out := make([]Job, 0, len(names))
	for _, name := range names {
		out = append(out, m.jobs[name].copy())
	}
	return out
}

// JobsPage returns a copy of at most limit jobs whose names start with
// prefix and sort after after, in name order, and whether more follow.
// It serves a listing page by page: a million jobs are never copied at
// once.
func (m *Machine) JobsPage(prefix, after string, limit int) (page []Job, more bool) {
	names := m.sortedNames()
	from := max(after, prefix)
	i, _ := slices.BinarySearch(names, from)
	if i < len(names) && names[i] == after {
		i++
	}
	for ; i < len(names) && strings.HasPrefix(names[i], prefix); i++ {
		if len(page) == limit {
			return page, true
		}
		page = append(page, m.jobs[names[i]].copy())
	}
	return page, false
}

// OpenCount is the number of open launches, those of deleted jobs
// included: every launch started and not finished, which the counters
// give without a scan.
func (m *Machine) OpenCount() int {
	c := m.stats.Launches
	return int(c.Started - c.Dispatched - c.Failed - c.Skipped - c.Unknown)
}

// JobCount is the number of jobs.
func (m *Machine) JobCount() int { return len(m.jobs) }

// OpenLaunches returns every open launch, those of deleted jobs included,
// sorted by job, then scheduled time.
func (m *Machine) OpenLaunches() []Launch {
	out := slices.Clone(m.orphans)
	//detlint:maprange the result is sorted below
	for name := range m.withOpen {
		out = append(out, m.jobs[name].Open...)
	}
	slices.SortFunc(out, compareLaunch)
	return nilIfEmpty(out)
}

// OpenLaunch returns the job's open launch of kind for at, if any.
func (m *Machine) OpenLaunch(job string, at time.Time, kind LaunchKind) (Launch, bool) {
	j, ok := m.jobs[job]
	if !ok {
		return Launch{}, false
	}
	i, found := slices.BinarySearchFunc(j.Open, Launch{ScheduledAt: at.UTC(), Kind: kind}, compareOpen)
	if !found {
		return Launch{}, false
	}
	return j.Open[i], true
}

// Orphans returns the open launches of deleted jobs, sorted by job, then
// scheduled time.
func (m *Machine) Orphans() []Launch { return slices.Clone(m.orphans) }

// Schedule returns every job's next launch, for building the leader's
// heap, in no particular order: the heap orders them by (time, name).
// Jobs with no next launch are included with a zero NextAt.
func (m *Machine) Schedule() []scheduler.Entry {
	out := make([]scheduler.Entry, 0, len(m.jobs))
	//detlint:maprange the heap's order is total on (time, name), whatever the input order
	for name, j := range m.jobs {
		out = append(out, scheduler.Entry{Name: name, NextAt: j.NextAt})
	}
	return out
}

// JobNames returns every job's name, in order. The slice is shared and
// must not be modified; it stays as it is while the state changes (a
// later change makes a new one), so a caller may walk it over several
// steps, as the launcher does to build its heap.
func (m *Machine) JobNames() []string { return m.sortedNames() }

// NextAt returns job name's next scheduled launch (zero: none), and
// whether the job exists: Info's NextAt without the rest.
func (m *Machine) NextAt(name string) (time.Time, bool) {
	j, ok := m.jobs[name]
	if !ok {
		return time.Time{}, false
	}
	return j.NextAt, true
}

// DueBefore returns the jobs whose next launch is at or before t, sorted
// by (scheduled time, name). It scans every job and sorts the due ones:
// O(J + D log D) for J jobs of which D are due. The leader's scheduler
// will keep a heap instead (next slice); this stays the reference.
func (m *Machine) DueBefore(t time.Time) []Due {
	var out []Due
	//detlint:maprange the result is sorted below
	for _, j := range m.jobs {
		if j.NextAt.IsZero() || j.NextAt.After(t) {
			continue
		}
		out = append(out, Due{Job: j.Name, ScheduledAt: j.NextAt, Identity: Identity(j.Name, j.NextAt), SpecVersion: j.Version, Paused: j.Paused})
	}
	slices.SortFunc(out, compareDue)
	return out
}

// Stats returns the machine's counters.
func (m *Machine) Stats() Stats { return m.stats }

// Rejections returns the last MaxRejections refused commands, oldest first.
func (m *Machine) Rejections() []Rejection { return slices.Clone(m.rejections) }

// LastSlot is the slot of the last command applied (0 if none).
func (m *Machine) LastSlot() uint64 { return m.lastSlot }

// copy returns the job's state sharing no memory with it.
func (j *job) copy() Job {
	c := j.Job
	c.born = 0 // the Machine's business, not the caller's
	c.Spec = j.spec()
	c.Open = nilIfEmpty(slices.Clone(j.Open))
	c.History = j.hist.launches(j.Name, j.Spec.Target())
	for i := range c.History {
		// Not kept in the history (a string per launch, for a million
		// jobs); rebuilt for the caller.
		l := &c.History[i]
		l.Identity = LaunchIdentity(l.Job, l.ScheduledAt, l.Kind)
	}
	return c
}

// JobInfo is what the launcher needs of a job to launch it.
type JobInfo struct {
	Spec    JobSpec // with defaults filled in; a copy
	Version uint64
	// CreatedVersion tells this job from a deleted one of the same name:
	// a launch with an older SpecVersion was the deleted job's.
	CreatedVersion uint64
	Paused         bool
	NextAt         time.Time
	// LastChild is the child of the job's latest unforced launch
	// concluded dispatched, or the one a forbid skip since found running,
	// with where it was dispatched (its ID empty if none): the child the
	// forbid and replace policies look at.
	LastChild Child
	// FirstOpened is the identity of the job's open launch opened first
	// (the earliest scheduled of those opened together), "" if none: the
	// forbid and replace policies decide launches in the order they were
	// opened, one at a time.
	FirstOpened string
	// Content is ContentHash(Spec): an open launch whose Content differs
	// started under other content and must not be dispatched with this.
	Content uint64
}

// UnknownLaunch is a launch concluded unknown: its identity is the token
// its child, if any, carries in Nomad.
type UnknownLaunch struct {
	Identity    string
	ScheduledAt time.Time
	Kind        LaunchKind
	// Target is where the launch dispatched, so where its child is if
	// it exists: the job may have moved since.
	Target Target
}

// Unknown lists the named job's launches in its history (this
// incarnation's) that concluded unknown, oldest first: each may have a
// child in Nomad that the state never learnt of, which the forbid and
// replace policies look up and act on beside the last child (found in
// the simulator: a forbid job ran two children at once after one). Nil
// if none, or no such job.
func (m *Machine) Unknown(name string) []UnknownLaunch {
	j, ok := m.jobs[name]
	if !ok {
		return nil
	}
	var out []UnknownLaunch
	cur := j.Spec.Target()
	j.hist.each(func(e *histEntry) bool {
		if e.outcome == OutcomeUnknown && e.specVersion >= j.CreatedVersion {
			at := time.Unix(e.scheduled, 0).UTC()
			out = append(out, UnknownLaunch{Identity: LaunchIdentity(name, at, e.kind), ScheduledAt: at, Kind: e.kind, Target: e.targetIn(cur)})
		}
		return true
	})
	return out
}

// Info returns what the launcher needs of the named job, without copying
// its history.
func (m *Machine) Info(name string) (JobInfo, bool) {
	j, ok := m.jobs[name]
	if !ok {
		return JobInfo{}, false
	}
	info := JobInfo{Spec: j.spec(), Version: j.Version, CreatedVersion: j.CreatedVersion, Paused: j.Paused, NextAt: j.NextAt, Content: j.content()}
	info.LastChild = j.lastChild
	// j.Open is in scheduled order: the first opened is the one of the
	// lowest slot, the earliest scheduled among those.
	first := -1
	for i, l := range j.Open {
		if first < 0 || l.StartedSlot < j.Open[first].StartedSlot {
			first = i
		}
	}
	if first >= 0 {
		info.FirstOpened = j.Open[first].Identity
	}
	return info, true
}

// Term returns the term of the latest Takeover applied.
func (m *Machine) Term() Term { return m.term }

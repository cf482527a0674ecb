package state

import (
	"fmt"
	"time"
)

// Snapshot layout:
//
//	byte 0   snapshotVersion
//	bytes 1.. wireState, msgpack arrays as for commands
//
// Jobs are in name order, launches in scheduled-time order, rejections
// oldest first, and every collection is canonical (empty is nil), so two
// machines with the same state produce the same bytes. Restore checks
// every invariant Apply keeps and re-parses every schedule.
type wireState struct {
	LastSlot    uint64
	LastVersion uint64
	Stats       Stats
	Rejections  []wireRejection
	Jobs        []wireJob
	Orphans     []wireOrphan
	Tombstones  []wireTombstone // oldest first
}

// wireTombstone is a deleted job's last launch.
type wireTombstone struct {
	Name string
	Last wireTime
}

// wireOrphan is an open launch of a deleted job.
type wireOrphan struct {
	Job    string
	Launch wireLaunch
}

type wireRejection struct {
	Slot   uint64
	Kind   uint8
	Job    string
	Reason string
}

type wireJob struct {
	Name           string
	Spec           wireSpec
	Version        uint64
	CreatedVersion uint64
	Paused         bool
	CreatedAt      wireTime
	UpdatedAt      wireTime
	LastStartedAt  wireTime
	NextAt         wireTime
	Open           []wireLaunch
	History        []wireLaunch
	Counters       Counters
}

// wireLaunch omits what the job implies: its name and the identity.
type wireLaunch struct {
	ScheduledAt  wireTime
	SpecVersion  uint64
	StartedAt    wireTime
	StartedSlot  uint64
	FinishedSlot uint64
	Outcome      wireOutcome
	Target       Target // empty once finished
}

// Snapshot implements replica.StateMachine.
func (m *Machine) Snapshot() ([]byte, error) {
	w := wireState{LastSlot: m.lastSlot, LastVersion: m.lastVersion, Stats: m.stats}
	for _, r := range m.rejections {
		w.Rejections = append(w.Rejections, wireRejection{Slot: r.Slot, Kind: uint8(r.Kind), Job: r.Job, Reason: r.Reason})
	}
	for _, name := range m.sortedNames() {
		w.Jobs = append(w.Jobs, jobToWire(m.jobs[name]))
	}
	for _, l := range m.orphans {
		w.Orphans = append(w.Orphans, wireOrphan{Job: l.Job, Launch: launchToWire(l)})
	}
	for _, name := range m.tombOrder {
		w.Tombstones = append(w.Tombstones, wireTombstone{Name: name, Last: toWire(m.tombstones[name])})
	}
	return appendValue([]byte{snapshotVersion}, &w)
}

func jobToWire(j *job) wireJob {
	w := wireJob{
		Name: j.Name, Spec: specToWire(j.Spec), Version: j.Version, CreatedVersion: j.CreatedVersion,
		Paused: j.Paused, CreatedAt: toWire(j.CreatedAt), UpdatedAt: toWire(j.UpdatedAt),
		LastStartedAt: toWire(j.LastStartedAt), NextAt: toWire(j.NextAt), Counters: j.Counters,
	}
	w.Open = launchesToWire(j.Open)
	w.History = launchesToWire(j.History)
	return w
}

func launchesToWire(ls []Launch) []wireLaunch {
	var out []wireLaunch
	for _, l := range ls {
		out = append(out, launchToWire(l))
	}
	return out
}

func launchToWire(l Launch) wireLaunch {
	return wireLaunch{
		ScheduledAt: toWire(l.ScheduledAt), SpecVersion: l.SpecVersion, StartedAt: toWire(l.StartedAt),
		StartedSlot: l.StartedSlot, FinishedSlot: l.FinishedSlot,
		Outcome: wireOutcome{Kind: string(l.Outcome.Kind), ChildID: l.Outcome.ChildID, Reason: l.Outcome.Reason},
		Target:  l.Target,
	}
}

func snapshotErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSnapshot, fmt.Sprintf(format, args...))
}

// Restore implements replica.StateMachine. On error the machine is
// unchanged.
func (m *Machine) Restore(data []byte) error {
	switch {
	case len(data) < 1:
		return snapshotErr("empty")
	case data[0] != snapshotVersion:
		return snapshotErr("unknown format version %d", data[0])
	}
	var w wireState
	if err := decodeValue(data[1:], &w); err != nil {
		return snapshotErr("%v", err)
	}
	restored, err := machineFromWire(&w)
	if err != nil {
		return err
	}
	*m = *restored
	return nil
}

func machineFromWire(w *wireState) (*Machine, error) {
	m := &Machine{jobs: make(map[string]*job, len(w.Jobs)), tombstones: make(map[string]time.Time, len(w.Tombstones)),
		lastSlot: w.LastSlot, lastVersion: w.LastVersion, stats: w.Stats}
	if len(w.Rejections) > MaxRejections {
		return nil, snapshotErr("%d rejections, more than %d", len(w.Rejections), MaxRejections)
	}
	for i, r := range w.Rejections {
		if r.Slot == 0 || r.Slot > w.LastSlot || i > 0 && r.Slot <= w.Rejections[i-1].Slot {
			return nil, snapshotErr("rejection %d: slot %d out of order or past the last slot %d", i, r.Slot, w.LastSlot)
		}
		m.rejections = append(m.rejections, Rejection{Slot: r.Slot, Kind: Kind(r.Kind), Job: r.Job, Reason: r.Reason})
	}
	if len(w.Jobs) > MaxJobs {
		return nil, snapshotErr("%d jobs, more than %d", len(w.Jobs), MaxJobs)
	}
	for i := range w.Jobs {
		wj := &w.Jobs[i]
		if i > 0 && wj.Name <= w.Jobs[i-1].Name {
			return nil, snapshotErr("job %q out of order after %q", wj.Name, w.Jobs[i-1].Name)
		}
		j, err := jobFromWire(wj, w.LastSlot, w.LastVersion)
		if err != nil {
			return nil, snapshotErr("job %q: %v", wj.Name, err)
		}
		m.jobs[j.Name] = j
	}
	if len(w.Orphans) > MaxOrphans {
		return nil, snapshotErr("%d open launches of deleted jobs, more than %d", len(w.Orphans), MaxOrphans)
	}
	for i, o := range w.Orphans {
		l, err := launchFromWire(o.Job, o.Launch)
		if err != nil {
			return nil, snapshotErr("open launch of deleted job %q: %v", o.Job, err)
		}
		if err := checkOrphan(l, w.LastSlot, w.LastVersion); err != nil {
			return nil, snapshotErr("open launch %s of a deleted job: %v", l.Identity, err)
		}
		if i > 0 && compareLaunch(m.orphans[i-1], l) >= 0 {
			return nil, snapshotErr("open launch %s of a deleted job out of order", l.Identity)
		}
		m.orphans = append(m.orphans, l)
	}
	if len(w.Tombstones) > MaxTombstones {
		return nil, snapshotErr("%d tombstones, more than %d", len(w.Tombstones), MaxTombstones)
	}
	for _, t := range w.Tombstones {
		last, err := fromWire(t.Last)
		switch {
		case ValidName(t.Name) != nil:
			return nil, snapshotErr("tombstone: %v", ValidName(t.Name))
		case err != nil || validScheduledAt(last) != nil:
			return nil, snapshotErr("tombstone %q: invalid last launch", t.Name)
		}
		if _, dup := m.tombstones[t.Name]; dup {
			return nil, snapshotErr("tombstone %q twice", t.Name)
		}
		if _, live := m.jobs[t.Name]; live {
			return nil, snapshotErr("tombstone %q for a job that exists", t.Name)
		}
		m.tombstones[t.Name] = last
		m.tombOrder = append(m.tombOrder, t.Name)
	}
	return m, nil
}

func launchFromWire(name string, w wireLaunch) (Launch, error) {
	if err := ValidName(name); err != nil {
		return Launch{}, err
	}
	at, err := fromWire(w.ScheduledAt)
	if err != nil {
		return Launch{}, err
	}
	startedAt, err := fromWire(w.StartedAt)
	if err != nil {
		return Launch{}, err
	}
	return Launch{
		Job: name, ScheduledAt: at, Identity: Identity(name, at), SpecVersion: w.SpecVersion,
		StartedAt: startedAt, StartedSlot: w.StartedSlot, FinishedSlot: w.FinishedSlot,
		Outcome: Outcome{Kind: OutcomeKind(w.Outcome.Kind), ChildID: w.Outcome.ChildID, Reason: w.Outcome.Reason},
		Target:  w.Target,
	}, nil
}

func checkOrphan(l Launch, lastSlot, lastVersion uint64) error {
	switch {
	case validScheduledAt(l.ScheduledAt) != nil || validTime("start time", l.StartedAt) != nil:
		return fmt.Errorf("scheduled or start time invalid")
	case l.StartedSlot == 0 || l.StartedSlot > lastSlot:
		return fmt.Errorf("started slot %d outside 1-%d", l.StartedSlot, lastSlot)
	case l.FinishedSlot != 0 || l.Outcome != Outcome{}:
		return fmt.Errorf("open launch with an outcome")
	case l.Target.validate() != nil:
		return l.Target.validate()
	case l.SpecVersion == 0 || l.SpecVersion > lastVersion:
		return fmt.Errorf("spec version %d outside 1-%d", l.SpecVersion, lastVersion)
	}
	return nil
}

func jobFromWire(w *wireJob, lastSlot, lastVersion uint64) (*job, error) {
	if err := ValidName(w.Name); err != nil {
		return nil, err
	}
	spec, err := specFromWire(w.Spec)
	if err != nil {
		return nil, err
	}
	sched, err := spec.parse(w.Name)
	if err != nil {
		return nil, err
	}
	if spec.Concurrency == "" || spec.CatchupWindow == 0 {
		return nil, fmt.Errorf("spec without its defaults")
	}
	j := &job{Job: Job{Name: w.Name, Spec: spec, Version: w.Version, CreatedVersion: w.CreatedVersion, Paused: w.Paused, Counters: w.Counters}, sched: sched}
	if w.CreatedVersion == 0 || w.CreatedVersion > w.Version || w.Version > lastVersion {
		return nil, fmt.Errorf("versions %d-%d outside 1-%d", w.CreatedVersion, w.Version, lastVersion)
	}
	times := []struct {
		dst *time.Time
		src wireTime
	}{{&j.CreatedAt, w.CreatedAt}, {&j.UpdatedAt, w.UpdatedAt}, {&j.LastStartedAt, w.LastStartedAt}, {&j.NextAt, w.NextAt}}
	for _, t := range times {
		if *t.dst, err = fromWire(t.src); err != nil {
			return nil, err
		}
	}
	if err := j.checkTimes(); err != nil {
		return nil, err
	}
	if j.Open, err = launchesFromWire(j, w.Open, true, lastSlot); err != nil {
		return nil, fmt.Errorf("open launches: %w", err)
	}
	if j.History, err = launchesFromWire(j, w.History, false, lastSlot); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return j, nil
}

func (j *job) checkTimes() error {
	switch {
	case validTime("creation time", j.CreatedAt) != nil || validTime("update time", j.UpdatedAt) != nil:
		return fmt.Errorf("creation or update time out of range")
	case j.UpdatedAt.Before(j.CreatedAt) && j.Version == j.CreatedVersion:
		return fmt.Errorf("updated before it was created")
	case !j.LastStartedAt.IsZero() && validScheduledAt(j.LastStartedAt) != nil:
		return fmt.Errorf("last started time %v invalid", j.LastStartedAt)
	case !j.NextAt.IsZero() && (!j.NextAt.After(j.CreatedAt) || !j.NextAt.After(j.LastStartedAt)):
		return fmt.Errorf("next launch %v not after the creation and the last launch", j.NextAt)
	}
	return nil
}

func launchesFromWire(j *job, ws []wireLaunch, open bool, lastSlot uint64) ([]Launch, error) {
	limit := HistoryLen
	if open {
		limit = MaxOpenLaunches
	}
	if len(ws) > limit {
		return nil, fmt.Errorf("%d launches, more than %d", len(ws), limit)
	}
	var out []Launch
	for i, w := range ws {
		l, err := launchFromWire(j.Name, w)
		if err != nil {
			return nil, err
		}
		at := l.ScheduledAt
		if err := checkLaunch(j, l, open, lastSlot); err != nil {
			return nil, fmt.Errorf("launch %s: %w", l.Identity, err)
		}
		if open && i > 0 && !at.After(out[i-1].ScheduledAt) {
			return nil, fmt.Errorf("launch %s out of order", l.Identity)
		}
		out = append(out, l)
	}
	return out, nil
}

func checkLaunch(j *job, l Launch, open bool, lastSlot uint64) error {
	switch {
	case validScheduledAt(l.ScheduledAt) != nil || l.ScheduledAt.After(j.LastStartedAt):
		return fmt.Errorf("scheduled time invalid or after the last started %v", j.LastStartedAt)
	case validTime("start time", l.StartedAt) != nil:
		return fmt.Errorf("start time %v invalid", l.StartedAt)
	case l.StartedSlot == 0 || l.StartedSlot > lastSlot:
		return fmt.Errorf("started slot %d outside 1-%d", l.StartedSlot, lastSlot)
	case open && (l.FinishedSlot != 0 || l.Outcome != Outcome{}):
		return fmt.Errorf("open launch with an outcome")
	case open && l.Target.validate() != nil:
		return l.Target.validate()
	case !open && l.Target != Target{}:
		return fmt.Errorf("finished launch with a target")
	case !open && (l.FinishedSlot <= l.StartedSlot || l.FinishedSlot > lastSlot):
		return fmt.Errorf("finished slot %d not in %d-%d", l.FinishedSlot, l.StartedSlot+1, lastSlot)
	case !open && l.Outcome.validate() != nil:
		return l.Outcome.validate()
	case (l.SpecVersion < j.CreatedVersion || l.SpecVersion > j.Version):
		return fmt.Errorf("spec version %d not in %d-%d", l.SpecVersion, j.CreatedVersion, j.Version)
	}
	return nil
}

package state

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"paxcron/cron/schedule"
	"paxcron/internal/mapshrink"
)

// Bounds on the state.
const (
	// HistoryLen is how many finished launches each job keeps, newest last.
	HistoryLen = 10
	// MaxRejections is how many rejected commands the state remembers.
	MaxRejections = 32
	// MaxJobs bounds the number of jobs. A snapshot of a million jobs is
	// larger than one paxos message may be (64 MiB): until snapshots are
	// sent in chunks, a follower that falls behind such a state catches
	// up only from entries (DESIGN.md).
	MaxJobs = 1_000_000
	// MaxOpenLaunches bounds the open launches of one job.
	MaxOpenLaunches = 64
	// MaxTombstones bounds how many deleted jobs' last launch times the
	// state remembers (the oldest is forgotten first).
	MaxTombstones = 4096
	// MaxOrphans bounds the open launches of deleted jobs; a DeleteJob
	// that would pass it is refused (ErrLimit) until the leader concludes
	// some.
	MaxOrphans = 4096
	// MaxSpecBytes bounds the bytes of the specs the state holds (see
	// SpecBytes): a PutJob that would pass it is refused (ErrLimit), and
	// one that shrinks them is not. It keeps a snapshot under the 1 GiB a
	// replica takes from a peer (paxos.Limits.MaxSnapshotBytes): a million
	// jobs take about 180 MiB besides their specs (DESIGN.md, "Limits").
	MaxSpecBytes = 512 << 20
	// MaxOpenLaunchesTotal bounds the open launches of all jobs, deleted
	// ones included: each holds about 350 bytes of memory on every
	// replica and 40 in a snapshot, and a million jobs at MaxOpenLaunches
	// each would hold 22 GB. A start, trigger or backfill past it is
	// refused (ErrLimit, ErrAllOpen) until launches conclude; the
	// launcher waits for room rather than propose starts to be refused.
	MaxOpenLaunchesTotal = 1_000_000
	// MaxHistoryReasonBytes bounds the bytes of the reasons all jobs'
	// histories keep (see HistoryReasonBytes). A conclusion past it keeps
	// its outcome, first taking the reasons off its job's older entries
	// and then, if there is still no room, keeping none of its own: a
	// Nomad outage of ten periods, each failure explained in 100 bytes,
	// would give a million jobs a gigabyte of reasons, and a snapshot
	// over the 1 GiB a replica takes from a peer.
	MaxHistoryReasonBytes = 32 << 20
)

// Limits are the state's limits that the simulator and tests lower to
// reach them. They decide which commands are refused, so every replica of
// a cluster must hold the same; a restore keeps the machine's own.
type Limits struct {
	SpecBytes       int // MaxSpecBytes
	OpenLaunches    int // MaxOpenLaunchesTotal
	OpenLaunchesJob int // MaxOpenLaunches, at most
	HistoryReasons  int // MaxHistoryReasonBytes
}

// DefaultLimits are the limits New gives.
func DefaultLimits() Limits {
	return Limits{SpecBytes: MaxSpecBytes, OpenLaunches: MaxOpenLaunchesTotal, OpenLaunchesJob: MaxOpenLaunches, HistoryReasons: MaxHistoryReasonBytes}
}

func (l Limits) validate() error {
	switch {
	case l.SpecBytes <= 0 || l.OpenLaunches <= 0 || l.OpenLaunchesJob <= 0 || l.HistoryReasons <= 0:
		return fmt.Errorf("state: limits %+v: each must be positive", l)
	case l.OpenLaunchesJob > MaxOpenLaunches:
		// A snapshot holds no more (its reader's bound).
		return fmt.Errorf("state: limits %+v: at most %d launches open per job", l, MaxOpenLaunches)
	}
	return nil
}

// Counters count launches, for one job or for the whole state.
// Counters is part of the snapshot format: adding a field is a format change.
type Counters struct {
	Started    uint64
	Dispatched uint64
	Failed     uint64
	Skipped    uint64
	Unknown    uint64
	// Duplicates counts LaunchStarted and LaunchFinished commands ignored
	// because that launch was already started or finished.
	Duplicates uint64
}

// Stats counts what the machine applied. It is part of the snapshot format.
type Stats struct {
	Launches Counters
	// Applied counts commands that changed the state.
	Applied uint64
	// Rejected counts decoded commands refused (see Rejection).
	Rejected uint64
	// Undecodable counts log entries that did not decode to a valid
	// command (Decode failed: ErrDecode or ErrInvalid).
	Undecodable uint64
	// Stale counts commands from replaced leaders (ErrStale), ignored.
	Stale uint64
}

// Rejection records a command Apply refused.
type Rejection struct {
	Slot   uint64
	Kind   Kind // 0 for bytes that did not decode
	Job    string
	Reason string
}

// Launch is one launch of a job: open until its Outcome is set.
type Launch struct {
	Job         string
	ScheduledAt time.Time
	Identity    string
	SpecVersion uint64
	StartedAt   time.Time // LaunchStarted.At: the leader's clock when it proposed it
	// Kind says why it exists; Force that a manual or backfilled launch
	// ignores the job's pause and concurrency policy.
	Kind  LaunchKind
	Force bool
	// Target is where the launch goes in Nomad, fixed when it starts: a
	// lookup after the job was edited or deleted searches the scope its
	// dispatch used. Kept while the launch is open, and in the history
	// for a launch concluded unknown, whose child may be there; zero in
	// the history otherwise.
	Target Target
	// Content is ContentHash of the payload and meta the launch
	// dispatches (DispatchContent), both fixed when it starts: every
	// attempt under its identity, a retry's or a new leader's, sends the
	// same thing, whatever edits the job meanwhile. Kept while the launch
	// is open; zero in the history.
	Content uint64
	// AtLeastOnce is the job's JobSpec.AtLeastOnce when the launch
	// started: the choice the launch is held to. Kept while open.
	AtLeastOnce bool
	// payload and meta alias the job's spec of SpecVersion (immutable).
	payload      []byte
	meta         []wireKV
	StartedSlot  uint64
	FinishedSlot uint64  // 0 while open
	Outcome      Outcome // zero while open
}

// Job is a copy of one job's state.
type Job struct {
	Name string
	Spec JobSpec // with defaults filled in
	// Version is the job's current version, CreatedVersion the version it
	// was created with; both come from the state-wide version counter.
	Version        uint64
	CreatedVersion uint64
	Paused         bool
	// born is the Machine's epoch when the job's struct was made (see
	// writable); unexported, and here rather than in job, where it would
	// take a size class more per job than in Paused's padding.
	born      uint32
	CreatedAt time.Time // At of the PutJob that created it
	UpdatedAt time.Time // At of the latest PutJob
	// LastStartedAt is the latest ScheduledAt a launch was started for,
	// or a schedule edit recorded skipped (ReasonSuperseded), zero if
	// none; launches at or before it are duplicates.
	LastStartedAt time.Time
	// NextAt is the schedule's first launch after the latest of
	// CreatedAt, LastStartedAt and the point the last schedule edit
	// counts from (EditFrom); zero if the schedule has none within
	// schedule.SearchYears of it (the job has ended).
	NextAt time.Time
	// LastTriggeredAt is the time of the latest manual launch, zero if
	// none; a Trigger at or before it is a duplicate.
	LastTriggeredAt time.Time
	Open            []Launch // by (ScheduledAt, Kind)
	History         []Launch // finished, oldest first, at most HistoryLen
	Counters        Counters
}

// job is a Job plus its parsed schedule.
type job struct {
	Job // Spec.Meta is always nil: meta holds it
	// meta is the spec's meta in key order, shared with the snapshot's
	// encoding and read from it on restore without a map per job.
	meta []wireKV
	// hist is the history, packed; Job.History is always nil here.
	hist  history
	sched *schedule.Schedule
	// lastChild is the child of the latest unforced launch concluded
	// dispatched, or the child a later forbid skip found still running
	// (one of a launch concluded unknown), kept when it leaves the
	// history (a child of a forbid job may run for longer than
	// HistoryLen slots) and with the target it was dispatched to (the
	// spec's may have moved since). A forced launch's child is not: the
	// launch ignored the policy, which keeps watching the child it knew
	// (found by the simulator: a forced child in its place, the forbid
	// policy asked about it alone and started a second child beside the
	// one before).
	lastChild Child
}

// content is ContentHash of the job's spec.
func (j *job) content() uint64 { return contentHash(j.Spec.Payload, j.meta) }

// contentBytes is what one spec version's content and target take: what
// an open launch of it dispatches, and where.
func contentBytes(payload []byte, meta []wireKV, t Target) int {
	n := len(payload) + len(t.NomadJob) + len(t.Namespace) + len(t.Region)
	for _, kv := range meta {
		n += len(kv.Key) + len(kv.Value)
	}
	return n
}

// specBytes is what a job with this spec, meta, version and open launches
// holds: its spec, and the content of each older version its open
// launches dispatch, once (as a snapshot writes them).
func specBytes(name string, spec *JobSpec, meta []wireKV, version uint64, open []Launch) int {
	return len(name) + len(spec.Schedule) + len(spec.TimeZone) + contentBytes(spec.Payload, meta, spec.Target()) + versionBytes(open, version)
}

// SpecBytes is what the jobs' specs take, as MaxSpecBytes counts it: each
// job's name, schedule, zone, payload, meta keys and values and Nomad
// target, and those of every older spec version an open launch, of a job
// or of a deleted one, still dispatches, once per version.
func (m *Machine) SpecBytes() int { return m.specBytes }

// countSpecBytes is SpecBytes counted afresh, from every job and orphan.
func (m *Machine) countSpecBytes() int {
	n := 0
	//detlint:maprange a sum, whatever the order
	for _, j := range m.jobs {
		n += j.heldBytes()
	}
	for i := 0; i < len(m.orphans); {
		run := m.orphansOf(m.orphans[i].Job)
		n += versionBytes(run, 0)
		i += len(run)
	}
	return n
}

// CheckKept reports whether the figures kept as commands apply, which
// decide what the limits refuse or drop, are what counting every job and
// orphan gives: SpecBytes, HistoryReasonBytes and OpenCount. A check for tests and the simulator,
// which takes a walk of the whole state.
func (m *Machine) CheckKept() error {
	if kept, counted := m.specBytes, m.countSpecBytes(); kept != counted {
		return fmt.Errorf("state: spec bytes kept %d, counted %d", kept, counted)
	}
	if kept, counted := m.historyReasons, m.countHistoryReasons(); kept != counted {
		return fmt.Errorf("state: history reason bytes kept %d, counted %d", kept, counted)
	}
	counted := len(m.orphans)
	//detlint:maprange a sum
	for name := range m.withOpen {
		counted += len(m.jobs[name].Open)
	}
	if kept := m.OpenCount(); kept != counted {
		return fmt.Errorf("state: open launches kept %d, counted %d", kept, counted)
	}
	return nil
}

// HistoryReasonBytes is the bytes of the reasons all jobs' histories
// keep, which MaxHistoryReasonBytes (Limits.HistoryReasons) bounds.
func (m *Machine) HistoryReasonBytes() int { return m.historyReasons }

func (m *Machine) countHistoryReasons() int {
	n := 0
	//detlint:maprange a sum, whatever the order
	for _, j := range m.jobs {
		n += j.hist.reasonBytes()
	}
	return n
}

// record adds l, just concluded, to j's history within the limit on the
// histories' reasons: past it, the reasons of j's older entries go first
// (an operator reads the newest first), then l's own. The outcome is
// kept whatever happens to its reason.
func (m *Machine) record(j *job, l *Launch) {
	cur := j.Spec.Target()
	others := m.historyReasons - j.hist.reasonBytes()
	h := j.hist.add(l, j.Name, cur)
	if others+h.reasonBytes() > m.limits.HistoryReasons {
		bare := j.hist.withoutReasons(j.Name, cur)
		if others+len(l.Outcome.Reason) > m.limits.HistoryReasons {
			unexplained := *l
			unexplained.Outcome.Reason = ""
			l = &unexplained
		}
		h = bare.add(l, j.Name, cur)
	}
	m.historyReasons = others + h.reasonBytes()
	j.hist = h
}

// heldBytes is specBytes of the job as it is.
func (j *job) heldBytes() int { return specBytes(j.Name, &j.Spec, j.meta, j.Version, j.Open) }

// versionBytes is the content of the spec versions launches dispatch,
// each once, but skip's (0 skips none: versions start at 1).
func versionBytes(launches []Launch, skip uint64) int {
	n := 0
	for i := range launches {
		if l := &launches[i]; l.SpecVersion != skip && heldBefore(launches[:i], l.SpecVersion) == nil {
			n += contentBytes(l.payload, l.meta, l.Target)
		}
	}
	return n
}

// heldBefore returns the first of launches of spec version v, nil if none:
// the one that carries that version's content in a snapshot.
func heldBefore(launches []Launch, v uint64) *Launch {
	for i := range launches {
		if launches[i].SpecVersion == v {
			return &launches[i]
		}
	}
	return nil
}

// orphansOf returns the open launches of the deleted jobs named name: a
// run of the orphans, which are sorted by job.
func (m *Machine) orphansOf(name string) []Launch {
	i, _ := slices.BinarySearchFunc(m.orphans, Launch{Job: name}, compareLaunch)
	end := i
	for end < len(m.orphans) && m.orphans[end].Job == name {
		end++
	}
	return m.orphans[i:end]
}

// unknownChildTarget returns the target of the unknown launch in j's
// history that child was dispatched for (Nomad prefixes a dispatched
// child's ID with its parent and the launch identity), or otherwise. A
// scheduled or backfilled launch's prefix also begins the children of
// the manual launch of the same second ("<identity>-manual-"), which
// are not its own.
func (j *job) unknownChildTarget(child string, otherwise Target) Target {
	cur, found := j.Spec.Target(), otherwise
	j.hist.each(func(e *histEntry) bool {
		t := e.targetIn(cur)
		rest, ok := strings.CutPrefix(child, childPrefix(t.NomadJob, j.Name, e.scheduled, e.kind))
		if e.outcome == OutcomeUnknown && ok && (e.kind == LaunchManual || !strings.HasPrefix(rest, "manual-")) {
			found = t
			return false
		}
		return true
	})
	return found
}

// spec returns a copy of the job's spec, meta included.
func (j *job) spec() JobSpec {
	s := j.Spec.normalized()
	s.Meta = metaMap(j.meta)
	return s
}

// Machine is the replicated cron state: the replica.StateMachine of a
// paxcron replica. It is deterministic and not safe for concurrent use.
type Machine struct {
	jobs        map[string]*job
	lastSlot    uint64
	lastVersion uint64
	stats       Stats
	rejections  []Rejection // oldest first, at most MaxRejections
	// orphans are the open launches of deleted jobs, by (job, scheduled
	// time); LaunchFinished still concludes them.
	orphans []Launch
	// tombstones remember, by name, the last launches a deleted job
	// started and was triggered for; tombOrder holds the names oldest
	// first, for eviction.
	tombstones map[string]tombstone
	tombOrder  []string
	// term is the latest Takeover applied.
	term Term
	// clusterID is the cluster's name (SetClusterID), zero until set.
	clusterID ClusterID
	// specBytes is SpecBytes, kept as commands apply (countSpecBytes
	// counts it afresh).
	specBytes int
	// historyReasons is HistoryReasonBytes, kept as launches conclude
	// (countHistoryReasons counts it afresh).
	historyReasons int
	limits         Limits
	// names caches the job names in order for snapshots, which a million
	// jobs would otherwise sort each time: added holds names created since
	// (merged in at the next use), and deleted the names deleted since
	// (dropped then, unless created again).
	names   []string
	added   []string
	deleted map[string]struct{}
	// withOpen holds the names of the jobs with an open launch, so that
	// OpenLaunches (a new leader's takeover) does not walk every job: a
	// million of them took about 80 ms (BenchmarkTakeoverReads).
	withOpen map[string]struct{}
	// jobsPeak and withOpenPeak track the peaks of jobs and withOpen,
	// which are rebuilt when they fall far below (a Go map never shrinks:
	// a million jobs made and nearly all deleted kept the memory of a
	// million). A rebuilt map holds the same entries: no replica's state
	// differs by it, whenever it happens.
	jobsPeak, withOpenPeak mapshrink.Peak
	// snapshotSize is the size of the last snapshot taken or restored,
	// and snapshotJobs its jobs, which size the next one's buffer, scaled
	// by the jobs since: growing a buffer of hundreds of MiB by doubling
	// copies it several times over, and a state that doubled since the
	// last snapshot (the snapshot policy waits for a log as large as the
	// state) grew it once, a copy of the whole image, at every snapshot.
	// A snapshot encoded off the replica's thread reports its size and
	// jobs through encodedSize and encodedJobs.
	snapshotSize, snapshotJobs int
	encodedSize, encodedJobs   *atomic.Int64
	// epoch counts FreezeSnapshot calls: a job born (Job.born) before it
	// may be shared with a frozen snapshot, and is copied on write.
	epoch uint32
	// inRestoreMemory says the jobs may still sit in the slabs and chunks
	// a restore cut them from (DecodeSnapshot), which stay alive while any
	// of their jobs does: the first rebuild of the job map far below its
	// peak moves them out (leaveRestoreMemory).
	inRestoreMemory bool
	// restoreMoves counts leaveRestoreMemory's calls.
	restoreMoves uint64
}

// New returns an empty Machine with DefaultLimits.
func New() *Machine {
	return &Machine{jobs: make(map[string]*job), tombstones: make(map[string]tombstone), withOpen: map[string]struct{}{}, encodedSize: new(atomic.Int64), encodedJobs: new(atomic.Int64),
		limits: DefaultLimits()}
}

// NewWithLimits returns an empty Machine with limits, which every replica
// of the cluster must share.
func NewWithLimits(limits Limits) (*Machine, error) {
	if err := limits.validate(); err != nil {
		return nil, err
	}
	m := New()
	m.limits = limits
	return m, nil
}

// SetMapShrinkFloor sets the size its job maps must have reached before
// they are rebuilt once far below it (mapshrink); 0 is mapshrink.Floor.
// The simulator's few jobs need a small one to be rebuilt at all. A
// rebuild changes no entry, so replicas may differ in it.
func (m *Machine) SetMapShrinkFloor(floor int) {
	m.jobsPeak.Floor, m.withOpenPeak.Floor = floor, floor
}

// RestoreMoves counts the times the jobs moved out of a restore's memory
// (at the job map's first rebuild after it).
func (m *Machine) RestoreMoves() uint64 { return m.restoreMoves }

// MapRebuilds counts the job maps rebuilt far below their peak.
func (m *Machine) MapRebuilds() uint64 { return m.jobsPeak.Rebuilds + m.withOpenPeak.Rebuilds }

// Limits returns the machine's limits.
func (m *Machine) Limits() Limits { return m.limits }

// OpenRoom is how many more launches the state opens before it refuses
// with ErrAllOpen; 0 or less when full (a state restored over a lowered
// limit may hold more).
func (m *Machine) OpenRoom() int { return m.limits.OpenLaunches - m.OpenCount() }

// roomFor refuses n launches more past the limit of all jobs'; none
// needs no room, even in a state over a lowered limit.
func (m *Machine) roomFor(n int, job string) error {
	if room := m.OpenRoom(); n > 0 && n > room {
		return fmt.Errorf("%w: %w: %d open of %d, no room for %d more of job %q", ErrLimit, ErrAllOpen, m.OpenCount(), m.limits.OpenLaunches, n, job)
	}
	return nil
}

// writable returns j ready to be changed: j itself, or, if a frozen
// snapshot may hold it, a copy that replaces it in the state (the copy
// shares only what no apply changes in place: strings, the packed
// history, meta, payload and the parsed schedule).
func (m *Machine) writable(j *job) *job {
	if j.born == m.epoch {
		return j
	}
	c := j.reborn(m.epoch)
	m.jobs[c.Name] = c
	return c
}

// reborn returns a copy of j born in epoch, which shares with j only what
// no apply changes in place: j stays as a frozen snapshot may hold it.
func (j *job) reborn(epoch uint32) *job {
	c := *j
	c.Open = slices.Clone(j.Open)
	c.born = epoch
	return &c
}

// Apply implements replica.StateMachine: it decodes cmd and applies it.
// Bytes that do not decode to a valid command are counted
// (Stats.Undecodable), remembered as
// a Rejection of kind 0, and otherwise ignored; every replica ignores them
// identically, since they come from the replicated log.
func (m *Machine) Apply(slot uint64, cmd []byte) {
	c, err := Decode(cmd)
	if err != nil {
		m.advanceSlot(slot)
		m.stats.Undecodable++
		m.reject(Rejection{Slot: slot, Reason: err.Error()})
		return
	}
	_ = m.ApplyCommand(slot, c) // the outcome is recorded in the state
}

// ApplyCommand applies a decoded command chosen at slot and returns why it
// was refused, if it was: an error wrapping ErrInvalid, ErrConflict,
// ErrNotFound or ErrLimit (counted in Stats.Rejected and kept in
// Rejections), ErrDuplicate (counted in the launch counters' Duplicates
// for a launch; a SetClusterID of the ID set is not counted) or ErrStale
// (counted in Stats.Stale). A refused command leaves the state otherwise
// unchanged.
// Slots must increase from call to call.
func (m *Machine) ApplyCommand(slot uint64, c Command) error {
	m.advanceSlot(slot)
	err := c.Validate()
	if err == nil {
		err = m.dispatch(slot, c)
	}
	m.keepJobs()
	m.withOpen = mapshrink.Keep(m.withOpen, &m.withOpenPeak)
	switch {
	case err == nil:
		m.stats.Applied++
	case errors.Is(err, ErrDuplicate):
	case errors.Is(err, ErrStale):
		m.stats.Stale++
	default:
		m.stats.Rejected++
		m.reject(Rejection{Slot: slot, Kind: c.Kind(), Job: JobOf(c), Reason: err.Error()})
	}
	return err
}

// keepJobs rebuilds the job map once far below its peak (mapshrink), and
// at the first such rebuild after a restore also moves the jobs out of
// the restore's memory: the same moment, for the same reason.
func (m *Machine) keepJobs() {
	rebuilds := m.jobsPeak.Rebuilds
	m.jobs = mapshrink.Keep(m.jobs, &m.jobsPeak)
	if m.inRestoreMemory && m.jobsPeak.Rebuilds != rebuilds {
		m.leaveRestoreMemory()
	}
}

func (m *Machine) advanceSlot(slot uint64) {
	if slot <= m.lastSlot {
		panic(fmt.Sprintf("state: applying slot %d after slot %d", slot, m.lastSlot))
	}
	m.lastSlot = slot
}

func (m *Machine) dispatch(slot uint64, c Command) error {
	switch c := c.(type) {
	case PutJob:
		return m.putJob(slot, c)
	case DeleteJob:
		return m.deleteJob(c)
	case Pause:
		return m.setPaused(c.Name, true)
	case Resume:
		return m.setPaused(c.Name, false)
	case LaunchStarted:
		return m.launchStarted(slot, c)
	case LaunchFinished:
		return m.launchFinished(slot, c)
	case Trigger:
		return m.trigger(slot, c)
	case Backfill:
		return m.backfill(slot, c)
	case Takeover:
		if c.Term.Compare(m.term) <= 0 {
			return fmt.Errorf("%w: takeover by %s after %s's", ErrStale, c.Term, m.term)
		}
		m.term = c.Term
		return nil
	case SetClusterID:
		return m.setClusterID(c)
	}
	panic(fmt.Sprintf("state: unknown command type %T", c))
}

// JobOf returns the name of the job c is about ("" for Takeover and
// SetClusterID).
func JobOf(c Command) string {
	switch c := c.(type) {
	case PutJob:
		return c.Name
	case DeleteJob:
		return c.Name
	case Pause:
		return c.Name
	case Resume:
		return c.Name
	case LaunchStarted:
		return c.Job
	case LaunchFinished:
		return c.Job
	case Trigger:
		return c.Name
	case Backfill:
		return c.Name
	}
	return ""
}

func (m *Machine) reject(r Rejection) {
	if len(m.rejections) == MaxRejections {
		m.rejections = slices.Delete(m.rejections, 0, 1)
	}
	m.rejections = append(m.rejections, r)
}

func (m *Machine) putJob(slot uint64, c PutJob) error {
	sched, err := c.Spec.parseSchedule(c.Name) // validated already; the memo has it
	if err != nil {
		return err
	}
	spec := c.Spec
	spec.Meta = nil
	spec = spec.normalized()
	meta := metaPairs(c.Spec.Meta)
	j, exists := m.jobs[c.Name]
	before := 0
	var open []Launch
	if exists {
		j = m.writable(j)
		before, open = j.heldBytes(), j.Open
	}
	after := specBytes(c.Name, &spec, meta, m.lastVersion+1, open)
	switch {
	case !exists && c.IfVersion != 0:
		return fmt.Errorf("%w: job %q does not exist (if-version %d)", ErrConflict, c.Name, c.IfVersion)
	case exists && c.IfVersion != j.Version:
		return fmt.Errorf("%w: job %q is at version %d, not %d", ErrConflict, c.Name, j.Version, c.IfVersion)
	case !exists && len(m.jobs) >= MaxJobs:
		return fmt.Errorf("%w: %d jobs", ErrLimit, MaxJobs)
	case after > before && m.specBytes-before+after > m.limits.SpecBytes:
		return fmt.Errorf("%w: job %q: the jobs' specs would take %d bytes, more than the %d the state holds; delete jobs, or shrink payloads and meta",
			ErrLimit, c.Name, m.specBytes-before+after, m.limits.SpecBytes)
	}
	m.lastVersion++
	at := c.At.UTC()
	if !exists {
		// A job re-created under the name of a deleted one counts from the
		// last launch its namesake started, as if it had been created then
		// and had started it: no launch of the new job, scheduled or
		// backfilled (a backfill walks slots from CreatedAt), can share an
		// identity (hence a Nomad idempotency token) with one of the old,
		// whatever the clocks of the writer and the leader said.
		ts, reused := m.namesake(c.Name)
		if reused && ts.started.After(at) {
			at = ts.started
		}
		j = &job{Job: Job{Name: c.Name, CreatedVersion: m.lastVersion, CreatedAt: at, born: m.epoch}}
		if reused {
			// Kept even when the new job was created later, so that
			// deleting it before its first launch buries them again: a
			// third incarnation created by a writer whose clock lags
			// must count from them too.
			j.LastStartedAt, j.LastTriggeredAt = ts.started, ts.triggered
			m.forget(c.Name)
		}
		m.jobs[c.Name] = j
		m.added = append(m.added, c.Name)
	}
	j.hist = j.hist.repack(c.Name, j.Spec.Target(), spec.Target())
	rescheduled := exists && (spec.Schedule != j.Spec.Schedule || spec.TimeZone != j.Spec.TimeZone)
	oldNext, oldVersion := j.NextAt, j.Version
	j.Spec, j.meta = spec, meta
	j.sched = sched
	j.Version = m.lastVersion
	j.UpdatedAt = at
	switch {
	case !exists:
		j.recompute(time.Time{})
	case rescheduled:
		m.reschedule(slot, j, at, oldNext, oldVersion)
	}
	m.specBytes += after - before
	return nil
}

// reschedule sets NextAt for j's new schedule (or zone), put at time at
// by the PutJob at slot over a schedule whose next launch was oldNext,
// under spec version oldVersion. When the old schedule already owed
// oldNext by then and the new one has no launch at that instant, the
// slot is recorded as skipped (supersede): counting the new schedule
// from just before it (EditFrom) would otherwise owe the new schedule's
// slots from there on and leave that one, due and never started, with
// no record at all.
func (m *Machine) reschedule(slot uint64, j *job, at, oldNext time.Time, oldVersion uint64) {
	owed := !oldNext.IsZero() && !oldNext.After(at)
	if owed && !j.launchesAt(oldNext) {
		m.supersede(slot, j, oldNext, at, oldVersion)
	}
	// After a supersede LastStartedAt is oldNext, so the new schedule
	// owes its slots after it: the same ones as from just before it,
	// which it does not have.
	j.recompute(EditFrom(at, oldNext))
}

// launchesAt reports whether j's schedule has a launch at t, a whole
// second.
func (j *job) launchesAt(t time.Time) bool {
	next, ok := j.sched.Next(t.Add(-time.Second))
	return ok && next.Equal(t)
}

// supersede records slot due of j, owed by its old schedule (of spec
// version oldVersion) when the PutJob at slot, edited at time edited,
// gave it a schedule without it, as a scheduled launch concluded
// skipped, with ReasonSuperseded. It counts as started and skipped, as a
// skip the launcher records does (OpenCount is the difference of the
// two), and it moves LastStartedAt to due, so that a start of it
// proposed under the old schedule is refused as a duplicate. The entry
// was opened by no slot; its started slot is the one before the edit's,
// since a history entry's finished slot follows its started one.
func (m *Machine) supersede(slot uint64, j *job, due, edited time.Time, oldVersion uint64) {
	if slot < 2 || !due.After(j.LastStartedAt) {
		// The job was created at an earlier slot; NextAt follows LastStartedAt.
		panic(fmt.Sprintf("state: job %q: superseding slot %s at log slot %d, its last launch %s",
			j.Name, due.Format(time.RFC3339), slot, j.LastStartedAt.Format(time.RFC3339)))
	}
	l := Launch{Job: j.Name, ScheduledAt: due, SpecVersion: oldVersion, StartedAt: edited, StartedSlot: slot - 1, FinishedSlot: slot,
		Outcome: Outcome{Kind: OutcomeSkipped, Reason: ReasonSuperseded(edited, j.Version)}}
	m.record(j, &l)
	j.LastStartedAt = due
	j.Counters.Started++
	j.Counters.count(OutcomeSkipped)
	m.stats.Launches.Started++
	m.stats.Launches.count(OutcomeSkipped)
}

// ReasonSuperseded is the reason of a scheduled launch recorded skipped
// because a schedule edit, put at time edited as spec version version,
// came after the launch was due and before it started, and the new
// schedule has no launch at its time (see EditFrom).
func ReasonSuperseded(edited time.Time, version uint64) string {
	return fmt.Sprintf("superseded: the schedule was edited at %s (version %d), after this launch came due and before it started",
		edited.UTC().Format(time.RFC3339Nano), version)
}

// recompute sets NextAt from the schedule: its first launch after the
// latest of CreatedAt, LastStartedAt and edited (a schedule edit's point,
// EditFrom; zero for none).
func (j *job) recompute(edited time.Time) {
	from := laterOf(laterOf(j.CreatedAt, j.LastStartedAt), edited)
	next, ok := j.sched.Next(from)
	if !ok || next.Unix() > maxUnixSeconds {
		// Past the last second a command or snapshot can hold, the
		// schedule ends: a NextAt in year 10000 would make every later
		// snapshot unrestorable.
		j.NextAt = time.Time{}
		return
	}
	j.NextAt = next.UTC()
}

// EditFrom returns the time a new schedule (or zone) put at time at
// counts its launches from, the old schedule's next launch having been
// oldNext (zero for none): the edit, or, when the old schedule already
// owed a launch by then, just before that launch, so that the new
// schedule owes its own launches from there on (launched late, or
// skipped past their catch-up window, never dropped). That launch itself
// is the new schedule's if it has one at that instant; if not, the edit
// records it skipped (ReasonSuperseded), and the new schedule counts
// from it. A launch of the new schedule before both was on no schedule
// the job had at the time: counted from the last launch (or the
// creation), an edit of a yearly job to every 5 minutes owed, and
// skipped as missed, every 5 minutes back to it. The state counts from
// no earlier than the job's creation and last launch whatever at says (a
// writer's clock may lag). Launches are whole seconds: the second before
// oldNext has none.
func EditFrom(at, oldNext time.Time) time.Time {
	if !oldNext.IsZero() && !oldNext.After(at) {
		return oldNext.Add(-time.Second)
	}
	return at
}

// lookup returns the named job, writable: its callers change it.
func (m *Machine) lookup(name string) (*job, error) {
	j, ok := m.jobs[name]
	if !ok {
		return nil, fmt.Errorf("%w: job %q", ErrNotFound, name)
	}
	return m.writable(j), nil
}

func (m *Machine) deleteJob(c DeleteJob) error {
	j, ok := m.jobs[c.Name] // read only: a frozen snapshot may hold it
	if !ok {
		return fmt.Errorf("%w: job %q", ErrNotFound, c.Name)
	}
	if c.IfVersion != 0 && c.IfVersion != j.Version {
		return fmt.Errorf("%w: job %q is at version %d, not %d", ErrConflict, c.Name, j.Version, c.IfVersion)
	}
	if len(m.orphans)+len(j.Open) > MaxOrphans {
		return fmt.Errorf("%w: deleting job %q would leave more than %d open launches of deleted jobs; retry once the leader has concluded them", ErrLimit, c.Name, MaxOrphans)
	}
	// Its spec goes; what its open launches dispatch stays with them.
	m.specBytes += versionBytes(j.Open, 0) - j.heldBytes()
	m.historyReasons -= j.hist.reasonBytes()
	if len(j.Open) > 0 {
		m.orphans = append(m.orphans, j.Open...)
		slices.SortFunc(m.orphans, compareLaunch)
	}
	if !j.LastStartedAt.IsZero() || !j.LastTriggeredAt.IsZero() {
		m.bury(c.Name, tombstone{started: j.LastStartedAt, triggered: j.LastTriggeredAt})
	}
	delete(m.jobs, c.Name)
	delete(m.withOpen, c.Name) // its open launches are orphans now
	if m.deleted == nil {
		m.deleted = map[string]struct{}{}
	}
	m.deleted[c.Name] = struct{}{}
	if j.born == m.epoch {
		*j = job{} // it may sit in a restore's slab: keep nothing alive through it
	}
	return nil
}

// namesake returns the last launch times of the deleted jobs named name,
// and whether any launched: those of its tombstone, and of its launches
// still open, which outlive a tombstone evicted meanwhile.
func (m *Machine) namesake(name string) (tombstone, bool) {
	ts, ok := m.tombstones[name]
	for _, l := range m.orphansOf(name) {
		if l.Kind == LaunchManual {
			ts.triggered = laterOf(ts.triggered, l.ScheduledAt)
		} else {
			ts.started = laterOf(ts.started, l.ScheduledAt)
		}
		ok = true
	}
	return ts, ok
}

// bury remembers the last launch of the deleted job name.
func (m *Machine) bury(name string, ts tombstone) {
	if prev, ok := m.tombstones[name]; ok {
		ts = tombstone{started: laterOf(prev.started, ts.started), triggered: laterOf(prev.triggered, ts.triggered)}
		m.forget(name)
	}
	m.tombstones[name] = ts
	m.tombOrder = append(m.tombOrder, name)
	if len(m.tombOrder) > MaxTombstones {
		delete(m.tombstones, m.tombOrder[0])
		m.tombOrder = slices.Delete(m.tombOrder, 0, 1)
	}
}

// tombstone is what a deleted job leaves: its last launch times.
type tombstone struct {
	started   time.Time // LastStartedAt
	triggered time.Time // LastTriggeredAt
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (m *Machine) forget(name string) {
	delete(m.tombstones, name)
	m.tombOrder = nilIfEmpty(slices.DeleteFunc(m.tombOrder, func(n string) bool { return n == name }))
}

// concludes reports whether c, which names open's job, time and kind,
// was proposed for this opening of it (see LaunchFinished.StartedSlot).
func (c LaunchFinished) concludes(open *Launch) bool {
	return c.StartedSlot == 0 || c.StartedSlot == open.StartedSlot
}

// finishOrphan concludes an open launch of a deleted job, if c names one.
func (m *Machine) finishOrphan(c LaunchFinished) bool {
	at := c.ScheduledAt.UTC()
	i, found := slices.BinarySearchFunc(m.orphans, Launch{Job: c.Job, ScheduledAt: at, Kind: c.LaunchKind}, compareLaunch)
	if !found || !c.concludes(&m.orphans[i]) {
		return false
	}
	l := m.orphans[i]
	m.orphans = nilIfEmpty(slices.Delete(m.orphans, i, i+1))
	if heldBefore(m.orphansOf(c.Job), l.SpecVersion) == nil {
		m.specBytes -= contentBytes(l.payload, l.meta, l.Target)
	}
	m.stats.Launches.count(c.Outcome.Kind)
	return true
}

func (m *Machine) setPaused(name string, paused bool) error {
	j, err := m.lookup(name)
	if err != nil {
		return err
	}
	j.Paused = paused
	return nil
}

func (m *Machine) launchStarted(slot uint64, c LaunchStarted) error {
	j, err := m.lookup(c.Job)
	if err != nil {
		return err
	}
	at := c.ScheduledAt.UTC()
	switch {
	case !at.After(j.LastStartedAt):
		j.Counters.Duplicates++
		m.stats.Launches.Duplicates++
		return fmt.Errorf("%w: %s (launches up to %s started)", ErrDuplicate, c.Identity, j.LastStartedAt.Format(time.RFC3339))
	case j.NextAt.IsZero():
		return invalid("job %q: launch at %s, but the schedule has no next launch", c.Job, at.Format(time.RFC3339))
	case at.After(j.NextAt):
		return invalid("job %q: launch at %s would skip the one due at %s", c.Job, at.Format(time.RFC3339), j.NextAt.Format(time.RFC3339))
	case at.Before(j.NextAt):
		// A start proposed under a schedule replaced since: its slot is
		// not one of the job's now.
		return invalid("job %q: launch at %s is not its next scheduled launch (%s)", c.Job, at.Format(time.RFC3339), j.NextAt.Format(time.RFC3339))
	case c.SpecVersion < j.CreatedVersion || c.SpecVersion > j.Version:
		return invalid("job %q: spec version %d is not one of this job's (%d-%d)", c.Job, c.SpecVersion, j.CreatedVersion, j.Version)
	case len(j.Open) >= m.limits.OpenLaunchesJob:
		return fmt.Errorf("%w: job %q has %d open launches", ErrLimit, c.Job, len(j.Open))
	}
	if err := m.roomFor(1, c.Job); err != nil {
		return err
	}
	// The launch fixes the target and content of the spec in effect now,
	// and records that spec's version: an edit applied between the
	// proposal (c.SpecVersion) and now is the one it runs.
	j.open(Launch{Job: c.Job, ScheduledAt: at, Identity: c.Identity, SpecVersion: j.Version, StartedAt: c.At.UTC(), StartedSlot: slot, Target: j.Spec.Target()})
	m.withOpen[c.Job] = struct{}{}
	j.LastStartedAt = at
	j.recompute(time.Time{})
	j.Counters.Started++
	m.stats.Launches.Started++
	return nil
}

func (m *Machine) launchFinished(slot uint64, c LaunchFinished) error {
	if c.Term.Compare(m.term) < 0 {
		return fmt.Errorf("%w: %s launch %s concluded in term %s, after term %s took over", ErrStale,
			c.LaunchKind, LaunchIdentity(c.Job, c.ScheduledAt, c.LaunchKind), c.Term, m.term)
	}
	j, ok := m.jobs[c.Job]
	var i int
	found := false
	at := c.ScheduledAt.UTC()
	if ok {
		j = m.writable(j)
		i, found = slices.BinarySearchFunc(j.Open, Launch{ScheduledAt: at, Kind: c.LaunchKind}, compareOpen)
		found = found && c.concludes(&j.Open[i])
	}
	if !found && m.finishOrphan(c) {
		return nil
	}
	if !ok {
		return fmt.Errorf("%w: job %q (and no open launch of a deleted job of that name at %s)", ErrNotFound, c.Job, at.Format(time.RFC3339))
	}
	if !found {
		last := j.LastStartedAt
		if c.LaunchKind == LaunchManual {
			last = j.LastTriggeredAt
		}
		id := LaunchIdentity(c.Job, at, c.LaunchKind)
		if !at.After(last) {
			j.Counters.Duplicates++
			m.stats.Launches.Duplicates++
			return fmt.Errorf("%w: %s launch %s is not open (finished already, or skipped over)", ErrDuplicate, c.LaunchKind, id)
		}
		return fmt.Errorf("%w: %s launch %s was never started", ErrNotFound, c.LaunchKind, id)
	}
	l := j.Open[i]
	j.Open = nilIfEmpty(slices.Delete(j.Open, i, i+1))
	if l.SpecVersion != j.Version && heldBefore(j.Open, l.SpecVersion) == nil {
		m.specBytes -= contentBytes(l.payload, l.meta, l.Target)
	}
	if j.Open == nil {
		delete(m.withOpen, c.Job)
	}
	l.FinishedSlot = slot
	l.Outcome = c.Outcome
	switch {
	case c.Outcome.Kind == OutcomeDispatched && !l.Force:
		j.lastChild = Child{ID: c.Outcome.ChildID, Target: l.Target}
	case c.Outcome.Kind == OutcomeSkipped && c.Outcome.ChildID != "" && c.Outcome.ChildID != j.lastChild.ID:
		// A forbid skip names the child still running: one found for a
		// launch concluded unknown. It becomes the child the policies look
		// at, so that it is not forgotten when that launch leaves the
		// history (HistoryLen launches later) while it still runs; in the
		// target that launch went to.
		j.lastChild = Child{ID: c.Outcome.ChildID, Target: j.unknownChildTarget(c.Outcome.ChildID, l.Target)}
	}
	if c.Outcome.Kind != OutcomeUnknown {
		// An unknown launch keeps its target: its child may be there.
		l.Target = Target{}
	}
	l.Content, l.payload, l.meta, l.AtLeastOnce = 0, nil, nil, false
	m.record(j, &l)
	j.Counters.count(c.Outcome.Kind)
	m.stats.Launches.count(c.Outcome.Kind)
	return nil
}

func (c *Counters) count(k OutcomeKind) {
	switch k {
	case OutcomeDispatched:
		c.Dispatched++
	case OutcomeFailed:
		c.Failed++
	case OutcomeSkipped:
		c.Skipped++
	case OutcomeUnknown:
		c.Unknown++
	default:
		panic(fmt.Sprintf("state: counting unvalidated outcome %q", k))
	}
}

// sortedNames returns the job names in order. The caller must not keep
// or modify the slice.
func (m *Machine) sortedNames() []string {
	if len(m.added) == 0 && len(m.deleted) == 0 {
		return m.names
	}
	slices.Sort(m.added)
	// Only a name deleted since can be gone, or in both lists (created
	// again): the others are kept without a look-up in the map of jobs (a
	// merge of a million names took 125 ms with one, 6 ms without:
	// BenchmarkTakeoverReads). The deleted names are walked
	// in order beside the merge.
	gone := make([]string, 0, len(m.deleted))
	//detlint:maprange collected, then sorted
	for name := range m.deleted {
		gone = append(gone, name)
	}
	slices.Sort(gone)
	merged := make([]string, 0, len(m.jobs))
	i, k, g := 0, 0, 0
	for i < len(m.names) || k < len(m.added) {
		var name string
		switch {
		case k == len(m.added) || i < len(m.names) && m.names[i] < m.added[k]:
			name, i = m.names[i], i+1
		default:
			name, k = m.added[k], k+1
		}
		for g < len(gone) && gone[g] < name {
			g++
		}
		if g == len(gone) || gone[g] != name {
			merged = append(merged, name)
			continue
		}
		// Deleted since: gone, or created again (then in both lists).
		if _, live := m.jobs[name]; live && (len(merged) == 0 || merged[len(merged)-1] != name) {
			merged = append(merged, name)
		}
	}
	if len(merged) != len(m.jobs) {
		panic(fmt.Sprintf("state: %d names in order for %d jobs", len(merged), len(m.jobs)))
	}
	m.names, m.added, m.deleted = merged, nil, nil
	return m.names
}

// sortedKeys returns meta's keys in order; a spec has a few, so an
// insertion sort into one small slice beats collecting and sorting.
func sortedKeys(meta map[string]string) []string {
	if len(meta) == 0 {
		return nil
	}
	keys := make([]string, 0, len(meta))
	//detlint:maprange sorted as they are inserted
	for k := range meta {
		i := len(keys)
		keys = append(keys, k)
		for ; i > 0 && keys[i-1] > k; i-- {
			keys[i] = keys[i-1]
		}
		keys[i] = k
	}
	return keys
}

// nilIfEmpty keeps the state canonical: an empty list is nil, as it is
// after a Restore.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}

func cloneMeta(meta map[string]string) map[string]string {
	if len(meta) == 0 {
		return nil
	}
	return maps.Clone(meta)
}

func compareLaunch(a, b Launch) int {
	return cmp.Or(cmp.Compare(a.Job, b.Job), compareOpen(a, b))
}

// compareOpen orders one job's open launches.
func compareOpen(a, b Launch) int {
	return cmp.Or(a.ScheduledAt.Compare(b.ScheduledAt), cmp.Compare(a.Kind, b.Kind))
}

// DispatchContent returns the payload and meta an open launch dispatches:
// those of the spec it started under. The caller must not modify them.
func (l *Launch) DispatchContent() ([]byte, map[string]string) {
	return l.payload, metaMap(l.meta)
}

// open adds l to the job's open launches, in order, with the job's
// current content.
func (j *job) open(l Launch) {
	l.Content, l.payload, l.meta, l.AtLeastOnce = j.content(), j.Spec.Payload, j.meta, j.Spec.AtLeastOnce
	i, found := slices.BinarySearchFunc(j.Open, l, compareOpen)
	if found {
		panic(fmt.Sprintf("state: opening launch %s twice", l.Identity))
	}
	j.Open = slices.Insert(j.Open, i, l)
}

// isOpen reports whether the job has an open launch of kind at t.
func (j *job) isOpen(t time.Time, kind LaunchKind) bool {
	_, found := slices.BinarySearchFunc(j.Open, Launch{ScheduledAt: t, Kind: kind}, compareOpen)
	return found
}

func (m *Machine) trigger(slot uint64, c Trigger) error {
	j, err := m.lookup(c.Name)
	if err != nil {
		return err
	}
	at := c.At.UTC()
	switch {
	case !at.After(j.LastTriggeredAt):
		j.Counters.Duplicates++
		m.stats.Launches.Duplicates++
		return fmt.Errorf("%w: job %q was triggered for %s already", ErrDuplicate, c.Name, j.LastTriggeredAt.Format(time.RFC3339))
	case len(j.Open) >= m.limits.OpenLaunchesJob:
		return fmt.Errorf("%w: job %q has %d open launches", ErrLimit, c.Name, len(j.Open))
	}
	if err := m.roomFor(1, c.Name); err != nil {
		return err
	}
	j.open(Launch{Job: c.Name, ScheduledAt: at, Identity: LaunchIdentity(c.Name, at, LaunchManual), SpecVersion: j.Version,
		StartedAt: at, StartedSlot: slot, Target: j.Spec.Target(), Kind: LaunchManual, Force: c.Force})
	m.withOpen[c.Name] = struct{}{}
	j.LastTriggeredAt = at
	j.Counters.Started++
	m.stats.Launches.Started++
	return nil
}

func (m *Machine) backfill(slot uint64, c Backfill) error {
	j, err := m.lookup(c.Name)
	if err != nil {
		return err
	}
	from, to := c.From.UTC(), c.To.UTC()
	if to.After(j.LastStartedAt) {
		return invalid("job %q: backfill to %s passes its last launch (%s): later slots come due by themselves",
			c.Name, to.Format(time.RFC3339), j.LastStartedAt.Format(time.RFC3339))
	}
	// The slots in [from, to] the job had: from its creation on. Next
	// finds the slots after t, and slots fall on whole seconds.
	t := from.Truncate(time.Second)
	if t.Equal(from) {
		t = t.Add(-time.Second)
	}
	if t.Before(j.CreatedAt) {
		t = j.CreatedAt
	}
	var slots []time.Time
	for n := 0; ; n++ {
		next, ok := j.sched.Next(t)
		if !ok || next.After(to) {
			break
		}
		if n == MaxBackfillScan {
			return fmt.Errorf("%w: job %q: backfill of more than %d slots; ask for a shorter range", ErrLimit, c.Name, MaxBackfillScan)
		}
		t = next.UTC()
		if j.backfillable(t, c.Force) {
			slots = append(slots, t)
		}
	}
	if len(j.Open)+len(slots) > m.limits.OpenLaunchesJob {
		return fmt.Errorf("%w: job %q: %d slots to backfill and %d launches open, more than %d", ErrLimit, c.Name, len(slots), len(j.Open), m.limits.OpenLaunchesJob)
	}
	if err := m.roomFor(len(slots), c.Name); err != nil {
		return err
	}
	at := c.At.UTC()
	for _, t := range slots {
		j.open(Launch{Job: c.Name, ScheduledAt: t, Identity: LaunchIdentity(c.Name, t, LaunchBackfill), SpecVersion: j.Version,
			StartedAt: at, StartedSlot: slot, Target: j.Spec.Target(), Kind: LaunchBackfill, Force: c.Force})
		m.withOpen[c.Name] = struct{}{}
		j.Counters.Started++
		m.stats.Launches.Started++
	}
	return nil
}

// backfillable reports whether slot t of the job did not run: no launch
// for it is open, and its last record says skipped or failed (with force,
// also unknown, or no record left in the history). Without force, one of
// its records must also come from an opening not forced (its scheduled
// launch, or a backfill not forced) and none may say unknown: a forced
// opening's skip or failure says that opening made no child, not that the
// slot has none (it was forced because the slot's launch had concluded
// unknown, or had left the history, dispatched or not).
func (j *job) backfillable(t time.Time, force bool) bool {
	if j.isOpen(t, LaunchScheduled) || j.isOpen(t, LaunchBackfill) {
		return false
	}
	verdict := force // no record left
	mayHaveRun, unforcedNoChild := false, false
	at := t.Unix()
	j.hist.each(func(e *histEntry) bool {
		if e.kind == LaunchManual || e.scheduled != at {
			return true
		}
		switch e.outcome { // the latest record decides
		case OutcomeSkipped, OutcomeFailed:
			verdict = true
			unforcedNoChild = unforcedNoChild || !e.force
		case OutcomeUnknown:
			verdict, mayHaveRun = force, true
		default:
			verdict = false // it ran
		}
		return true
	})
	return verdict && (force || unforcedNoChild && !mayHaveRun)
}

func compareDue(a, b Due) int {
	return cmp.Or(a.ScheduledAt.Compare(b.ScheduledAt), cmp.Compare(a.Job, b.Job))
}

package state

import (
	"fmt"
	"math"
	"paxcron/internal/mapshrink"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Snapshot layout:
//
//	byte 0    snapshotVersion
//	then a stream of msgpack values (arrays, as for commands):
//	          wireHeader, then wireHeader.Jobs wireJobs, then wireTrailer
//
// Jobs are streamed one value each, in name order, so that a million of
// them are encoded and decoded without building (and growing) a slice of
// them all. Launches are in scheduled-time order, rejections oldest first,
// and every collection is canonical (empty is nil), so two machines with
// the same state produce the same bytes. Restore checks every invariant
// Apply keeps and re-parses every schedule.
type wireHeader struct {
	LastSlot    uint64
	LastVersion uint64
	Stats       Stats
	Rejections  []wireRejection
	Term        Term
	Jobs        uint64 // how many wireJobs follow
	// ClusterID (version 6 on; before it the header ends above and the
	// ID is unset): no bytes while unset, else ClusterIDBytes.
	ClusterID []byte
}

// wireTrailer follows the jobs: it refers to them.
type wireTrailer struct {
	Orphans    []wireOrphan
	Tombstones []wireTombstone // oldest first
}

// snapshotBytesPerJob is what a job takes in a snapshot besides its
// history, the bytes of its specs (heldBytes) and its open launches (its
// fixed fields and the spec's framing: about 150 bytes).
const snapshotBytesPerJob = 192

// wireTombstone is a deleted job's last launch times.
type wireTombstone struct {
	Name          string
	Last          wireTime
	LastTriggered wireTime
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
	LastTriggered  wireTime
	Open           []wireLaunch
	History        string // packed (history.go)
	Counters       Counters
	// LastChild is the job's lastChild; not in versions 1 and 2, where
	// it is taken from the history.
	LastChild Child
	// HistoryV1 is the history of a version 1 snapshot, where it took
	// History's place; never written.
	HistoryV1 []wireLaunch `codec:"-"`
	// version is the snapshot format the job was read from.
	version byte
}

// v1HistoryLen was HistoryLen in snapshot version 1.
const v1HistoryLen = 64

// wireLaunch omits what the job implies: its name and the identity.
type wireLaunch struct {
	ScheduledAt  wireTime
	SpecVersion  uint64
	StartedAt    wireTime
	StartedSlot  uint64
	FinishedSlot uint64
	Outcome      wireOutcome
	Target       Target // empty once finished
	Kind         uint8
	Force        bool
	// Content, Payload and Meta: what an open launch dispatches (zero
	// once finished); not in version 1.
	Content     uint64
	Payload     []byte
	Meta        []wireKV
	AtLeastOnce bool
	// Shared (version 5 on): the launch's payload, meta and target are
	// those of its spec version's holder, and are not written here. The
	// holder is the job's spec when that is the launch's version, and
	// otherwise the first launch of the version before it (of the job,
	// or of the deleted job among the orphans), which carries them: a
	// version's content is written once, however many launches of it
	// are open (64 launches of a job with 16 KiB of payload took 65
	// copies of it before).
	Shared bool
}

// Snapshot implements replica.StateMachine.
func (m *Machine) Snapshot() ([]byte, error) {
	data, err := m.freeze().encode()
	if err == nil {
		m.snapshotSize, m.snapshotJobs = len(data), len(m.jobs)
	}
	return data, err
}

// SnapshotBytes is the size of the newest snapshot of this state: the
// last encoded off the thread (FreezeSnapshot, as the server takes them),
// else the last taken or restored on it; 0 before any. A follower takes a
// snapshot of at most paxos.Limits.MaxSnapshotBytes from its peers.
func (m *Machine) SnapshotBytes() int {
	if encoded := m.encodedSize.Load(); encoded > 0 {
		return int(encoded)
	}
	return m.snapshotSize
}

// FreezeSnapshot captures the state as it is now, in a pass over the job
// names (a pointer each), and returns the function that encodes it into
// what Snapshot would have returned now. That function may run on any
// goroutine, while the Machine goes on applying: from here on a job is
// copied before it is first changed (writable), so the frozen jobs stay
// as they were. At a million jobs the encoding takes a second or two,
// too long for the replica's loop, which must keep heartbeating.
func (m *Machine) FreezeSnapshot() func() ([]byte, error) {
	f := m.freeze()
	if m.epoch == math.MaxUint32 {
		m.restartEpochs()
		return f.encode
	}
	m.epoch++
	return f.encode
}

// restartEpochs starts the epochs again from 0 once the last has been
// used (2^32 freezes: 6.8 years of a snapshot every 50 ms, the shortest
// snapshot.every; found in review, this panicked). A job born in an old
// epoch of the same number would pass for one no frozen snapshot holds,
// so every job is replaced by a copy born in the new epoch, as writable
// would copy it: the frozen snapshots keep the structs they hold
// unchanged. O(jobs), once in 2^32 freezes.
func (m *Machine) restartEpochs() {
	m.epoch = 0
	//detlint:maprange each job copied in place; the order cannot matter
	for name, j := range m.jobs {
		m.jobs[name] = j.reborn(m.epoch)
	}
}

// frozen is the state at one moment, as a snapshot encodes it.
type frozen struct {
	header   wireHeader
	jobs     []*job
	trailer  wireTrailer
	capacity int
	// where the encode reports its size and number of jobs
	size, jobCount *atomic.Int64
}

func (m *Machine) freeze() *frozen {
	names := m.sortedNames()
	f := &frozen{
		header: wireHeader{LastSlot: m.lastSlot, LastVersion: m.lastVersion, Stats: m.stats, Term: m.term, Jobs: uint64(len(names)),
			ClusterID: clusterIDToWire(m.clusterID)},
		jobs:     make([]*job, len(names)),
		capacity: m.snapshotCapacity(),
		size:     m.encodedSize,
		jobCount: m.encodedJobs,
	}
	for _, r := range m.rejections {
		f.header.Rejections = append(f.header.Rejections, wireRejection{Slot: r.Slot, Kind: uint8(r.Kind), Job: r.Job, Reason: r.Reason})
	}
	for i, name := range names {
		f.jobs[i] = m.jobs[name]
	}
	for i := 0; i < len(m.orphans); {
		run := m.orphansOf(m.orphans[i].Job)
		for k, l := range run {
			f.trailer.Orphans = append(f.trailer.Orphans, wireOrphan{Job: l.Job, Launch: launchToWire(l, heldBefore(run[:k], l.SpecVersion) != nil)})
		}
		i += len(run)
	}
	for _, name := range m.tombOrder {
		ts := m.tombstones[name]
		f.trailer.Tombstones = append(f.trailer.Tombstones, wireTombstone{Name: name, Last: toWire(ts.started), LastTriggered: toWire(ts.triggered)})
	}
	return f
}

// encode writes the frozen state as a snapshot. It reads only what no
// apply changes in place.
func (f *frozen) encode() ([]byte, error) {
	out := make([]byte, 1, f.capacity)
	out[0] = snapshotVersion
	out, err := appendValue(out, &f.header)
	if err != nil {
		return nil, fmt.Errorf("state: encoding the snapshot header: %w", err)
	}
	var w wireJob
	var sc wireScratch
	for _, j := range f.jobs {
		jobToWireInto(&w, j, &sc)
		out = appendJob(out, &w)
	}
	if out, err = appendValue(out, &f.trailer); err != nil {
		return nil, fmt.Errorf("state: encoding the snapshot trailer: %w", err)
	}
	f.size.Store(int64(len(out)))
	f.jobCount.Store(int64(len(f.jobs)))
	return out, nil
}

// snapshotCapacity is the buffer a snapshot starts with: the last
// snapshot's size, scaled by the jobs added since, and a margin, or else
// an estimate from the jobs' sizes.
func (m *Machine) snapshotCapacity() int {
	size, jobs := m.snapshotSize, m.snapshotJobs
	if encoded := int(m.encodedSize.Load()); encoded > size {
		// Stored apart from its size: a pair read mid-update misjudges
		// one estimate, which only costs a copy.
		size, jobs = encoded, int(m.encodedJobs.Load())
	}
	if size > 0 {
		if jobs > 0 && len(m.jobs) > jobs {
			size = int(float64(size) * float64(len(m.jobs)) / float64(jobs))
		}
		return size + size/16 + 4096
	}
	n := 4096
	//detlint:maprange a sum, whatever the order
	for _, j := range m.jobs {
		// heldBytes: the spec, and each older version's content once, as
		// version 5 writes them; an open launch is then about 40 bytes.
		n += snapshotBytesPerJob + len(j.hist) + j.heldBytes() + 2*len(j.meta) + 64*len(j.Open)
		n += 8 + len(j.lastChild.ID) + len(j.lastChild.Target.NomadJob) + len(j.lastChild.Target.Namespace) + len(j.lastChild.Target.Region)
	}
	return n
}

// wireScratch is the memory jobToWireInto reuses from job to job.
type wireScratch struct {
	open []wireLaunch
}

// jobToWireInto fills w with j for encoding at once: it reuses sc's
// slices and shares j's bytes rather than copying them (a snapshot of a
// million jobs allocated its size several times over).
func jobToWireInto(w *wireJob, j *job, sc *wireScratch) {
	open := sc.open[:0]
	*w = wireJob{
		Name: j.Name, Version: j.Version, CreatedVersion: j.CreatedVersion,
		Paused: j.Paused, CreatedAt: toWire(j.CreatedAt), UpdatedAt: toWire(j.UpdatedAt),
		LastStartedAt: toWire(j.LastStartedAt), NextAt: toWire(j.NextAt), LastTriggered: toWire(j.LastTriggeredAt), Counters: j.Counters,
	}
	fillWireSpec(&w.Spec, j.Spec, nil) // j.Spec.Meta is nil: j.meta is the wire form
	for i, l := range j.Open {
		open = append(open, launchToWire(l, l.SpecVersion == j.Version || heldBefore(j.Open[:i], l.SpecVersion) != nil))
	}
	sc.open = open
	// Empty is nil in the encoding: canonical.
	w.Spec.Meta, w.Open, w.History = j.meta, nilIfEmpty(open), string(j.hist)
	w.LastChild = j.lastChild
}

// launchToWire is l in a snapshot; shared leaves out what its spec
// version's holder carries (wireLaunch.Shared).
func launchToWire(l Launch, shared bool) wireLaunch {
	w := wireLaunch{
		ScheduledAt: toWire(l.ScheduledAt), SpecVersion: l.SpecVersion, StartedAt: toWire(l.StartedAt),
		StartedSlot: l.StartedSlot, FinishedSlot: l.FinishedSlot,
		Outcome: wireOutcome{Kind: string(l.Outcome.Kind), ChildID: l.Outcome.ChildID, Reason: l.Outcome.Reason},
		Target:  l.Target, Kind: uint8(l.Kind), Force: l.Force, Content: l.Content, Payload: l.payload, Meta: l.meta, AtLeastOnce: l.AtLeastOnce,
	}
	if shared {
		w.Target, w.Payload, w.Meta, w.Shared = Target{}, nil, nil, true
	}
	return w
}

// shareContent gives l, an open launch read from a snapshot of format
// version, the payload, meta and target of holder, the launch or spec that
// carries those of its spec version (nil if none): in version 5, a launch
// marked shared takes them, and one that is not must be its version's
// first. Before version 5 every launch carried its own.
func shareContent(l *Launch, shared bool, holder *Launch, version byte) error {
	switch {
	case version < 5:
		return nil
	case !shared && holder != nil:
		return fmt.Errorf("carries the content of spec version %d, which its job or a launch before it holds", l.SpecVersion)
	case !shared:
		return nil
	case holder == nil:
		return fmt.Errorf("shares the content of spec version %d, which nothing before it holds", l.SpecVersion)
	case l.payload != nil || l.meta != nil || l.Target != (Target{}):
		return fmt.Errorf("shares the content of its spec version but carries some")
	}
	l.payload, l.meta, l.Target = holder.payload, holder.meta, holder.Target
	return nil
}

func snapshotErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSnapshot, fmt.Sprintf(format, args...))
}

// Restore implements replica.StateMachine. The state the machine held is
// released as the restore begins, so that a million jobs are not held
// twice (nor marked twice by every garbage collection of the restore); on
// error the machine is empty. A replica whose restore fails stops: it has
// no state to apply its log to.
func (m *Machine) Restore(data []byte) error {
	kept := m.replicaOwn()
	*m = *New()
	kept.putBack(m)
	restored, err := DecodeSnapshot(data)
	if err != nil {
		return err
	}
	m.Install(restored)
	return nil
}

// Install replaces m's state with restored's, a machine DecodeSnapshot
// returned, which must not be used afterwards. m keeps its limits and its
// maps' shrink floor, the replica's configuration, not the state's, and
// the rebuilds and moves it counted (found in review: a simulated replica that took
// a snapshot from its peers fell back to the server's floor, and its
// maps were never rebuilt again).
func (m *Machine) Install(restored *Machine) {
	kept := m.replicaOwn()
	*m = *restored
	kept.putBack(m)
	m.jobsPeak.Replaced()
	m.withOpenPeak.Replaced()
}

// replicaOwn is what a machine keeps across Restore and Install: the
// replica's configuration (limits, the maps' shrink floor) and what it
// counted, none of it the replicated state's.
type replicaOwn struct {
	limits                 Limits
	jobsPeak, withOpenPeak mapshrink.Peak
	restoreMoves           uint64
}

func (m *Machine) replicaOwn() replicaOwn {
	return replicaOwn{limits: m.limits, jobsPeak: m.jobsPeak, withOpenPeak: m.withOpenPeak, restoreMoves: m.restoreMoves}
}

func (k replicaOwn) putBack(m *Machine) {
	m.limits, m.jobsPeak, m.withOpenPeak, m.restoreMoves = k.limits, k.jobsPeak, k.withOpenPeak, k.restoreMoves
}

// DecodeSnapshot decodes a snapshot into a new machine and touches no
// other: it may run on any goroutine while the machine it is to replace
// goes on applying, and Install then puts it in place. Meanwhile both
// states are held.
func DecodeSnapshot(data []byte) (*Machine, error) {
	switch {
	case len(data) < 1:
		return nil, snapshotErr("empty")
	case data[0] == 0 || data[0] > snapshotVersion:
		return nil, snapshotErr("unknown format version %d", data[0])
	}
	version := data[0]
	body := data[1:]
	dec := codec.NewDecoderBytes(body, msgpackHandle)
	var h wireHeader
	if err := dec.Decode(&h); err != nil {
		return nil, snapshotErr("header: %v", err)
	}
	restored, err := machineFromHeader(&h, version)
	if err != nil {
		return nil, err
	}
	at := dec.NumBytesRead()
	// Jobs' structs come in slabs of jobSlab: a million of them restore
	// faster (one large allocation was slower still), and a deleted job's
	// struct is zeroed (deleteJob), so a slab holds nothing else alive. A
	// slab, or a chunk of payloads, stays alive while any of its jobs
	// does, until the job map is first rebuilt far below its peak
	// (leaveRestoreMemory).
	var slab []job
	var bufs arena // payloads
	restored.names = make([]string, 0, h.Jobs)
	prev := ""
	open := 0 // launches held, against the counters that OpenCount reads
	in := newInterner()
	for i := range h.Jobs {
		var w wireJob
		n, err := readJob(body[at:], &w, in, version)
		if err != nil {
			return nil, snapshotErr("job %d of %d: %v", i+1, h.Jobs, err)
		}
		at += n
		if i > 0 && w.Name <= prev {
			return nil, snapshotErr("job %q out of order after %q", w.Name, prev)
		}
		prev = w.Name
		if len(slab) == 0 {
			slab = make([]job, min(jobSlab, h.Jobs-i))
		}
		j := &slab[0]
		slab = slab[1:]
		err = jobFromWire(j, &w, h.LastSlot, h.LastVersion, &bufs, &restored.historyReasons)
		if err != nil {
			return nil, snapshotErr("job %q: %v", w.Name, err)
		}
		restored.jobs[j.Name] = j
		if len(j.Open) > 0 {
			restored.withOpen[j.Name] = struct{}{}
			open += len(j.Open)
		}
		restored.names = append(restored.names, j.Name) // in order, checked above
	}
	var t wireTrailer
	if err := decodeValue(body[at:], &t); err != nil {
		return nil, snapshotErr("trailer: %v", err)
	}
	if err := restored.restoreTrailer(&t, version); err != nil {
		return nil, err
	}
	c := h.Stats.Launches
	if concluded := c.Dispatched + c.Failed + c.Skipped + c.Unknown; concluded > c.Started || c.Started-concluded != uint64(open+len(restored.orphans)) {
		// OpenCount, and with it the limit on open launches, is read from
		// these counters.
		return nil, snapshotErr("launch counters say %d started and %d concluded; the snapshot holds %d open", c.Started, concluded, open+len(restored.orphans))
	}
	restored.snapshotSize, restored.snapshotJobs = len(data), len(restored.jobs)
	restored.inRestoreMemory = true
	// Counted, not checked: a state over MaxSpecBytes (a later version's
	// limit, say) restores, and refuses only what would grow it.
	restored.specBytes = restored.countSpecBytes()
	return restored, nil
}

// SnapshotTerm reads the term of the last Takeover a snapshot records
// (what Term would return once it is restored) from its header alone:
// backups rank by it (internal/server), and a snapshot of a million jobs
// takes seconds to decode whole. It checks the header as DecodeSnapshot
// does, and nothing after it.
func SnapshotTerm(data []byte) (Term, error) {
	m, err := snapshotHeader(data)
	if err != nil {
		return Term{}, err
	}
	return m.term, nil
}

// SnapshotClusterID reads the cluster ID a snapshot records (what
// ClusterID would return once it is restored: zero before it is named,
// and in formats before 6) from its header alone, as SnapshotTerm does:
// each backup names its cluster (internal/server).
func SnapshotClusterID(data []byte) (ClusterID, error) {
	m, err := snapshotHeader(data)
	if err != nil {
		return ClusterID{}, err
	}
	return m.clusterID, nil
}

// snapshotHeader decodes and checks a snapshot's header alone, into a
// machine that holds nothing else.
func snapshotHeader(data []byte) (*Machine, error) {
	switch {
	case len(data) < 1:
		return nil, snapshotErr("empty")
	case data[0] == 0 || data[0] > snapshotVersion:
		return nil, snapshotErr("unknown format version %d", data[0])
	}
	var h wireHeader
	if err := codec.NewDecoderBytes(data[1:], msgpackHandle).Decode(&h); err != nil {
		return nil, snapshotErr("header: %v", err)
	}
	return machineFromHeader(&h, data[0])
}

func machineFromHeader(h *wireHeader, version byte) (*Machine, error) {
	if h.Jobs > MaxJobs {
		return nil, snapshotErr("%d jobs, more than %d", h.Jobs, MaxJobs)
	}
	if version < 6 && h.ClusterID != nil {
		return nil, snapshotErr("a cluster ID in a version %d header", version)
	}
	clusterID, err := clusterIDFromWire(h.ClusterID)
	if err != nil {
		return nil, snapshotErr("header: %v", err)
	}
	m := &Machine{jobs: make(map[string]*job, h.Jobs), tombstones: map[string]tombstone{}, withOpen: map[string]struct{}{}, encodedSize: new(atomic.Int64), encodedJobs: new(atomic.Int64),
		lastSlot: h.LastSlot, lastVersion: h.LastVersion, stats: h.Stats, term: h.Term, clusterID: clusterID, limits: DefaultLimits()}
	if len(h.Rejections) > MaxRejections {
		return nil, snapshotErr("%d rejections, more than %d", len(h.Rejections), MaxRejections)
	}
	for i, r := range h.Rejections {
		if r.Slot == 0 || r.Slot > h.LastSlot || i > 0 && r.Slot <= h.Rejections[i-1].Slot {
			return nil, snapshotErr("rejection %d: slot %d out of order or past the last slot %d", i, r.Slot, h.LastSlot)
		}
		m.rejections = append(m.rejections, Rejection{Slot: r.Slot, Kind: Kind(r.Kind), Job: r.Job, Reason: r.Reason})
	}
	return m, nil
}

func (m *Machine) restoreTrailer(t *wireTrailer, version byte) error {
	if len(t.Orphans) > MaxOrphans {
		return snapshotErr("%d open launches of deleted jobs, more than %d", len(t.Orphans), MaxOrphans)
	}
	for i, o := range t.Orphans {
		l, err := launchFromWire(o.Job, o.Launch)
		if err != nil {
			return snapshotErr("open launch of deleted job %q: %v", o.Job, err)
		}
		l.Identity = LaunchIdentity(l.Job, l.ScheduledAt, l.Kind)
		if i > 0 && compareLaunch(m.orphans[i-1], l) >= 0 {
			return snapshotErr("open launch %s of a deleted job out of order", l.Identity)
		}
		// In order so far: the launches of its job before it are a run.
		if err := shareContent(&l, o.Launch.Shared, heldBefore(m.orphansOf(l.Job), l.SpecVersion), version); err != nil {
			return snapshotErr("open launch %s of a deleted job: %v", l.Identity, err)
		}
		if err := checkOrphan(l, m.lastSlot, m.lastVersion); err != nil {
			return snapshotErr("open launch %s of a deleted job: %v", l.Identity, err)
		}
		m.orphans = append(m.orphans, l)
	}
	if len(t.Tombstones) > MaxTombstones {
		return snapshotErr("%d tombstones, more than %d", len(t.Tombstones), MaxTombstones)
	}
	for _, ts := range t.Tombstones {
		last, err := fromWire(ts.Last)
		triggered, err2 := fromWire(ts.LastTriggered)
		switch {
		case ValidName(ts.Name) != nil:
			return snapshotErr("tombstone: %v", ValidName(ts.Name))
		case err != nil || err2 != nil || (last.IsZero() && triggered.IsZero()) ||
			(!last.IsZero() && validScheduledAt(last) != nil) || (!triggered.IsZero() && validScheduledAt(triggered) != nil):
			return snapshotErr("tombstone %q: invalid last launch times", ts.Name)
		}
		if _, dup := m.tombstones[ts.Name]; dup {
			return snapshotErr("tombstone %q twice", ts.Name)
		}
		if _, live := m.jobs[ts.Name]; live {
			return snapshotErr("tombstone %q for a job that exists", ts.Name)
		}
		m.tombstones[ts.Name] = tombstone{started: last, triggered: triggered}
		m.tombOrder = append(m.tombOrder, ts.Name)
	}
	return nil
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
		Job: name, ScheduledAt: at, SpecVersion: w.SpecVersion, // Identity: set by the caller where kept
		StartedAt: startedAt, StartedSlot: w.StartedSlot, FinishedSlot: w.FinishedSlot,
		Outcome: Outcome{Kind: OutcomeKind(w.Outcome.Kind), ChildID: w.Outcome.ChildID, Reason: w.Outcome.Reason},
		Target:  w.Target, Kind: LaunchKind(w.Kind), Force: w.Force, Content: w.Content,
		payload: cloneBytes(w.Payload), meta: w.Meta, AtLeastOnce: w.AtLeastOnce,
	}, nil
}

// checkContent checks an open launch's content against its hash. A
// version 1 launch has none yet (its job's is filled in after).
func checkContent(l Launch) error {
	if l.Content == 0 && l.payload == nil && l.meta == nil {
		return nil
	}
	if len(l.payload) > MaxPayloadBytes {
		return fmt.Errorf("payload of %d bytes, more than %d", len(l.payload), MaxPayloadBytes)
	}
	if err := checkMetaPairs(l.meta); err != nil {
		return err
	}
	if contentHash(l.payload, l.meta) != l.Content {
		return fmt.Errorf("content does not match its hash %#x", l.Content)
	}
	return nil
}

func checkOrphan(l Launch, lastSlot, lastVersion uint64) error {
	if err := checkContent(l); err != nil {
		return err
	}
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

// jobSlab is how many jobs' structs a restore allocates at once.
const jobSlab = 1024

// leaveRestoreMemory gives every job a struct and payloads of its own,
// and the open launches of deleted jobs payloads of their own, out of the
// slabs and chunks a restore cut them from: 10,000 jobs left of a million
// restored, one in a hundred, kept nearly every slab and chunk alive
// (BenchmarkRestoredMassDeleteHeap). The state is unchanged: each job's
// copy holds what it held (reborn), and launches that shared a payload
// share its copy. The structs a frozen snapshot may hold are left as they
// were. Called at a rebuild of the job map, whose survivors are under a
// quarter of its peak; after it no job sits in the restore's memory.
func (m *Machine) leaveRestoreMemory() {
	var copies payloadCopies
	//detlint:maprange each job replaced by its own copy; the order cannot matter
	for name, j := range m.jobs {
		c := j.reborn(m.epoch)
		copies.reset()
		c.Spec.Payload = copies.of(c.Spec.Payload)
		for i := range c.Open {
			c.Open[i].payload = copies.of(c.Open[i].payload)
		}
		m.jobs[name] = c
	}
	// A frozen snapshot holds its own copies of the orphans (freeze).
	for i := range m.orphans {
		if i == 0 || m.orphans[i].Job != m.orphans[i-1].Job {
			copies.reset() // a run of one name's launches shares payloads
		}
		m.orphans[i].payload = copies.of(m.orphans[i].payload)
	}
	m.inRestoreMemory = false
	m.restoreMoves++
}

// payloadCopies copies payloads, each once: the launches of one spec
// version share its payload, with the spec when it is the job's current
// one, and their copies must share it too.
type payloadCopies struct{ from, to [][]byte }

func (p *payloadCopies) reset() { p.from, p.to = p.from[:0], p.to[:0] }

// of returns the copy of b, made at its first call for b's bytes.
func (p *payloadCopies) of(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	for i, f := range p.from {
		if &f[0] == &b[0] && len(f) == len(b) {
			return p.to[i]
		}
	}
	c := slices.Clone(b)
	p.from, p.to = append(p.from, b), append(p.to, c)
	return c
}

// jobFromWire fills j, which must be zero, from w, and adds the bytes of
// its history's reasons to reasons.
func jobFromWire(j *job, w *wireJob, lastSlot, lastVersion uint64, bufs *arena, reasons *int) error {
	if err := ValidName(w.Name); err != nil {
		return err
	}
	// The meta stays in its wire form (see job.meta); the reader gave
	// this job its own slice.
	meta := w.Spec.Meta
	if err := checkMetaPairs(meta); err != nil {
		return err
	}
	fields := w.Spec
	fields.Meta, fields.Payload = nil, nil
	spec, err := specFromWire(fields)
	if err != nil {
		return err
	}
	if len(w.Spec.Payload) > MaxPayloadBytes {
		return fmt.Errorf("payload is %d bytes, more than %d", len(w.Spec.Payload), MaxPayloadBytes)
	}
	spec.Payload = bufs.copy(w.Spec.Payload) // the reader's bytes share the snapshot
	if err := spec.validateFields(); err != nil {
		return err
	}
	sched, err := spec.parseSchedule(w.Name) // shared when it can be (parsedSchedules)
	if err != nil {
		return err
	}
	if spec.Concurrency == "" || spec.CatchupWindow == 0 {
		return fmt.Errorf("spec without its defaults")
	}
	*j = job{meta: meta, Job: Job{Name: w.Name, Spec: spec, Version: w.Version, CreatedVersion: w.CreatedVersion, Paused: w.Paused, Counters: w.Counters}, sched: sched}
	if w.CreatedVersion == 0 || w.CreatedVersion > w.Version || w.Version > lastVersion {
		return fmt.Errorf("versions %d-%d outside 1-%d", w.CreatedVersion, w.Version, lastVersion)
	}
	times := []struct {
		dst *time.Time
		src wireTime
	}{{&j.CreatedAt, w.CreatedAt}, {&j.UpdatedAt, w.UpdatedAt}, {&j.LastStartedAt, w.LastStartedAt}, {&j.NextAt, w.NextAt}, {&j.LastTriggeredAt, w.LastTriggered}}
	for _, t := range times {
		if *t.dst, err = fromWire(t.src); err != nil {
			return err
		}
	}
	if err := j.checkTimes(); err != nil {
		return err
	}
	if j.Open, err = launchesFromWire(j, w.Open, true, lastSlot, w.version); err != nil {
		return fmt.Errorf("open launches: %w", err)
	}
	if w.version == 1 {
		// Version 1 did not record the content: take the job's own, as
		// the launcher of that version dispatched it.
		for i := range j.Open {
			l := &j.Open[i]
			l.Content, l.payload, l.meta = j.content(), j.Spec.Payload, j.meta
		}
	}
	if w.HistoryV1 != nil {
		hist, err := launchesFromWire(j, w.HistoryV1, false, lastSlot, w.version)
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		for _, l := range hist[max(0, len(hist)-HistoryLen):] {
			if l.Outcome.Kind == OutcomeUnknown {
				l.Target = j.Spec.Target() // where version 1 searched
			}
			j.hist = j.hist.add(&l, j.Name, j.Spec.Target())
		}
		*reasons += j.hist.reasonBytes()
	} else {
		var n int
		if j.hist, n, err = checkHistory(w.History, j, lastSlot, entryFormat(w.version < 4)); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		*reasons += n
	}
	if w.version < 3 {
		// Before version 3 the latest dispatched child in the history was
		// the last child, and its target the job's.
		j.hist.each(func(e *histEntry) bool {
			if e.outcome == OutcomeDispatched {
				j.lastChild = Child{ID: e.childID(j.Name, j.Spec.NomadJob), Target: j.Spec.Target()}
			}
			return true
		})
		return nil
	}
	if err := w.LastChild.validate(); err != nil {
		return fmt.Errorf("last child: %w", err)
	}
	j.lastChild = w.LastChild
	return nil
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
	case !j.LastTriggeredAt.IsZero() && validScheduledAt(j.LastTriggeredAt) != nil:
		return fmt.Errorf("last triggered time %v invalid", j.LastTriggeredAt)
	}
	return nil
}

func launchesFromWire(j *job, ws []wireLaunch, open bool, lastSlot uint64, version byte) ([]Launch, error) {
	limit := v1HistoryLen
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
		if open {
			holder := heldBefore(out, l.SpecVersion)
			if l.SpecVersion == j.Version {
				holder = &Launch{payload: j.Spec.Payload, meta: j.meta, Target: j.Spec.Target()}
			}
			if err := shareContent(&l, w.Shared, holder, version); err != nil {
				return nil, fmt.Errorf("launch %s: %w", LaunchIdentity(l.Job, l.ScheduledAt, l.Kind), err)
			}
		}
		if err := checkLaunch(j, l, open, lastSlot); err != nil {
			return nil, fmt.Errorf("launch %s: %w", LaunchIdentity(l.Job, l.ScheduledAt, l.Kind), err)
		}
		if open && i > 0 && compareOpen(out[i-1], l) >= 0 {
			return nil, fmt.Errorf("launch %s out of order", LaunchIdentity(l.Job, l.ScheduledAt, l.Kind))
		}
		if open {
			l.Identity = LaunchIdentity(l.Job, l.ScheduledAt, l.Kind) // the history keeps none (job.copy rebuilds it)
		}
		out = append(out, l)
	}
	return out, nil
}

func checkLaunch(j *job, l Launch, open bool, lastSlot uint64) error {
	switch {
	case l.Kind > LaunchBackfill:
		return fmt.Errorf("launch kind %d", l.Kind)
	case validScheduledAt(l.ScheduledAt) != nil:
		return fmt.Errorf("scheduled time %v invalid", l.ScheduledAt)
	case l.Kind != LaunchManual && l.ScheduledAt.After(j.LastStartedAt):
		return fmt.Errorf("scheduled time after the last started %v", j.LastStartedAt)
	case l.Kind == LaunchManual && l.ScheduledAt.After(j.LastTriggeredAt):
		return fmt.Errorf("manual launch after the last triggered %v", j.LastTriggeredAt)
	case l.Kind == LaunchScheduled && l.Force:
		return fmt.Errorf("a scheduled launch cannot be forced")
	case validTime("start time", l.StartedAt) != nil:
		return fmt.Errorf("start time %v invalid", l.StartedAt)
	case l.StartedSlot == 0 || l.StartedSlot > lastSlot:
		return fmt.Errorf("started slot %d outside 1-%d", l.StartedSlot, lastSlot)
	case open && (l.FinishedSlot != 0 || l.Outcome != Outcome{}):
		return fmt.Errorf("open launch with an outcome")
	case open && l.Target.validate() != nil:
		return l.Target.validate()
	case !open && (l.Target != Target{} || l.Content != 0 || l.payload != nil || l.meta != nil || l.AtLeastOnce):
		return fmt.Errorf("finished launch with a target or content")
	case l.SpecVersion < j.CreatedVersion || l.SpecVersion > j.Version:
		return fmt.Errorf("spec version %d not in %d-%d", l.SpecVersion, j.CreatedVersion, j.Version)
	case open:
		return checkContent(l)
	case l.FinishedSlot <= l.StartedSlot || l.FinishedSlot > lastSlot:
		return fmt.Errorf("finished slot %d not in %d-%d", l.FinishedSlot, l.StartedSlot+1, lastSlot)
	}
	return l.Outcome.validate()
}

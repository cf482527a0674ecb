package state

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"paxcron/cron/schedule"
)

// Kind identifies a command; it is the second byte of its encoding and
// part of the log format: never renumber one.
type Kind uint8

// The commands.
const (
	KindPutJob         Kind = 1
	KindDeleteJob      Kind = 2
	KindPause          Kind = 3
	KindResume         Kind = 4
	KindLaunchStarted  Kind = 5
	KindLaunchFinished Kind = 6
	KindTrigger        Kind = 7
	KindBackfill       Kind = 8
	KindTakeover       Kind = 9
	KindSetClusterID   Kind = 10
)

func (k Kind) String() string {
	switch k {
	case KindPutJob:
		return "PutJob"
	case KindDeleteJob:
		return "DeleteJob"
	case KindPause:
		return "Pause"
	case KindResume:
		return "Resume"
	case KindLaunchStarted:
		return "LaunchStarted"
	case KindLaunchFinished:
		return "LaunchFinished"
	case KindTrigger:
		return "Trigger"
	case KindBackfill:
		return "Backfill"
	case KindTakeover:
		return "Takeover"
	case KindSetClusterID:
		return "SetClusterID"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Limits. Hitting one is a rejected command, never growth.
const (
	// MaxNameBytes is the longest job name.
	MaxNameBytes = 128
	// MaxPayloadBytes is Nomad's limit on a dispatch payload (16 KiB).
	MaxPayloadBytes = 16 << 10
	// MaxMetaEntries, MaxMetaKeyBytes and MaxMetaValueBytes bound JobSpec.Meta.
	MaxMetaEntries    = 64
	MaxMetaKeyBytes   = 128
	MaxMetaValueBytes = 1024
	// MaxNomadFieldBytes bounds NomadJob, Namespace and Region.
	MaxNomadFieldBytes = 128
	// MaxCatchupWindow is the longest catch-up window a job may ask for.
	MaxCatchupWindow = 7 * 24 * time.Hour
	// ReservedMetaPrefix starts the meta keys paxcron sets on every
	// dispatch (nomad.MetaIdentity and its siblings): a writer refuses a
	// job's own (CheckWritable).
	ReservedMetaPrefix = "paxcron_"
	// MinCatchupWindow is the shortest catch-up window a cron file or an
	// API call may ask for: launches start milliseconds late, seconds
	// after a failover, and one later than its window is skipped, so a
	// shorter window skips launches for no one's benefit (and a JSON
	// number, read as nanoseconds, is caught). The state itself takes any
	// positive window, so that the commands its log holds apply as they
	// always did.
	MinCatchupWindow = time.Second
	// DefaultCatchupWindow replaces a zero CatchupWindow when a job is put.
	DefaultCatchupWindow = 5 * time.Minute
	// MaxChildIDBytes and MaxReasonBytes bound an Outcome. Nomad names a
	// child <parent>/dispatch-<identity>-<unix seconds>-<8 hex>, with no
	// bound of its own: with the longest parent (MaxNomadFieldBytes) and
	// identity (nomad.MaxIdentityBytes) that is 424 bytes, and a child the
	// launcher cannot record would stop every leader in turn.
	MaxChildIDBytes = 512
	MaxReasonBytes  = 1024
	// MaxCommandBytes bounds an encoded command; Decode rejects longer input
	// before decoding anything.
	MaxCommandBytes = 256 << 10
	// MaxBackfillScan bounds the schedule slots one Backfill walks through
	// (a year of a one-minute schedule is 525,600: ask for less at once).
	MaxBackfillScan = 100_000
)

// Operating errors. Every error this package returns wraps one of them.
var (
	// ErrInvalid: a command or spec that can never be applied.
	ErrInvalid = errors.New("state: invalid command")
	// ErrConflict: IfVersion is not the job's current version.
	ErrConflict = errors.New("state: version conflict")
	// ErrNotFound: no such job, or no such open launch.
	ErrNotFound = errors.New("state: not found")
	// ErrDuplicate: a launch already started (or finished) for that time,
	// or a SetClusterID of the ID already set.
	ErrDuplicate = errors.New("state: duplicate launch")
	// ErrStale: a LaunchFinished (or Takeover) from a leader that an
	// applied Takeover has since replaced, or a SetClusterID once another
	// ID is set.
	ErrStale = errors.New("state: from a replaced leader")
	// ErrLimit: applying the command would exceed a bound (MaxJobs,
	// MaxOpenLaunches, Limits).
	ErrLimit = errors.New("state: limit reached")
	// ErrAllOpen: the state holds as many open launches, of all jobs, as
	// its limit (Limits.OpenLaunches); it always comes wrapped with
	// ErrLimit. Unlike one job's limit, what frees room is any launch's
	// conclusion.
	ErrAllOpen = errors.New("all jobs' open launches at the limit")
	// ErrDecode: bytes that are not a command of this format.
	ErrDecode = errors.New("state: cannot decode command")
	// ErrSnapshot: bytes that are not a valid snapshot of this format.
	ErrSnapshot = errors.New("state: invalid snapshot")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Command is one of PutJob, DeleteJob, Pause, Resume, LaunchStarted,
// LaunchFinished, Trigger, Backfill, Takeover and SetClusterID.
type Command interface {
	Kind() Kind
	// Validate checks everything that does not depend on the state: names,
	// the spec (its schedule parses), times and limits.
	Validate() error
}

// Concurrency is a job's policy when a launch comes due while an earlier
// one is still running. The scheduler (next slice) enforces it.
type Concurrency string

// The policies; "" means ConcurrencyAllow.
const (
	ConcurrencyAllow   Concurrency = "allow"
	ConcurrencyForbid  Concurrency = "forbid"
	ConcurrencyReplace Concurrency = "replace"
)

// JobSpec is what a user writes for a job.
type JobSpec struct {
	// Schedule is a cron/schedule expression; ? and H hash the job's name.
	Schedule string
	// TimeZone is an IANA zone name; "" means UTC (see WrittenZone).
	TimeZone    string
	Concurrency Concurrency
	// CatchupWindow is how late a missed launch may still start; zero
	// means DefaultCatchupWindow (stored as such).
	CatchupWindow time.Duration
	// Payload and Meta are passed to Nomad's dispatch. Meta is encoded in
	// key order.
	Payload []byte
	Meta    map[string]string
	// NomadJob is the parameterized Nomad job to dispatch.
	NomadJob  string
	Namespace string
	Region    string
	// AtLeastOnce changes what a new leader does with a launch left open
	// longer than Nomad is sure to remember a dispatch, which a look-up
	// does not find: by default it records the outcome unknown and does
	// not dispatch again (at most once: the child may exist, forgotten);
	// with AtLeastOnce it dispatches again, within the catch-up window, so
	// the launch may run twice but is never lost.
	AtLeastOnce bool
}

// Target is a parameterized Nomad job and its scope: together with the
// launch identity, the scope of Nomad's idempotency token.
type Target struct {
	NomadJob  string
	Namespace string
	Region    string
}

// Child is a Nomad child a launch dispatched, and the target it was
// dispatched to: where to ask whether it still runs.
type Child struct {
	ID     string
	Target Target
}

// validate checks a child read from a snapshot: none at all, or an ID
// and its target.
func (c Child) validate() error {
	if c.ID == "" {
		if c.Target != (Target{}) {
			return fmt.Errorf("a target without a child")
		}
		return nil
	}
	if err := boundedText("child ID", c.ID, MaxChildIDBytes); err != nil {
		return err
	}
	return c.Target.validate()
}

func (t Target) validate() error {
	for _, f := range []struct {
		what     string
		s        string
		required bool
	}{{"Nomad job", t.NomadJob, true}, {"namespace", t.Namespace, false}, {"region", t.Region, false}} {
		if err := nomadField(f.what, f.s, f.required); err != nil {
			return err
		}
	}
	return nil
}

// Target returns the spec's Nomad target.
func (spec JobSpec) Target() Target {
	return Target{NomadJob: spec.NomadJob, Namespace: spec.Namespace, Region: spec.Region}
}

// PutJob creates a job (IfVersion 0: it must not exist) or replaces it
// (IfVersion equal to its current version). At is when the writer proposed
// it; a created job's schedule counts from it.
type PutJob struct {
	Name      string
	Spec      JobSpec
	IfVersion uint64
	At        time.Time
}

// DeleteJob deletes a job if its version is IfVersion (0: any version).
// Its open launches stay open, as orphans, until the leader concludes them:
// a dispatch may be in flight, and its outcome must still be recorded.
type DeleteJob struct {
	Name      string
	IfVersion uint64
}

// Pause marks a job paused; its launches are then recorded as skipped by
// the scheduler. Pausing a paused job is not an error.
type Pause struct{ Name string }

// Resume undoes Pause.
type Resume struct{ Name string }

// LaunchStarted opens the launch of Job for ScheduledAt (a whole second)
// under the spec of SpecVersion. Identity must be Identity(Job, ScheduledAt).
// At is the proposing leader's clock when it proposed the launch: no
// dispatch of it can have happened before, which bounds how long ago Nomad
// may have seen its token (the launcher's memory-horizon rule).
type LaunchStarted struct {
	Job         string
	ScheduledAt time.Time
	Identity    string
	SpecVersion uint64
	At          time.Time
}

// LaunchFinished closes an open launch with its outcome. LaunchKind tells
// a manual launch from a scheduled one at the same time. Term is the
// ballot of the leader that concluded it: once a later leader's Takeover
// is applied, an earlier leader's conclusions are refused (ErrStale), so a
// deposed leader's late proposal cannot overwrite what its successor did.
// StartedSlot, when not zero, is the slot that opened the launch: a
// backfill may open a slot again once it is concluded, under the same
// job, time and kind, and a copy of the first conclusion chosen after that
// (proposed twice, as a lost proposal is) must not close the second
// opening. Zero (entries written before it existed) concludes whichever
// launch is open.
type LaunchFinished struct {
	Job         string
	ScheduledAt time.Time
	LaunchKind  LaunchKind
	Outcome     Outcome
	Term        Term
	StartedSlot uint64
}

// Term is a leader's paxos ballot (round, replica), as the log's
// commands carry it; the zero Term precedes every other.
type Term struct {
	Round   uint64
	Replica uint64
}

// Compare orders terms as paxos orders ballots.
func (t Term) Compare(u Term) int {
	if t.Round != u.Round {
		return cmp.Compare(t.Round, u.Round)
	}
	return cmp.Compare(t.Replica, u.Replica)
}

func (t Term) String() string { return fmt.Sprintf("%d.%d", t.Round, t.Replica) }

// Takeover is the first command of a new leader's launcher: once it is
// applied, the state refuses LaunchFinished from earlier terms. The new
// leader acts on no open launch before its Takeover is applied, so a
// deposed leader's conclusion is either applied before (and seen) or
// refused after.
type Takeover struct {
	Term Term
}

// Trigger opens a manual launch of a job for At (a whole second: the
// request's time), outside its schedule. Its identity ends in "-manual",
// so it never shares a Nomad token with a scheduled launch. Unless Force
// is set, the launcher applies the job's pause and concurrency policy to
// it. A second Trigger for the same or an earlier second is a duplicate:
// a retried request launches once.
type Trigger struct {
	Name  string
	At    time.Time
	Force bool
}

// Backfill opens a launch for each slot of the job's schedule in [From,
// To] that did not run: its last record is skipped or failed (with Force,
// also unknown, or too old to be in the history). A slot that ran, or whose
// launch is open, is left alone, so a retried Backfill opens nothing new.
// The launches keep the slot's identity, hence its Nomad token: Nomad
// itself refuses a second child of a slot that has one. To must not be
// after the job's last scheduled launch (later slots come due by
// themselves). At is the request's time; the catch-up window counts from
// it. Unless Force is set, the launcher applies the pause and concurrency
// policy.
type Backfill struct {
	Name     string
	From, To time.Time
	At       time.Time
	Force    bool
}

// LaunchKind says why a launch exists.
type LaunchKind uint8

// The kinds of launch.
const (
	LaunchScheduled LaunchKind = 0
	LaunchManual    LaunchKind = 1 // opened by Trigger
	LaunchBackfill  LaunchKind = 2 // opened by Backfill
)

func (k LaunchKind) String() string {
	switch k {
	case LaunchScheduled:
		return "scheduled"
	case LaunchManual:
		return "manual"
	case LaunchBackfill:
		return "backfill"
	}
	return "LaunchKind(" + strconv.Itoa(int(k)) + ")"
}

// LaunchIdentity is the identity of a launch of kind: Identity for a
// scheduled or backfilled slot, with "-manual" added for a manual one.
func LaunchIdentity(job string, at time.Time, kind LaunchKind) string {
	if kind == LaunchManual {
		return Identity(job, at) + "-manual"
	}
	return Identity(job, at)
}

// OutcomeKind says how a launch ended.
type OutcomeKind string

// The outcomes.
const (
	// OutcomeDispatched: Nomad accepted the dispatch; ChildID names the child.
	OutcomeDispatched OutcomeKind = "dispatched"
	// OutcomeFailed: the dispatch failed; Reason says why.
	OutcomeFailed OutcomeKind = "failed"
	// OutcomeSkipped: not launched on purpose (paused, outside the catch-up
	// window, job deleted...); Reason says why. A skip under concurrency
	// forbid also names, as ChildID, the child still running, which
	// becomes the job's last child (JobInfo.LastChild).
	OutcomeSkipped OutcomeKind = "skipped"
	// OutcomeUnknown: nobody can tell whether the dispatch happened (fail
	// closed: never re-dispatched blindly).
	OutcomeUnknown OutcomeKind = "unknown"
)

// Outcome is how a launch ended.
type Outcome struct {
	Kind    OutcomeKind
	ChildID string
	Reason  string
}

func (PutJob) Kind() Kind         { return KindPutJob }
func (DeleteJob) Kind() Kind      { return KindDeleteJob }
func (Pause) Kind() Kind          { return KindPause }
func (Resume) Kind() Kind         { return KindResume }
func (LaunchStarted) Kind() Kind  { return KindLaunchStarted }
func (LaunchFinished) Kind() Kind { return KindLaunchFinished }
func (Trigger) Kind() Kind        { return KindTrigger }
func (Backfill) Kind() Kind       { return KindBackfill }
func (Takeover) Kind() Kind       { return KindTakeover }

// Identity is the identity of the launch of job for scheduledAt:
// "<job>-<unix seconds>". It is a pure function of its arguments, so every
// replica and every leader computes the same one, and it is the idempotency
// token paxcron gives Nomad's dispatch: a launch dispatched twice (a leader
// that lost the reply, a new leader after failover) creates one child.
func Identity(job string, scheduledAt time.Time) string {
	return job + "-" + strconv.FormatInt(scheduledAt.Unix(), 10)
}

// ValidName reports whether name is a valid job name: 1 to MaxNameBytes
// bytes of [a-zA-Z0-9_.-], valid in a Nomad job ID.
func ValidName(name string) error {
	if len(name) == 0 || len(name) > MaxNameBytes {
		return invalid("job name must be 1 to %d bytes, got %d", MaxNameBytes, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
		if !ok {
			return badNameChar(name, i)
		}
	}
	return nil
}

// badNameChar is the error for name's character at byte i, not one a
// name may hold: named as a character (a byte printed as a rune read
// "é" as 'Ã', the first byte of its encoding), or, where name is not
// UTF-8 there, as the byte in hex.
func badNameChar(name string, i int) error {
	r, size := utf8.DecodeRuneInString(name[i:])
	if r == utf8.RuneError && size == 1 {
		return invalid("job name %q: byte %d (%#02x) is not valid UTF-8, nor one of [a-zA-Z0-9_.-]", name, i, name[i])
	}
	return invalid("job name %q: character %q (%U) at byte %d is not one of [a-zA-Z0-9_.-]", name, r, r, i)
}

// Times in commands lie in [1970-01-01, 9999-12-31] UTC: a launch before
// the epoch would have a negative identity.
const (
	minUnixSeconds = 0
	maxUnixSeconds = 253402300799 // 9999-12-31T23:59:59Z
)

func validTime(what string, t time.Time) error {
	if s := t.Unix(); s < minUnixSeconds || s > maxUnixSeconds {
		return invalid("%s %s is outside 1970-9999", what, t.UTC().Format(time.RFC3339))
	}
	return nil
}

func validScheduledAt(t time.Time) error {
	if err := validTime("scheduled time", t); err != nil {
		return err
	}
	if t.Nanosecond() != 0 {
		return invalid("scheduled time %s is not a whole second", t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// nomadField checks NomadJob, Namespace and Region: printable, no spaces.
func nomadField(what, s string, required bool) error {
	switch {
	case required && s == "":
		return invalid("%s is required", what)
	case len(s) > MaxNomadFieldBytes:
		return invalid("%s is longer than %d bytes", what, MaxNomadFieldBytes)
	case !utf8.ValidString(s):
		return invalid("%s is not valid UTF-8", what)
	}
	ascii := true
	for i := 0; i < len(s) && ascii; i++ {
		c := s[i]
		switch {
		case c >= 0x80:
			ascii = false
		case c <= ' ' || c == 0x7f: // control or space: no printable ASCII is
			return invalid("%s %q contains %q", what, s, rune(c))
		}
	}
	if ascii {
		return nil // the common case, without decoding runes
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return invalid("%s %q contains %q", what, s, r)
		}
	}
	return nil
}

func boundedText(what, s string, maxBytes int) error {
	switch {
	case len(s) > maxBytes:
		return invalid("%s is longer than %d bytes", what, maxBytes)
	case !utf8.ValidString(s):
		return invalid("%s is not valid UTF-8", what)
	}
	return nil
}

// ContentHash hashes what a dispatch of spec sends besides its target:
// the payload and the meta. It is FNV-1a (64 bits) over length-prefixed
// fields, the same on every replica and every version.
func ContentHash(spec JobSpec) uint64 {
	return contentHash(spec.Payload, metaPairs(spec.Meta))
}

func contentHash(payload []byte, meta []wireKV) uint64 {
	h := fnv.New64a()
	var n [binary.MaxVarintLen64]byte
	field := func(b []byte) {
		h.Write(binary.AppendUvarint(n[:0], uint64(len(b))))
		h.Write(b)
	}
	field(payload)
	h.Write(binary.AppendUvarint(n[:0], uint64(len(meta))))
	for _, kv := range meta {
		field([]byte(kv.Key))
		field([]byte(kv.Value))
	}
	return h.Sum64()
}

// Validate checks spec as PutJob would for the job name: a writer calls
// it to refuse a bad spec before anything is proposed.
func (spec JobSpec) Validate(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	_, err := spec.parse(name)
	return err
}

// parse validates spec for the job name and returns its schedule.
func (spec *JobSpec) parse(name string) (*schedule.Schedule, error) {
	if err := spec.validateFields(); err != nil {
		return nil, err
	}
	return spec.parseSchedule(name)
}

// ParsedSchedule returns the spec's schedule for the job name, shared with
// the state's memo of schedules when it does not depend on the name (a
// reader must not change it; a Schedule has no methods that do).
func (spec JobSpec) ParsedSchedule(name string) (*schedule.Schedule, error) {
	return spec.parseSchedule(name)
}

// parseSchedule parses the spec's schedule for the job name.
func (spec *JobSpec) parseSchedule(name string) (*schedule.Schedule, error) {
	if s := parsedSchedules.get(spec.TimeZone, spec.Schedule); s != nil {
		return s, nil
	}
	s, err := schedule.Parse(spec.Schedule, schedule.Options{JobName: name, TimeZone: spec.TimeZone})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	parsedSchedules.put(spec.TimeZone, spec.Schedule, s)
	return s, nil
}

// parsedSchedules remembers, for the whole process, the schedules that
// do not depend on the job's name (no ? or H), by zone and expression. A
// job write is validated where it is received, when it is encoded, and
// again when each replica decodes it, and each validation parsed the
// schedule anew (3% of the CPU of API writes in BenchmarkAPI's profile,
// most of it on the replicas' loops); and a million jobs with a few dozen
// distinct expressions hold a few dozen schedules, shared, and restore
// without parsing each. A Schedule is immutable, so sharing one is safe;
// only successes are kept.
//
// The memo is bounded for a process that runs for months, by entries
// (maxParsedSchedules) and bytes (maxParsedScheduleBytes), in two
// generations: the newest takes what is parsed or found in the older;
// once it holds half of either bound, it becomes the older and the older
// is dropped (counted in rotations). A schedule in use is found at least
// once a generation, so it stays shared; one no job uses any more goes
// within two. Found in review: the memo kept the first 65,536 schedules
// it saw for the life of the process, and past them shared no new one.
var parsedSchedules = newScheduleMemo()

const (
	maxParsedSchedules     = 1 << 16
	maxParsedScheduleBytes = 32 << 20
	// scheduleMemoEntryBytes is what an entry takes besides its strings:
	// the Schedule, the key and the map's slot, about.
	scheduleMemoEntryBytes = 200
)

type scheduleKey struct{ zone, expr string }

type scheduleMemo struct {
	mu       sync.RWMutex
	cur, old map[scheduleKey]*schedule.Schedule
	// curBytes and oldBytes are the generations' sizes (memoBytes).
	curBytes, oldBytes int
	rotations          uint64
}

func newScheduleMemo() *scheduleMemo {
	return &scheduleMemo{cur: map[scheduleKey]*schedule.Schedule{}}
}

func memoBytes(k scheduleKey, s *schedule.Schedule) int {
	return len(k.zone) + len(k.expr) + len(s.String()) + scheduleMemoEntryBytes
}

func (c *scheduleMemo) get(zone, expr string) *schedule.Schedule {
	k := scheduleKey{zone, expr}
	c.mu.RLock()
	s, ok := c.cur[k]
	if !ok {
		s = c.old[k]
	}
	c.mu.RUnlock()
	if !ok && s != nil {
		c.mu.Lock()
		c.keep(k, s) // still in use: into the newest generation
		c.mu.Unlock()
	}
	return s
}

func (c *scheduleMemo) put(zone, expr string, s *schedule.Schedule) {
	if s.UsesName() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keep(scheduleKey{zone, expr}, s)
}

// keep puts s in the newest generation, turning it over first if full.
// c.mu held.
func (c *scheduleMemo) keep(k scheduleKey, s *schedule.Schedule) {
	if _, ok := c.cur[k]; ok {
		return
	}
	size := memoBytes(k, s)
	if size > maxParsedScheduleBytes/2 {
		return
	}
	if len(c.cur) >= maxParsedSchedules/2 || c.curBytes+size > maxParsedScheduleBytes/2 {
		c.old, c.oldBytes = c.cur, c.curBytes
		c.cur, c.curBytes = make(map[scheduleKey]*schedule.Schedule, len(c.old)), 0
		c.rotations++
	}
	c.cur[k] = s
	c.curBytes += size
}

// len and size are the schedules the memo holds and their bytes, in both
// generations (a schedule in both counts twice).
func (c *scheduleMemo) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.cur) + len(c.old)
}

func (c *scheduleMemo) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.curBytes + c.oldBytes
}

// validateFields checks everything in spec but its schedule.
func (spec *JobSpec) validateFields() error {
	switch spec.Concurrency {
	case "", ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace:
	default:
		return invalid("concurrency %q is not allow, forbid or replace", spec.Concurrency)
	}
	if spec.CatchupWindow < 0 || spec.CatchupWindow > MaxCatchupWindow {
		return invalid("catch-up window %v is outside 0-%v", spec.CatchupWindow, MaxCatchupWindow)
	}
	if len(spec.Payload) > MaxPayloadBytes {
		return invalid("payload is %d bytes, more than %d", len(spec.Payload), MaxPayloadBytes)
	}
	if err := validMeta(spec.Meta); err != nil {
		return err
	}
	return spec.Target().validate()
}

func validMeta(meta map[string]string) error {
	if len(meta) > MaxMetaEntries {
		return invalid("meta has %d entries, more than %d", len(meta), MaxMetaEntries)
	}
	for _, k := range sortedKeys(meta) {
		if err := validMetaEntry(k, meta[k]); err != nil {
			return err
		}
	}
	return nil
}

func validMetaEntry(k, v string) error {
	if k == "" {
		return invalid("meta has an empty key")
	}
	if err := boundedText("meta key", k, MaxMetaKeyBytes); err != nil {
		return err
	}
	// The label is built only on failure: a restore validates a million
	// specs.
	if len(v) > MaxMetaValueBytes || !utf8.ValidString(v) {
		return boundedText("meta value of "+strconv.Quote(k), v, MaxMetaValueBytes)
	}
	return nil
}

// metaPairs returns meta as key-value pairs in key order, nil if empty:
// the form a job keeps its meta in (a small Go map costs about 300 bytes,
// a million times over) and the wire form.
func metaPairs(meta map[string]string) []wireKV {
	keys := sortedKeys(meta)
	if len(keys) == 0 {
		return nil
	}
	pairs := make([]wireKV, len(keys))
	for i, k := range keys {
		pairs[i] = wireKV{Key: k, Value: meta[k]}
	}
	return pairs
}

// metaMap is the inverse of metaPairs.
func metaMap(pairs []wireKV) map[string]string {
	if len(pairs) == 0 {
		return nil
	}
	meta := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		meta[kv.Key] = kv.Value
	}
	return meta
}

// checkMetaPairs validates meta pairs read from the wire: bounded, valid,
// and in strictly increasing key order (the canonical encoding).
func checkMetaPairs(pairs []wireKV) error {
	if len(pairs) > MaxMetaEntries {
		return fmt.Errorf("meta has %d entries, more than %d", len(pairs), MaxMetaEntries)
	}
	for i, kv := range pairs {
		if i > 0 && kv.Key <= pairs[i-1].Key {
			return fmt.Errorf("meta keys not in strictly increasing order at %q", kv.Key)
		}
		if err := validMetaEntry(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	return nil
}

// normalized returns spec with its defaults filled in and empty
// collections made nil, so that equal specs encode to equal bytes. It
// shares no memory with spec.
func (spec JobSpec) normalized() JobSpec {
	out := spec
	if out.Concurrency == "" {
		out.Concurrency = ConcurrencyAllow
	}
	if out.CatchupWindow == 0 {
		out.CatchupWindow = DefaultCatchupWindow
	}
	out.Payload = cloneBytes(spec.Payload)
	out.Meta = cloneMeta(spec.Meta)
	return out
}

// WrittenZone is the TimeZone a writer (a cron file, the API) puts in a
// spec for the zone a user named: UTC as the default, empty, so that the
// same job written with and without it is the same spec. The state keeps
// whatever a PutJob says: "UTC" from older writers still means UTC.
func WrittenZone(tz string) string {
	if tz == "UTC" {
		return ""
	}
	return tz
}

// Same reports whether a and b are the same spec once defaults are filled
// in: putting b over a job of spec a would change nothing.
func (spec JobSpec) Same(b JobSpec) bool {
	x, y := spec.normalized(), b.normalized()
	return x.Schedule == y.Schedule && x.TimeZone == y.TimeZone && x.Concurrency == y.Concurrency &&
		x.CatchupWindow == y.CatchupWindow && bytes.Equal(x.Payload, y.Payload) && maps.Equal(x.Meta, y.Meta) &&
		x.Target() == y.Target() && x.AtLeastOnce == y.AtLeastOnce
}

// Validate implements Command.
func (c PutJob) Validate() error {
	if err := ValidName(c.Name); err != nil {
		return err
	}
	if err := validTime("put time", c.At); err != nil {
		return err
	}
	if c.Spec.Namespace == "*" {
		// Here, not in the spec's own checks, which a snapshot's jobs
		// pass too: one an older version stored still restores.
		return fmt.Errorf("%w: job %q: %w", ErrInvalid, c.Name, ErrWildcardNamespace)
	}
	_, err := c.Spec.parse(c.Name)
	return err
}

// Validate implements Command.
func (c DeleteJob) Validate() error { return ValidName(c.Name) }

// Validate implements Command.
func (c Pause) Validate() error { return ValidName(c.Name) }

// Validate implements Command.
func (c Resume) Validate() error { return ValidName(c.Name) }

// Validate implements Command.
func (c LaunchStarted) Validate() error {
	if err := ValidName(c.Job); err != nil {
		return err
	}
	if err := validScheduledAt(c.ScheduledAt); err != nil {
		return err
	}
	if want := Identity(c.Job, c.ScheduledAt); c.Identity != want {
		return invalid("identity %q is not %q", c.Identity, want)
	}
	if c.SpecVersion == 0 {
		return invalid("spec version 0")
	}
	return validTime("start time", c.At)
}

// Validate implements Command.
func (c LaunchFinished) Validate() error {
	if err := ValidName(c.Job); err != nil {
		return err
	}
	if err := validScheduledAt(c.ScheduledAt); err != nil {
		return err
	}
	if c.LaunchKind > LaunchBackfill {
		return invalid("launch kind %d", c.LaunchKind)
	}
	return c.Outcome.validate()
}

// Validate implements Command.
func (c Takeover) Validate() error {
	if c.Term == (Term{}) {
		return invalid("takeover by the zero term")
	}
	return nil
}

// Validate implements Command.
func (c Trigger) Validate() error {
	if err := ValidName(c.Name); err != nil {
		return err
	}
	return validScheduledAt(c.At)
}

// Validate implements Command.
func (c Backfill) Validate() error {
	if err := ValidName(c.Name); err != nil {
		return err
	}
	for _, t := range []struct {
		what string
		t    time.Time
	}{{"backfill start", c.From}, {"backfill end", c.To}, {"request time", c.At}} {
		if err := validTime(t.what, t.t); err != nil {
			return err
		}
	}
	if c.To.Before(c.From) {
		return invalid("backfill ends (%s) before it starts (%s)", c.To.UTC().Format(time.RFC3339), c.From.UTC().Format(time.RFC3339))
	}
	return nil
}

func (o Outcome) validate() error {
	if err := boundedText("child ID", o.ChildID, MaxChildIDBytes); err != nil {
		return err
	}
	if err := boundedText("reason", o.Reason, MaxReasonBytes); err != nil {
		return err
	}
	switch o.Kind {
	case OutcomeDispatched:
		if o.ChildID == "" {
			return invalid("a dispatched outcome needs a child ID")
		}
	case OutcomeFailed, OutcomeSkipped:
		if o.Reason == "" {
			return invalid("a %s outcome needs a reason", o.Kind)
		}
	case OutcomeUnknown:
	default:
		return invalid("outcome %q is not dispatched, failed, skipped or unknown", o.Kind)
	}
	return nil
}

// ErrWildcardNamespace says a job named "*" as its namespace: Nomad reads
// it as every namespace in a listing only, and refuses every dispatch.
var ErrWildcardNamespace = errors.New(`namespace "*" is Nomad's wildcard for listings: a dispatch cannot use it; name one namespace, or none for the server's`)

// CheckWritable is what a writer (a cron file, the API) refuses beyond
// Validate: a namespace of "*" and meta keys under ReservedMetaPrefix,
// which would be written and then fail every launch. PutJob's Validate,
// which every replica runs on every logged command, refuses the
// namespace too, so that no path can store one (a log an older version
// wrote may hold one, applied then and refused now: as with the state's
// other rules, replicas that applied it under different versions
// differ); it does not look at the meta keys, so that the commands a
// log already holds apply as they always did. The
// catch-up window's floor (MinCatchupWindow) is each writer's to check:
// zero means the default in the API and is refused in a cron file.
func (spec JobSpec) CheckWritable() error {
	if spec.Namespace == "*" {
		return ErrWildcardNamespace
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Meta)) {
		if strings.HasPrefix(k, ReservedMetaPrefix) {
			return fmt.Errorf("meta key %q: keys starting with %s are reserved: paxcron sets them on every dispatch", k, ReservedMetaPrefix)
		}
	}
	return nil
}

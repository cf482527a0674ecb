package state

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"paxcron/internal/mpack"
)

// Command layout (the same approach as storage/record.go):
//
//	byte 0      format version (commandVersion)
//	byte 1      Kind
//	bytes 2..   the command, msgpack-encoded as an array of its wire
//	            struct's fields (wirePutJob, ...)
//
// Times are [unix seconds, nanoseconds] pairs, durations nanoseconds, and
// Meta a list of [key, value] pairs in key order, so that one command has
// one encoding. The log's entries carry their own checksum (storage), so a
// command has none.
const (
	commandVersion byte = 1
	// snapshotVersion 2 packed each job's history (history.go), 3 keeps
	// each job's last child beside it, and 4 an unknown launch's target
	// in its history entry. Restore still reads them all (before 3 the
	// last child comes from the history, before 4 an unknown launch is
	// taken to be in its job's target) and version 1, whose history was
	// a list of launches. Version 5 writes the content and target of a
	// spec version once per job (wireLaunch.Shared); a version 4 launch
	// carries its own. Version 6 adds the cluster ID to the header
	// (wireHeader.ClusterID); before it the ID is unset.
	snapshotVersion byte = 6
)

var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	// Arrays instead of maps: the version byte fixes the field order.
	h.StructToArray = true
	// A collection is allocated ahead of reading for at most what
	// go-msgpack's default allows (256 KiB of small items, 4,096 larger
	// ones), not as large as a (possibly garbage) length prefix says, and
	// grows as it is read. A byte string is read in steps of this bound,
	// each copying what was read: at 64 (the setting before), a 16 KiB
	// payload took 3.3 ms to decode, on every replica's loop.
	h.MaxInitLen = 0
	h.MaxDepth = 16
	return h
}()

type wireTime struct {
	Sec  int64
	Nsec int64
}

func toWire(t time.Time) wireTime { return wireTime{Sec: t.Unix(), Nsec: int64(t.Nanosecond())} }

// fromWire is the inverse of toWire; the zero time round-trips.
func fromWire(w wireTime) (time.Time, error) {
	if w.Nsec < 0 || w.Nsec >= 1e9 || w.Sec < zeroUnix || w.Sec > maxUnixSeconds {
		return time.Time{}, fmt.Errorf("time (%d, %d) out of range", w.Sec, w.Nsec)
	}
	return time.Unix(w.Sec, w.Nsec).UTC(), nil
}

// zeroUnix is the Unix time of time.Time{}.
var zeroUnix = time.Time{}.Unix()

type wireKV struct {
	Key   string
	Value string
}

type wireSpec struct {
	Schedule      string
	TimeZone      string
	Concurrency   string
	CatchupWindow int64
	Payload       []byte
	Meta          []wireKV
	NomadJob      string
	Namespace     string
	Region        string
	AtLeastOnce   bool // not in snapshot version 1 (nor commands before it)
}

type wirePutJob struct {
	Name      string
	Spec      wireSpec
	IfVersion uint64
	At        wireTime
}

type wireName struct {
	Name      string
	IfVersion uint64 // DeleteJob only; 0 for Pause and Resume
}

type wireLaunchStarted struct {
	Job         string
	ScheduledAt wireTime
	Identity    string
	SpecVersion uint64
	At          wireTime
}

type wireOutcome struct {
	Kind    string
	ChildID string
	Reason  string
}

type wireLaunchFinished struct {
	Job         string
	ScheduledAt wireTime
	Outcome     wireOutcome
	Kind        uint8
	Term        Term
	// Last, so that an entry written without it decodes with zero (a
	// shorter array), and one written with it by a binary that knows it
	// decodes in one that does not (the extra element is skipped).
	StartedSlot uint64
}

type wireTakeover struct {
	Term Term
}

type wireSetClusterID struct {
	ID []byte // ClusterIDBytes
}

type wireTrigger struct {
	Name  string
	At    wireTime
	Force bool
}

type wireBackfill struct {
	Name  string
	From  wireTime
	To    wireTime
	At    wireTime
	Force bool
}

func specToWire(s JobSpec) wireSpec {
	var w wireSpec
	w.Meta = nilIfEmpty(fillWireSpec(&w, s, nil))
	return w
}

// fillWireSpec fills w from s for encoding at once, sharing s's bytes,
// with s's meta appended to meta in key order; it returns that slice, for
// the caller to reuse.
func fillWireSpec(w *wireSpec, s JobSpec, meta []wireKV) []wireKV {
	*w = wireSpec{
		Schedule: s.Schedule, TimeZone: s.TimeZone, Concurrency: string(s.Concurrency),
		CatchupWindow: int64(s.CatchupWindow), Payload: s.Payload,
		NomadJob: s.NomadJob, Namespace: s.Namespace, Region: s.Region, AtLeastOnce: s.AtLeastOnce,
	}
	if len(w.Payload) == 0 {
		w.Payload = nil // canonical: empty is nil
	}
	for _, k := range sortedKeys(s.Meta) {
		meta = append(meta, wireKV{Key: k, Value: s.Meta[k]})
	}
	return meta
}

func specFromWire(w wireSpec) (JobSpec, error) {
	s := JobSpec{
		Schedule: w.Schedule, TimeZone: w.TimeZone, Concurrency: Concurrency(w.Concurrency),
		CatchupWindow: time.Duration(w.CatchupWindow), Payload: cloneBytes(w.Payload),
		NomadJob: w.NomadJob, Namespace: w.Namespace, Region: w.Region, AtLeastOnce: w.AtLeastOnce,
	}
	if err := checkMetaPairs(w.Meta); err != nil {
		return JobSpec{}, err
	}
	s.Meta = metaMap(w.Meta)
	return s, nil
}

// Encode returns the encoding of a valid command.
func Encode(c Command) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var w any
	switch c := c.(type) {
	case PutJob:
		w = &wirePutJob{Name: c.Name, Spec: specToWire(c.Spec), IfVersion: c.IfVersion, At: toWire(c.At)}
	case DeleteJob:
		w = &wireName{Name: c.Name, IfVersion: c.IfVersion}
	case Pause:
		w = &wireName{Name: c.Name}
	case Resume:
		w = &wireName{Name: c.Name}
	case LaunchStarted:
		w = &wireLaunchStarted{Job: c.Job, ScheduledAt: toWire(c.ScheduledAt), Identity: c.Identity, SpecVersion: c.SpecVersion, At: toWire(c.At)}
	case LaunchFinished:
		w = &wireLaunchFinished{Job: c.Job, ScheduledAt: toWire(c.ScheduledAt), Kind: uint8(c.LaunchKind), Term: c.Term, Outcome: wireOutcome{Kind: string(c.Outcome.Kind), ChildID: c.Outcome.ChildID, Reason: c.Outcome.Reason},
			StartedSlot: c.StartedSlot}
	case Takeover:
		w = &wireTakeover{Term: c.Term}
	case SetClusterID:
		w = &wireSetClusterID{ID: clusterIDToWire(c.ID)}
	case Trigger:
		w = &wireTrigger{Name: c.Name, At: toWire(c.At), Force: c.Force}
	case Backfill:
		w = &wireBackfill{Name: c.Name, From: toWire(c.From), To: toWire(c.To), At: toWire(c.At), Force: c.Force}
	default:
		panic(fmt.Sprintf("state: encoding unknown command type %T", c))
	}
	out, err := appendValue([]byte{commandVersion, byte(c.Kind())}, w)
	if err != nil {
		return nil, err
	}
	if len(out) > MaxCommandBytes {
		return nil, invalid("%s is %d bytes encoded, more than %d", c.Kind(), len(out), MaxCommandBytes)
	}
	return out, nil
}

// codecs reuses encoders and decoders: every command is encoded once
// and decoded on every replica.
var codecs = mpack.New(msgpackHandle)

// appendValue appends the msgpack encoding of v to dst.
func appendValue(dst []byte, v any) ([]byte, error) {
	out, err := codecs.Append(dst, v)
	if err != nil {
		return nil, fmt.Errorf("state: encoding %T: %w", v, err)
	}
	return out, nil
}

// decodeValue decodes all of b into v.
func decodeValue(b []byte, v any) error {
	n, err := codecs.Decode(b, v)
	if err != nil {
		return fmt.Errorf("msgpack: %w", err)
	}
	if n != len(b) {
		return fmt.Errorf("%d trailing bytes", len(b)-n)
	}
	return nil
}

func decodeErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDecode, fmt.Sprintf(format, args...))
}

// Decode decodes and validates a command. It returns an error wrapping
// ErrDecode for bytes that are not a command of this format, and one
// wrapping ErrInvalid for a command that fails Validate. It never panics.
func Decode(b []byte) (Command, error) {
	switch {
	case len(b) < 2:
		return nil, decodeErr("%d bytes is shorter than the header", len(b))
	case len(b) > MaxCommandBytes:
		return nil, decodeErr("%d bytes is more than %d", len(b), MaxCommandBytes)
	case b[0] != commandVersion:
		return nil, decodeErr("unknown format version %d", b[0])
	}
	kind, body := Kind(b[1]), b[2:]
	c, err := decodeKind(kind, body)
	if err != nil {
		return nil, decodeErr("%s: %v", kind, err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func decodeKind(kind Kind, body []byte) (Command, error) {
	switch kind {
	case KindPutJob:
		var w wirePutJob
		if err := decodeValue(body, &w); err != nil {
			return nil, err
		}
		return putJobFromWire(w)
	case KindDeleteJob, KindPause, KindResume:
		var w wireName
		if err := decodeValue(body, &w); err != nil {
			return nil, err
		}
		switch {
		case kind == KindDeleteJob:
			return DeleteJob(w), nil
		case w.IfVersion != 0:
			return nil, fmt.Errorf("if-version %d in a command without one", w.IfVersion)
		case kind == KindPause:
			return Pause{Name: w.Name}, nil
		}
		return Resume{Name: w.Name}, nil
	case KindLaunchStarted:
		var w wireLaunchStarted
		if err := decodeValue(body, &w); err != nil {
			return nil, err
		}
		at, err := fromWire(w.ScheduledAt)
		if err != nil {
			return nil, err
		}
		startedAt, err := fromWire(w.At)
		if err != nil {
			return nil, err
		}
		return LaunchStarted{Job: w.Job, ScheduledAt: at, Identity: w.Identity, SpecVersion: w.SpecVersion, At: startedAt}, nil
	case KindLaunchFinished:
		var w wireLaunchFinished
		if err := decodeValue(body, &w); err != nil {
			return nil, err
		}
		at, err := fromWire(w.ScheduledAt)
		if err != nil {
			return nil, err
		}
		o := Outcome{Kind: OutcomeKind(w.Outcome.Kind), ChildID: w.Outcome.ChildID, Reason: w.Outcome.Reason}
		return LaunchFinished{Job: w.Job, ScheduledAt: at, LaunchKind: LaunchKind(w.Kind), Outcome: o, Term: w.Term, StartedSlot: w.StartedSlot}, nil
	case KindTakeover:
		var w wireTakeover
		if err := decodeValue(body, &w); err != nil {
			return nil, err
		}
		return Takeover(w), nil
	case KindSetClusterID:
		var w wireSetClusterID
		if err := decodeValue(body, &w); err != nil {
			return nil, err
		}
		id, err := clusterIDFromWire(w.ID)
		if err != nil {
			return nil, err
		}
		return SetClusterID{ID: id}, nil
	case KindTrigger:
		var w wireTrigger
		if err := decodeValue(body, &w); err != nil {
			return nil, err
		}
		at, err := fromWire(w.At)
		if err != nil {
			return nil, err
		}
		return Trigger{Name: w.Name, At: at, Force: w.Force}, nil
	case KindBackfill:
		var w wireBackfill
		if err := decodeValue(body, &w); err != nil {
			return nil, err
		}
		var ts [3]time.Time
		for i, wt := range []wireTime{w.From, w.To, w.At} {
			t, err := fromWire(wt)
			if err != nil {
				return nil, err
			}
			ts[i] = t
		}
		return Backfill{Name: w.Name, From: ts[0], To: ts[1], At: ts[2], Force: w.Force}, nil
	}
	return nil, fmt.Errorf("unknown kind")
}

func putJobFromWire(w wirePutJob) (Command, error) {
	spec, err := specFromWire(w.Spec)
	if err != nil {
		return nil, err
	}
	at, err := fromWire(w.At)
	if err != nil {
		return nil, err
	}
	return PutJob{Name: w.Name, Spec: spec, IfVersion: w.IfVersion, At: at}, nil
}

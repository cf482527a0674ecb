package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The snapshot's job stream, encoded and decoded without reflection.
//
// A million jobs took go-msgpack 2-3 s each way, a third of a snapshot's
// cost (BENCHMARKS.md). appendJob writes, byte for byte, what go-msgpack
// writes for a wireJob with msgpackHandle (arrays for structs, the
// smallest integer forms, str8 strings, bin byte slices, nil for nil
// slices); TestJobCodecMatchesLibrary holds it to that, so the format is
// the library's and either side may read the other's. readJob accepts
// every msgpack form of each field's type, bounds every length by the
// bytes left, and never panics (FuzzReadJob).

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n < 1<<16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

func appendUint(b []byte, u uint64) []byte {
	switch {
	case u <= math.MaxInt8:
		return append(b, byte(u))
	case u <= math.MaxUint8:
		return append(b, 0xcc, byte(u))
	case u <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(u))
	case u <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(u))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), u)
}

func appendInt(b []byte, i int64) []byte {
	switch {
	case i > math.MaxInt8:
		switch {
		case i <= math.MaxInt16:
			return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(i))
		case i <= math.MaxInt32:
			return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(i))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(i))
	case i >= -32:
		return append(b, byte(i))
	case i >= math.MinInt8:
		return append(b, 0xd0, byte(i))
	case i >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(i))
	case i >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(i))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(i))
}

func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n < 1<<8:
		b = append(b, 0xd9, byte(n))
	case n < 1<<16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func appendBin(b []byte, v []byte) []byte {
	n := len(v)
	switch {
	case v == nil:
		return append(b, 0xc0)
	case n < 1<<8:
		b = append(b, 0xc4, byte(n))
	case n < 1<<16:
		b = binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, v...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

func appendTime(b []byte, t wireTime) []byte {
	return appendInt(appendInt(append(b, 0x92), t.Sec), t.Nsec)
}

func appendSpec(b []byte, s *wireSpec) []byte {
	b = appendArrayLen(b, 10)
	b = appendStr(appendStr(appendStr(b, s.Schedule), s.TimeZone), s.Concurrency)
	b = appendMeta(appendBin(appendInt(b, s.CatchupWindow), s.Payload), s.Meta)
	return appendBool(appendStr(appendStr(appendStr(b, s.NomadJob), s.Namespace), s.Region), s.AtLeastOnce)
}

func appendMeta(b []byte, meta []wireKV) []byte {
	if meta == nil {
		return append(b, 0xc0)
	}
	b = appendArrayLen(b, len(meta))
	for _, kv := range meta {
		b = appendStr(appendStr(append(b, 0x92), kv.Key), kv.Value)
	}
	return b
}

func appendLaunches(b []byte, ls []wireLaunch) []byte {
	if ls == nil {
		return append(b, 0xc0)
	}
	b = appendArrayLen(b, len(ls))
	for i := range ls {
		l := &ls[i]
		b = appendTime(append(b, 0x9e), l.ScheduledAt)
		b = appendTime(appendUint(b, l.SpecVersion), l.StartedAt)
		b = appendUint(appendUint(b, l.StartedSlot), l.FinishedSlot)
		b = appendStr(appendStr(appendStr(append(b, 0x93), l.Outcome.Kind), l.Outcome.ChildID), l.Outcome.Reason)
		b = appendStr(appendStr(appendStr(append(b, 0x93), l.Target.NomadJob), l.Target.Namespace), l.Target.Region)
		b = appendUint(appendBool(appendUint(b, uint64(l.Kind)), l.Force), l.Content)
		b = appendBool(appendBool(appendMeta(appendBin(b, l.Payload), l.Meta), l.AtLeastOnce), l.Shared)
	}
	return b
}

// appendJob appends the msgpack encoding of w.
func appendJob(b []byte, w *wireJob) []byte {
	b = appendStr(appendArrayLen(b, 14), w.Name)
	b = appendSpec(b, &w.Spec)
	b = appendBool(appendUint(appendUint(b, w.Version), w.CreatedVersion), w.Paused)
	for _, t := range [...]wireTime{w.CreatedAt, w.UpdatedAt, w.LastStartedAt, w.NextAt, w.LastTriggered} {
		b = appendTime(b, t)
	}
	b = appendStr(appendLaunches(b, w.Open), w.History)
	c := &w.Counters
	b = append(b, 0x96)
	for _, u := range [...]uint64{c.Started, c.Dispatched, c.Failed, c.Skipped, c.Unknown, c.Duplicates} {
		b = appendUint(b, u)
	}
	t := &w.LastChild.Target
	b = appendStr(append(b, 0x92), w.LastChild.ID)
	return appendStr(appendStr(appendStr(append(b, 0x93), t.NomadJob), t.Namespace), t.Region)
}

// jobReader decodes msgpack values from b; the first error sticks, and
// every later read returns zero values.
type jobReader struct {
	b   []byte
	i   int
	err error
	// in, when not nil, interns what jobs share across one restore.
	in *interner
}

// Interning bounds: short strings only, and a table that stops growing.
const (
	maxInternedBytes = 64
	maxInterned      = 1 << 16
)

var errJobCodec = errors.New("job record")

func (r *jobReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: at byte %d: %s", errJobCodec, r.i, fmt.Sprintf(format, args...))
	}
}

func (r *jobReader) next(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.i {
		r.fail("%d bytes past the end", n)
		return nil
	}
	out := r.b[r.i : r.i+n]
	r.i += n
	return out
}

func (r *jobReader) byte1() byte {
	if b := r.next(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *jobReader) be(n int) uint64 {
	b := r.next(n)
	var u uint64
	for _, c := range b {
		u = u<<8 | uint64(c)
	}
	return u
}

// arrayLen reads an array header; nil reads as -1.
func (r *jobReader) arrayLen() int {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case c&0xf0 == 0x90:
		return int(c & 0x0f)
	case c == 0xdc:
		return int(r.be(2))
	case c == 0xdd:
		return int(r.be(4))
	case c == 0xc0:
		return -1
	}
	r.fail("byte %#x is not an array", c)
	return 0
}

// fields reads a struct's array header, which must hold n fields.
func (r *jobReader) fields(n int) {
	if got := r.arrayLen(); got != n && r.err == nil {
		r.fail("%d fields, want %d", got, n)
	}
}

// integer reads any msgpack integer, as its magnitude and sign.
func (r *jobReader) integer() (u uint64, negative bool) {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0, false
	case c <= 0x7f:
		return uint64(c), false
	case c >= 0xe0:
		return uint64(-int64(int8(c))), true
	case c == 0xcc:
		return r.be(1), false
	case c == 0xcd:
		return r.be(2), false
	case c == 0xce:
		return r.be(4), false
	case c == 0xcf:
		return r.be(8), false
	case c >= 0xd0 && c <= 0xd3:
		n := 1 << (c - 0xd0)
		v := int64(r.be(n) << (64 - 8*n))
		v >>= 64 - 8*n // sign-extend
		if v < 0 {
			return uint64(-v), true
		}
		return uint64(v), false
	}
	r.fail("byte %#x is not an integer", c)
	return 0, false
}

func (r *jobReader) uint() uint64 {
	u, neg := r.integer()
	if neg {
		r.fail("negative where an unsigned integer belongs")
		return 0
	}
	return u
}

func (r *jobReader) uint8() uint8 {
	u := r.uint()
	if u > math.MaxUint8 {
		r.fail("%d does not fit a byte", u)
		return 0
	}
	return uint8(u)
}

func (r *jobReader) int() int64 {
	u, neg := r.integer()
	switch {
	case neg && u > 1<<63:
		r.fail("integer below the int64 range")
		return 0
	case neg:
		return -int64(u-1) - 1
	case u > math.MaxInt64:
		r.fail("integer above the int64 range")
		return 0
	}
	return int64(u)
}

func (r *jobReader) str() string { return r.text(false) }

// shared reads a string other jobs likely hold too, and interns it.
func (r *jobReader) shared() string { return r.text(true) }

// raw reads a string or bin and returns its bytes, nil for a nil; they
// share r's input.
func (r *jobReader) raw() []byte {
	c := r.byte1()
	var n int
	switch {
	case r.err != nil:
		return nil
	case c&0xe0 == 0xa0:
		n = int(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n = int(r.be(1))
	case c == 0xda || c == 0xc5:
		n = int(r.be(2))
	case c == 0xdb || c == 0xc6:
		n = int(r.be(4))
	case c == 0xc0:
		return nil
	default:
		r.fail("byte %#x is not a string", c)
		return nil
	}
	return r.next(n)
}

func (r *jobReader) text(intern bool) string {
	b := r.raw()
	if len(b) == 0 || !intern || r.in == nil || len(b) > maxInternedBytes {
		return string(b)
	}
	if s, ok := r.in.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(r.in.strs) < maxInterned {
		r.in.strs[s] = s
	}
	return s
}

func (r *jobReader) bool() bool {
	switch c := r.byte1(); {
	case r.err != nil:
	case c == 0xc3:
		return true
	case c == 0xc2:
	default:
		r.fail("byte %#x is not a bool", c)
	}
	return false
}

func (r *jobReader) time() wireTime {
	r.fields(2)
	return wireTime{Sec: r.int(), Nsec: r.int()}
}

// count reads an array header for a list of at most limit elements, each
// at least one byte long; nil reads as 0.
func (r *jobReader) count(limit int) int {
	n := r.arrayLen()
	switch {
	case n < 0:
		return 0
	case n > limit || n > len(r.b)-r.i:
		r.fail("a list of %d elements (limit %d, %d bytes left)", n, limit, len(r.b)-r.i)
		return 0
	}
	return n
}

func (r *jobReader) spec(s *wireSpec, version byte) {
	if version == 1 {
		r.fields(9)
	} else {
		r.fields(10)
	}
	s.Schedule, s.TimeZone, s.Concurrency = r.shared(), r.shared(), r.shared()
	s.CatchupWindow, s.Payload = r.int(), r.raw() // shares b: the caller copies it
	s.Meta = r.meta()
	s.NomadJob, s.Namespace, s.Region = r.shared(), r.shared(), r.shared()
	if version != 1 {
		s.AtLeastOnce = r.bool()
	}
}

func (r *jobReader) meta() []wireKV {
	start := r.i
	n := r.count(MaxMetaEntries)
	if n == 0 {
		return nil
	}
	if r.in != nil {
		// Many jobs carry the same meta (a team, a tier): one list for
		// all, found by its encoding. A job's meta is never modified.
		if end, ok := r.skipMeta(n); ok {
			if shared, ok := r.in.metas[string(r.b[start:end])]; ok {
				r.i = end
				return shared
			}
		}
	}
	meta := make([]wireKV, n)
	for i := range meta {
		r.fields(2)
		meta[i] = wireKV{Key: r.shared(), Value: r.shared()}
	}
	if r.in != nil && r.err == nil && len(r.in.metas) < maxInterned {
		r.in.metas[string(r.b[start:r.i])] = meta
	}
	return meta
}

// skipMeta returns where the n [key, value] pairs that follow end, without
// decoding them, and whether they are well formed enough to tell.
func (r *jobReader) skipMeta(n int) (int, bool) {
	peek := jobReader{b: r.b, i: r.i}
	for range n {
		peek.fields(2)
		peek.raw()
		peek.raw()
	}
	return peek.i, peek.err == nil
}

// interner shares, across the jobs of one restore, what many of them hold
// equal: short strings (zones, Nomad targets, meta, common schedules,
// outcome kinds) and whole meta lists. A million jobs then hold one copy
// of each, and decoding one allocates little.
type interner struct {
	strs  map[string]string
	metas map[string][]wireKV // by their encoding
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, metas: map[string][]wireKV{}}
}

func (r *jobReader) launches(limit int, version byte) []wireLaunch {
	n := r.count(limit)
	if n == 0 {
		return nil
	}
	out := make([]wireLaunch, n)
	for i := range out {
		l := &out[i]
		switch {
		case version == 1:
			r.fields(9)
		case version < 5:
			r.fields(13)
		default:
			r.fields(14)
		}
		l.ScheduledAt, l.SpecVersion, l.StartedAt = r.time(), r.uint(), r.time()
		l.StartedSlot, l.FinishedSlot = r.uint(), r.uint()
		r.fields(3)
		l.Outcome = wireOutcome{Kind: r.shared(), ChildID: r.str(), Reason: r.shared()}
		r.fields(3)
		l.Target = Target{NomadJob: r.shared(), Namespace: r.shared(), Region: r.shared()}
		l.Kind, l.Force = r.uint8(), r.bool()
		if version != 1 {
			l.Content, l.Payload, l.Meta = r.uint(), r.raw(), r.meta() // the payload shares b
			l.AtLeastOnce = r.bool()
		}
		if version >= 5 {
			l.Shared = r.bool()
		}
	}
	return out
}

// readJob decodes one wireJob from the front of b and returns the bytes it
// took. Payloads and the packed history share b: the caller copies what
// it keeps. in, when not nil, interns what jobs share, across calls.
//
// version is the snapshot's format version: version 1 held the history as
// a list of launches (w.HistoryV1), version 2 holds it packed (w.History,
// sharing b's bytes).
func readJob(b []byte, w *wireJob, in *interner, version byte) (int, error) {
	r := &jobReader{b: b, in: in}
	if version < 3 {
		r.fields(13)
	} else {
		r.fields(14)
	}
	w.Name = r.str()
	r.spec(&w.Spec, version)
	w.Version, w.CreatedVersion, w.Paused = r.uint(), r.uint(), r.bool()
	w.CreatedAt, w.UpdatedAt, w.LastStartedAt, w.NextAt, w.LastTriggered = r.time(), r.time(), r.time(), r.time(), r.time()
	w.version = version
	w.Open = r.launches(MaxOpenLaunches, version)
	if version == 1 {
		w.History, w.HistoryV1 = "", r.launches(v1HistoryLen, version)
	} else {
		w.History, w.HistoryV1 = r.str(), nil // the job keeps this copy
	}
	r.fields(6)
	c := &w.Counters
	c.Started, c.Dispatched, c.Failed, c.Skipped, c.Unknown, c.Duplicates = r.uint(), r.uint(), r.uint(), r.uint(), r.uint(), r.uint()
	if version >= 3 {
		r.fields(2)
		w.LastChild.ID = r.str()
		r.fields(3)
		w.LastChild.Target = Target{NomadJob: r.shared(), Namespace: r.shared(), Region: r.shared()}
	} else {
		w.LastChild = Child{}
	}
	return r.i, r.err
}

package state

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// history is a job's finished launches, oldest first, at most HistoryLen,
// packed into one byte slice: a count byte, then one entry per launch.
// A Launch struct and its child ID cost about 300 bytes; a packed entry
// about 25, which is what lets a million jobs keep a history in under a
// KiB each. The empty history is "". It is a string, not a byte slice:
// the packed bytes never change once made (add makes a new history), and a
// string header is 8 bytes smaller, a million times over.
//
// An entry is self-contained, so the oldest is dropped by slicing:
//
//	head         launch kind (bits 0-1), force (2), outcome (3-4),
//	             child form (5-6), has a reason (7)
//	uvarint      scheduled time, Unix seconds (a whole second)
//	varint       start time's seconds less the scheduled time's
//	uvarint      start time's nanoseconds
//	uvarint      spec version
//	uvarint      started slot
//	uvarint      finished slot less started slot (at least 1)
//	child        by its form (below)
//	reason       uvarint length, bytes
//	target       an unknown outcome only: where its child may be (below)
//
// The child ID is stored relative to the prefix Nomad gives a dispatch
// whose IdPrefixTemplate is the launch identity,
// "<parent>/dispatch-<identity>-", where parent is the job's current
// Nomad job (an edit of the spec that changes it repacks the history):
//
//	childNone      no child ID
//	childVerbatim  uvarint length, bytes: an ID without the prefix
//	childNomad     the prefix, then "<unix>-<8 lowercase hex>": varint
//	               unix less the scheduled time, 4 bytes
//	childPrefixed  the prefix, then uvarint length, bytes
//
// An unknown launch's child, if it exists, is in the target the launch
// dispatched to, which the forbid and replace policies search: byte 0,
// the job's current target; or byte 1, then its Nomad job, namespace and
// region, each a uvarint length and bytes, where the job has moved since
// (an edit of the target repacks the history). Snapshot versions before
// 4 did not keep it (readEntry's legacy): their unknown launches are taken
// to be in the job's target, which is where those versions searched.
//
// The encoding is canonical: a history read from a snapshot is accepted
// only if packing its launches again gives the same bytes, so replicas
// that restored a snapshot and replicas that applied the log hold the
// same bytes.
type history string

const (
	childNone byte = iota
	childVerbatim
	childNomad
	childPrefixed
)

// outcomeCodes numbers the outcome kinds in an entry's head.
var outcomeCodes = [...]OutcomeKind{OutcomeDispatched, OutcomeFailed, OutcomeSkipped, OutcomeUnknown}

func outcomeCode(k OutcomeKind) byte {
	for i, c := range outcomeCodes {
		if c == k {
			return byte(i)
		}
	}
	panic(fmt.Sprintf("state: packing unvalidated outcome %q", k))
}

// ReasonNotKept is the reason a failed or skipped launch reads with when
// its history did not keep the reason it concluded with, the histories'
// reasons being at their limit (MaxHistoryReasonBytes). Such an entry is
// packed with no reason, which no conclusion makes: a failure or skip
// needs one.
const ReasonNotKept = "reason not kept: the histories' reasons were at their limit (MaxHistoryReasonBytes)"

// histEntry is one decoded history entry; child and reason share the packed
// bytes.
type histEntry struct {
	kind        LaunchKind
	force       bool
	outcome     OutcomeKind
	scheduled   int64
	startedSec  int64
	startedNsec int64
	specVersion uint64
	startedSlot uint64
	// finishedSlot is startedSlot plus the stored difference.
	finishedSlot uint64
	childForm    byte
	childUnix    int64   // childNomad
	childHex     [4]byte // childNomad
	child        string  // childVerbatim: the ID; childPrefixed: the rest
	reason       string
	// moved says an unknown launch went to target, not to the job's
	// current target.
	moved  bool
	target Target
}

// targetIn returns where e's launch went, cur being the job's target.
func (e *histEntry) targetIn(cur Target) Target {
	if e.moved {
		return e.target
	}
	return cur
}

// entryFormat is how entries are packed: the current way, or the legacy
// one of snapshot versions before 4, without an unknown launch's target.
type entryFormat bool

const (
	entryCurrent entryFormat = false
	entryLegacy  entryFormat = true
)

// len returns how many launches h holds.
func (h history) len() int {
	if len(h) == 0 {
		return 0
	}
	return int(h[0])
}

// add returns h with l appended and, at HistoryLen, one launch dropped:
// the oldest not concluded unknown, or the oldest if all were. A launch
// concluded unknown may have a child that still runs, which the forbid
// and replace policies find only through the history (Machine.Unknown):
// found in review, a forbid job paused for HistoryLen slots forgot one
// and started a child beside it. It allocates the result to its exact
// size: the history is most of a job's memory. name is the job's, cur
// its target.
func (h history) add(l *Launch, name string, cur Target) history {
	n, kept := h.len(), ""
	if n > 0 {
		kept = string(h[1:])
	}
	if n == HistoryLen {
		kept, n = dropOne(kept, name), n-1
	}
	var buf [64]byte
	packed := appendEntry(buf[:0], l, name, cur)
	var out strings.Builder
	out.Grow(1 + len(kept) + len(packed))
	out.WriteByte(byte(n + 1))
	out.WriteString(kept)
	out.Write(packed)
	return history(out.String())
}

// dropOne returns the packed entries with the oldest not concluded
// unknown taken out, or the oldest if every one was.
func dropOne(entries, name string) string {
	var e histEntry
	first := -1
	for at := 0; at < len(entries); {
		size, err := readEntry(entries[at:], &e, entryCurrent)
		if err != nil {
			panic(fmt.Sprintf("state: job %q: history corrupt in memory: %v", name, err))
		}
		if first < 0 {
			first = size
		}
		if e.outcome != OutcomeUnknown {
			return entries[:at] + entries[at+size:]
		}
		at += size
	}
	if first < 0 {
		panic(fmt.Sprintf("state: job %q: dropping a launch from an empty history", name))
	}
	return entries[first:]
}

// reasonBytes is the bytes of the reasons h keeps.
func (h history) reasonBytes() int {
	n := 0
	h.each(func(e *histEntry) bool {
		n += len(e.reason)
		return true
	})
	return n
}

// withoutReasons returns h with no reasons kept; name is the job's, cur
// its target.
func (h history) withoutReasons(name string, cur Target) history {
	if h.len() == 0 {
		return h
	}
	var out history
	for _, l := range h.launches(name, cur) {
		l.Outcome.Reason = ""
		out = out.add(&l, name, cur)
	}
	return out
}

// each calls fn on every entry, oldest first, until fn returns false. h is
// in memory, hence valid: a malformed entry is a bug.
func (h history) each(fn func(e *histEntry) bool) {
	if len(h) == 0 {
		return
	}
	b := string(h[1:])
	var e histEntry
	for range int(h[0]) {
		n, err := readEntry(b, &e, entryCurrent)
		if err != nil {
			panic(fmt.Sprintf("state: history corrupt in memory: %v", err))
		}
		if !fn(&e) {
			return
		}
		b = b[n:]
	}
}

// launches returns h's launches (Identity left empty), nil if none; cur
// is the job's target.
func (h history) launches(name string, cur Target) []Launch {
	if h.len() == 0 {
		return nil
	}
	out := make([]Launch, 0, h.len())
	h.each(func(e *histEntry) bool {
		out = append(out, e.launch(name, cur))
		return true
	})
	return out
}

// repack returns h packed against a new target: an edit that moved the
// job keeps the child IDs its launches had, and where its unknown
// launches went.
func (h history) repack(name string, old, cur Target) history {
	if old == cur || h.len() == 0 {
		return h
	}
	var out history
	for _, l := range h.launches(name, old) {
		out = out.add(&l, name, cur)
	}
	return out
}

// appendEntry packs l, a finished launch of the job name whose target is
// cur. An unknown launch must carry its target.
func appendEntry(b []byte, l *Launch, name string, cur Target) []byte {
	parent := cur.NomadJob
	sched := l.ScheduledAt.Unix()
	form, unix, hex, rest := splitChild(l.Outcome.ChildID, childPrefix(parent, name, sched, l.Kind), sched)
	reason := l.Outcome.Reason
	if reason == ReasonNotKept && needsReason(l.Outcome.Kind) {
		reason = "" // as it was packed: launch reads it back so
	}
	head := byte(l.Kind) | boolBit(l.Force)<<2 | outcomeCode(l.Outcome.Kind)<<3 | form<<5 | boolBit(reason != "")<<7
	b = append(b, head)
	b = binary.AppendUvarint(b, uint64(sched))
	b = binary.AppendVarint(b, l.StartedAt.Unix()-sched)
	b = binary.AppendUvarint(b, uint64(l.StartedAt.Nanosecond()))
	b = binary.AppendUvarint(b, l.SpecVersion)
	b = binary.AppendUvarint(b, l.StartedSlot)
	b = binary.AppendUvarint(b, l.FinishedSlot-l.StartedSlot)
	switch form {
	case childVerbatim, childPrefixed:
		b = binary.AppendUvarint(b, uint64(len(rest)))
		b = append(b, rest...)
	case childNomad:
		b = binary.AppendVarint(b, unix-sched)
		b = append(b, hex[:]...)
	}
	if reason != "" {
		b = binary.AppendUvarint(b, uint64(len(reason)))
		b = append(b, reason...)
	}
	if l.Outcome.Kind == OutcomeUnknown {
		switch l.Target {
		case Target{}:
			panic(fmt.Sprintf("state: packing unknown launch %s without its target", LaunchIdentity(name, l.ScheduledAt, l.Kind)))
		case cur:
			b = append(b, 0)
		default:
			b = append(b, 1)
			for _, f := range [...]string{l.Target.NomadJob, l.Target.Namespace, l.Target.Region} {
				b = binary.AppendUvarint(b, uint64(len(f)))
				b = append(b, f...)
			}
		}
	}
	return b
}

// needsReason reports whether a conclusion of kind k must give a reason
// (Outcome.validate), so that one packed without says it was not kept.
func needsReason(k OutcomeKind) bool { return k == OutcomeFailed || k == OutcomeSkipped }

func boolBit(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// childPrefix returns the prefix of a child ID Nomad made for the launch:
// "<parent>/dispatch-<identity>-".
func childPrefix(parent, name string, sched int64, kind LaunchKind) string {
	return parent + "/dispatch-" + LaunchIdentity(name, time.Unix(sched, 0), kind) + "-"
}

// splitChild says how child is stored against prefix.
func splitChild(child, prefix string, sched int64) (form byte, unix int64, hex [4]byte, rest string) {
	switch {
	case child == "":
		return childNone, 0, hex, ""
	case len(child) <= len(prefix) || child[:len(prefix)] != prefix:
		return childVerbatim, 0, hex, child
	}
	rest = child[len(prefix):]
	if unix, hex, ok := parseNomadSuffix(rest); ok && childTimeFits(unix, sched) {
		return childNomad, unix, hex, ""
	}
	return childPrefixed, 0, hex, rest
}

// maxChildTimeOffset bounds how far a child ID's Unix time may lie from
// its launch's scheduled time in the Nomad form, so that the offset packs
// and unpacks without overflow. A child ID further off (no Nomad makes one,
// but the log carries whatever a leader recorded) is kept in the prefixed
// form, as text.
const maxChildTimeOffset = 1 << 62

// childTimeFits reports whether a child made at unix, of a launch
// scheduled at sched, can be packed in the Nomad form.
func childTimeFits(unix, sched int64) bool {
	return childOffsetFits(unix - sched) // no overflow: both are at least 0
}

// childOffsetFits reports whether d, a child's time less its launch's
// scheduled time, is one the Nomad form holds.
func childOffsetFits(d int64) bool {
	return d <= maxChildTimeOffset && d >= -maxChildTimeOffset
}

// parseNomadSuffix parses "<unix>-<8 lowercase hex>" written canonically:
// a decimal without sign or leading zero.
func parseNomadSuffix(s string) (unix int64, hex [4]byte, ok bool) {
	dash := len(s) - 9
	if dash < 1 || s[dash] != '-' {
		return 0, hex, false
	}
	digits := s[:dash]
	if digits[0] == '0' && len(digits) > 1 {
		return 0, hex, false
	}
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, hex, false
		}
	}
	unix, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, hex, false
	}
	for i := range 4 {
		hi, ok1 := lowerHex(s[dash+1+2*i])
		lo, ok2 := lowerHex(s[dash+2+2*i])
		if !ok1 || !ok2 {
			return 0, hex, false
		}
		hex[i] = hi<<4 | lo
	}
	return unix, hex, true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

const hexDigits = "0123456789abcdef"

// launch materializes e for the job name whose target is cur. Only an
// unknown launch keeps its target.
func (e *histEntry) launch(name string, cur Target) Launch {
	parent := cur.NomadJob
	l := Launch{
		Job: name, ScheduledAt: time.Unix(e.scheduled, 0).UTC(), SpecVersion: e.specVersion,
		StartedAt: time.Unix(e.startedSec, e.startedNsec).UTC(), Kind: e.kind, Force: e.force,
		StartedSlot: e.startedSlot, FinishedSlot: e.finishedSlot,
		Outcome: Outcome{Kind: e.outcome, Reason: e.reason},
	}
	if e.reason == "" && needsReason(e.outcome) {
		l.Outcome.Reason = ReasonNotKept
	}
	l.Outcome.ChildID = e.childID(name, parent)
	if e.outcome == OutcomeUnknown {
		l.Target = e.targetIn(cur)
	}
	return l
}

func (e *histEntry) childID(name, parent string) string {
	switch e.childForm {
	case childVerbatim:
		return e.child
	case childPrefixed:
		return childPrefix(parent, name, e.scheduled, e.kind) + e.child
	case childNomad:
		b := make([]byte, 0, 96)
		b = append(b, childPrefix(parent, name, e.scheduled, e.kind)...)
		b = strconv.AppendInt(b, e.childUnix, 10)
		b = append(b, '-')
		for _, x := range e.childHex {
			b = append(b, hexDigits[x>>4], hexDigits[x&15])
		}
		return string(b)
	}
	return ""
}

// readEntry decodes the entry at the front of b into e and returns its
// length. It checks the encoding only (minimal varints, lengths within b
// and their limits, field ranges); checkHistory checks the meaning. A
// restore reads millions, so it is written for speed: one cursor, varints
// decoded in place.
func readEntry(b string, e *histEntry, format entryFormat) (int, error) {
	if len(b) == 0 {
		return 0, errEntry(0, "truncated")
	}
	head := b[0]
	*e = histEntry{
		kind: LaunchKind(head & 3), force: head&4 != 0, outcome: outcomeCodes[head>>3&3],
		childForm: head >> 5 & 3,
	}
	i := 1
	var v uint64
	var ok bool
	if v, i, ok = uvarintAt(b, i); !ok || v > maxUnixSeconds {
		return 0, errField(b, i, "scheduled time")
	}
	e.scheduled = int64(v)
	if v, i, ok = uvarintAt(b, i); !ok {
		return 0, errField(b, i, "start time")
	}
	d := unzigzag(v)
	if d > maxUnixSeconds || d < -maxUnixSeconds {
		return 0, errEntry(i, "start time %d seconds from the scheduled time", d)
	}
	e.startedSec = e.scheduled + d
	if v, i, ok = uvarintAt(b, i); !ok || v >= 1e9 {
		return 0, errField(b, i, "start nanoseconds")
	}
	e.startedNsec = int64(v)
	if e.specVersion, i, ok = uvarintAt(b, i); !ok {
		return 0, errField(b, i, "spec version")
	}
	if e.startedSlot, i, ok = uvarintAt(b, i); !ok {
		return 0, errField(b, i, "started slot")
	}
	if v, i, ok = uvarintAt(b, i); !ok || v == 0 || e.startedSlot+v < e.startedSlot {
		return 0, errField(b, i, "finished slot")
	}
	e.finishedSlot = e.startedSlot + v
	switch e.childForm {
	case childVerbatim, childPrefixed:
		if e.child, i, ok = bytesAt(b, i, MaxChildIDBytes); !ok || len(e.child) == 0 {
			return 0, errEntry(i, "bad child ID")
		}
	case childNomad:
		if v, i, ok = uvarintAt(b, i); !ok {
			return 0, errField(b, i, "child time")
		}
		d := unzigzag(v)
		if !childOffsetFits(d) || e.scheduled+d < 0 {
			return 0, errEntry(i, "child time out of range")
		}
		if len(b)-i < 4 {
			return 0, errEntry(i, "child ID truncated")
		}
		e.childUnix = e.scheduled + d
		copy(e.childHex[:], b[i:i+4])
		i += 4
	}
	if head&0x80 != 0 {
		if e.reason, i, ok = bytesAt(b, i, MaxReasonBytes); !ok || len(e.reason) == 0 {
			return 0, errField(b, i, "reason")
		}
	}
	if e.outcome != OutcomeUnknown || format == entryLegacy {
		return i, nil
	}
	switch {
	case i >= len(b):
		return 0, errEntry(i, "target: truncated")
	case b[i] == 0:
		return i + 1, nil
	case b[i] != 1:
		return 0, errEntry(i, "target: tag %d, want 0 or 1", b[i])
	}
	i++
	e.moved = true
	for _, f := range [...]*string{&e.target.NomadJob, &e.target.Namespace, &e.target.Region} {
		if *f, i, ok = bytesAt(b, i, MaxNomadFieldBytes); !ok {
			return 0, errField(b, i, "target")
		}
	}
	return i, nil
}

func errEntry(at int, format string, args ...any) error {
	return fmt.Errorf("history entry at byte %d: "+format, append([]any{at}, args...)...)
}

// errField reports a field that did not read, saying why.
func errField(b string, at int, what string) error {
	why := "out of range"
	switch _, n := uvarint(b[min(at, len(b)):]); {
	case n == 0:
		why = "truncated"
	case n < 0:
		why = "varint too long"
	case b[at+n-1] == 0 && n > 1:
		why = "varint not minimal"
	}
	return errEntry(at, "%s: %s", what, why)
}

// uvarint is binary.Uvarint on a string.
func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s); i++ {
		if i == binary.MaxVarintLen64 {
			return 0, -(i + 1) // overflow
		}
		c := s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -(i + 1) // overflow
			}
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// uvarintAt decodes the minimal uvarint at b[i:] and returns it and the
// index after it; ok is false if it is truncated, too long or not minimal.
func uvarintAt(b string, i int) (v uint64, next int, ok bool) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1, true // most fields fit a byte
	}
	v, n := uvarint(b[min(i, len(b)):])
	if n <= 0 || b[i+n-1] == 0 {
		return 0, i, false
	}
	return v, i + n, true
}

func unzigzag(u uint64) int64 {
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// bytesAt reads a uvarint length and that many bytes, at most limit.
func bytesAt(b string, i, limit int) (string, int, bool) {
	n, i, ok := uvarintAt(b, i)
	if !ok || n > uint64(limit) || n > uint64(len(b)-i) {
		return "", i, false
	}
	return b[i : i+int(n)], i + int(n), true
}

// checkHistory validates a history read from a snapshot for job j, and
// returns it, packed the current way, and the bytes of its reasons (a
// restore counts them as it reads, not in a second pass).
func checkHistory(b string, j *job, lastSlot uint64, format entryFormat) (history, int, error) {
	if len(b) == 0 {
		return "", 0, nil
	}
	n := int(b[0])
	if n == 0 || n > HistoryLen {
		return "", 0, fmt.Errorf("%d launches, want 1-%d", n, HistoryLen)
	}
	rest := b[1:]
	cur := j.Spec.Target()
	var e histEntry
	unknown, reasons := false, 0
	for i := range n {
		size, err := readEntry(rest, &e, format)
		if err != nil {
			return "", 0, fmt.Errorf("launch %d: %w", i+1, err)
		}
		if err := e.check(j, lastSlot); err != nil {
			return "", 0, fmt.Errorf("launch %s: %w", LaunchIdentity(j.Name, time.Unix(e.scheduled, 0), e.kind), err)
		}
		if !e.canonical(rest[:size], j.Name, cur, format) {
			return "", 0, fmt.Errorf("launch %s: not packed canonically", LaunchIdentity(j.Name, time.Unix(e.scheduled, 0), e.kind))
		}
		unknown = unknown || e.outcome == OutcomeUnknown
		reasons += len(e.reason)
		rest = rest[size:]
	}
	if len(rest) != 0 {
		return "", 0, fmt.Errorf("%d bytes after the last launch", len(rest))
	}
	if format == entryLegacy && unknown {
		return upgradeLegacy(b[1:], n, j.Name, cur), reasons, nil
	}
	return history(b), reasons, nil
}

// upgradeLegacy repacks the n entries of a checked legacy history the
// current way, its unknown launches in the job's target cur.
func upgradeLegacy(b string, n int, name string, cur Target) history {
	var out history
	var e histEntry
	for range n {
		size, err := readEntry(b, &e, entryLegacy)
		if err != nil {
			panic(fmt.Sprintf("state: job %q: checked history no longer reads: %v", name, err))
		}
		l := e.launch(name, cur)
		out = out.add(&l, name, cur)
		b = b[size:]
	}
	return out
}

// arena hands out byte slices cut from shared chunks: a restore copies a
// million payloads with a few hundred allocations. A chunk stays alive
// while any job or launch still holds bytes from it; an edit replaces a
// job's payload, so the chunks go as the restored jobs change, and once
// most are deleted the survivors move out (leaveRestoreMemory).
type arena struct{ chunk []byte }

const arenaChunkBytes = 256 << 10

// copy returns a copy of b from the arena, its capacity its length (an
// append never writes into a neighbour).
func (a *arena) copy(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if len(b) > cap(a.chunk)-len(a.chunk) {
		a.chunk = make([]byte, 0, max(arenaChunkBytes, len(b)))
	}
	start := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	return a.chunk[start:len(a.chunk):len(a.chunk)]
}

// check is checkLaunch for a finished launch, on the packed entry: a
// restore checks millions and materializes none.
func (e *histEntry) check(j *job, lastSlot uint64) error {
	switch {
	case e.kind > LaunchBackfill:
		return fmt.Errorf("launch kind %d", e.kind)
	case e.scheduled < minUnixSeconds:
		return fmt.Errorf("scheduled time %d out of range", e.scheduled)
	case e.kind != LaunchManual && e.scheduled > j.LastStartedAt.Unix():
		return fmt.Errorf("scheduled time after the last started %v", j.LastStartedAt)
	case e.kind == LaunchManual && e.scheduled > j.LastTriggeredAt.Unix():
		return fmt.Errorf("manual launch after the last triggered %v", j.LastTriggeredAt)
	case e.kind == LaunchScheduled && e.force:
		return fmt.Errorf("a scheduled launch cannot be forced")
	case e.startedSec < minUnixSeconds || e.startedSec > maxUnixSeconds:
		return fmt.Errorf("start time %d out of range", e.startedSec)
	case e.startedSlot == 0 || e.finishedSlot > lastSlot:
		return fmt.Errorf("slots %d-%d outside 1-%d", e.startedSlot, e.finishedSlot, lastSlot)
	case e.specVersion < j.CreatedVersion || e.specVersion > j.Version:
		return fmt.Errorf("spec version %d not in %d-%d", e.specVersion, j.CreatedVersion, j.Version)
	case !utf8.ValidString(e.child) || !utf8.ValidString(e.reason):
		return fmt.Errorf("child ID or reason not valid UTF-8")
	case e.childLen(j.Name, j.Spec.NomadJob) > MaxChildIDBytes:
		return fmt.Errorf("child ID longer than %d bytes", MaxChildIDBytes)
	case e.outcome == OutcomeDispatched && e.childForm == childNone:
		return fmt.Errorf("a dispatched outcome needs a child ID")
	case needsReason(e.outcome) && e.reason == ReasonNotKept:
		// appendEntry packs this as no reason; spelled out, it would be
		// counted as kept and dropped uncounted by the next repack.
		return fmt.Errorf("a %s outcome packed with the reason %q, which is written as none", e.outcome, ReasonNotKept)
	case e.moved && e.target.validate() != nil:
		return fmt.Errorf("target: %w", e.target.validate())
	}
	return nil
}

// childLen is the length of the child ID e stands for.
func (e *histEntry) childLen(name, parent string) int {
	prefix := len(parent) + len("/dispatch-") + len(name) + 1 + decimalLen(e.scheduled) + 1
	if e.kind == LaunchManual {
		prefix += len("-manual")
	}
	switch e.childForm {
	case childVerbatim:
		return len(e.child)
	case childPrefixed:
		return prefix + len(e.child)
	case childNomad:
		return prefix + decimalLen(e.childUnix) + 1 + 8
	}
	return 0
}

// decimalLen is len(strconv.FormatInt(v, 10)) for v >= 0, without
// formatting: a restore asks it twice per launch in every history.
func decimalLen(v int64) int {
	u := uint64(v)
	// 1233/4096 is just above log10(2): n is the digit count or one less.
	n := bits.Len64(u) * 1233 >> 12
	if n < len(powersOf10) && u >= powersOf10[n] {
		n++
	}
	return max(n, 1)
}

var powersOf10 = [...]uint64{
	1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
}

// canonical reports whether packed is what appendEntry writes for e (in
// format): the varints are minimal already (readEntry), so what is left
// is the child's form, which must be the one splitChild picks, and a
// moved target, which must not be the job's own.
func (e *histEntry) canonical(packed string, name string, cur Target, format entryFormat) bool {
	if e.moved && e.target == cur {
		return false
	}
	switch e.childForm {
	case childNone:
		return true
	case childNomad:
		return true // the prefix and a canonical suffix: splitChild's pick
	}
	// Rare forms: compare with a fresh packing (allocates).
	l := e.launch(name, cur)
	var buf [64]byte
	got := appendEntry(buf[:0], &l, name, cur)
	if format == entryLegacy && e.outcome == OutcomeUnknown {
		got = got[:len(got)-1] // the target byte (0, the job's own) the legacy format lacks
	}
	return string(got) == packed
}

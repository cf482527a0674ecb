package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// fieldSpec describes one field of an expression.
type fieldSpec struct {
	name           string
	min, max       int // values accepted
	starMax        int // '*' covers min..starMax (day-of-week: 0-6, as 7 is 0)
	hashLo, hashHi int // the range of a plain ?
	names          map[string]int
	namesHint      string
	dom, dow       bool
}

var (
	secondSpec = &fieldSpec{name: "second", min: 0, max: 59, starMax: 59, hashLo: 0, hashHi: 59}
	minuteSpec = &fieldSpec{name: "minute", min: 0, max: 59, starMax: 59, hashLo: 0, hashHi: 59}
	hourSpec   = &fieldSpec{name: "hour", min: 0, max: 23, starMax: 23, hashLo: 0, hashHi: 23}
	domSpec    = &fieldSpec{name: "day-of-month", min: 1, max: 31, starMax: 31, hashLo: 1, hashHi: 28, dom: true}
	monthSpec  = &fieldSpec{name: "month", min: 1, max: 12, starMax: 12, hashLo: 1, hashHi: 12,
		names: map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
			"JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12},
		namesHint: " or a month name (JAN-DEC)"}
	dowSpec = &fieldSpec{name: "day-of-week", min: 0, max: 7, starMax: 6, hashLo: 0, hashHi: 6,
		names:     map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6},
		namesHint: " or a weekday name (SUN-SAT)", dow: true}

	specs5 = []*fieldSpec{minuteSpec, hourSpec, domSpec, monthSpec, dowSpec}
	specs6 = []*fieldSpec{secondSpec, minuteSpec, hourSpec, domSpec, monthSpec, dowSpec}
)

// field is one parsed field.
type field struct {
	mask     uint64
	star     bool // the text starts with '*'
	whole    bool // a single term starting below min+step and running to starMax (see coversWhole)
	resolved string

	hashedName bool // a ? or H term: the field depends on the job's name

	lastDay, lastWeekday bool     // day-of-month L, LW
	nearest              int      // day-of-month nW
	nth                  [7]uint8 // day-of-week d#k
	lastDow              uint8    // day-of-week dL
}

// hashOf is the stable hash behind ? and H; see the package documentation.
// Changing it moves every hashed job.
func hashOf(job, fieldName string) uint64 {
	// FNV-1a 64 (hash/fnv's New64a), written out: a million jobs parse on
	// every restore, and the hasher allocated.
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for i := 0; i < len(job); i++ {
		h = (h ^ uint64(job[i])) * prime64
	}
	h *= prime64 // the separator byte 0: h ^ 0 is h
	for i := 0; i < len(fieldName); i++ {
		h = (h ^ uint64(fieldName[i])) * prime64
	}
	return h
}

// parseField parses one field's text; a non-empty string says what is wrong.
func parseField(spec *fieldSpec, text, job string) (field, string) {
	f := field{star: strings.HasPrefix(text, "*")}
	if !strings.Contains(text, ",") {
		// One term, the common case: no list to split and join.
		r, reason := f.term(spec, text, job, 1)
		if reason != "" {
			return f, reason
		}
		if spec.dow && f.mask&(1<<7) != 0 {
			f.mask = f.mask&^(1<<7) | 1
		}
		f.resolved = r
		return f, ""
	}
	terms := strings.Split(text, ",")
	out := make([]string, len(terms))
	for i, t := range terms {
		r, reason := f.term(spec, t, job, len(terms))
		if reason != "" {
			return f, reason
		}
		out[i] = r
	}
	if spec.dow && f.mask&(1<<7) != 0 {
		f.mask = f.mask&^(1<<7) | 1
	}
	f.resolved = strings.Join(out, ",")
	return f, ""
}

// term parses one list term into f and returns its resolved text.
func (f *field) term(spec *fieldSpec, term, job string, nterms int) (string, string) {
	if term == "" {
		return "", "empty term in a list"
	}
	up := strings.ToUpper(term)
	if spec.dom {
		if done, reason := f.domSpecial(up, nterms); done {
			return term, reason
		}
	}
	if spec.dow {
		if done, reason := f.dowSpecial(spec, up); done {
			return term, reason
		}
	}
	base, stepText, hasStep := strings.Cut(up, "/")
	step := 1
	if hasStep {
		var reason string
		if step, reason = parseStep(spec, stepText); reason != "" {
			return "", reason
		}
	}
	if strings.HasPrefix(base, "?") || strings.HasPrefix(base, "H") {
		return f.hashed(spec, base[1:], step, hasStep, job, nterms)
	}
	lo, hi, reason := rangeOf(spec, base, hasStep)
	if reason != "" {
		return "", reason
	}
	f.set(lo, hi, step)
	f.whole = nterms == 1 && coversWhole(spec, lo, hi, step)
	return term, ""
}

// coversWhole reports whether the term lo-hi/step runs through the whole
// range at its step: it starts within one step of the range's start and
// ends at its top (*, */n, 0-23/n, and as much 1-23/2, which is what a
// hashed ?/2 resolves to when its hash picks 1). A hashed step and the
// resolved text it prints must agree, since the text is what operators
// read and copy. A whole hour field is a cadence only if it matches two
// hours or more (see Schedule.assemble): 1/24 is whole but a fixed hour.
func coversWhole(spec *fieldSpec, lo, hi, step int) bool {
	return lo-spec.min < step && hi >= spec.starMax
}

func (f *field) set(lo, hi, step int) {
	for v := lo; v <= hi; v += step {
		f.mask |= 1 << v
	}
}

// hashed parses the rest of a ? or H term (after the ? and before the /).
func (f *field) hashed(spec *fieldSpec, rest string, step int, hasStep bool, job string, nterms int) (string, string) {
	f.hashedName = true
	lo, hi := spec.hashLo, spec.hashHi
	if hasStep {
		lo, hi = spec.min, spec.starMax
	}
	if rest != "" {
		inner, ok := strings.CutPrefix(rest, "(")
		inner, ok2 := strings.CutSuffix(inner, ")")
		a, b, ok3 := strings.Cut(inner, "-")
		if !ok || !ok2 || !ok3 {
			return "", fmt.Sprintf("after ? expected (lo-hi) or /step, got %q", rest)
		}
		var reason string
		if lo, hi, reason = bounds(spec, a, b); reason != "" {
			return "", reason
		}
	}
	if job == "" {
		return "", "? and H need the job's name to hash, and it is empty"
	}
	h := hashOf(job, spec.name)
	if !hasStep {
		v := lo + int(h%uint64(hi-lo+1))
		f.set(v, v, 1)
		return strconv.Itoa(v), ""
	}
	if step > hi-lo+1 {
		return "", fmt.Sprintf("step %d is larger than the range %d-%d", step, lo, hi)
	}
	start := lo + int(h%uint64(step))
	f.set(start, hi, step)
	f.whole = nterms == 1 && coversWhole(spec, start, hi, step)
	return fmt.Sprintf("%d-%d/%d", start, hi, step), ""
}

// domSpecial handles L, LW and nW; done reports whether the term was one.
func (f *field) domSpecial(up string, nterms int) (done bool, reason string) {
	switch {
	case up == "L":
		f.lastDay = true
		return true, ""
	case up == "LW" || (strings.HasSuffix(up, "W") && isDigits(up[:len(up)-1])):
		if nterms != 1 {
			return true, up + " must be the only term of its field"
		}
		if up == "LW" {
			f.lastWeekday = true
			return true, ""
		}
		n, reason := number(domSpec, up[:len(up)-1])
		f.nearest = n
		return true, reason
	}
	return false, ""
}

// dowSpecial handles d#k and dL; done reports whether the term was one.
func (f *field) dowSpecial(spec *fieldSpec, up string) (done bool, reason string) {
	if d, k, ok := strings.Cut(up, "#"); ok {
		v, reason := value(spec, d)
		if reason != "" {
			return true, reason
		}
		if len(k) != 1 || k[0] < '1' || k[0] > '5' {
			return true, fmt.Sprintf("in %s, %q is not a week of the month (1-5)", up, k)
		}
		f.nth[v%7] |= 1 << (k[0] - '0')
		return true, ""
	}
	if len(up) > 1 && strings.HasSuffix(up, "L") {
		v, reason := value(spec, up[:len(up)-1])
		if reason != "" {
			return true, reason
		}
		f.lastDow |= 1 << (v % 7)
		return true, ""
	}
	return false, ""
}

// rangeOf parses *, a, a-b (the part before any /).
func rangeOf(spec *fieldSpec, base string, hasStep bool) (lo, hi int, reason string) {
	if base == "*" {
		return spec.min, spec.starMax, ""
	}
	if a, b, ok := strings.Cut(base, "-"); ok {
		return bounds(spec, a, b)
	}
	v, reason := value(spec, base)
	if reason != "" {
		return 0, 0, reason
	}
	if hasStep {
		return v, max(v, spec.starMax), ""
	}
	return v, v, ""
}

func bounds(spec *fieldSpec, a, b string) (lo, hi int, reason string) {
	if lo, reason = value(spec, a); reason != "" {
		return 0, 0, reason
	}
	if hi, reason = value(spec, b); reason != "" {
		return 0, 0, reason
	}
	if lo > hi {
		return 0, 0, fmt.Sprintf("range %s-%s starts after it ends", a, b)
	}
	return lo, hi, ""
}

// value parses a number or a name of the field.
func value(spec *fieldSpec, s string) (int, string) {
	if v, ok := spec.names[s]; ok {
		return v, ""
	}
	if !isDigits(s) {
		return 0, fmt.Sprintf("%q is not a number%s", s, spec.namesHint)
	}
	return number(spec, s)
}

func number(spec *fieldSpec, s string) (int, string) {
	if len(s) > 4 {
		return 0, fmt.Sprintf("%s is out of range %d-%d", s, spec.min, spec.max)
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Sprintf("%q is not a number", s)
	}
	if v < spec.min || v > spec.max {
		return 0, fmt.Sprintf("%d is out of range %d-%d", v, spec.min, spec.max)
	}
	return v, ""
}

func parseStep(spec *fieldSpec, s string) (int, string) {
	width := spec.starMax - spec.min + 1
	if !isDigits(s) {
		return 0, fmt.Sprintf("step %q is not a number", s)
	}
	if len(s) > 4 {
		return 0, fmt.Sprintf("step %s is larger than the field's range %d-%d", s, spec.min, spec.starMax)
	}
	n, _ := strconv.Atoi(s)
	switch {
	case n == 0:
		return 0, "step 0 must be at least 1"
	case n > width:
		return 0, fmt.Sprintf("step %d is larger than the field's range %d-%d", n, spec.min, spec.starMax)
	}
	return n, ""
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

package schedule

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"paxcron/cron/tzdb"
)

// Limits on what Parse accepts and how far Next looks.
const (
	// MaxExprBytes is the longest expression Parse accepts.
	MaxExprBytes = 1024
	// SearchYears bounds Next's search: a schedule with no launch within
	// this many years of the given time has none.
	SearchYears = 10
	// MinEvery is the shortest @every duration.
	MinEvery = time.Second
)

// Options are the per-job inputs of Parse besides the expression.
type Options struct {
	// JobName is hashed by ? and H terms; it must not be empty if the
	// expression has one.
	JobName string
	// TimeZone is an IANA zone name such as "Europe/Paris"; "" means UTC.
	TimeZone string
}

// ParseError says which field of an expression is wrong and why.
type ParseError struct {
	Field  string // "minute", "hour", ..., or "expression", "time zone"
	Expr   string // the whole expression as given
	Reason string // e.g. "25 is out of range 0-23"
}

func (e *ParseError) Error() string {
	return "schedule: " + e.Field + ": " + e.Reason
}

// Schedule is a parsed expression for one job. It is immutable and safe
// for concurrent use.
type Schedule struct {
	*zoneInfo // shared by every schedule in the zone
	resolved  string
	every     int64 // seconds; non-zero for @every

	second, minute, hour uint64 // bit i: value i
	dom                  uint64 // bits 1-31
	month                uint64 // bits 1-12
	dow                  uint64 // bits 0-6
	domStar, dowStar     bool   // the field's text starts with '*'
	hourCadence          bool   // the hour field is a cadence: two or more hours through 0-23 at a step (see the DST rules)
	usesName             bool   // a ? or H term hashed the job's name

	lastDay     bool     // L in day-of-month
	lastWeekday bool     // LW
	nearestDay  int      // n of nW, 0 if none
	nthDow      [7]uint8 // bit k: the k-th such weekday of the month
	lastDow     uint8    // bit d: the last weekday d of the month
}

// UsesName reports whether the schedule depends on the job's name (a ? or
// H term). One that does not is the same for every job with the same
// expression and zone, and may be shared: a Schedule is immutable.
func (s *Schedule) UsesName() bool { return s.usesName }

// String returns the resolved expression: hashed terms replaced by the
// values they chose.
func (s *Schedule) String() string { return s.resolved }

// Resolved is String.
func (s *Schedule) Resolved() string { return s.resolved }

// Location returns the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// Parse parses expr for the job and zone in opts.
func Parse(expr string, opts Options) (*Schedule, error) {
	fail := func(field, format string, args ...any) (*Schedule, error) {
		return nil, &ParseError{Field: field, Expr: expr, Reason: fmt.Sprintf(format, args...)}
	}
	if len(expr) > MaxExprBytes {
		return fail("expression", "longer than %d bytes", MaxExprBytes)
	}
	zone, err := loadZone(opts.TimeZone)
	if errors.Is(err, errHostZone) {
		return fail("time zone", "%q is the host's own zone, which differs from machine to machine: name an IANA zone such as Europe/Berlin", opts.TimeZone)
	}
	if err != nil {
		return fail("time zone", "unknown time zone %q", opts.TimeZone)
	}
	text := strings.TrimSpace(expr)
	if strings.HasPrefix(text, "@") {
		return parseMacro(expr, text, zone)
	}
	var fieldStore [6]string // no allocation, as below
	fields, count := splitFields(text, &fieldStore)
	specs := specs5
	switch count {
	case 5:
	case 6:
		specs = specs6
	default:
		return fail("expression", "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got %d", count)
	}
	s := &Schedule{zoneInfo: zone, second: 1}
	var store [6]field // no allocation: a million jobs parse on every restore
	parsed := store[:len(fields)]
	n := len(fields) - 1
	for i, f := range fields {
		p, reason := parseField(specs[i], f, opts.JobName)
		if reason != "" {
			return fail(specs[i].name, "%s", reason)
		}
		parsed[i] = p
		n += len(p.resolved)
		s.usesName = s.usesName || p.hashedName
	}
	var res strings.Builder
	res.Grow(n)
	for i, p := range parsed {
		if i > 0 {
			res.WriteByte(' ')
		}
		res.WriteString(p.resolved)
	}
	s.resolved = res.String()
	if len(fields) == 6 {
		s.second = parsed[0].mask
		parsed = parsed[1:]
	}
	s.assemble(parsed)
	// Named as resolved: "month ?" would not say which month ? chose.
	if reason := s.impossible(parsed[2].resolved, parsed[3].resolved); reason != "" {
		return fail("day-of-month", "%s", reason)
	}
	return s, nil
}

// splitFields is strings.Fields into store: the fields, and how many
// there are (more than store holds when count exceeds len(fields)). Text
// with non-ASCII bytes goes to strings.Fields itself, whose Unicode
// spaces an accepted expression may hold.
func splitFields(text string, store *[6]string) (fields []string, count int) {
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			all := strings.Fields(text)
			return all[:min(len(all), len(store))], len(all)
		}
	}
	for i := 0; i < len(text); {
		for i < len(text) && asciiSpace(text[i]) {
			i++
		}
		start := i
		for i < len(text) && !asciiSpace(text[i]) {
			i++
		}
		if i > start {
			if count < len(store) {
				store[count] = text[start:i]
			}
			count++
		}
	}
	return store[:min(count, len(store))], count
}

func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func (s *Schedule) assemble(p []field) {
	s.minute, s.hour = p[0].mask, p[1].mask
	s.dom, s.month, s.dow = p[2].mask, p[3].mask, p[4].mask
	// A cadence needs two hours or more: a step that yields one hour
	// (1/24, 2-23/22, */24, ?/24) is as daily as the hour written plainly.
	s.hourCadence = p[1].whole && bits.OnesCount64(p[1].mask) > 1
	s.domStar, s.dowStar = p[2].star, p[4].star
	s.lastDay, s.lastWeekday, s.nearestDay = p[2].lastDay, p[2].lastWeekday, p[2].nearest
	s.nthDow, s.lastDow = p[4].nth, p[4].lastDow
}

// maxDays is the longest each month can be.
var maxDays = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// impossible returns why the day-of-month field can never match in the
// chosen months when day-of-week cannot rescue it, or "".
func (s *Schedule) impossible(domText, monthText string) string {
	if s.lastDay || s.lastWeekday || (!s.domStar && !s.dowStar) {
		return ""
	}
	for m := 1; m <= 12; m++ {
		if s.month&(1<<m) == 0 {
			continue
		}
		days := uint64(1)<<(maxDays[m]+1) - 2
		if s.dom&days != 0 || (s.nearestDay != 0 && s.nearestDay <= maxDays[m]) {
			return ""
		}
	}
	return fmt.Sprintf("%s never occurs in month %s", domText, monthText)
}

// zones caches loaded time zones by name. A Location is immutable once
// loaded and safe to share, and loading one reads and parses its zone
// file: a million jobs in a few zones must not hold a million copies.
var zones sync.Map // string -> *zoneInfo

// zoneInfo is a loaded zone and the last transition its file lists.
type zoneInfo struct {
	loc        *time.Location
	lastListed int64 // Unix seconds (see Schedule.zoneAt)
}

var utcZone = &zoneInfo{loc: time.UTC, lastListed: math.MinInt64}

var errHostZone = errors.New("schedule: the host's own time zone")

func loadZone(name string) (*zoneInfo, error) {
	if name == "" || name == "UTC" {
		return utcZone, nil
	}
	if name == "Local" {
		// Go's name for the host's own zone: each replica would compute
		// other times. Found in review.
		return nil, errHostZone
	}
	if z, ok := zones.Load(name); ok {
		return z.(*zoneInfo), nil
	}
	loc, last, err := tzdb.LoadWithLastListed(name)
	if err != nil {
		return nil, err
	}
	actual, _ := zones.LoadOrStore(name, &zoneInfo{loc: loc, lastListed: last})
	return actual.(*zoneInfo), nil
}

func parseMacro(expr, text string, zone *zoneInfo) (*Schedule, error) {
	// Split at any white space, as the fields are (strings.Fields): a
	// tab after @every made the whole an unknown macro (found in review).
	name, arg := text, ""
	if i := strings.IndexFunc(text, unicode.IsSpace); i >= 0 {
		name, arg = text[:i], text[i:]
	}
	name = strings.ToLower(name)
	arg = strings.TrimSpace(arg)
	fail := func(format string, args ...any) (*Schedule, error) {
		return nil, &ParseError{Field: name, Expr: expr, Reason: fmt.Sprintf(format, args...)}
	}
	if name == "@every" {
		d, err := time.ParseDuration(arg)
		switch {
		case arg == "":
			return fail("needs a duration, e.g. @every 1h30m")
		case err != nil:
			return fail("%q is not a duration (e.g. 90s, 1h30m)", arg)
		case d < MinEvery:
			return fail("%s is shorter than the minimum %s", d, MinEvery)
		case d%time.Second != 0:
			return fail("%s is not a whole number of seconds", d)
		}
		return &Schedule{zoneInfo: zone, every: int64(d / time.Second), resolved: "@every " + d.String()}, nil
	}
	std, ok := macros[name]
	if !ok {
		return fail("unknown macro (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every)")
	}
	if arg != "" {
		return fail("takes no argument, got %q", arg)
	}
	s, err := Parse(std, Options{})
	if err != nil {
		panic("schedule: built-in macro does not parse: " + err.Error())
	}
	s.zoneInfo = zone
	s.resolved = name
	return s, nil
}

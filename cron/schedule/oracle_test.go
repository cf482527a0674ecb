package schedule

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"paxcron/cron/tzdb"
)

// The oracle is a slow, independent reading of the rules in the package
// documentation: it checks wall times with the time package and walks
// instants minute by minute.

func bit(mask uint64, v int) bool { return mask&(1<<v) != 0 }

func isWeekday(t time.Time) bool { return t.Weekday() != time.Saturday && t.Weekday() != time.Sunday }

// oracleDay reports whether the date of wall (any zone; its fields are read)
// matches the day fields.
func oracleDay(s *Schedule, wall time.Time) bool {
	y, m, d := wall.Date()
	date := func(day int) time.Time { return time.Date(y, m, day, 12, 0, 0, 0, time.UTC) }
	dim := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
	dom := bit(s.dom, d) || (s.lastDay && d == dim)
	if s.lastWeekday && isWeekday(date(d)) {
		later := false
		for e := d + 1; e <= dim; e++ {
			later = later || isWeekday(date(e))
		}
		dom = dom || !later
	}
	if n := s.nearestDay; n != 0 && n <= dim && isWeekday(date(d)) {
		// d is the weekday nearest to n within the month (ties cannot happen
		// for a weekend day: its neighbours are a Friday and a Monday).
		best := -1
		for e := 1; e <= dim; e++ {
			if isWeekday(date(e)) && (best < 0 || abs(e-n) < abs(best-n)) {
				best = e
			}
		}
		dom = dom || best == d
	}
	wd := int(wall.Weekday())
	dow := bit(s.dow, wd) || bit(uint64(s.nthDow[wd]), (d+6)/7) ||
		(bit(uint64(s.lastDow), wd) && date(d).AddDate(0, 0, 7).Month() != m)
	if s.domStar || s.dowStar {
		return dom && dow
	}
	return dom || dow
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func oracleMatch(s *Schedule, wall time.Time) bool {
	return bit(s.second, wall.Second()) && bit(s.minute, wall.Minute()) && bit(s.hour, wall.Hour()) &&
		bit(s.month, int(wall.Month())) && oracleDay(s, wall)
}

// civilOf returns t's wall clock as a UTC time, for comparisons.
func civilOf(t time.Time) time.Time {
	y, mo, d := t.Date()
	return time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

// oracleLaunches lists the launches in (from, to] of a five-field schedule
// by the documented rules, walking every minute.
func oracleLaunches(s *Schedule, from, to time.Time) []time.Time {
	var out []time.Time
	start := from.Truncate(time.Minute).Add(time.Minute)
	for t := start; !t.After(to); t = t.Add(time.Minute) {
		lt, prev := t.In(s.loc), t.Add(-time.Minute).In(s.loc)
		_, off := lt.Zone()
		_, prevOff := prev.Zone()
		if !s.hourCadence && off > prevOff && gapMatches(s, civilOf(prev), civilOf(lt)) {
			out = append(out, lt) // the first instant after a gap with a match
			continue
		}
		if !oracleMatch(s, civilOf(lt)) {
			continue
		}
		if !s.hourCadence && secondOccurrence(lt) {
			continue
		}
		out = append(out, lt)
	}
	return out
}

// gapMatches reports whether a wall minute strictly between last (the wall
// time a minute before a transition) and first (the one at it) matches.
func gapMatches(s *Schedule, last, first time.Time) bool {
	for w := last.Add(time.Minute); w.Before(first); w = w.Add(time.Minute) {
		if oracleMatch(s, w) {
			return true
		}
	}
	return false
}

func secondOccurrence(lt time.Time) bool {
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if civilOf(lt.Add(-d)).Equal(civilOf(lt)) {
			return true
		}
	}
	return false
}

// randomExpr builds a five-field expression from a menu of terms.
func randomExpr(r *rand.Rand) string {
	menus := [][]string{
		{"*", "0", "30", "*/15", "*/7", "5,35", "0-10/5", "?", "?/20", "59", "45", "15"},
		{"*", "*/2", "2", "1", "3", "1-3", "0,2,4", "?", "9-17", "*/5", "?/6", "1,2"},
		{"*", "*", "1", "15", "L", "LW", "15W", "1W", "31W", "1,15,L", "?", "*/10", "29", "31"},
		{"*", "*", "*", "3,4,10,11", "MAR", "APR,OCT", "*/2", "2"},
		{"*", "*", "1-5", "MON", "SUN,SAT", "5L", "FRI#1", "1#5", "0#2,3#3", "?"},
	}
	f := make([]string, len(menus))
	for i, m := range menus {
		f[i] = m[r.IntN(len(m))]
	}
	return strings.Join(f, " ")
}

// TestNextAgainstOracle compares Next with the oracle on random
// expressions and times, in UTC and in zones with daylight saving time.
func TestNextAgainstOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	zones := []string{"UTC", "America/New_York", "Australia/Sydney", "Australia/Adelaide", "Australia/Lord_Howe"}
	for i := 0; i < 300; i++ {
		expr := randomExpr(r)
		zone := zones[i%len(zones)]
		s, err := Parse(expr, Options{JobName: "oracle", TimeZone: zone})
		if err != nil {
			continue // e.g. day 31 in February only
		}
		from := time.Unix(1735689600+r.Int64N(3*365*86400), int64(r.IntN(1e9))) // 2025-2027
		to := from.Add(40 * 24 * time.Hour)
		got := s.Between(from, to, 1<<20)
		want := oracleLaunches(s, from, to)
		compareLaunches(t, expr+" in "+zone, got, want)
	}
}

// TestNextAroundTransitions runs the oracle over two days around every
// transition of 2025-2026, and of 2045 (past the zone files' explicit
// transitions, where the time package applies the zone's rule), in the DST
// test zones, for schedules with fixed hours and cadences.
func TestNextAroundTransitions(t *testing.T) {
	exprs := []string{
		"0 * * * *", "*/15 * * * *", "*/30 * * * *", "30 * * * *", "0 */2 * * *", "* * * * *",
		"0 2 * * *", "30 2 * * *", "59 2 * * *", "0 3 * * *", "30 1 * * *", "0 1 * * *",
		"15 2 * * *", "45 1 * * *", "0,30 2 * * *", "*/10 1-3 * * *", "* 2 * * *", "* 1 * * *",
		"30 2 * * SUN", "0 2,3 * * *",
	}
	for _, zone := range dstZones(t) {
		loc := mustZone(t, zone)
		windows := append(transitions(loc, 2025, 2027), transitions(loc, 2045, 2046)...)
		// The ends of 2040 and 2044, where ZoneBounds misbehaves (see probeZone).
		windows = append(windows, time.Date(2041, 1, 1, 0, 0, 0, 0, loc), time.Date(2045, 1, 1, 0, 0, 0, 0, loc))
		for _, tr := range windows {
			for _, expr := range exprs {
				s := mustParse(t, expr, "", zone)
				from, to := tr.Add(-26*time.Hour), tr.Add(26*time.Hour)
				compareLaunches(t, expr+" in "+zone, s.Between(from, to, 1<<20), oracleLaunches(s, from, to))
			}
		}
	}
}

func compareLaunches(t *testing.T, what string, got, want []time.Time) {
	t.Helper()
	n := max(len(got), len(want))
	for i := 0; i < n; i++ {
		if i >= len(got) || i >= len(want) || !got[i].Equal(want[i]) {
			t.Errorf("%s: launch %d differs: got %v, want %v (%d vs %d launches)", what, i, at(got, i), at(want, i), len(got), len(want))
			return
		}
	}
}

func at(ts []time.Time, i int) string {
	if i < len(ts) {
		return ts[i].Format(time.RFC3339)
	}
	return "none"
}

func dstZones(t *testing.T) []string {
	return []string{"America/New_York", "Australia/Sydney", "Australia/Adelaide", "Australia/Lord_Howe", "Asia/Kolkata"}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := tzdb.Load(name)
	if err != nil {
		t.Fatalf("zone %s: %v", name, err)
	}
	return loc
}

// transitions returns the instants in [fromYear, toYear) where loc's
// offset changes, found by looking offsets up hour by hour and then
// bisecting (not with ZoneBounds, which Next uses).
func transitions(loc *time.Location, fromYear, toYear int) []time.Time {
	offset := func(t time.Time) int { _, off := t.In(loc).Zone(); return off }
	var out []time.Time
	end := time.Date(toYear, 1, 1, 0, 0, 0, 0, loc)
	for t := time.Date(fromYear, 1, 1, 0, 0, 0, 0, loc); t.Before(end); t = t.Add(time.Hour) {
		lo, hi := t, t.Add(time.Hour)
		if offset(lo) == offset(hi) {
			continue
		}
		for hi.Sub(lo) > time.Second {
			mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
			if offset(mid) == offset(lo) {
				lo = mid
			} else {
				hi = mid
			}
		}
		out = append(out, hi)
	}
	return out
}

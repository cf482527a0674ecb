package schedule

import (
	"fmt"
	"math/bits"
	"time"
)

const (
	secondsPerDay = 86400
	// maxShiftSeconds bounds how far back a zone transition can move the
	// wall clock; used only to skip a look-up far from any transition.
	maxShiftSeconds = 2 * secondsPerDay
	minYear         = 1
	maxYear         = 9999
)

// Next returns the first launch strictly after the given instant, in the
// schedule's zone, and false if there is none within SearchYears years (or
// after is outside the years 1 to 9999). Launches fall on whole seconds.
func (s *Schedule) Next(after time.Time) (time.Time, bool) {
	if y := after.Year(); y < minYear || y > maxYear {
		return time.Time{}, false
	}
	if s.every > 0 {
		return s.nextEvery(after), true
	}
	t := after.Unix() + 1 // the first whole second strictly after `after`
	limit := t + SearchYears*366*secondsPerDay
	for t < limit {
		z := s.zoneAt(t)
		if t == z.start && !s.hourCadence && s.gapLaunch(z) {
			return time.Unix(t, 0).In(s.loc), true
		}
		w, ok := s.nextWall(t+z.offset, limit+z.offset)
		if !ok {
			return time.Time{}, false
		}
		i := w - z.offset
		if z.hasEnd && i >= z.end {
			t = advance(t, z.end)
			continue
		}
		if !s.hourCadence && z.hasStart && i-z.start < maxShiftSeconds {
			// A fixed hour launches at the first occurrence of a wall
			// time only: skip the rest of a fall-back overlap.
			if prev := s.offsetAt(z.start - 1); prev > z.offset && i < z.start+prev-z.offset {
				t = advance(t, z.start+prev-z.offset)
				continue
			}
		}
		return time.Unix(i, 0).In(s.loc), true
	}
	return time.Time{}, false
}

// advance returns to, asserting that the search moves forward: the loop
// in Next terminates because every step does.
func advance(from, to int64) int64 {
	if to <= from {
		panic(fmt.Sprintf("schedule: Next did not move forward: from %d to %d", from, to))
	}
	return to
}

// Between returns the launches in (from, to], at most max of them.
func (s *Schedule) Between(from, to time.Time, max int) []time.Time {
	var out []time.Time
	for t := from; len(out) < max; {
		n, ok := s.Next(t)
		if !ok || n.After(to) {
			break
		}
		out = append(out, n)
		t = n
	}
	return out
}

func (s *Schedule) nextEvery(after time.Time) time.Time {
	u := after.Unix()
	k := u / s.every * s.every
	if u < 0 && k != u {
		k -= s.every // floor, not truncation
	}
	return time.Unix(k+s.every, 0).In(s.loc)
}

// zone is the stretch of time around an instant with one UTC offset.
type zone struct {
	offset           int64 // seconds east of UTC
	start, end       int64 // [start, end), Unix seconds, if has*
	hasStart, hasEnd bool
}

func (s *Schedule) zoneAt(t int64) zone {
	if s.loc == time.UTC {
		return zone{}
	}
	tt := time.Unix(t, 0).In(s.loc)
	_, off := tt.Zone()
	z := zone{offset: int64(off)}
	start, end := tt.ZoneBounds()
	if !start.IsZero() {
		z.start, z.hasStart = start.Unix(), true
		if z.start < s.lastListed && s.lastListed <= t {
			// Past a zone's last listed transition the time package
			// applies the zone's rule, and ZoneBounds gives the start of
			// the rule's period (New Year in UTC, or the rule's last
			// change) even when that listed transition lies inside it:
			// Next missed the overlap or the gap it made, and launched a
			// fixed hour twice or not at all (America/Metlakatla on
			// 2019-01-20, America/Indiana/Winamac on 2007-03-11; found in
			// review).
			z.start = s.lastListed
		}
	}
	if !end.IsZero() {
		z.end, z.hasEnd = end.Unix(), true
	}
	if (z.hasStart && z.start > t) || (z.hasEnd && z.end <= t) {
		return s.probeZone(t, z.offset)
	}
	return z
}

// probeZone finds a short stretch [t, end) with t's offset by looking
// offsets up, for when ZoneBounds returns bounds that do not contain t: it
// does at the end of leap years served by a zone's TZ rule (after its last
// listed transition; golang/go#81583, e.g. Australia/Sydney at the end of
// 2044). It assumes that no offset changes and changes back within an hour.
func (s *Schedule) probeZone(t, offset int64) zone {
	z := zone{offset: offset}
	if s.offsetAt(t-1) != offset {
		z.start, z.hasStart = t, true
	}
	lo, hi := t, t+3600
	if s.offsetAt(hi) == offset {
		z.end, z.hasEnd = hi, true
		return z
	}
	for hi-lo > 1 { // offsetAt(lo) == offset != offsetAt(hi)
		mid := lo + (hi-lo)/2
		if s.offsetAt(mid) == offset {
			lo = mid
		} else {
			hi = mid
		}
	}
	z.end, z.hasEnd = hi, true
	return z
}

func (s *Schedule) offsetAt(t int64) int64 {
	_, off := time.Unix(t, 0).In(s.loc).Zone()
	return int64(off)
}

// gapLaunch reports whether a matching wall time lies in the
// spring-forward gap that ends at z.start.
func (s *Schedule) gapLaunch(z zone) bool {
	prev := s.offsetAt(z.start - 1)
	if prev >= z.offset {
		return false
	}
	_, ok := s.nextWall(z.start+prev, z.start+z.offset)
	return ok
}

// nextWall returns the first matching wall time at or after w and before
// limit. Wall times are seconds since 1970-01-01 00:00 on the wall clock,
// as if the zone were UTC.
func (s *Schedule) nextWall(w, limit int64) (int64, bool) {
	days := floorDiv(w, secondsPerDay)
	sod := w - days*secondsPerDay
	h, mi, sec := int(sod/3600), int(sod/60%60), int(sod%60)
	y, m, d := civil(days)
	for days*secondsPerDay < limit {
		if s.month&(1<<m) == 0 {
			m = nextBit(s.month, m+1)
			if m < 0 {
				y, m = y+1, nextBit(s.month, 1)
				if m < 0 {
					return 0, false // no month: cannot happen after Parse
				}
			}
			d, h, mi, sec = 1, 0, 0, 0
			days = daysOf(y, m, 1)
			continue
		}
		if !s.dayMatches(y, m, d, days) {
			y, m, d, days = nextDay(y, m, d, days)
			h, mi, sec = 0, 0, 0
			continue
		}
		if nh := nextBit(s.hour, h); nh != h {
			if nh < 0 {
				y, m, d, days = nextDay(y, m, d, days)
				h, mi, sec = 0, 0, 0
				continue
			}
			h, mi, sec = nh, 0, 0
		}
		if nm := nextBit(s.minute, mi); nm != mi {
			if nm < 0 {
				h, mi, sec = h+1, 0, 0
				if h == 24 {
					y, m, d, days = nextDay(y, m, d, days)
					h = 0
				}
				continue
			}
			mi, sec = nm, 0
		}
		if ns := nextBit(s.second, sec); ns != sec {
			if ns < 0 {
				mi, sec = mi+1, 0
				if mi == 60 {
					h, mi = h+1, 0
					if h == 24 {
						y, m, d, days = nextDay(y, m, d, days)
						h = 0
					}
				}
				continue
			}
			sec = ns
		}
		r := days*secondsPerDay + int64(h*3600+mi*60+sec)
		return r, r < limit
	}
	return 0, false
}

// nextBit returns the lowest set bit of mask at or above from, or -1.
func nextBit(mask uint64, from int) int {
	if from >= 64 {
		return -1
	}
	m := mask >> uint(from) << uint(from)
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}

func nextDay(y, m, d int, days int64) (int, int, int, int64) {
	d++
	if d > daysIn(y, m) {
		d, m = 1, m+1
		if m > 12 {
			m, y = 1, y+1
		}
	}
	return y, m, d, days + 1
}

// dayMatches applies the day-of-month and day-of-week fields.
func (s *Schedule) dayMatches(y, m, d int, days int64) bool {
	dom := s.domMatches(y, m, d)
	dow := s.dowMatches(m, d, weekday(days), y)
	if s.domStar || s.dowStar {
		return dom && dow
	}
	return dom || dow
}

func (s *Schedule) domMatches(y, m, d int) bool {
	if s.dom&(1<<d) != 0 {
		return true
	}
	if !s.lastDay && !s.lastWeekday && s.nearestDay == 0 {
		return false
	}
	n := daysIn(y, m)
	switch {
	case s.lastDay && d == n:
		return true
	case s.lastWeekday:
		return d == nearestWeekday(y, m, n, n)
	case s.nearestDay != 0 && s.nearestDay <= n:
		return d == nearestWeekday(y, m, s.nearestDay, n)
	}
	return false
}

// nearestWeekday returns the Monday-to-Friday day nearest to day t of a
// month of n days, without leaving the month.
func nearestWeekday(y, m, t, n int) int {
	switch weekday(daysOf(y, m, t)) {
	case 6: // Saturday
		if t == 1 {
			return 3
		}
		return t - 1
	case 0: // Sunday
		if t == n {
			return t - 2
		}
		return t + 1
	}
	return t
}

func (s *Schedule) dowMatches(m, d, wd, y int) bool {
	if s.dow&(1<<wd) != 0 {
		return true
	}
	if s.nthDow[wd]&(1<<((d-1)/7+1)) != 0 {
		return true
	}
	return s.lastDow&(1<<wd) != 0 && d+7 > daysIn(y, m)
}

func daysIn(y, m int) int {
	if m == 2 {
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	}
	return maxDays[m]
}

// weekday returns 0 for Sunday given days since 1970-01-01 (a Thursday).
func weekday(days int64) int {
	return int(((days+4)%7 + 7) % 7)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's civil_from_days).
func civil(days int64) (y, m, d int) {
	z := days + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	y = int(yoe + era*400)
	if m <= 2 {
		y++
	}
	return y, m, d
}

// daysOf is the inverse of civil.
func daysOf(y, m, d int) int64 {
	yy := int64(y)
	if m <= 2 {
		yy--
	}
	era := floorDiv(yy, 400)
	yoe := yy - era*400
	mm := int64(m)
	if mm > 2 {
		mm -= 3
	} else {
		mm += 9
	}
	doy := (153*mm+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

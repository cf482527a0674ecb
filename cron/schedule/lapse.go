package schedule

import (
	"fmt"
	"time"
)

// cycleYears is the Gregorian calendar's period: the days a calendar
// schedule matches in a year repeat every 400 years, so a schedule that
// fires again at all fires again within it.
const cycleYears = 400

// searchSpan is how far past an instant Next looks for a launch.
const searchSpan = SearchYears * 366 * secondsPerDay * time.Second

// maxLapseWalk bounds the launches Lapse walks through in one year to
// find the year's last: only a year whose next launch is years away is
// walked, and the days such a year matches hinge on one alignment of
// weekday and date, a few days at most.
const maxLapseWalk = 1 << 20

// Followable returns why a replicated state, which computes each next
// launch with Next, could not follow the schedule from from: no launch
// within SearchYears, or two launches further apart (Lapse). Every
// writer (the API, job validate) refuses such a schedule with it.
func (s *Schedule) Followable(from time.Time) error {
	if _, ok := s.Next(from); !ok {
		return fmt.Errorf("never fires within %d years of %s", SearchYears, from.UTC().Format(time.RFC3339))
	}
	if last, next, lapses := s.Lapse(from); lapses {
		return fmt.Errorf("fires at %s and next at %s, more than %d years later: no launch after the first would ever come due",
			last.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339), SearchYears)
	}
	return nil
}

// Lapse reports a launch after from, within cycleYears, past which Next
// finds no launch although the schedule fires again later: two launches
// more than SearchYears apart ("0 0 * 2 MON#5" fires on 2044-02-29, then
// on 2072-02-29). A replicated state that computes each next launch with
// Next stops such a job at last for ever, without a record of the slots
// it then never launches; so a writer refuses the schedule. found is
// false when there is no such launch, and for a schedule with no launch
// after from at all (Next says so). last is the launch Next finds nothing
// after; next, when not zero, the launch after it.
func (s *Schedule) Lapse(from time.Time) (last, next time.Time, found bool) {
	if s.every > 0 || s.firesEveryYear() {
		// A cadence never pauses; a schedule that fires in every year
		// has its launches less than two years apart.
		return time.Time{}, time.Time{}, false
	}
	end := from.AddDate(cycleYears, 0, 0)
	n, ok := s.Next(from)
	for ok && n.Before(end) {
		// n is the first launch of its year; e the first after that year.
		y := n.In(s.loc).Year()
		yearEnd := time.Date(y+1, 1, 1, 0, 0, 0, 0, s.loc).Add(-time.Second)
		e, more := s.Next(yearEnd)
		if more && e.Sub(n) <= searchSpan {
			n = e // e is within Next's reach of every launch of the year
			continue
		}
		last := s.lastBefore(n, yearEnd)
		if after, ok := s.Next(last); ok {
			n = after
			continue
		}
		if !more {
			e, more = s.beyond(yearEnd, end)
		}
		if !more {
			return time.Time{}, time.Time{}, false // the schedule ends
		}
		return last, e, true
	}
	return time.Time{}, time.Time{}, false
}

// lastBefore returns the last launch from n (a launch) to limit, walking
// at most maxLapseWalk launches: past them, the last one walked, from
// which Lapse walks on.
func (s *Schedule) lastBefore(n, limit time.Time) time.Time {
	for i := 0; i < maxLapseWalk; i++ {
		m, ok := s.Next(n)
		if !ok || m.After(limit) {
			break
		}
		n = m
	}
	return n
}

// beyond returns the first launch after t, up to end, searching past
// Next's reach a span at a time.
func (s *Schedule) beyond(t, end time.Time) (time.Time, bool) {
	for t = t.Add(searchSpan); t.Before(end); t = t.Add(searchSpan) {
		if n, ok := s.Next(t); ok {
			return n, true
		}
	}
	return time.Time{}, false
}

// firesEveryYear reports whether every year has a day the schedule
// matches: whether a year has one depends only on whether it is a leap
// year and on the weekday it starts on, and 2001-2028 holds all 14 such
// kinds of year. A day matched has a launch: the time fields are never
// empty, and a wall time a zone skips launches at its jump.
func (s *Schedule) firesEveryYear() bool {
	for y := 2001; y <= 2028; y++ {
		if !s.firesIn(y) {
			return false
		}
	}
	return true
}

// firesIn reports whether the schedule matches a day of year y.
func (s *Schedule) firesIn(y int) bool {
	for m := 1; m <= 12; m++ {
		if s.month&(1<<m) == 0 {
			continue
		}
		for d := 1; d <= daysIn(y, m); d++ {
			if s.dayMatches(y, m, d, daysOf(y, m, d)) {
				return true
			}
		}
	}
	return false
}

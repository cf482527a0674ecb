package schedule

import (
	"fmt"
	"math/bits"
	"slices"
	"testing"
	"time"
)

// TestDST pins the documented rules with examples in a northern zone, a
// southern zone, one with a 30-minute offset and one-hour shift
// (Adelaide), and one with a 30-minute shift (Lord Howe). 2025 transitions:
// New York 03-09 02:00->03:00 and 11-02 02:00->01:00; Sydney and Adelaide
// 04-06 03:00->02:00 and 10-05 02:00->03:00; Lord Howe 04-06 02:00->01:30
// and 10-05 02:00->02:30.
func TestDST(t *testing.T) {
	checkLaunches(t, []launchCase{
		// Fixed hour, spring-forward gap: once, at the end of the gap.
		{"America/New_York", "30 2 * * *", "2025-03-08T00:00:00-05:00", 3,
			"2025-03-08T02:30:00-05:00 2025-03-09T03:00:00-04:00 2025-03-10T02:30:00-04:00"},
		{"America/New_York", "0,30 2 * * *", "2025-03-09T00:00:00-05:00", 3,
			"2025-03-09T03:00:00-04:00 2025-03-10T02:00:00-04:00 2025-03-10T02:30:00-04:00"},
		{"America/New_York", "0 2,3 * * *", "2025-03-09T00:00:00-05:00", 2,
			"2025-03-09T03:00:00-04:00 2025-03-10T02:00:00-04:00"},
		{"Australia/Sydney", "30 2 * * *", "2025-10-04T12:00:00+10:00", 2,
			"2025-10-05T03:00:00+11:00 2025-10-06T02:30:00+11:00"},
		{"Australia/Adelaide", "30 2 * * *", "2025-10-04T12:00:00+09:30", 2,
			"2025-10-05T03:00:00+10:30 2025-10-06T02:30:00+10:30"},
		{"Australia/Lord_Howe", "15 2 * * *", "2025-10-04T12:00:00+10:30", 2,
			"2025-10-05T02:30:00+11:00 2025-10-06T02:15:00+11:00"},
		{"Australia/Lord_Howe", "45 2 * * *", "2025-10-04T12:00:00+10:30", 1,
			"2025-10-05T02:45:00+11:00"},
		// Fixed hour, fall-back overlap: once, at the first occurrence.
		{"America/New_York", "30 1 * * *", "2025-11-01T12:00:00-04:00", 2,
			"2025-11-02T01:30:00-04:00 2025-11-03T01:30:00-05:00"},
		{"Australia/Sydney", "30 2 * * *", "2025-04-05T12:00:00+11:00", 2,
			"2025-04-06T02:30:00+11:00 2025-04-07T02:30:00+10:00"},
		{"Australia/Adelaide", "30 2 * * *", "2025-04-05T12:00:00+10:30", 2,
			"2025-04-06T02:30:00+10:30 2025-04-07T02:30:00+09:30"},
		{"Australia/Lord_Howe", "45 1 * * *", "2025-04-05T12:00:00+11:00", 2,
			"2025-04-06T01:45:00+11:00 2025-04-07T01:45:00+10:30"},
		// From inside the second occurrence, the next launch is the next day.
		{"America/New_York", "30 1 * * *", "2025-11-02T01:10:00-05:00", 1,
			"2025-11-03T01:30:00-05:00"},
		// Cadence: every instant whose wall clock matches.
		{"America/New_York", "0 * * * *", "2025-03-09T00:30:00-05:00", 3,
			"2025-03-09T01:00:00-05:00 2025-03-09T03:00:00-04:00 2025-03-09T04:00:00-04:00"},
		{"America/New_York", "0 * * * *", "2025-11-02T00:30:00-04:00", 3,
			"2025-11-02T01:00:00-04:00 2025-11-02T01:00:00-05:00 2025-11-02T02:00:00-05:00"},
		{"Australia/Sydney", "0 * * * *", "2025-04-06T01:30:00+11:00", 3,
			"2025-04-06T02:00:00+11:00 2025-04-06T02:00:00+10:00 2025-04-06T03:00:00+10:00"},
		{"Australia/Adelaide", "*/30 * * * *", "2025-04-06T02:00:00+10:30", 3,
			"2025-04-06T02:30:00+10:30 2025-04-06T02:00:00+09:30 2025-04-06T02:30:00+09:30"},
		{"Australia/Lord_Howe", "*/15 * * * *", "2025-10-05T01:40:00+10:30", 3,
			"2025-10-05T01:45:00+10:30 2025-10-05T02:30:00+11:00 2025-10-05T02:45:00+11:00"},
		{"Australia/Lord_Howe", "0 * * * *", "2025-04-06T00:30:00+11:00", 3,
			"2025-04-06T01:00:00+11:00 2025-04-06T02:00:00+10:30 2025-04-06T03:00:00+10:30"},
		// A stepped term starting within one step of 0 is a cadence too:
		// 01:00 launches at both of its occurrences; one starting later
		// has fixed hours.
		{"America/New_York", "0 1-23/2 * * *", "2025-11-02T00:30:00-04:00", 3,
			"2025-11-02T01:00:00-04:00 2025-11-02T01:00:00-05:00 2025-11-02T03:00:00-05:00"},
		{"America/New_York", "0 1/2 * * *", "2025-11-02T00:30:00-04:00", 3,
			"2025-11-02T01:00:00-04:00 2025-11-02T01:00:00-05:00 2025-11-02T03:00:00-05:00"},
		{"America/New_York", "0 3-23/2 * * *", "2025-11-02T00:30:00-04:00", 1,
			"2025-11-02T03:00:00-05:00"},
		{"America/New_York", "0 2-23/2 * * *", "2025-03-09T00:30:00-05:00", 2,
			"2025-03-09T03:00:00-04:00 2025-03-09T04:00:00-04:00"},
	})
}

// TestDSTCadence checks that cadences keep their period in absolute time
// through two years of transitions.
func TestDSTCadence(t *testing.T) {
	for _, tc := range []struct {
		expr   string
		period time.Duration
		zones  []string
	}{
		{"0 * * * *", time.Hour, []string{"America/New_York", "Australia/Sydney", "Australia/Adelaide", "Asia/Kolkata"}},
		{"*/15 * * * *", 15 * time.Minute, dstZones(t)},
		{"0,30 * * * *", 30 * time.Minute, dstZones(t)},
		{"@every 1h", time.Hour, dstZones(t)},
	} {
		for _, zone := range tc.zones {
			s := mustParse(t, tc.expr, "", zone)
			from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			got := s.Between(from, from.AddDate(2, 0, 0), 1<<20)
			for i := 1; i < len(got); i++ {
				if d := got[i].Sub(got[i-1]); d != tc.period {
					t.Errorf("%s in %s: %v after %v, want %v", tc.expr, zone, got[i], got[i-1], tc.period)
					break
				}
			}
			if want := int(2*365*24*time.Hour/tc.period) - 1; len(got) < want {
				t.Errorf("%s in %s: %d launches in two years, want %d", tc.expr, zone, len(got), want)
			}
		}
	}
}

// TestDSTDailyOnce checks that daily schedules with a fixed hour launch
// exactly once on every local day, gaps and overlaps included.
func TestDSTDailyOnce(t *testing.T) {
	exprs := []string{"0 2 * * *", "30 2 * * *", "59 2 * * *", "0 3 * * *", "0 1 * * *", "30 1 * * *", "45 1 * * *", "15 2 * * *"}
	for _, zone := range dstZones(t) {
		loc := mustZone(t, zone)
		from := time.Date(2025, 1, 1, 0, 0, 0, 0, loc)
		to := time.Date(2027, 1, 1, 0, 0, 0, 0, loc)
		for _, expr := range exprs {
			s := mustParse(t, expr, "", zone)
			perDay := map[string]int{}
			for _, l := range s.Between(from, to, 1<<20) {
				perDay[l.Format(time.DateOnly)]++
			}
			for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
				if n := perDay[d.Format(time.DateOnly)]; n != 1 {
					t.Errorf("%s in %s: %d launches on %s, want 1", expr, zone, n, d.Format(time.DateOnly))
				}
			}
		}
	}
}

// A hashed hour step prints a resolved text (String) that runs as the
// hashed schedule does, through every transition: an operator who reads
// or copies it gets the same launches. Before, ?/2 hashed to 1 ran as a
// cadence but printed 1-23/2, which ran as fixed hours.
func TestDSTHashedStepRunsAsItsResolvedText(t *testing.T) {
	starts := map[string]bool{}
	for i := 0; i < 64; i++ {
		job := "job-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		for _, expr := range []string{"0 ?/2 * * *", "30 ?/3 * * *", "0 ?(0-23)/5 * * *"} {
			for _, zone := range []string{"America/New_York", "Australia/Lord_Howe"} {
				hashed := mustParse(t, expr, job, zone)
				resolved := mustParse(t, hashed.String(), "", zone)
				starts[hashed.String()] = true
				from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
				a := hashed.Between(from, from.AddDate(1, 0, 0), 1<<16)
				b := resolved.Between(from, from.AddDate(1, 0, 0), 1<<16)
				if !slices.EqualFunc(a, b, time.Time.Equal) {
					t.Fatalf("%s for %s in %s resolves to %q, which runs differently (%d launches against %d)",
						expr, job, zone, hashed.String(), len(a), len(b))
				}
			}
		}
	}
	if !starts["0 1-23/2 * * *"] {
		t.Errorf("no job name hashed ?/2 to 1 (resolved: %v): the test checks nothing it was written for", starts)
	}
}

// TestDSTAfterAZonesLastListedTransition: past a zone's last listed
// transition the time package reads the zone's rule, and its ZoneBounds
// reported the start of the rule's period (New Year, or the rule's last
// change) rather than the listed transition inside it, so Next missed
// the fall-back overlap that transition made and launched a fixed hour at
// both occurrences. Metlakatla moved from -08 to -09 at 02:00 on
// 2019-01-20, Ciudad Juárez from -06 to -07 at 00:00 on 2022-11-30, and
// Winamac from -06 to -04 at 02:00 on 2007-03-11, a two-hour gap whose
// launch was lost (found in review).
func TestDSTAfterAZonesLastListedTransition(t *testing.T) {
	checkLaunches(t, []launchCase{
		{"America/Metlakatla", "0 1 * * *", "2019-01-19T12:00:00-08:00", 2,
			"2019-01-20T01:00:00-08:00 2019-01-21T01:00:00-09:00"},
		{"America/Metlakatla", "*/30 1 * * *", "2019-01-20T00:45:00-08:00", 3,
			"2019-01-20T01:00:00-08:00 2019-01-20T01:30:00-08:00 2019-01-21T01:00:00-09:00"},
		{"America/Ciudad_Juarez", "59 23 * * *", "2022-11-29T12:00:00-06:00", 2,
			"2022-11-29T23:59:00-06:00 2022-11-30T23:59:00-07:00"},
		{"America/Indiana/Winamac", "30 2 * * *", "2007-03-10T12:00:00-06:00", 2,
			"2007-03-11T04:00:00-04:00 2007-03-12T02:30:00-04:00"},
	})
	// And the oracle agrees around each of them.
	for _, tc := range []struct {
		zone string
		at   time.Time
	}{
		{"America/Metlakatla", time.Date(2019, 1, 20, 10, 0, 0, 0, time.UTC)},
		{"America/Ciudad_Juarez", time.Date(2022, 11, 30, 6, 0, 0, 0, time.UTC)},
		{"America/Indiana/Winamac", time.Date(2007, 3, 11, 8, 0, 0, 0, time.UTC)},
	} {
		for _, expr := range []string{"0 1 * * *", "30 0 * * *", "59 23 * * *", "30 2 * * *", "*/10 0-3 * * *", "0 * * * *"} {
			s := mustParse(t, expr, "", tc.zone)
			from, to := tc.at.Add(-30*time.Hour), tc.at.Add(30*time.Hour)
			compareLaunches(t, expr+" in "+tc.zone, s.Between(from, to, 1<<20), oracleLaunches(s, from, to))
		}
	}
}

// An hour field that matches exactly one hour is a fixed hour whatever
// its spelling: 1/24, 2-23/22, 13/14, */24 or a hashed ?/24 is as daily
// as 1, 2, 13 or 0, and runs as that hour written plainly. Before, a
// step through 23 that started below its step counted as a cadence even
// when it yielded one hour, so 0 1/24 * * * launched at both 01:00s of a
// fall-back overlap and not at all on a spring-forward day whose gap
// held 02:30 (found in review).
func TestDSTSingleHourStepIsAFixedHour(t *testing.T) {
	checkLaunches(t, []launchCase{
		{"America/New_York", "0 1/24 * * *", "2025-11-01T12:00:00-04:00", 2,
			"2025-11-02T01:00:00-04:00 2025-11-03T01:00:00-05:00"},
		{"America/New_York", "30 1-23/23 * * *", "2025-11-01T12:00:00-04:00", 2,
			"2025-11-02T01:30:00-04:00 2025-11-03T01:30:00-05:00"},
		{"America/New_York", "30 2/24 * * *", "2025-03-08T00:00:00-05:00", 3,
			"2025-03-08T02:30:00-05:00 2025-03-09T03:00:00-04:00 2025-03-10T02:30:00-04:00"},
		{"Australia/Sydney", "30 2/22 * * *", "2025-04-05T12:00:00+11:00", 2,
			"2025-04-06T02:30:00+11:00 2025-04-07T02:30:00+10:00"},
		{"Australia/Lord_Howe", "15 2-23/22 * * *", "2025-10-04T12:00:00+10:30", 2,
			"2025-10-05T02:30:00+11:00 2025-10-06T02:15:00+11:00"},
	})
	// Every spelling of one hour runs as the plain hour, through two
	// years of transitions (Beirut's are at midnight, for */24's 0).
	zones := append(dstZones(t), "Asia/Beirut")
	type spelling struct{ expr, job string }
	var spellings []spelling
	for h := 0; h < 24; h++ {
		spellings = append(spellings, spelling{fmt.Sprintf("30 %d/24 * * *", h), ""},
			spelling{fmt.Sprintf("30 %d-23/24 * * *", h), ""})
		if n := 24 - h; h < n && n < 24 {
			spellings = append(spellings, spelling{fmt.Sprintf("30 %d/%d * * *", h, n), ""})
		}
	}
	spellings = append(spellings, spelling{"30 */24 * * *", ""})
	for i := 0; i < 24; i++ {
		spellings = append(spellings, spelling{"30 ?/24 * * *", fmt.Sprintf("job-%d", i)})
	}
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, zone := range zones {
		for _, sp := range spellings {
			s := mustParse(t, sp.expr, sp.job, zone)
			if bits.OnesCount64(s.hour) != 1 {
				t.Fatalf("%s (%s): hours %b, want one", sp.expr, s.String(), s.hour)
			}
			plain := mustParse(t, fmt.Sprintf("30 %d * * *", bits.TrailingZeros64(s.hour)), "", zone)
			a := s.Between(from, from.AddDate(2, 0, 0), 1<<12)
			b := plain.Between(from, from.AddDate(2, 0, 0), 1<<12)
			if !slices.EqualFunc(a, b, time.Time.Equal) {
				t.Errorf("%s (%s) in %s runs differently from %s: %d launches against %d",
					sp.expr, s.String(), zone, plain.String(), len(a), len(b))
			}
		}
	}
}

// launchCase is a schedule's first n launches in a zone from a time,
// written as launches prints them.
type launchCase struct {
	zone, expr, from string
	n                int
	want             string
}

func checkLaunches(t *testing.T, cases []launchCase) {
	t.Helper()
	for _, tc := range cases {
		if got := launches(t, tc.expr, tc.zone, tc.from, tc.n); got != tc.want {
			t.Errorf("%s in %s from %s:\n got %s\nwant %s", tc.expr, tc.zone, tc.from, got, tc.want)
		}
	}
}

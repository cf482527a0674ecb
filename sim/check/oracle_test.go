package check

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"paxcron/cron/schedule"
)

// oracleCases are the schedules the simulator gives jobs (sim/cron.go),
// with a few more of the same forms.
var oracleCases = []struct{ expr, zone string }{
	{"* * * * * *", ""},
	{"*/2 * * * * *", "America/New_York"},
	{"*/3 * * * * *", "Australia/Sydney"},
	{"@every 4s", ""},
	{"*/5 * 2 * * *", "America/New_York"},
	{"*/5 * 1 * * *", "America/New_York"},
	{"*/2 * 2 * * *", "Australia/Sydney"},
	{"*/3 * 2 * * *", "Australia/Lord_Howe"},
	{"? * * * * *", "Australia/Lord_Howe"},
	{"*/7 * * * * *", ""},
	{"@every 3s", "Australia/Sydney"},
	{"0 0 1 1 *", ""},
	{"*/10 */15 * * * *", "America/New_York"},
	{"0 30 2 * * *", "America/New_York"},
	{"15 0-30/10 1,2 * * *", "Australia/Lord_Howe"},
	{"? ? * * * *", "Australia/Sydney"},
	{"0 0 0-23/2 * * *", "America/New_York"}, // a cadence over the whole range
	{"*/5 * 1/24 * * *", "America/New_York"}, // one hour, however spelt: a fixed hour
	{"0 0 2-23/22 * * *", "Australia/Sydney"},
	{"0 15 1/12 * * *", "Australia/Lord_Howe"}, // two hours 12 apart: a cadence
}

// The oracle agrees with cron/schedule around every daylight-saving
// change the simulator's epochs start at, and at the new year, for every
// schedule the simulator uses. The two share no code: a disagreement is
// a bug in one of them.
func TestOracleAgreesWithSchedule(t *testing.T) {
	starts := []time.Time{
		time.Date(2026, 3, 8, 6, 59, 30, 0, time.UTC), time.Date(2026, 11, 1, 5, 59, 30, 0, time.UTC),
		time.Date(2026, 4, 4, 15, 59, 30, 0, time.UTC), time.Date(2026, 10, 3, 15, 59, 30, 0, time.UTC),
		time.Date(2026, 4, 4, 14, 59, 30, 0, time.UTC), time.Date(2026, 10, 3, 15, 29, 30, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 30, 0, time.UTC),
	}
	for _, c := range oracleCases {
		for _, job := range []string{"j0", "j5"} {
			o, err := NewOracle(c.expr, job, c.zone)
			if err != nil {
				t.Fatalf("%s in %q: %v", c.expr, c.zone, err)
			}
			s, err := schedule.Parse(c.expr, schedule.Options{JobName: job, TimeZone: c.zone})
			if err != nil {
				t.Fatalf("%s in %q: %v", c.expr, c.zone, err)
			}
			for _, start := range starts {
				// Two hours from before the change.
				agree(t, fmt.Sprintf("%s in %q for %s", c.expr, c.zone, job), s, o, start.Add(-90*time.Minute), start.Add(30*time.Minute))
			}
		}
	}
}

// agree compares the oracle and the schedule launch by launch in (from,
// end], and returns how many launches it compared.
func agree(t *testing.T, what string, s *schedule.Schedule, o *Oracle, from, end time.Time) int {
	t.Helper()
	n := 0
	for {
		want, ok := s.Next(from)
		got, err := o.Next(from, end)
		if !ok || want.After(end) {
			if err == nil {
				t.Fatalf("%s after %s: the oracle says %s, the schedule none by %s", what, from.UTC(), got.UTC(), end.UTC())
			}
			return n
		}
		if err != nil || !got.Equal(want) {
			t.Fatalf("%s after %s: the oracle says %s (%v), the schedule %s", what, from.UTC(), got.UTC(), err, want.UTC())
		}
		from = got
		n++
	}
}

// The oracle refuses what it does not read.
func TestOracleRefuses(t *testing.T) {
	for _, expr := range []string{"* * * * MON", "* * * * * 1-5", "L * * * *", "@every 1500ms", "@hourly", "* * *", "?/5 * * * * *", "0 0 ?/2 * * *"} {
		if _, err := NewOracle(expr, "j", ""); err == nil {
			t.Errorf("%q: read", expr)
		}
	}
}

// Random expressions of the forms the oracle reads, in zones with and
// without daylight saving time, from random instants near a change: the
// oracle and cron/schedule agree launch by launch.
func TestOracleAgreesOnRandomExpressions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	menus := [][]string{
		{"*", "0", "30", "*/15", "*/7", "5,35", "0-10/5", "?", "59", "10/20", "1-3"},
		{"*", "*/2", "0", "1-3", "?", "*/10", "15,45", "59"},
		{"*", "*", "1", "2", "3", "1-3", "*/2", "0,2", "?", "1,2", "2-4/2", "0-23/2", "0-23", "1/2", "1-23/2", "2-23/3", "3-23/2", "2/2", "1/24", "2-23/22", "1/23", "*/12", "1/12"},
		{"*", "*", "1", "8", "1-10", "*/2", "?"},
		{"*", "*", "3", "10", "3,4,10,11", "*/2"},
	}
	zones := []string{"", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe", "Europe/London"}
	changes := []time.Time{
		time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC),
		time.Date(2026, 4, 4, 16, 0, 0, 0, time.UTC), time.Date(2026, 10, 3, 16, 0, 0, 0, time.UTC),
		time.Date(2026, 4, 4, 15, 0, 0, 0, time.UTC), time.Date(2026, 10, 3, 15, 30, 0, 0, time.UTC),
		time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC),
	}
	compared, launches := 0, 0
	for i := 0; i < 300; i++ {
		fields := make([]string, 0, 6)
		for _, m := range menus {
			fields = append(fields, m[r.IntN(len(m))])
		}
		expr := strings.Join(append(fields, "*"), " ")
		zone := zones[r.IntN(len(zones))]
		job := fmt.Sprintf("job%d", i)
		s, err := schedule.Parse(expr, schedule.Options{JobName: job, TimeZone: zone})
		if err != nil {
			continue // e.g. a day or month no instant near the changes has
		}
		o, err := NewOracle(expr, job, zone)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		compared++
		change := changes[r.IntN(len(changes))]
		from := change.Add(-time.Duration(r.IntN(3*3600)) * time.Second)
		launches += agree(t, fmt.Sprintf("%q in %q (%s)", expr, zone, job), s, o, from, from.Add(4*time.Hour))
	}
	t.Logf("%d expressions compared, %d launches", compared, launches)
	if compared < 250 || launches < 1500 {
		t.Fatalf("only %d expressions and %d launches compared", compared, launches)
	}
}

// An hour field that matches one hour is a fixed hour whatever its
// spelling: at New York's fall-back (06:00Z on 2026-11-01, 01:00 EDT to
// 01:00 EST) 1/24 launches at the first 01:00 only, as 1 does; 1/12, two
// hours, is a cadence and launches at both. Before, the oracle read any
// step through 23 that started below its step as a cadence.
func TestOracleSingleHourStepIsAFixedHour(t *testing.T) {
	first := time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC) // 01:00 EDT
	for _, tc := range []struct {
		expr string
		want []time.Time
	}{
		{"0 0 1 * * *", []time.Time{first}},
		{"0 0 1/24 * * *", []time.Time{first}},
		{"0 0 1-23/23 * * *", []time.Time{first}},
		{"0 0 1/23 * * *", []time.Time{first}},
		{"0 0 1/12 * * *", []time.Time{first, first.Add(time.Hour)}},
	} {
		o, err := NewOracle(tc.expr, "j", "America/New_York")
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		var got []time.Time
		from, end := first.Add(-time.Hour), first.Add(3*time.Hour)
		for {
			at, err := o.Next(from, end)
			if err != nil {
				break
			}
			got = append(got, at.UTC())
			from = at
		}
		if !slices.EqualFunc(got, tc.want, time.Time.Equal) {
			t.Errorf("%s in New York from %s: launches %v, want %v", tc.expr, first.Add(-time.Hour), got, tc.want)
		}
	}
}

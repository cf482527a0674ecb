package schedule

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestLapse: a schedule whose launches can be more than SearchYears
// apart is found, with the launch Next finds nothing after; one that
// fires within reach of each launch, or never again, is not.
func TestLapse(t *testing.T) {
	from := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		expr, zone string
		from       time.Time
		last, next string // RFC 3339; empty: no lapse
	}{
		// The fifth Monday of February (a Monday 29th): 2044, then 2072.
		{"0 0 * 2 MON#5", "", time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC), "2044-02-29T00:00:00Z", "2072-02-29T00:00:00Z"},
		// Not within reach of from at all: Next says so, no lapse to find.
		{"0 0 * 2 MON#5", "", from, "", ""},
		// The 1st of February on a Monday: 2027, then 2038.
		{"0 0 */31 2 MON", "", from, "2027-02-01T00:00:00Z", "2038-02-01T00:00:00Z"},
		// Every second of it: the year's last launch is the one.
		{"* * * */31 2 MON", "", from, "2027-02-01T23:59:59Z", "2038-02-01T00:00:00Z"},
		// In a zone: the launch is that zone's.
		{"30 9 */31 2 MON", "Australia/Sydney", from, "2027-01-31T22:30:00Z", "2038-01-31T22:30:00Z"},
		// A leap day on a Sunday: 2032, then 2060.
		{"0 0 29 2 */7", "", from, "2032-02-29T00:00:00Z", "2060-02-29T00:00:00Z"},
		// Every leap day: 2096, then 2104, eight years on.
		{"0 0 29 2 *", "", time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC), "", ""},
		{"*/5 * * * *", "America/New_York", from, "", ""},
		{"0 0 13 * FRI", "", from, "", ""},
		{"@every 8760h", "", from, "", ""},
	} {
		s := mustParse(t, c.expr, "job", c.zone)
		last, next, found := s.Lapse(c.from)
		if c.last == "" {
			if found {
				t.Errorf("%q from %v: a lapse after %v (next %v); want none", c.expr, c.from, last, next)
			}
			continue
		}
		if !found || last.UTC().Format(time.RFC3339) != c.last || next.UTC().Format(time.RFC3339) != c.next {
			t.Errorf("%q from %v: lapse %v, %v after %v; want after %s, next %s", c.expr, c.from, found, next, last, c.last, c.next)
			continue
		}
		if _, ok := s.Next(last); ok {
			t.Errorf("%q: Next finds a launch after %v, which Lapse says it does not", c.expr, last)
		}
	}
}

// TestFiresEveryYearAgreesWithNext: the shortcut that passes a schedule
// without walking its years says every year has a launch exactly when
// Next finds one in each year of a 400-year cycle, on random expressions
// and the rare ones (a leap day, a weekday on a date).
func TestFiresEveryYearAgreesWithNext(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	exprs := []string{"0 0 29 2 *", "0 0 * 2 MON#5", "0 0 */31 2 MON", "0 0 29 2 */7", "0 0 30W 4 *", "0 0 LW 2 *", "0 0 */31 3 FRI"}
	for range 200 {
		exprs = append(exprs, randomExpr(r))
	}
	for _, expr := range exprs {
		s, err := Parse(expr, Options{JobName: "job"})
		if err != nil {
			continue
		}
		want := true
		for y := 2026; y < 2026+cycleYears && want; y++ {
			n, ok := s.Next(time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second))
			want = ok && n.Year() == y
		}
		if got := s.firesEveryYear(); got != want {
			t.Errorf("%q: firesEveryYear %v, Next says %v", expr, got, want)
		}
	}
}

package schedule

import (
	"strings"
	"testing"
	"time"
)

// launches formats the first n launches after from (RFC 3339 in zone).
func launches(t *testing.T, expr, zone, from string, n int) string {
	t.Helper()
	s := mustParse(t, expr, "job", zone)
	at, err := time.Parse(time.RFC3339, from)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := 0; i < n; i++ {
		next, ok := s.Next(at)
		if !ok {
			out = append(out, "none")
			break
		}
		out = append(out, next.Format(time.RFC3339))
		at = next
	}
	return strings.Join(out, " ")
}

func TestNextUTC(t *testing.T) {
	const from = "2025-01-30T23:59:30Z" // a Thursday
	for _, tc := range []struct {
		expr string
		n    int
		want string
	}{
		{"*/5 * * * *", 3, "2025-01-31T00:00:00Z 2025-01-31T00:05:00Z 2025-01-31T00:10:00Z"},
		{"*/20 * * * * *", 3, "2025-01-30T23:59:40Z 2025-01-31T00:00:00Z 2025-01-31T00:00:20Z"},
		{"30 9 * * 1-5", 3, "2025-01-31T09:30:00Z 2025-02-03T09:30:00Z 2025-02-04T09:30:00Z"},
		{"0 0 * * SAT,sun", 3, "2025-02-01T00:00:00Z 2025-02-02T00:00:00Z 2025-02-08T00:00:00Z"},
		{"0 0 * * 7", 2, "2025-02-02T00:00:00Z 2025-02-09T00:00:00Z"},
		{"0 12 1 FEB-APR/2 *", 3, "2025-02-01T12:00:00Z 2025-04-01T12:00:00Z 2026-02-01T12:00:00Z"},
		{"0 0 29 2 *", 2, "2028-02-29T00:00:00Z 2032-02-29T00:00:00Z"},
		{"0 0 31 * *", 3, "2025-01-31T00:00:00Z 2025-03-31T00:00:00Z 2025-05-31T00:00:00Z"},
		{"0 0 L * *", 3, "2025-01-31T00:00:00Z 2025-02-28T00:00:00Z 2025-03-31T00:00:00Z"},
		{"0 0 LW * *", 3, "2025-01-31T00:00:00Z 2025-02-28T00:00:00Z 2025-03-31T00:00:00Z"},
		{"0 0 LW 5 *", 1, "2025-05-30T00:00:00Z"},   // May 31 2025 is a Saturday
		{"0 0 1W 3 *", 1, "2025-03-03T00:00:00Z"},   // March 1 2025 is a Saturday: not February 28
		{"0 0 30W 11 *", 1, "2025-11-28T00:00:00Z"}, // November 30 2025 is a Sunday: not December 1
		{"0 0 15W * *", 2, "2025-02-14T00:00:00Z 2025-03-14T00:00:00Z"},
		{"0 0 * * FRI#3", 2, "2025-02-21T00:00:00Z 2025-03-21T00:00:00Z"},
		{"0 0 * * 1#5", 2, "2025-03-31T00:00:00Z 2025-06-30T00:00:00Z"},
		{"0 0 * * 5L", 2, "2025-01-31T00:00:00Z 2025-02-28T00:00:00Z"},
		// Both day fields restricted: either matches (Vixie cron).
		{"0 0 13 * FRI", 3, "2025-01-31T00:00:00Z 2025-02-07T00:00:00Z 2025-02-13T00:00:00Z"},
		// A day field starting with '*' is unrestricted: both must match.
		{"0 0 */2 * FRI", 2, "2025-01-31T00:00:00Z 2025-02-07T00:00:00Z"},
		{"@hourly", 2, "2025-01-31T00:00:00Z 2025-01-31T01:00:00Z"},
		{"@weekly", 1, "2025-02-02T00:00:00Z"},
		{"@yearly", 1, "2026-01-01T00:00:00Z"},
		{"@every 1h", 2, "2025-01-31T00:00:00Z 2025-01-31T01:00:00Z"},
		{"@every 7m", 1, "2025-01-31T00:02:00Z"}, // 1738281720 = 420 * 4138766
	} {
		if got := launches(t, tc.expr, "", from, tc.n); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.expr, got, tc.want)
		}
	}
}

// TestNever checks schedules that parse but never fire within the bound.
func TestNever(t *testing.T) {
	// The fifth Monday of February: 2016, then 2044.
	for _, expr := range []string{"0 0 * 2 1#5", "0 0 * FEB MON#5"} {
		s := mustParse(t, expr, "", "")
		if next, ok := s.Next(time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)); ok {
			t.Errorf("%s: Next = %v, want none within %d years", expr, next, SearchYears)
		}
		if next, ok := s.Next(time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)); !ok || next.Year() != 2044 {
			t.Errorf("%s from 2040: Next = %v %v, want February 2044", expr, next, ok)
		}
	}
	s := mustParse(t, "* * * * *", "", "")
	for _, at := range []time.Time{time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if next, ok := s.Next(at); ok {
			t.Errorf("Next(%v) = %v, want none outside years 1-9999", at, next)
		}
	}
}

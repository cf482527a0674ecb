package schedule

import (
	"testing"
	"time"
)

var fuzzZones = []string{"", "America/New_York", "Australia/Sydney", "Australia/Adelaide", "Australia/Lord_Howe", "Asia/Kolkata"}

// FuzzParseNext checks that Parse never panics, that the resolved
// expression parses to the same schedule, and that Next terminates and is
// strictly increasing from arbitrary instants.
func FuzzParseNext(f *testing.F) {
	for _, e := range []string{
		"*/5 * * * *", "0 ? * * *", "30 9 * * 1-5", "0 0 L * *", "0 0 15W * *", "0 0 * * FRI#3",
		"0 0 * * 5L", "*/10 * * * * *", "@every 90m", "@daily", "?(0-7)/3 H * * *", "30 2 * * *",
	} {
		f.Add(e, "job", uint8(1), int64(1741500000))
	}
	f.Fuzz(func(t *testing.T, expr, job string, zone uint8, at int64) {
		s, err := Parse(expr, Options{JobName: job, TimeZone: fuzzZones[int(zone)%len(fuzzZones)]})
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("Parse(%q) returned %T, want *ParseError", expr, err)
			}
			return
		}
		again, err := Parse(s.String(), Options{TimeZone: s.Location().String()})
		if err != nil || again.String() != s.String() {
			t.Fatalf("resolved %q of %q does not reparse to itself: %v", s, expr, err)
		}
		prev := time.Unix(at%(400*365*86400), at%1e9).UTC() // 1570-2370
		for i := 0; i < 4; i++ {
			next, ok := s.Next(prev)
			if !ok {
				return
			}
			if !next.After(prev) {
				t.Fatalf("%q: Next(%v) = %v, not after", expr, prev, next)
			}
			if w, ok := again.Next(prev); !ok || !w.Equal(next) {
				t.Fatalf("%q: resolved %q gives %v, want %v", expr, again, w, next)
			}
			prev = next
		}
	})
}

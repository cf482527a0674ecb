package schedule

import (
	"fmt"
	"testing"
)

// TestHashGolden pins the hash behind ? and H. If this fails, every hashed
// job in every cluster would move: do not change the values.
func TestHashGolden(t *testing.T) {
	for _, tc := range []struct {
		job, field string
		want       uint64
	}{
		{"nightly-report", "second", 0x6b825adafa0e8439},
		{"nightly-report", "minute", 0xf11936842f6ddbdd},
		{"nightly-report", "hour", 0x870cfa236607c17b},
		{"nightly-report", "day-of-month", 0x996f40b1e810acae},
		{"nightly-report", "month", 0x5e9f7c04699556b9},
		{"nightly-report", "day-of-week", 0x940c7812572f126c},
	} {
		if got := hashOf(tc.job, tc.field); got != tc.want {
			t.Errorf("hashOf(%q, %q) = %#x, want %#x", tc.job, tc.field, got, tc.want)
		}
	}
}

// TestHashSpread checks that 1000 jobs spread over every hour, minute and
// day of the month 1-28, and that minute and hour are not tied together.
func TestHashSpread(t *testing.T) {
	var hours [24]int
	var minutes [60]int
	var days [32]int
	same := 0
	for i := 0; i < 1000; i++ {
		s := mustParse(t, "? ? ? * *", fmt.Sprintf("job-%d", i), "")
		var m, h, d int
		if _, err := fmt.Sscanf(s.String(), "%d %d %d * *", &m, &h, &d); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		minutes[m]++
		hours[h]++
		days[d]++
		if m%24 == h {
			same++
		}
	}
	for h, n := range hours {
		if n < 20 || n > 70 { // expected 41.7 each
			t.Errorf("hour %d: %d of 1000 jobs, want about 42", h, n)
		}
	}
	for m, n := range minutes {
		if n == 0 {
			t.Errorf("minute %d: no job", m)
		}
	}
	for d, n := range days {
		if (d >= 1 && d <= 28) != (n > 0) {
			t.Errorf("day-of-month %d: %d jobs, want some in 1-28 and none outside", d, n)
		}
	}
	if same > 100 { // expected about 42 if independent
		t.Errorf("minute mod 24 equals the hour for %d of 1000 jobs", same)
	}
}

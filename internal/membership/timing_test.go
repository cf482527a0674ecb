package membership

import (
	"os"
	"slices"
	"testing"
	"time"
)

// TestMeasureSuspicionDelay measures, over 10 crashes, how long the two
// survivors of a three-replica cluster take to report the third
// suspected with DefaultTiming. Replica 3 is killed (Close without
// Leave), restarted on a new port, and killed again once both survivors
// have it back, so each crash falls at a different point of their probe
// cycles. It asserts nothing beyond the usual deadline: it is a
// measurement, run by hand with
//
//	PAXCRON_MEMBERSHIP_TIMING=1 go test -run TestMeasureSuspicionDelay -v ./internal/membership
func TestMeasureSuspicionDelay(t *testing.T) {
	if os.Getenv("PAXCRON_MEMBERSHIP_TIMING") != "1" {
		t.Skip("a measurement: set PAXCRON_MEMBERSHIP_TIMING=1 to run it")
	}
	const crashes = 10
	ms, rs := cluster(t)
	victim := ms[2]
	var first, last, back []time.Duration
	for i := range crashes {
		marks := []int{rs[0].mark(), rs[1].mark()}
		crashed := time.Now()
		if err := victim.Close(); err != nil {
			t.Fatal(err)
		}
		var took []time.Duration
		for j := range 2 {
			e, _ := rs[j].waitKind(t, marks[j], suspected, 3)
			took = append(took, e.at.Sub(crashed))
		}
		first, last = append(first, slices.Min(took)), append(last, slices.Max(took))
		t.Logf("crash %d: suspected after %v and %v", i+1, took[0].Round(time.Millisecond), took[1].Round(time.Millisecond))

		// Restart it, and wait until both survivors have it back.
		marks = []int{rs[0].mark(), rs[1].mark()}
		restarted := time.Now()
		victim, _ = start(t, testConfig(t, 3, ms[0].Addr()))
		var found time.Duration
		for j := range 2 {
			e, _ := rs[j].waitKind(t, marks[j], alive, 3)
			found = max(found, e.at.Sub(restarted))
		}
		back = append(back, found)
	}
	t.Logf("first survivor suspects: %s", summary(first))
	t.Logf("both survivors suspect:  %s", summary(last))
	t.Logf("restarted replica found by both (on a new port): %s", summary(back))
}

func summary(ds []time.Duration) string {
	s := slices.Sorted(slices.Values(ds))
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return "min " + r(s[0]).String() + ", median " + r(s[len(s)/2]).String() +
		", mean " + r(sum/time.Duration(len(s))).String() + ", max " + r(s[len(s)-1]).String()
}

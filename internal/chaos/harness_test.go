package chaos

import (
	"strings"
	"testing"
	"time"
)

// The replicas' JSON launch lines become records, with the time each was
// logged, however long; other lines, a line cut short (a replica killed
// mid-write) and "launch started" (no outcome yet) are passed over.
func TestLaunchRecords(t *testing.T) {
	out := strings.Join([]string{
		`{"time":"2026-11-25T04:18:48Z","level":"INFO","msg":"launch started","replica":2,"job":"a","identity":"a-1795580328","slot":11}`,
		`{"time":"2026-11-25T04:18:48Z","level":"INFO","msg":"launch dispatched","replica":2,"job":"a","identity":"a-1795580328","outcome":"dispatched","child":"p/dispatch-a-1795580328-1-ab","reason":"","slot":12}`,
		`paxcron server: replica 2 serving its API on [::]:4750`,
		`{"time":"2026-11-25T04:18:50Z","level":"DEBUG","msg":"launch skipped","replica":2,"job":"b","identity":"b-1795580330","outcome":"skipped","child":"","reason":"job paused","slot":13}`,
		`{"msg":"launch dispatched", broken`,
		`{"time":"2026-11-25T04:18:51Z","level":"INFO","msg":"launch skipped","replica":2,"job":"c","identity":"c-1795580331","outcome":"skipped","child":"","reason":"` + strings.Repeat("x", 1<<20) + `","slot":14}`,
		`{"time":"2026-11-25T04:18:52Z","level":"INFO","msg":"launch skipped","replica":2,"job":"d","identity":"d-1795580332","outcome":"skipped","child":"","reason":"job paused","slot":15}`,
	}, "\n")
	got := launchRecords([]byte(out), "replica 2")
	want := []Record{
		{Identity: "a-1795580328", Outcome: "dispatched", ChildID: "p/dispatch-a-1795580328-1-ab", Source: "replica 2",
			At: time.Date(2026, 11, 25, 4, 18, 48, 0, time.UTC)},
		{Identity: "b-1795580330", Outcome: "skipped", Reason: "job paused", Source: "replica 2",
			At: time.Date(2026, 11, 25, 4, 18, 50, 0, time.UTC)},
		// A line over a megabyte, and the lines after it (a scanner
		// stopped at it, quietly).
		{Identity: "c-1795580331", Outcome: "skipped", Reason: strings.Repeat("x", 1<<20), Source: "replica 2",
			At: time.Date(2026, 11, 25, 4, 18, 51, 0, time.UTC)},
		{Identity: "d-1795580332", Outcome: "skipped", Reason: "job paused", Source: "replica 2",
			At: time.Date(2026, 11, 25, 4, 18, 52, 0, time.UTC)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// The workload has the jobs asked for, with every policy, periods that
// divide a minute, and names that are valid identities' prefixes.
func TestWorkload(t *testing.T) {
	jobs := Workload(50)
	if len(jobs) != 50 {
		t.Fatalf("%d jobs", len(jobs))
	}
	policies := map[string]int{}
	names := map[string]bool{}
	zoned := 0
	for _, j := range jobs {
		if j.Spec.TimeZone != "" {
			zoned++
		}
		if 60%j.EverySeconds != 0 || j.EverySeconds < 5 {
			t.Errorf("%s every %d s", j.Name, j.EverySeconds)
		}
		if names[j.Name] {
			t.Errorf("%s twice", j.Name)
		}
		names[j.Name] = true
		p := j.Spec.Concurrency
		if p == "" {
			p = "allow"
		}
		policies[p]++
		if (p == "allow") != (j.Spec.NomadJob == QuickParent) {
			t.Errorf("%s (%s) dispatches %s", j.Name, p, j.Spec.NomadJob)
		}
	}
	if policies["allow"] != 30 || policies["forbid"] != 10 || policies["replace"] != 10 {
		t.Fatalf("policies %v", policies)
	}
	if zoned == 0 {
		t.Fatal("no job in a time zone: the replicas' own zone database goes untested")
	}
}

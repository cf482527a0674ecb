package state

import (
	"fmt"
	"strings"
	"testing"

	"paxcron/cron/schedule"
)

// TestParsedSchedulesAreShared: a schedule that does not depend on the
// job's name is parsed once per process and shared; one with ? or H is
// parsed for each job; a bad one is refused every time.
func TestParsedSchedulesAreShared(t *testing.T) {
	spec := JobSpec{Schedule: "15 3 * * MON", TimeZone: "Europe/Berlin", NomadJob: "p"}
	a, err := spec.parseSchedule("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := spec.parseSchedule("b")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("the same expression and zone parsed twice")
	}
	utc := spec
	utc.TimeZone = ""
	if c, _ := utc.parseSchedule("a"); c == a {
		t.Error("a schedule shared across zones")
	}
	hashed := JobSpec{Schedule: "H 3 * * *", NomadJob: "p"}
	ha, _ := hashed.parseSchedule("a")
	hb, _ := hashed.parseSchedule("b")
	if ha == hb || !ha.UsesName() {
		t.Error("a schedule that hashes the job's name was shared")
	}
	bad := JobSpec{Schedule: "61 * * * *", NomadJob: "p"}
	for range 2 {
		if _, err := bad.parseSchedule("a"); err == nil {
			t.Fatal("an invalid schedule was accepted")
		}
	}
}

// TestScheduleMemoIsBounded: the memo holds at most maxParsedSchedules
// schedules and maxParsedScheduleBytes, however many distinct ones a
// long-lived process parses, and still shares the schedules in use.
// Found in review: once full it kept its first 65,536 schedules for the
// life of the process, used or not, and shared no new one: after a year
// of jobs created and deleted, the schedules of the jobs still there
// were parsed per job.
func TestScheduleMemoIsBounded(t *testing.T) {
	memo := newScheduleMemo()
	parse := func(expr string) *schedule.Schedule {
		t.Helper()
		if s := memo.get("", expr); s != nil {
			return s
		}
		s, err := schedule.Parse(expr, schedule.Options{})
		if err != nil {
			t.Fatal(err)
		}
		memo.put("", expr, s)
		return s
	}
	for i := range maxParsedSchedules + 10 {
		parse(fmt.Sprintf("@every %ds", i+1))
	}
	if n := memo.len(); n > maxParsedSchedules {
		t.Fatalf("the memo holds %d schedules; want at most %d", n, maxParsedSchedules)
	}
	// A schedule first seen now is shared, and stays shared while it is
	// in use, however many others come and go.
	inUse := parse("5 4 * * *")
	for i := range 2 * maxParsedSchedules {
		parse(fmt.Sprintf("@every %ds", maxParsedSchedules+20+i))
		if i%1000 == 0 && parse("5 4 * * *") != inUse {
			t.Fatalf("a schedule in use parsed again after %d others", i)
		}
	}
	// Long expressions: bounded by bytes as well.
	long := strings.Repeat("0,", 500)
	rotations := memo.rotations
	for i := range 20_000 {
		parse(fmt.Sprintf("%s%d %d %d * *", long, i%60, i/60%24, 1+i/1440))
	}
	if n, b := memo.len(), memo.size(); n > maxParsedSchedules || b > maxParsedScheduleBytes || memo.rotations < rotations+2 {
		t.Fatalf("the memo holds %d schedules of %d bytes; want at most %d and %d bytes, turned over by bytes (%d rotations)", n, b, maxParsedSchedules, maxParsedScheduleBytes, memo.rotations-rotations)
	}
	t.Logf("%d schedules, %d bytes, %d rotations", memo.len(), memo.size(), memo.rotations)
}

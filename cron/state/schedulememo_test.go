package state

import (
	"fmt"
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

func TestScheduleMemoIsBounded(t *testing.T) {
	memo := &scheduleMemo{m: map[scheduleKey]*schedule.Schedule{}}
	s, err := schedule.Parse("@daily", schedule.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxParsedSchedules + 10 {
		memo.put("", fmt.Sprintf("expression %d", i), s)
	}
	if len(memo.m) != maxParsedSchedules {
		t.Fatalf("the memo holds %d schedules; want at most %d", len(memo.m), maxParsedSchedules)
	}
}

package state

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkTakeoverReads measures what a new leader reads of a state of
// a million jobs (PAXCRON_SCALE_JOBS) on its loop when it takes over: the
// ordered job names, merged with the names created or deleted since they
// were last ordered, and the open launches. It runs once per b.N (use
// -benchtime=1x); each figure is timed after a GC, so that a collection
// of the million-job heap does not land in it.
//
//	go test -run '^$' -bench TakeoverReads -benchtime 1x ./cron/state
func BenchmarkTakeoverReads(b *testing.B) {
	n := scaleJobs(b) - 1001 // room for the jobs created below
	for range b.N {
		m := buildScale(b, n, 0)
		m.sortedNames() // ordered, as after a snapshot
		at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		slot := m.LastSlot()
		apply := func(c Command) {
			slot++
			if err := m.ApplyCommand(slot, c); err != nil {
				b.Fatalf("slot %d: %v", slot, err)
			}
		}
		put := func(name string) {
			apply(PutJob{Name: name, At: at, Spec: JobSpec{Schedule: "? ? ? ? *", NomadJob: "batch-runner"}})
		}
		timed := func(metric string, f func()) {
			runtime.GC()
			start := time.Now()
			f()
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000, metric)
		}
		for i := range 1000 {
			put(fmt.Sprintf("new-%04d", i))
		}
		timed("names-1000-created-ms", func() { m.sortedNames() })
		j, _ := m.Job("new-0001")
		apply(DeleteJob{Name: j.Name, IfVersion: j.Version})
		put("new-x")
		timed("names-1-deleted-ms", func() { m.sortedNames() })
		for i := range 10 {
			name := fmt.Sprintf("team-%03d.job-%07d", i%997, i)
			next := m.jobs[name].NextAt
			apply(LaunchStarted{Job: name, ScheduledAt: next, Identity: Identity(name, next), SpecVersion: m.jobs[name].Version, At: next})
		}
		var open int
		timed("open-launches-ms", func() { open = len(m.OpenLaunches()) })
		if open != 10 {
			b.Fatalf("%d open launches, want 10", open)
		}
	}
}

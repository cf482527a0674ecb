package state

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"paxcron/cron/scheduler"
)

// scaleJobs is how many jobs BenchmarkScale holds: the million by
// default, fewer with PAXCRON_SCALE_JOBS for a quick run.
func scaleJobs(b *testing.B) int {
	if s := os.Getenv("PAXCRON_SCALE_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("PAXCRON_SCALE_JOBS=%q: want a positive integer", s)
		}
		return n
	}
	return 1_000_000
}

// scaleSchedules are the shapes a large installation has: mostly daily
// and hourly jobs spread by ?, some in time zones, a few frequent ones.
var scaleSchedules = []struct{ expr, tz string }{
	{"? ? * * *", ""},
	{"? ? * * *", "America/New_York"},
	{"? * * * *", ""},
	{"?/15 * * * *", "Europe/Berlin"},
	{"0 ? * * 1-5", "Asia/Kolkata"},
	{"@every 5m", ""},
}

// buildScale applies n PutJobs (realistic specs: a payload, two meta
// entries) and then, launches times, one launch started and finished per
// job: started a few milliseconds late, dispatched, the child ID as Nomad
// makes it.
func buildScale(b testing.TB, n, launches int) *Machine {
	b.Helper()
	m := New()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	slot := uint64(0)
	apply := func(c Command) {
		slot++
		if err := m.ApplyCommand(slot, c); err != nil {
			b.Fatalf("slot %d: %v", slot, err)
		}
	}
	for i := range n {
		s := scaleSchedules[i%len(scaleSchedules)]
		name := fmt.Sprintf("team-%03d.job-%07d", i%997, i)
		apply(PutJob{Name: name, At: at, Spec: JobSpec{
			Schedule: s.expr, TimeZone: s.tz, NomadJob: "batch-runner", Payload: []byte(`{"shard":` + strconv.Itoa(i) + `}`),
			Meta: map[string]string{"owner": "team-" + strconv.Itoa(i%997), "tier": "2"},
		}})
	}
	for round := range launches {
		for i := range n {
			name := fmt.Sprintf("team-%03d.job-%07d", i%997, i)
			j := m.jobs[name]
			next := j.NextAt
			late := time.Duration(1+(i+round)%50)*time.Millisecond + time.Duration(i%1000)*time.Microsecond
			apply(LaunchStarted{Job: name, ScheduledAt: next, Identity: Identity(name, next), SpecVersion: j.Version, At: next.Add(late)})
			child := fmt.Sprintf("batch-runner/dispatch-%s-%d-%08x", Identity(name, next), next.Unix()+1, uint32(i*2654435761+round))
			apply(LaunchFinished{Job: name, ScheduledAt: next, Outcome: Outcome{Kind: OutcomeDispatched, ChildID: child}})
		}
	}
	return m
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkScale measures the million-job figures: state memory
// per job, the leader's heap build on promotion, and the snapshot's size,
// write and restore times. It runs once per b.N (use -benchtime=1x).
func BenchmarkScale(b *testing.B) {
	n := scaleJobs(b)
	for _, launches := range []int{0, 1, HistoryLen} {
		name := "fresh"
		switch launches {
		case 1:
			name = "one-launch-each"
		case HistoryLen:
			name = "history-full"
		}
		b.Run(fmt.Sprintf("jobs=%d/%s", n, name), func(b *testing.B) {
			for range b.N {
				before := heapInUse()
				m := buildScale(b, n, launches)
				after := heapInUse()
				b.ReportMetric(float64(after-before)/float64(n), "state-B/job")

				start := time.Now()
				var h scheduler.Heap
				h.Build(m.Schedule())
				b.ReportMetric(time.Since(start).Seconds(), "heap-build-s")

				// The first snapshot after the jobs were created puts their
				// names in order; later ones find them so (steady state).
				start = time.Now()
				if _, err := m.Snapshot(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(start).Seconds(), "first-snapshot-s")
				start = time.Now()
				snap, err := m.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(start).Seconds(), "snapshot-s")
				b.ReportMetric(float64(len(snap))/(1<<20), "snapshot-MiB")

				// A follower catching up restores into the machine that
				// holds its old state (Restore releases it first); a
				// replica starting up holds only the snapshot ("cold").
				start = time.Now()
				if err := m.Restore(snap); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(start).Seconds(), "restore-s")
				if h.Len() != n || len(m.jobs) != n {
					b.Fatalf("heap %d, restored %d jobs, want %d", h.Len(), len(m.jobs), n)
				}
				m, h = nil, scheduler.Heap{}
				runtime.GC()
				start = time.Now()
				cold := New()
				if err := cold.Restore(snap); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(start).Seconds(), "cold-restore-s")
				runtime.KeepAlive(cold)
			}
		})
	}
}

// TestSnapshotCapacityCoversSnapshot checks that a snapshot's buffer is
// sized up front, without growing: estimated from the jobs for the first
// snapshot, from the last one's size afterwards and after a restore.
func TestSnapshotCapacityCoversSnapshot(t *testing.T) {
	for _, launches := range []int{0, 1, HistoryLen} {
		t.Run(strconv.Itoa(launches), func(t *testing.T) {
			m := buildScale(t, 3000, launches)
			// Some launches left open, which carry payload and meta.
			for i := 0; i < 3000; i += 7 {
				name := fmt.Sprintf("team-%03d.job-%07d", i%997, i)
				j := m.jobs[name]
				if err := m.ApplyCommand(m.lastSlot+1, LaunchStarted{Job: name, ScheduledAt: j.NextAt, Identity: Identity(name, j.NextAt), SpecVersion: j.Version, At: j.NextAt}); err != nil {
					t.Fatal(err)
				}
			}
			estimate := m.snapshotCapacity()
			snap, err := m.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if len(snap) > estimate {
				t.Fatalf("first snapshot is %d bytes, its buffer was sized %d", len(snap), estimate)
			}
			if estimate > 2*len(snap) {
				t.Errorf("first snapshot is %d bytes, its buffer was sized %d: over twice too large", len(snap), estimate)
			}
			if c := m.snapshotCapacity(); c < len(snap) {
				t.Fatalf("after a snapshot of %d bytes the next buffer is sized %d", len(snap), c)
			}
			restored := New()
			if err := restored.Restore(snap); err != nil {
				t.Fatal(err)
			}
			if c := restored.snapshotCapacity(); c < len(snap) {
				t.Fatalf("after restoring %d bytes the next buffer is sized %d", len(snap), c)
			}

			// The state doubles before the next snapshot (as the policy
			// has it, a log as large as the state), through a frozen
			// encode and after a restore: the buffer is scaled up.
			for _, grown := range []*Machine{m, restored} {
				grown.encodedSize.Store(0)
				last := grown.lastSlot
				for i := range 3000 {
					name := fmt.Sprintf("more.job-%07d", i)
					last++
					if err := grown.ApplyCommand(last, PutJob{Name: name, At: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Spec: JobSpec{
						Schedule: "*/5 * * * *", NomadJob: "batch-runner", Payload: []byte(`{"shard":` + strconv.Itoa(i) + `}`),
						Meta: map[string]string{"owner": "team-" + strconv.Itoa(i%997), "tier": "2"},
					}}); err != nil {
						t.Fatal(err)
					}
				}
				estimate := grown.snapshotCapacity()
				frozen, err := grown.FreezeSnapshot()()
				if err != nil {
					t.Fatal(err)
				}
				if len(frozen) > estimate {
					t.Fatalf("the state doubled: a snapshot of %d bytes, its buffer was sized %d", len(frozen), estimate)
				}
				if c := grown.snapshotCapacity(); c < len(frozen) {
					t.Fatalf("after a frozen snapshot of %d bytes the next buffer is sized %d", len(frozen), c)
				}
			}
		})
	}
}

// BenchmarkRestoreCountsReasons measures what a second pass counting the
// histories' reasons would add to a restore, which instead counts them as
// it checks each entry: restore-s is the restore, second-pass-s the pass
// (200,000 jobs with full histories).
func BenchmarkRestoreCountsReasons(b *testing.B) {
	snap, err := buildScale(b, 200_000, HistoryLen).Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		m := New()
		start := time.Now()
		if err := m.Restore(snap); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "restore-s")
		start = time.Now()
		if m.countHistoryReasons() != m.HistoryReasonBytes() {
			b.Fatal("the restore counted other reasons than a second pass")
		}
		b.ReportMetric(time.Since(start).Seconds(), "second-pass-s")
	}
}

package state

import (
	"errors"
	"testing"
)

// BenchmarkBackfillScan: the longest walk a Backfill may take, on every
// replica's loop: MaxBackfillScan slots of a one-second schedule, then a
// refusal (the range holds one slot more). Its time is how long one
// command from a write token can hold each replica's loop.
func BenchmarkBackfillScan(b *testing.B) {
	for _, bc := range []struct{ name, schedule string }{{"every-second", "* * * * * *"}, {"every-minute", "* * * * *"}} {
		b.Run(bc.name, func(b *testing.B) {
			m := New()
			slot := uint64(0)
			apply := func(c Command) error {
				slot++
				return m.ApplyCommand(slot, c)
			}
			if err := apply(PutJob{Name: bc.name, At: t0, Spec: JobSpec{Schedule: bc.schedule, NomadJob: "batch"}}); err != nil {
				b.Fatal(err)
			}
			created := mustJob(b, m, bc.name).CreatedAt
			for range MaxBackfillScan + 1 {
				j := mustJob(b, m, bc.name)
				at := j.NextAt
				if err := apply(LaunchStarted{Job: j.Name, ScheduledAt: at, Identity: Identity(j.Name, at), SpecVersion: j.Version, At: at}); err != nil {
					b.Fatal(err)
				}
				if err := apply(LaunchFinished{Job: j.Name, ScheduledAt: at, Outcome: Outcome{Kind: OutcomeSkipped, Reason: "bench"}}); err != nil {
					b.Fatal(err)
				}
			}
			last := mustJob(b, m, bc.name).LastStartedAt
			cmd := Backfill{Name: bc.name, From: created, To: last, At: last}
			b.ResetTimer()
			for b.Loop() {
				if err := apply(cmd); !errors.Is(err, ErrLimit) {
					b.Fatalf("a backfill of %v: %v, want ErrLimit", last.Sub(created), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(MaxBackfillScan), "ns/slot")
		})
	}
}

package sim

import (
	"testing"
	"time"
)

// BenchmarkSimulation measures how many simulated seconds one core runs
// per wall second for a 3-replica cluster under the default fault load
// (one seed per iteration, one goroutine).
func BenchmarkSimulation(b *testing.B) {
	var simulated time.Duration
	var events uint64
	start := time.Now()
	for i := range b.N {
		r := Run(DefaultOptions(uint64(i)))
		if r.Err != nil {
			b.Fatalf("seed %d: %v", i, r.Err)
		}
		simulated += r.SimTime
		events += r.Events
	}
	wall := time.Since(start)
	b.ReportMetric(simulated.Seconds()/wall.Seconds(), "sim-s/wall-s")
	b.ReportMetric(float64(events)/wall.Seconds(), "events/s")
}

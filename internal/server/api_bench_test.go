package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paxcron/internal/api"
)

// BenchmarkAPI measures the HTTP API of three in-process servers on real
// Pebble (synced) over loopback, with clients concurrent requests in
// flight: job writes (one new job per request, to the leader, and to a
// follower that forwards them; each also over the API stream),
// status reads, and linearizable and stale job reads. One op is one
// request. Medians over runs:
//
//	go test -run '^$' -bench BenchmarkAPI -benchtime 3s -count 5 ./internal/server
func BenchmarkAPI(b *testing.B) {
	c := startClusterWith(b, func(cfg *Config) { cfg.TickInterval = 50 * time.Millisecond })
	leader := c.leader()
	ctx := context.Background()
	follower := leader%3 + 1
	lc, fc := c.client(leader, writeToken), c.client(follower, writeToken)
	fw := fc // writes sent to a follower, which forwards them to the leader
	ls, fs := c.streamClient(leader, writeToken), c.streamClient(follower, writeToken)
	if _, err := lc.PutJobs(ctx, api.PutJobs{Jobs: []api.PutJob{{Name: "read-me", Spec: api.Spec{Schedule: "@hourly", NomadJob: "p"}}}}); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Uint64
	// writeVia writes one new job through cl.
	writeVia := func(cl *api.Client) func() error {
		return func() error {
			name := fmt.Sprintf("bench-%d", seq.Add(1))
			_, err := cl.PutJobs(ctx, api.PutJobs{Jobs: []api.PutJob{{Name: name, Spec: api.Spec{Schedule: "@daily", NomadJob: "p"}}}})
			return err
		}
	}
	for _, clients := range []int{1, 16, 64} {
		for _, op := range []struct {
			name string
			call func() error
		}{
			{"write-job", writeVia(lc)},
			{"write-job-via-follower", writeVia(fw)},
			{"write-job-stream", writeVia(ls)},
			{"write-job-stream-via-follower", writeVia(fs)},
			{"read-status", func() error { _, err := lc.Status(ctx); return err }},
			{"read-job-leader", func() error { _, err := lc.Job(ctx, "read-me", 5, api.ReadOptions{}); return err }},
			{"read-job-stale-follower", func() error {
				_, err := fc.Job(ctx, "read-me", 5, api.ReadOptions{Stale: true})
				return err
			}},
		} {
			b.Run(fmt.Sprintf("%s/clients=%d", op.name, clients), func(b *testing.B) {
				var next atomic.Int64
				lat := make([][]time.Duration, clients)
				var wg sync.WaitGroup
				b.ResetTimer()
				began := time.Now()
				for w := range clients {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							t := time.Now()
							if err := op.call(); err != nil {
								b.Error(err)
								return
							}
							lat[w] = append(lat[w], time.Since(t))
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(began)
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				if len(all) > 0 {
					b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
					b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
				}
			})
		}
	}
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
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

// BenchmarkDecodePutJobs measures a job write's decode on the server
// (decodePutJobs, the body already in memory as serve leaves it), as
// JSON and as msgpack, for the etcd benchmark's body (one job, a
// 180-byte payload), for larger payloads, and for a body of many small
// jobs with meta just under api.MaxBodyBytes (the most keys a body can
// hold, the duplicate-key check's worst case):
//
//	go test -run '^$' -bench BenchmarkDecodePutJobs -benchmem ./internal/server
func BenchmarkDecodePutJobs(b *testing.B) {
	type body struct {
		name string
		req  api.PutJobs
	}
	var bodies []body
	for _, size := range []int{180, 16 << 10, 1 << 20} {
		bodies = append(bodies, body{fmt.Sprintf("payload=%d", size), api.PutJobs{Jobs: []api.PutJob{{Name: "b001-000000001",
			Spec: api.Spec{Schedule: "@daily", NomadJob: "bench", Payload: bytes.Repeat([]byte{'p'}, size)}}}, SkipNomadCheck: true}})
	}
	many := api.PutJobs{SkipNomadCheck: true}
	for i := range 14_000 {
		many.Jobs = append(many.Jobs, api.PutJob{Name: fmt.Sprintf("b001-%09d", i), Spec: api.Spec{Schedule: "0 ? * * *",
			TimeZone: "Europe/Berlin", Concurrency: "forbid", NomadJob: "bench", Namespace: "ops",
			Meta: map[string]string{"owner": "team-a", "kind": "nightly", "shard": fmt.Sprint(i % 16)}}})
	}
	bodies = append(bodies, body{fmt.Sprintf("jobs=%d", len(many.Jobs)), many})
	for _, bd := range bodies {
		asJSON, err := json.Marshal(bd.req)
		if err != nil {
			b.Fatal(err)
		}
		if len(asJSON) > api.MaxBodyBytes {
			b.Fatalf("%s: %d bytes, over the limit", bd.name, len(asJSON))
		}
		asMsgpack, err := api.EncodeMsgpack(bd.req)
		if err != nil {
			b.Fatal(err)
		}
		for _, enc := range []struct {
			name, contentType string
			body              []byte
		}{{"json", "application/json", asJSON}, {"msgpack", api.MsgpackContentType, asMsgpack}} {
			b.Run(fmt.Sprintf("%s/%s", enc.name, bd.name), func(b *testing.B) {
				b.SetBytes(int64(len(enc.body)))
				b.ReportAllocs()
				for b.Loop() {
					r := httptest.NewRequest("POST", "/v1/jobs", nil)
					r.Body = newMemBody(enc.body)
					r.Header.Set("Content-Type", enc.contentType)
					if _, err := decodePutJobs(r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

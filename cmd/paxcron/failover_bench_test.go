package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"paxcron/internal/api"
	"paxcron/nomad/nomadtest"
)

// BenchmarkFailover measures, over PAXCRON_FAILOVER_RUNS runs (20 by
// default) of three `paxcron server` processes and the real Nomad dev
// agent, with a cron job due every second:
//   - kill=sigkill: the leader SIGKILLed; the time until another replica
//     leads and holds the lease (it reports Launching), and until the next
//     launch dispatched after the kill is recorded;
//   - kill=sigterm: the same for a graceful stop (the leader drains and
//     hands over).
//
// The killed replica is restarted and caught up between runs. At the end
// Nomad's own job list is checked: no slot with two children, none
// missing. Run it alone:
//
//	go test -run '^$' -bench BenchmarkFailover -benchtime 1x -timeout 30m ./cmd/paxcron
func BenchmarkFailover(b *testing.B) {
	runs := 20
	if v, err := strconv.Atoi(os.Getenv("PAXCRON_FAILOVER_RUNS")); err == nil && v > 0 {
		runs = v
	}
	for _, mode := range []string{"sigkill", "sigterm"} {
		b.Run("kill="+mode, func(b *testing.B) {
			for range b.N {
				failoverRuns(b, mode, runs)
			}
		})
	}
}

func failoverRuns(b *testing.B, mode string, runs int) {
	agent := nomadtest.Shared(b)
	admin, err := nomadapi.NewClient(&nomadapi.Config{Address: agent.Addr, SecretID: agent.Token})
	if err != nil {
		b.Fatal(err)
	}
	parent := parentName("failover-" + mode)
	registerParent(b, admin, parent)
	c := startE2E(b, agent)
	leader := c.leaderTB(b, 0)
	ctx := context.Background()
	job := "tick-" + mode
	put := api.PutJobs{Jobs: []api.PutJob{{Name: job, Spec: api.Spec{Schedule: "* * * * * *", NomadJob: parent}}}}
	if _, err := c.client(leader).PutJobs(ctx, put); err != nil {
		b.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	first := time.Now().Add(-2 * time.Second)
	var toLeader, toLaunch []time.Duration
	for run := range runs {
		leader = c.leaderTB(b, 0)
		killedAt := time.Now()
		if mode == "sigkill" {
			c.kill(leader)
		} else {
			c.procs[leader-1].Process.Signal(syscall.SIGTERM)
			c.procs[leader-1].Wait()
			c.procs[leader-1] = nil
		}
		next := c.leaderTB(b, leader)
		toLeader = append(toLeader, time.Since(killedAt))
		// The next launch recorded dispatched for a slot after the kill.
		deadline := time.Now().Add(30 * time.Second)
		for {
			j, err := c.client(next).Job(ctx, job, 0, api.ReadOptions{Stale: true})
			if err == nil && slices.ContainsFunc(j.History, func(l api.Launch) bool {
				return l.Outcome == "dispatched" && l.ScheduledAt.After(killedAt)
			}) {
				toLaunch = append(toLaunch, time.Since(killedAt))
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("run %d: no launch dispatched 30 s after the leader was stopped", run)
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.start(leader, false)
		// Caught up before the next run: it follows the leader.
		for {
			st, err := c.client(leader).Status(ctx)
			if err == nil && st.Leader == uint64(next) && st.Applied > 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(1500 * time.Millisecond)
	}
	end := time.Now().Add(-3 * time.Second)
	got := children(b, admin, parent, job)
	// From the first slot that has a child (the job was created a moment
	// before first) to end, every second has one.
	for len(got[fmt.Sprintf("%s-%d", job, first.Unix())]) == 0 && first.Before(end) {
		first = first.Add(time.Second)
	}
	doubled, missing := 0, 0
	for s := first.Unix(); s <= end.Unix(); s++ {
		switch n := len(got[fmt.Sprintf("%s-%d", job, s)]); {
		case n > 1:
			doubled++
			b.Logf("slot %s-%d has %d children", job, s, n)
		case n == 0:
			missing++
			b.Logf("slot %s-%d (%s) has no child", job, s, time.Unix(s, 0).Format(time.TimeOnly))
		}
	}
	slices.Sort(toLeader)
	slices.Sort(toLaunch)
	q := func(d []time.Duration, p float64) float64 { return d[int(p*float64(len(d)-1))].Seconds() }
	b.ReportMetric(q(toLeader, 0.5), "leader-p50-s")
	b.ReportMetric(q(toLeader, 0.9), "leader-p90-s")
	b.ReportMetric(toLeader[len(toLeader)-1].Seconds(), "leader-max-s")
	b.ReportMetric(q(toLaunch, 0.5), "launch-p50-s")
	b.ReportMetric(q(toLaunch, 0.9), "launch-p90-s")
	b.ReportMetric(toLaunch[len(toLaunch)-1].Seconds(), "launch-max-s")
	b.ReportMetric(float64(doubled), "doubled")
	b.ReportMetric(float64(missing), "missing")
	b.Logf("%d runs; to a new leader with the lease: %v; to the next launch dispatched: %v", runs, toLeader, toLaunch)
	if doubled > 0 {
		b.Errorf("%d slots have two children", doubled)
	}
}

func (c *e2eCluster) leaderTB(tb testing.TB, not int) int {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for id := 1; id <= 3; id++ {
			if id == not || c.procs[id-1] == nil {
				continue
			}
			st, err := c.client(id).Status(context.Background())
			if err == nil && st.Launching {
				return id
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatal("no replica launches after 30 s")
	return 0
}

package nomad_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/internal/localcluster"
	"paxcron/nomad"
	"paxcron/nomad/nomadtest"
	"paxcron/paxos"
)

// benchParent is parentJob(id) whose allocations can never be placed: the
// children are created (what is measured) but no task runs, so that the
// dev agent's two cores go to creating children, not to starting N
// processes, for Nomad's dispatcher and paxcron alike.
func benchParent(id string) *api.Job {
	j := parentJob(id)
	j.Constrain(api.NewConstraint("${attr.kernel.name}", "=", "no-such-kernel"))
	return j
}

// BenchmarkLaunchVsNomadPeriodic: N launches due in the same second, once
// as N Nomad periodic jobs (Nomad's own dispatcher) and once as N paxcron
// cron jobs on a 3-replica cluster (Pebble, the real launcher and
// dispatcher) dispatching one parameterized parent, on the same dev agent,
// one after the other. For every child: its creation in Nomad (SubmitTime)
// less its scheduled time. Children per scheduled slot must be exactly one.
//
//	go test -run '^$' -bench LaunchVsNomadPeriodic -benchtime 1x -timeout 30m ./nomad
func BenchmarkLaunchVsNomadPeriodic(b *testing.B) {
	agent := nomadtest.Shared(b)
	a, err := api.NewClient(&api.Config{Address: agent.Addr, SecretID: agent.Token})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			for i := range b.N {
				tag := fmt.Sprintf("b%d-%d", n, i)
				periodic := nomadPeriodic(b, a, tag, n)
				report(b, "nomad", periodic, n)
				cron := paxcronLaunch(b, agent, a, tag, n)
				report(b, "paxcron", cron, n)
				if periodic.p99 > 0 {
					b.ReportMetric(float64(cron.p99)/float64(periodic.p99), "p99-ratio")
				}
				b.Logf("N=%d: nomad p50 %v p99 %v max %v (%.0f children/s); paxcron p50 %v p99 %v max %v (%.0f children/s)",
					n, periodic.p50, periodic.p99, periodic.max, periodic.rate, cron.p50, cron.p99, cron.max, cron.rate)
			}
		})
	}
}

// benchWorkers is the dispatcher's worker count: the default (16), or
// PAXCRON_BENCH_WORKERS.
func benchWorkers(b *testing.B) int {
	s := os.Getenv("PAXCRON_BENCH_WORKERS")
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("PAXCRON_BENCH_WORKERS=%q: want a positive integer", s)
	}
	return n
}

type lateness struct {
	p50, p99, max    time.Duration
	rate             float64 // children per second from the scheduled time to the last one
	children, missed int
	doubled          int
}

func report(b *testing.B, who string, l lateness, n int) {
	b.ReportMetric(l.p50.Seconds()*1000, who+"-p50-ms")
	b.ReportMetric(l.p99.Seconds()*1000, who+"-p99-ms")
	b.ReportMetric(l.max.Seconds()*1000, who+"-max-ms")
	b.ReportMetric(l.rate, who+"-children/s")
	b.ReportMetric(float64(l.missed), who+"-missing")
	b.ReportMetric(float64(l.doubled), who+"-doubled")
	if l.missed+l.doubled > 0 {
		b.Errorf("%s: %d of %d slots missed, %d doubled", who, l.missed, n, l.doubled)
	}
}

// measure turns the children of each slot into lateness figures.
func measure(due time.Time, bySlot map[string][]int64, n int) lateness {
	var late []time.Duration
	var l lateness
	for _, subs := range bySlot {
		l.children += len(subs)
		if len(subs) > 1 {
			l.doubled++
		}
		for _, s := range subs {
			late = append(late, time.Unix(0, s).Sub(due))
		}
	}
	l.missed = n - len(bySlot)
	if len(late) == 0 {
		return l
	}
	slices.Sort(late)
	l.p50, l.p99, l.max = late[len(late)/2], late[(len(late)*99)/100], late[len(late)-1]
	l.rate = float64(len(late)) / max(l.max.Seconds(), 1e-3)
	return l
}

// dueSoon returns a whole second at least lead from now, and its cron
// fields (second, minute, hour) in UTC.
func dueSoon(lead time.Duration) (time.Time, string) {
	t := time.Now().UTC().Add(lead).Truncate(time.Second).Add(time.Second)
	return t, fmt.Sprintf("%d %d %d", t.Second(), t.Minute(), t.Hour())
}

// nomadPeriodic registers n periodic batch jobs all due in one second and
// measures the children Nomad's own dispatcher creates.
func nomadPeriodic(b *testing.B, a *api.Client, tag string, n int) lateness {
	b.Helper()
	due, fields := dueSoon(time.Duration(n)*6*time.Millisecond + 10*time.Second)
	ids := make([]string, n)
	for i := range n {
		id := fmt.Sprintf("per-%s-%05d", tag, i)
		ids[i] = id
		j := benchParent(id)
		j.ParameterizedJob = nil
		j.Periodic = &api.PeriodicConfig{Specs: []string{fields + " * * * *"}, TimeZone: new("UTC")}
		if _, _, err := a.Jobs().Register(j, nil); err != nil {
			b.Fatalf("registering %s: %v", id, err)
		}
	}
	if time.Now().After(due) {
		b.Fatalf("registering %d periodic jobs took past their due time %v", n, due)
	}
	bySlot := waitChildren(b, a, "per-"+tag+"-", n, due, func(s *api.JobListStub) string { return s.ParentID })
	for _, id := range ids {
		a.Jobs().Deregister(id, true, nil)
	}
	return measure(due, bySlot, n)
}

// paxcronLaunch creates n cron jobs due in one second on a fresh 3-replica
// cluster dispatching one parent, and measures the children.
func paxcronLaunch(b *testing.B, agent *nomadtest.Agent, a *api.Client, tag string, n int) lateness {
	b.Helper()
	parent := "cron-" + tag
	if _, _, err := a.Jobs().Register(benchParent(parent), nil); err != nil {
		b.Fatal(err)
	}
	cfg := nomad.DefaultConfig()
	cfg.Address, cfg.Token = agent.Addr, agent.Token
	c, err := nomad.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	opts := localcluster.DefaultOptions(b.TempDir())
	var dmu sync.Mutex
	var ds []*nomad.Dispatcher
	opts.Cron = &localcluster.CronOptions{
		Launcher: launcher.Config{MemoryHorizon: c.MemoryHorizon()},
		NewDispatcher: func(_ paxos.ReplicaID, done func(launcher.Result)) launcher.Dispatcher {
			d, err := nomad.NewDispatcher(nomad.DispatcherConfig{Caller: c, Deliver: done, Workers: benchWorkers(b)})
			if err != nil {
				b.Fatal(err)
			}
			dmu.Lock()
			ds = append(ds, d)
			dmu.Unlock()
			return d
		},
	}
	cl, err := localcluster.Start(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		cl.Close()
		for _, d := range ds {
			d.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := cl.WaitLeader(ctx); err != nil {
		b.Fatal(err)
	}
	due, fields := dueSoon(time.Duration(n)*2*time.Millisecond + 5*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cmd, err := state.Encode(state.PutJob{Name: fmt.Sprintf("%s-%05d", tag, i), At: time.Now(), Spec: state.JobSpec{Schedule: fields + " * * *", NomadJob: parent}})
			if err == nil {
				err = cl.Propose(ctx, cmd)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("creating the cron jobs: %v", err)
	}
	if time.Now().After(due) {
		b.Fatalf("creating %d cron jobs took past their due time %v", n, due)
	}
	bySlot := waitChildren(b, a, parent+"/dispatch-", n, due, func(s *api.JobListStub) string {
		// <parent>/dispatch-<identity>-<unix>-<hex>: the identity names the slot.
		rest := strings.TrimPrefix(s.ID, parent+"/dispatch-")
		if i := strings.LastIndexByte(rest, '-'); i > 0 {
			if j := strings.LastIndexByte(rest[:i], '-'); j > 0 {
				return rest[:j]
			}
		}
		return s.ID
	})
	a.Jobs().Deregister(parent, true, nil)
	return measure(due, bySlot, n)
}

// waitChildren waits until n slots have children under prefix (or a
// minute past their due time), then lists their submit times by slot.
func waitChildren(b *testing.B, a *api.Client, prefix string, n int, due time.Time, slot func(*api.JobListStub) string) map[string][]int64 {
	b.Helper()
	deadline := due.Add(90 * time.Second)
	for {
		stubs, _, err := a.Jobs().PrefixList(prefix)
		if err != nil {
			b.Fatal(err)
		}
		bySlot := map[string][]int64{}
		for _, s := range stubs {
			if s.ParentID == "" {
				continue // a parent, not a child
			}
			k := slot(s)
			bySlot[k] = append(bySlot[k], s.SubmitTime)
		}
		if len(bySlot) >= n || time.Now().After(deadline) {
			// A little longer, to see a late duplicate.
			time.Sleep(2 * time.Second)
			stubs, _, _ = a.Jobs().PrefixList(prefix)
			bySlot = map[string][]int64{}
			for _, s := range stubs {
				if s.ParentID != "" {
					k := slot(s)
					bySlot[k] = append(bySlot[k], s.SubmitTime)
				}
			}
			return bySlot
		}
		time.Sleep(200 * time.Millisecond)
	}
}

package nomad_test

import (
	"context"
	"errors"
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

// BenchmarkLaunchVsNomadPeriodic: N launches due in the same second, once
// as N Nomad periodic jobs (Nomad's own dispatcher) and once as N paxcron
// cron jobs on a 3-replica cluster (Pebble, the real launcher and
// dispatcher) each dispatching its own parameterized parent, on the same dev agent
// (a fresh one for each set-up and N),
// the two systems alternating (which goes first alternates per
// repetition). For every child: its creation in Nomad (SubmitTime, set by
// the Nomad server for both systems) less its scheduled time, and how many
// children each slot got.
//
// Two set-ups: "unplaceable" parents carry a constraint no node meets, so
// children are created (what is measured) but no task runs; "runnable"
// children run a task (sleep 0) through raw_exec, so the agent also places
// and starts them while it creates the rest.
//
//	go test -run '^$' -bench LaunchVsNomadPeriodic -benchtime 1x -timeout 120m ./nomad
//
// Environment (defaults in brackets): PAXCRON_LAUNCH_N [100,1000,10000];
// PAXCRON_LAUNCH_REPS [5] repetitions, PAXCRON_LAUNCH_REPS_LARGE [3] for
// N >= 10,000; PAXCRON_LAUNCH_SETUPS [unplaceable,runnable];
// PAXCRON_LAUNCH_RUNNABLE_MAX_N [1000] (the largest N run with runnable
// children); PAXCRON_BENCH_WORKERS [the dispatcher's default];
// PAXCRON_LAUNCH_OUT [none] a folder for launch.md and the plots;
// PAXCRON_LAUNCH_TELEMETRY [off] on keeps the agents' metrics (see
// benchAgentTelemetry).
func BenchmarkLaunchVsNomadPeriodic(b *testing.B) {
	cfg := launchConfigFromEnv(b)
	rep := newLaunchReport(cfg)
	for range b.N {
		for _, g := range cfg.groups() {
			su, n := g.setup, g.n
			agent, a := benchAgent(b, cfg)
			rep.agentVersion = agent.Version
			for r := range cfg.repsFor(n) {
				order := []string{sysNomad, sysPaxcron, sysBare}
				if r%2 == 1 {
					order = []string{sysPaxcron, sysNomad, sysBare}
				}
				if only := os.Getenv("PAXCRON_LAUNCH_ONLY"); only != "" {
					// Profiling one system; no ratio.
					order = slices.DeleteFunc(order, func(s string) bool { return !strings.HasPrefix(s, only) })
				}
				for i, sys := range order {
					run := launchRun{Setup: su, N: n, Rep: r + 1, System: sys, First: i == 0}
					run.G, run.L = measureGuarded(b, cfg, agent, a, run)
					// Printed as it comes (a benchmark's log is held to
					// its end): a run cut short still shows what it did.
					fmt.Printf("launch: %s %s N=%d rep %d %s: p50 %v p99 %v max %v, %.0f children/s, missing %d, doubled %d; others %.2f cores, %.1f MB/s written, redos %d%s\n",
						time.Now().UTC().Format("15:04:05"), su, n, r+1, sys, run.L.P50, run.L.P99, run.L.Max, run.L.Rate, run.L.Missing, run.L.Doubled, run.G.Others, run.G.OthersWriteMBps, run.G.Redos, clientNote(run.L.Client))
					rep.add(run)
				}
			}
			// After each group, so that a run cut short leaves a report of
			// the groups it finished.
			if cfg.out != "" {
				if err := rep.write(cfg.out); err != nil {
					b.Fatal(err)
				}
			}
			a.Close()
			if err := agent.Stop(); err != nil {
				b.Logf("stopping the group's agent: %v", err)
			}
		}
	}
	for _, line := range rep.table() {
		b.Log(line)
	}
	if cfg.out != "" {
		if err := rep.write(cfg.out); err != nil {
			b.Fatal(err)
		}
	}
	rep.metrics(b)
	for _, r := range rep.runs {
		if r.L.Missing+r.L.Doubled > 0 {
			b.Errorf("%s N=%d rep %d %s: %d of %d slots missing, %d doubled", r.Setup, r.N, r.Rep, r.System, r.L.Missing, r.N, r.L.Doubled)
		}
	}
}

// benchAgentTelemetry is the agents' telemetry block unless
// PAXCRON_LAUNCH_TELEMETRY=on: no metric is collected. A dev agent
// publishes Prometheus metrics, and several carry the job's ID as a label
// (the eval broker's timings among them), so each new job adds summaries
// that are never freed: measured at N = 3,000, 61% of the agent's heap
// was quantile streams, the agent grew past 6 GiB in one repetition, and
// at N = 10,000 it had reached 22 GiB of the machine's 24. The same agent
// serves every system of a group, so the setting weighs on all alike.
const benchAgentTelemetry = `telemetry {
  filter_default = false
}
`

// benchAgent starts a fresh dev agent for one group of runs (one set-up
// and N), so that no group inherits another's jobs, and a client for it.
func benchAgent(b *testing.B, cfg launchConfig) (*nomadtest.Agent, *api.Client) {
	b.Helper()
	opts := nomadtest.Options{Dir: b.TempDir()}
	if !cfg.telemetry {
		opts.Config = benchAgentTelemetry
	}
	agent, err := nomadtest.Launch(opts)
	if errors.Is(err, nomadtest.ErrNoBinary) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	a, err := api.NewClient(&api.Config{Address: agent.Addr, SecretID: agent.Token})
	if err != nil {
		_ = agent.Stop()
		b.Fatal(err)
	}
	return agent, a
}

// The systems and set-ups compared.
const (
	sysNomad   = "Nomad periodic"
	sysPaxcron = "paxcron"
	// sysBare is no system: the benchmark itself sends the N dispatches
	// at the due time through the same HTTP API, with as many calls in
	// flight as paxcron's Client sends at once (nomad.DispatchCalls; the
	// dispatcher's workers if PAXCRON_BENCH_WORKERS is set), and no log, read-back or
	// token. It is the agent's own ceiling for children made over HTTP,
	// which paxcron cannot beat; Nomad's dispatcher makes its children
	// inside the server.
	sysBare = "bare HTTP dispatch"

	setupUnplaceable = "unplaceable"
	setupRunnable    = "runnable"
)

type launchConfig struct {
	ns              []int
	reps, repsLarge int
	setups          []string
	runnableMaxN    int
	workers         int
	out             string
	command         string
	// telemetry keeps the agents' default metrics (PAXCRON_LAUNCH_TELEMETRY=on).
	telemetry bool
}

func launchConfigFromEnv(b *testing.B) launchConfig {
	cfg := launchConfig{
		ns: envInts(b, "PAXCRON_LAUNCH_N", "100,1000,10000"), reps: envInt(b, "PAXCRON_LAUNCH_REPS", 5),
		repsLarge: envInt(b, "PAXCRON_LAUNCH_REPS_LARGE", 3), runnableMaxN: envInt(b, "PAXCRON_LAUNCH_RUNNABLE_MAX_N", 1000),
		workers: envInt(b, "PAXCRON_BENCH_WORKERS", 0), out: os.Getenv("PAXCRON_LAUNCH_OUT"),
	}
	switch t := os.Getenv("PAXCRON_LAUNCH_TELEMETRY"); t {
	case "", "off":
	case "on":
		cfg.telemetry = true
	default:
		b.Fatalf("PAXCRON_LAUNCH_TELEMETRY=%q: want on or off", t)
	}
	for s := range strings.SplitSeq(envOr("PAXCRON_LAUNCH_SETUPS", setupUnplaceable+","+setupRunnable), ",") {
		if s != setupUnplaceable && s != setupRunnable {
			b.Fatalf("PAXCRON_LAUNCH_SETUPS: unknown set-up %q (want %s or %s)", s, setupUnplaceable, setupRunnable)
		}
		cfg.setups = append(cfg.setups, s)
	}
	cfg.command = "go test -run '^$' -bench LaunchVsNomadPeriodic -benchtime 1x -timeout 120m ./nomad"
	for _, k := range []string{"PAXCRON_LAUNCH_N", "PAXCRON_LAUNCH_REPS", "PAXCRON_LAUNCH_REPS_LARGE", "PAXCRON_LAUNCH_SETUPS", "PAXCRON_LAUNCH_RUNNABLE_MAX_N", "PAXCRON_BENCH_WORKERS", "PAXCRON_LAUNCH_TELEMETRY"} {
		if v := os.Getenv(k); v != "" {
			cfg.command = k + "=" + v + " " + cfg.command
		}
	}
	return cfg
}

// groups is the order the set-ups and Ns run in: the smaller Ns in every
// set-up first, then N >= 10,000 (the longest runs) last.
func (c launchConfig) groups() []group {
	var small, large []group
	for _, n := range c.ns {
		for _, su := range c.setups {
			switch {
			case su == setupRunnable && n > c.runnableMaxN:
			case n >= 10000:
				large = append(large, group{su, n})
			default:
				small = append(small, group{su, n})
			}
		}
	}
	return append(small, large...)
}

func (c launchConfig) repsFor(n int) int {
	if n >= 10000 {
		return c.repsLarge
	}
	return c.reps
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(b *testing.B, k string, def int) int {
	s := os.Getenv(k)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a non-negative integer", k, s)
	}
	return n
}

func envInts(b *testing.B, k, def string) []int {
	var ns []int
	for s := range strings.SplitSeq(envOr(k, def), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			b.Fatalf("%s: %q is not a positive integer", k, s)
		}
		ns = append(ns, n)
	}
	return ns
}

// launchRun is one system's run at one N in one repetition.
type launchRun struct {
	Setup  string
	N, Rep int
	System string
	First  bool // it ran first in its repetition
	L      lateness
	G      guard
}

// lateness is what one run measured.
type lateness struct {
	P50, P99, Max time.Duration
	// Rate is children per second from the scheduled time to the last one.
	Rate float64
	// Children counts the children; Missing the slots without one,
	// Doubled those with more than one.
	Children, Missing, Doubled int
	// Late is every child's lateness in creation order.
	Late []time.Duration
	// Client is paxcron's Nomad client's counters over the run (its
	// retries explain a tail), nil for the other systems.
	Client *nomad.ClientStats
}

// clientNote is how a run's line shows paxcron's client counters.
func clientNote(st *nomad.ClientStats) string {
	if st == nil {
		return ""
	}
	return fmt.Sprintf("; client: %d dispatches, %d sent, %d retries, %d repeated tokens, %d phantoms, %d read-backs proving %d, not sent for the lease: %d ended, %d ran out",
		st.Dispatches, st.DispatchAttempts, st.Retries, st.RepeatedTokens, st.Phantoms, st.ProofReads, st.Proved, st.LeaseEnded, st.LeaseRanOut)
}

// errTooLate: setting a run up took past its due time; it is redone with
// more lead.
var errTooLate = errors.New("setting the run up took past its due time")

// measureGuarded measures run under the quiet guard, with more lead when
// setting it up overran.
func measureGuarded(b *testing.B, cfg launchConfig, agent *nomadtest.Agent, a *api.Client, run launchRun) (guard, lateness) {
	b.Helper()
	var l lateness
	lead := 10*time.Second + time.Duration(run.N)*3*time.Millisecond
	g, err := guarded(func() error {
		for try := 0; ; try++ {
			tag := fmt.Sprintf("%c%d-%d-%d", run.Setup[0], run.N, run.Rep, time.Now().UnixNano()%1e6)
			var err error
			switch run.System {
			case sysNomad:
				l, err = nomadPeriodic(a, run.Setup, tag, run.N, lead)
			case sysBare:
				l, err = bareDispatch(cfg, a, agent.Token, run.Setup, tag, run.N, lead)
			default:
				l, err = paxcronLaunch(b, cfg, agent, a, run.Setup, tag, run.N, lead)
			}
			if !errors.Is(err, errTooLate) || try == 2 {
				return err
			}
			lead *= 2
		}
	})
	if err != nil {
		b.Fatalf("%s N=%d rep %d %s: %v", run.Setup, run.N, run.Rep, run.System, err)
	}
	return g, l
}

// benchParentFor is parentJob(id) for the set-up: unplaceable parents
// carry a constraint no node meets, so their children are created but no
// task runs.
func benchParentFor(setup, id string) *api.Job {
	j := parentJob(id)
	if setup == setupUnplaceable {
		j.Constrain(api.NewConstraint("${attr.kernel.name}", "=", "no-such-kernel"))
	}
	return j
}

// measure turns the children's submit times into lateness figures.
func measure(due time.Time, bySlot map[string][]int64, n int) lateness {
	var subs []int64
	var l lateness
	for _, s := range bySlot {
		l.Children += len(s)
		if len(s) > 1 {
			l.Doubled++
		}
		subs = append(subs, s...)
	}
	l.Missing = n - len(bySlot)
	if len(subs) == 0 {
		return l
	}
	slices.Sort(subs)
	for _, s := range subs {
		l.Late = append(l.Late, time.Unix(0, s).Sub(due))
	}
	sorted := slices.Clone(l.Late)
	slices.Sort(sorted)
	l.P50, l.P99, l.Max = percentile(sorted, 50), percentile(sorted, 99), sorted[len(sorted)-1]
	l.Rate = float64(len(sorted)) / max(l.Max.Seconds(), 1e-3)
	return l
}

// percentile is the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

// dueAfter returns a whole second at least lead from now, and its cron
// fields (second, minute, hour) in UTC.
func dueAfter(lead time.Duration) (time.Time, string) {
	t := time.Now().UTC().Add(lead).Truncate(time.Second).Add(time.Second)
	return t, fmt.Sprintf("%d %d %d", t.Second(), t.Minute(), t.Hour())
}

// parallel runs f(i) for i in [0, n) on workers goroutines and returns
// the first error.
func parallel(n, workers int, f func(i int) error) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					first = cmp(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// nomadPeriodic registers n periodic batch jobs all due in one second and
// measures the children Nomad's own dispatcher creates.
func nomadPeriodic(a *api.Client, setup, tag string, n int, lead time.Duration) (lateness, error) {
	prefix := "per-" + tag + "-"
	defer purge(a, prefix)
	due, fields := dueAfter(lead)
	err := parallel(n, 8, func(i int) error {
		j := benchParentFor(setup, fmt.Sprintf("%s%05d", prefix, i))
		j.ParameterizedJob = nil
		j.Periodic = &api.PeriodicConfig{Specs: []string{fields + " * * * *"}, TimeZone: new("UTC")}
		_, _, err := a.Jobs().Register(j, nil)
		return err
	})
	if err != nil {
		return lateness{}, fmt.Errorf("registering the periodic jobs: %w", err)
	}
	if time.Now().After(due) {
		return lateness{}, errTooLate
	}
	bySlot, err := waitChildren(a, prefix, n, due, func(s *api.JobListStub) string { return s.ParentID })
	if err != nil {
		return lateness{}, err
	}
	return measure(due, bySlot, n), nil
}

// bareDispatch registers n parents and, at the due time, dispatches one
// child of each over HTTP, cfg's worker count at a time (the
// dispatcher's default unless set).
func bareDispatch(cfg launchConfig, a *api.Client, token string, setup, tag string, n int, lead time.Duration) (lateness, error) {
	prefix := "bare-" + tag + "-"
	defer purge(a, prefix)
	err := parallel(n, 8, func(i int) error {
		_, _, err := a.Jobs().Register(benchParentFor(setup, fmt.Sprintf("%s%05d", prefix, i)), nil)
		return err
	})
	if err != nil {
		return lateness{}, fmt.Errorf("registering the parents: %w", err)
	}
	due, _ := dueAfter(lead)
	if time.Now().After(due) {
		return lateness{}, errTooLate
	}
	// As many dispatches in flight as paxcron's Client sends at once, and
	// through its transport (nomad.Client.API): a connection kept per call
	// (with the API client's default of 3 idle ones, 64 workers open and
	// close connections so fast that Nomad counts over 100 at once and
	// answers 429s, limits.http_max_conns_per_client), and no ask for
	// gzipped replies.
	workers := nomad.DispatchCalls
	if cfg.workers > 0 {
		workers = min(cfg.workers, nomad.DispatchCalls)
	}
	ncfg := nomad.DefaultConfig()
	ncfg.Address, ncfg.Token = a.Address(), token
	nc, err := nomad.New(ncfg)
	if err != nil {
		return lateness{}, err
	}
	defer nc.Close()
	da := nc.API()
	time.Sleep(time.Until(due))
	err = parallel(n, workers, func(i int) error {
		id := fmt.Sprintf("%s%05d", prefix, i)
		_, _, err := da.Jobs().Dispatch(id, map[string]string{nomad.MetaIdentity: "bare"}, nil, "", nil)
		return err
	})
	if err != nil {
		return lateness{}, fmt.Errorf("dispatching: %w", err)
	}
	bySlot, err := waitChildren(a, prefix, n, due, func(s *api.JobListStub) string { return s.ParentID })
	if err != nil {
		return lateness{}, err
	}
	return measure(due, bySlot, n), nil
}

// paxcronLaunch creates n cron jobs due in one second on a fresh 3-replica
// cluster, each dispatching its own parameterized parent (what `paxcron job
// takeover` makes of n periodic jobs), and measures the children. One
// parent for all n would measure something else: Nomad checks a dispatch's
// token against every child of its parent, twice (in the RPC and in the
// FSM), so a herd on one parent costs it O(n^2).
func paxcronLaunch(b *testing.B, cfg launchConfig, agent *nomadtest.Agent, a *api.Client, setup, tag string, n int, lead time.Duration) (lateness, error) {
	prefix := "cron-" + tag + "-"
	defer purge(a, prefix)
	err := parallel(n, 8, func(i int) error {
		_, _, err := a.Jobs().Register(benchParentFor(setup, fmt.Sprintf("%s%05d", prefix, i)), nil)
		return err
	})
	if err != nil {
		return lateness{}, fmt.Errorf("registering the parents: %w", err)
	}
	ncfg := nomad.DefaultConfig()
	ncfg.Address, ncfg.Token = agent.Addr, agent.Token
	c, err := nomad.New(ncfg)
	if err != nil {
		return lateness{}, err
	}
	defer c.Close()
	opts := localcluster.DefaultOptions(b.TempDir())
	var dmu sync.Mutex
	var ds []*nomad.Dispatcher
	opts.Cron = &localcluster.CronOptions{
		Launcher: launcher.Config{MemoryHorizon: c.MemoryHorizon()},
		NewDispatcher: func(_ paxos.ReplicaID, done func(launcher.Result)) launcher.Dispatcher {
			d, err := nomad.NewDispatcher(nomad.DispatcherConfig{Caller: c, Deliver: done, Workers: cfg.workers})
			if err != nil {
				panic(err) // the config is the benchmark's own
			}
			dmu.Lock()
			ds = append(ds, d)
			dmu.Unlock()
			return d
		},
	}
	cl, err := localcluster.Start(opts)
	if err != nil {
		return lateness{}, err
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
		return lateness{}, err
	}
	due, fields := dueAfter(lead)
	err = parallel(n, 64, func(i int) error {
		name := fmt.Sprintf("%s%05d", prefix, i)
		return cl.ProposeCommand(ctx, state.PutJob{Name: name, At: time.Now(),
			Spec: state.JobSpec{Schedule: fields + " * * *", NomadJob: name}})
	})
	if err != nil {
		return lateness{}, fmt.Errorf("creating the cron jobs: %w", err)
	}
	if time.Now().After(due) {
		return lateness{}, errTooLate
	}
	bySlot, err := waitChildren(a, prefix, n, due, func(s *api.JobListStub) string { return s.ParentID })
	if err != nil {
		return lateness{}, err
	}
	l := measure(due, bySlot, n)
	st := c.Stats()
	l.Client = &st
	return l, nil
}

// waitChildren waits until n slots have children under prefix (or the
// deadline), then, a little later to see a late duplicate, lists their
// submit times by slot. It polls no more than once a second, less often
// for large n: each poll lists every child, which costs the agent CPU
// the runs measure.
func waitChildren(a *api.Client, prefix string, n int, due time.Time, slot func(*api.JobListStub) string) (map[string][]int64, error) {
	deadline := due.Add(90*time.Second + time.Duration(n)*20*time.Millisecond)
	poll := max(time.Second, time.Duration(n)*400*time.Microsecond)
	time.Sleep(time.Until(due))
	list := func() (map[string][]int64, error) {
		stubs, _, err := a.Jobs().PrefixList(prefix)
		if err != nil {
			return nil, err
		}
		bySlot := map[string][]int64{}
		for _, s := range stubs {
			if s.ParentID == "" {
				continue // a parent, not a child
			}
			k := slot(s)
			bySlot[k] = append(bySlot[k], s.SubmitTime)
		}
		return bySlot, nil
	}
	for {
		time.Sleep(poll)
		bySlot, err := list()
		if err != nil {
			return nil, err
		}
		if len(bySlot) >= n || time.Now().After(deadline) {
			time.Sleep(2 * time.Second)
			return list()
		}
	}
}

// purge deregisters (and purges) every job whose ID starts with prefix,
// parents first so that no periodic job launches meanwhile, then has the
// agent collect garbage.
func purge(a *api.Client, prefix string) {
	stubs, _, err := a.Jobs().PrefixList(prefix)
	if err != nil {
		return
	}
	slices.SortFunc(stubs, func(x, y *api.JobListStub) int {
		return compareBool(x.ParentID != "", y.ParentID != "")
	})
	parents := 0
	for parents < len(stubs) && stubs[parents].ParentID == "" {
		parents++
	}
	for _, part := range [][]*api.JobListStub{stubs[:parents], stubs[parents:]} {
		_ = parallel(len(part), 8, func(i int) error {
			_, _, err := a.Jobs().Deregister(part[i].ID, true, nil)
			return err
		})
	}
	_ = a.System().GarbageCollect()
}

func compareBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case !x:
		return -1
	}
	return 1
}

package nomad_test

import (
	"sync"
	"testing"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/internal/localcluster"
	"paxcron/nomad"
	"paxcron/nomad/nomadtest"
	"paxcron/paxos"
)

// TestAgentCronFailsClosed is the memory horizon end to end, on the real
// agent: a leader dispatches a launch and dies before it can record the
// child; Nomad garbage-collects the child and forgets its token; a new
// leader, past the horizon, finds nothing by look-up. It must record the
// launch as unknown and not dispatch it again (which, the token forgotten,
// would make a second child).
func TestAgentCronFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("two clusters and a Nomad GC: about 20 s")
	}
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)
	register(t, a, parentJob("it-failclosed"))
	dir := t.TempDir()
	ctx := ctxFor(t, 2*time.Minute)

	var mu sync.Mutex
	var dispatched []string // identities the first leader dispatched
	var outcomes = map[string]state.Outcome{}
	applied := func(_ paxos.ReplicaID, _ uint64, cmd state.Command, err error) {
		if f, ok := cmd.(state.LaunchFinished); ok && err == nil {
			mu.Lock()
			outcomes[state.LaunchIdentity(f.Job, f.ScheduledAt, f.LaunchKind)] = f.Outcome
			mu.Unlock()
		}
	}
	start := func(now func() time.Time, deliver func(done func(launcher.Result)) func(launcher.Result)) *localcluster.Cluster {
		opts := localcluster.DefaultOptions(dir)
		opts.Cron = &localcluster.CronOptions{
			Launcher: launcher.Config{MemoryHorizon: c.MemoryHorizon(), MaxCallLatency: 2 * time.Second},
			Now:      now,
			NewDispatcher: func(_ paxos.ReplicaID, done func(launcher.Result)) launcher.Dispatcher {
				d, err := nomad.NewDispatcher(nomad.DispatcherConfig{Caller: c, Deliver: deliver(done), Now: now, RequestTimeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(d.Close)
				return d
			},
			Applied: applied,
		}
		cl, err := localcluster.Start(opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		return cl
	}

	// The first cluster's leader dispatches, and every answer is lost.
	lost := func(func(launcher.Result)) func(launcher.Result) { return func(launcher.Result) {} }
	first := start(time.Now, lost)
	put, err := state.Encode(state.PutJob{Name: "fc", At: time.Now(), Spec: state.JobSpec{Schedule: "*/2 * * * * *", NomadJob: "it-failclosed"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Propose(ctx, put); err != nil {
		t.Fatal(err)
	}
	var child string
	eventually(t, 30*time.Second, "a child in Nomad", func() (bool, error) {
		jobs, _, err := a.Jobs().PrefixList("it-failclosed/dispatch-fc-")
		if err != nil || len(jobs) == 0 {
			return false, err
		}
		child = jobs[0].ID
		return true, nil
	})
	pause, _ := state.Encode(state.Pause{Name: "fc"})
	if err := first.Propose(ctx, pause); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := a.Jobs().PrefixList("it-failclosed/dispatch-fc-")
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		info, _, err := a.Jobs().Info(j.ID, nil)
		if err != nil || info.DispatchIdempotencyToken == nil {
			t.Fatalf("reading %s: %v", j.ID, err)
		}
		dispatched = append(dispatched, *info.DispatchIdempotencyToken)
		waitDead(t, a, j.ID)
	}
	mu.Lock()
	for _, id := range dispatched {
		if o, ok := outcomes[id]; ok {
			t.Fatalf("launch %s was concluded (%+v) though every answer was lost", id, o)
		}
	}
	mu.Unlock()

	// Nomad forgets the children and their tokens.
	if err := a.System().GarbageCollect(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, child+" collected", func() (bool, error) {
		jobs, _, err := a.Jobs().PrefixList("it-failclosed/dispatch-fc-")
		return err == nil && len(jobs) == 0, err
	})

	// Five hours later (past the 3 h 45 min horizon), a new leader.
	later := func() time.Time { return time.Now().Add(5 * time.Hour) }
	pass := func(done func(launcher.Result)) func(launcher.Result) { return done }
	second := start(later, pass)
	defer second.Close()
	eventually(t, 60*time.Second, "the open launches concluded", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range dispatched {
			if _, ok := outcomes[id]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	mu.Lock()
	for _, id := range dispatched {
		if o := outcomes[id]; o.Kind != state.OutcomeUnknown {
			t.Errorf("launch %s concluded %+v, want unknown (fail closed)", id, o)
		}
	}
	mu.Unlock()
	if jobs, _, err := a.Jobs().PrefixList("it-failclosed/dispatch-fc-"); err != nil || len(jobs) != 0 {
		t.Fatalf("after the new leader: %d children (%v), want none: a launch past the horizon was dispatched again", len(jobs), err)
	}
	t.Logf("%d launches dispatched, their answers lost, collected by Nomad, then recorded unknown by the next leader and not dispatched again", len(dispatched))
}

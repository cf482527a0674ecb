package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/nomad"
	"paxcron/nomad/nomadtest"
	"paxcron/sim/simclock"
	"paxcron/sim/simnomad"
)

func TestMain(m *testing.M) { os.Exit(nomadtest.Main(m, nomadtest.Options{})) }

// backend is a Nomad the cases run against.
type backend interface {
	// register makes a parameterized parent whose children run until
	// stopped (long) or finish at once.
	register(t *testing.T, parent string)
	call(t *testing.T, req launcher.Request) launcher.Result
	// callAll makes reqs at once (the real agent: concurrently, through
	// one client, as a dispatcher's workers do).
	callAll(t *testing.T, reqs []launcher.Request) []launcher.Result
	// finish waits until child has ended on its own.
	finish(t *testing.T, parent, child string)
	gc(t *testing.T)
	stopParent(t *testing.T, parent string)
}

var scheduled = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

// runLong and runShort are the meta a case dispatches with: the real
// parent's task sleeps that many seconds; the fake is configured to match.
var (
	runLong  = map[string]string{"sleep": "3600"}
	runShort = map[string]string{"sleep": "0"}
)

func request(op launcher.Op, parent, identity, child string, meta map[string]string) launcher.Request {
	return launcher.Request{
		Op: op, Job: strings.TrimSuffix(identity, "-1772330400"), ScheduledAt: scheduled, Identity: identity,
		Spec: state.JobSpec{NomadJob: parent, Meta: meta}, ChildID: child,
		Deadline: time.Now().Add(30 * time.Second),
	}
}

// cases are the behaviours paxcron relies on, each as requests and the
// results they must get.
var cases = []struct {
	name string
	run  func(t *testing.T, b backend)
}{
	{"a token dispatches one child, named after it", func(t *testing.T, b backend) {
		b.register(t, "c-once")
		first := mustChild(t, b.call(t, request(launcher.OpDispatch, "c-once", "a-1772330400", "", runLong)))
		if !strings.HasPrefix(first, "c-once/dispatch-a-1772330400-") {
			t.Fatalf("child %q is not named <parent>/dispatch-<identity>-...", first)
		}
		if again := mustChild(t, b.call(t, request(launcher.OpDispatch, "c-once", "a-1772330400", "", runLong))); again != first {
			t.Fatalf("repeated token: child %q, want %q", again, first)
		}
		if other := mustChild(t, b.call(t, request(launcher.OpDispatch, "c-once", "b-1772330400", "", runLong))); other == first {
			t.Fatal("another token got the same child")
		}
	}},
	{"a look-up finds the token's child, and only it", func(t *testing.T, b backend) {
		b.register(t, "c-lookup")
		child := mustChild(t, b.call(t, request(launcher.OpDispatch, "c-lookup", "a-1772330400", "", runLong)))
		if r := b.call(t, request(launcher.OpLookup, "c-lookup", "a-1772330400", "", nil)); r.Err != nil || !r.Found || r.ChildID != child {
			t.Fatalf("look-up: %+v, want %s", r, child)
		}
		if r := b.call(t, request(launcher.OpLookup, "c-lookup", "z-1772330400", "", nil)); r.Err != nil || r.Found {
			t.Fatalf("look-up of a token never dispatched: %+v", r)
		}
		if r := b.call(t, request(launcher.OpLookup, "c-nobody", "a-1772330400", "", nil)); r.Err != nil || r.Found {
			t.Fatalf("look-up under a parent that does not exist: %+v", r)
		}
	}},
	{"a token's scope is its parent", func(t *testing.T, b backend) {
		b.register(t, "c-scope-1")
		b.register(t, "c-scope-2")
		one := mustChild(t, b.call(t, request(launcher.OpDispatch, "c-scope-1", "a-1772330400", "", runLong)))
		two := mustChild(t, b.call(t, request(launcher.OpDispatch, "c-scope-2", "a-1772330400", "", runLong)))
		if one == two {
			t.Fatal("one token, two parents, one child")
		}
	}},
	{"a running child is running until stopped", func(t *testing.T, b backend) {
		b.register(t, "c-stop")
		child := mustChild(t, b.call(t, request(launcher.OpDispatch, "c-stop", "a-1772330400", "", runLong)))
		if r := b.call(t, request(launcher.OpRunning, "c-stop", "a-1772330400", child, nil)); r.Err != nil || !r.Found {
			t.Fatalf("running: %+v", r)
		}
		if r := b.call(t, request(launcher.OpStop, "c-stop", "a-1772330400", child, nil)); r.Err != nil {
			t.Fatalf("stop: %+v", r)
		}
		// A stop takes effect when the child's task is killed: Nomad
		// answers "running" for a moment after (measured: tens of ms).
		for i := 0; ; i++ {
			r := b.call(t, request(launcher.OpRunning, "c-stop", "a-1772330400", child, nil))
			if r.Err != nil {
				t.Fatalf("running after stop: %+v", r)
			}
			if !r.Found {
				break
			}
			if i == 100 {
				t.Fatal("still running 10 s after it was stopped")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if r := b.call(t, request(launcher.OpStop, "c-stop", "a-1772330400", child, nil)); r.Err != nil {
			t.Fatalf("stopping a stopped child: %+v", r)
		}
		// Stopped is not collected: the token still finds its child.
		if r := b.call(t, request(launcher.OpDispatch, "c-stop", "a-1772330400", "", runLong)); r.Err != nil || r.ChildID != child {
			t.Fatalf("dispatch after stop: %+v, want %s", r, child)
		}
	}},
	{"garbage collection forgets a finished child's token", func(t *testing.T, b backend) {
		b.register(t, "c-gc")
		child := mustChild(t, b.call(t, request(launcher.OpDispatch, "c-gc", "a-1772330400", "", runShort)))
		b.finish(t, "c-gc", child)
		if r := b.call(t, request(launcher.OpRunning, "c-gc", "a-1772330400", child, nil)); r.Err != nil || r.Found {
			t.Fatalf("running after it finished: %+v", r)
		}
		if r := b.call(t, request(launcher.OpLookup, "c-gc", "a-1772330400", "", nil)); r.Err != nil || !r.Found || r.ChildID != child {
			t.Fatalf("look-up of a finished child: %+v", r)
		}
		b.gc(t)
		if r := b.call(t, request(launcher.OpLookup, "c-gc", "a-1772330400", "", nil)); r.Err != nil || r.Found {
			t.Fatalf("look-up after GC: %+v (the memory horizon exists because this is not found)", r)
		}
		again := mustChild(t, b.call(t, request(launcher.OpDispatch, "c-gc", "a-1772330400", "", runShort)))
		if again == child {
			t.Fatal("the token dispatched the collected child again")
		}
	}},
	{"concurrent dispatches are each told their token's one child", func(t *testing.T, b backend) {
		// The dispatcher proves a new child by reading it back in a batch
		// with other workers' (/v1/jobs/statuses): a just-made child must
		// be listed, and a phantom (a loser of one token's race) must not
		// be taken for a child.
		b.register(t, "c-herd")
		var reqs []launcher.Request
		for i := range 16 {
			id := fmt.Sprintf("h%02d-1772330400", i)
			for range 2 {
				reqs = append(reqs, request(launcher.OpDispatch, "c-herd", id, "", runLong))
			}
		}
		results := b.callAll(t, reqs)
		for i, r := range results {
			child := mustChild(t, r)
			found := b.call(t, request(launcher.OpLookup, "c-herd", reqs[i].Identity, "", nil))
			if found.Err != nil || !found.Found || found.ChildID != child {
				t.Fatalf("%s: told %s, look-up says %+v", reqs[i].Identity, child, found)
			}
		}
	}},
	{"a missing parent is refused", func(t *testing.T, b backend) {
		r := b.call(t, request(launcher.OpDispatch, "c-missing", "a-1772330400", "", runLong))
		if !errors.Is(r.Err, launcher.ErrRejected) {
			t.Fatalf("dispatch of a missing parent: %+v, want ErrRejected", r)
		}
	}},
	{"a stopped parent refuses new tokens and keeps old children", func(t *testing.T, b backend) {
		b.register(t, "c-stopped")
		child := mustChild(t, b.call(t, request(launcher.OpDispatch, "c-stopped", "a-1772330400", "", runLong)))
		b.stopParent(t, "c-stopped")
		if r := b.call(t, request(launcher.OpDispatch, "c-stopped", "a-1772330400", "", runLong)); r.Err != nil || r.ChildID != child {
			t.Fatalf("dispatch of a known token under a stopped parent: %+v, want %s", r, child)
		}
		if r := b.call(t, request(launcher.OpDispatch, "c-stopped", "b-1772330400", "", runLong)); !errors.Is(r.Err, launcher.ErrRejected) {
			t.Fatalf("dispatch of a new token under a stopped parent: %+v, want ErrRejected", r)
		}
		if r := b.call(t, request(launcher.OpLookup, "c-stopped", "a-1772330400", "", nil)); r.Err != nil || !r.Found || r.ChildID != child {
			t.Fatalf("look-up under a stopped parent: %+v", r)
		}
	}},
}

func mustChild(t *testing.T, r launcher.Result) string {
	t.Helper()
	if r.Err != nil || r.ChildID == "" {
		t.Fatalf("dispatch: %+v", r)
	}
	return r.ChildID
}

func TestConformance(t *testing.T) {
	for _, c := range cases {
		t.Run("simnomad/"+c.name, func(t *testing.T) { c.run(t, newFake(t)) })
	}
	for _, c := range cases {
		t.Run("nomad/"+c.name, func(t *testing.T) { c.run(t, newReal(t)) })
	}
}

// fake is simnomad on its own scheduler: calls take no time, replies are
// never lost, and a child runs for an hour unless dispatched to finish at
// once (meta sleep=0).
type fake struct {
	sched *simclock.Scheduler
	n     *simnomad.Nomad
	cfg   simnomad.Config
}

func newFake(t *testing.T) *fake {
	sched := simclock.NewScheduler()
	cfg := simnomad.Config{Epoch: scheduled, RunMin: time.Hour, RunMax: time.Hour, GCThreshold: 4 * time.Hour}
	n, err := simnomad.New(sched, rand.New(rand.NewPCG(1, 2)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fake{sched: sched, n: n, cfg: cfg}
}

func (f *fake) register(_ *testing.T, parent string) { f.n.Register("", "", parent) }

func (f *fake) call(t *testing.T, req launcher.Request) launcher.Result {
	t.Helper()
	run := time.Hour
	if req.Spec.Meta["sleep"] == "0" {
		run = 0
	}
	if run != f.cfg.RunMax {
		f.cfg.RunMin, f.cfg.RunMax = run, run
		if err := f.n.SetConfig(f.cfg); err != nil {
			t.Fatal(err)
		}
	}
	var got *launcher.Result
	f.n.Call(req, f.sched.Now()+30*time.Second, func(r launcher.Result) { got = &r })
	for got == nil && f.sched.Step() {
	}
	if got == nil {
		t.Fatal("simnomad never answered")
	}
	return *got
}

func (f *fake) callAll(t *testing.T, reqs []launcher.Request) []launcher.Result {
	t.Helper()
	out := make([]launcher.Result, len(reqs))
	for i, r := range reqs {
		out[i] = f.call(t, r)
	}
	return out
}

func (f *fake) finish(_ *testing.T, _, _ string) { f.sched.RunUntil(f.sched.Now() + time.Second) }

func (f *fake) gc(*testing.T) { f.n.ForceGC() }

func (f *fake) stopParent(_ *testing.T, parent string) { f.n.StopParent("", "", parent) }

// real is the dev agent, called through nomad.Call as the dispatcher calls.
type real struct {
	admin  *api.Client
	client *nomad.Client
}

func newReal(t *testing.T) *real {
	agent := nomadtest.Shared(t)
	admin, err := api.NewClient(&api.Config{Address: agent.Addr, SecretID: agent.Token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	cfg := nomad.DefaultConfig()
	cfg.Address, cfg.Token = agent.Addr, agent.Token
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = 20*time.Millisecond, 200*time.Millisecond
	c, err := nomad.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &real{admin: admin, client: c}
}

func (r *real) register(t *testing.T, parent string) {
	t.Helper()
	j := api.NewBatchJob(parent, parent, "global", 50)
	j.Datacenters = []string{"*"}
	j.Meta = map[string]string{"sleep": "0"}
	j.ParameterizedJob = &api.ParameterizedJobConfig{Payload: "optional", MetaOptional: []string{nomad.MetaIdentity, nomad.MetaJob, nomad.MetaScheduledAt, "sleep"}}
	task := api.NewTask("t", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", `exec sleep "$NOMAD_META_sleep"`}).
		Require(&api.Resources{CPU: new(20), MemoryMB: new(32)})
	task.KillTimeout = new(time.Second)
	tg := api.NewTaskGroup("g", 1).AddTask(task)
	tg.RestartPolicy = &api.RestartPolicy{Attempts: new(0), Mode: new("fail")}
	tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: new(0), Unlimited: new(false)}
	j.AddTaskGroup(tg)
	if _, _, err := r.admin.Jobs().Register(j, nil); err != nil {
		t.Fatalf("registering %s: %v", parent, err)
	}
	t.Cleanup(func() { r.admin.Jobs().Deregister(parent, true, nil) })
}

func (r *real) call(t *testing.T, req launcher.Request) launcher.Result {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), req.Deadline)
	defer cancel()
	res := nomad.Call(ctx, r.client, req)
	if req.Op == launcher.OpDispatch && res.Err == nil && req.Spec.Meta["sleep"] != "0" {
		child := res.ChildID
		t.Cleanup(func() { r.admin.Jobs().Deregister(child, false, nil) })
	}
	return res
}

func (r *real) callAll(t *testing.T, reqs []launcher.Request) []launcher.Result {
	t.Helper()
	out := make([]launcher.Result, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithDeadline(context.Background(), req.Deadline)
			defer cancel()
			out[i] = nomad.Call(ctx, r.client, req)
		})
	}
	close(start)
	wg.Wait()
	for i, res := range out {
		if reqs[i].Op == launcher.OpDispatch && res.Err == nil {
			child := res.ChildID
			t.Cleanup(func() { r.admin.Jobs().Deregister(child, false, nil) })
		}
	}
	return out
}

func (r *real) finish(t *testing.T, _, child string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, _, err := r.admin.Jobs().Info(child, nil)
		if err == nil && j.Status != nil && *j.Status == "dead" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %s did not finish within a minute (%v)", child, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *real) gc(t *testing.T) {
	t.Helper()
	if err := r.admin.System().GarbageCollect(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the collection runs after the call returns (measured: about 1 s)
}

func (r *real) stopParent(t *testing.T, parent string) {
	t.Helper()
	if _, _, err := r.admin.Jobs().Deregister(parent, false, nil); err != nil {
		t.Fatal(err)
	}
}

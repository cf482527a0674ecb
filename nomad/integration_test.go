package nomad_test

// Integration tests against a real Nomad dev agent (nomad/nomadtest): one
// agent for the package, plus one with ACLs for TestAgentACLDenied. They skip
// when there is no nomad binary (NOMAD_BIN or PATH). Their names start
// with TestAgent: go test -run TestAgent runs them alone. Each test uses parent
// jobs of its own, so they may share the agent; they do not run in
// parallel, since TestAgentLookupAfterGC forces a GC of every dead job.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/nomad"
	"paxcron/nomad/nomadtest"
)

func TestMain(m *testing.M) { os.Exit(nomadtest.Main(m, nomadtest.Options{})) }

// scheduled is the scheduled time of the launches the tests dispatch.
var scheduled = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

// client returns a Client of agent with token, with short backoffs.
func client(t *testing.T, agent *nomadtest.Agent, token string) *nomad.Client {
	t.Helper()
	cfg := nomad.DefaultConfig()
	cfg.Address = agent.Addr
	cfg.Token = token
	cfg.RetryBackoffMin = 20 * time.Millisecond
	cfg.RetryBackoffMax = 200 * time.Millisecond
	c, err := nomad.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// admin returns a Go API client of agent with its management token.
func admin(t *testing.T, agent *nomadtest.Agent) *api.Client {
	t.Helper()
	a, err := api.NewClient(&api.Config{Address: agent.Addr, SecretID: agent.Token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// parentMeta are the meta keys a test parent accepts: paxcron's and the
// tests' own ("sleep", seconds the child's task sleeps; "kind").
var parentMeta = []string{nomad.MetaIdentity, nomad.MetaJob, nomad.MetaScheduledAt, "sleep", "kind"}

// parentJob is a parameterized batch job of one raw_exec task that sleeps
// $NOMAD_META_sleep seconds (0 by default), never restarted or
// rescheduled, stopped within a second.
func parentJob(id string) *api.Job {
	j := api.NewBatchJob(id, id, "global", 50)
	j.Datacenters = []string{"*"}
	j.Meta = map[string]string{"sleep": "0"}
	j.ParameterizedJob = &api.ParameterizedJobConfig{Payload: "optional", MetaOptional: parentMeta}
	task := api.NewTask("t", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", `exec sleep "$NOMAD_META_sleep"`}).
		Require(&api.Resources{CPU: new(20), MemoryMB: new(32)})
	task.KillTimeout = new(time.Second)
	tg := api.NewTaskGroup("g", 1).AddTask(task)
	tg.RestartPolicy = &api.RestartPolicy{Attempts: new(0), Mode: new("fail")}
	tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: new(0), Unlimited: new(false)}
	j.AddTaskGroup(tg)
	return j
}

func register(t *testing.T, a *api.Client, j *api.Job) {
	t.Helper()
	if _, _, err := a.Jobs().Register(j, nil); err != nil {
		t.Fatalf("registering %s: %v", *j.ID, err)
	}
}

// launch is a dispatch of parent for cron job name at the scheduled time.
func launch(parent, name string, meta map[string]string) nomad.Launch {
	return nomad.Launch{
		Target:      state.Target{NomadJob: parent},
		Job:         name,
		Identity:    state.Identity(name, scheduled),
		ScheduledAt: scheduled,
		Meta:        meta,
	}
}

// eventually polls cond every 100 ms until it holds, fails, or timeout
// passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		<-tick.C
	}
}

// children lists the jobs whose ID starts with the launch's child prefix.
func children(t *testing.T, a *api.Client, l nomad.Launch) []*api.JobListStub {
	t.Helper()
	jobs, _, err := a.Jobs().PrefixList(nomad.ChildPrefix(l.Target.NomadJob, l.Identity))
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func TestAgentDispatchChildHasMetaAndToken(t *testing.T) {
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)
	register(t, a, parentJob("it-meta"))
	l := launch("it-meta", "nightly", map[string]string{"kind": "nightly"})
	l.Payload = []byte(`{"x":1}`)

	child, err := c.Dispatch(ctxFor(t, 20*time.Second), l)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(child, nomad.ChildPrefix("it-meta", l.Identity)) {
		t.Errorf("child %s lacks the prefix %s", child, nomad.ChildPrefix("it-meta", l.Identity))
	}
	job, _, err := a.Jobs().Info(child, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := *job.DispatchIdempotencyToken; got != l.Identity {
		t.Errorf("token %q, want %q", got, l.Identity)
	}
	want := map[string]string{
		nomad.MetaIdentity: "nightly-1772330400", nomad.MetaJob: "nightly",
		nomad.MetaScheduledAt: "2026-03-01T02:00:00Z", "kind": "nightly", "sleep": "0",
	}
	for k, v := range want {
		if job.Meta[k] != v {
			t.Errorf("meta %s = %q, want %q (meta %v)", k, job.Meta[k], v, job.Meta)
		}
	}
	if string(job.Payload) != `{"x":1}` {
		t.Errorf("payload %q", job.Payload)
	}
}

func TestAgentDispatchRepeatedReturnsSameChild(t *testing.T) {
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)
	register(t, a, parentJob("it-repeat"))
	l := launch("it-repeat", "hourly", nil)
	ctx := ctxFor(t, 20*time.Second)

	first, err := c.Dispatch(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	l.Meta = map[string]string{"kind": "changed"} // not compared by Nomad
	second, err := c.Dispatch(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatalf("second dispatch made %s, first %s", second, first)
	}
	if n := len(children(t, a, l)); n != 1 {
		t.Fatalf("%d children, want 1", n)
	}
	if st := c.Stats(); st.RepeatedTokens != 1 {
		t.Errorf("stats %+v: want one repeated token", st)
	}
}

// TestAgentConcurrentDispatchOneChild: 16 (then 32) dispatches of one identity
// at once make one child, and every caller is told that child, although
// Nomad may answer a loser with a child that does not exist (a phantom:
// measured here, 4 to 26 in rounds of 32, rarely any in rounds of 16).
// Each round is a new identity; the callers' connections are opened
// first, so that the dispatches reach Nomad together.
func TestAgentConcurrentDispatchOneChild(t *testing.T) {
	agent := nomadtest.Shared(t)
	a := admin(t, agent)
	register(t, a, parentJob("it-herd"))
	ctx := ctxFor(t, 60*time.Second)

	sizes := []int{16, 16, 32, 32}
	clients := make([]*nomad.Client, slices.Max(sizes)) // one per caller, like leaders
	for i := range clients {
		clients[i] = client(t, agent, agent.Token)
		if _, _, err := clients[i].Lookup(ctx, state.Target{NomadJob: "it-herd"}, "warm-up"); err != nil {
			t.Fatal(err)
		}
	}
	for round, n := range sizes {
		l := launch("it-herd", fmt.Sprintf("herd%d", round), nil)
		got := make([]string, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				got[i], errs[i] = clients[i].Dispatch(ctx, l)
			})
		}
		close(start)
		wg.Wait()

		kids := children(t, a, l)
		if len(kids) != 1 {
			t.Fatalf("round %d: %d children, want 1: %v", round, len(kids), kids)
		}
		for i := range n {
			if errs[i] != nil {
				t.Errorf("round %d, caller %d: %v", round, i, errs[i])
			} else if got[i] != kids[0].ID {
				t.Errorf("round %d, caller %d told %s, the child is %s", round, i, got[i], kids[0].ID)
			}
		}
	}
	var st nomad.ClientStats
	for _, c := range clients {
		s := c.Stats()
		st.DispatchAttempts += s.DispatchAttempts
		st.Phantoms += s.Phantoms
		st.RepeatedTokens += s.RepeatedTokens
	}
	t.Logf("rounds of %v concurrent dispatches: one child each; %d attempts, %d phantom replies (retried), %d repeated-token replies",
		sizes, st.DispatchAttempts, st.Phantoms, st.RepeatedTokens)
}

func TestAgentLookupAfterChildFinished(t *testing.T) {
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)
	register(t, a, parentJob("it-finished"))
	l := launch("it-finished", "daily", nil)
	ctx := ctxFor(t, 60*time.Second)

	if _, _, err := c.Lookup(ctx, l.Target, l.Identity); err != nil {
		t.Fatal(err)
	}
	child, err := c.Dispatch(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	waitDead(t, a, child)
	got, found, err := c.Lookup(ctx, l.Target, l.Identity)
	if err != nil || !found || got != child {
		t.Fatalf("Lookup = %q, %v, %v; want %s", got, found, err, child)
	}
	// A manual launch of the same slot shares the prefix, not the token.
	manual := l
	manual.Identity = state.LaunchIdentity(l.Job, scheduled, state.LaunchManual)
	if got, found, err := c.Lookup(ctx, manual.Target, manual.Identity); err != nil || found {
		t.Fatalf("Lookup(%s) = %q, %v, %v; want not found", manual.Identity, got, found, err)
	}
	mchild, err := c.Dispatch(ctx, manual)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := c.Lookup(ctx, l.Target, l.Identity); got != child {
		t.Fatalf("after the manual child %s, Lookup(%s) = %s, want %s", mchild, l.Identity, got, child)
	}
}

func waitDead(t *testing.T, a *api.Client, child string) {
	t.Helper()
	eventually(t, 60*time.Second, child+" dead", func() (bool, error) {
		job, _, err := a.Jobs().Info(child, nil)
		if err != nil {
			return false, err
		}
		return *job.Status == "dead", nil
	})
}

// TestAgentLookupAfterGC: once Nomad collected the child (here a forced GC,
// `nomad system gc`), the token is forgotten: the look-up finds nothing
// and a dispatch makes a second child. This is the memory horizon.
func TestAgentLookupAfterGC(t *testing.T) {
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)
	register(t, a, parentJob("it-gc"))
	l := launch("it-gc", "gc", nil)
	ctx := ctxFor(t, 60*time.Second)

	child, err := c.Dispatch(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	waitDead(t, a, child)
	if err := a.System().GarbageCollect(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, child+" collected", func() (bool, error) {
		_, _, err := a.Jobs().Info(child, nil)
		if err != nil && strings.Contains(err.Error(), "404") {
			return true, nil
		}
		return false, nil
	})
	if got, found, err := c.Lookup(ctx, l.Target, l.Identity); err != nil || found {
		t.Fatalf("Lookup after GC = %q, %v, %v; want not found", got, found, err)
	}
	again, err := c.Dispatch(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if again == child {
		t.Fatalf("dispatch after GC returned the collected child %s", child)
	}
	t.Logf("after GC the token made a second child: %s (first %s)", again, child)
}

// TestAgentStoppedParent: Nomad refuses a dispatch against a stopped parent
// (a 500) even when the token's child exists; Dispatch then proves the
// child by look-up, and refuses a new identity.
func TestAgentStoppedParent(t *testing.T) {
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)
	register(t, a, parentJob("it-stopped"))
	l := launch("it-stopped", "stopped", nil)
	ctx := ctxFor(t, 30*time.Second)

	child, err := c.Dispatch(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Jobs().Deregister("it-stopped", false, nil); err != nil {
		t.Fatal(err)
	}
	// Nomad itself: the repeated token is refused.
	_, _, raw := a.Jobs().DispatchOpts(&api.DispatchOptions{JobID: "it-stopped", IdPrefixTemplate: l.Identity},
		&api.WriteOptions{IdempotencyToken: l.Identity})
	if raw == nil || !strings.Contains(raw.Error(), "500") || !strings.Contains(raw.Error(), "is stopped") {
		t.Fatalf("raw dispatch against the stopped parent: %v; want a 500 \"is stopped\"", raw)
	}
	t.Logf("Nomad: %v", raw)

	got, err := c.Dispatch(ctx, l)
	if err != nil || got != child {
		t.Fatalf("Dispatch of the existing identity = %q, %v; want %s", got, err, child)
	}
	if got, found, err := c.Lookup(ctx, l.Target, l.Identity); err != nil || !found || got != child {
		t.Fatalf("Lookup = %q, %v, %v; want %s", got, found, err, child)
	}
	fresh := launch("it-stopped", "stopped-later", nil)
	_, err = c.Dispatch(ctx, fresh)
	if !errors.Is(err, launcher.ErrRejected) || !strings.Contains(err.Error(), "is stopped") {
		t.Fatalf("Dispatch of a new identity = %v; want rejected, \"is stopped\"", err)
	}
	if st := c.Stats(); st.RefusedButFound != 1 {
		t.Errorf("stats %+v: want one refused-but-found", st)
	}
}

// TestAgentRunningForbid: a long child is running (pending first), then not
// once it ended.
func TestAgentRunningForbid(t *testing.T) {
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)
	register(t, a, parentJob("it-forbid"))
	l := launch("it-forbid", "long", map[string]string{"sleep": "3"})
	ctx := ctxFor(t, 60*time.Second)

	child, err := c.Dispatch(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if running, err := c.Running(ctx, l.Target, child); err != nil || !running {
		t.Fatalf("Running just after dispatch = %v, %v; want true", running, err)
	}
	eventually(t, 60*time.Second, child+" ended", func() (bool, error) {
		running, err := c.Running(ctx, l.Target, child)
		return !running, err
	})
	job, _, err := a.Jobs().Info(child, nil)
	if err != nil || *job.Status != "dead" {
		t.Fatalf("child after Running false: %v, %v; want dead", job.Status, err)
	}
	if running, err := c.Running(ctx, l.Target, "it-forbid/dispatch-none-1-00000000"); err != nil || running {
		t.Fatalf("Running of a missing child = %v, %v; want false", running, err)
	}
}

// TestAgentStopReplace: Stop ends a running child; stopping it again, or a
// missing child, is no error.
func TestAgentStopReplace(t *testing.T) {
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)
	register(t, a, parentJob("it-replace"))
	l := launch("it-replace", "replace", map[string]string{"sleep": "300"})
	ctx := ctxFor(t, 60*time.Second)

	child, err := c.Dispatch(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, child+" running", func() (bool, error) {
		allocs, _, err := a.Jobs().Allocations(child, true, nil)
		return err == nil && len(allocs) == 1 && allocs[0].ClientStatus == "running", err
	})
	if err := c.Stop(ctx, l.Target, child); err != nil {
		t.Fatal(err)
	}
	job, _, err := a.Jobs().Info(child, nil)
	if err != nil || !*job.Stop {
		t.Fatalf("child after Stop: stop %v, %v", job.Stop, err)
	}
	eventually(t, 30*time.Second, child+" stopped", func() (bool, error) {
		running, err := c.Running(ctx, l.Target, child)
		return !running, err
	})
	if err := c.Stop(ctx, l.Target, child); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := c.Stop(ctx, l.Target, "it-replace/dispatch-none-1-00000000"); err != nil {
		t.Fatalf("Stop of a missing child: %v", err)
	}
}

// TestAgentRefusals: what Nomad refuses comes back as launcher.ErrRejected with
// Nomad's message, and makes no child.
func TestAgentRefusals(t *testing.T) {
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)

	plain := parentJob("it-plain")
	plain.ParameterizedJob = nil
	register(t, a, plain)
	noMeta := parentJob("it-nometa") // does not accept paxcron's keys
	noMeta.ParameterizedJob.MetaOptional = []string{"sleep"}
	register(t, a, noMeta)
	required := parentJob("it-required")
	required.ParameterizedJob.MetaRequired = []string{"region_code"}
	register(t, a, required)
	noPayload := parentJob("it-nopayload")
	noPayload.ParameterizedJob.Payload = "forbidden"
	register(t, a, noPayload)

	for _, tc := range []struct {
		parent, want string
		payload      []byte
	}{
		{"it-missing", "parameterized job not found", nil},
		{"it-plain", "is not a parameterized job", nil},
		{"it-nometa", "must list paxcron_identity, paxcron_job and paxcron_scheduled_at in its parameterized block's meta_optional", nil},
		{"it-required", "did not provide required meta keys", nil},
		{"it-nopayload", "Payload provided but forbidden", []byte("x")},
	} {
		l := launch(tc.parent, "refused", nil)
		l.Payload = tc.payload
		ctx := ctxFor(t, 20*time.Second)
		start := time.Now()
		_, err := c.Dispatch(ctx, l)
		if !errors.Is(err, launcher.ErrRejected) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want rejected with %q", tc.parent, err, tc.want)
			continue
		}
		t.Logf("%s (%v): %v", tc.parent, time.Since(start).Round(time.Millisecond), err)
		if kids := children(t, a, l); len(kids) != 0 {
			t.Errorf("%s: children %v", tc.parent, kids)
		}
	}
}

func TestAgentChecks(t *testing.T) {
	agent := nomadtest.Shared(t)
	v, err := client(t, agent, agent.Token).CheckVersion(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if v != agent.Version {
		t.Errorf("CheckVersion = %s, the agent is %s", v, agent.Version)
	}
	// The dev agent keeps Nomad's default job_gc_threshold, 4 h.
	threshold, known, err := client(t, agent, agent.Token).CheckGCThreshold(ctxFor(t, 10*time.Second))
	if err != nil || !known || threshold != 4*time.Hour {
		t.Errorf("CheckGCThreshold = %v, %v, %v; want 4h", threshold, known, err)
	}
}

// TestAgentACLDenied runs an agent with ACLs: a token that may read and list
// jobs but not dispatch them is refused (rejected), and a token without
// node:read or agent:read cannot check the version.
func TestAgentACLDenied(t *testing.T) {
	agent := nomadtest.Start(t, nomadtest.Options{ACL: true})
	a := admin(t, agent)
	register(t, a, parentJob("it-acl"))
	policy := &api.ACLPolicy{Name: "paxcron-no-dispatch",
		Rules: `namespace "default" { capabilities = ["read-job", "list-jobs"] }`}
	if _, err := a.ACLPolicies().Upsert(policy, nil); err != nil {
		t.Fatal(err)
	}
	tok, _, err := a.ACLTokens().Create(&api.ACLToken{Name: "paxcron", Type: "client", Policies: []string{policy.Name}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, agent, tok.SecretID)
	ctx := ctxFor(t, 20*time.Second)
	l := launch("it-acl", "acl", nil)

	_, err = c.Dispatch(ctx, l)
	if !errors.Is(err, launcher.ErrRejected) || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("Dispatch without dispatch-job = %v; want rejected, Permission denied", err)
	}
	t.Log(err)
	if _, found, err := c.Lookup(ctx, l.Target, l.Identity); err != nil || found {
		t.Fatalf("Lookup = %v, %v; want not found", found, err)
	}
	_, err = c.CheckVersion(ctx)
	if !errors.Is(err, nomad.ErrVersion) || !strings.Contains(err.Error(), "node:read or agent:read") {
		t.Fatalf("CheckVersion without node:read = %v", err)
	}
	t.Log(err)
	if _, err := client(t, agent, "").CheckVersion(ctx); err == nil {
		t.Fatal("CheckVersion without a token passed")
	}
	if _, err := client(t, agent, agent.Token).CheckVersion(ctx); err != nil {
		t.Fatalf("CheckVersion with the management token: %v", err)
	}
}

// TestAgentDispatcherAgainstNomad runs the launcher's four ops through the
// asynchronous Dispatcher.
func TestAgentDispatcherAgainstNomad(t *testing.T) {
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)
	register(t, a, parentJob("it-async"))
	results := make(chan launcher.Result, 16)
	d, err := nomad.NewDispatcher(nomad.DispatcherConfig{Caller: c, Deliver: func(r launcher.Result) { results <- r }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	spec := state.JobSpec{NomadJob: "it-async", Meta: map[string]string{"sleep": "300"}}
	at := scheduled
	req := func(id uint64, op launcher.Op, child string) launcher.Request {
		return launcher.Request{ID: id, Op: op, Job: "async", ScheduledAt: at, Identity: state.Identity("async", at),
			Spec: spec, ChildID: child, Deadline: time.Now().Add(10 * time.Second)}
	}
	await := func(id uint64) launcher.Result {
		t.Helper()
		select {
		case r := <-results:
			if r.ID != id {
				t.Fatalf("result %d, want %d", r.ID, id)
			}
			return r
		case <-time.After(20 * time.Second):
			t.Fatalf("no result for request %d", id)
		}
		panic("unreachable")
	}

	d.Submit(req(1, launcher.OpLookup, ""))
	if r := await(1); r.Err != nil || r.Found {
		t.Fatalf("lookup before dispatch: %+v", r)
	}
	d.Submit(req(2, launcher.OpDispatch, ""))
	r := await(2)
	if r.Err != nil || r.ChildID == "" {
		t.Fatalf("dispatch: %+v", r)
	}
	child := r.ChildID
	d.Submit(req(3, launcher.OpLookup, ""))
	if r := await(3); r.Err != nil || !r.Found || r.ChildID != child {
		t.Fatalf("lookup: %+v, want %s", r, child)
	}
	d.Submit(req(4, launcher.OpRunning, child))
	if r := await(4); r.Err != nil || !r.Found {
		t.Fatalf("running: %+v", r)
	}
	d.Submit(req(5, launcher.OpStop, child))
	if r := await(5); r.Err != nil {
		t.Fatalf("stop: %+v", r)
	}
	expired := req(6, launcher.OpDispatch, "")
	expired.Deadline = time.Now().Add(-time.Second)
	d.Submit(expired)
	if r := await(6); !errors.Is(r.Err, nomad.ErrDeadline) {
		t.Fatalf("expired request: %+v", r)
	}
	if n := len(children(t, a, nomad.LaunchOf(req(0, launcher.OpDispatch, "")))); n != 1 {
		t.Fatalf("%d children, want 1", n)
	}
}

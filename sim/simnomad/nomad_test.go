package simnomad

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/sim/simclock"
)

// reply is one result a caller got, and when.
type reply struct {
	at  time.Duration
	res launcher.Result
}

// harness is a Nomad over a fresh scheduler that records every result by
// request ID, and fails the test if a result comes inside Call.
type harness struct {
	t      testing.TB
	sched  *simclock.Scheduler
	n      *Nomad
	nextID uint64
	got    map[uint64][]reply
	inCall bool
}

func newHarness(t testing.TB, seed uint64, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, sched: simclock.NewScheduler(), got: make(map[uint64][]reply)}
	n, err := New(h.sched, rand.New(rand.NewPCG(seed, 0)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.n = n
	return h
}

// fixedConfig takes exactly 5 ms each way, runs children exactly 10 s and
// collects them an hour after they finish, so tests can compute times.
func fixedConfig() Config {
	cfg := DefaultConfig()
	cfg.RequestLatencyMin, cfg.RequestLatencyMax = 5*time.Millisecond, 5*time.Millisecond
	cfg.ReplyLatencyMin, cfg.ReplyLatencyMax = 5*time.Millisecond, 5*time.Millisecond
	cfg.RunMin, cfg.RunMax = 10*time.Second, 10*time.Second
	cfg.GCThreshold = time.Hour
	return cfg
}

const roundTrip = 10 * time.Millisecond

// call makes req with the given deadline and returns its ID.
func (h *harness) call(req launcher.Request, deadline time.Duration) uint64 {
	h.nextID++
	req.ID = h.nextID
	id := req.ID
	h.inCall = true
	h.n.Call(req, deadline, func(r launcher.Result) {
		if h.inCall {
			h.t.Errorf("result for call %d delivered inside Call", id)
		}
		h.got[id] = append(h.got[id], reply{h.sched.Now(), r})
	})
	h.inCall = false
	return id
}

// do makes req with a deadline a minute away, runs until nothing is
// pending, and returns its one result.
func (h *harness) do(req launcher.Request) reply {
	h.t.Helper()
	id := h.call(req, h.sched.Now()+time.Minute)
	h.drain()
	return h.only(id)
}

func (h *harness) drain() {
	for h.sched.Step() {
	}
}

func (h *harness) advance(d time.Duration) { h.sched.RunUntil(h.sched.Now() + d) }

// only returns the one result of call id, failing if there are more or
// none.
func (h *harness) only(id uint64) reply {
	h.t.Helper()
	rs := h.got[id]
	if len(rs) != 1 {
		h.t.Fatalf("call %d got %d results, want 1: %+v", id, len(rs), rs)
	}
	if rs[0].res.ID != id {
		h.t.Fatalf("call %d got a result with ID %d", id, rs[0].res.ID)
	}
	return rs[0]
}

func dispatch(ns, region, parent, token string) launcher.Request {
	return launcher.Request{Op: launcher.OpDispatch, Identity: token,
		Spec: state.JobSpec{NomadJob: parent, Namespace: ns, Region: region}}
}

func lookup(ns, region, parent, token string) launcher.Request {
	r := dispatch(ns, region, parent, token)
	r.Op = launcher.OpLookup
	return r
}

func running(ns, region, childID string) launcher.Request {
	return launcher.Request{Op: launcher.OpRunning, ChildID: childID,
		Spec: state.JobSpec{Namespace: ns, Region: region}}
}

func stop(ns, region, childID string) launcher.Request {
	r := running(ns, region, childID)
	r.Op = launcher.OpStop
	return r
}

func mustOK(t *testing.T, r reply) launcher.Result {
	t.Helper()
	if r.res.Err != nil {
		t.Fatalf("unexpected error: %v", r.res.Err)
	}
	return r.res
}

func TestDispatchCreatesOnceAndRepeatedTokenReturnsIt(t *testing.T) {
	h := newHarness(t, 1, fixedConfig())
	h.n.Register("", "", "backup")

	first := h.do(dispatch("", "", "backup", "nightly-1767225600"))
	id := mustOK(t, first).ChildID
	if first.at != roundTrip {
		t.Errorf("reply at %v, want %v", first.at, roundTrip)
	}
	// Server time is the epoch plus the 5 ms request leg.
	want := regexp.MustCompile(`^backup/dispatch-nightly-1767225600-1767225600-[0-9a-f]{8}$`)
	if !want.MatchString(id) {
		t.Errorf("child ID %q does not match %v", id, want)
	}

	again := dispatch("", "", "backup", "nightly-1767225600")
	again.Spec.Payload = []byte("different payload")
	again.Spec.Meta = map[string]string{"k": "v"}
	if got := mustOK(t, h.do(again)).ChildID; got != id {
		t.Errorf("repeated token dispatched %q, want the first child %q", got, id)
	}

	if cs := h.n.Children(); len(cs) != 1 || cs[0].ID != id || cs[0].CreatedAt != 5*time.Millisecond {
		t.Errorf("children = %+v, want one, %q created at 5ms", cs, id)
	}
	st := h.n.Stats()
	if st.Created != 1 || st.Deduplicated != 1 || st.CallsDispatch != 2 || st.Results != 2 {
		t.Errorf("stats = %+v", st)
	}
	if d := h.n.Duplicates(); len(d) != 0 {
		t.Errorf("duplicates = %v, want none", d)
	}
}

func TestTokenScope(t *testing.T) {
	const token = "job-100"
	tests := []struct {
		name               string
		ns, region, parent string
		sameAsFirst        bool
	}{
		{"defaults spelled out", "default", "global", "p", true},
		{"other namespace", "prod", "global", "p", false},
		{"other region", "default", "eu", "p", false},
		{"other parent", "default", "global", "q", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 2, fixedConfig())
			for _, s := range [][3]string{{"", "", "p"}, {"prod", "", "p"}, {"", "eu", "p"}, {"", "", "q"}} {
				h.n.Register(s[0], s[1], s[2])
			}
			first := mustOK(t, h.do(dispatch("", "", "p", token))).ChildID
			second := mustOK(t, h.do(dispatch(tc.ns, tc.region, tc.parent, token))).ChildID
			if (first == second) != tc.sameAsFirst {
				t.Errorf("first %q, second %q: same = %v, want %v", first, second, first == second, tc.sameAsFirst)
			}
			wantChildren := 2
			if tc.sameAsFirst {
				wantChildren = 1
			}
			if n := len(h.n.Children()); n != wantChildren {
				t.Errorf("%d children, want %d", n, wantChildren)
			}
			c, ok := h.n.ChildByToken(tc.ns, tc.region, tc.parent, token)
			if !ok || c.ID != second || !strings.HasPrefix(c.ID, tc.parent+"/") {
				t.Errorf("ChildByToken = %+v, %v; want %q", c, ok, second)
			}
		})
	}
}

func TestUnknownParentIsRejectedWithoutEffect(t *testing.T) {
	tests := []struct {
		name               string
		ns, region, parent string
	}{
		{"never registered", "", "", "nope"},
		{"registered in another namespace", "prod", "", "p"},
		{"registered in another region", "", "eu", "p"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 3, fixedConfig())
			h.n.Register("", "", "p")
			r := h.do(dispatch(tc.ns, tc.region, tc.parent, "tok"))
			if !errors.Is(r.res.Err, launcher.ErrRejected) {
				t.Fatalf("err = %v, want ErrRejected", r.res.Err)
			}
			if cs := h.n.Children(); len(cs) != 0 {
				t.Errorf("a rejected dispatch created %+v", cs)
			}
			if st := h.n.Stats(); st.Rejected != 1 || st.Created != 0 {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	h := newHarness(t, 4, fixedConfig())
	h.n.Register("", "", "p")
	if r := mustOK(t, h.do(lookup("", "", "p", "tok"))); r.Found || r.ChildID != "" {
		t.Errorf("lookup before dispatch = %+v, want not found", r)
	}
	id := mustOK(t, h.do(dispatch("", "", "p", "tok"))).ChildID
	if r := mustOK(t, h.do(lookup("default", "global", "p", "tok"))); !r.Found || r.ChildID != id {
		t.Errorf("lookup after dispatch = %+v, want found %q", r, id)
	}
	for _, req := range []launcher.Request{lookup("", "", "p", "other"), lookup("prod", "", "p", "tok"), lookup("", "", "unknown", "tok")} {
		if r := mustOK(t, h.do(req)); r.Found {
			t.Errorf("lookup %+v found %+v", req, r)
		}
	}
	if n := len(h.n.Children()); n != 1 {
		t.Errorf("lookups created children: %d", n)
	}
}

func TestGCForgetsTokenAndRedispatchDuplicates(t *testing.T) {
	h := newHarness(t, 5, fixedConfig())
	h.n.Register("", "", "p")
	first := mustOK(t, h.do(dispatch("", "", "p", "tok"))).ChildID
	// Created at 5 ms, finished at 10.005 s, collected at 1h10.005s.
	gcAt := 5*time.Millisecond + 10*time.Second + time.Hour

	// The request leg is 5 ms: this dispatch takes effect 1 ns before.
	h.sched.RunUntil(gcAt - 5*time.Millisecond - time.Nanosecond)
	if got := mustOK(t, h.do(dispatch("", "", "p", "tok"))).ChildID; got != first {
		t.Fatalf("dispatch before GC made %q, want the first child %q", got, first)
	}
	if d := h.n.Duplicates(); len(d) != 0 {
		t.Fatalf("duplicates before GC: %v", d)
	}

	// The reply came 5 ms after the dispatch took effect: past gcAt now.
	if _, ok := h.n.ChildByToken("", "", "p", "tok"); ok {
		t.Error("the token's child is still found at its GC time")
	}
	if r := mustOK(t, h.do(lookup("", "", "p", "tok"))); r.Found {
		t.Errorf("lookup after GC found %+v", r)
	}
	second := mustOK(t, h.do(dispatch("", "", "p", "tok"))).ChildID
	if second == first {
		t.Fatal("dispatch after GC returned the collected child")
	}

	cs := h.n.Children()
	if len(cs) != 2 || !cs[0].Collected || cs[0].CollectedAt != gcAt || cs[1].Collected {
		t.Errorf("children = %+v, want the first collected at %v and the second live", cs, gcAt)
	}
	d := h.n.Duplicates()
	want := []Duplicate{{Namespace: "default", Region: "global", Parent: "p", Token: "tok", ChildIDs: []string{first, second}}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("duplicates = %v, want %v", d, want)
	}
	if st := h.n.Stats(); st.Collected != 1 || st.Created != 2 {
		t.Errorf("stats = %+v", st)
	}
}

func TestForceGC(t *testing.T) {
	h := newHarness(t, 6, fixedConfig())
	h.n.Register("", "", "p")
	old := mustOK(t, h.do(dispatch("", "", "p", "old"))).ChildID
	h.advance(20 * time.Second) // old has finished
	young := mustOK(t, h.do(dispatch("", "", "p", "young"))).ChildID

	if n := h.n.ForceGC(); n != 1 {
		t.Fatalf("ForceGC collected %d, want only the finished child", n)
	}
	now := h.sched.Now()
	cs := h.n.Children()
	if !cs[0].Collected || cs[0].CollectedAt != now || cs[1].Collected {
		t.Errorf("children = %+v", cs)
	}
	if again := mustOK(t, h.do(dispatch("", "", "p", "old"))).ChildID; again == old {
		t.Error("token of a force-collected child still deduplicates")
	}
	if again := mustOK(t, h.do(dispatch("", "", "p", "young"))).ChildID; again != young {
		t.Error("ForceGC collected a running child's token")
	}
	if n := h.n.ForceGC(); n != 0 {
		t.Errorf("second ForceGC collected %d, want 0", n)
	}
}

func TestDownFailsWithoutEffect(t *testing.T) {
	h := newHarness(t, 7, fixedConfig())
	h.n.Register("", "", "p")
	h.n.SetUp(false)
	for _, req := range []launcher.Request{dispatch("", "", "p", "tok"), lookup("", "", "p", "tok"), running("", "", "x"), stop("", "", "x")} {
		r := h.do(req)
		if !errors.Is(r.res.Err, ErrUnavailable) || errors.Is(r.res.Err, launcher.ErrRejected) {
			t.Errorf("%v while down: err = %v, want ErrUnavailable, not rejected", req.Op, r.res.Err)
		}
		if r.res.Found || r.res.ChildID != "" {
			t.Errorf("%v while down answered %+v", req.Op, r.res)
		}
	}
	if n := len(h.n.Children()); n != 0 {
		t.Errorf("%d children created while down", n)
	}
	if st := h.n.Stats(); st.FailedDown != 4 {
		t.Errorf("FailedDown = %d, want 4", st.FailedDown)
	}

	// Down is judged when the request arrives, not when it is sent.
	h.n.SetUp(true)
	id := h.call(dispatch("", "", "p", "tok"), time.Hour)
	h.advance(time.Millisecond)
	h.n.SetUp(false)
	h.drain()
	if err := h.only(id).res.Err; !errors.Is(err, ErrUnavailable) {
		t.Errorf("went down while the request was in flight: err = %v", err)
	}
	h.n.SetUp(true)
	if r := h.do(dispatch("", "", "p", "tok")); r.res.Err != nil || len(h.n.Children()) != 1 {
		t.Errorf("back up: %+v, %d children", r.res, len(h.n.Children()))
	}
}

func TestReplyLossTakesEffectButCallerSeesDeadline(t *testing.T) {
	cfg := fixedConfig()
	cfg.ReplyLossProbability = 1
	h := newHarness(t, 8, cfg)
	h.n.Register("", "", "p")
	id := h.call(dispatch("", "", "p", "tok"), time.Second)
	h.drain()
	r := h.only(id)
	if !errors.Is(r.res.Err, context.DeadlineExceeded) || !errors.Is(r.res.Err, ErrDeadlineExceeded) {
		t.Errorf("err = %v, want a deadline error", r.res.Err)
	}
	if r.at != time.Second {
		t.Errorf("result at %v, want at the deadline, 1s", r.at)
	}
	if c, ok := h.n.ChildByToken("", "", "p", "tok"); !ok || c.CreatedAt != 5*time.Millisecond {
		t.Errorf("ChildByToken = %+v, %v; the dispatch should have taken effect at 5ms", c, ok)
	}
	if st := h.n.Stats(); st.RepliesLost != 1 || st.TimedOut != 1 || st.Created != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestReplyAgainstDeadline(t *testing.T) {
	tests := []struct {
		name     string
		reqLeg   time.Duration
		deadline time.Duration
		wantErr  bool
		wantAt   time.Duration
	}{
		{"reply just before the deadline", 5 * time.Millisecond, 10*time.Millisecond + 1, false, 10 * time.Millisecond},
		{"reply at the deadline", 5 * time.Millisecond, 10 * time.Millisecond, true, 10 * time.Millisecond},
		{"request arrives after the deadline", 2 * time.Second, time.Second, true, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fixedConfig()
			cfg.RequestLatencyMin, cfg.RequestLatencyMax = tc.reqLeg, tc.reqLeg
			h := newHarness(t, 9, cfg)
			h.n.Register("", "", "p")
			id := h.call(dispatch("", "", "p", "tok"), tc.deadline)
			h.drain()
			r := h.only(id)
			if (r.res.Err != nil) != tc.wantErr || r.at != tc.wantAt {
				t.Errorf("result %+v at %v; want error %v at %v", r.res, r.at, tc.wantErr, tc.wantAt)
			}
			if tc.wantErr && !errors.Is(r.res.Err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want a deadline error", r.res.Err)
			}
			// The server does not know the client gave up.
			if c, ok := h.n.ChildByToken("", "", "p", "tok"); !ok || c.CreatedAt != tc.reqLeg {
				t.Errorf("child = %+v, %v; want created at %v", c, ok, tc.reqLeg)
			}
		})
	}
}

func TestCallAtOrAfterDeadlineHasNoEffect(t *testing.T) {
	h := newHarness(t, 10, fixedConfig())
	h.n.Register("", "", "p")
	h.advance(time.Second)
	for _, deadline := range []time.Duration{time.Second, time.Second - time.Nanosecond, 0} {
		id := h.call(dispatch("", "", "p", "tok"), deadline)
		if len(h.got[id]) != 0 {
			t.Fatal("result delivered before the scheduler ran")
		}
		h.drain()
		r := h.only(id)
		if !errors.Is(r.res.Err, context.DeadlineExceeded) || !errors.Is(r.res.Err, launcher.ErrNotSent) || r.at != time.Second {
			t.Errorf("deadline %v: result %+v at %v, want a deadline error at once, marked not sent", deadline, r.res, r.at)
		}
	}
	if n := len(h.n.Children()); n != 0 {
		t.Errorf("late calls created %d children", n)
	}
	if st := h.n.Stats(); st.LateSubmits != 3 || st.TimedOut != 0 {
		t.Errorf("stats = %+v", st)
	}
}

// TestNotSentCallHasNoEffect: a call that never reaches Nomad is answered
// at its deadline with an error wrapping launcher.ErrNotSent, and nothing
// happens at Nomad.
func TestNotSentCallHasNoEffect(t *testing.T) {
	cfg := fixedConfig()
	cfg.NotSentProbability = 1
	h := newHarness(t, 12, cfg)
	h.n.Register("", "", "p")
	id := h.call(dispatch("", "", "p", "tok"), 2*time.Second)
	h.drain()
	r := h.only(id)
	if !errors.Is(r.res.Err, launcher.ErrNotSent) || errors.Is(r.res.Err, launcher.ErrRejected) || r.at != 2*time.Second {
		t.Errorf("result %+v at %v; want not sent, at the deadline", r.res, r.at)
	}
	if n := len(h.n.Children()); n != 0 {
		t.Errorf("a call never sent created %d children", n)
	}
	if st := h.n.Stats(); st.NotSent != 1 || st.Created != 0 || st.TimedOut != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestRunningAndStop(t *testing.T) {
	h := newHarness(t, 11, fixedConfig())
	h.n.Register("prod", "", "p")
	a := mustOK(t, h.do(dispatch("prod", "", "p", "a"))).ChildID
	b := mustOK(t, h.do(dispatch("prod", "", "p", "b"))).ChildID

	if r := mustOK(t, h.do(running("prod", "", a))); !r.Found {
		t.Error("a fresh child is not running")
	}
	if r := mustOK(t, h.do(running("", "", a))); r.Found {
		t.Error("a child is found running in another namespace")
	}
	if r := mustOK(t, h.do(running("prod", "", "p/dispatch-none"))); r.Found {
		t.Error("an unknown child is running")
	}

	mustOK(t, h.do(stop("prod", "", a)))
	stoppedAt := h.sched.Now() - 5*time.Millisecond // it took effect after the request leg
	if r := mustOK(t, h.do(running("prod", "", a))); r.Found {
		t.Error("a stopped child is still running")
	}
	if r := mustOK(t, h.do(running("prod", "", b))); !r.Found {
		t.Error("stopping a stopped its sibling b")
	}

	h.advance(20 * time.Second)
	if r := mustOK(t, h.do(running("prod", "", b))); r.Found {
		t.Error("a child is running past its run time")
	}
	// Stopping a finished or unknown child succeeds and changes nothing.
	mustOK(t, h.do(stop("prod", "", b)))
	mustOK(t, h.do(stop("prod", "", "p/dispatch-none")))

	cs := h.n.Children()
	if !cs[0].Stopped || cs[0].FinishedAt != stoppedAt {
		t.Errorf("a = %+v, want stopped at %v", cs[0], stoppedAt)
	}
	if cs[1].Stopped || cs[1].FinishedAt != cs[1].CreatedAt+10*time.Second {
		t.Errorf("b = %+v, want finished on its own after 10s", cs[1])
	}
	// A stopped child is collected a GC threshold after its stop.
	h.sched.RunUntil(stoppedAt + time.Hour)
	if cs := h.n.Children(); !cs[0].Collected || cs[0].CollectedAt != stoppedAt+time.Hour || cs[1].Collected {
		t.Errorf("children = %+v", cs)
	}
}

func TestSetConfigGCThresholdDoesNotReachBack(t *testing.T) {
	h := newHarness(t, 12, fixedConfig())
	h.n.Register("", "", "p")
	mustOK(t, h.do(dispatch("", "", "p", "tok")))
	h.advance(time.Minute) // finished 50 s ago; an hour's threshold keeps it
	cfg := h.n.Config()
	cfg.GCThreshold = time.Second
	changedAt := h.sched.Now()
	if err := h.n.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Millisecond)
	cs := h.n.Children()
	if !cs[0].Collected || cs[0].CollectedAt != changedAt {
		t.Errorf("child = %+v, want collected when the threshold dropped, at %v", cs[0], changedAt)
	}
	bad := cfg
	bad.ReplyLossProbability = 2
	if err := h.n.SetConfig(bad); !errors.Is(err, ErrConfig) || h.n.Config() != cfg {
		t.Errorf("SetConfig(invalid) = %v; config now %+v", err, h.n.Config())
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"no epoch", func(c *Config) { c.Epoch = time.Time{} }},
		{"negative request latency", func(c *Config) { c.RequestLatencyMin = -1 }},
		{"request latency min above max", func(c *Config) { c.RequestLatencyMin = c.RequestLatencyMax + 1 }},
		{"reply latency min above max", func(c *Config) { c.ReplyLatencyMin = c.ReplyLatencyMax + 1 }},
		{"loss above 1", func(c *Config) { c.ReplyLossProbability = 1.5 }},
		{"negative loss", func(c *Config) { c.ReplyLossProbability = -0.1 }},
		{"run min above max", func(c *Config) { c.RunMin = c.RunMax + 1 }},
		{"negative GC threshold", func(c *Config) { c.GCThreshold = -time.Second }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
				t.Errorf("Validate = %v, want ErrConfig", err)
			}
			if _, err := New(simclock.NewScheduler(), rand.New(rand.NewPCG(1, 0)), cfg); !errors.Is(err, ErrConfig) {
				t.Errorf("New = %v, want ErrConfig", err)
			}
		})
	}
	if _, err := New(nil, rand.New(rand.NewPCG(1, 0)), DefaultConfig()); !errors.Is(err, ErrConfig) {
		t.Errorf("New without a scheduler = %v", err)
	}
}

// chaos runs a mixed workload with every fault for ten simulated minutes:
// random latencies, lost replies, Nomad going down and up, calls made past
// their deadline, a GC threshold short enough to collect, a forced GC, a
// config change, and unknown parents. It returns the harness and a log of
// every result.
func chaos(t testing.TB, seed uint64) (*harness, []string) {
	cfg := DefaultConfig()
	cfg.RequestLatencyMin, cfg.RequestLatencyMax = 0, 50*time.Millisecond
	cfg.ReplyLatencyMin, cfg.ReplyLatencyMax = 0, 50*time.Millisecond
	cfg.ReplyLossProbability = 0.2
	cfg.RunMin, cfg.RunMax = time.Second, 20*time.Second
	cfg.GCThreshold = 30 * time.Second
	h := newHarness(t, seed, cfg)
	h.n.Register("", "", "p")
	h.n.Register("prod", "eu", "p")
	w := rand.New(rand.NewPCG(seed, 1))

	var ids []uint64
	for i := range 400 {
		at := time.Duration(i) * 1500 * time.Millisecond
		h.sched.At(at, func() {
			ns, region := "", ""
			if w.IntN(2) == 0 {
				ns, region = "prod", "eu"
			}
			parent := "p"
			if w.IntN(20) == 0 {
				parent = "unregistered"
			}
			token := fmt.Sprintf("job-%d", w.IntN(15))
			var req launcher.Request
			switch w.IntN(4) {
			case 0:
				req = dispatch(ns, region, parent, token)
			case 1:
				req = lookup(ns, region, parent, token)
			default:
				// Name a real child, so that running and stop find some.
				child := "p/none"
				if cs := h.n.Children(); len(cs) > 0 {
					child = cs[w.IntN(len(cs))].ID
				}
				req = running(ns, region, child)
				if w.IntN(2) == 0 {
					req.Op = launcher.OpStop
				}
			}
			// Some deadlines are already past when the call is made.
			deadline := h.sched.Now() + time.Duration(w.IntN(120)-10)*time.Millisecond
			ids = append(ids, h.call(req, deadline))
		})
	}
	for _, f := range []struct {
		at time.Duration
		fn func()
	}{
		{60 * time.Second, func() { h.n.SetUp(false) }},
		{90 * time.Second, func() { h.n.SetUp(true) }},
		{200 * time.Second, func() { h.n.ForceGC() }},
		{300 * time.Second, func() {
			c := h.n.Config()
			c.ReplyLossProbability = 0.5
			c.RequestLatencyMax = 200 * time.Millisecond
			if err := h.n.SetConfig(c); err != nil {
				t.Fatal(err)
			}
		}},
		{420 * time.Second, func() { h.n.SetUp(false) }},
		{450 * time.Second, func() { h.n.SetUp(true) }},
	} {
		h.sched.At(f.at, f.fn)
	}
	h.drain()

	var log []string
	for _, id := range ids {
		for _, r := range h.got[id] {
			log = append(log, fmt.Sprintf("%d@%v: %+v", id, r.at, r.res))
		}
	}
	return h, log
}

func TestDeterministicForASeed(t *testing.T) {
	h1, log1 := chaos(t, 42)
	h2, log2 := chaos(t, 42)
	if !reflect.DeepEqual(log1, log2) {
		t.Error("same seed, different results")
	}
	if !reflect.DeepEqual(h1.n.Children(), h2.n.Children()) {
		t.Error("same seed, different children")
	}
	if h1.n.Stats() != h2.n.Stats() {
		t.Errorf("same seed, different stats:\n%+v\n%+v", h1.n.Stats(), h2.n.Stats())
	}
	// The seed must matter, or the comparison above proves nothing.
	h3, log3 := chaos(t, 43)
	if reflect.DeepEqual(log1, log3) || reflect.DeepEqual(h1.n.Children(), h3.n.Children()) {
		t.Error("different seeds, identical runs")
	}
}

func TestEveryCallGetsExactlyOneResultUnderFaults(t *testing.T) {
	for seed := range uint64(5) {
		h, _ := chaos(t, seed)
		st := h.n.Stats()
		calls := st.CallsDispatch + st.CallsLookup + st.CallsRunning + st.CallsStop
		if calls != 400 || uint64(len(h.got)) != calls || st.Results != calls || h.n.Pending() != 0 {
			t.Fatalf("seed %d: %d calls, %d with results, %d results, %d pending", seed, calls, len(h.got), st.Results, h.n.Pending())
		}
		for id, rs := range h.got {
			if len(rs) != 1 {
				t.Errorf("seed %d: call %d got %d results", seed, id, len(rs))
			}
		}
		// Every fault must have happened, or the test proves little.
		for name, v := range map[string]uint64{
			"Created": st.Created, "Deduplicated": st.Deduplicated, "Rejected": st.Rejected,
			"FailedDown": st.FailedDown, "RepliesLost": st.RepliesLost, "LateSubmits": st.LateSubmits,
			"TimedOut": st.TimedOut, "Collected": st.Collected,
		} {
			if v == 0 {
				t.Errorf("seed %d: no %s in %+v", seed, name, st)
			}
		}
		// A token only ever got a second child after its first was
		// collected: dedup holds while the child lives.
		dups := h.n.Duplicates()
		if len(dups) == 0 {
			t.Errorf("seed %d: no token was dispatched again after GC", seed)
		}
		byID := make(map[string]Child)
		for _, c := range h.n.Children() {
			byID[c.ID] = c
		}
		for _, d := range dups {
			for i := 1; i < len(d.ChildIDs); i++ {
				prev, next := byID[d.ChildIDs[i-1]], byID[d.ChildIDs[i]]
				if !prev.Collected || prev.CollectedAt > next.CreatedAt {
					t.Errorf("seed %d: %v: %+v was live when %+v was created", seed, d, prev, next)
				}
			}
		}
	}
}

// ChildByID and Refuses are the checkers' view: a child stays findable by
// its ID after garbage collection, with its finish and collection times.
func TestChildByIDAndRefuses(t *testing.T) {
	h := newHarness(t, 12, fixedConfig())
	h.n.Register("prod", "", "p")
	id := mustOK(t, h.do(dispatch("prod", "", "p", "a"))).ChildID
	c, ok := h.n.ChildByID(id)
	if !ok || c.ID != id || c.FinishedAt != c.CreatedAt+10*time.Second || c.Collected {
		t.Fatalf("ChildByID(%q) = %+v, %v", id, c, ok)
	}
	h.advance(2 * time.Hour)
	if c, ok := h.n.ChildByID(id); !ok || !c.Collected || c.CollectedAt != c.FinishedAt+time.Hour {
		t.Errorf("ChildByID after GC = %+v, %v; want it, collected an hour after it finished", c, ok)
	}
	if _, ok := h.n.ChildByID("p/dispatch-none"); ok {
		t.Error("an unknown child is found")
	}
	for _, tc := range []struct {
		ns, parent string
		refused    bool
	}{{"prod", "p", false}, {"", "p", true}, {"prod", "q", true}} {
		if got := h.n.Refuses(tc.ns, "", tc.parent); got != tc.refused {
			t.Errorf("Refuses(%q, %q) = %v, want %v", tc.ns, tc.parent, got, tc.refused)
		}
	}
	h.n.StopParent("prod", "", "p")
	if !h.n.Refuses("prod", "", "p") {
		t.Error("a stopped parent is not refused")
	}
}

// TestSetRunTime: a parent's own run time replaces the configured one for
// its children only, and a bad range is refused.
func TestSetRunTime(t *testing.T) {
	h := newHarness(t, 1, fixedConfig())
	h.n.Register("", "", "batch")
	h.n.Register("ops", "", "report")
	if err := h.n.SetRunTime("ops", "", "report", 30*time.Second, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	mustOK(t, h.do(dispatch("", "", "batch", "a-1")))
	mustOK(t, h.do(dispatch("ops", "", "report", "b-1")))
	for _, c := range h.n.Children() {
		want := 10 * time.Second // fixedConfig's
		if c.Parent == "report" {
			want = 30 * time.Second
		}
		if got := c.FinishedAt - c.CreatedAt; got != want {
			t.Errorf("%s runs %v, want %v", c.ID, got, want)
		}
	}
	for _, bad := range [][2]time.Duration{{-time.Second, time.Second}, {2 * time.Second, time.Second}} {
		if err := h.n.SetRunTime("", "", "batch", bad[0], bad[1]); !errors.Is(err, ErrConfig) {
			t.Errorf("SetRunTime(%v, %v) = %v, want ErrConfig", bad[0], bad[1], err)
		}
	}
}

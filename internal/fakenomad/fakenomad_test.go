package fakenomad

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

// call submits req through replica 1's Dispatcher and returns its answer,
// and whether done was called from inside Submit: the stack of the call
// to done tells, where a check of the answers channel right after Submit
// returns would race with an answering goroutine that is quick.
func call(t *testing.T, n *Nomad, req launcher.Request) (launcher.Result, bool) {
	t.Helper()
	type answer struct {
		res    launcher.Result
		inline bool
	}
	answers := make(chan answer, 1)
	n.Dispatcher(1, func(r launcher.Result) { answers <- answer{r, calledFromSubmit()} }).Submit(req)
	select {
	case a := <-answers:
		return a.res, a.inline
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer to %+v", req)
		return launcher.Result{}, false
	}
}

// calledFromSubmit reports whether a frame of submitFunc.Submit is on the
// calling goroutine's stack.
func calledFromSubmit() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "fakenomad.submitFunc.Submit") {
			return true
		}
		if !more {
			return false
		}
	}
}

func TestOneChildPerToken(t *testing.T) {
	for _, inline := range []bool{false, true} {
		n := New(Options{InlineLookups: inline})
		dispatch := launcher.Request{ID: 1, Op: launcher.OpDispatch, Identity: "a-1", Spec: state.JobSpec{NomadJob: "batch"}}
		first, _ := call(t, n, dispatch)
		again, _ := call(t, n, dispatch)
		if first.ChildID != "batch/dispatch-a-1" || again.ChildID != first.ChildID || first.Err != nil {
			t.Fatalf("dispatches of one token: %+v then %+v", first, again)
		}
		found, atOnce := call(t, n, launcher.Request{ID: 2, Op: launcher.OpLookup, Identity: "a-1"})
		if !found.Found || found.ChildID != first.ChildID || found.ID != 2 || atOnce != inline {
			t.Fatalf("inline %t: lookup %+v, from inside Submit %t", inline, found, atOnce)
		}
		if missing, _ := call(t, n, launcher.Request{Op: launcher.OpLookup, Identity: "b-1"}); missing.Found {
			t.Fatalf("lookup of an undispatched token: %+v", missing)
		}
		if stop, _ := call(t, n, launcher.Request{Op: launcher.OpStop, ChildID: first.ChildID}); !errors.Is(stop.Err, launcher.ErrRejected) {
			t.Fatalf("stop: %+v, want rejected", stop)
		}
		if got := n.Repeated(); !slices.Equal(got, []string{"a-1 x2"}) {
			t.Fatalf("repeated %v", got)
		}
		if got := n.DispatchedPerJob([]string{"a", "b"}); got["a"] != 1 || got["b"] != 0 || n.DispatchesFrom(1) != 2 || n.DispatchesFrom(2) != 0 {
			t.Fatalf("per job %v, from replica 1: %d", got, n.DispatchesFrom(1))
		}
	}
}

func TestHoldKeepsAnswers(t *testing.T) {
	n := New(Options{})
	answers := make(chan launcher.Result, 2)
	d := n.Dispatcher(1, func(r launcher.Result) { answers <- r })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held := make(chan error, 1)
	go func() { held <- n.HoldUntilKept(ctx) }()
	for {
		n.mu.Lock()
		holding := n.holding
		n.mu.Unlock()
		if holding {
			break
		}
		time.Sleep(time.Millisecond)
	}
	d.Submit(launcher.Request{ID: 1, Op: launcher.OpDispatch, Identity: "a-1"})
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Children()["a-1"]; !ok {
		t.Fatal("a held dispatch made no child")
	}
	n.Release()
	d.Submit(launcher.Request{ID: 2, Op: launcher.OpLookup, Identity: "a-1"})
	if r := <-answers; r.ID != 2 || !r.Found {
		t.Fatalf("after release: %+v, want the lookup's answer and never the kept one", r)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := n.HoldUntilKept(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("hold with nothing dispatched: %v", err)
	}
}

func TestMissingJobsAreRefusedAndDispatchesCanBeForgotten(t *testing.T) {
	n := New(Options{MissingJobs: []string{"gone"}})
	refused, _ := call(t, n, launcher.Request{ID: 1, Op: launcher.OpDispatch, Identity: "x-1", Spec: state.JobSpec{NomadJob: "gone"}})
	if !errors.Is(refused.Err, launcher.ErrRejected) || refused.ChildID != "" {
		t.Fatalf("dispatch of a missing parent: %+v, want rejected with no child", refused)
	}
	if _, ok := n.Child("x-1"); ok {
		t.Fatal("a refused dispatch made a child")
	}
	made, _ := call(t, n, launcher.Request{ID: 2, Op: launcher.OpDispatch, Identity: "y-1", Spec: state.JobSpec{NomadJob: "batch"}})
	if child, ok := n.Child("y-1"); !ok || child != made.ChildID {
		t.Fatalf("Child(y-1) = %q, %t; the dispatch answered %+v", child, ok, made)
	}
	if got := n.Dispatches(); got["x-1"] != 1 || got["y-1"] != 1 || len(got) != 2 {
		t.Fatalf("dispatches %v", got)
	}
	n.ForgetDispatches()
	if got := n.Dispatches(); len(got) != 0 {
		t.Fatalf("dispatches after ForgetDispatches: %v", got)
	}
	if _, ok := n.Child("y-1"); !ok {
		t.Fatal("ForgetDispatches dropped a child")
	}
}

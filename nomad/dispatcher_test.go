package nomad

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

// fakeCaller answers each call as answer says, after gate lets it go (nil:
// at once), or when the call's context ends.
type fakeCaller struct {
	gate chan struct{}

	mu    sync.Mutex
	calls []string // "op identity-or-child"
}

func (f *fakeCaller) wait(ctx context.Context, what string) error {
	f.mu.Lock()
	f.calls = append(f.calls, what)
	f.mu.Unlock()
	if f.gate == nil {
		return nil
	}
	select {
	case <-f.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeCaller) Dispatch(ctx context.Context, l Launch) (string, error) {
	if err := f.wait(ctx, "dispatch "+l.Identity); err != nil {
		return "", err
	}
	return ChildPrefix(l.Target.NomadJob, l.Identity) + "1-0123abcd", nil
}

func (f *fakeCaller) Lookup(ctx context.Context, t state.Target, identity string) (string, bool, error) {
	if err := f.wait(ctx, "lookup "+identity); err != nil {
		return "", false, err
	}
	return "found-" + identity, true, nil
}

func (f *fakeCaller) Running(ctx context.Context, t state.Target, child string) (bool, error) {
	if err := f.wait(ctx, "running "+child); err != nil {
		return false, err
	}
	return true, nil
}

func (f *fakeCaller) Stop(ctx context.Context, t state.Target, child string) error {
	if err := f.wait(ctx, "stop "+child); err != nil {
		return err
	}
	if child == "refused" {
		return &CallError{Op: "stop", Subject: child, Status: 403, Message: "Permission denied", Permanent: true, Err: errors.New("x")}
	}
	return nil
}

func (f *fakeCaller) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// results collects what a Dispatcher delivers.
type results struct {
	mu  sync.Mutex
	got []launcher.Result
}

func (r *results) deliver(res launcher.Result) {
	r.mu.Lock()
	r.got = append(r.got, res)
	r.mu.Unlock()
}

// byID returns the results by request ID, failing on a second result for
// one ID.
func (r *results) byID(t *testing.T) map[uint64]launcher.Result {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[uint64]launcher.Result{}
	for _, res := range r.got {
		if _, dup := m[res.ID]; dup {
			t.Fatalf("request %d answered twice", res.ID)
		}
		m[res.ID] = res
	}
	return m
}

func request(id uint64, op launcher.Op, deadline time.Time) launcher.Request {
	at := time.Unix(1772330400, 0).UTC()
	return launcher.Request{ID: id, Op: op, Job: "j", ScheduledAt: at, Identity: state.Identity("j", at),
		Spec: state.JobSpec{NomadJob: "p"}, ChildID: fmt.Sprintf("child-%d", id), Deadline: deadline}
}

func newDispatcher(t *testing.T, c Caller, r *results, workers, pending int) *Dispatcher {
	t.Helper()
	d, err := NewDispatcher(DispatcherConfig{Caller: c, Deliver: r.deliver, Workers: workers, MaxPending: pending})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDispatcherOps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, r := &fakeCaller{}, &results{}
		d := newDispatcher(t, c, r, 2, 8)
		defer d.Close()
		deadline := time.Now().Add(time.Minute)
		d.Submit(request(1, launcher.OpDispatch, deadline))
		d.Submit(request(2, launcher.OpLookup, deadline))
		d.Submit(request(3, launcher.OpRunning, deadline))
		d.Submit(request(4, launcher.OpStop, deadline))
		stop := request(5, launcher.OpStop, deadline)
		stop.ChildID = "refused"
		d.Submit(stop)
		synctest.Wait()
		got := r.byID(t)
		want := map[uint64]launcher.Result{
			1: {ID: 1, ChildID: "p/dispatch-j-1772330400-1-0123abcd"},
			2: {ID: 2, ChildID: "found-j-1772330400", Found: true},
			3: {ID: 3, Found: true},
			4: {ID: 4},
		}
		for id, w := range want {
			if g := got[id]; g != w {
				t.Errorf("result %d = %+v, want %+v", id, g, w)
			}
		}
		if res := got[5]; !errors.Is(res.Err, launcher.ErrRejected) {
			t.Errorf("refused stop: %+v", res)
		}
		if n := len(c.called()); n != 5 {
			t.Errorf("%d calls, want 5", n)
		}
	})
}

func TestDispatcherUnknownOpPanics(t *testing.T) {
	d := newDispatcher(t, &fakeCaller{}, &results{}, 1, 1)
	defer d.Close()
	defer func() {
		if recover() == nil {
			t.Fatal("Submit of Op 9 did not panic")
		}
	}()
	d.Submit(request(1, launcher.Op(9), time.Now().Add(time.Minute)))
}

// TestDispatcherSubmitNeverBlocks: with every worker stuck in a call,
// Submit still returns at once up to the queue's bound, and every request
// is answered once when the calls go through.
func TestDispatcherSubmitNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, r := &fakeCaller{gate: make(chan struct{})}, &results{}
		d := newDispatcher(t, c, r, 4, 256)
		defer d.Close()
		deadline := time.Now().Add(time.Hour)
		const n = 256
		for i := range uint64(n) {
			d.Submit(request(i+1, launcher.OpDispatch, deadline)) // blocking here would deadlock the bubble
		}
		synctest.Wait()
		if len(c.called()) != 4 {
			t.Fatalf("%d calls in flight, want the 4 workers'", len(c.called()))
		}
		close(c.gate)
		synctest.Wait()
		got := r.byID(t)
		if len(got) != n {
			t.Fatalf("%d results for %d requests", len(got), n)
		}
		for id, res := range got {
			if res.Err != nil || res.ChildID == "" {
				t.Fatalf("result %d: %+v", id, res)
			}
		}
	})
}

// TestDispatcherPendingBoundRefuses: a request beyond MaxPending is
// answered at once, not sent. (Terms that overlap while Nomad hangs leave
// calls running for up to RequestTimeout each, so the launcher's
// MaxInflight per term does not bound them all.)
func TestDispatcherPendingBoundRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, r := &fakeCaller{gate: make(chan struct{})}, &results{}
		d := newDispatcher(t, c, r, 1, 3)
		defer d.Close()
		defer close(c.gate)
		deadline := time.Now().Add(time.Hour)
		for i := range uint64(4) {
			d.Submit(request(i+1, launcher.OpLookup, deadline))
		}
		synctest.Wait()
		got := r.byID(t)
		if res, ok := got[4]; len(got) != 1 || !ok || !errors.Is(res.Err, ErrBusy) || !errors.Is(res.Err, launcher.ErrNotSent) {
			t.Fatalf("results %+v; want the fourth request alone answered, busy and not sent", got)
		}
		if calls := c.called(); len(calls) != 1 {
			t.Fatalf("calls %v; want the first only", calls)
		}
	})
}

// TestDispatcherRoomOnResult: a request submitted on hearing a Result
// finds the room that Result made, whatever the workers do meanwhile.
func TestDispatcherRoomOnResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var d *Dispatcher
		var mu sync.Mutex
		answered := 0
		deadline := time.Now().Add(time.Hour)
		next := uint64(3)
		deliver := func(res launcher.Result) {
			mu.Lock()
			defer mu.Unlock()
			answered++
			if next <= 200 {
				next++
				d.Submit(request(next, launcher.OpLookup, deadline)) // as the launcher would, at the bound
			}
		}
		var err error
		d, err = NewDispatcher(DispatcherConfig{Caller: &fakeCaller{}, Deliver: deliver, Workers: 3, MaxPending: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		mu.Lock()
		for i := range uint64(3) {
			d.Submit(request(i+1, launcher.OpLookup, deadline))
		}
		mu.Unlock()
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if answered != 201 {
			t.Fatalf("%d answered, want 201", answered)
		}
	})
}

// TestDispatcherDeadline: a request past its deadline (its leader's lease
// end) is answered without a call, at Submit or when a worker takes it; a
// call started before it runs on past it, until RequestTimeout; the
// deadline is read on the launcher's clock (Now).
func TestDispatcherDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, r := &fakeCaller{gate: make(chan struct{})}, &results{}
		skew := 3 * time.Hour // the launcher's clock runs ahead of the local one
		d, err := NewDispatcher(DispatcherConfig{Caller: c, Deliver: r.deliver, Workers: 1, MaxPending: 4,
			RequestTimeout: time.Minute, Now: func() time.Time { return time.Now().Add(skew) }})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		now := time.Now().Add(skew)

		d.Submit(request(1, launcher.OpDispatch, now.Add(-time.Second))) // already past
		d.Submit(request(2, launcher.OpDispatch, now.Add(2*time.Second)))
		d.Submit(request(3, launcher.OpDispatch, now.Add(time.Second))) // passes while 2 holds the worker
		synctest.Wait()
		if got := r.byID(t)[1]; !errors.Is(got.Err, ErrDeadline) || !errors.Is(got.Err, launcher.ErrNotSent) {
			t.Fatalf("request 1: %+v; want ErrDeadline at once, marked not sent", got)
		}
		time.Sleep(3 * time.Second) // the bubble's clock: no real wait
		synctest.Wait()
		if got := r.byID(t); len(got) != 1 {
			t.Fatalf("results %+v past request 2's lease end; want its call (started before) running on, and request 3 waiting for the worker", got)
		}
		time.Sleep(time.Minute) // RequestTimeout
		synctest.Wait()
		got := r.byID(t)
		if res := got[2]; res.Err == nil || !errors.Is(res.Err, context.DeadlineExceeded) || Permanent(res.Err) || errors.Is(res.Err, launcher.ErrNotSent) {
			t.Fatalf("request 2: %+v; want cut at RequestTimeout, its call made", res)
		}
		if res := got[3]; !errors.Is(res.Err, ErrDeadline) || !errors.Is(res.Err, launcher.ErrNotSent) {
			t.Fatalf("request 3: %+v; want ErrDeadline without a call (its lease ended while it waited for the worker), marked not sent", res)
		}
		if calls := c.called(); len(calls) != 1 {
			t.Fatalf("calls %v; want request 2's only", calls)
		}
	})
}

// TestDispatcherRequestTimeout: a request whose deadline is far is still
// cut after RequestTimeout, counted from Submit.
func TestDispatcherRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, r := &fakeCaller{gate: make(chan struct{})}, &results{}
		d, err := NewDispatcher(DispatcherConfig{Caller: c, Deliver: r.deliver, Workers: 1, RequestTimeout: 8 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		start := time.Now()
		d.Submit(request(1, launcher.OpDispatch, start.Add(time.Hour)))
		d.Submit(request(2, launcher.OpDispatch, start.Add(time.Hour)))
		time.Sleep(20 * time.Second)
		synctest.Wait()
		got := r.byID(t)
		if !errors.Is(got[1].Err, context.DeadlineExceeded) || !errors.Is(got[2].Err, ErrDeadline) {
			t.Fatalf("results %+v; want request 1 cut at 8 s and request 2 expired in the queue", got)
		}
	})
}

// TestDispatcherClose: Close cancels the calls in flight, answers the
// queued requests, waits for the workers, and answers later Submits.
func TestDispatcherClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, r := &fakeCaller{gate: make(chan struct{})}, &results{}
		d := newDispatcher(t, c, r, 2, 8)
		deadline := time.Now().Add(time.Hour)
		for i := range uint64(6) {
			d.Submit(request(i+1, launcher.OpDispatch, deadline))
		}
		synctest.Wait()
		d.Close()
		got := r.byID(t)
		if len(got) != 6 {
			t.Fatalf("%d results after Close, want 6", len(got))
		}
		if calls := c.called(); len(calls) != 2 {
			t.Errorf("calls %v: want the two in flight only", calls)
		}
		unsent := 0
		for id, res := range got {
			if !errors.Is(res.Err, ErrClosed) || Permanent(res.Err) {
				t.Errorf("result %d: %+v; want ErrClosed", id, res)
			}
			if errors.Is(res.Err, launcher.ErrNotSent) {
				unsent++
			}
		}
		if unsent != 4 {
			t.Errorf("%d results marked not sent; want the four whose call was never made", unsent)
		}
		d.Submit(request(7, launcher.OpLookup, deadline))
		if res := r.byID(t)[7]; !errors.Is(res.Err, ErrClosed) || !errors.Is(res.Err, launcher.ErrNotSent) {
			t.Errorf("Submit after Close: %+v", res)
		}
		d.Close() // again: no effect
	})
}

func TestNewDispatcherConfig(t *testing.T) {
	for _, cfg := range []DispatcherConfig{
		{Deliver: func(launcher.Result) {}},
		{Caller: &fakeCaller{}},
		{Caller: &fakeCaller{}, Deliver: func(launcher.Result) {}, Workers: -1},
	} {
		if _, err := NewDispatcher(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("NewDispatcher(%+v) = %v", cfg, err)
		}
	}
}

// TestDispatcherFollowsTheLease: a request waiting for a worker past the
// lease it was made under is called if the launcher renewed that lease in
// the request's stint, up to half of RequestTimeout after Submit; not if
// the lease was not renewed, lapsed, or its stint is over, even before
// the request's own lease end.
func TestDispatcherFollowsTheLease(t *testing.T) {
	type told struct {
		at    time.Duration // after Submit
		stint uint64
		until time.Duration // after Submit; 0: no lease
	}
	for _, tc := range []struct {
		name string
		told []told
		// The worker comes free (request 1 answered) then.
		free time.Duration
		sent bool
	}{
		{"not told", nil, 2 * time.Second, false},
		{"not renewed", []told{{0, 1, time.Second}}, 2 * time.Second, false},
		{"renewed", []told{{0, 1, time.Second}, {500 * time.Millisecond, 1, 1500 * time.Millisecond}, {time.Second, 1, 3 * time.Second}}, 2 * time.Second, true},
		{"renewed past half the request's time", []told{{0, 1, time.Second}, {time.Second, 1, 9 * time.Second}}, 5 * time.Second, false},
		{"renewed within half the request's time", []told{{0, 1, time.Second}, {time.Second, 1, 9 * time.Second}}, 3900 * time.Millisecond, true},
		{"lapsed", []told{{0, 1, time.Second}, {time.Second, 1, 3 * time.Second}, {1500 * time.Millisecond, 1, 0}}, 2 * time.Second, false},
		{"lapsed then renewed", []told{{0, 1, time.Second}, {time.Second, 1, 0}, {1500 * time.Millisecond, 1, 3 * time.Second}}, 2 * time.Second, true},
		{"lapsed before its lease end", []told{{0, 1, time.Second}, {200 * time.Millisecond, 1, 0}}, 500 * time.Millisecond, false},
		{"stint over before its lease end", []told{{0, 1, time.Second}, {200 * time.Millisecond, 2, 3 * time.Second}}, 500 * time.Millisecond, false},
		{"within its own lease end", []told{{0, 1, time.Second}}, 500 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, r := &fakeCaller{gate: make(chan struct{})}, &results{}
				skew := -time.Hour // the launcher's clock runs behind the local one
				now := func() time.Time { return time.Now().Add(skew) }
				d, err := NewDispatcher(DispatcherConfig{Caller: c, Deliver: r.deliver, Workers: 1,
					RequestTimeout: 8 * time.Second, Now: now})
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				start := now()
				for id := range uint64(2) {
					req := request(id+1, launcher.OpDispatch, start.Add(time.Second))
					req.Stint = 1
					d.Submit(req) // request 1 takes the worker, 2 waits
				}
				var at time.Duration
				for _, l := range tc.told {
					time.Sleep(l.at - at)
					at = l.at
					var until time.Time
					if l.until > 0 {
						until = start.Add(l.until)
					}
					d.Lease(l.stint, until)
				}
				time.Sleep(tc.free - at)
				c.gate <- struct{}{} // request 1 answered
				synctest.Wait()
				if tc.sent {
					c.gate <- struct{}{}
				}
				synctest.Wait()
				got := r.byID(t)
				if res := got[1]; res.Err != nil {
					t.Fatalf("request 1: %+v", res)
				}
				res, ok := got[2]
				switch {
				case !ok:
					t.Fatalf("request 2 unanswered")
				case tc.sent && res.Err != nil:
					t.Fatalf("request 2: %+v; want its call made under the renewed lease", res)
				case !tc.sent && (!errors.Is(res.Err, ErrDeadline) || !errors.Is(res.Err, launcher.ErrNotSent)):
					t.Fatalf("request 2: %+v; want ErrDeadline without a call, marked not sent", res)
				}
				if n := len(c.called()); tc.sent != (n == 2) {
					t.Fatalf("%d calls; want request 2's made: %t", n, tc.sent)
				}
			})
		})
	}
}

package nomad

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

// TestCallsInFlightBounded: however many dispatches run at once, at most
// DispatchCalls of them reach Nomad together, and each of them still ends
// with its own child.
func TestCallsInFlightBounded(t *testing.T) {
	var mu sync.Mutex
	var inFlight, peak int
	release := make(chan struct{})
	// The gate opens once, 100 ms after DispatchCalls dispatches are held at
	// it: time for a dispatch past the bound to arrive and show in the
	// peak. After it opens, later dispatches can bring the count back to
	// DispatchCalls; a second close would panic the handler, leave its count up
	// and break its connection (a retry then counts twice).
	var opening sync.Once
	n := newBatchNomad(t)
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		if isDispatch(r) {
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			full := inFlight == DispatchCalls
			mu.Unlock()
			if full {
				opening.Do(func() { time.AfterFunc(100*time.Millisecond, func() { close(release) }) })
			}
			<-release
			mu.Lock()
			inFlight--
			mu.Unlock()
		}
		n.serve(w, r)
	})
	setCallTimeout(c, 10*time.Second)
	const launches = DispatchCalls + 20
	var wg sync.WaitGroup
	for i := range launches {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := c.Dispatch(ctx, launchOf(i)); err != nil {
				t.Errorf("launch %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if r := c.retries.Load(); r != 0 {
		t.Fatalf("%d dispatches were retried; the fake Nomad fails none", r)
	}
	if peak != DispatchCalls {
		t.Fatalf("%d dispatches reached Nomad at once; want DispatchCalls = %d", peak, DispatchCalls)
	}
	if len(n.made) != launches {
		t.Fatalf("%d children made for %d launches", len(n.made), launches)
	}
}

// TestReadBackHoldsNoCallSlot: a dispatch waiting for the read-back of its
// child holds no call slot, so with DispatchCalls of them waiting, the next
// dispatch is still sent (in a herd, the next child is made while the
// earlier ones are read back).
func TestReadBackHoldsNoCallSlot(t *testing.T) {
	var mu sync.Mutex
	dispatched := 0
	allSent := make(chan struct{})
	n := newBatchNomad(t)
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case isDispatch(r):
			mu.Lock()
			dispatched++
			if dispatched == DispatchCalls+1 {
				close(allSent)
			}
			mu.Unlock()
		case isStatuses(r):
			// No read-back is answered before every dispatch was sent.
			select {
			case <-allSent:
			case <-time.After(5 * time.Second):
				t.Errorf("a read-back waited 5 s: only %d of %d dispatches were sent meanwhile", dispatched, DispatchCalls+1)
			}
		}
		n.serve(w, r)
	})
	setCallTimeout(c, 10*time.Second)
	var wg sync.WaitGroup
	for i := range DispatchCalls + 1 {
		wg.Go(func() {
			if _, err := c.Dispatch(context.Background(), launchOf(i)); err != nil {
				t.Errorf("launch %d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// TestNoCallSlotBeforeTheDeadline: a call that finds every slot taken
// until its deadline is not sent, and says so.
func TestNoCallSlotBeforeTheDeadline(t *testing.T) {
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected %s %s: every slot was taken", r.Method, r.URL)
	})
	for range DispatchCalls {
		c.slots.tokens <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Dispatch(ctx, launchOf(1))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("not sent: %d calls to Nomad were in flight", DispatchCalls)) {
		t.Fatalf("Dispatch = %v; want the call not sent for want of a slot", err)
	}
	if Permanent(err) || !errors.Is(err, launcher.ErrNotSent) {
		t.Fatalf("%v: want it marked not sent (launcher.ErrNotSent), not permanent: the launcher dispatches it again without a lookup", err)
	}
}

// TestSentOnceIsNeverMarkedNotSent: a dispatch whose first attempt was
// sent and got no answer may still land, so the request is not marked
// not sent when its later attempts cannot leave (here: no connection).
func TestSentOnceIsNeverMarkedNotSent(t *testing.T) {
	var srv *httptest.Server
	var closing sync.Once
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first attempt hangs until cut; from now on nothing listens,
		// so every later attempt fails to connect.
		closing.Do(func() { srv.Listener.Close() })
		io.Copy(io.Discard, r.Body) // then the server notices the client leave
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c := fakeAt(t, srv.URL, 3*time.Second)
	setCallTimeout(c, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.Dispatch(ctx, launchOf(1))
	if err == nil || Permanent(err) || errors.Is(err, launcher.ErrNotSent) {
		t.Fatalf("Dispatch = %v; want an open outcome, not marked not sent: its first attempt was sent", err)
	}
	if s := c.Stats(); s.DispatchAttempts < 2 {
		t.Fatalf("%d attempts; want the first, and others that could not connect", s.DispatchAttempts)
	}
}

// TestUnreachableNomadIsNotSent: a dispatch none of whose attempts could
// connect is marked not sent.
func TestUnreachableNomadIsNotSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	c := fakeAt(t, address, 300*time.Millisecond)
	_, err = c.Dispatch(context.Background(), launchOf(1))
	if err == nil || Permanent(err) || !errors.Is(err, launcher.ErrNotSent) {
		t.Fatalf("Dispatch = %v; want it marked not sent", err)
	}
	if s := c.Stats(); s.DispatchAttempts < 2 {
		t.Fatalf("%d attempts; want the dispatch tried again until its deadline", s.DispatchAttempts)
	}
}

// TestReadBacksTakeACallSlot: the read-backs of children in several
// namespaces take slots of their own (ProofCalls), so that however many
// namespaces the jobs use, no more than MaxCalls calls reach Nomad at
// once: with one dispatch slot free, at most one dispatch and ProofCalls
// read-backs are in flight together.
func TestReadBacksTakeACallSlot(t *testing.T) {
	const namespaces = 2 * ProofCalls
	var mu sync.Mutex
	var inFlight, peak, reading, peakReads, reads int
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		statuses := isStatuses(r)
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		if statuses {
			reading++
			peakReads = max(peakReads, reading)
		}
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // long enough for calls to overlap if they may
		defer func() {
			mu.Lock()
			inFlight--
			if statuses {
				reading--
			}
			mu.Unlock()
		}()
		switch {
		case isDispatch(r):
			d := readDispatch(t, r)
			parent := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/job/"), "/dispatch")
			reply(w, 200, map[string]any{"DispatchedJobID": parent + "/dispatch-" + d.IdPrefixTemplate + "-1772330401-0000000" + d.Namespace[len(d.Namespace)-1:], "EvalID": "e"})
		case statuses:
			mu.Lock()
			reads++
			mu.Unlock()
			reply(w, 200, statusesOf(r.URL.Query().Get("namespace"), readStatuses(t, r)...))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	for range DispatchCalls - 1 {
		c.slots.tokens <- struct{}{} // all but one dispatch slot taken
	}
	var wg sync.WaitGroup
	for i := range namespaces {
		wg.Go(func() {
			l := launchOf(i)
			l.Target.Namespace = fmt.Sprintf("ns%d", i)
			if _, err := c.Dispatch(context.Background(), l); err != nil {
				t.Errorf("launch %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if peakReads > ProofCalls || peak > 1+ProofCalls || reads != namespaces {
		t.Fatalf("%d calls reached Nomad at once, %d of them read-backs, with one dispatch slot free (want at most 1 + ProofCalls = %d, and %d read-backs); %d read-backs for %d namespaces",
			peak, peakReads, 1+ProofCalls, ProofCalls, reads, namespaces)
	}
}

// TestSlotWaitDoesNotShortenTheCall: CallTimeout bounds a call's exchange
// with Nomad, not its wait for a slot. A dispatch that waits longer than
// CallTimeout for a dispatch slot, and then as long again for a read-back
// slot, is still sent, answered and proved in one attempt. (Counted from
// before the wait, the attempt timed out unsent and was tried again: in
// herds of 1,000 runnable children such retries kept the queue long and
// the last children 12-15 s late.)
func TestSlotWaitDoesNotShortenTheCall(t *testing.T) {
	n := newBatchNomad(t)
	srv := httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(srv.Close)
	c := fakeAt(t, srv.URL, 10*time.Second)
	wait := c.cfg.CallTimeout + c.cfg.CallTimeout/2
	for range cap(c.slots.tokens) {
		c.slots.tokens <- struct{}{}
	}
	for range cap(c.proofSlots.tokens) {
		c.proofSlots.tokens <- struct{}{}
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Dispatch(context.Background(), launchOf(1))
		done <- err
	}()
	time.Sleep(wait)
	for range cap(c.slots.tokens) {
		<-c.slots.tokens
	}
	time.Sleep(wait)
	for range cap(c.proofSlots.tokens) {
		<-c.proofSlots.tokens
	}
	if err := <-done; err != nil {
		t.Fatalf("a dispatch that waited %v for each slot: %v", wait, err)
	}
	if s := c.Stats(); s.DispatchAttempts != 1 || s.Retries != 0 || s.ProofReads != 1 || s.Proved != 1 {
		t.Fatalf("%+v; want one attempt, no retry and one read-back proving the child: the wait for a slot must not count against CallTimeout", s)
	}
}

// TestCallsStartWithinTheLease: through the Dispatcher, a launcher
// request's call starts only within its leader's lease (the request's
// Deadline), but once started it runs on for its answer: a dispatch
// answered after the lease ended succeeds, where the request used to end
// at the lease end, 0.6-0.8 s after Submit, and left the outcome open.
// No attempt starts after it: a dispatch refused with a 503 (an open
// outcome) before the lease ended is not tried again after it.
func TestCallsStartWithinTheLease(t *testing.T) {
	const lease = 300 * time.Millisecond
	n := newBatchNomad(t)
	var mu sync.Mutex
	tries := map[string]int{}
	var lastRefused time.Time
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		if isDispatch(r) {
			mu.Lock()
			tries[r.URL.Path]++
			if strings.Contains(r.URL.Path, "refused") {
				lastRefused = time.Now()
			}
			mu.Unlock()
			if strings.Contains(r.URL.Path, "refused") {
				reply(w, 503, "No cluster leader")
				return
			}
			time.Sleep(2 * lease) // answered well after the lease ended
		}
		n.serve(w, r)
	})
	got := make(chan launcher.Result, 2)
	d, err := NewDispatcher(DispatcherConfig{Caller: c, Deliver: func(r launcher.Result) { got <- r }, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	submitted := time.Now()
	slow, refused := launchOf(1), launchOf(2)
	refused.Target.NomadJob = "refused"
	for i, l := range []Launch{slow, refused} {
		d.Submit(launcher.Request{ID: uint64(i + 1), Op: launcher.OpDispatch, Job: l.Job, ScheduledAt: l.ScheduledAt, Identity: l.Identity,
			Spec: state.JobSpec{NomadJob: l.Target.NomadJob}, Deadline: time.Now().Add(lease)})
	}
	res := map[uint64]launcher.Result{}
	for range 2 {
		r := <-got
		res[r.ID] = r
	}
	if r := res[1]; r.Err != nil || r.ChildID == "" {
		t.Fatalf("a dispatch answered after its lease ended: %+v; want its child", r)
	}
	if r := res[2]; r.Err == nil || Permanent(r.Err) || errors.Is(r.Err, launcher.ErrNotSent) || !strings.Contains(r.Err.Error(), "No cluster leader") {
		t.Fatalf("a dispatch refused with a 503 until its lease ended: %+v; want an open outcome with Nomad's message", r)
	}
	mu.Lock()
	defer mu.Unlock()
	// An attempt that took its slot just before the lease ended arrives
	// a little after, later on a loaded machine; unbound, the attempts go
	// on for the request's 5 s.
	if n, late := tries["/v1/job/refused/dispatch"], lastRefused.Sub(submitted); n < 1 || late > lease+time.Second {
		t.Fatalf("%d attempts of the refused dispatch, the last %v after Submit; want it retried within the %v lease only", n, late, lease)
	}
}

// TestSlotWaitFollowsTheLease: a lease-bound call waiting for a slot
// waits on while its lease is renewed, and is not sent once it ends,
// even if it gets a slot the moment it ends; its slot is then freed.
// The read-backs' slots are not lease-bound.
func TestSlotWaitFollowsTheLease(t *testing.T) {
	for _, tc := range []struct {
		name  string
		renew bool // to 3 s, at 0.5 s
		end   bool // the leadership ends at 1.5 s
		bound bool
		sent  bool
		// counted: ClientStats.LeaseEnded, LeaseRanOut
		ended, ranOut uint64
	}{
		{"not renewed", false, false, true, false, 0, 1},
		{"renewed", true, false, true, true, 0, 0},
		{"renewed then ended", true, true, true, false, 1, 0},
		{"not lease-bound", false, false, false, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newCallSlots(1, "calls", time.Minute, tc.bound)
				_, releaseFirst, err := s.acquire(context.Background(), "dispatch", "first")
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				end := time.Now().Add(time.Second)
				ctx := withStartBy(context.Background(), func() time.Time {
					mu.Lock()
					defer mu.Unlock()
					return end
				})
				done := make(chan error, 1)
				go func() {
					_, release, err := s.acquire(ctx, "dispatch", "second")
					if err == nil {
						release()
					}
					done <- err
				}()
				time.Sleep(500 * time.Millisecond)
				if tc.renew {
					mu.Lock()
					end = time.Now().Add(2500 * time.Millisecond)
					mu.Unlock()
				}
				time.Sleep(time.Second)
				if tc.end {
					mu.Lock()
					end = time.Time{}
					mu.Unlock()
				}
				time.Sleep(500 * time.Millisecond)
				releaseFirst() // at 2 s
				synctest.Wait()
				err = <-done
				if tc.sent != (err == nil) || (err != nil && !errors.Is(err, errLeaseEnded)) {
					t.Fatalf("second call: %v; want sent: %t (else errLeaseEnded)", err, tc.sent)
				}
				if e, r := s.ended.Load(), s.ranOut.Load(); e != tc.ended || r != tc.ranOut {
					t.Fatalf("counted %d ended, %d ran out; want %d, %d", e, r, tc.ended, tc.ranOut)
				}
				if _, release, err := s.acquire(context.Background(), "dispatch", "third"); err != nil {
					t.Fatalf("a slot stayed taken: %v", err)
				} else {
					release()
				}
			})
		})
	}
}

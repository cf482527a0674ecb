package nomad

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestConnectionsStayWithinMaxCalls: Nomad counts every connection from
// one address, idle ones included, and over limits.http_max_conns_per_client
// (100 by default) it answers a new connection with a 429 and closes it. A
// Client holds at most MaxCalls calls in flight, but its transport used to
// dial a new connection whenever a call found none idle, and in a herd on a
// busy machine the connection a finished call leaves is put back idle by
// another goroutine, later: the next call had dialled already. Idle ones
// piled up beside the calls in flight (in a launch benchmark of 1,000
// runnable children the agent refused 86 connections, and the retries and
// re-dispatches made the last children 13-15 s late). The fake counts the
// connections open at once during herds of dispatches and their batched
// read-backs, with goroutines spinning beside them; they must never pass
// MaxCalls. Without the bound
// (connsPerHost) most runs under -race counted 65-70 (67-101 before the
// herd had read-backs).
func TestConnectionsStayWithinMaxCalls(t *testing.T) {
	var mu sync.Mutex
	open, peak := 0, 0
	// Dispatches and their batched read-backs both: the two pools of
	// call slots share the bound.
	n := newBatchNomad(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(rand.N(500)) * time.Microsecond)
		n.serve(w, r)
	})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open++
			peak = max(peak, open)
		case http.StateClosed, http.StateHijacked:
			open--
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := fakeAt(t, srv.URL, 30*time.Second)
	setCallTimeout(c, 30*time.Second) // no attempt abandoned: only the transport's own connections count

	stop := make(chan struct{})
	var spin sync.WaitGroup
	for range 4 {
		spin.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := 0; i < 1e4; i++ {
					_ = i * i
				}
			}
		})
	}
	// Herds one after the other, as a cron's minutes come: the connections
	// left from one are there for the next.
	const rounds, herd = 3, 1500
	errs := make(chan error, rounds*herd)
	for r := range rounds {
		var wg sync.WaitGroup
		for i := range herd {
			wg.Go(func() {
				if _, err := c.Dispatch(context.Background(), launchOf(r*herd+i)); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
	}
	close(stop)
	spin.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n.mu.Lock()
	reads := n.reads
	n.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d dispatches, %d read-backs, at most %d connections open at once", rounds*herd, reads, peak)
	if reads == 0 {
		t.Fatal("no read-back was made; the herd must prove its children")
	}
	if peak > MaxCalls {
		t.Fatalf("%d connections open at once; a Client may hold at most MaxCalls (%d)", peak, MaxCalls)
	}
}

// TestReadBacksHaveTheirOwnSlots: a read-back proves the children of the
// dispatches already sent, so it must not queue behind the dispatches
// still waiting for a slot. With every other slot held for as long as
// its context lasts, a read-back still goes out and proves its child.
func TestReadBacksHaveTheirOwnSlots(t *testing.T) {
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		if !isStatuses(r) {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			reply(w, 404, "not found")
			return
		}
		reply(w, 200, statusesOf("analytics", child1))
	})
	for range cap(c.slots.tokens) {
		c.slots.tokens <- struct{}{} // every dispatch and look-up slot taken
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	found, err := c.readChildren(ctx, proofScope{namespace: "analytics"}, []string{child1})
	if err != nil || !found[child1] {
		t.Fatalf("read-back with the other slots all held = %v, %v; want the child proved", found, err)
	}
}

package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// noLeaderServer answers 503 (no leader) to the first failures calls, then
// 200 with an empty job list; it counts the calls.
func noLeaderServer(t *testing.T, failures int64) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) <= failures {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"no leader right now"}`))
			return
		}
		_, _ = w.Write([]byte(`{"jobs":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestClientRetriesWhileNoLeader(t *testing.T) {
	srv, calls := noLeaderServer(t, 2)
	c, err := NewClient(ClientConfig{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutJobs(context.Background(), PutJobs{Jobs: []PutJob{{Name: "a"}}}); err != nil {
		t.Fatalf("PutJobs through an election: %v", err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d calls, want 3 (two 503s, then the answer)", n)
	}
}

func TestClientGivesUpAfterNoLeaderWait(t *testing.T) {
	srv, calls := noLeaderServer(t, 1<<40)
	c, err := NewClient(ClientConfig{Address: srv.URL, NoLeaderWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Jobs(context.Background(), ReadOptions{})
	if StatusOf(err) != http.StatusServiceUnavailable {
		t.Fatalf("Jobs with no leader for good: %v, want the 503", err)
	}
	if n := calls.Load(); n < 2 || n > 11 {
		t.Errorf("%d calls in a 2 s wait at %v apart, want 2-11", n, noLeaderRetryEvery)
	}
}

func TestClientNoRetryWhenDisabled(t *testing.T) {
	srv, calls := noLeaderServer(t, 1)
	c, err := NewClient(ClientConfig{Address: srv.URL, NoLeaderWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Jobs(context.Background(), ReadOptions{}); StatusOf(err) != http.StatusServiceUnavailable {
		t.Fatalf("Jobs: %v, want the 503 at once", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls, want 1", n)
	}
}

func TestClientRetryEndsWithContext(t *testing.T) {
	srv, _ := noLeaderServer(t, 1<<40)
	c, err := NewClient(ClientConfig{Address: srv.URL, NoLeaderWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Jobs(ctx, ReadOptions{}); err == nil {
		t.Fatal("Jobs with no leader: no error")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the retries went on %v after the context ended", took)
	}
}

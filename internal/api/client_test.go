package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
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

func TestClientAddresses(t *testing.T) {
	for _, tc := range []struct {
		list string
		n    int
		bad  string // in the error; "" for none
	}{
		{list: "http://a:1", n: 1},
		{list: "http://a:1, https://b:2 ,http://c:3", n: 3},
		{list: "http://a:1,", bad: `address ""`},
		{list: "http://a:1,a:2", bad: `address "a:2"`},
		{list: "http://a:1,ftp://b:2", bad: "want http"},
		{list: "http://a:1,http://a:1/", bad: "given twice"},
		{list: "http://a:1,http://a:2,http://a:3,http://a:4,http://a:5,http://a:6,http://a:7,http://a:8,http://a:9,http://a:10", bad: "at most 9"},
	} {
		c, err := NewClient(ClientConfig{Address: tc.list})
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%q: %v", tc.list, err)
		case tc.bad == "" && len(c.replicas) != tc.n:
			t.Errorf("%q: %d replicas, want %d", tc.list, len(c.replicas), tc.n)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%q: error %v, want one saying %q", tc.list, err, tc.bad)
		}
	}
}

// TestClientSkipsAnUnreachableReplica: a call whose connection is
// refused goes to the next replica; one the server received and failed is
// not sent again.
func TestClientSkipsAnUnreachableReplica(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close() // nothing listens there now
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/jobs" {
			calls.Add(1)
		}
		if r.URL.Path == StreamPath {
			http.NotFound(w, r) // a server from before the stream
			return
		}
		_, _ = w.Write([]byte(`{"jobs":[]}`))
	}))
	defer up.Close()
	for _, stream := range []bool{false, true} {
		c, err := NewClient(ClientConfig{Address: downURL + "," + up.URL, Stream: stream})
		if err != nil {
			t.Fatal(err)
		}
		before := calls.Load()
		if _, err := c.Jobs(context.Background(), ReadOptions{}); err != nil {
			t.Fatalf("stream %v: with the first replica down: %v", stream, err)
		}
		if got := calls.Load() - before; got != 1 {
			t.Errorf("stream %v: the second replica had the call %d times, want once", stream, got)
		}
		if c.Address() != up.URL {
			t.Errorf("stream %v: calls go to %s, want %s", stream, c.Address(), up.URL)
		}
		c.Close()
	}

	// A replica that answers 500 was reached: the call is not sent on.
	var failed, other atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		failed.Add(1)
		http.Error(w, `{"error":"boom"}`, http.StatusInternalServerError)
	}))
	defer bad.Close()
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			other.Add(1)
		}
		_, _ = w.Write([]byte(`{"jobs":[]}`))
	}))
	defer good.Close()
	c, err := NewClient(ClientConfig{Address: bad.URL + "," + good.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.PutJobs(context.Background(), PutJobs{Jobs: []PutJob{{Name: "a"}}}); StatusOf(err) != http.StatusInternalServerError {
		t.Fatalf("PutJobs answered 500: got %v", err)
	}
	if failed.Load() != 1 {
		t.Errorf("the first replica saw %d calls, want the write once", failed.Load())
	}
	if other.Load() != 0 {
		t.Errorf("the second replica saw the write %d times: a write that reached a replica was sent again", other.Load())
	}
}

package nomad

import (
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestCallsDoNotAskForGzip: Nomad's HTTP server compresses every reply a
// client accepts compressed, however small, with a new gzip writer each
// time, and the Go API client asks for it on every call. In a herd of
// dispatches that is the agent's CPU spent on nothing, so the Client
// takes the ask off. The fake compresses when asked, as Nomad does; every
// call the Client makes (the Go API client's and its own) must come
// without the ask, and the replies still read.
func TestCallsDoNotAskForGzip(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}
	calls := 0
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		gz := strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
		mu.Lock()
		calls++
		if gz {
			asked[r.Method+" "+r.URL.Path]++
		}
		mu.Unlock()
		if gz {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			defer zw.Close()
			w = gzipWriter{w, zw}
		}
		switch {
		case isDispatch(r):
			reply(w, 200, map[string]any{"DispatchedJobID": child1, "EvalID": "e1"})
		case isStatuses(r):
			reply(w, 200, statusesOf("analytics", child1))
		case r.Method == http.MethodGet && r.URL.Path == "/v1/job/"+child1:
			reply(w, 200, childJob(child1, testLaunch.Identity, "running"))
		case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs":
			reply(w, 200, []map[string]any{{"ID": child1, "ParentID": "report", "Namespace": "analytics"}})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			reply(w, 404, "not found")
		}
	})
	ctx := context.Background()
	if got, err := c.Dispatch(ctx, testLaunch); err != nil || got != child1 {
		t.Fatalf("Dispatch = %q, %v", got, err)
	}
	if running, err := c.Running(ctx, testLaunch.Target, child1); err != nil || !running {
		t.Fatalf("Running = %v, %v", running, err)
	}
	if _, _, err := c.Lookup(ctx, testLaunch.Target, testLaunch.Identity); err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls < 4 {
		t.Fatalf("%d calls reached the fake; want at least 4", calls)
	}
	if len(asked) > 0 {
		t.Fatalf("calls asked for gzip: %v", asked)
	}
}

type gzipWriter struct {
	http.ResponseWriter
	zw *gzip.Writer
}

func (g gzipWriter) Write(b []byte) (int, error) { return g.zw.Write(b) }

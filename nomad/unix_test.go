package nomad

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"
)

// TestUnixSocketAddress: a unix:///path address (NOMAD_ADDR), which
// Config accepts, reaches the agent on that socket, for the Go client's
// calls and for the batched read-back alike. Found in review: the
// client's own HTTP transport dialled TCP 127.0.0.1:80, so every call
// failed as "connection refused".
func TestUnixSocketAddress(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nomad.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix socket: %v", err)
	}
	reads := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case isDispatch(r):
			readDispatch(t, r)
			reply(w, 200, map[string]any{"DispatchedJobID": child1, "EvalID": "e1"})
		case isStatuses(r):
			reads++
			readStatuses(t, r)
			reply(w, 200, statusesOf("analytics", child1))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	c := fakeAt(t, "unix://"+sock, 2*time.Second)
	got, err := c.Dispatch(context.Background(), testLaunch)
	if err != nil || got != child1 {
		t.Fatalf("Dispatch = %q, %v; want %s", got, err, child1)
	}
	if st := c.Stats(); st.DispatchAttempts != 1 || reads != 1 || st.Proved != 1 {
		t.Fatalf("%d dispatches, %d read-backs, %d proved; want 1 each (stats %+v)", st.DispatchAttempts, reads, st.Proved, st)
	}
}

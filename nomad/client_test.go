package nomad

// Unit tests of the Client against httptest servers that answer as Nomad
// 1.11 does (status codes and messages as measured on the dev agent; see
// integration_test.go for the real thing).

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

// fake starts a server with h and returns a Client of it with short
// timeouts and backoffs.
func fake(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return fakeAt(t, srv.URL, 3*time.Second)
}

// fakeAt returns a Client of the Nomad at address with short timeouts
// and backoffs, the request's whole time requestTimeout.
func fakeAt(t *testing.T, address string, requestTimeout time.Duration) *Client {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Address = address
	cfg.CallTimeout = time.Second
	cfg.RequestTimeout = requestTimeout
	cfg.RetryBackoffMin = 5 * time.Millisecond
	cfg.RetryBackoffMax = 20 * time.Millisecond
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// setCallTimeout sets c's CallTimeout before any call: the slots bound
// each call with it.
func setCallTimeout(c *Client, d time.Duration) {
	c.cfg.CallTimeout = d
	c.slots.timeout, c.proofSlots.timeout = d, d
}

// reply answers as Nomad does: JSON with an index header on success, the
// message as plain text otherwise.
func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("X-Nomad-Index", "7")
	w.Header().Set("X-Nomad-LastContact", "0")
	w.Header().Set("X-Nomad-KnownLeader", "true")
	if s, ok := v.(string); ok && status != http.StatusOK {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		io.WriteString(w, s)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// dispatchCall is what a dispatch request carried.
type dispatchCall struct {
	Token            string
	IdPrefixTemplate string
	Meta             map[string]string
	Payload          []byte
	Namespace        string
	Region           string
}

func readDispatch(t *testing.T, r *http.Request) dispatchCall {
	var body struct {
		JobID            string
		Meta             map[string]string
		Payload          []byte
		IdPrefixTemplate string
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Errorf("dispatch body: %v", err)
	}
	q := r.URL.Query()
	return dispatchCall{Token: q.Get("idempotency_token"), IdPrefixTemplate: body.IdPrefixTemplate, Meta: body.Meta,
		Payload: body.Payload, Namespace: q.Get("namespace"), Region: q.Get("region")}
}

func isDispatch(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/dispatch")
}

// jobPath is the job a /v1/job/<id> request names.
func jobPath(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/v1/job/") }

// isStatuses is the batched read-back of new children.
func isStatuses(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/v1/jobs/statuses"
}

// readStatuses is the children a read-back asks for.
func readStatuses(t *testing.T, r *http.Request) []string {
	var body struct {
		Jobs []struct{ ID, Namespace string }
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Errorf("statuses body: %v", err)
	}
	if r.URL.Query().Get("include_children") != "true" {
		t.Errorf("statuses without include_children: %s", r.URL)
	}
	var ids []string
	for _, j := range body.Jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// statusesOf is the answer listing ids as children of their parents in
// namespace ns.
func statusesOf(ns string, ids ...string) []map[string]any {
	out := []map[string]any{}
	for _, id := range ids {
		parent, _, _ := strings.Cut(id, "/dispatch-")
		out = append(out, map[string]any{"ID": id, "Namespace": ns, "ParentID": parent})
	}
	return out
}

func childJob(id, token, status string) map[string]any {
	return map[string]any{"ID": id, "DispatchIdempotencyToken": token, "Status": status, "Stop": false}
}

var testLaunch = Launch{
	Target:      state.Target{NomadJob: "report", Namespace: "analytics"},
	Job:         "nightly",
	Identity:    "nightly-1772330400",
	ScheduledAt: time.Date(2026, 3, 1, 3, 0, 0, 0, time.FixedZone("CET", 3600)),
	Meta:        map[string]string{"kind": "nightly"},
	Payload:     []byte(`{"x":1}`),
}

const child1 = "report/dispatch-nightly-1772330400-1772330401-0123abcd"

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		status    int
		body      string
		permanent bool
	}{
		{500, "No cluster leader", false},
		{500, "rpc error: leadership lost while committing log", false},
		{500, "failed to retrieve jobs for idempotency check", false},
		{500, "rpc error: No path to region", false},
		{500, "parameterized job not found", true},
		{500, `rpc error: Specified job "report" is stopped`, true},
		{500, `Specified job "report" is not a parameterized job`, true},
		{500, "Dispatch request included unpermitted metadata keys: [paxcron_job]", true},
		{500, "Dispatch did not provide required meta keys: [region]", true},
		{500, "Payload exceeds maximum size; 20000 > 16384", true},
		{500, "Payload is not provided but required by parameterized job", true},
		{500, "Payload provided but forbidden by parameterized job", true},
		{500, `Duplicate key "a" in passed metadata`, true},
		{500, "dispatch job priority must be between [1, 100]", true},
		{502, "Bad Gateway", false},
		{503, "Service Unavailable", false},
		{504, "", false},
		{429, "Too Many Requests", false},
		{408, "Request Timeout", false},
		{403, "Permission denied", true},
		{403, "ACL token not found", true},
		{403, "job registrations are disabled", true},
		{400, "Job ID does not match", true},
		{404, "job not found", true},
		{413, "Request Entity Too Large", true},
	} {
		c := fake(t, func(w http.ResponseWriter, r *http.Request) { reply(w, tc.status, tc.body) })
		_, _, err := c.api.Jobs().Info("x", nil)
		e := callError("dispatch", "x", err)
		if e.Permanent != tc.permanent || e.Status != tc.status || (tc.body != "" && e.Message != tc.body) {
			t.Errorf("%d %q: %+v; want permanent %v", tc.status, tc.body, e, tc.permanent)
		}
		if errors.Is(e, launcher.ErrRejected) != tc.permanent {
			t.Errorf("%d %q: errors.Is(ErrRejected) = %v", tc.status, tc.body, !tc.permanent)
		}
	}

	// No answer at all: unknown.
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	cfg := DefaultConfig()
	cfg.Address = srv.URL
	c, _ := New(cfg)
	_, _, err := c.api.Jobs().Info("x", nil)
	if e := callError("dispatch", "x", err); e.Permanent || e.Status != 0 {
		t.Errorf("connection refused: %+v", e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = c.api.Jobs().Info("x", (&api.QueryOptions{}).WithContext(ctx))
	if e := callError("dispatch", "x", err); e.Permanent {
		t.Errorf("canceled: %+v", e)
	}
}

func TestDispatchProvesChild(t *testing.T) {
	var calls []dispatchCall
	var reads int
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case isDispatch(r):
			calls = append(calls, readDispatch(t, r))
			reply(w, 200, map[string]any{"DispatchedJobID": child1, "EvalID": "e1"})
		case isStatuses(r):
			reads++
			if ids := readStatuses(t, r); len(ids) != 1 || ids[0] != child1 || r.URL.Query().Get("namespace") != "analytics" {
				t.Errorf("read back %v in %s", ids, r.URL)
			}
			reply(w, 200, statusesOf("analytics", child1))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	got, err := c.Dispatch(context.Background(), testLaunch)
	if err != nil || got != child1 {
		t.Fatalf("Dispatch = %q, %v", got, err)
	}
	if st := c.Stats(); st.ProofReads != 1 || st.Proved != 1 {
		t.Fatalf("stats %+v", st)
	}
	if len(calls) != 1 || reads != 1 {
		t.Fatalf("%d dispatches, %d reads; want 1, 1", len(calls), reads)
	}
	want := dispatchCall{
		Token: testLaunch.Identity, IdPrefixTemplate: testLaunch.Identity, Namespace: "analytics", Payload: []byte(`{"x":1}`),
		Meta: map[string]string{"kind": "nightly", MetaIdentity: "nightly-1772330400", MetaJob: "nightly", MetaScheduledAt: "2026-03-01T02:00:00Z"},
	}
	if g := calls[0]; g.Token != want.Token || g.IdPrefixTemplate != want.IdPrefixTemplate || g.Namespace != want.Namespace ||
		string(g.Payload) != string(want.Payload) || !sameMap(g.Meta, want.Meta) {
		t.Fatalf("dispatch sent %+v, want %+v", g, want)
	}
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestDispatchRepeatedTokenNeedsNoReadBack(t *testing.T) {
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		if !isDispatch(r) {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
		reply(w, 200, map[string]any{"DispatchedJobID": child1, "EvalID": ""})
	})
	if got, err := c.Dispatch(context.Background(), testLaunch); err != nil || got != child1 {
		t.Fatalf("Dispatch = %q, %v", got, err)
	}
	if st := c.Stats(); st.RepeatedTokens != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDispatchPhantomRetried: a 200 naming a child that does not exist is
// retried with the same token, and the second reply's child is returned.
func TestDispatchPhantomRetried(t *testing.T) {
	const phantom = "report/dispatch-nightly-1772330400-1772330401-ffffffff"
	var calls []dispatchCall
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case isDispatch(r) && len(calls) == 0:
			calls = append(calls, readDispatch(t, r))
			reply(w, 200, map[string]any{"DispatchedJobID": phantom, "EvalID": "e-phantom"})
		case isDispatch(r):
			calls = append(calls, readDispatch(t, r))
			reply(w, 200, map[string]any{"DispatchedJobID": child1, "EvalID": ""})
		case isStatuses(r):
			reply(w, 200, statusesOf("analytics")) // the phantom is not there
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	got, err := c.Dispatch(context.Background(), testLaunch)
	if err != nil || got != child1 {
		t.Fatalf("Dispatch = %q, %v; want %s", got, err, child1)
	}
	if len(calls) != 2 || calls[0].Token != calls[1].Token || calls[0].IdPrefixTemplate != calls[1].IdPrefixTemplate ||
		!sameMap(calls[0].Meta, calls[1].Meta) {
		t.Fatalf("dispatches %+v: want two, alike", calls)
	}
	if st := c.Stats(); st.Phantoms != 1 || st.DispatchAttempts != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDispatchLostReplyRetried: the first dispatch makes the child but its
// reply is lost (the connection drops); the retry, with the same token,
// gets the stored child.
func TestDispatchLostReplyRetried(t *testing.T) {
	var mu sync.Mutex
	made := map[string]string{} // token -> child
	var tokens []string
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !isDispatch(r) {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			return
		}
		d := readDispatch(t, r)
		tokens = append(tokens, d.Token)
		if child, ok := made[d.Token]; ok {
			reply(w, 200, map[string]any{"DispatchedJobID": child, "EvalID": ""})
			return
		}
		made[d.Token] = child1
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	})
	got, err := c.Dispatch(context.Background(), testLaunch)
	if err != nil || got != child1 {
		t.Fatalf("Dispatch = %q, %v", got, err)
	}
	if len(tokens) != 2 || tokens[0] != tokens[1] || tokens[0] != testLaunch.Identity {
		t.Fatalf("tokens %v", tokens)
	}
}

// TestDispatchRetriesSameTokenUntilDeadline: with no leader, the dispatch
// is retried, always with the launch's token, and gives up by the
// deadline with an error that leaves the outcome open.
func TestDispatchRetriesSameTokenUntilDeadline(t *testing.T) {
	var mu sync.Mutex
	var tokens []string
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens = append(tokens, readDispatch(t, r).Token)
		mu.Unlock()
		reply(w, 500, "No cluster leader")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Dispatch(ctx, testLaunch)
	took := time.Since(start)
	if err == nil || Permanent(err) || !strings.Contains(err.Error(), "No cluster leader") {
		t.Fatalf("Dispatch = %v; want an unknown outcome naming Nomad's message", err)
	}
	// Well short of RequestTimeout (3 s); the slack is for a loaded
	// machine under -race (measured: 721 ms there).
	if took > 400*time.Millisecond+time.Second {
		t.Fatalf("took %v past a 400 ms deadline", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tokens) < 5 {
		t.Fatalf("%d attempts in 400 ms with 5-20 ms backoff", len(tokens))
	}
	for _, tok := range tokens {
		if tok != testLaunch.Identity {
			t.Fatalf("a retry used token %q, not %q", tok, testLaunch.Identity)
		}
	}
	t.Logf("%d attempts in %v: %v", len(tokens), took.Round(time.Millisecond), err)
}

// TestDispatchHungNomad: an agent that never answers costs each attempt
// CallTimeout, and the call gives up by its deadline.
func TestDispatchHungNomad(t *testing.T) {
	var mu sync.Mutex
	attempts := 0
	done := make(chan struct{})
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attempts++
		mu.Unlock()
		io.Copy(io.Discard, r.Body) // then the server notices the client leave
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
	t.Cleanup(func() { close(done) }) // before the server's Close
	setCallTimeout(c, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 450*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Dispatch(ctx, testLaunch)
	took := time.Since(start)
	if err == nil || Permanent(err) {
		t.Fatalf("Dispatch = %v; want an unknown outcome", err)
	}
	// Never before the deadline, and well short of RequestTimeout (3 s)
	// after it; the slack is for a loaded machine under -race, where a
	// goroutine may wait its turn for some 300 ms (CI measured 721 ms for
	// the 400 ms deadline above): 200 ms of slack failed there.
	if took < 400*time.Millisecond || took > 450*time.Millisecond+time.Second {
		t.Fatalf("took %v with a 450 ms deadline", took)
	}
	mu.Lock()
	defer mu.Unlock()
	// Four fit, unhurried; two already show each attempt cut at
	// CallTimeout, where one would hang to the deadline, and still fit
	// when the machine holds a goroutine back for 300 ms.
	if attempts < 2 {
		t.Fatalf("%d attempts of 100 ms in 450 ms", attempts)
	}
}

// TestDispatchRequestTimeout: without a deadline of its own, a call ends
// after RequestTimeout.
func TestDispatchRequestTimeout(t *testing.T) {
	c := fake(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 503, "Service Unavailable") })
	c.cfg.RequestTimeout = 200 * time.Millisecond
	start := time.Now()
	_, err := c.Dispatch(context.Background(), testLaunch)
	// The slack is for a loaded machine under -race (see above); without
	// RequestTimeout the call would retry for ever.
	if took := time.Since(start); err == nil || took > 200*time.Millisecond+time.Second {
		t.Fatalf("Dispatch = %v after %v; want an error within 200 ms", err, took)
	}
}

// TestDispatchRefusal: a refused dispatch is checked by look-up. A child
// found is the answer (the parent was stopped after it was made); none
// found makes the refusal final; a failed look-up leaves it open.
func TestDispatchRefusal(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		msg        string
		listStatus int
		list       []map[string]any
		wantChild  string
		wantReject bool
	}{
		{"stopped parent, child exists", 500, `Specified job "report" is stopped`, 200,
			[]map[string]any{{"ID": child1, "CreateIndex": 5}}, child1, false},
		{"stopped parent, no child", 500, `Specified job "report" is stopped`, 200, nil, "", true},
		{"missing parent", 500, "parameterized job not found", 200, nil, "", true},
		{"permission denied, look-up denied", 403, "Permission denied", 403, nil, "", true},
		{"refused, look-up failing", 500, `Specified job "report" is stopped`, 503, nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case isDispatch(r):
					reply(w, tc.status, tc.msg)
				case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs" && tc.listStatus != 200:
					reply(w, tc.listStatus, "Service Unavailable")
				case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs":
					reply(w, 200, append([]map[string]any{}, tc.list...))
				default:
					t.Errorf("unexpected %s %s", r.Method, r.URL)
				}
			})
			// Only the open outcome waits for the deadline; the others
			// take two calls, and are not cut short by a machine that
			// holds the test back for a few hundred milliseconds.
			wait := 10 * time.Second
			if tc.wantChild == "" && !tc.wantReject {
				wait = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			got, err := c.Dispatch(ctx, testLaunch)
			switch {
			case tc.wantChild != "":
				if err != nil || got != tc.wantChild {
					t.Fatalf("Dispatch = %q, %v; want %s", got, err, tc.wantChild)
				}
			case tc.wantReject:
				if !Permanent(err) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("Dispatch = %v; want rejected with %q", err, tc.msg)
				}
			default:
				if err == nil || Permanent(err) {
					t.Fatalf("Dispatch = %v; want an open outcome", err)
				}
			}
			t.Log(err)
		})
	}
}

func TestDispatchInvalidLaunch(t *testing.T) {
	c := fake(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("unexpected %s %s", r.Method, r.URL) })
	for _, l := range []Launch{
		{Target: state.Target{NomadJob: "report"}, Identity: `bad"identity`},
		{Target: state.Target{NomadJob: "report"}, Identity: ""},
		{Target: state.Target{NomadJob: "report"}, Identity: "ok-1", Meta: map[string]string{"paxcron_job": "x"}},
		{Identity: "ok-1"},
	} {
		if _, err := c.Dispatch(context.Background(), l); !Permanent(err) {
			t.Errorf("Dispatch(%+v) = %v; want rejected", l, err)
		}
	}
}

func TestLookup(t *testing.T) {
	manual := "report/dispatch-nightly-1772330400-manual-1772330405-0123abcd"
	later := "report/dispatch-nightly-1772330400-1772330409-99999999"
	var query map[string][]string
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.Query()
		if r.URL.Path != "/v1/jobs" {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
		// As a server that ignored the filter would answer.
		reply(w, 200, []map[string]any{{"ID": manual, "CreateIndex": 3}, {"ID": later, "CreateIndex": 9}, {"ID": child1, "CreateIndex": 5}})
	})
	c.cfg.Region = "eu"
	got, found, err := c.Lookup(context.Background(), testLaunch.Target, testLaunch.Identity)
	if err != nil || !found || got != child1 {
		t.Fatalf("Lookup = %q, %v, %v; want %s", got, found, err, child1)
	}
	want := map[string]string{
		"prefix": "report/dispatch-nightly-1772330400-", "filter": `DispatchIdempotencyToken == "nightly-1772330400"`,
		"namespace": "analytics", "region": "eu",
	}
	for k, v := range want {
		if g := query[k]; len(g) != 1 || g[0] != v {
			t.Errorf("query %s = %v, want %q", k, g, v)
		}
	}
	if _, stale := query["stale"]; stale {
		t.Error("the look-up allows a stale answer")
	}
	if _, _, err := c.Lookup(context.Background(), testLaunch.Target, `x" or ""=="`); !Permanent(err) {
		t.Errorf("Lookup with an invalid identity = %v", err)
	}
}

func TestLookupNotFoundAndRetry(t *testing.T) {
	n := 0
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		n++
		if n == 1 {
			reply(w, 500, "No cluster leader")
			return
		}
		reply(w, 200, []map[string]any{})
	})
	if got, found, err := c.Lookup(context.Background(), testLaunch.Target, testLaunch.Identity); err != nil || found || got != "" {
		t.Fatalf("Lookup = %q, %v, %v; want not found", got, found, err)
	}
	if n != 2 {
		t.Fatalf("%d calls, want 2", n)
	}
}

func TestRunning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status string // "" means 404
		allocs []string
		want   bool
	}{
		{"pending", "pending", nil, true},
		{"running", "running", nil, true},
		{"dead, all complete", "dead", []string{"complete", "failed"}, false},
		{"dead, no allocs", "dead", nil, false},
		{"dead, task still stopping", "dead", []string{"complete", "running"}, true},
		{"dead, client lost", "dead", []string{"unknown"}, true},
		{"gone", "", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodGet && jobPath(r) == child1 && tc.status == "":
					reply(w, 404, "job not found")
				case r.Method == http.MethodGet && jobPath(r) == child1:
					reply(w, 200, childJob(child1, "t", tc.status))
				case r.Method == http.MethodGet && jobPath(r) == child1+"/allocations":
					var out []map[string]any
					for _, s := range tc.allocs {
						out = append(out, map[string]any{"ID": "a", "ClientStatus": s})
					}
					reply(w, 200, append([]map[string]any{}, out...))
				default:
					t.Errorf("unexpected %s %s", r.Method, r.URL)
				}
			})
			if got, err := c.Running(context.Background(), testLaunch.Target, child1); err != nil || got != tc.want {
				t.Fatalf("Running = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestStop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		job      map[string]any // nil: 404
		delete   int            // the DELETE's status
		deletes  int
		wantPerm bool
	}{
		{"running", childJob(child1, "t", "running"), 200, 1, false},
		{"dead", childJob(child1, "t", "dead"), 200, 0, false},
		{"stopped", map[string]any{"ID": child1, "Status": "running", "Stop": true}, 200, 0, false},
		{"gone", nil, 200, 0, false},
		{"gone meanwhile", childJob(child1, "t", "running"), 404, 1, false},
		{"denied", childJob(child1, "t", "running"), 403, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deletes := 0
			c := fake(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodGet && jobPath(r) == child1 && tc.job == nil:
					reply(w, 404, "job not found")
				case r.Method == http.MethodGet && jobPath(r) == child1:
					reply(w, 200, tc.job)
				case r.Method == http.MethodDelete && jobPath(r) == child1:
					deletes++
					if r.URL.Query().Get("purge") != "false" {
						t.Errorf("stop with purge=%q", r.URL.Query().Get("purge"))
					}
					if tc.delete != 200 {
						reply(w, tc.delete, "job not found")
						return
					}
					reply(w, 200, map[string]any{"EvalID": "e"})
				default:
					t.Errorf("unexpected %s %s", r.Method, r.URL)
				}
			})
			err := c.Stop(context.Background(), testLaunch.Target, child1)
			if (err != nil) != tc.wantPerm || (err != nil && !Permanent(err)) || deletes != tc.deletes {
				t.Fatalf("Stop = %v with %d deletes; want %d deletes, permanent error %v", err, deletes, tc.deletes, tc.wantPerm)
			}
		})
	}
}

func TestCheckVersion(t *testing.T) {
	type member struct {
		Name   string
		Status string
		Tags   map[string]string
	}
	alive := func(builds ...string) []member {
		var ms []member
		for i, b := range builds {
			ms = append(ms, member{Name: string(rune('a' + i)), Status: "alive", Tags: map[string]string{"build": b}})
		}
		return ms
	}
	for _, tc := range []struct {
		name      string
		members   []member // nil: 403
		self      string   // "": 403
		want      string
		wantError string
	}{
		{"current", alive("1.11.3"), "", "1.11.3", ""},
		{"first fixed", alive("1.11.2"), "", "1.11.2", ""},
		{"enterprise", alive("1.11.2+ent"), "", "1.11.2+ent", ""},
		{"newer", alive("2.0.0", "1.12.0"), "", "1.12.0", ""},
		{"too old", alive("1.11.1"), "", "", "Nomad 1.11.1 is older than 1.11.2"},
		{"one server too old", alive("1.11.3", "1.10.5", "1.11.3"), "", "", "1.10.5 is older"},
		{"prerelease of the fix", alive("1.11.2-dev"), "", "", "older than 1.11.2"},
		{"old server gone", append(alive("1.11.3"), member{Name: "z", Status: "left", Tags: map[string]string{"build": "1.9.0"}}), "", "1.11.3", ""},
		{"garbage", alive("nightly"), "", "", "cannot read the Nomad version"},
		{"no node:read, agent:read", nil, "1.11.3", "1.11.3", ""},
		{"no node:read, old agent", nil, "1.10.0", "", "older than 1.11.2"},
		{"neither", nil, "", "", "node:read or agent:read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/v1/agent/members" && tc.members == nil:
					reply(w, 403, "Permission denied")
				case r.URL.Path == "/v1/agent/members":
					reply(w, 200, map[string]any{"Members": tc.members})
				case r.URL.Path == "/v1/agent/self" && tc.self == "":
					reply(w, 403, "Permission denied")
				case r.URL.Path == "/v1/agent/self":
					reply(w, 200, map[string]any{"member": map[string]any{"Tags": map[string]string{"build": tc.self}}})
				default:
					t.Errorf("unexpected %s %s", r.Method, r.URL)
				}
			})
			got, err := c.CheckVersion(context.Background())
			if tc.wantError != "" {
				if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("CheckVersion = %q, %v; want an error with %q", got, err, tc.wantError)
				}
				t.Log(err)
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("CheckVersion = %q, %v; want %s", got, err, tc.want)
			}
		})
	}
	// The refusal says why.
	_, err := checkVersions([]string{"1.11.1"})
	if !strings.Contains(err.Error(), "several children") {
		t.Errorf("refusal %q does not say why", err)
	}
}

func TestCheckGCThreshold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		server    map[string]any // nil: a client agent
		want      time.Duration
		known     bool
		wantError string
	}{
		{"default", map[string]any{"Enabled": true, "JobGCThreshold": ""}, 4 * time.Hour, true, ""},
		{"longer", map[string]any{"Enabled": true, "JobGCThreshold": "24h"}, 24 * time.Hour, true, ""},
		{"shorter", map[string]any{"Enabled": true, "JobGCThreshold": "90m"}, 90 * time.Minute, true, "set JobGCThreshold to 1h30m0s or less"},
		{"unreadable", map[string]any{"Enabled": true, "JobGCThreshold": "soon"}, 0, false, "cannot read"},
		{"client agent", map[string]any{"Enabled": false}, 0, false, ""},
		{"no server block", nil, 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/agent/self" {
					t.Errorf("unexpected %s %s", r.Method, r.URL)
				}
				cfg := map[string]any{}
				if tc.server != nil {
					cfg["Server"] = tc.server
				}
				reply(w, 200, map[string]any{"config": cfg})
			})
			got, known, err := c.CheckGCThreshold(context.Background())
			if got != tc.want || known != tc.known {
				t.Errorf("CheckGCThreshold = %v, %v, %v; want %v, %v", got, known, err, tc.want, tc.known)
			}
			if tc.wantError == "" && err != nil || tc.wantError != "" && (!errors.Is(err, ErrGCThreshold) || !strings.Contains(err.Error(), tc.wantError)) {
				t.Errorf("error %v; want %q", err, tc.wantError)
			}
		})
	}
}

// TestRefusalAfterAnUnansweredAttemptStaysOpen: an attempt that got no
// answer may still make the child; a later attempt refused (the parent
// stopped meanwhile) is checked by a look-up that cannot see that child
// yet. The outcome stays open, never "rejected": found in review, the
// launcher would have recorded the launch failed while its child ran.
func TestRefusalAfterAnUnansweredAttemptStaysOpen(t *testing.T) {
	var mu sync.Mutex
	dispatches := 0
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		dispatches += map[bool]int{true: 1}[isDispatch(r)]
		first := dispatches == 1
		mu.Unlock()
		switch {
		case isDispatch(r) && first:
			readDispatch(t, r)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close() // sent, no answer: it may land later
			}
		case isDispatch(r):
			reply(w, 500, `Specified job "report" is stopped`)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs":
			reply(w, 200, []map[string]any{}) // the first attempt's child not there yet
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Dispatch(ctx, testLaunch)
	if err == nil || Permanent(err) || errors.Is(err, launcher.ErrRejected) {
		t.Fatalf("Dispatch = %v; want an open outcome", err)
	}
}

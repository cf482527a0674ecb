package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	dto "github.com/prometheus/client_model/go"

	"paxcron/internal/api"
	"paxcron/internal/freeport"
)

// bundleStats reads a replica's histogram of calls per bundle: bundles
// sent and the calls in them.
func bundleStats(t *testing.T, s *Server) (bundles, calls uint64) {
	t.Helper()
	var m dto.Metric
	if err := s.metrics.bundleCalls.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), uint64(m.GetHistogram().GetSampleSum())
}

func putOne(name string) api.PutJobs {
	return api.PutJobs{Jobs: []api.PutJob{{Name: name, Spec: api.Spec{Schedule: "@daily", NomadJob: "p"}}}}
}

// TestForwardedCallsTravelInBundles: the calls that queue on a follower
// while its bundles are all in flight leave together, as one bundle, and
// each caller gets its own answer.
func TestForwardedCallsTravelInBundles(t *testing.T) {
	c := startCluster(t)
	const calls = 20
	// The counts below are of calls forwarded to one leader: on a loaded
	// machine the lead may move meanwhile (a follower that took it serves
	// the calls itself, and one forwarded to a replica that lost it is
	// sent again), and the test goes again under the new leader.
	for attempt := 1; ; attempt++ {
		l := c.lead()
		follower := l.id%3 + 1
		f := c.servers[follower-1]
		bundles0, calls0 := bundleStats(t, f)
		sent := func() (bundles, calls uint64) {
			b, n := bundleStats(t, f)
			return b - bundles0, n - calls0
		}
		again := func(what string) bool {
			if c.held(l) || attempt == 3 {
				return false
			}
			t.Logf("attempt %d: the lead moved from replica %d: %s; again", attempt, l.id, what)
			return true
		}
		name := func(i int) string { return fmt.Sprintf("bundled-%d-%d", attempt, i) }
		// Every bundle slot taken: the calls below queue.
		for range maxBundlesInFlight {
			f.bundles.inFlight <- struct{}{}
		}
		fc := c.client(follower, writeToken)
		var wg sync.WaitGroup
		results := make([]api.PutJobsResult, calls)
		for i := range calls {
			wg.Go(func() {
				res, err := fc.PutJobs(context.Background(), putOne(name(i)))
				if err != nil {
					t.Error(err)
				}
				results[i] = res
			})
		}
		eventually(t, "the calls queued", func() bool { return len(f.bundles.queue) == calls || !c.held(l) })
		// One slot frees up: one caller takes it and gathers every queued
		// call (with two slots free, two callers could split the queue).
		<-f.bundles.inFlight
		eventually(t, "the queue taken", func() bool { return len(f.bundles.queue) == 0 })
		for range maxBundlesInFlight - 1 {
			<-f.bundles.inFlight
		}
		wg.Wait()
		if bundles, n := sent(); bundles != 1 || n != calls {
			if again(fmt.Sprintf("%d bundles of %d calls", bundles, n)) {
				continue
			}
			t.Fatalf("the follower sent %d bundles of %d calls; want 1 of %d", bundles, n, calls)
		}
		for i, res := range results {
			if len(res.Jobs) != 1 || res.Jobs[0].Name != name(i) || !res.Jobs[0].Created {
				t.Errorf("call %d was answered %+v", i, res)
			}
		}
		lc := c.client(l.id, readToken)
		for i := range calls {
			if _, err := lc.Job(context.Background(), name(i), 0, api.ReadOptions{}); err != nil {
				t.Errorf("job %s: %v", name(i), err)
			}
		}
		// A follower's read of the leader's state is bundled too, and an
		// error comes back as the leader's handlers made it.
		fr := c.client(follower, readToken)
		if _, err := fr.Job(context.Background(), name(0), 0, api.ReadOptions{}); err != nil {
			t.Error(err)
		}
		_, err := fr.Job(context.Background(), "no-such-job", 0, api.ReadOptions{})
		var apiErr *api.Error
		if !asAPIError(err, &apiErr) || apiErr.Status != http.StatusNotFound {
			t.Errorf("a forwarded read of a missing job: %v, want a 404", err)
		}
		if bundles, n := sent(); bundles != 3 || n != calls+2 {
			if again(fmt.Sprintf("after two reads %d bundles of %d calls", bundles, n)) {
				continue
			}
			t.Errorf("after two reads the follower sent %d bundles of %d calls; want 3 of %d", bundles, n, calls+2)
		}
		return
	}
}

func asAPIError(err error, target **api.Error) bool { return errors.As(err, target) }

// postBundle posts calls to s's bundle endpoint with the MAC of key
// (none when key is nil) and returns the status and the answers by call.
func postBundle(t *testing.T, s *Server, key []byte, body []byte) (int, map[int]bundleAnswer, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr()+bundlePath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", bundleContentType)
	if key != nil {
		req.Header.Set(bundleMACHeader, bundleMAC(key, body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, nil, string(b)
	}
	answers := map[int]bundleAnswer{}
	dec := codec.NewDecoder(resp.Body, bundleHandle)
	for {
		var a bundleAnswer
		if err := dec.Decode(&a); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if _, dup := answers[a.Index]; dup {
			t.Fatalf("two answers for call %d", a.Index)
		}
		answers[a.Index] = a
	}
	return resp.StatusCode, answers, ""
}

func encodeBundle(t *testing.T, calls ...bundleCall) []byte {
	t.Helper()
	var b []byte
	if err := codec.NewEncoderBytes(&b, bundleHandle).Encode(bundle{Calls: calls}); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBundlesAreForMembersAndEachCallIsChecked: the leader takes a bundle
// only with the cluster's MAC, refuses a malformed one whole, and checks
// each call in it as if it had been sent directly: its own token, its own
// answer.
func TestBundlesAreForMembersAndEachCallIsChecked(t *testing.T) {
	c := startCluster(t)
	l := c.servers[c.leader()-1]
	key := bundleKey(l.cfg.ClusterKey)
	bundleFor := func(name string) []byte {
		putBody, _ := json.Marshal(putOne(name))
		return encodeBundle(t,
			bundleCall{Method: "POST", Path: "/v1/jobs", Auth: "Bearer " + writeToken, ContentType: "application/json", Body: putBody},
			bundleCall{Method: "POST", Path: "/v1/jobs", Auth: "Bearer " + readToken, ContentType: "application/json", Body: putBody},
			bundleCall{Method: "DELETE", Path: "/v1/jobs/" + name},
			bundleCall{Method: "GET", Path: "/v1/status?pretty", Auth: "Bearer " + readToken},
		)
	}
	good := bundleFor("via-bundle")
	for _, tc := range []struct {
		name string
		key  []byte
	}{{"no MAC", nil}, {"another cluster's MAC", bundleKey([]byte("another-cluster-key-0123456789"))}} {
		if status, _, msg := postBundle(t, l, tc.key, good); status != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", tc.name, status, msg)
		}
	}
	if _, err := c.client(l.cfg.ID, readToken).Job(context.Background(), "via-bundle", 0, api.ReadOptions{}); err == nil {
		t.Fatal("a refused bundle's call ran")
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"not msgpack", []byte("{\"calls\":[]}")},
		{"no calls", encodeBundle(t)},
		{"too many calls", encodeBundle(t, slices.Repeat([]bundleCall{{Method: "GET", Path: "/v1/status"}}, maxBundleCalls+1)...)},
		{"trailing bytes", append(encodeBundle(t, bundleCall{Method: "GET", Path: "/v1/status"}), 0xc0)},
	} {
		if status, _, msg := postBundle(t, l, key, tc.body); status != http.StatusBadRequest || !strings.Contains(msg, "error") {
			t.Errorf("%s: %d %s, want a 400 with an error", tc.name, status, msg)
		}
	}
	// A call no follower of this version bundles is answered alone, and
	// the call beside it is served (found in review: the leader refused
	// the whole bundle, and a follower of an older version bundled HEAD
	// requests and long queries).
	for _, tc := range []struct {
		name string
		call bundleCall
	}{
		{"a bundle in a bundle", bundleCall{Method: "POST", Path: bundlePath}},
		{"not the API", bundleCall{Method: "GET", Path: "/metrics"}},
		{"a method not forwarded", bundleCall{Method: "PUT", Path: "/v1/jobs"}},
		{"a HEAD", bundleCall{Method: "HEAD", Path: "/v1/status", Auth: "Bearer " + readToken}},
		{"a long query", bundleCall{Method: "GET", Path: "/v1/jobs?prefix=" + strings.Repeat("a", maxCallPathBytes), Auth: "Bearer " + readToken}},
		{"a large body", bundleCall{Method: "POST", Path: "/v1/jobs", Body: make([]byte, maxBundledBody+1)}},
	} {
		status, got, msg := postBundle(t, l, key, encodeBundle(t, tc.call, bundleCall{Method: "GET", Path: "/v1/jobs", Auth: "Bearer " + readToken}))
		if status != http.StatusOK || len(got) != 2 {
			t.Errorf("%s beside a read: %d %s, %d answers; want 200 and 2", tc.name, status, msg, len(got))
			continue
		}
		if a := got[0]; a.Status != http.StatusBadRequest || !strings.Contains(string(a.Body), "directly") {
			t.Errorf("%s: answered %d %s, want a 400 that says to send it directly", tc.name, a.Status, a.Body)
		}
		if a := got[1]; a.Status != http.StatusOK && a.Status != http.StatusServiceUnavailable {
			t.Errorf("%s: the read beside it answered %d %s", tc.name, a.Status, a.Body)
		}
	}
	if status, _, _ := postBundle(t, l, key, make([]byte, maxBundleBytes+1)); status != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized bundle: %d, want 413", status)
	}

	// Under a loaded machine the leader can lose its lease between being
	// found and taking the bundle (a CI run saw it): the write then
	// answers 503, and the bundle goes again, with a new job, to
	// whichever replica leads by then.
	name := "via-bundle"
	var answers map[int]bundleAnswer
	for attempt := 1; ; attempt++ {
		status, got, msg := postBundle(t, l, key, bundleFor(name))
		if status != http.StatusOK || len(got) != 4 {
			t.Fatalf("the bundle: %d %s, %d answers; want 200 and 4", status, msg, len(got))
		}
		answers = got
		if answers[0].Status != http.StatusServiceUnavailable || attempt == 5 {
			break
		}
		t.Logf("attempt %d: the write answered %d %s; again", attempt, answers[0].Status, answers[0].Body)
		time.Sleep(200 * time.Millisecond)
		l = c.servers[c.leader()-1]
		name = fmt.Sprintf("via-bundle-%d", attempt)
	}
	for i, want := range []struct {
		status int
		has    string
	}{
		{http.StatusOK, `"created":true`},
		{http.StatusForbidden, "error"},
		{http.StatusUnauthorized, "error"},
		{http.StatusOK, "\n  \"leader\""}, // ?pretty kept
	} {
		a := answers[i]
		if a.Status != want.status || !strings.Contains(string(a.Body), want.has) {
			t.Errorf("call %d: %d %s; want %d with %q", i, a.Status, a.Body, want.status, want.has)
		}
		if ct := http.Header(a.Header).Get("Content-Type"); ct != "application/json" {
			t.Errorf("call %d: Content-Type %q", i, ct)
		}
	}
	if _, err := c.client(l.cfg.ID, readToken).Job(context.Background(), name, 0, api.ReadOptions{}); err != nil {
		t.Errorf("the bundled write's job: %v", err)
	}
}

// TestForwardingToALeaderWithoutBundles: a follower whose leader answers
// a bundle with 404 (an older version, during a rolling upgrade) proxies
// each call alone; one whose leader's API refuses connections answers 503.
func TestForwardingToALeaderWithoutBundles(t *testing.T) {
	c := startCluster(t)
	// The follower's address for the leader is what the test replaces:
	// on a loaded machine the lead may move meanwhile, the calls then go
	// elsewhere, and the test goes again under the new leader, with the
	// follower given the old one's real address back.
	for attempt := 1; ; attempt++ {
		lead := c.lead()
		leader := lead.id
		follower := leader%3 + 1
		l, f := c.servers[leader-1], c.servers[follower-1]
		setAPI := func(addr string) {
			if err := f.SetPeer(leader, PeerAddrs{Paxos: l.PaxosAddr(), HTTP: addr}); err != nil {
				t.Fatal(err)
			}
		}
		again := func(what string) bool {
			if c.held(lead) || attempt == 3 {
				return false
			}
			t.Logf("attempt %d: the lead moved from replica %d: %s; again", attempt, leader, what)
			setAPI(l.HTTPAddr())
			return true
		}
		target, _ := url.Parse("http://" + l.HTTPAddr())
		proxy := httputil.NewSingleHostReverseProxy(target)
		var refused sync.Map
		old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == bundlePath {
				refused.Store(r.Header.Get(forwardedHeader), true)
				http.NotFound(w, r)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		setAPI(strings.TrimPrefix(old.URL, "http://"))
		fc := c.client(follower, writeToken)
		res, err := fc.PutJobs(context.Background(), putOne(fmt.Sprintf("upgrade-%d", attempt)))
		if err != nil || len(res.Jobs) != 1 || !res.Jobs[0].Created {
			old.Close()
			t.Fatalf("a write through a follower of an older leader: %+v, %v", res, err)
		}
		if _, ok := refused.Load(fmt.Sprint(uint64(follower))); !ok {
			old.Close()
			if again("the follower offered it no bundle") {
				continue
			}
			t.Fatal("the follower did not offer the leader a bundle first")
		}

		// The leader's API refuses connections: the call never left the
		// follower, so it is a 503 (retry), not a 502 (the leader may have
		// acted). An address nothing listens on, not the old server's: a
		// connection the follower pooled to it could carry the call before
		// the follower saw it closed, and a call written and answered by EOF
		// is rightly a 502 (found by CI: the follower cannot tell that the
		// leader never read it).
		old.Close()
		ports, err := freeport.Pick(1)
		if err != nil {
			t.Fatal(err)
		}
		setAPI(fmt.Sprintf("127.0.0.1:%d", ports[0]))
		once := c.clientWith(follower, api.ClientConfig{Token: writeToken, NoLeaderWait: -1})
		unreachable := fmt.Sprintf("unreachable-%d", attempt)
		_, err = once.PutJobs(context.Background(), putOne(unreachable))
		var apiErr *api.Error
		if !asAPIError(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || apiErr.Leader != uint64(leader) ||
			!strings.Contains(apiErr.Message, "cannot reach its API") {
			if again(fmt.Sprintf("a write through a follower that cannot reach the leader: %v", err)) {
				continue
			}
			t.Fatalf("a write through a follower that cannot reach the leader: %v, want a 503 naming replica %d", err, leader)
		}
		if _, err := once.Job(context.Background(), unreachable, 0, api.ReadOptions{Stale: true}); api.StatusOf(err) != http.StatusNotFound {
			t.Fatalf("the job of a write that was refused: %v, want none (404)", err)
		}
		return
	}
}

// TestWorkerPoolKeepsIdleWorkers: a function run while a worker waits
// runs on that worker; a worker idle for longer than the pool's idle
// time is gone.
func TestWorkerPoolKeepsIdleWorkers(t *testing.T) {
	p := newWorkerPool(time.Hour)
	for range 10 {
		done := make(chan struct{})
		p.run(func() { close(done) })
		<-done
		// A worker counts itself waiting just before it waits: a run in
		// between starts another (CI under -race once hit it), so at least
		// one, not exactly one.
		eventually(t, "a worker waiting", func() bool { return p.waiting.Load() >= 1 })
	}
	if n := p.started.Load(); n > 3 {
		t.Errorf("%d workers started for 10 functions run one at a time; want them run by one, or a few", n)
	}
	// With a short idle time each run after a pause starts a new worker:
	// the last one is gone.
	short := newWorkerPool(time.Millisecond)
	eventually(t, "a worker idle past its time gone", func() bool {
		before := short.started.Load()
		done := make(chan struct{})
		short.run(func() { close(done) })
		<-done
		time.Sleep(20 * time.Millisecond)
		return before > 0 && short.started.Load() > before
	})
}

// TestCallsABundleCannotCarryAreProxiedAlone: a follower sends a call
// that a bundle cannot carry (a HEAD, which the GET routes serve; a query
// over the bundle's path limit) to the leader alone, and it is answered
// as the leader answers it. Found in review: such a call went into a
// bundle, the leader refused the bundle whole, and the call and every
// call beside it got a 502 ("the leader may have acted").
func TestCallsABundleCannotCarryAreProxiedAlone(t *testing.T) {
	c := startCluster(t)
	leader := c.leader()
	if _, err := c.client(leader, writeToken).PutJobs(context.Background(), everySecond("j")); err != nil {
		t.Fatal(err)
	}
	follower := c.servers[leader%3]
	before, _ := bundleStats(t, follower)
	longQuery := "/v1/jobs?prefix=" + strings.Repeat("x", maxCallPathBytes)
	for _, tc := range []struct{ method, path string }{{http.MethodHead, "/v1/jobs/j"}, {http.MethodGet, longQuery}} {
		onLeader := httpDo(t, tc.method, "http://"+c.servers[leader-1].HTTPAddr()+tc.path, readToken, "", nil)
		viaFollower := httpDo(t, tc.method, "http://"+follower.HTTPAddr()+tc.path, readToken, "", nil)
		if onLeader.code != http.StatusOK || viaFollower.code != onLeader.code {
			t.Errorf("%s %.40s: %d on the leader, %d through a follower (%.200s); want 200 both", tc.method, tc.path, onLeader.code, viaFollower.code, viaFollower.body)
		}
	}
	if after, _ := bundleStats(t, follower); after != before {
		t.Errorf("the follower sent %d bundles for calls no bundle can carry", after-before)
	}
}

// TestAbandonedForwardedCallIsNotSentLater: a write forwarded through a
// follower whose bundle slots are all busy (a slow or unreachable
// leader) waits in the follower's queue, and its client gives up (a
// timeout). Found in review: the call stayed queued, and the next call
// forwarded through that follower, however much later, carried it to
// the leader, which applied it after writes the operator made since.
func TestAbandonedForwardedCallIsNotSentLater(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	// The delete must wait in the follower's queue and the later read go
	// out through it: on a loaded machine the lead may move meanwhile, to
	// the follower itself, which then serves either call itself (the
	// delete answered, or the queue never sent), and the test goes again
	// under the new leader.
	for attempt := 1; ; attempt++ {
		l := c.lead()
		follower := l.id%3 + 1
		f := c.servers[follower-1]
		lc := c.client(l.id, writeToken)
		victim := fmt.Sprintf("victim-%d", attempt)
		if _, err := lc.PutJobs(ctx, putOne(victim)); err != nil {
			t.Fatal(err)
		}
		again := func(what string) bool {
			if c.held(l) {
				return false
			}
			if attempt == 3 {
				t.Fatalf("the lead moved from replica %d in each of %d attempts: %s", l.id, attempt, what)
			}
			t.Logf("attempt %d: the lead moved from replica %d: %s; again", attempt, l.id, what)
			return true
		}
		for range maxBundlesInFlight {
			f.bundles.inFlight <- struct{}{}
		}
		free := func() {
			for range maxBundlesInFlight {
				<-f.bundles.inFlight
			}
		}
		impatient := c.clientWith(follower, api.ClientConfig{Token: writeToken, Timeout: 300 * time.Millisecond, NoLeaderWait: -1})
		if _, err := impatient.DeleteJob(ctx, victim); err == nil {
			free()
			if again("the delete was answered") {
				continue
			}
			t.Fatal("the delete was answered with every bundle slot taken")
		}
		// The handler gives the call up once it sees its caller gone, which
		// on a loaded machine may be later than any fixed wait: if the slots
		// below came free first, it would take one and send the delete
		// itself. The call stays queued, marked: wait for the mark. Nothing
		// else takes from the queue while the test holds every slot.
		var abandoned bool
		eventually(t, "the follower to give up the timed-out delete", func() bool {
			abandoned = abandonedIn(f, victim)
			return abandoned || !c.held(l)
		})
		if !abandoned {
			free()
			if again("the delete was not left queued") {
				continue
			}
		}
		if _, err := lc.Job(ctx, victim, 0, api.ReadOptions{}); err != nil {
			t.Fatalf("the delete timed out and the job is still there, as the operator checks: %v", err)
		}
		// The leader recovers; much later someone reads through the follower.
		free()
		_, _ = c.client(follower, readToken).Job(ctx, "someone-else", 0, api.ReadOptions{})
		if _, err := lc.Job(ctx, victim, 0, api.ReadOptions{}); api.StatusOf(err) == http.StatusNotFound {
			t.Fatalf("a delete whose client gave up (and which the operator saw not applied) was applied by an unrelated later call; %d calls still queued", len(f.bundles.queue))
		}
		if again("the follower may have served the later read itself") {
			continue
		}
		return
	}
}

// abandonedIn reports whether f holds the delete of job name queued and
// marked abandoned. It takes each queued call and puts it back, which
// leaves their order as it was.
func abandonedIn(f *Server, name string) bool {
	found := false
	for range len(f.bundles.queue) {
		select {
		case q := <-f.bundles.queue:
			if q.call.Method == http.MethodDelete && strings.HasSuffix(q.call.Path, "/"+name) && q.state.Load() == callAbandoned {
				found = true
			}
			f.bundles.queue <- q
		default: // not queued yet
			return found
		}
	}
	return found
}

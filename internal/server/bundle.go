package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"paxcron/internal/api"
	"paxcron/paxos"
)

// A follower forwards the API calls it cannot answer to the leader. One
// HTTP round trip per call cost each forwarded write a request written and
// read on both replicas (BenchmarkAPI's profile: the forwarding hop was
// about a third of the CPU of a write through a follower). So the calls
// that queue up while earlier ones are in flight travel together: a
// follower sends them as one bundle (POST bundlePath, msgpack), the leader
// serves each one through its own API handlers, concurrently, exactly as
// if it had been sent to it (the call's own token is checked, the
// forwarded mark keeps it from being forwarded again), and streams each
// answer back as soon as it is ready, so a slow call delays no other. As
// with group commit, a bundle holds whatever arrived while the previous
// bundles were on their way: one call alone when the load is light.
const (
	bundlePath        = "/v1/internal/forward"
	bundleContentType = "application/vnd.paxcron.bundle+msgpack"

	// maxBundleCalls bounds the calls in one bundle.
	maxBundleCalls = 128
	// maxBundledBody is the largest call body that travels in a bundle;
	// a larger one (a file of many cron jobs) is proxied alone.
	maxBundledBody = 64 << 10
	// bundleGatherBytes: a follower stops adding calls to a bundle once
	// their bodies reach it.
	bundleGatherBytes = 1 << 20
	// maxBundleBytes bounds a bundle's encoded size on the leader: what a
	// follower can gather, and room for the calls' paths and headers.
	maxBundleBytes = bundleGatherBytes + maxBundledBody + maxBundleCalls*4<<10
	// maxBundlesInFlight bounds the bundles one follower has sent and not
	// yet had answered; calls queue meanwhile and make the next bundle.
	maxBundlesInFlight = 8
	// maxQueuedCalls bounds the calls waiting for a bundle; past it a call
	// is proxied alone.
	maxQueuedCalls = 1024
	// bundleTimeout bounds one bundle's round trip (the HTTP server's
	// own write timeout is 5 minutes).
	bundleTimeout = 2 * time.Minute

	maxCallPathBytes   = 2 << 10
	maxCallHeaderBytes = 1 << 10
)

// bundleCall is one forwarded API call.
type bundleCall struct {
	Method      string
	Path        string // the request URI: path and query
	Auth        string // the Authorization header
	ContentType string
	Body        []byte
}

type bundle struct {
	Calls []bundleCall
}

// bundleAnswer is the leader's answer to call Index of a bundle. Status
// 0, never sent, tells the follower's handler to proxy its call alone.
type bundleAnswer struct {
	Index  int
	Status int
	Header map[string][]string
	Body   []byte
}

var bundleHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.StructToArray = true
	// go-msgpack's default bound on allocating ahead (see cron/state's
	// handle): at 64, a 64 KiB body took 10 ms to decode.
	h.MaxInitLen = 0
	h.MaxDepth = 8
	return h
}()

// validate refuses a call no follower would forward. The leader answers
// such a call with a 400 of its own and serves the rest of its bundle: a
// follower of an older version, which bundled HEAD requests and long
// paths, would otherwise have had every call beside it fail.
func (c *bundleCall) validate() error {
	switch c.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		return fmt.Errorf("method %q is not forwarded", c.Method)
	}
	switch {
	case len(c.Path) > maxCallPathBytes:
		return fmt.Errorf("path of %d bytes, more than %d", len(c.Path), maxCallPathBytes)
	case !strings.HasPrefix(c.Path, "/v1/"):
		return fmt.Errorf("path %q is not an API path", c.Path)
	case strings.HasPrefix(c.Path, "/v1/internal/"):
		return fmt.Errorf("path %q cannot be forwarded", c.Path)
	case len(c.Auth) > maxCallHeaderBytes || len(c.ContentType) > maxCallHeaderBytes:
		return fmt.Errorf("a header of more than %d bytes", maxCallHeaderBytes)
	case len(c.Body) > maxBundledBody:
		return fmt.Errorf("body of %d bytes, more than %d", len(c.Body), maxBundledBody)
	}
	return nil
}

// decodeBundle decodes a bundle; each call is validated as it is served.
func decodeBundle(b []byte) (bundle, error) {
	var bd bundle
	dec := codec.NewDecoderBytes(b, bundleHandle)
	if err := dec.Decode(&bd); err != nil {
		return bundle{}, fmt.Errorf("not a bundle of calls: %w", err)
	}
	if n := dec.NumBytesRead(); n != len(b) {
		return bundle{}, fmt.Errorf("%d bytes after the bundle", len(b)-n)
	}
	if len(bd.Calls) == 0 || len(bd.Calls) > maxBundleCalls {
		return bundle{}, fmt.Errorf("%d calls in a bundle; want 1-%d", len(bd.Calls), maxBundleCalls)
	}
	return bd, nil
}

// bundleMACHeader carries a bundle's MAC: HMAC-SHA256 of its body under
// a key derived from the cluster key, so that only a member can send one.
const bundleMACHeader = "X-Paxcron-Bundle-MAC"

// bundleKey derives the key of bundle MACs from the cluster key (the
// transport's handshake uses the cluster key itself).
func bundleKey(clusterKey []byte) []byte {
	m := hmac.New(sha256.New, clusterKey)
	m.Write([]byte("paxcron: API bundles, v1"))
	return m.Sum(nil)
}

// bundleMACAccepted reports whether mac is body's under the key of any
// cluster key this replica accepts (a follower signs with its first key,
// which during a key rotation may be another than the leader's).
func (s *Server) bundleMACAccepted(mac, body []byte) bool {
	ok := false
	for _, key := range s.bundleAccepts {
		want := hmac.New(sha256.New, key)
		want.Write(body)
		ok = hmac.Equal(mac, want.Sum(nil)) || ok
	}
	return ok
}

func bundleMAC(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// handleBundle serves a follower's bundle of forwarded calls (on the
// leader; a replica that no longer leads answers each call as its
// handlers do for a forwarded call, 503). Only a member can send a bundle
// (its MAC); each call then needs its own token, as if sent directly.
func (s *Server) handleBundle(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBundleBytes))
	if err != nil {
		writeError(w, err)
		return
	}
	mac, err := hex.DecodeString(r.Header.Get(bundleMACHeader))
	if err != nil || !s.bundleMACAccepted(mac, raw) {
		writeError(w, &api.Error{Status: http.StatusForbidden, Message: "a bundle of forwarded calls is only taken from another replica of the cluster " +
			"(its MAC matches none of this replica's cluster keys: is a key rotation half done?)"})
		return
	}
	bd, err := decodeBundle(raw)
	if err != nil {
		writeError(w, badRequest("%v", err))
		return
	}
	// The calls may outlive this handler (the follower gone): they get
	// what they need of the bundle's request now, not the request.
	from := bundleOrigin{ctx: r.Context(), remoteAddr: r.RemoteAddr, by: r.Header.Get(forwardedHeader)}
	if from.by == "" {
		from.by = "bundle"
	}
	answers := make(chan bundleAnswer, len(bd.Calls))
	for i, c := range bd.Calls {
		if err := c.validate(); err != nil {
			answers <- answerOf(i, badRequest("a call forwarded in a bundle: %v; send it to the leader, replica %d, directly", err, s.cfg.ID))
			continue
		}
		s.callWorkers.run(func() { answers <- s.serveCall(from, i, c) })
	}
	w.Header().Set("Content-Type", bundleContentType)
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 16<<10)
	enc := codec.NewEncoder(bw, bundleHandle)
	flusher, _ := w.(http.Flusher)
	for left := len(bd.Calls); left > 0; {
		a := <-answers
		left--
		err := enc.Encode(a)
		// Whatever else is ready goes out in the same write.
		for more := true; more && left > 0 && err == nil; {
			select {
			case a := <-answers:
				left--
				err = enc.Encode(a)
			default:
				more = false
			}
		}
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			// The follower is gone; the calls still running finish into
			// the buffered channel.
			return
		}
		if flusher != nil && left > 0 {
			// The last answers go out with the end of the response, in
			// one write, when the handler returns.
			flusher.Flush()
		}
	}
}

// serveCall serves call i of a bundle through the API's handlers.
func (s *Server) serveCall(from bundleOrigin, i int, c bundleCall) bundleAnswer {
	a := s.serveAPICall(apiCall{ctx: from.ctx, remoteAddr: from.remoteAddr, forwardedBy: from.by,
		method: c.Method, path: c.Path, auth: c.Auth, contentType: c.ContentType, body: c.Body})
	a.Index = i
	return a
}

// apiCall is an API call that did not come as a request of its own: one
// of a bundle, or of a stream.
type apiCall struct {
	ctx         context.Context
	remoteAddr  string
	forwardedBy string // set: the forwarded mark (the call is not forwarded again)
	method      string
	path        string // path and query
	auth        string
	contentType string
	body        []byte
}

// serveAPICall serves c through the API's handlers.
func (s *Server) serveAPICall(c apiCall) bundleAnswer {
	req, err := http.NewRequestWithContext(c.ctx, c.method, c.path, nil)
	if err != nil {
		return answerOf(0, badRequest("call: %v", err))
	}
	req.Body, req.ContentLength = newMemBody(c.body), int64(len(c.body))
	req.RemoteAddr = c.remoteAddr
	if c.forwardedBy != "" {
		// Marked forwarded whoever sent the bundle: a replica that no
		// longer leads answers the call with a 503 rather than forward
		// it again.
		req.Header.Set(forwardedHeader, c.forwardedBy)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	rec := &answerRecorder{header: http.Header{}}
	s.api.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return bundleAnswer{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
}

// bundleOrigin is what a bundled call takes of the bundle's request.
type bundleOrigin struct {
	ctx        context.Context
	remoteAddr string
	by         string // the forwarding replica, for the forwarded mark
}

// answerOf is err as the API would have answered it.
func answerOf(i int, err error) bundleAnswer {
	rec := &answerRecorder{header: http.Header{}}
	writeError(rec, err)
	return bundleAnswer{Index: i, Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
}

// answerRecorder is the http.ResponseWriter a bundled call is served to.
type answerRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answerRecorder) Header() http.Header { return a.header }

func (a *answerRecorder) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *answerRecorder) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}

// write writes a to w.
func (a *bundleAnswer) write(w http.ResponseWriter) {
	for k, vs := range a.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// queuedCall is a call waiting in a follower for its bundle's answer.
type queuedCall struct {
	call bundleCall
	// state is callQueued until a gatherer takes the call into a bundle
	// (callTaken) or its caller gives up first (callAbandoned): whichever
	// swaps it first. Found in review: a call whose caller had gone was
	// still taken, and a write that had timed out was applied whenever
	// the next call passed through this replica, hours later maybe.
	state atomic.Int32
	done  chan bundleAnswer // buffered: receives exactly one answer
}

const (
	callQueued int32 = iota
	callTaken
	callAbandoned
)

// bundler is the follower's side: it gathers the calls to forward into
// bundles and sends them to whichever replica leads when a bundle leaves.
// There is no goroutine of its own: a caller whose call is still queued
// when one of the maxBundlesInFlight slots frees up takes the slot and
// sends, on its own goroutine, every call queued then (its own among
// them, unless another caller's bundle took it), and then waits for its
// own answer like the rest. The sender's caller is answered when the
// whole bundle is: the price of saving two goroutine hand-offs per call.
type bundler struct {
	s        *Server
	queue    chan *queuedCall
	inFlight chan struct{}
}

func newBundler(s *Server) *bundler {
	return &bundler{s: s, queue: make(chan *queuedCall, maxQueuedCalls), inFlight: make(chan struct{}, maxBundlesInFlight)}
}

// forward forwards c to the leader in a bundle and returns its answer;
// false when the queue is full (the caller proxies c alone), or with an
// answer of status 0 when the leader takes no bundles. It returns the
// context's error if ctx (the caller's request) ends first.
func (b *bundler) forward(ctx context.Context, c bundleCall) (bundleAnswer, bool, error) {
	q := &queuedCall{call: c, done: make(chan bundleAnswer, 1)}
	select {
	case b.queue <- q:
	default:
		return bundleAnswer{}, false, nil
	}
	for {
		if q.state.Load() == callTaken {
			select {
			case a := <-q.done:
				return a, true, nil
			case <-ctx.Done():
				return bundleAnswer{}, true, ctx.Err()
			}
		}
		select {
		case a := <-q.done:
			return a, true, nil
		case b.inFlight <- struct{}{}:
			if batch := b.gather(); len(batch) > 0 {
				b.send(b.s.ctx, batch)
			}
			<-b.inFlight
		case <-ctx.Done():
			// Not taken yet, it never will be; taken, it is on its way
			// and its outcome is unknown.
			q.state.CompareAndSwap(callQueued, callAbandoned)
			return bundleAnswer{}, true, ctx.Err()
		}
	}
}

// gather takes the calls queued now, within a bundle's bounds.
func (b *bundler) gather() []*queuedCall {
	var batch []*queuedCall
	for size := 0; len(batch) < maxBundleCalls && size < bundleGatherBytes; {
		select {
		case q := <-b.queue:
			if !q.state.CompareAndSwap(callQueued, callTaken) {
				continue // its caller has gone
			}
			batch = append(batch, q)
			size += len(q.call.Body)
		default:
			return batch
		}
	}
	return batch
}

// send sends one bundle to the leader and hands each call its answer; a
// call the leader did not answer gets a 502 (or a 503 with no leader),
// as a proxied call would.
func (b *bundler) send(ctx context.Context, batch []*queuedCall) {
	answered := make([]bool, len(batch))
	fail := func(err error) {
		for i, q := range batch {
			if !answered[i] {
				answered[i] = true
				q.done <- answerOf(i, err)
			}
		}
	}
	s := b.s
	leader := s.node.Status().Leader
	addr := s.peers.apiAddr(leader)
	if leader == paxos.None || leader == s.cfg.ID || addr == "" {
		fail(s.errNoLeader(leader))
		return
	}
	gatewayErr := func(err error) error {
		return &api.Error{Status: http.StatusBadGateway, Leader: uint64(leader),
			Message: fmt.Sprintf("forwarding to the leader, replica %d at %s: %v", leader, addr, err)}
	}
	var bd bundle
	for _, q := range batch {
		bd.Calls = append(bd.Calls, q.call)
	}
	s.metrics.bundleCalls.Observe(float64(len(batch)))
	var body []byte
	if err := codec.NewEncoderBytes(&body, bundleHandle).Encode(&bd); err != nil {
		fail(fmt.Errorf("server: encoding a bundle: %w", err))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, bundleTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.peerScheme()+"://"+addr+bundlePath, bytes.NewReader(body))
	if err != nil {
		fail(gatewayErr(err))
		return
	}
	req.Header.Set("Content-Type", bundleContentType)
	req.Header.Set(forwardedHeader, fmt.Sprint(uint64(s.cfg.ID)))
	req.Header.Set(bundleMACHeader, bundleMAC(s.bundleKey, body))
	resp, err := s.proxyClient.Do(req)
	if err != nil {
		if api.NeverSent(err) {
			// The leader got nothing (it is down, or its API is): the calls
			// can be retried as safely as if nobody led.
			fail(s.errNoLeader(leader))
			return
		}
		fail(gatewayErr(err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		// A leader of an older version, without bundles (a rolling
		// upgrade): each call is proxied alone.
		for i, q := range batch {
			answered[i] = true
			q.done <- bundleAnswer{}
		}
		return
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != bundleContentType {
		// Not an answer to the bundle: the leader refused it whole.
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		fail(gatewayErr(fmt.Errorf("the bundle was refused: %s: %s", resp.Status, strings.TrimSpace(string(msg)))))
		return
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	// The response is read to its end, or its connection could not be
	// used again: a new connection for every bundle.
	defer io.Copy(io.Discard, io.LimitReader(br, 4<<10))
	dec := codec.NewDecoder(br, bundleHandle)
	for left := len(batch); left > 0; left-- {
		var a bundleAnswer
		if err := dec.Decode(&a); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			fail(gatewayErr(fmt.Errorf("reading the answers: %w", err)))
			return
		}
		if a.Index < 0 || a.Index >= len(batch) || answered[a.Index] || a.Status < 100 || a.Status > 999 {
			fail(gatewayErr(fmt.Errorf("an answer for call %d (status %d) of %d", a.Index, a.Status, len(batch))))
			return
		}
		answered[a.Index] = true
		batch[a.Index].done <- a
	}
}

// workerPool runs functions on goroutines it keeps for a while after
// their last one. A bundled call served on a new goroutine grew that
// goroutine's stack (the JSON decoder recurses) on every call: 6% of a
// leader's CPU in runtime.copystack under 512 writers; a kept goroutine
// keeps its grown stack.
type workerPool struct {
	work    chan func() // unbuffered: a send succeeds only to an idle worker
	idle    time.Duration
	started atomic.Int64 // workers started, for tests
	waiting atomic.Int64 // workers waiting for work, for tests
}

// workerIdle is how long a pooled goroutine waits for more work.
const workerIdle = 10 * time.Second

func newWorkerPool(idle time.Duration) *workerPool {
	return &workerPool{work: make(chan func()), idle: idle}
}

// run runs f on an idle worker, or on a new one.
func (p *workerPool) run(f func()) {
	select {
	case p.work <- f:
	default:
		p.started.Add(1)
		go p.worker(f)
	}
}

func (p *workerPool) worker(f func()) {
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		f()
		t.Reset(p.idle)
		p.waiting.Add(1)
		select {
		case f = <-p.work:
			p.waiting.Add(-1)
		case <-t.C:
			p.waiting.Add(-1)
			return
		}
	}
}

package server

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/schedule"
	"paxcron/cron/state"
	"paxcron/internal/api"
	"paxcron/internal/node"
	"paxcron/paxos"
)

// forwardedHeader marks a request a follower forwarded to the leader; a
// replica that receives one and does not lead answers 503 rather than
// forward it again.
const forwardedHeader = "X-Paxcron-Forwarded-By"

// Listing bounds.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
	defaultNext      = 5
)

// routes is the HTTP API, /v1/...
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.read(s.handleStatus))
	mux.HandleFunc("GET /v1/jobs", s.read(s.handleJobs))
	mux.HandleFunc("POST /v1/jobs", s.write(s.handlePutJobs))
	mux.HandleFunc("GET /v1/jobs/{name}", s.read(s.handleJob))
	mux.HandleFunc("DELETE /v1/jobs/{name}", s.write(s.handleDelete))
	mux.HandleFunc("POST /v1/jobs/{name}/pause", s.write(s.handlePause))
	mux.HandleFunc("POST /v1/jobs/{name}/resume", s.write(s.handleResume))
	mux.HandleFunc("POST /v1/jobs/{name}/trigger", s.write(s.handleTrigger))
	mux.HandleFunc("POST /v1/jobs/{name}/backfill", s.write(s.handleBackfill))
	mux.HandleFunc("GET "+snapshotPath, s.write(s.handleSnapshot))
	mux.HandleFunc("POST /v1/operator/backup", s.write(s.handleBackupNow))
	mux.HandleFunc("POST "+bundlePath, s.handleBundle)
	mux.HandleFunc("GET "+api.StreamPath, s.handleStream)
	mux.Handle("GET /metrics", s.authorized(false, s.metrics.handler()))
	if s.cfg.EnablePprof {
		mux.Handle("GET /debug/pprof/", s.authorized(true, http.HandlerFunc(pprof.Index)))
		mux.Handle("GET /debug/pprof/profile", s.authorized(true, http.HandlerFunc(pprof.Profile)))
		mux.Handle("GET /debug/pprof/trace", s.authorized(true, http.HandlerFunc(pprof.Trace)))
	}
	mux.HandleFunc("GET /{$}", s.handleStatusPage)
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &api.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no such API: %s %s (see the API list in README.md)", r.Method, r.URL.Path)})
	})
	return mux
}

// handler serves one API call; it returns the JSON answer or an error
// (an *api.Error keeps its status; others are 500s).
type handler func(w http.ResponseWriter, r *http.Request) (any, error)

// read wraps a read: any read or write token, or none with
// AnonymousReads.
func (s *Server) read(h handler) http.HandlerFunc {
	return s.serve(false, h)
}

// write wraps a write: a write token.
func (s *Server) write(h handler) http.HandlerFunc {
	return s.serve(true, h)
}

func (s *Server) serve(mutating bool, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r, mutating); err != nil {
			writeError(w, err)
			return
		}
		// The body is read whole (bounded), so that a handler that reads
		// it can still forward the request to the leader; a bundled or
		// streamed call's is in memory already.
		mb, inMemory := r.Body.(memBody)
		if !inMemory || len(mb.b) > api.MaxBodyBytes {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
			if err != nil {
				writeError(w, err)
				return
			}
			mb = newMemBody(body)
			r.Body = mb
		}
		r.GetBody = func() (io.ReadCloser, error) { return newMemBody(mb.b), nil }
		r.ContentLength = int64(len(mb.b))
		out, err := h(w, r)
		if errors.Is(err, errHandled) {
			return
		}
		if err != nil {
			writeError(w, err)
			return
		}
		if r.URL.Query().Has("pretty") {
			writeIndented(w, http.StatusOK, out)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// memBody is a request body held in memory.
type memBody struct {
	*bytes.Reader
	b []byte
}

func newMemBody(b []byte) memBody { return memBody{bytes.NewReader(b), b} }

func (memBody) Close() error { return nil }

// authorized guards a plain handler with the API's tokens.
func (s *Server) authorized(mutating bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r, mutating); err != nil {
			writeError(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// snapshotPath downloads the newest snapshot.
const snapshotPath = "/v1/operator/snapshot"

// errHandled says the handler wrote the response itself (forwarded it).
var errHandled = errors.New("server: response written")

func (s *Server) authorize(r *http.Request, mutating bool) error {
	if len(s.cfg.WriteTokens) == 0 && len(s.cfg.ReadTokens) == 0 {
		return nil // Insecure: validate refused this without the flag
	}
	header := r.Header.Get("Authorization")
	token, hasToken := bearerToken(header)
	if !hasToken || token == "" {
		if !mutating && s.cfg.AnonymousReads {
			return nil
		}
		if header != "" {
			return &api.Error{Status: http.StatusUnauthorized, Message: "the Authorization header is not \"Bearer <token>\": pass -token or set PAXCRON_TOKEN"}
		}
		return &api.Error{Status: http.StatusUnauthorized, Message: "this call needs a token: pass -token or set PAXCRON_TOKEN (Authorization: Bearer <token>)"}
	}
	if tokenIn(token, s.cfg.WriteTokens) {
		return nil
	}
	if tokenIn(token, s.cfg.ReadTokens) {
		if mutating {
			return &api.Error{Status: http.StatusForbidden, Message: "this token may only read: changes need a write token (api.write_tokens)"}
		}
		return nil
	}
	if !mutating && s.cfg.AnonymousReads {
		return nil
	}
	if by := r.Header.Get(forwardedHeader); by != "" {
		// The replica asked knew the token, the leader does not: their
		// tokens differ, as in the middle of a rotation. Found in review
		// (the operator's procedures): the answer named the client's
		// token alone, which the replica asked does take.
		return &api.Error{Status: http.StatusUnauthorized, Message: fmt.Sprintf("unknown token at the leader, replica %d, though replica %s, which forwarded the call, knows it: "+
			"the replicas' api.write_tokens and api.read_tokens differ (a token rotation half done?): add a token to every replica before clients use it, "+
			"and drop one only once no client does", s.cfg.ID, by)}
	}
	return &api.Error{Status: http.StatusUnauthorized, Message: "unknown token: check -token or PAXCRON_TOKEN against the server's api.write_tokens and api.read_tokens"}
}

// bearerToken returns the token of an Authorization header of the Bearer
// scheme, whose name HTTP takes in any case (RFC 9110, 11.1).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}

// tokenIn compares in constant time, so that timing tells nothing of the
// tokens.
func tokenIn(token string, tokens []string) bool {
	found := 0
	for _, t := range tokens {
		found |= subtle.ConstantTimeCompare([]byte(token), []byte(t))
	}
	return found == 1
}

// writeJSON answers with v as compact JSON: every answer is parsed by a
// program (the CLI, a script, jq) and indenting costs CPU on each one;
// ?pretty asks for indented JSON (writeIndented), as in Nomad's API.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeIndented(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var e *api.Error
	if !errors.As(err, &e) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			e = &api.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the request body is over %d bytes", api.MaxBodyBytes)}
		} else {
			e = &api.Error{Status: http.StatusInternalServerError, Message: err.Error()}
		}
	}
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, e)
}

func badRequest(format string, args ...any) error {
	return &api.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

// errNoLeader is a 503: nobody leads now, the leader is unknown or
// unreachable, or this replica leads but cannot serve yet.
func (s *Server) errNoLeader(leader paxos.ReplicaID) error {
	var msg string
	switch leader {
	case paxos.None:
		msg = "no leader right now (an election is under way, or too few replicas are up): retry in a second"
	case s.cfg.ID:
		msg = fmt.Sprintf("replica %d (this one) was just elected and cannot serve yet (it is catching up on the log or waiting for its lease): retry in a second", leader)
	default:
		msg = fmt.Sprintf("replica %d leads but this replica cannot reach its API: retry, or ask it directly", leader)
	}
	return &api.Error{Status: http.StatusServiceUnavailable, Message: msg, Leader: uint64(leader)}
}

// errForwardedHere is the 503 for a call another replica forwarded here,
// taking this one for the leader, when leadership has moved: calls are
// forwarded once, never on.
func errForwardedHere(leader paxos.ReplicaID) error {
	msg := "the replica this call was forwarded to no longer leads and no leader is known yet: retry in a second"
	if leader != paxos.None {
		msg = fmt.Sprintf("the replica this call was forwarded to no longer leads; replica %d does: retry", leader)
	}
	return &api.Error{Status: http.StatusServiceUnavailable, Message: msg, Leader: uint64(leader)}
}

// onLeader runs fn when this replica leads and holds the lease, and
// otherwise forwards the request to the leader (or answers 503). fn runs
// off the loop; what it reads or proposes goes through the node.
func (s *Server) onLeader(w http.ResponseWriter, r *http.Request, fn func(ctx context.Context) (any, error)) (any, error) {
	st := s.node.Status()
	if st.Role != paxos.Leader {
		return nil, s.forward(w, r, st.Leader)
	}
	out, err := fn(r.Context())
	if errors.Is(err, errNotLeading) || errors.Is(err, paxos.ErrNotLeader) || errors.Is(err, node.ErrDropped) {
		// Leadership moved while the call ran: what was proposed was not
		// chosen (ErrDropped) or not proposed at all.
		return nil, s.forward(w, r, s.node.Status().Leader)
	}
	return out, err
}

// forward passes r to the leader's API, in a bundle of forwarded calls
// (bundle.go) or, for a large body, proxied alone; or answers 503.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, leader paxos.ReplicaID) error {
	addr := s.peers.apiAddr(leader)
	switch {
	case r.Header.Get(forwardedHeader) != "" && leader != s.cfg.ID:
		return errForwardedHere(leader)
	case leader == paxos.None || leader == s.cfg.ID || addr == "":
		return s.errNoLeader(leader)
	}
	// A client that knows the leader's address sends its next calls there.
	w.Header().Set(api.LeaderHeader, strconv.FormatUint(uint64(leader), 10))
	if body, err := r.GetBody(); err == nil && r.ContentLength <= maxBundledBody {
		b, _ := io.ReadAll(body)
		call := bundleCall{Method: r.Method, Path: r.URL.RequestURI(), Auth: r.Header.Get("Authorization"),
			ContentType: r.Header.Get("Content-Type"), Body: b}
		// A call a bundle cannot carry (a HEAD, which the GET routes
		// serve; a path or a header over the bundle's limits) is proxied
		// alone: in a bundle, the leader would refuse it and every call
		// beside it (found in review: any reader could make other
		// clients' writes fail with a 502).
		if call.validate() == nil {
			a, queued, err := s.bundles.forward(r.Context(), call)
			switch {
			case err != nil:
				return err // the client is gone
			case queued && a.Status != 0:
				a.write(w)
				return errHandled
			}
		}
		// Not for a bundle, the queue is full, or the leader takes no
		// bundles: proxied alone.
	}
	target := &url.URL{Scheme: s.peerScheme(), Host: addr}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			if body, err := pr.In.GetBody(); err == nil {
				pr.Out.Body = body
			}
			pr.Out.Host = addr
			pr.Out.Header.Set(forwardedHeader, strconv.FormatUint(uint64(s.cfg.ID), 10))
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if api.NeverSent(err) {
				writeError(w, s.errNoLeader(leader))
				return
			}
			writeError(w, &api.Error{Status: http.StatusBadGateway, Leader: uint64(leader),
				Message: fmt.Sprintf("forwarding to the leader, replica %d at %s: %v", leader, addr, err)})
		},
	}
	proxy.Transport = s.proxy
	proxy.BufferPool = forwardBuffers
	proxy.ServeHTTP(w, r)
	return errHandled
}

// peerScheme is the scheme of other replicas' APIs: https with TLS
// between replicas.
func (s *Server) peerScheme() string {
	if s.apiTLS != nil {
		return "https"
	}
	return "http"
}

// forwardBuffers lends the proxy its copy buffers: without a pool it
// allocates 32 KiB for every forwarded answer, which was the largest
// allocation per write forwarded under concurrent writes (BenchmarkAPI's
// CPU profile: 3% of the CPU clearing fresh buffers, and the GC behind).
var forwardBuffers = &bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}}

// bufferPool is an httputil.BufferPool over a sync.Pool of *[]byte.
type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte { return *p.pool.Get().(*[]byte) }

func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// maxForwardIdleConns bounds the idle connections a replica keeps to the
// leader's API for the requests it forwards. With net/http's default of 2
// a follower opened and closed a connection for nearly every request it
// forwarded under concurrent writes (measured against etcd, issue 6: at
// 64 clients the leader spent 6% of its CPU closing connections), and
// with TLS paid a handshake for each.
const maxForwardIdleConns = 1024

// newProxyTransport is the transport every forwarded request shares, so
// that connections to the leader are kept and reused. With TLS, dialTLS
// gives the config of each dial (Server.dialerTLS: the files loaded
// last), and conns keeps the connections dialed for Server.retrust.
func newProxyTransport(dialTLS func() *tls.Config, conns *forwardConns) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = maxForwardIdleConns
	t.MaxIdleConnsPerHost = maxForwardIdleConns
	if dialTLS != nil {
		// Replicas reach each other directly, as the Paxos transport
		// dials them: a proxy from the environment (HTTPS_PROXY, set for
		// Nomad, say) would carry forwarded requests through a TLS
		// handshake of http.Transport's own, with a config fixed at
		// start, that a reload could not change.
		t.Proxy = nil
		t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialTLSFor(ctx, t, dialTLS(), conns, network, addr)
		}
	}
	return t
}

// dialTLSFor dials addr for t and runs the TLS handshake with a clone of
// base, naming the host dialed: crypto/tls checks the chain against
// base's RootCAs and the host, an IP address included, as http.Transport
// does when it runs TLS itself. That it no longer does with
// DialTLSContext set, nor bounds the handshake, nor offers HTTP/2: so
// the dial goes through t's DialContext (its timeouts), the handshake is
// bounded by t.TLSHandshakeTimeout, and it offers the protocols t set up
// for itself (h2 and http/1.1, as ForceAttemptHTTP2 makes it; the API
// answers in HTTP/1.1, as it serves no ALPN). The connection is kept in
// conns while open, for Server.retrust.
func dialTLSFor(ctx context.Context, t *http.Transport, base *tls.Config, conns *forwardConns, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	raw, err := t.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := base.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	// Set by http.Transport before its first dial, and not changed after.
	if t.TLSClientConfig != nil {
		cfg.NextProtos = slices.Clone(t.TLSClientConfig.NextProtos)
	}
	if t.TLSHandshakeTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.TLSHandshakeTimeout)
		defer cancel()
	}
	fc := conns.track(raw, addr)
	c := tls.Client(fc, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		fc.Close()
		return nil, err
	}
	if !conns.handshook(fc, c.ConnectionState()) {
		fc.Close()
		return nil, errForwardRetrusted
	}
	return c, nil
}

// errNotLeading: the replica stopped leading between the check and the
// call.
var errNotLeading = errors.New("server: not leading")

// readState runs fn on the loop over the cron state. Unless stale, it
// runs only on a leader that holds the lease and has applied everything
// chosen before its term (a linearizable read); otherwise it forwards.
func (s *Server) readState(w http.ResponseWriter, r *http.Request, fn func(m *state.Machine, now time.Time) (any, error)) (any, error) {
	stale := r.URL.Query().Get("stale") == "true"
	if !stale && s.node.Status().Role != paxos.Leader {
		return nil, s.forward(w, r, s.node.Status().Leader)
	}
	var out any
	var ferr error
	err := s.node.Cron(r.Context(), func(l *launcher.Launcher) {
		now := time.Now()
		if !stale && !s.node.ServesReads() {
			ferr = errNotLeading
			return
		}
		out, ferr = fn(l.Machine(), now)
	})
	if err != nil {
		return nil, err
	}
	if errors.Is(ferr, errNotLeading) {
		return nil, s.forward(w, r, s.node.Status().Leader)
	}
	return out, ferr
}

func (s *Server) handleStatus(_ http.ResponseWriter, r *http.Request) (any, error) {
	st := s.node.Status()
	out := api.Status{
		Replica: uint64(st.ID), ClusterID: st.ClusterID.String(), Role: roleName(st.Role), Leader: uint64(st.Leader), LeaderAPI: s.peers.apiAddr(st.Leader),
		Chosen: st.Chosen, Applied: st.Applied, Lease: api.Duration(st.Lease), Launching: st.Launching, Rebuilding: st.Rebuilding,
		StateHash: fmt.Sprintf("%016x", st.Hash), LastSnapshot: st.SnapshotIndex, Replicas: s.peers.list(),
		LastBackup: s.backups.lastInfo(),
		Version:    s.cfg.Version, Time: time.Now().UTC(),
	}
	if st.Leader == paxos.None {
		out.LeaderAPI = ""
	}
	out.SettingsCompared = s.gossipRef.Load() != nil
	for _, d := range s.settingsDiffer() {
		out.SettingsDiffer = append(out.SettingsDiffer, api.SettingsDiffer{Replica: d.Peer, Settings: d.Settings})
	}
	if st.Role == paxos.Leader {
		out.Ballot = fmt.Sprintf("%d.%d", st.Ballot.Round, st.Ballot.Replica)
	}
	err := s.node.Cron(r.Context(), func(l *launcher.Launcher) {
		out.Jobs = l.Machine().JobCount()
		out.Open = l.Machine().OpenCount()
	})
	return out, err
}

func roleName(r paxos.Role) string {
	switch r {
	case paxos.Leader:
		return "leader"
	case paxos.Candidate:
		return "candidate"
	case paxos.PreCandidate:
		return "pre-candidate"
	}
	return "follower"
}

func (s *Server) handleJobs(w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	limit := defaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > maxListLimit {
			return nil, badRequest("limit %q: want 1 to %d", v, maxListLimit)
		}
		limit = n
	}
	prefix, after := q.Get("prefix"), q.Get("after")
	return s.readState(w, r, func(m *state.Machine, _ time.Time) (any, error) {
		page, more := m.JobsPage(prefix, after, limit)
		out := api.Jobs{Jobs: make([]api.JobSummary, 0, len(page)), Index: m.LastSlot()}
		for _, j := range page {
			out.Jobs = append(out.Jobs, summaryOf(j))
		}
		if more {
			w.Header().Set(api.NextAfterHeader, page[len(page)-1].Name)
		}
		return out, nil
	})
}

func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := state.ValidName(name); err != nil {
		return nil, badRequest("%v", err)
	}
	next := defaultNext
	if v := r.URL.Query().Get("next"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > api.MaxNextLaunches {
			return nil, badRequest("next %q: want 0 to %d", v, api.MaxNextLaunches)
		}
		next = n
	}
	return s.readState(w, r, func(m *state.Machine, now time.Time) (any, error) {
		j, ok := m.Job(name)
		if !ok {
			return nil, &api.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no job %q", name)}
		}
		return jobOf(j, now, next)
	})
}

// handlePutJobs creates or replaces jobs from JSON (api.PutJobs), its
// msgpack (api.MsgpackContentType), or a file of cron blocks
// (Content-Type application/hcl; file() refused).
func (s *Server) handlePutJobs(w http.ResponseWriter, r *http.Request) (any, error) {
	req, err := decodePutJobs(r)
	if err != nil {
		return nil, err
	}
	if len(req.Jobs) == 0 {
		return nil, badRequest("no job to write")
	}
	if len(req.Jobs) > api.MaxJobsPerRequest {
		return nil, badRequest("%d jobs in one request; at most %d", len(req.Jobs), api.MaxJobsPerRequest)
	}
	specs := make([]state.JobSpec, len(req.Jobs))
	seen := make(map[string]bool, len(req.Jobs))
	for i, j := range req.Jobs {
		if seen[j.Name] {
			// Both would be written, the second over the first: as a
			// file's cron blocks, one name once (found in review).
			return nil, badRequest("job %q is given twice in one request", j.Name)
		}
		seen[j.Name] = true
		if err := api.CheckPathName(j.Name); err != nil {
			return nil, badRequest("job %v", err)
		}
		spec, err := j.Spec.JobSpec()
		if err != nil {
			return nil, badRequest("job %q: %v", j.Name, err)
		}
		if err := (state.PutJob{Name: j.Name, Spec: spec, At: time.Now()}).Validate(); err != nil {
			return nil, badRequest("job %q: %v", j.Name, trimState(err))
		}
		if err := firesSoonEnough(j.Name, spec, time.Now()); err != nil {
			return nil, err
		}
		specs[i] = spec
	}
	return s.onLeader(w, r, func(ctx context.Context) (any, error) {
		if s.nomad != nil && !req.SkipNomadCheck {
			checkCtx, cancel := context.WithTimeout(ctx, nomadCheckTimeout)
			defer cancel()
			for i, j := range req.Jobs {
				if err := s.nomad.CheckSpec(checkCtx, j.Name, specs[i]); err != nil {
					return nil, nomadCheckError(j.Name, err)
				}
			}
		}
		var out api.PutJobsResult
		for i, j := range req.Jobs {
			res, err := s.putJob(ctx, j, specs[i])
			if err != nil && len(out.Jobs) > 0 {
				return nil, partialPut(out.Jobs, len(req.Jobs), j.Name, err)
			}
			if err != nil {
				return nil, err
			}
			out.Jobs = append(out.Jobs, res)
		}
		return out, nil
	})
}

// firesSoonEnough refuses a schedule the state cannot follow
// (schedule.Followable: no launch within schedule.SearchYears, or two
// launches further apart): the state would hold the job with no next launch
// and never look again ("0 0 * 2 MON#5" next fires in 2044; found in
// review, accepted without a word). Checked here, not in the state, so
// that no command the log already holds is read differently.
func firesSoonEnough(name string, spec state.JobSpec, now time.Time) error {
	s, err := schedule.Parse(spec.Schedule, schedule.Options{JobName: name, TimeZone: spec.TimeZone})
	if err != nil {
		return badRequest("job %q: %v", name, err)
	}
	if err := s.Followable(now); err != nil {
		return badRequest("job %q: schedule %q %v", name, spec.Schedule, err)
	}
	return nil
}

// partialPut is the error of a POST /v1/jobs that wrote some of its jobs,
// one at a time, then failed on the next: it names what was written.
// It is never a 503 nor forwarded (onLeader's answer to a leader change),
// as those say nothing was done: a client that sent the request again
// would then get a 409 for its own write of a job it fixed the version of.
func partialPut(before []api.PutResult, total int, failed string, err error) error {
	var names []string
	for _, w := range before {
		if !w.Unchanged {
			names = append(names, fmt.Sprintf("%s (version %d)", w.Name, w.Version))
		}
	}
	if len(names) == 0 {
		// Nothing was written (the jobs before it were unchanged): the
		// failure is the request's own, a 503 as safe to retry as ever
		// (found in review: a 500).
		return err
	}
	done := fmt.Sprintf("%d of %d jobs were written before it: %s", len(names), total, strings.Join(names, ", "))
	if unchanged := len(before) - len(names); unchanged > 0 {
		done += fmt.Sprintf(" (and %d unchanged)", unchanged)
	}
	var e *api.Error
	if errors.As(err, &e) && e.Status != http.StatusServiceUnavailable {
		return &api.Error{Status: e.Status, Message: e.Message + "; " + done}
	}
	return &api.Error{Status: http.StatusInternalServerError,
		Message: fmt.Sprintf("job %q: %v; %s: send the rest again (jobs sent again with the same spec are left unchanged)", failed, err, done)}
}

func decodePutJobs(r *http.Request) (api.PutJobs, error) {
	var req api.PutJobs
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "", "application/json":
		body, err := bodyOf(r)
		if err != nil {
			return req, err
		}
		switch err := api.DecodeJSON(body, &req); {
		case errors.Is(err, api.ErrDuplicateKey):
			return req, badRequest("the body: %v", err)
		case errors.Is(err, io.EOF):
			return req, badRequest("the body is not a PutJobs JSON object: it is empty")
		case err != nil:
			return req, badRequest("the body is not a PutJobs JSON object: %v", err)
		}
	case api.MsgpackContentType:
		body, err := bodyOf(r)
		if err != nil {
			return req, err
		}
		switch err := api.DecodeMsgpack(body, &req); {
		case errors.Is(err, api.ErrDuplicateKey):
			return req, badRequest("the body: %v", err)
		case err != nil:
			return req, badRequest("the body is not a PutJobs msgpack map: %v", err)
		}
	case "application/hcl", "text/x-hcl", "text/plain":
		src, err := bodyOf(r)
		if err != nil {
			return req, err
		}
		crons, err := parseSubmitted(src)
		if err != nil {
			return req, badRequest("%v", err)
		}
		for _, c := range crons {
			req.Jobs = append(req.Jobs, api.PutJob{Name: c.Name, Spec: api.SpecOf(c.Spec)})
		}
		req.SkipNomadCheck = r.URL.Query().Get("skip_nomad_check") == "true"
	default:
		return req, &api.Error{Status: http.StatusUnsupportedMediaType, Message: fmt.Sprintf("Content-Type %q: send application/json (api.PutJobs), application/hcl (cron blocks) or %s (api.PutJobs)", ct, api.MsgpackContentType)}
	}
	return req, nil
}

// putJob writes one job on the leader: it reads the job's version (unless
// the request fixed one), leaves an identical spec alone, and proposes.
// The read and the proposal are one visit to the replica's loop
// (node.ProposeCommandFrom), not two.
func (s *Server) putJob(ctx context.Context, j api.PutJob, spec state.JobSpec) (api.PutResult, error) {
	// The job's spec and version before and after, copied out on the
	// loop without its launches (Machine.Job copies those, which a write
	// does not need).
	type seen struct {
		spec    state.JobSpec
		version uint64
		exists  bool
	}
	var cur, after seen
	at := time.Now()
	proposed, err := s.node.ProposeCommandFrom(ctx, func(l *launcher.Launcher) (state.Command, error) {
		cur.spec, cur.version, cur.exists = l.Machine().JobSpec(j.Name)
		ifVersion := cur.version
		if j.IfVersion != nil {
			ifVersion = *j.IfVersion
		}
		if cur.exists && ifVersion == cur.version && sameSpec(cur.spec, spec) {
			// Answered from this replica's state with nothing proposed:
			// only a leader that holds the lease and is caught up knows
			// that state is the cluster's (as readState requires). A
			// deposed leader that has not noticed yet would otherwise ack
			// a spec its successor has replaced.
			if !s.node.ServesReads() {
				return nil, errNotLeading
			}
			return nil, nil
		}
		return state.PutJob{Name: j.Name, Spec: spec, IfVersion: ifVersion, At: at}, nil
	}, func(l *launcher.Launcher) { after.spec, after.version, after.exists = l.Machine().JobSpec(j.Name) })
	switch {
	case !proposed && errors.Is(err, state.ErrInvalid):
		return api.PutResult{}, verdictError(j.Name, err)
	case !proposed && err != nil:
		return api.PutResult{}, err
	case !proposed:
		return api.PutResult{Name: j.Name, Version: cur.version, Unchanged: true, Resolved: resolved(j.Name, cur.spec)}, nil
	case err != nil:
		return api.PutResult{}, verdictError(j.Name, err)
	}
	return api.PutResult{Name: j.Name, Version: after.version, Created: !cur.exists, Resolved: resolved(j.Name, after.spec)}, nil
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	var ifVersion uint64
	if v := r.URL.Query().Get("if_version"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, badRequest("if_version %q is not a version", v)
		}
		ifVersion = n
	}
	return s.command(w, r, name, state.DeleteJob{Name: name, IfVersion: ifVersion})
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	return s.command(w, r, name, state.Pause{Name: name})
}

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	return s.command(w, r, name, state.Resume{Name: name})
}

func (s *Server) handleTrigger(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	var body api.Trigger
	if err := decodeOptional(r, &body); err != nil {
		return nil, err
	}
	// At is the leader's clock, taken on the leader (a forwarded request
	// gets the leader's time).
	return s.commandAt(w, r, name, func(now time.Time) state.Command {
		return state.Trigger{Name: name, At: now.Truncate(time.Second), Force: body.Force}
	})
}

func (s *Server) handleBackfill(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	var body api.Backfill
	if err := decodeOptional(r, &body); err != nil {
		return nil, err
	}
	if body.From.IsZero() || body.To.IsZero() || body.To.Before(body.From) {
		return nil, badRequest("a backfill needs from and to (RFC 3339), from not after to")
	}
	return s.commandAt(w, r, name, func(now time.Time) state.Command {
		return state.Backfill{Name: name, From: body.From.UTC(), To: body.To.UTC(), At: now, Force: body.Force}
	})
}

// bodyOf is r's body: in memory already when serve read it (whole and
// bounded), so not copied again.
func bodyOf(r *http.Request) ([]byte, error) {
	if mb, ok := r.Body.(memBody); ok {
		return mb.b, nil
	}
	return io.ReadAll(r.Body)
}

// decodeOptional decodes a JSON body if there is one (api.DecodeJSON).
func decodeOptional(r *http.Request, v any) error {
	body, err := bodyOf(r)
	if err != nil {
		return err
	}
	if err := api.DecodeJSON(body, v); err != nil && !errors.Is(err, io.EOF) {
		return badRequest("the body: %v", err)
	}
	return nil
}

func (s *Server) command(w http.ResponseWriter, r *http.Request, name string, c state.Command) (any, error) {
	return s.commandAt(w, r, name, func(time.Time) state.Command { return c })
}

// commandAt validates the command built for now and proposes it on the
// leader.
func (s *Server) commandAt(w http.ResponseWriter, r *http.Request, name string, build func(now time.Time) state.Command) (any, error) {
	if err := state.ValidName(name); err != nil {
		return nil, badRequest("%v", err)
	}
	if err := build(time.Now()).Validate(); err != nil {
		return nil, badRequest("%v", trimState(err))
	}
	return s.onLeader(w, r, func(ctx context.Context) (any, error) {
		if err := s.node.ProposeCommand(ctx, build(time.Now())); err != nil {
			return nil, verdictError(name, err)
		}
		return api.Done{Index: s.node.Status().Applied}, nil
	})
}

// verdictError turns the state's verdict on a command into an API error.
func verdictError(name string, err error) error {
	switch {
	case errors.Is(err, paxos.ErrNotLeader), errors.Is(err, node.ErrDropped):
		return err // onLeader forwards
	case errors.Is(err, state.ErrNotFound):
		return &api.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no job %q", name)}
	case errors.Is(err, state.ErrConflict):
		return &api.Error{Status: http.StatusConflict, Message: fmt.Sprintf("job %q changed since it was read (%s): read it again and retry", name, trimState(err))}
	case errors.Is(err, state.ErrDuplicate):
		return &api.Error{Status: http.StatusConflict, Message: fmt.Sprintf("job %q: %s", name, trimState(err))}
	case errors.Is(err, state.ErrLimit):
		return &api.Error{Status: http.StatusInsufficientStorage, Message: trimState(err)}
	case errors.Is(err, state.ErrInvalid):
		return badRequest("job %q: %s", name, trimState(err))
	case errors.Is(err, node.ErrOutcomeUnknown), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &api.Error{Status: http.StatusGatewayTimeout, Message: fmt.Sprintf("job %q: the write may or may not have been applied (%v): read the job to see", name, err)}
	}
	return err
}

// trimState drops the "state: invalid command: " prefix a user does not
// need.
func trimState(err error) string {
	msg := err.Error()
	for _, p := range []string{"state: invalid command: ", "state: "} {
		if rest, ok := strings.CutPrefix(msg, p); ok {
			return rest
		}
	}
	return msg
}

func nomadCheckError(name string, err error) error {
	if errors.Is(err, errNomadSpec) {
		return badRequest("job %q: %v", name, err)
	}
	return &api.Error{Status: http.StatusBadGateway, NotDone: true,
		Message: fmt.Sprintf("job %q: could not check it against Nomad (%v): nothing was written; retry, or write it with skip_nomad_check", name, err)}
}

// nomadCheckTimeout bounds the checks of a job write against Nomad: the
// Nomad client retries a refused connection until its context ends, and a
// request's has no deadline, so with Nomad down a write would get no
// answer at all (found in review: the CLI gave up after 30 s and said the
// write might have been done).
const nomadCheckTimeout = 10 * time.Second

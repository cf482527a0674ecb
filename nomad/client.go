package nomad

import (
	"cmp"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

// Client makes paxcron's calls to Nomad: dispatch, look-up, running, stop
// and the version check. Every call blocks until it is done or its
// context ends; a call whose outcome is unknown is retried, with the same
// idempotency token for a dispatch, within the context's deadline and
// RequestTimeout. Safe for concurrent use.
type Client struct {
	cfg Config
	api *api.Client
	// base is the URL the calls made outside the Go client (the batched
	// read-back) are sent to: cfg.Address, or http://127.0.0.1 for a unix
	// socket, which the transport dials whatever the URL's host.
	base   string
	prover *prover
	// calls is the HTTP transport of every call, which ReloadTLS
	// replaces.
	calls *reloadableTransport
	// slots holds a token per HTTP call in flight but the read-backs
	// (DispatchCalls at most), proofSlots one per read-back (ProofCalls
	// at most).
	slots, proofSlots callSlots

	dispatches      atomic.Uint64
	attempts        atomic.Uint64
	retries         atomic.Uint64
	repeatedTokens  atomic.Uint64
	phantoms        atomic.Uint64
	refusedButFound atomic.Uint64
}

// ClientStats counts what a Client did since it was created.
type ClientStats struct {
	// Dispatches counts Dispatch calls, DispatchAttempts the HTTP
	// dispatches they sent.
	Dispatches       uint64
	DispatchAttempts uint64
	// Retries counts attempts of any call made again after an unknown
	// outcome.
	Retries uint64
	// RepeatedTokens counts dispatch replies with an empty EvalID: the
	// token's child existed already.
	RepeatedTokens uint64
	// Phantoms counts dispatch replies naming a child that does not exist
	// (a concurrent dispatch with the token won); each was retried.
	Phantoms uint64
	// RefusedButFound counts refused dispatches whose token's child was
	// found by look-up (a parent stopped after the child was made).
	RefusedButFound uint64
	// ProofReads counts the batched read-backs of new children, Proved
	// the children they found.
	ProofReads, Proved uint64
	// LeaseEnded counts calls not sent because their leadership ended or
	// its lease lapsed while they waited for a slot; LeaseRanOut those
	// whose lease, as renewed, ended first (or their time to start,
	// half of the dispatcher's RequestTimeout).
	LeaseEnded, LeaseRanOut uint64
}

// New returns a Client for cfg, which it validates. It makes no call:
// use CheckVersion before relying on it.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr, base, err := newTLSTransport(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	calls := &reloadableTransport{}
	calls.current.Store(tr)
	// TLSConfig is left out: the API client reads it only when given no
	// HTTP client, and newTLSTransport applied it already.
	ac := &api.Config{Address: cfg.Address, SecretID: cfg.Token,
		HttpClient: &http.Client{Transport: apiTransport{calls}}}
	a, err := api.NewClient(ac)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	c := &Client{cfg: cfg, api: a, base: base, calls: calls, slots: newCallSlots(DispatchCalls, "calls to Nomad", cfg.CallTimeout, true),
		proofSlots: newCallSlots(ProofCalls, "read-backs from Nomad", cfg.CallTimeout, false)}
	c.prover = newProver(c.readChildren)
	return c, nil
}

// Config returns the client's configuration.
func (c *Client) Config() Config { return c.cfg }

// MemoryHorizon is Config.MemoryHorizon: the launcher's MemoryHorizon.
func (c *Client) MemoryHorizon() time.Duration { return c.cfg.MemoryHorizon() }

// Stats returns the client's counters.
func (c *Client) Stats() ClientStats {
	c.prover.mu.Lock()
	reads, proved := c.prover.reads, c.prover.proved
	c.prover.mu.Unlock()
	return ClientStats{
		Dispatches: c.dispatches.Load(), DispatchAttempts: c.attempts.Load(), Retries: c.retries.Load(),
		RepeatedTokens: c.repeatedTokens.Load(), Phantoms: c.phantoms.Load(), RefusedButFound: c.refusedButFound.Load(),
		ProofReads: reads, Proved: proved,
		LeaseEnded: c.slots.ended.Load(), LeaseRanOut: c.slots.ranOut.Load(),
	}
}

// API returns the Go API client the Client calls through, configured from
// the same Config, for the calls paxcron makes beside dispatching
// (registering a parent, parsing a jobspec).
func (c *Client) API() *api.Client { return c.api }

// Close closes the client's idle connections.
func (c *Client) Close() { c.api.Close() }

// scope is t's namespace and region, the Config's where t names none.
func (c *Client) scope(t state.Target) (namespace, region string) {
	namespace, region = t.Namespace, t.Region
	if namespace == "" {
		namespace = c.cfg.Namespace
	}
	if region == "" {
		region = c.cfg.Region
	}
	return namespace, region
}

func (c *Client) query(ctx context.Context, t state.Target) *api.QueryOptions {
	ns, region := c.scope(t)
	// AllowStale stays false: a follower's answer may miss a child the
	// leader just made.
	return (&api.QueryOptions{Namespace: ns, Region: region}).WithContext(ctx)
}

func (c *Client) write(ctx context.Context, t state.Target, token string) *api.WriteOptions {
	ns, region := c.scope(t)
	return (&api.WriteOptions{Namespace: ns, Region: region, IdempotencyToken: token}).WithContext(ctx)
}

// Dispatch dispatches l's parent job with l.Identity as the idempotency
// token and the child ID's prefix template, the job's meta with the
// paxcron_ keys, and its payload, and returns the child's ID once it has
// proved that the child exists: a reply with an empty EvalID is the
// token's stored child; any other is read back (in a batch with the
// children other workers need proved: prove.go), and one the read-back
// does not list (a concurrent dispatch with the token won, or the listing
// lags) is retried with the same token.
//
// Any other failure leaves the outcome unknown: the dispatch is retried
// with the same token, never another, with backoff, until it succeeds, is
// refused, or the deadline (ctx's, and RequestTimeout) passes. A refusal
// (a *CallError wrapping launcher.ErrRejected) is trusted only after a
// look-up finds no child with the token: Nomad checks the parent, the ACL
// and the meta before the token, so a dispatch against a parent stopped
// after the child was made is refused (a 500) although the child exists;
// then Dispatch returns that child.
func (c *Client) Dispatch(ctx context.Context, l Launch) (string, error) {
	c.dispatches.Add(1)
	subject := l.Target.NomadJob + " (identity " + l.Identity + ")"
	meta, err := DispatchMeta(l)
	if err == nil && l.Target.NomadJob == "" {
		err = errors.New("no parameterized job to dispatch")
	}
	if err != nil {
		return "", &CallError{Op: "dispatch", Subject: subject, Message: err.Error(), Permanent: true, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	var child string
	// mayLand: an earlier attempt of this call got no answer and may
	// still make the child. A refusal then (the parent stopped meanwhile)
	// is checked by a look-up made at once, which cannot see that child
	// yet: it must not be taken for "no child", so the outcome stays open
	// and the launcher looks again once such a dispatch has had time to
	// land (launcher.Config.MaxCallLatency).
	mayLand := false
	// sent: an attempt reached the network, so the dispatch may have
	// happened; while none did, a failure wraps launcher.ErrNotSent.
	sent := false
	err = c.retry(ctx, func(ctx context.Context) error {
		id, tried, err := c.dispatchOnce(ctx, l, meta, subject)
		child = id
		if tried && !neverSent(err) {
			sent = true
		}
		switch {
		case err == nil:
		case Permanent(err) && mayLand:
			return &CallError{Op: "dispatch", Subject: subject, Err: errMayLand,
				Message: err.Error() + "; but an earlier attempt got no answer and may still make the child, so the outcome is open"}
		case !Permanent(err) && !neverSent(err):
			mayLand = true
		}
		return err
	})
	if err != nil && !sent && !Permanent(err) {
		err = fmt.Errorf("%w: %w", launcher.ErrNotSent, err)
	}
	return child, err
}

var errMayLand = errors.New("nomad: refused after an attempt that may still land")

// neverSent reports a call that never reached Nomad: its connection
// could not be made.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// MaxCalls bounds the HTTP calls to Nomad a Client has in flight at once,
// the batched read-backs of new children (prove.go) included: well below
// Nomad's 100 connections per client address
// (limits.http_max_conns_per_client), however many namespaces the jobs
// use. A slot is held for the HTTP exchange alone, not while its caller
// waits for a read-back or a retry, so that in a herd the next dispatch
// leaves as soon as a reply comes in.
//
// ProofCalls of them are kept for the read-backs. A read-back sharing the
// slots with the dispatches queued behind every dispatch waiting for a
// slot, a few hundred in a herd; on an agent slowed by the children it
// starts, it waited past its call's timeout, proved nothing, and every
// dispatch of its batch was sent again, queueing more (issue 6: in a
// herd of 1,000 runnable children, 360 of 567 retries, and the last
// children 12-15 s late).
const (
	MaxCalls   = 64
	ProofCalls = 4
	// DispatchCalls is the share of every other call: dispatches,
	// look-ups, stops.
	DispatchCalls = MaxCalls - ProofCalls
)

// connsPerHost bounds the connections to Nomad a Client holds, idle ones
// included: one per call in flight. Nomad counts every connection from
// one address, idle ones too, and above limits.http_max_conns_per_client
// (100 by default) answers a new one with a 429 and closes it. Without
// the bound, a call that found no connection idle dialled a new one, and
// in a herd on a busy machine that was often: the connection a finished
// call leaves is put back idle by another goroutine, after the next call
// has looked. Idle connections piled up beside the calls in flight
// (65-101 open at once in TestConnectionsStayWithinMaxCalls; in a launch
// benchmark of 1,000 runnable children the agent refused 86, and the
// retries made the last children 13-15 s late). Bounded, such a call
// waits for the connection being put back. The Go API client's default
// (cleanhttp's: GOMAXPROCS+1 idle, 3 on two cores) would instead open and
// close a connection per call in a herd.
const connsPerHost = MaxCalls

// callSlots bounds calls in flight: a token per call.
type callSlots struct {
	tokens chan struct{}
	what   string // the calls, as a "not sent" error names them
	// timeout is CallTimeout: it bounds the exchange, from the moment the
	// call has its slot. Counted from before the wait, as it was, a call
	// queued behind a herd's dispatches had its time spent before it was
	// sent: 258 dispatches and 124 read-backs in four herds of 1,000
	// runnable children timed out unanswered and were sent again (issue
	// 6). The wait for a slot is bounded by the caller's deadline
	// (RequestTimeout) and, for a launcher's call, its lease (below).
	timeout time.Duration
	// leaseBound: no call starts past the request's start-by time (its
	// leader's lease end: withStartBy), though one started before runs
	// on. The read-backs are not bound so: they change nothing in Nomad,
	// and a batch runs on its first member's time for all its members.
	leaseBound bool
	// ended and ranOut count the calls not sent for their lease
	// (ClientStats.LeaseEnded, LeaseRanOut).
	ended, ranOut *atomic.Uint64
}

func newCallSlots(n int, what string, timeout time.Duration, leaseBound bool) callSlots {
	if n <= 0 || timeout <= 0 {
		panic(fmt.Sprintf("nomad: %d slots for %s with timeout %v", n, what, timeout))
	}
	return callSlots{tokens: make(chan struct{}, n), what: what, timeout: timeout, leaseBound: leaseBound,
		ended: new(atomic.Uint64), ranOut: new(atomic.Uint64)}
}

// startByKey keys a request's start-by time in its context.
type startByKey struct{}

// withStartBy marks ctx's calls as made under a leader's lease, which
// ends at startBy() as of the moment it is called (the lease may be
// renewed meanwhile, or the leadership end): none starts at or after it
// (the launcher's calls, made by the lease holder alone), but one started
// before may run on for its answer until ctx ends. A launcher request used to end at its lease end, 0.6-0.8 s
// after it was submitted: in a herd that slowed the agent's
// answers past that (0.6-1.5 s a dispatch with runnable children), calls
// were cut unanswered, their outcome open, and looked up 10 s later, the
// lookups cut likewise (issue 6).
func withStartBy(ctx context.Context, startBy func() time.Time) context.Context {
	return context.WithValue(ctx, startByKey{}, startBy)
}

func startByOf(ctx context.Context) (func() time.Time, bool) {
	f, ok := ctx.Value(startByKey{}).(func() time.Time)
	return f, ok
}

// errLeaseEnded: the request's start-by time passed before its call
// could be sent, and no later attempt can be.
var errLeaseEnded = errors.New("nomad: the lease the request was made under ended before its call was sent")

// acquire waits for a slot and returns the context of the call made in
// it, bounded by the slot's timeout from now, and the release that ends
// that context and frees the slot; call it once. An error means the call
// was not sent: ctx ended, or for a lease-bound call its start-by time
// passed, first.
func (s callSlots) acquire(ctx context.Context, op, subject string) (context.Context, func(), error) {
	startBy, bound := startByOf(ctx)
	bound = bound && s.leaseBound
	var timer *time.Timer
	var lease <-chan time.Time
	if bound {
		t := startBy()
		if !time.Now().Before(t) {
			return nil, nil, s.leaseEnded(op, subject, t)
		}
		timer = time.NewTimer(time.Until(t))
		defer timer.Stop()
		lease = timer.C
	}
	for {
		select {
		case s.tokens <- struct{}{}:
			if bound {
				if t := startBy(); !time.Now().Before(t) {
					// The leadership ended while the call waited.
					<-s.tokens
					return nil, nil, s.leaseEnded(op, subject, t)
				}
			}
			cctx, cancel := context.WithTimeout(ctx, s.timeout)
			return cctx, func() { cancel(); <-s.tokens }, nil
		case <-lease:
			t := startBy()
			if !time.Now().Before(t) {
				return nil, nil, s.leaseEnded(op, subject, t)
			}
			timer.Reset(time.Until(t)) // renewed since
		case <-ctx.Done():
			return nil, nil, &CallError{Op: op, Subject: subject, Err: context.Cause(ctx),
				Message: fmt.Sprintf("not sent: %d %s were in flight until the deadline", cap(s.tokens), s.what)}
		}
	}
}

// inSlot makes call in one of c's call slots, with the slot's context.
func (c *Client) inSlot(ctx context.Context, op, subject string, call func(context.Context) error) error {
	ctx, release, err := c.slots.acquire(ctx, op, subject)
	if err != nil {
		return err
	}
	defer release()
	return call(ctx)
}

// leaseEnded is the error of a call not sent because its start-by time,
// t, passed: zero if its leadership ended or its lease lapsed.
func (s callSlots) leaseEnded(op, subject string, t time.Time) error {
	if t.IsZero() {
		s.ended.Add(1)
	} else {
		s.ranOut.Add(1)
	}
	return &CallError{Op: op, Subject: subject, Err: errLeaseEnded,
		Message: fmt.Sprintf("not sent: the lease it was made under ended first (%d %s in flight)", cap(s.tokens), s.what)}
}

// pooledHTTPClient is cleanhttp's pooled client (what the API client uses
// by default) holding at most connsPerHost connections, all of which may
// stay idle, HTTP/1 only as the API client wants; TLS is configured on it
// after.
//
// It does not ask for compressed replies on its own (DisableCompression):
// the batched read-backs (prove.go) go out without Accept-Encoding. In a
// herd the agent's CPU is what bounds the launch rate, and a profile of
// the agent during 1,000 launches (issue 6) had a quarter of its CPU in
// gzip, mostly compressing those read-backs, whose replies cross a LAN.
// The Go API client asks for gzip on every call of its own, and Nomad
// compresses every reply asked so, however small; apiTransport takes the
// ask off.
//
// For a unix:///path address every connection dials the socket: the Go
// client sends its calls to http://127.0.0.1 then, and dials the socket
// only with the client it builds itself when given none (found in
// review: this one dialled TCP 127.0.0.1:80, and every call failed). base
// is where the calls made outside the Go client go.
func pooledHTTPClient(address string) (client *http.Client, base string) {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	dial, base := dialer.DialContext, strings.TrimSuffix(address, "/")
	if u, err := url.Parse(address); err == nil && u.Scheme == "unix" {
		socket := u.Path
		dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		}
		base = "http://127.0.0.1"
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dial,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   connsPerHost,
		MaxConnsPerHost:       connsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		DisableCompression:    true,
	}}, base
}

// dispatchOnce sends one dispatch and proves its child exists: an empty
// EvalID is the token's stored child; any other child the reply names is
// read back, in a batch with other workers' (prove.go). tried is false
// when it got no call slot, so nothing was sent.
func (c *Client) dispatchOnce(ctx context.Context, l Launch, meta map[string]string, subject string) (child string, tried bool, err error) {
	cctx, release, err := c.slots.acquire(ctx, "dispatch", subject)
	if err != nil {
		return "", false, err
	}
	child, err = c.dispatchInSlot(ctx, cctx, release, l, meta, subject)
	return child, true, err
}

// dispatchInSlot makes dispatchOnce's call in the slot it holds (cctx,
// released once the reply is in) and proves its child.
func (c *Client) dispatchInSlot(ctx, cctx context.Context, release func(), l Launch, meta map[string]string, subject string) (string, error) {
	c.attempts.Add(1)
	resp, _, err := c.api.Jobs().DispatchOpts(&api.DispatchOptions{
		JobID: l.Target.NomadJob, Meta: meta, Payload: l.Payload, IdPrefixTemplate: l.Identity,
	}, c.write(cctx, l.Target, l.Identity))
	release()
	if err != nil {
		e := callError("dispatch", subject, err)
		if e.Permanent && strings.Contains(e.Message, "unpermitted metadata keys") && strings.Contains(e.Message, MetaPrefix) {
			e.Message += fmt.Sprintf(" (the parent job must list %s, %s and %s in its parameterized block's meta_optional)",
				MetaIdentity, MetaJob, MetaScheduledAt)
		}
		return c.refused(ctx, l, e)
	}
	switch {
	case resp.DispatchedJobID == "":
		return "", &CallError{Op: "dispatch", Subject: subject, Status: 200, Message: "the reply names no child", Err: errors.New("empty DispatchedJobID")}
	case resp.EvalID == "":
		// Nomad found the token's child in its state and returned it.
		c.repeatedTokens.Add(1)
		return resp.DispatchedJobID, nil
	}
	if !isChildOf(resp.DispatchedJobID, l.Target.NomadJob, l.Identity) {
		return "", &CallError{Op: "dispatch", Subject: subject, Status: 200, Err: errPhantom,
			Message: fmt.Sprintf("the reply names child %s, which is not named after the token", resp.DispatchedJobID)}
	}
	ns, region := c.scope(l.Target)
	exists, err := c.prover.prove(ctx, proofScope{namespace: ns, region: region}, resp.DispatchedJobID)
	switch {
	case err != nil:
		// Unproved, whatever the error: even a refused read leaves the
		// dispatch's outcome open.
		ce := callError("dispatch", subject, err)
		ce.Message = "reading child " + resp.DispatchedJobID + " back: " + ce.Message
		ce.Permanent = false
		return "", ce
	case !exists:
		c.phantoms.Add(1)
		msg := fmt.Sprintf("the reply names child %s, which the read-back does not list (a concurrent dispatch with the token won); dispatching again with the same token", resp.DispatchedJobID)
		return "", &CallError{Op: "dispatch", Subject: subject, Status: 200, Message: msg, Err: errPhantom}
	}
	return resp.DispatchedJobID, nil
}

var errPhantom = errors.New("nomad: a dispatch reply named a child that does not exist")

// refused handles a failed dispatch: a retryable error is returned as it
// is; a refusal is confirmed by a look-up for the token's child.
func (c *Client) refused(ctx context.Context, l Launch, e *CallError) (string, error) {
	if !e.Permanent {
		return "", e
	}
	child, found, err := c.lookupOnce(ctx, l.Target, l.Identity)
	switch {
	case err == nil && found:
		c.refusedButFound.Add(1)
		return child, nil
	case err == nil:
		return "", e
	case Permanent(err):
		// Neither the dispatch nor the look-up is allowed: nobody can tell
		// with this token, and waiting will not change that. Concluding
		// the launch failed can misreport a child made before the refusal
		// (then the permissions changed), but never makes a second one.
		e.Message += "; and the look-up that would show no child exists was refused too: " + err.Error()
		return "", e
	default:
		// Not wrapping e: this error must not say "rejected".
		return "", &CallError{Op: "dispatch", Subject: e.Subject, Status: e.Status, Err: err,
			Message: fmt.Sprintf("refused (%s), but the look-up for a child made before failed: %v", e.Message, err)}
	}
}

// Lookup finds the child dispatched with token identity to parent
// t.NomadJob, asking the leader (not a stale follower): the /v1/jobs
// listing with prefix <parent>/dispatch-<identity>- and a filter on
// DispatchIdempotencyToken. Found is authoritative only for tokens younger
// than the memory horizon. A failed look-up is retried within the
// deadline.
func (c *Client) Lookup(ctx context.Context, t state.Target, identity string) (child string, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	err = c.retry(ctx, func(ctx context.Context) error {
		var err error
		child, found, err = c.lookupOnce(ctx, t, identity)
		return err
	})
	return child, found, err
}

func (c *Client) lookupOnce(ctx context.Context, t state.Target, identity string) (string, bool, error) {
	subject := t.NomadJob + " (identity " + identity + ")"
	if err := validIdentity(identity); err != nil {
		return "", false, &CallError{Op: "lookup", Subject: subject, Message: err.Error(), Permanent: true, Err: err}
	}
	cctx, release, err := c.slots.acquire(ctx, "lookup", subject)
	if err != nil {
		return "", false, err
	}
	q := c.query(cctx, t)
	q.Prefix = ChildPrefix(t.NomadJob, identity)
	q.Filter = tokenFilter(identity)
	jobs, _, err := c.api.Jobs().List(q)
	release()
	if err != nil {
		return "", false, callError("lookup", subject, err)
	}
	// The filter keeps the token's child; the name check keeps it even
	// from a server that ignored the filter. Before 1.11.2 one token could
	// make several children: the first made is the one.
	jobs = slices.DeleteFunc(jobs, func(j *api.JobListStub) bool { return !isChildOf(j.ID, t.NomadJob, identity) })
	if len(jobs) == 0 {
		return "", false, nil
	}
	first := slices.MinFunc(jobs, func(a, b *api.JobListStub) int { return cmp.Compare(a.CreateIndex, b.CreateIndex) })
	return first.ID, true, nil
}

// Running reports whether child (of t's namespace and region) is pending
// or running, for the forbid policy. Nomad's "dead" only says the
// scheduler is done with the job: a stopped child is dead at once while
// its task may still run, and a lost client's allocation is "unknown".
// So a dead child counts as running while any of its allocations is
// pending, running or unknown on its client. A child that is gone (404)
// is not running.
func (c *Client) Running(ctx context.Context, t state.Target, child string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	var running bool
	err := c.retry(ctx, func(ctx context.Context) error {
		var err error
		running, err = c.runningOnce(ctx, t, child)
		return err
	})
	return running, err
}

func (c *Client) runningOnce(ctx context.Context, t state.Target, child string) (bool, error) {
	ctx, release, err := c.slots.acquire(ctx, "running", child)
	if err != nil {
		return false, err
	}
	defer release()
	job, _, err := c.api.Jobs().Info(child, c.query(ctx, t))
	switch {
	case err != nil && notFound(err):
		return false, nil
	case err != nil:
		return false, callError("running", child, err)
	case job.Status == nil:
		return false, &CallError{Op: "running", Subject: child, Status: 200, Message: "the job has no status", Err: errors.New("nil Status")}
	case *job.Status == "pending" || *job.Status == "running":
		return true, nil
	}
	allocs, _, err := c.api.Jobs().Allocations(child, true, c.query(ctx, t))
	if err != nil {
		return false, callError("running", child, err)
	}
	for _, a := range allocs {
		switch a.ClientStatus {
		case api.AllocClientStatusPending, api.AllocClientStatusRunning, api.AllocClientStatusUnknown:
			return true, nil
		}
	}
	return false, nil
}

// Stop stops child (deregisters it without purging, so that its token
// and history stay until Nomad's GC), for the replace policy. A child
// that is gone or already stopped or dead counts as stopped. It does not
// wait for the child's tasks to exit.
func (c *Client) Stop(ctx context.Context, t state.Target, child string) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	return c.retry(ctx, func(ctx context.Context) error { return c.stopOnce(ctx, t, child) })
}

func (c *Client) stopOnce(ctx context.Context, t state.Target, child string) error {
	ctx, release, err := c.slots.acquire(ctx, "stop", child)
	if err != nil {
		return err
	}
	defer release()
	job, _, err := c.api.Jobs().Info(child, c.query(ctx, t))
	switch {
	case err != nil && notFound(err):
		return nil
	case err != nil:
		return callError("stop", child, err)
	case job.Stop != nil && *job.Stop, job.Status != nil && *job.Status == "dead":
		return nil
	}
	_, _, err = c.api.Jobs().Deregister(child, false, c.write(ctx, t, ""))
	if err != nil && !notFound(err) {
		return callError("stop", child, err)
	}
	return nil
}

// retry runs attempt until it succeeds or is refused, or ctx ends; each
// HTTP call of an attempt is bounded by CallTimeout from when it has its
// slot (callSlots.acquire). Between attempts it waits a
// doubling backoff with jitter, and it gives up rather than wait past
// ctx's deadline.
func (c *Client) retry(ctx context.Context, attempt func(context.Context) error) error {
	var last error
	for n := 0; ; n++ {
		if ctx.Err() != nil {
			return deadlineErr(ctx, last)
		}
		if n > 0 {
			c.retries.Add(1)
		}
		err := attempt(ctx)
		if err == nil || Permanent(err) {
			return err
		}
		if errors.Is(err, errLeaseEnded) {
			// No later attempt may start either. An earlier attempt's
			// error says more (Nomad's own message).
			if last != nil {
				return fmt.Errorf("%w (then %v)", last, err)
			}
			return err
		}
		if ctx.Err() != nil && last != nil {
			// Cut short by the deadline: the earlier attempt's error says
			// more (Nomad's own message). The outcome stays open either way.
			return deadlineErr(ctx, last)
		}
		last = err
		wait := c.backoff(n)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			return fmt.Errorf("%w (no time for another attempt before the deadline)", last)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return deadlineErr(ctx, last)
		case <-t.C:
		}
	}
}

// backoff is the wait after failed attempt n (from 0): RetryBackoffMin
// doubled per attempt up to RetryBackoffMax, then a random half of it
// taken off, so that callers that failed together do not retry together.
func (c *Client) backoff(n int) time.Duration {
	d := c.cfg.RetryBackoffMax
	if n < 30 && c.cfg.RetryBackoffMin<<n < d {
		d = c.cfg.RetryBackoffMin << n
	}
	return d - rand.N(d/2+1)
}

// maxErrorBody is how much of an error reply's body the client reads.
const maxErrorBody = 64 << 10

// apiTransport is the Go API client's transport. It does two things to
// the client's calls.
//
// It sends them without the client's "Accept-Encoding: gzip". Nomad's
// HTTP server compresses every reply a client accepts compressed, even a
// two-byte one (which comes out 26 bytes), with a new gzip writer for each,
// and the client opens a new gzip reader for each: in a herd of
// dispatches, whose replies are a few hundred bytes, that is CPU the
// agent and the leader share with the dispatches themselves, on nothing
// (BENCHMARKS.md, "Dispatch replies without gzip").
//
// It lets the client read at most maxErrorBody of an error reply's body,
// which it would otherwise copy into memory whole (and ungzip whole): a
// broken or hostile proxy in front of Nomad could make a replica hold any
// amount for one refused call (found in review). A gzipped error body (a
// proxy may compress unasked) is ungzipped here, within the bound, and
// handed on as plain text. A reply that succeeds is left alone: its size
// is the caller's to bound.
type apiTransport struct{ *reloadableTransport }

func (b apiTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Accept-Encoding") != "" {
		// A RoundTripper must not change the request it is given.
		r = r.Clone(r.Context())
		r.Header.Del("Accept-Encoding")
	}
	resp, err := b.reloadableTransport.RoundTrip(r)
	if err != nil || resp.StatusCode < http.StatusBadRequest {
		return resp, err
	}
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			body = strings.NewReader("(an error body that claims to be gzipped and is not)")
		} else {
			body = zr
		}
		resp.Header.Del("Content-Encoding")
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(body, maxErrorBody), resp.Body}
	resp.ContentLength = -1
	return resp, nil
}

package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"paxcron/internal/cafile"
)

// ClientConfig configures NewClient, as the CLI's -address, -token,
// -ca-cert flags and PAXCRON_ADDR, PAXCRON_TOKEN, PAXCRON_CACERT do.
type ClientConfig struct {
	// Address is a replica's API: http://host:port or https://host:port;
	// or several replicas' APIs separated by commas, for a client that
	// follows the leader and fails over (see Client).
	Address string
	// Token is the bearer token (empty: none).
	Token string
	// CACert is a PEM file to verify an https server with (empty: the
	// system's roots).
	CACert string
	// Timeout bounds each request (default 30 s).
	Timeout time.Duration
	// NoLeaderWait is how long a call answered 503 (no leader: an
	// election is under way) is retried before the 503 is returned; the
	// server answers 503 before it acts, so a retry cannot act twice.
	// Zero means DefaultNoLeaderWait; negative, no retry.
	NoLeaderWait time.Duration
	// Stream carries the calls over one connection to the replica (the
	// API stream, StreamPath) instead of a request each: for a program
	// that makes many calls at once. A server without the stream is
	// called over plain HTTP. Snapshot always uses a request of its own.
	Stream bool
}

// DefaultNoLeaderWait covers an election after a leader's crash (about a
// second with gossip, two without) several times over.
const DefaultNoLeaderWait = 10 * time.Second

// noLeaderRetryEvery is the pause between two tries while no replica
// leads: shorter than the server's Retry-After (1 s, the granularity of
// the header), since a new leader usually takes over within a second.
const noLeaderRetryEvery = 200 * time.Millisecond

// DefaultAddress is where the CLI looks without -address or PAXCRON_ADDR.
const DefaultAddress = "http://127.0.0.1:4750"

// Client calls a replica's API. Safe for concurrent use.
//
// Given several replicas, it sends every call to one of them: the first
// at the start, then the leader once it learns which replica that is.
// Any replica serves any call (a follower forwards to the leader what the
// leader must serve), so this is a shortcut, never a condition: a
// follower that forwards a call names the leader in its answer
// (LeaderHeader), and the client, which learns the replica ID behind each
// of its addresses from their status, sends its next calls there. A call
// that cannot reach its replica (the connection is refused or cannot be
// made, so nothing was sent) is sent to the next one, each replica at
// most once per call; a call that may have reached its replica is never
// sent again.
type Client struct {
	replicas     []*endpoint
	at           atomic.Int32 // the replica that calls go to, by index
	token        string
	http         *http.Client
	noLeaderWait time.Duration

	// With several replicas: the replica ID behind each address, as far
	// as known (0: not yet), and whether a search for the leader runs.
	idsMu   sync.Mutex
	ids     []uint64
	finding atomic.Bool

	// jsonJobs: a replica refused a job write in msgpack (a server from
	// before MsgpackContentType, 415), so job writes go as JSON from then
	// on.
	jsonJobs atomic.Bool
}

// endpoint is one replica the client calls.
type endpoint struct {
	base   *url.URL
	stream *streamClient // nil: a request per call
}

// MaxAddresses bounds the replicas a client is given: a cluster has three
// or five.
const MaxAddresses = 9

// NewClient checks cfg and returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Address == "" {
		cfg.Address = DefaultAddress
	}
	bases, err := parseAddresses(cfg.Address)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.NoLeaderWait == 0 {
		cfg.NoLeaderWait = DefaultNoLeaderWait
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// One Client shared by goroutines keeps a connection for each of up to
	// maxIdleConnsPerHost concurrent calls instead of net/http's 2, which
	// made every call past the second dial and close its own.
	transport.MaxIdleConnsPerHost = maxIdleConnsPerHost
	if cfg.CACert != "" {
		// One CA or several (during a CA move, the old and the new).
		pool, err := cafile.Pool(cfg.CACert)
		if err != nil {
			return nil, fmt.Errorf("api: reading the CA certificates: %w", err)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c := &Client{token: cfg.Token, http: &http.Client{Timeout: cfg.Timeout, Transport: transport},
		noLeaderWait: max(cfg.NoLeaderWait, 0), ids: make([]uint64, len(bases))}
	for _, u := range bases {
		ep := &endpoint{base: u}
		if cfg.Stream {
			ep.stream = &streamClient{base: u, token: cfg.Token, tls: transport.TLSClientConfig, timeout: cfg.Timeout}
		}
		c.replicas = append(c.replicas, ep)
	}
	return c, nil
}

// parseAddresses checks a comma-separated list of replicas' APIs.
func parseAddresses(list string) ([]*url.URL, error) {
	var bases []*url.URL
	seen := map[string]bool{}
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		u, err := url.Parse(a)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("api: address %q: want http://host:port or https://host:port, or several separated by commas", a)
		}
		key := u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/")
		if seen[key] {
			return nil, fmt.Errorf("api: address %q is given twice", a)
		}
		seen[key] = true
		bases = append(bases, u)
	}
	if len(bases) > MaxAddresses {
		return nil, fmt.Errorf("api: %d addresses: at most %d (a cluster has three or five replicas)", len(bases), MaxAddresses)
	}
	return bases, nil
}

// Address is the replica the client's calls go to now.
func (c *Client) Address() string { return c.replicas[c.at.Load()].base.Redacted() }

// Close closes the client's connections.
func (c *Client) Close() {
	for _, ep := range c.replicas {
		if ep.stream != nil {
			ep.stream.close()
		}
	}
	c.http.CloseIdleConnections()
}

// maxIdleConnsPerHost bounds the idle connections a Client keeps to its
// server.
const maxIdleConnsPerHost = 64

// ReadOptions qualify a read.
type ReadOptions struct {
	// Stale answers from the replica asked, without going through the
	// leader: faster, and possibly behind.
	Stale bool
}

func (o ReadOptions) query() url.Values {
	q := url.Values{}
	if o.Stale {
		q.Set("stale", "true")
	}
	return q
}

// Status returns the replica's view of the cluster. It is always served
// by the replica asked (given several, the one calls go to now).
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	return s, c.do(ctx, http.MethodGet, "/v1/status", nil, nil, &s)
}

// Jobs lists every job.
func (c *Client) Jobs(ctx context.Context, o ReadOptions) (Jobs, error) {
	return c.JobsWithPrefix(ctx, "", o)
}

// JobsWithPrefix lists every job whose name starts with prefix. The
// server answers a page at a time (listPage jobs); each page is a read of
// its own, and Index is the last page's.
func (c *Client) JobsWithPrefix(ctx context.Context, prefix string, o ReadOptions) (Jobs, error) {
	q := o.query()
	q.Set("limit", strconv.Itoa(listPage))
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	var all Jobs
	for {
		var page Jobs
		h, err := c.doHeader(ctx, http.MethodGet, "/v1/jobs", q, nil, &page)
		if err != nil {
			return Jobs{}, err
		}
		all.Jobs = append(all.Jobs, page.Jobs...)
		all.Index = page.Index
		next := h.Get(NextAfterHeader)
		if next == "" {
			return all, nil
		}
		if next <= q.Get("after") {
			return Jobs{}, fmt.Errorf("api: GET /v1/jobs: the server's next page starts after %q, not past %q", next, q.Get("after"))
		}
		q.Set("after", next)
	}
}

// NextAfterHeader, on a page of GET /v1/jobs, names its last job when
// more follow: the next page is asked with after= that name.
const NextAfterHeader = "X-Paxcron-Next-After"

// listPage is the page size JobsWithPrefix asks for (the server's most).
const listPage = 1000

// Job reads one job with its next launch times: next of them (0 to
// MaxNextLaunches; 0 lists none), or the server's default when next is
// negative.
func (c *Client) Job(ctx context.Context, name string, next int, o ReadOptions) (Job, error) {
	q := o.query()
	if next >= 0 {
		q.Set("next", strconv.Itoa(next))
	}
	var j Job
	return j, c.do(ctx, http.MethodGet, jobPath(name), q, nil, &j)
}

// PutJobs creates or replaces jobs.
//
// The jobs travel in msgpack (MsgpackContentType), or in JSON once a
// replica has answered that it does not take msgpack: a 415, sent before
// the server acts, so the write is sent again as JSON.
func (c *Client) PutJobs(ctx context.Context, req PutJobs) (PutJobsResult, error) {
	var r PutJobsResult
	err := c.do(ctx, http.MethodPost, "/v1/jobs", nil, req, &r)
	if StatusOf(err) == http.StatusUnsupportedMediaType && !c.jsonJobs.Swap(true) {
		err = c.do(ctx, http.MethodPost, "/v1/jobs", nil, req, &r)
	}
	return r, err
}

// DeleteJob deletes a job; its open launches are still concluded.
func (c *Client) DeleteJob(ctx context.Context, name string) (Done, error) {
	var d Done
	return d, c.do(ctx, http.MethodDelete, jobPath(name), nil, nil, &d)
}

// Pause pauses a job: its launches are recorded skipped until Resume.
func (c *Client) Pause(ctx context.Context, name string) (Done, error) {
	var d Done
	return d, c.do(ctx, http.MethodPost, jobPath(name)+"/pause", nil, nil, &d)
}

// Resume undoes Pause.
func (c *Client) Resume(ctx context.Context, name string) (Done, error) {
	var d Done
	return d, c.do(ctx, http.MethodPost, jobPath(name)+"/resume", nil, nil, &d)
}

// Trigger launches a job now, outside its schedule.
func (c *Client) Trigger(ctx context.Context, name string, t Trigger) (Done, error) {
	var d Done
	return d, c.do(ctx, http.MethodPost, jobPath(name)+"/trigger", nil, t, &d)
}

// Backfill relaunches the slots of [From, To] that did not run.
func (c *Client) Backfill(ctx context.Context, name string, b Backfill) (Done, error) {
	var d Done
	return d, c.do(ctx, http.MethodPost, jobPath(name)+"/backfill", nil, b, &d)
}

// Snapshot downloads the replica's newest snapshot (the log's state at
// its index), as `operator snapshot save` writes it to a file.
func (c *Client) Snapshot(ctx context.Context, w io.Writer) (index uint64, err error) {
	resp, err := c.sendVia(ctx, false, http.MethodGet, "/v1/operator/snapshot", nil, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	index, _ = strconv.ParseUint(resp.Header.Get("X-Paxcron-Index"), 10, 64)
	if _, err := io.Copy(w, resp.Body); err != nil {
		return 0, fmt.Errorf("api: reading the snapshot: %w", err)
	}
	return index, nil
}

// BackupNow has the leader upload its state to the backup target now.
func (c *Client) BackupNow(ctx context.Context) (BackupInfo, error) {
	var b BackupInfo
	return b, c.do(ctx, http.MethodPost, "/v1/operator/backup", nil, nil, &b)
}

func jobPath(name string) string { return "/v1/jobs/" + url.PathEscape(name) }

func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	_, err := c.doHeader(ctx, method, path, q, in, out)
	return err
}

// doHeader is do, and the answer's header.
func (c *Client) doHeader(ctx context.Context, method, path string, q url.Values, in, out any) (http.Header, error) {
	resp, err := c.send(ctx, method, path, q, in)
	if err != nil {
		return nil, err
	}
	return resp.Header, decodeAnswer(resp, method, path, out)
}

// decodeAnswer reads a successful answer's JSON into out and closes it.
func decodeAnswer(resp *http.Response, method, path string, out any) error {
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("api: %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// send makes the request and returns a 2xx response; any other status is
// an *Error. A 503 (no leader) is retried for up to the client's
// NoLeaderWait, or until ctx ends.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, in any) (*http.Response, error) {
	return c.sendVia(ctx, true, method, path, q, in)
}

// sendVia is send, over the stream when the client has one and
// viaStream.
func (c *Client) sendVia(ctx context.Context, viaStream bool, method, path string, q url.Values, in any) (*http.Response, error) {
	deadline := time.Now().Add(c.noLeaderWait)
	unreached := 0 // replicas this call could not reach
	for {
		i := int(c.at.Load())
		ep := c.replicas[i]
		var resp *http.Response
		var err error
		if viaStream && ep.stream != nil && !ep.stream.refused.Load() {
			resp, err = c.sendStreamed(ctx, ep, method, path, q, in)
			if errors.Is(err, errNoStream) || errors.Is(err, errNotStreamed) {
				resp, err = c.sendOnce(ctx, ep, method, path, q, in)
			}
		} else {
			resp, err = c.sendOnce(ctx, ep, method, path, q, in)
		}
		if len(c.replicas) > 1 {
			switch {
			case err == nil:
				c.follow(i, resp.Header)
			case NeverSent(err) && unreached < len(c.replicas)-1:
				// Nothing left the client: the next replica takes the
				// call, and the leader is looked for again.
				unreached++
				c.at.CompareAndSwap(int32(i), int32((i+1)%len(c.replicas)))
				c.findLeader()
				continue
			case StatusOf(err) == http.StatusServiceUnavailable:
				c.findLeader()
			}
		}
		if StatusOf(err) != http.StatusServiceUnavailable || time.Now().Add(noLeaderRetryEvery).After(deadline) {
			return resp, err
		}
		t := time.NewTimer(noLeaderRetryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// NeverSent reports an error of a call that never left its sender: the
// connection could not be made. Such a call can go elsewhere, or be
// answered 503 by a replica that forwards it, without any risk of acting
// twice.
func NeverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// LeaderHeader, on an answer that a follower forwarded to the leader,
// is the leader's replica ID.
const LeaderHeader = "X-Paxcron-Leader"

// follow moves the client's calls to the leader when replica i's answer
// names another replica as leader, once the client knows its address.
func (c *Client) follow(i int, h http.Header) {
	v := h.Get(LeaderHeader)
	if v == "" {
		return
	}
	leader, err := strconv.ParseUint(v, 10, 64)
	if err != nil || leader == 0 {
		return
	}
	c.idsMu.Lock()
	at := slices.Index(c.ids, leader)
	c.idsMu.Unlock()
	if at < 0 {
		c.findLeader()
		return
	}
	if at != i {
		c.at.CompareAndSwap(int32(i), int32(at))
	}
}

// findStatusTimeout bounds each status call of a search for the leader.
const findStatusTimeout = 2 * time.Second

// findLeader asks every replica's status, in the background, to learn
// the replica ID behind each address and which one leads; the client's
// calls then go to the leader. At most one search runs at a time.
func (c *Client) findLeader() {
	if !c.finding.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.finding.Store(false)
		statuses := make([]Status, len(c.replicas))
		var wg sync.WaitGroup
		for i, ep := range c.replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), findStatusTimeout)
				defer cancel()
				if resp, err := c.sendOnce(ctx, ep, http.MethodGet, "/v1/status", nil, nil); err == nil {
					_ = decodeAnswer(resp, http.MethodGet, "/v1/status", &statuses[i])
				}
			}()
		}
		wg.Wait()
		c.idsMu.Lock()
		for i, st := range statuses {
			if st.Replica != 0 {
				c.ids[i] = st.Replica
			}
		}
		c.idsMu.Unlock()
		for i, st := range statuses {
			// Only a replica's own word that it leads moves the calls
			// here: a follower's view of the leader may be an election
			// old.
			if st.Role == "leader" && st.Leader == st.Replica {
				c.at.Store(int32(i))
				return
			}
		}
	}()
}

func (c *Client) sendOnce(ctx context.Context, ep *endpoint, method, path string, q url.Values, in any) (*http.Response, error) {
	u := *ep.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	var body io.Reader
	b, contentType, err := c.requestBody(in)
	if err != nil {
		return nil, err
	}
	if in != nil {
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("api: %s %s: %w", method, u.Redacted(), err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	return nil, errorOf(resp)
}

// requestBody encodes a call's body (nil: none) and names its type: a
// job write in msgpack unless a replica refused it, any other in JSON.
func (c *Client) requestBody(in any) ([]byte, string, error) {
	if in == nil {
		return nil, "", nil
	}
	if _, jobs := in.(PutJobs); jobs && !c.jsonJobs.Load() {
		b, err := EncodeMsgpack(in)
		return b, MsgpackContentType, err
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, "", fmt.Errorf("api: encoding the request: %w", err)
	}
	return b, "application/json", nil
}

// sendStreamed is sendOnce over the client's stream.
func (c *Client) sendStreamed(ctx context.Context, ep *endpoint, method, path string, q url.Values, in any) (*http.Response, error) {
	call := StreamCall{Method: method, Path: path}
	if len(q) > 0 {
		call.Path += "?" + q.Encode()
	}
	if in != nil {
		var err error
		if call.Body, call.ContentType, err = c.requestBody(in); err != nil {
			return nil, err
		}
	}
	if call.validateContent() != nil {
		// Over HTTP, where the server refuses it alone with the status
		// it deserves (a body over MaxBodyBytes: 413); found in review,
		// sent on the stream, it closed the stream and failed every call
		// beside it.
		return nil, errNotStreamed
	}
	ctx, cancel := context.WithTimeout(ctx, ep.stream.timeout)
	defer cancel()
	a, err := ep.stream.call(ctx, call)
	if err != nil {
		if errors.Is(err, errNoStream) || StatusOf(err) != 0 {
			return nil, err
		}
		return nil, fmt.Errorf("api: %s %s: %w", method, path, err)
	}
	resp := &http.Response{StatusCode: a.Status, Header: a.Header, Body: io.NopCloser(bytes.NewReader(a.Body))}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	return nil, errorOf(resp)
}

// errorOf is the *Error of a response that is not a success; it closes
// the response's body.
func errorOf(resp *http.Response) error {
	defer resp.Body.Close()
	e := &Error{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, e) != nil || e.Message == "" {
		e.Message = strings.TrimSpace(string(b))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		if e.Message == "" {
			// A status net/http has no text for, and an empty body.
			e.Message = "the server answered without a message"
		}
	}
	return e
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

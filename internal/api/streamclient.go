package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"paxcron/internal/hoptrace"
)

// streamClient keeps a Client's stream to its replica: dialled on the
// first call, and again after it fails or the server lets it go.
type streamClient struct {
	base    *url.URL
	token   string
	tls     *tls.Config
	timeout time.Duration

	mu      sync.Mutex
	cur     *streamConn
	refused atomic.Bool // the server has no stream: plain HTTP from then on
}

// errNoStream: the server answered the upgrade 404 (a server from before
// the stream); the Client falls back to a request per call.
var errNoStream = errors.New("api: the server has no API stream")

// errNotStreamed: a call the stream does not carry (StreamCall.Validate
// refuses it), sent over HTTP instead.
var errNotStreamed = errors.New("api: a call the stream does not carry")

// errStreamRetry: the call was not served (sent after the server's
// LastID, or never written): it can be sent again.
var errStreamRetry = errors.New("api: the stream was let go before the call was served")

// maxStreamTries bounds the connections one call is sent on, each time
// because the one before let it go unserved.
const maxStreamTries = 3

// call sends c and waits for its answer.
func (sc *streamClient) call(ctx context.Context, c StreamCall) (StreamAnswer, error) {
	for try := 1; ; try++ {
		conn, err := sc.conn(ctx)
		if err != nil {
			return StreamAnswer{}, err
		}
		a, err := conn.call(ctx, c)
		if !errors.Is(err, errStreamRetry) || try == maxStreamTries {
			return a, err
		}
	}
}

// conn returns the stream, dialling it if there is none or it failed.
func (sc *streamClient) conn(ctx context.Context) (*streamConn, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.cur != nil && sc.cur.usable() {
		return sc.cur, nil
	}
	conn, err := dialStream(ctx, sc.base, sc.token, sc.tls, sc.timeout)
	if err != nil {
		if errors.Is(err, errNoStream) {
			sc.refused.Store(true)
		}
		return nil, err
	}
	sc.cur = conn
	return conn, nil
}

func (sc *streamClient) close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.cur != nil {
		sc.cur.fail(errors.New("api: the client was closed"))
		sc.cur = nil
	}
}

// dialStream connects to base's replica and upgrades the connection.
func dialStream(ctx context.Context, base *url.URL, token string, tlsConf *tls.Config, timeout time.Duration) (*streamConn, error) {
	host := base.Host
	if base.Port() == "" {
		host = net.JoinHostPort(base.Hostname(), map[string]string{"http": "80", "https": "443"}[base.Scheme])
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("api: opening a stream to %s: %w", base.Redacted(), err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(deadline)
	}
	if base.Scheme == "https" {
		conf := &tls.Config{MinVersion: tls.VersionTLS12}
		if tlsConf != nil {
			conf = tlsConf.Clone()
		}
		conf.ServerName = base.Hostname()
		tc := tls.Client(nc, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("api: opening a stream to %s: %w", base.Redacted(), err)
		}
		nc = tc
	}
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + StreamPath
	u.RawPath, u.RawQuery = "", ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("api: %w", err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", StreamProtocol)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	resp, err := func() (*http.Response, error) {
		if err := req.Write(nc); err != nil {
			return nil, err
		}
		return http.ReadResponse(br, req)
	}()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("api: opening a stream to %s: %w", base.Redacted(), err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer nc.Close()
		if resp.StatusCode == http.StatusNotFound {
			return nil, errNoStream
		}
		return nil, errorOf(resp)
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), StreamProtocol) {
		nc.Close()
		return nil, fmt.Errorf("api: opening a stream to %s: the server upgraded to %q, not %q", base.Redacted(), resp.Header.Get("Upgrade"), StreamProtocol)
	}
	_ = nc.SetDeadline(time.Time{})
	c := &streamConn{nc: nc, bw: bufio.NewWriterSize(DeadlineWriter{Conn: nc, Timeout: timeout}, 64<<10), pending: map[uint64]chan streamResult{}}
	go c.read(br)
	return c, nil
}

// streamConn is one upgraded connection and the calls in flight on it.
type streamConn struct {
	nc net.Conn

	// Calls are written in turn; the last writer of a burst flushes what
	// all of them wrote, in one write to the socket (Burst).
	burst  Burst
	bw     *bufio.Writer
	frame  []byte
	nextID uint64

	frames atomic.Uint64 // answers read so far

	mu      sync.Mutex
	pending map[uint64]chan streamResult
	err     error  // set once: no call is sent from then on
	lastID  uint64 // when err is set by the server: the last call it serves
	// retired: a call timed out with nothing read since it was sent. A
	// replica that vanished without closing (a host lost, a partition)
	// leaves the connection open until TCP gives up, many minutes on;
	// the calls in flight keep their own timeouts, but no new call is
	// sent, and the connection closes once none is left. Found in
	// review: every later call went to the silent replica and timed out
	// in turn, where a request per call moved on after one.
	retired bool
}

// errRetired: a call found the connection retired before it was written.
var errRetired = errors.New("api: the stream fell silent")

type streamResult struct {
	a   StreamAnswer
	err error
}

func (c *streamConn) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && !c.retired
}

// call sends sc and waits for its answer.
func (c *streamConn) call(ctx context.Context, sc StreamCall) (StreamAnswer, error) {
	hoptrace.Mark(hoptrace.ClientCall, 0)
	done := make(chan streamResult, 1)
	c.burst.Lock()
	c.nextID++
	sc.ID = c.nextID
	c.mu.Lock()
	err := c.err
	if err == nil && c.retired {
		err = errRetired
	}
	if err == nil {
		c.pending[sc.ID] = done
	}
	c.mu.Unlock()
	if err == nil {
		c.frame, err = AppendStreamCall(c.frame[:0], &sc)
		if err != nil {
			c.forget(sc.ID, false)
		} else if _, werr := c.bw.Write(c.frame); werr != nil {
			c.fail(werr)
		}
	} else {
		// Never written: another connection can take it.
		err = fmt.Errorf("%w: %v", errStreamRetry, err)
	}
	if len(c.frame) > 64<<10 {
		c.frame = nil // not kept for every call after one large body
	}
	if werr := c.burst.Unlock(c.flush); werr != nil {
		c.fail(werr)
	}
	hoptrace.Mark(hoptrace.ClientFlushed, 0)
	if err != nil {
		return StreamAnswer{}, err
	}
	framesAtSend := c.frames.Load()
	select {
	case r := <-done:
		hoptrace.Mark(hoptrace.ClientDone, 0)
		return r.a, r.err
	case <-ctx.Done():
		silent := errors.Is(ctx.Err(), context.DeadlineExceeded) && c.frames.Load() == framesAtSend
		c.forget(sc.ID, silent)
		return StreamAnswer{}, ctx.Err()
	}
}

// forget drops a call that will not be answered to its caller; silent:
// nothing was read while it waited, so the connection is retired.
func (c *streamConn) forget(id uint64, silent bool) {
	c.mu.Lock()
	delete(c.pending, id)
	if silent {
		c.retired = true
	}
	drained := c.retired && len(c.pending) == 0
	c.mu.Unlock()
	if drained {
		c.nc.Close() // the reader fails and sets err
	}
}

// flush writes the calls buffered; under the burst's lock.
func (c *streamConn) flush() error {
	if c.bw.Buffered() == 0 {
		return nil
	}
	return c.bw.Flush()
}

// fail ends the connection: every call in flight gets err, as its
// outcome is unknown (it may have been served).
func (c *streamConn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	for id, done := range c.pending {
		done <- streamResult{err: fmt.Errorf("api: the stream to the server failed before call %d was answered (it may or may not have been served): %w", id, err)}
		delete(c.pending, id)
	}
	c.mu.Unlock()
	c.nc.Close()
}

// read hands each answer to its call until the connection ends.
func (c *streamConn) read(br *bufio.Reader) {
	var buf []byte
	for {
		var err error
		buf, err = ReadStreamFrame(br, buf, MaxStreamAnswerBytes)
		hoptrace.Mark(hoptrace.ClientFrameRead, 0)
		if err != nil {
			c.fail(err)
			return
		}
		c.frames.Add(1)
		a, err := DecodeStreamAnswer(buf)
		hoptrace.Mark(hoptrace.ClientAnswer, 0)
		if err != nil {
			c.fail(err)
			return
		}
		if len(buf) > 1<<20 {
			buf = nil
		}
		if a.ID == 0 {
			c.letGo(a)
			continue
		}
		c.mu.Lock()
		done, ok := c.pending[a.ID]
		delete(c.pending, a.ID)
		drained := c.retired && len(c.pending) == 0
		c.mu.Unlock()
		if ok {
			done <- streamResult{a: a}
		}
		if drained {
			c.fail(errRetired)
			return
		}
	}
}

// letGo takes the server's word that it serves no call after a.LastID:
// those are answered errStreamRetry (or the connection's error, when
// the server closes it for one) and the connection takes no more.
func (c *streamConn) letGo(a StreamAnswer) {
	var err error = errStreamRetry
	if a.Status != 0 {
		err = errorOf(&http.Response{StatusCode: a.Status, Header: a.Header, Body: io.NopCloser(bytes.NewReader(a.Body))})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err, c.lastID = err, a.LastID
	}
	for id, done := range c.pending {
		if id > a.LastID {
			done <- streamResult{err: err}
			delete(c.pending, id)
		}
	}
}

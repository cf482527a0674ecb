package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"paxcron/internal/api"
	"paxcron/internal/hoptrace"
)

// The API stream (api.StreamPath; the protocol is described in
// internal/api): a client's calls arrive as frames on one upgraded
// connection and each is served by the API's handlers exactly as if it
// had come as a request of its own, with the connection's token. What it
// saves is the request and the response each call would otherwise write
// and read on its own connection: answers that are ready together leave
// in one write.
const (
	// maxStreams bounds the streams a replica serves at once.
	maxStreams = 1024
	// streamIdle closes a stream that sends no call for that long.
	streamIdle = 2 * time.Minute
	// streamLinger bounds the wait, after a stream's last answer, for
	// its client to close (see apiStream.finish).
	streamLinger = 5 * time.Second
)

// streamWriteTimeout bounds one write of answers to a client that reads
// none; a variable for tests.
var streamWriteTimeout = 30 * time.Second

// streams are the replica's open streams, so that a shutdown can let
// them go (the HTTP server no longer knows of a hijacked connection).
type streams struct {
	mu      sync.Mutex
	open    map[*apiStream]struct{}
	closing bool
	wg      sync.WaitGroup

	opened atomic.Int64 // streams opened, for metrics
	calls  atomic.Int64 // calls read
}

func (ss *streams) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.open)
}

func (ss *streams) add(st *apiStream) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch {
	case ss.closing:
		return &api.Error{Status: http.StatusServiceUnavailable, Message: "the replica is shutting down: open the stream on another replica"}
	case len(ss.open) >= maxStreams:
		return &api.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("the replica serves %d streams already: retry later, or call without a stream", maxStreams)}
	}
	if ss.open == nil {
		ss.open = map[*apiStream]struct{}{}
	}
	ss.open[st] = struct{}{}
	ss.wg.Add(1)
	ss.opened.Add(1)
	return nil
}

// attach gives st its connection, unless the replica is shutting down.
func (ss *streams) attach(st *apiStream, nc net.Conn) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	st.nc = nc
	return !ss.closing
}

func (ss *streams) remove(st *apiStream) {
	ss.mu.Lock()
	delete(ss.open, st)
	ss.mu.Unlock()
	ss.wg.Done()
}

// letGo has every stream stop reading calls, answer those it read, tell
// its client which was the last, and close; it waits for them within
// ctx.
func (ss *streams) letGo(ctx context.Context) error {
	ss.mu.Lock()
	ss.closing = true
	for st := range ss.open {
		if st.nc != nil {
			st.letGo()
		}
	}
	ss.mu.Unlock()
	done := make(chan struct{})
	go func() { ss.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("server: streams still open at shutdown: %w", ctx.Err())
	}
}

// closeAll closes every stream at once, as a crash would.
func (ss *streams) closeAll() {
	ss.mu.Lock()
	ss.closing = true
	for st := range ss.open {
		if st.nc != nil {
			st.nc.Close()
		}
	}
	ss.mu.Unlock()
}

// handleStream upgrades a connection to the API stream. Any API token
// opens one; each call then needs what it would need over HTTP.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	if err := s.authorize(r, false); err != nil {
		writeError(w, err)
		return
	}
	if !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), api.StreamProtocol) {
		w.Header().Set("Upgrade", api.StreamProtocol)
		w.Header().Set("Connection", "Upgrade")
		writeError(w, &api.Error{Status: http.StatusUpgradeRequired,
			Message: fmt.Sprintf("%s is the API stream: send Connection: Upgrade and Upgrade: %s", api.StreamPath, api.StreamProtocol)})
		return
	}
	st := &apiStream{s: s, auth: r.Header.Get("Authorization"), remote: r.RemoteAddr,
		slots: make(chan struct{}, api.MaxStreamInFlight)}
	if err := s.streams.add(st); err != nil {
		writeError(w, err)
		return
	}
	defer s.streams.remove(st)
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, fmt.Errorf("server: taking over the connection for a stream: %w", err))
		return
	}
	if !s.streams.attach(st, nc) {
		nc.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	// net/http's writer is 4 KiB: answers flushed together take more.
	st.bw = bufio.NewWriterSize(api.DeadlineWriter{Conn: nc, Timeout: streamWriteTimeout}, 32<<10)
	_, _ = st.bw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + api.StreamProtocol + "\r\n\r\n")
	if err := st.flush(); err != nil {
		nc.Close()
		return
	}
	st.serve(brw.Reader)
}

// headerHas says whether h's field name lists token (case-insensitive).
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// apiStream is one client's stream.
type apiStream struct {
	s      *Server
	nc     net.Conn
	auth   string
	remote string
	slots  chan struct{} // a call in flight holds one
	calls  sync.WaitGroup

	// Answers are written in turn; the last writer of a burst flushes
	// them all in one write (api.Burst).
	burst api.Burst
	bw    *bufio.Writer
	frame []byte

	goingAway atomic.Bool
	lastID    uint64 // the reader's
}

// letGo stops the reader (it then says goodbye); under streams.mu.
func (st *apiStream) letGo() {
	st.goingAway.Store(true)
	_ = st.nc.SetReadDeadline(time.Now())
}

// serve reads calls until the client leaves, the stream is let go or a
// frame is bad, then answers what it read and closes the connection.
func (st *apiStream) serve(br *bufio.Reader) {
	ctx, cancel := context.WithCancel(st.s.ctx)
	defer cancel()
	bye := st.read(ctx, br)
	if bye == nil {
		// The client is gone, as a closed HTTP connection cancels its
		// request: the calls under way are told.
		cancel()
	} else {
		st.write(*bye)
	}
	st.calls.Wait()
	st.finish(bye != nil)
}

// finish closes the connection; answered: the client is still there and
// has been told the last call served. Then the writing side closes
// first, and what the client still sends is read and dropped until it
// closes too (or streamLinger passes): closed with the client's calls
// unread, the socket would send a reset, which throws away what of the
// last answers the client's window had not yet let out. Found in review.
func (st *apiStream) finish(answered bool) {
	defer st.nc.Close()
	cw, ok := st.nc.(interface{ CloseWrite() error })
	if !answered || !ok || cw.CloseWrite() != nil {
		return
	}
	_ = st.nc.SetReadDeadline(time.Now().Add(streamLinger))
	_, _ = io.Copy(io.Discard, st.nc)
}

// read serves the calls it reads; it returns the last message the client
// should get, or nil when the client left.
func (st *apiStream) read(ctx context.Context, br *bufio.Reader) *api.StreamAnswer {
	var buf []byte
	for {
		_ = st.nc.SetReadDeadline(time.Now().Add(streamIdle))
		if st.goingAway.Load() {
			return &api.StreamAnswer{LastID: st.lastID}
		}
		var err error
		buf, err = api.ReadStreamFrame(br, buf, api.MaxStreamCallBytes)
		var ne net.Error
		switch {
		case err != nil && st.goingAway.Load():
			return &api.StreamAnswer{LastID: st.lastID}
		case errors.As(err, &ne) && ne.Timeout():
			return &api.StreamAnswer{LastID: st.lastID} // idle
		case errors.Is(err, api.ErrStreamFrame):
			return st.refusal(err)
		case err != nil:
			return nil
		}
		hoptrace.Mark(hoptrace.StreamFrameRead, 0)
		call, err := api.DecodeStreamCall(buf)
		var unserved *api.StreamCallError
		if err != nil && !errors.As(err, &unserved) {
			return st.refusal(err)
		}
		if call.ID <= st.lastID {
			return st.refusal(fmt.Errorf("call %d after call %d: IDs must increase", call.ID, st.lastID))
		}
		st.lastID = call.ID
		st.s.streams.calls.Add(1)
		if len(buf) > 1<<20 {
			buf = nil
		}
		if unserved != nil {
			st.write(answerFor(call.ID, &api.Error{Status: unserved.Status, Message: unserved.Err.Error()}))
			continue
		}
		if err := notOverAStream(call.Path); err != nil {
			st.write(answerFor(call.ID, err))
			continue
		}
		select {
		case st.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		st.calls.Add(1)
		st.s.callWorkers.run(func() {
			defer st.calls.Done()
			hoptrace.Mark(hoptrace.StreamWorkerStart, 0)
			a := st.s.serveAPICall(apiCall{ctx: ctx, remoteAddr: st.remote, method: call.Method, path: call.Path,
				auth: st.auth, contentType: call.ContentType, body: call.Body})
			hoptrace.Mark(hoptrace.StreamServed, 0)
			<-st.slots
			if len(a.Body) > maxStreamAnswerBody {
				st.write(answerFor(call.ID, &api.Error{Status: http.StatusInternalServerError,
					Message: fmt.Sprintf("the answer to %s %s is %d bytes, more than a stream carries (%d): make this call as a request of its own", call.Method, call.Path, len(a.Body), maxStreamAnswerBody)}))
				return
			}
			st.write(api.StreamAnswer{ID: call.ID, Status: a.Status, Header: a.Header, Body: a.Body})
		})
	}
}

// maxStreamAnswerBody leaves room in an answer frame for its head (a
// variable for a test).
var maxStreamAnswerBody = api.MaxStreamAnswerBytes - 64<<10

// notOverAStream refuses the calls a stream does not carry: the stream
// itself, the replicas' internal endpoints, and the snapshot download
// (larger than a frame; it streams as a request of its own).
func notOverAStream(path string) error {
	p, _, _ := strings.Cut(path, "?")
	if p == api.StreamPath || strings.HasPrefix(p, "/v1/internal/") || p == snapshotPath {
		return badRequest("%s cannot be called over a stream: make it a request of its own", p)
	}
	return nil
}

// refusal is the goodbye for a bad frame.
func (st *apiStream) refusal(err error) *api.StreamAnswer {
	a := answerFor(0, badRequest("the stream is closed: %v", err))
	a.LastID = st.lastID
	return &a
}

func answerFor(id uint64, err error) api.StreamAnswer {
	b := answerOf(0, err)
	return api.StreamAnswer{ID: id, Status: b.Status, Header: b.Header, Body: b.Body}
}

// write sends a; a client that cannot take it loses the connection.
func (st *apiStream) write(a api.StreamAnswer) {
	hoptrace.Mark(hoptrace.StreamAnswerWrite, 0)
	st.burst.Lock()
	var err error
	st.frame, err = api.AppendStreamAnswer(st.frame[:0], &a)
	if err == nil {
		_, err = st.bw.Write(st.frame)
	}
	if len(st.frame) > 64<<10 {
		st.frame = nil
	}
	if ferr := st.burst.Unlock(st.flushBuffered); err == nil {
		err = ferr
	}
	if err != nil {
		st.nc.Close()
	}
}

// flushBuffered writes the answers buffered; under the burst's lock.
func (st *apiStream) flushBuffered() error {
	if st.bw.Buffered() == 0 {
		return nil
	}
	return st.flush()
}

func (st *apiStream) flush() error {
	hoptrace.Mark(hoptrace.StreamAnswerFlush, 0)
	return st.bw.Flush()
}

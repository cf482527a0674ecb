package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"paxcron/internal/mpack"
)

// The API stream carries many API calls at once over one connection: a
// program that makes calls concurrently (a benchmark, a tool syncing
// thousands of jobs) would otherwise hold one HTTP/1.1 connection per
// call in flight, and pay for a request and a response written and read
// on each. A client asks for it with GET StreamPath, "Connection: Upgrade"
// and "Upgrade: StreamProtocol", and the token of its calls; the server
// answers 101 and both sides then exchange frames: a 4-byte big-endian
// length and a msgpack StreamCall (client to server) or StreamAnswer
// (server to client). Each call is an API call as over HTTP (method,
// path and query, content type, the same JSON body) served by the same
// handlers with the connection's token, and answered as soon as it is
// done, in any order: the answer carries the call's ID.
const (
	StreamPath     = "/v1/stream"
	StreamProtocol = "paxcron-stream/1"

	// MaxStreamInFlight bounds the calls a connection has sent and not
	// had answered; the server stops reading past it.
	MaxStreamInFlight = 1024
	// MaxStreamCallBytes bounds a call frame: a body of MaxBodyBytes with
	// room for its path and headers.
	MaxStreamCallBytes = MaxBodyBytes + 16<<10
	// MaxStreamAnswerBytes bounds an answer frame, as the Client bounds
	// an answer's body over HTTP.
	MaxStreamAnswerBytes = 64 << 20
	// MaxStreamPathBytes bounds a call's path and query.
	MaxStreamPathBytes = 2 << 10
)

// StreamCall is one API call on a stream.
type StreamCall struct {
	// ID names the call's answer: not 0, increasing on a connection.
	ID          uint64
	Method      string
	Path        string // path and query, as in a request line
	ContentType string
	Body        []byte `codec:"-"` // after the msgpack, to the frame's end
}

// StreamAnswer is the answer to call ID. ID 0 is about the connection:
// the server takes no call after LastID (those after it were not served
// and can be sent again on a new connection), and closes it once the
// calls up to LastID are answered; Status 0 when it is going away (a
// graceful shutdown), or the status of the connection's error, which
// Body says (an Error in JSON).
type StreamAnswer struct {
	ID     uint64
	Status int
	Header map[string][]string
	Body   []byte `codec:"-"` // after the msgpack, to the frame's end
	LastID uint64
}

var streamHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.StructToArray = true
	h.MaxInitLen = 64
	h.MaxDepth = 8
	return h
}()

var streamCodecs = mpack.New(streamHandle)

// Validate refuses a call no handler serves over a stream.
func (c *StreamCall) Validate() error {
	if c.ID == 0 {
		return errors.New("a call of ID 0")
	}
	return c.validateContent()
}

// validateContent is Validate but for the ID, which the stream gives a
// call as it sends it.
func (c *StreamCall) validateContent() error {
	switch c.Method {
	case "GET", "POST", "DELETE":
	default:
		return fmt.Errorf("method %q: want GET, POST or DELETE", c.Method)
	}
	switch {
	case len(c.Path) > MaxStreamPathBytes:
		return fmt.Errorf("path of %d bytes, more than %d", len(c.Path), MaxStreamPathBytes)
	case len(c.Path) < 4 || c.Path[:4] != "/v1/":
		return fmt.Errorf("path %q is not an API path (/v1/...)", c.Path)
	case len(c.ContentType) > 256:
		return fmt.Errorf("content type of %d bytes, more than 256", len(c.ContentType))
	case len(c.Body) > MaxBodyBytes:
		return fmt.Errorf("body of %d bytes, more than %d", len(c.Body), MaxBodyBytes)
	}
	return nil
}

// AppendStreamCall appends c's frame to b.
func AppendStreamCall(b []byte, c *StreamCall) ([]byte, error) {
	return appendStreamFrame(b, c, c.Body)
}

// AppendStreamAnswer appends a's frame to b.
func AppendStreamAnswer(b []byte, a *StreamAnswer) ([]byte, error) {
	return appendStreamFrame(b, a, a.Body)
}

// appendStreamFrame appends a frame: its length, head in msgpack, and
// body. The body is not msgpack's: msgpack reads a long byte string in
// steps of its handle's MaxInitLen, copying all it read at each step.
func appendStreamFrame(b []byte, head any, body []byte) ([]byte, error) {
	start := len(b)
	b, err := streamCodecs.Append(binary.BigEndian.AppendUint32(b, 0), head)
	if err != nil {
		return b[:start], fmt.Errorf("api: encoding a stream frame: %w", err)
	}
	n := uint64(len(b)-start-4) + uint64(len(body))
	if n > math.MaxUint32 {
		return b[:start], fmt.Errorf("api: a stream frame of %d bytes", n)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	return append(b, body...), nil
}

// ErrStreamFrame marks a frame that is not one: too long, cut short or
// not what it claims to be.
var ErrStreamFrame = errors.New("api: bad stream frame")

// ReadStreamFrame reads one frame's msgpack into buf (grown as needed)
// and returns it; a frame over limit bytes is refused before it is read.
// A clean end of r before a frame is io.EOF.
func ReadStreamFrame(r io.Reader, buf []byte, limit int) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return buf, fmt.Errorf("%w: cut short in its length", ErrStreamFrame)
		}
		return buf, err
	}
	size := binary.BigEndian.Uint32(n[:])
	switch {
	case uint64(size) > uint64(limit):
		return buf, fmt.Errorf("%w: %d bytes, more than %d", ErrStreamFrame, size, limit)
	case size == 0:
		return buf, fmt.Errorf("%w: empty", ErrStreamFrame)
	}
	if cap(buf) < int(size) {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if m, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return buf, fmt.Errorf("%w: cut short after %d of %d bytes", ErrStreamFrame, m, size)
		}
		return buf, err
	}
	return buf, nil
}

// DecodeStreamCall decodes and validates a call frame (what
// ReadStreamFrame returned). The call's body is a copy.
//
// A frame that decodes to a call of an ID the stream does not serve
// (an unknown method, a path or body over its limit) is a
// *StreamCallError: the server answers that call alone, as it would
// answer it over HTTP, and goes on with the stream.
func DecodeStreamCall(frame []byte) (StreamCall, error) {
	var c StreamCall
	body, err := decodeHead(frame, &c)
	if err != nil {
		return StreamCall{}, fmt.Errorf("%w: not a call: %v", ErrStreamFrame, err)
	}
	c.Body = body
	if c.ID == 0 {
		return StreamCall{}, fmt.Errorf("%w: a call of ID 0", ErrStreamFrame)
	}
	if err := c.validateContent(); err != nil {
		status := http.StatusBadRequest
		if len(c.Body) > MaxBodyBytes {
			status = http.StatusRequestEntityTooLarge
		}
		return StreamCall{ID: c.ID}, &StreamCallError{Status: status, Err: fmt.Errorf("call %d: %w", c.ID, err)}
	}
	return c, nil
}

// StreamCallError is a call that a stream does not serve (DecodeStreamCall
// returns its ID in the call): its answer is Status. Found in review:
// such a call closed the stream, and failed every call sent after it,
// where over HTTP it is refused alone.
type StreamCallError struct {
	Status int
	Err    error
}

func (e *StreamCallError) Error() string { return "api: stream " + e.Err.Error() }

func (e *StreamCallError) Unwrap() error { return e.Err }

// DecodeStreamAnswer decodes an answer frame. The answer's body is a
// copy.
func DecodeStreamAnswer(frame []byte) (StreamAnswer, error) {
	var a StreamAnswer
	body, err := decodeHead(frame, &a)
	if err != nil {
		return StreamAnswer{}, fmt.Errorf("%w: not an answer: %v", ErrStreamFrame, err)
	}
	a.Body = body
	if a.ID != 0 && (a.Status < 100 || a.Status > 999) {
		return StreamAnswer{}, fmt.Errorf("%w: answer %d has status %d", ErrStreamFrame, a.ID, a.Status)
	}
	return a, nil
}

// decodeHead decodes the msgpack at frame's start into v and returns a
// copy of the rest, the body (nil if empty).
func decodeHead(frame []byte, v any) ([]byte, error) {
	n, err := streamCodecs.Decode(frame, v)
	if err != nil {
		return nil, err
	}
	rest := frame[n:]
	if len(rest) == 0 {
		return nil, nil
	}
	return bytes.Clone(rest), nil
}

// Burst lets the goroutines that write frames to one buffered connection
// share its socket writes. A writer calls Lock, puts its frame in the
// buffer, and calls Unlock with the function that flushes the buffer. The
// last writer of a burst (no other between its Lock and its Unlock)
// yields once before it flushes: the frames of calls or answers that
// became ready together (a batch of writes applied at once wakes all
// their goroutines) then join the same write, where each would otherwise
// cost a write to the socket of its own (a tenth of a leader's CPU at 64
// clients). Alone, the yield costs nothing: nothing else runs. A writer
// that finds another one under way leaves the flush to it.
type Burst struct {
	mu      sync.Mutex
	writers atomic.Int32
}

// Lock takes the buffer.
func (b *Burst) Lock() {
	b.writers.Add(1)
	b.mu.Lock()
}

// Unlock gives the buffer back, and flushes it (holding it again) unless
// another writer will.
func (b *Burst) Unlock(flush func() error) error {
	b.mu.Unlock()
	if b.writers.Add(-1) != 0 {
		return nil
	}
	runtime.Gosched()
	if b.writers.Load() != 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return flush()
}

// DeadlineWriter writes to Conn with a fresh write deadline, Timeout
// from now, before each write. A stream's bufio.Writer sits on one: it
// writes a frame larger than its free space straight to the connection,
// outside any flush, and found in review such a write after the stream
// had been idle ran under the deadline the last flush had set, long
// past, failing the stream and every call on it.
type DeadlineWriter struct {
	Conn    net.Conn
	Timeout time.Duration
}

func (w DeadlineWriter) Write(p []byte) (int, error) {
	_ = w.Conn.SetWriteDeadline(time.Now().Add(w.Timeout))
	return w.Conn.Write(p)
}

package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeStreamServer upgrades every connection and hands it to serve.
type fakeStreamServer struct {
	ln    net.Listener
	conns atomic.Int32
	serve func(n int32, br *bufio.Reader, conn net.Conn)
}

func startFakeStream(t *testing.T, serve func(n int32, br *bufio.Reader, conn net.Conn)) *fakeStreamServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeStreamServer{ln: ln, serve: serve}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n := f.conns.Add(1)
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.URL.Path != StreamPath || req.Header.Get("Upgrade") != StreamProtocol || req.Header.Get("Authorization") != "Bearer tok" {
					fmt.Fprintf(conn, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
					return
				}
				fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", StreamProtocol)
				f.serve(n, br, conn)
			}()
		}
	}()
	return f
}

func (f *fakeStreamServer) client(t *testing.T) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{Address: "http://" + f.ln.Addr().String(), Token: "tok", Stream: true, Timeout: 5 * time.Second, NoLeaderWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func readCall(t *testing.T, br *bufio.Reader) StreamCall {
	t.Helper()
	b, err := ReadStreamFrame(br, nil, MaxStreamCallBytes)
	if err != nil {
		t.Error(err)
		return StreamCall{}
	}
	c, err := DecodeStreamCall(b)
	if err != nil {
		t.Error(err)
	}
	return c
}

func writeAnswer(t *testing.T, conn net.Conn, a StreamAnswer) {
	t.Helper()
	b, err := AppendStreamAnswer(nil, &a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(b); err != nil {
		t.Error(err)
	}
}

// answerEach serves a stream by answering each call it reads with
// answer(call, connection), until the client leaves or sends a frame
// that is not a call.
func answerEach(t *testing.T, answer func(c StreamCall, conn int32) StreamAnswer) func(n int32, br *bufio.Reader, conn net.Conn) {
	return func(n int32, br *bufio.Reader, conn net.Conn) {
		for {
			b, err := ReadStreamFrame(br, nil, MaxStreamCallBytes)
			if err != nil {
				return
			}
			c, err := DecodeStreamCall(b)
			if err != nil {
				return
			}
			writeAnswer(t, conn, answer(c, n))
		}
	}
}

// done answers a Done whose index names the call's job (jN in its path)
// and the connection: N*10 + conn.
func done(c StreamCall, conn int32) StreamAnswer {
	b, _ := json.Marshal(Done{Index: uint64(c.Path[len("/v1/jobs/j")]-'0')*10 + uint64(conn)})
	return StreamAnswer{ID: c.ID, Status: 200, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: b}
}

// A server going away names the last call it serves: the calls after it
// are sent again on a new connection, those before it are answered on
// the old one, and no call is sent twice.
func TestStreamGoAwayResendsOnlyUnservedCalls(t *testing.T) {
	var calls sync.Map // path -> times received
	got := make(chan StreamCall, 3)
	readFirst := make(chan struct{}, 3) // a call read on the first connection
	f := startFakeStream(t, func(n int32, br *bufio.Reader, conn net.Conn) {
		if n == 1 {
			var read []StreamCall
			for range 3 {
				c := readCall(t, br)
				read = append(read, c)
				v, _ := calls.LoadOrStore(c.Path, new(atomic.Int32))
				v.(*atomic.Int32).Add(1)
				readFirst <- struct{}{}
			}
			// Serves the first two; the third was read but is let go.
			writeAnswer(t, conn, StreamAnswer{LastID: read[1].ID})
			writeAnswer(t, conn, done(read[1], n))
			writeAnswer(t, conn, done(read[0], n))
			return
		}
		for {
			b, err := ReadStreamFrame(br, nil, MaxStreamCallBytes)
			if err != nil {
				return
			}
			c, _ := DecodeStreamCall(b)
			v, _ := calls.LoadOrStore(c.Path, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
			got <- c
			writeAnswer(t, conn, done(c, n))
		}
	})
	c := f.client(t)
	// The three calls reach the first connection in order, j0, j1, j2
	// (IDs 1, 2, 3): each is made once the server read the one before.
	// Spaced by a sleep, they were not always: a goroutine started late
	// (-race, a loaded machine) sent j2 before j1.
	var wg sync.WaitGroup
	results := make([]uint64, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() {
			d, err := c.Pause(context.Background(), fmt.Sprintf("j%d", i))
			results[i], errs[i] = d.Index, err
		})
		select {
		case <-readFirst:
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d never reached the first connection", i)
		}
	}
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
	}
	want := []uint64{1, 11, 22} // j0 and j1 on connection 1, j2 on 2
	for i := range 3 {
		if results[i] != want[i] {
			t.Errorf("call %d answered %d, want %d", i, results[i], want[i])
		}
	}
	calls.Range(func(k, v any) bool {
		if n := v.(*atomic.Int32).Load(); (k == "/v1/jobs/j2/pause" && n != 2) || (k != "/v1/jobs/j2/pause" && n != 1) {
			t.Errorf("%s reached a server %d times", k, n)
		}
		return true
	})
	if n := f.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// A connection that breaks leaves its calls in doubt: they fail with an
// error that says so, and are not sent again.
func TestStreamBrokenConnectionIsNotRetried(t *testing.T) {
	f := startFakeStream(t, func(n int32, br *bufio.Reader, conn net.Conn) {
		readCall(t, br)
		// Closed without an answer.
	})
	c := f.client(t)
	_, err := c.Pause(context.Background(), "j")
	if err == nil || !strings.Contains(err.Error(), "may or may not have been served") {
		t.Fatalf("err = %v, want the call in doubt", err)
	}
	if n := f.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1 (no retry)", n)
	}
	// The next call opens a new stream.
	if _, err := c.Pause(context.Background(), "k"); err == nil {
		t.Fatal("a call on a server that closes every stream succeeded")
	}
	if n := f.conns.Load(); n != 2 {
		t.Errorf("%d connections after a second call, want 2", n)
	}
}

// A server's refusal of the stream (a bad frame) reaches the calls it
// did not serve as that error; an answer's error status is an *Error.
func TestStreamErrors(t *testing.T) {
	f := startFakeStream(t, func(n int32, br *bufio.Reader, conn net.Conn) {
		first := readCall(t, br)
		b, _ := json.Marshal(Error{Message: "no such job"})
		writeAnswer(t, conn, StreamAnswer{ID: first.ID, Status: 404, Body: b})
		second := readCall(t, br)
		b, _ = json.Marshal(Error{Message: "the stream is closed: a bad frame"})
		writeAnswer(t, conn, StreamAnswer{Status: 400, Body: b, LastID: second.ID - 1})
	})
	c := f.client(t)
	_, err := c.Pause(context.Background(), "j")
	var e *Error
	if !errors.As(err, &e) || e.Status != 404 || e.Message != "no such job" {
		t.Fatalf("err = %v, want the 404", err)
	}
	_, err = c.Pause(context.Background(), "k")
	if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "bad frame") {
		t.Fatalf("err = %v, want the stream's refusal", err)
	}
}

// A server without the stream (404 on the upgrade) is called over plain
// HTTP from then on.
func TestStreamFallsBackToHTTP(t *testing.T) {
	var upgrades, plain atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == StreamPath {
			upgrades.Add(1)
			http.NotFound(w, r)
			return
		}
		plain.Add(1)
		_ = json.NewEncoder(w).Encode(Done{Index: 5})
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := NewClient(ClientConfig{Address: "http://" + ln.Addr().String(), Token: "tok", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		if d, err := c.Pause(context.Background(), "j"); err != nil || d.Index != 5 {
			t.Fatalf("%+v, %v", d, err)
		}
	}
	if upgrades.Load() != 1 || plain.Load() != 3 {
		t.Errorf("%d upgrades and %d plain calls, want 1 and 3", upgrades.Load(), plain.Load())
	}
}

func TestStreamFrames(t *testing.T) {
	call := StreamCall{ID: 7, Method: "POST", Path: "/v1/jobs?x=1", ContentType: "application/json", Body: []byte(`{"jobs":[]}`)}
	b, err := AppendStreamCall([]byte("prefix"), &call)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:6]) != "prefix" || int(binary.BigEndian.Uint32(b[6:])) != len(b)-10 {
		t.Fatalf("frame %q: not the prefix, a length and the body", b)
	}
	got, err := ReadStreamFrame(bytes.NewReader(b[6:]), nil, MaxStreamCallBytes)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeStreamCall(got)
	if err != nil || back.ID != 7 || back.Path != call.Path || string(back.Body) != string(call.Body) {
		t.Fatalf("%+v, %v", back, err)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		limit int
		want  string
	}{
		{"over the limit", []byte{0, 0, 1, 0}, 255, "more than 255"},
		{"empty", []byte{0, 0, 0, 0}, 255, "empty"},
		{"cut in its length", []byte{0, 0}, 255, "cut short in its length"},
		{"cut in its body", []byte{0, 0, 0, 9, 1, 2}, 255, "cut short after 2 of 9"},
	} {
		_, err := ReadStreamFrame(bytes.NewReader(tc.frame), nil, tc.limit)
		if !errors.Is(err, ErrStreamFrame) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		call StreamCall
		want string
	}{
		{"ID 0", StreamCall{Method: "GET", Path: "/v1/status"}, "ID 0"},
	} {
		b, err := AppendStreamCall(nil, &tc.call)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeStreamCall(b[4:]); !errors.Is(err, ErrStreamFrame) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// A call the stream does not serve is refused alone, as over HTTP.
	for _, tc := range []struct {
		name   string
		call   StreamCall
		status int
		want   string
	}{
		{"a method", StreamCall{ID: 3, Method: "PUT", Path: "/v1/status"}, 400, "method"},
		{"not the API", StreamCall{ID: 3, Method: "GET", Path: "/metrics"}, 400, "not an API path"},
		{"a long path", StreamCall{ID: 3, Method: "GET", Path: "/v1/" + strings.Repeat("a", MaxStreamPathBytes)}, 400, "path of"},
		{"a large body", StreamCall{ID: 3, Method: "POST", Path: "/v1/jobs", Body: make([]byte, MaxBodyBytes+1)}, 413, "body of"},
	} {
		b, err := AppendStreamCall(nil, &tc.call)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeStreamCall(b[4:])
		var unserved *StreamCallError
		if !errors.As(err, &unserved) || got.ID != 3 || unserved.Status != tc.status || !strings.Contains(err.Error(), "call 3: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: call %d, %v, want call 3 refused %d with %q", tc.name, got.ID, err, tc.status, tc.want)
		}
	}
	valid, _ := AppendStreamCall(nil, &call)
	if _, err := DecodeStreamCall(valid[4:12]); !errors.Is(err, ErrStreamFrame) {
		t.Errorf("a call cut in its head: %v", err)
	}
	// A large body decodes in one piece (msgpack would grow it in steps
	// of 64 bytes, copying it each time: seconds for a few MiB).
	big := StreamCall{ID: 1, Method: "POST", Path: "/v1/jobs", Body: bytes.Repeat([]byte{'x'}, MaxBodyBytes)}
	frame, _ := AppendStreamCall(nil, &big)
	if back, err := DecodeStreamCall(frame[4:]); err != nil || !bytes.Equal(back.Body, big.Body) {
		t.Errorf("a body of MaxBodyBytes: %v", err)
	}
	a, _ := AppendStreamAnswer(nil, &StreamAnswer{ID: 3, Status: 42})
	if _, err := DecodeStreamAnswer(a[4:]); err == nil {
		t.Error("an answer of status 42 decoded")
	}
}

// countingWriter counts the bytes and the writes that reach it.
type countingWriter struct{ bytes, writes int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.bytes += len(p)
	w.writes++
	return len(p), nil
}

// TestBurstLeavesNothingBuffered: however writers interleave, once each
// has unlocked, every frame has been flushed (a writer leaves the flush
// to another only while that one is under way), and writers that run
// together share flushes.
func TestBurstLeavesNothingBuffered(t *testing.T) {
	var b Burst
	out := &countingWriter{}
	bw := bufio.NewWriterSize(out, 1<<20)
	flush := func() error {
		if bw.Buffered() == 0 {
			return nil
		}
		return bw.Flush()
	}
	const writers, frames = 64, 200
	frame := bytes.Repeat([]byte{'f'}, 100)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range frames {
				b.Lock()
				_, _ = bw.Write(frame)
				if err := b.Unlock(flush); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if buffered := bw.Buffered(); buffered != 0 || out.bytes != writers*frames*len(frame) {
		t.Fatalf("%d bytes left in the buffer, %d written; want 0 and %d", buffered, out.bytes, writers*frames*len(frame))
	}
	if out.writes >= writers*frames {
		t.Errorf("%d socket writes for %d frames: no burst shared one", out.writes, writers*frames)
	}
	t.Logf("%d frames in %d writes", writers*frames, out.writes)
}

// TestStreamLargeCallAfterIdle: a call larger than the client's 64 KiB
// write buffer, which bufio writes straight to the socket, after the
// stream was idle for longer than the client's timeout. Found in review:
// it ran under the deadline the last flush had set, long past, and
// failed with every call on the stream.
func TestStreamLargeCallAfterIdle(t *testing.T) {
	f := startFakeStream(t, answerEach(t, func(c StreamCall, _ int32) StreamAnswer {
		return StreamAnswer{ID: c.ID, Status: 200, Body: []byte(`{"index":1}`)}
	}))
	// A Timeout of a second: every call here must end within it, which
	// 300 ms did not leave a loaded machine under -race room for.
	const timeout = time.Second
	c, err := NewClient(ClientConfig{Address: "http://" + f.ln.Addr().String(), Token: "tok", Stream: true, Timeout: timeout, NoLeaderWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Pause(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(timeout + 300*time.Millisecond) // idle longer than Timeout, well within the server's 2 min
	var req PutJobs
	for i := range 1000 {
		req.Jobs = append(req.Jobs, PutJob{Name: fmt.Sprintf("job-%04d-%0100d", i, 0), Spec: Spec{Schedule: "@hourly", NomadJob: "p"}})
	}
	if _, err := c.PutJobs(ctx, req); err != nil {
		t.Fatalf("a large call after an idle spell: %v", err)
	}
	if n := f.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// A replica that vanished without closing its connection (a lost host, a
// partition) answers nothing: the call in flight times out, and the next
// call is not sent on the silent stream but opens another, which finds
// the replica gone and moves to the next one. Found in review: every
// later call went to the silent stream and timed out in turn, until TCP
// gave up on it many minutes later.
func TestStreamSilentReplicaIsLeft(t *testing.T) {
	silent := startFakeStream(t, func(n int32, br *bufio.Reader, conn net.Conn) {
		_, _ = io.Copy(io.Discard, br) // reads every call, answers none
	})
	serving := startFakeStream(t, answerEach(t, done))
	// A Timeout of a second: the call to the serving replica, its dial
	// included, must end within it, which 300 ms did not leave a loaded
	// machine under -race room for.
	c, err := NewClient(ClientConfig{
		Address:      "http://" + silent.ln.Addr().String() + ",http://" + serving.ln.Addr().String(),
		Token:        "tok",
		Stream:       true,
		Timeout:      time.Second,
		NoLeaderWait: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Pause(ctx, "j1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call to the silent replica: %v, want its timeout", err)
	}
	// The replica is now gone for good: no new connection reaches it.
	silent.ln.Close()
	d, err := c.Pause(ctx, "j2")
	if err != nil {
		t.Fatalf("the call after the timeout: %v", err)
	}
	// j2's answer, on whichever of the serving replica's connections (the
	// client's search for the leader opens some of its own).
	if d.Index/10 != 2 {
		t.Errorf("answered %d, want 2x (j2, served by the serving replica)", d.Index)
	}
	if n := silent.conns.Load(); n != 1 {
		t.Errorf("%d connections to the silent replica, want 1", n)
	}
}

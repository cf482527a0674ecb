package nomad

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestErrorBodyIsReadOnlyInPart: the Go API client reads an error reply's
// body whole into memory (and ungzips it whole), so a broken or hostile
// proxy in front of Nomad could make a replica hold any amount for one
// refused dispatch (found in review). The client reads at most
// maxErrorBody of it, plain or gzipped, and the refusal still says what
// Nomad said first.
func TestErrorBodyIsReadOnlyInPart(t *testing.T) {
	const huge = 64 << 20
	chunk := []byte("parent job is not parameterized " + strings.Repeat("x", 64<<10-32))
	// The gzipped body is made once, here: compressing it in the handler
	// took seconds under -race, and the look-up after the refusal then
	// timed out behind it.
	var zipped bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestSpeed)
	for range 16 << 20 / len(chunk) {
		zw.Write(chunk)
	}
	zw.Close()
	for _, gzipped := range []bool{false, true} {
		var sent atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !isDispatch(r) {
				reply(w, 200, []any{}) // the look-up after a refusal: no child
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			if gzipped {
				// 16 MiB ungzipped, 64 KiB on the wire: what counts is what
				// the client would make of it.
				w.Header().Set("Content-Encoding", "gzip")
				w.WriteHeader(http.StatusBadRequest)
				w.Write(zipped.Bytes())
				return
			}
			w.WriteHeader(http.StatusBadRequest)
			for sent.Load() < huge && r.Context().Err() == nil {
				n, err := w.Write(chunk)
				sent.Add(int64(n))
				if err != nil {
					return
				}
			}
		}))
		t.Cleanup(srv.Close)
		c := fakeAt(t, srv.URL, 30*time.Second)
		_, err := c.Dispatch(context.Background(), testLaunch)
		if err == nil || !Permanent(err) || !strings.Contains(err.Error(), "parent job is not parameterized") {
			t.Fatalf("gzip %v: Dispatch error %.300v; want the refusal, permanent", gzipped, err)
		}
		if n := len(err.Error()); n > 2*maxErrorBody {
			t.Errorf("gzip %v: the error is %d bytes; want at most about %d", gzipped, n, maxErrorBody)
		}
		if !gzipped && sent.Load() >= huge {
			t.Errorf("the client read the whole %d-byte error body", sent.Load())
		}
	}
}

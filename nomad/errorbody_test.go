package nomad

import (
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestErrorBodyIsReadOnlyInPart: the Go API client reads an error reply's
// body whole into memory (and ungzips it whole), so a broken or hostile
// proxy in front of Nomad could make a replica hold any amount for one
// refused dispatch (found in review). The client reads at most
// maxErrorBody of it, plain or gzipped, and the refusal still says what
// Nomad said first.
func TestErrorBodyIsReadOnlyInPart(t *testing.T) {
	const huge = 64 << 20
	for _, gzipped := range []bool{false, true} {
		var sent atomic.Int64
		c := fake(t, func(w http.ResponseWriter, r *http.Request) {
			if !isDispatch(r) {
				reply(w, 200, []any{}) // the look-up after a refusal: no child
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			chunk := []byte("parent job is not parameterized " + strings.Repeat("x", 64<<10-32))
			if !gzipped {
				w.WriteHeader(http.StatusBadRequest)
				for sent.Load() < huge {
					n, err := w.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
				return
			}
			// Compressed, the body is tiny on the wire: what counts is
			// what the client would make of it.
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(http.StatusBadRequest)
			zw := gzip.NewWriter(w)
			for sent.Load() < huge {
				n, err := zw.Write(chunk)
				sent.Add(int64(n))
				if err != nil {
					return
				}
			}
			zw.Close()
		})
		_, err := c.Dispatch(context.Background(), testLaunch)
		if err == nil || !Permanent(err) || !strings.Contains(err.Error(), "parent job is not parameterized") {
			t.Fatalf("gzip %v: Dispatch error %v; want the refusal, permanent", gzipped, err)
		}
		if n := len(err.Error()); n > 2*maxErrorBody {
			t.Errorf("gzip %v: the error is %d bytes; want at most about %d", gzipped, n, maxErrorBody)
		}
		if !gzipped && sent.Load() >= huge {
			t.Errorf("the client read the whole %d-byte error body", sent.Load())
		}
	}
}

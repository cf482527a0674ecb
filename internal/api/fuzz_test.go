package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// FuzzSpecJSON decodes any bytes as a job's spec, as the server does (no
// unknown fields). No input may panic; a spec the conversion accepts
// converts back (SpecOf) and again to the same state.JobSpec, and its JSON
// is a fixed point of decoding and encoding.
func FuzzSpecJSON(f *testing.F) {
	f.Add([]byte(`{"schedule":"@hourly","nomad_job":"p"}`))
	f.Add([]byte(`{"schedule":"0 ? * * *","time_zone":"Europe/Berlin","concurrency":"forbid","catchup_window":"10m","delivery":"at-least-once","nomad_job":"p","namespace":"ns","region":"r","meta":{"k":"v"},"payload":"eyJhIjoxfQ=="}`))
	f.Add([]byte(`{"catchup_window":600000000000}`))
	f.Add([]byte(`{"catchup_window":"-1s"}`))
	f.Add([]byte(`{"catchup_window":1e300}`))
	f.Add([]byte(`{"catchup_window":"9999999999h"}`))
	f.Add([]byte(`{"delivery":"twice"}`))
	f.Add([]byte(`{"concurrency":"maybe"}`))
	f.Add([]byte(`{"payload":"not base64"}`))
	f.Add([]byte(`{"meta":{"k":null}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Spec
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if dec.Decode(&s) != nil {
			return
		}
		js, err := s.JobSpec()
		if err != nil {
			return
		}
		back := SpecOf(js)
		js2, err := back.JobSpec()
		if err != nil || !reflect.DeepEqual(js2, js) {
			t.Fatalf("SpecOf(%+v).JobSpec() = %+v, %v", js, js2, err)
		}
		enc, err := json.Marshal(back)
		if err != nil {
			t.Fatalf("encoding %+v: %v", back, err)
		}
		// Empty and absent meta and payload encode alike (omitempty).
		var again Spec
		if err := json.Unmarshal(enc, &again); err != nil {
			t.Fatalf("%s does not decode: %v", enc, err)
		}
		if enc2, _ := json.Marshal(again); !bytes.Equal(enc2, enc) {
			t.Fatalf("%s decoded and encoded to %s", enc, enc2)
		}
	})
}

// roundTripFunc answers the client's requests.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzClientAnswer: whatever a replica (or something in its place)
// answers, the client returns a value or an error without panicking: a
// status other than 2xx is an *Error with that status and a message; a
// 2xx whose body does not decode says so.
func FuzzClientAnswer(f *testing.F) {
	f.Add(uint16(200), []byte(`{"jobs":[{"name":"a"}],"index":3}`))
	f.Add(uint16(200), []byte(`{"jobs":`))
	f.Add(uint16(200), []byte(``))
	f.Add(uint16(503), []byte(`{"error":"no leader right now","leader":2}`))
	f.Add(uint16(404), []byte(`<html>not found</html>`))
	f.Add(uint16(500), []byte(``))
	f.Add(uint16(999), []byte(`{"error":""}`))
	f.Fuzz(func(t *testing.T, status uint16, body []byte) {
		code := 100 + int(status)%900
		if code/100 == 1 {
			code += 100 // 1xx are interim: net/http would wait for more
		}
		// No retry of a 503: every input gets one answer at once.
		c, err := NewClient(ClientConfig{Address: "http://replica.invalid:4750", NoLeaderWait: -1})
		if err != nil {
			t.Fatal(err)
		}
		c.http.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
		})
		_, err = c.Jobs(context.Background(), ReadOptions{})
		var e *Error
		switch {
		case code/100 != 2:
			if !errors.As(err, &e) || e.Status != code || e.Message == "" {
				t.Fatalf("HTTP %d answered %v, want an *Error with that status and a message", code, err)
			}
		case err != nil && !strings.Contains(err.Error(), "decoding the answer"):
			t.Fatalf("HTTP %d with an undecodable body: %v", code, err)
		}
	})
}

// FuzzStreamFrames decodes any bytes as a stream frame, a call and an
// answer, as the server and the client do. No input may panic or read
// past the limit; a call or answer that decodes encodes again to a frame
// that decodes to the same.
func FuzzStreamFrames(f *testing.F) {
	for _, v := range []any{
		&StreamCall{ID: 1, Method: "POST", Path: "/v1/jobs", ContentType: "application/json", Body: []byte(`{"jobs":[]}`)},
		&StreamCall{ID: 9, Method: "GET", Path: "/v1/jobs/a?next=3"},
		&StreamAnswer{ID: 3, Status: 200, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"index":4}`)},
		&StreamAnswer{Status: 400, Body: []byte(`{"error":"bad"}`), LastID: 7},
		&StreamAnswer{LastID: 2},
	} {
		var b []byte
		switch v := v.(type) {
		case *StreamCall:
			b, _ = AppendStreamCall(nil, v)
		case *StreamAnswer:
			b, _ = AppendStreamAnswer(nil, v)
		}
		f.Add(b)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x95})
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 1 << 16
		frame, err := ReadStreamFrame(bytes.NewReader(b), nil, limit)
		if err != nil {
			return
		}
		if len(frame) > limit {
			t.Fatalf("a frame of %d bytes read past the limit", len(frame))
		}
		if c, err := DecodeStreamCall(frame); err == nil {
			again, err := AppendStreamCall(nil, &c)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeStreamCall(again[4:])
			if err != nil || !reflect.DeepEqual(back, c) {
				t.Fatalf("call %+v came back as %+v (%v)", c, back, err)
			}
		}
		if a, err := DecodeStreamAnswer(frame); err == nil {
			again, err := AppendStreamAnswer(nil, &a)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeStreamAnswer(again[4:])
			if err != nil || !reflect.DeepEqual(back, a) {
				t.Fatalf("answer %+v came back as %+v (%v)", a, back, err)
			}
		}
	})
}

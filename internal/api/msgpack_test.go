package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func samplePutJobs() PutJobs {
	v := uint64(3)
	return PutJobs{Jobs: []PutJob{
		{Name: "payroll", IfVersion: &v, Spec: Spec{Schedule: "0 ? * * *", TimeZone: "Europe/Berlin",
			Concurrency: "forbid", CatchupWindow: Duration(10 * time.Minute), Delivery: "at-least-once",
			NomadJob: "payroll-run", Namespace: "ops", Region: "eu", Meta: map[string]string{"k": "v"},
			Payload: []byte{0, 1, 2, 0xff}}},
		{Name: "b", Spec: Spec{Schedule: "@daily", NomadJob: "p"}},
	}, SkipNomadCheck: true}
}

func TestMsgpackBodyRoundTrips(t *testing.T) {
	in := samplePutJobs()
	b, err := EncodeMsgpack(in)
	if err != nil {
		t.Fatal(err)
	}
	var out PutJobs
	if err := DecodeMsgpack(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", out, in)
	}
	// The fields go by their JSON names, so that a client in another
	// language writes what the API's documentation says.
	var generic map[string]any
	if err := DecodeMsgpack(b, &generic); err != nil {
		t.Fatal(err)
	}
	if _, ok := generic["skip_nomad_check"]; !ok {
		t.Errorf("the map's keys are %v, want the JSON names", generic)
	}
}

func TestMsgpackBodyRefusesWhatJSONRefuses(t *testing.T) {
	good, err := EncodeMsgpack(samplePutJobs())
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := EncodeMsgpack(map[string]any{"jobs": []any{}, "skip_nomad_checks": true})
	if err != nil {
		t.Fatal(err)
	}
	wrongType, err := EncodeMsgpack(map[string]any{"jobs": "all of them"})
	if err != nil {
		t.Fatal(err)
	}
	negVersion, err := EncodeMsgpack(map[string]any{"jobs": []any{map[string]any{"name": "a", "if_version": -1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, "empty body"},
		{"a field the type lacks", unknown, "skip_nomad_checks"},
		{"a second value after it", append(bytes.Clone(good), 0xc0), "1 bytes after"},
		{"cut short", good[:len(good)-3], "cut short"},
		{"a string for a list", wrongType, ""},
		{"a negative version", negVersion, ""},
		// A map header that claims 2^32-1 entries in a 5-byte body: refused
		// when the body ends, not after allocating for the claim.
		{"a map claiming 4 billion entries", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, "cut short"},
		// Nesting past the handle's depth bound.
		{"nested too deep", bytes.Repeat([]byte{0x91}, 64), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out PutJobs
			err := DecodeMsgpack(tc.body, &out)
			if err == nil {
				t.Fatalf("decoded %+v, want an error", out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestMsgpackBodyDecodesALargePayloadInLinearWork: a payload's bytes
// are copied a bounded number of times, not once per 64 bytes read (the
// handle's first MaxInitLen made a 1 MiB payload's decode copy about
// 8 GiB). Counted in bytes allocated, which does not depend on the
// machine's speed.
func TestMsgpackBodyDecodesALargePayloadInLinearWork(t *testing.T) {
	const payload = 1 << 20
	b, err := EncodeMsgpack(PutJobs{Jobs: []PutJob{{Name: "big", Spec: Spec{Schedule: "@daily", NomadJob: "p",
		Payload: bytes.Repeat([]byte{'p'}, payload)}}}})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var out PutJobs
	if err := DecodeMsgpack(b, &out); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if len(out.Jobs) != 1 || len(out.Jobs[0].Spec.Payload) != payload {
		t.Fatalf("decoded %d jobs", len(out.Jobs))
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 8*payload {
		t.Errorf("decoding a %d-byte payload allocated %d bytes; want at most %d", payload, n, 8*payload)
	}
}

// TestClientWritesJobsInMsgpackAndFallsBackToJSON: the client sends job
// writes in msgpack; a server that answers 415 (one from before msgpack
// bodies) gets the same write again in JSON, and every later one in JSON.
func TestClientWritesJobsInMsgpackAndFallsBackToJSON(t *testing.T) {
	for _, takesMsgpack := range []bool{true, false} {
		var mu sync.Mutex
		var seen []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ct := r.Header.Get("Content-Type")
			mu.Lock()
			seen = append(seen, ct)
			mu.Unlock()
			body, _ := io.ReadAll(r.Body)
			var req PutJobs
			switch {
			case ct == MsgpackContentType && takesMsgpack:
				if err := DecodeMsgpack(body, &req); err != nil {
					t.Errorf("the client's msgpack: %v", err)
				}
			case ct == MsgpackContentType:
				w.WriteHeader(http.StatusUnsupportedMediaType)
				_, _ = w.Write([]byte(`{"error":"Content-Type \"application/msgpack\": send application/json"}`))
				return
			default:
				if err := json.Unmarshal(body, &req); err != nil {
					t.Errorf("the client's JSON: %v", err)
				}
			}
			if !reflect.DeepEqual(req, samplePutJobs()) {
				t.Errorf("the server read %+v", req)
			}
			_, _ = w.Write([]byte(`{"jobs":[{"name":"payroll","version":4}]}`))
		}))
		c, err := NewClient(ClientConfig{Address: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			res, err := c.PutJobs(context.Background(), samplePutJobs())
			if err != nil || len(res.Jobs) != 1 || res.Jobs[0].Version != 4 {
				t.Fatalf("takesMsgpack %v: PutJobs = %+v, %v", takesMsgpack, res, err)
			}
		}
		srv.Close()
		want := []string{MsgpackContentType, MsgpackContentType}
		if !takesMsgpack {
			want = []string{MsgpackContentType, "application/json", "application/json"}
		}
		if !reflect.DeepEqual(seen, want) {
			t.Errorf("takesMsgpack %v: the server saw %q, want %q", takesMsgpack, seen, want)
		}
	}
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/internal/api"
)

// FuzzPutJobsBody feeds any bytes to the job-submission path as JSON and
// as HCL: decoding, the spec conversion and validation must refuse what
// they refuse with an error, never a panic, and whatever passes must be a
// command the state accepts as valid.
func FuzzPutJobsBody(f *testing.F) {
	f.Add([]byte(`{"jobs":[{"name":"a","spec":{"schedule":"@hourly","nomad_job":"p"}}]}`), false)
	f.Add([]byte(`{"jobs":[{"name":"a","spec":{"schedule":"0 ? * * *","time_zone":"Europe/Berlin","concurrency":"forbid","catchup_window":"10m","delivery":"at-least-once","nomad_job":"p","meta":{"k":"v"},"payload":"eyJhIjoxfQ=="}}],"skip_nomad_check":true}`), false)
	f.Add([]byte(`{"jobs":[{"name":"../x","spec":{"schedule":"61 * * * *"}}]}`), false)
	f.Add([]byte("cron \"a\" {\n  schedule = \"*/5 * * * * *\"\n  nomad { job = \"p\" }\n}\n"), true)
	f.Add([]byte("cron \"a\" {\n  nomad { payload = file(\"/etc/passwd\") }\n}\n"), true)
	f.Fuzz(func(t *testing.T, body []byte, hcl bool) {
		r := httptest.NewRequest("POST", "/v1/jobs", bytes.NewReader(body))
		if hcl {
			r.Header.Set("Content-Type", "application/hcl")
		}
		req, err := decodePutJobs(r)
		if err != nil {
			return
		}
		for _, j := range req.Jobs {
			spec, err := j.Spec.JobSpec()
			if err != nil {
				continue
			}
			cmd := state.PutJob{Name: j.Name, Spec: spec, At: time.Unix(1_800_000_000, 0)}
			if cmd.Validate() != nil {
				continue
			}
			if _, err := state.Encode(cmd); err != nil {
				t.Fatalf("a valid PutJob does not encode: %v", err)
			}
		}
	})
}

// FuzzPutJobsMsgpack holds the msgpack job write to the JSON one. Any
// bytes fed as msgpack are refused with an error, never a panic, and
// whatever passes encodes again to the same jobs. Any bytes that decode
// as a JSON job write, re-encoded in msgpack, decode through the msgpack
// path to the same jobs: the Go client's msgpack loses nothing that its
// JSON carried.
func FuzzPutJobsMsgpack(f *testing.F) {
	v := uint64(7)
	for _, req := range []api.PutJobs{
		{Jobs: []api.PutJob{{Name: "a", Spec: api.Spec{Schedule: "@hourly", NomadJob: "p"}}}},
		{Jobs: []api.PutJob{{Name: "b", IfVersion: &v, Spec: api.Spec{Schedule: "0 ? * * *", TimeZone: "Europe/Berlin",
			Concurrency: "forbid", CatchupWindow: api.Duration(10 * time.Minute), Delivery: "at-least-once",
			NomadJob: "p", Meta: map[string]string{"k": "v"}, Payload: []byte{0, 0xff}}}}, SkipNomadCheck: true},
	} {
		b, err := api.EncodeMsgpack(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if b, err = json.Marshal(req); err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"jobs":[{"name":"a","spec":{"schedule":"@hourly","nomad_job":"p","payload":"","meta":{}}}]}`))
	decode := func(ct string, body []byte) (api.PutJobs, error) {
		r := httptest.NewRequest("POST", "/v1/jobs", bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		return decodePutJobs(r)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if req, err := decode(api.MsgpackContentType, body); err == nil {
			again, err := api.EncodeMsgpack(req)
			if err != nil {
				t.Fatalf("decoded %+v, which does not encode: %v", req, err)
			}
			req2, err := decode(api.MsgpackContentType, again)
			if err != nil || !samePutJobs(req, req2) {
				t.Fatalf("decoded %+v; encoded again and decoded: %+v, %v", req, req2, err)
			}
		}
		fromJSON, err := decode("application/json", body)
		if err != nil {
			return
		}
		b, err := api.EncodeMsgpack(fromJSON)
		if err != nil {
			t.Fatalf("a JSON job write %+v does not encode in msgpack: %v", fromJSON, err)
		}
		fromMsgpack, err := decode(api.MsgpackContentType, b)
		if err != nil || !samePutJobs(fromJSON, fromMsgpack) {
			t.Fatalf("JSON %q decodes to %+v; in msgpack to %+v, %v", body, fromJSON, fromMsgpack, err)
		}
	})
}

// samePutJobs compares two job writes, an empty payload or meta equal to
// none (omitted from either encoding when empty).
func samePutJobs(a, b api.PutJobs) bool {
	norm := func(r api.PutJobs) api.PutJobs {
		r.Jobs = slices.Clone(r.Jobs)
		for i := range r.Jobs {
			if len(r.Jobs[i].Spec.Payload) == 0 {
				r.Jobs[i].Spec.Payload = nil
			}
			if len(r.Jobs[i].Spec.Meta) == 0 {
				r.Jobs[i].Spec.Meta = nil
			}
		}
		if len(r.Jobs) == 0 {
			r.Jobs = nil
		}
		return r
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// Request shapes of FuzzAPIRequest, picked by its byte arguments.
var (
	fuzzMethods = []string{"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"}
	fuzzTokens  = []string{"", readToken, writeToken, "Bearer", "x" + writeToken, writeToken[:len(writeToken)-1], " " + writeToken}
	fuzzTypes   = []string{"", "application/json", "application/hcl", "text/plain; charset=utf-8", "multipart/form-data; boundary=x", "application/json; charset=\"utf", api.MsgpackContentType}
)

// FuzzAPIRequest sends any request under /v1/ to the leader of a running
// cluster: any method, path, query, token, content type and body. The
// answer is never a 500, a refusal is a JSON error, a request without the
// write token changes no job (create, replace, pause, delete), and a job
// a request created can be read at its path. On a loaded machine the lead
// may move meanwhile: the replica first found leading then forwards what
// it cannot serve, and its state is read once it applied what the call
// wrote elsewhere.
func FuzzAPIRequest(f *testing.F) {
	c := startCluster(f)
	leader := c.servers[c.leader()-1]
	h := leader.http.Handler
	put := `{"jobs":[{"name":"fz","spec":{"schedule":"@yearly","nomad_job":"p"}}],"skip_nomad_check":true}`
	f.Add(uint8(1), "jobs", "", uint8(2), uint8(1), []byte(put))
	f.Add(uint8(1), "jobs", "", uint8(1), uint8(1), []byte(put))
	f.Add(uint8(1), "jobs", "skip_nomad_check=true", uint8(2), uint8(2), []byte("cron \"fz\" {\n schedule = \"@yearly\"\n nomad { job = \"p\" }\n}\n"))
	f.Add(uint8(0), "jobs", "limit=0&prefix=%00&after=..", uint8(1), uint8(0), []byte(nil))
	f.Add(uint8(0), "jobs/fz", "next=101&stale=true", uint8(1), uint8(0), []byte(nil))
	f.Add(uint8(0), "jobs/..%2Ffz", "", uint8(1), uint8(0), []byte(nil))
	f.Add(uint8(2), "jobs/fz", "if_version=-1", uint8(2), uint8(0), []byte(nil))
	f.Add(uint8(2), "jobs/fz", "", uint8(0), uint8(0), []byte(nil))
	f.Add(uint8(1), "jobs/fz/pause", "", uint8(4), uint8(0), []byte(nil))
	f.Add(uint8(1), "jobs/fz/backfill", "", uint8(2), uint8(1), []byte(`{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:00:05Z"}`))
	f.Add(uint8(1), "jobs/fz/trigger", "", uint8(2), uint8(1), []byte(`{"force":true,"at":1}`))
	f.Add(uint8(0), "operator/snapshot", "", uint8(1), uint8(0), []byte(nil))
	f.Add(uint8(1), "operator/backup", "", uint8(3), uint8(0), []byte(nil))
	f.Add(uint8(3), "jobs", "", uint8(2), uint8(1), []byte(put))
	f.Fuzz(func(t *testing.T, method uint8, path, query string, token, ctype uint8, body []byte) {
		r, err := http.NewRequest(fuzzMethods[int(method)%len(fuzzMethods)], "http://replica/v1/"+path+"?"+query, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		tok := fuzzTokens[int(token)%len(fuzzTokens)]
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		if ct := fuzzTypes[int(ctype)%len(fuzzTypes)]; ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		before := jobVersions(t, leader)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		checkAPIAnswer(t, r, w)
		appliedAll(t, c, leader)
		after := jobVersions(t, leader)
		if tok != writeToken && !maps.Equal(before, after) {
			t.Fatalf("%s %s without the write token changed the jobs: %v to %v", r.Method, r.URL, before, after)
		}
		for name := range after {
			if _, ok := before[name]; !ok {
				checkAddressable(t, h, name)
			}
		}
	})
}

// checkAddressable: a job the API created can be read at its path.
func checkAddressable(t *testing.T, h http.Handler, name string) {
	t.Helper()
	r := httptest.NewRequest("GET", "http://replica/v1/jobs/"+url.PathEscape(name)+"?stale=true", nil)
	r.Header.Set("Authorization", "Bearer "+readToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("job %q was created but GET %s answers %d %s", name, r.URL, w.Code, w.Body)
	}
}

// checkAPIAnswer: no 500, and a refusal (other than a redirect to the
// cleaned path) is a JSON {"error": ...}.
func checkAPIAnswer(t *testing.T, r *http.Request, w *httptest.ResponseRecorder) {
	t.Helper()
	code := w.Code
	switch {
	case code == http.StatusInternalServerError:
		t.Fatalf("%s %s: 500 %s", r.Method, r.URL, w.Body)
	case code >= 300 && code < 400:
		if loc := w.Header().Get("Location"); !strings.HasPrefix(loc, "/") {
			t.Fatalf("%s %s: redirected to %q", r.Method, r.URL, loc)
		}
	case code >= 400:
		var e struct {
			Error string `json:"error"`
		}
		if r.Method != "HEAD" && (json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "") {
			t.Fatalf("%s %s: %d with %q, not a JSON error", r.Method, r.URL, code, w.Body)
		}
	}
}

// jobVersions is every job's version and whether it is paused.
func jobVersions(t *testing.T, s *Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.Node().Cron(context.Background(), func(l *launcher.Launcher) {
		page, _ := l.Machine().JobsPage("", "", 1<<20)
		for _, j := range page {
			out[j.Name] = fmt.Sprintf("v%d paused=%v", j.Version, j.Paused)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzDecodeBundle feeds any bytes to the leader's decoder of a
// follower's bundle: it refuses with an error, never a panic, and a
// bundle it takes re-encodes and decodes to as many calls, each of which
// validate judges without a panic (the leader answers those it refuses
// alone).
func FuzzDecodeBundle(f *testing.F) {
	for _, bd := range []bundle{
		{Calls: []bundleCall{{Method: "POST", Path: "/v1/jobs", Auth: "Bearer t", ContentType: "application/json", Body: []byte(`{"jobs":[]}`)}}},
		{Calls: []bundleCall{{Method: "GET", Path: "/v1/jobs/a?stale=true"}, {Method: "DELETE", Path: "/v1/jobs/a?if_version=3"}}},
		{Calls: []bundleCall{{Method: "POST", Path: bundlePath}}},
	} {
		var b []byte
		if err := codec.NewEncoderBytes(&b, bundleHandle).Encode(bd); err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x91, 0x90})
	f.Fuzz(func(t *testing.T, b []byte) {
		bd, err := decodeBundle(b)
		if err != nil {
			return
		}
		for i := range bd.Calls {
			_ = bd.Calls[i].validate()
		}
		var again []byte
		if err := codec.NewEncoderBytes(&again, bundleHandle).Encode(bd); err != nil {
			t.Fatalf("a decoded bundle does not encode: %v", err)
		}
		bd2, err := decodeBundle(again)
		if err != nil || len(bd2.Calls) != len(bd.Calls) {
			t.Fatalf("a re-encoded bundle decodes to %d calls, %v; want %d", len(bd2.Calls), err, len(bd.Calls))
		}
	})
}

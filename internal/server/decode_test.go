package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"paxcron/internal/api"
)

// TestBodiesNamingAKeyTwiceAreRefused: a JSON or msgpack body that
// names one key twice in an object kept the last value without a word
// (encoding/json and go-msgpack both do), where a cron file refuses a
// duplicate key. Every body the API decodes now refuses it with a 400
// naming the key's path, at any depth; in a struct, keys that set the
// same field (encoding/json folds case) are the same key, in a map
// (meta) they are not. Found in review.
func TestBodiesNamingAKeyTwiceAreRefused(t *testing.T) {
	const job = `{"name":"a","spec":{"schedule":"@hourly","nomad_job":"p"}}`
	manyMeta := ""
	for i := range 12 {
		manyMeta += fmt.Sprintf(`"k%d":"v",`, i)
	}
	for _, tc := range []struct {
		name, path, ct string
		body           []byte
		says           string // "" for a body that is taken
	}{
		{"top level", "/v1/jobs", "application/json",
			[]byte(`{"jobs":[` + job + `],"skip_nomad_check":true,"skip_nomad_check":false}`), "skip_nomad_check is set twice"},
		{"a spec's field", "/v1/jobs", "application/json",
			[]byte(`{"jobs":[{"name":"a","spec":{"schedule":"@hourly","nomad_job":"p","schedule":"@daily"}}]}`), "jobs[0].spec.schedule is set twice"},
		{"a job's name", "/v1/jobs", "application/json",
			[]byte(`{"jobs":[` + job + `,{"name":"b","spec":{"schedule":"@hourly","nomad_job":"p"},"name":"c"}]}`), "jobs[1].name is set twice"},
		{"a meta key", "/v1/jobs", "application/json",
			[]byte(`{"jobs":[{"name":"a","spec":{"schedule":"@hourly","nomad_job":"p","meta":{"owner":"ops","owner":"dev"}}}]}`), "jobs[0].spec.meta.owner is set twice"},
		{"a meta key among many", "/v1/jobs", "application/json",
			[]byte(`{"jobs":[{"name":"a","spec":{"schedule":"@hourly","nomad_job":"p","meta":{` + manyMeta + `"k3":"w"}}}]}`), "jobs[0].spec.meta.k3 is set twice"},
		{"a meta key that is no plain name", "/v1/jobs", "application/json",
			[]byte(`{"jobs":[{"name":"a","spec":{"schedule":"@hourly","nomad_job":"p","meta":{"a.b":"x","a.b":"y"}}}]}`), `jobs[0].spec.meta["a.b"] is set twice`},
		{"a field in another case", "/v1/jobs", "application/json",
			[]byte(`{"jobs":[{"name":"a","spec":{"schedule":"@hourly","nomad_job":"p","Schedule":"@daily"}}]}`), `jobs[0].spec.schedule is set twice (as "schedule" and as "Schedule"`},
		{"meta keys that differ in case", "/v1/jobs", "application/json",
			[]byte(`{"jobs":[{"name":"a","spec":{"schedule":"@hourly","nomad_job":"p","meta":{"Owner":"ops","owner":"dev"}}}]}`), ""},
		{"a trigger", "/v1/jobs/a/trigger", "application/json", []byte(`{"force":true,"force":false}`), "force is set twice"},
		{"a backfill", "/v1/jobs/a/backfill", "application/json",
			[]byte(`{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z","from":"2026-01-01T12:00:00Z"}`), "from is set twice"},
		{"msgpack, top level", "/v1/jobs", api.MsgpackContentType,
			mpMap(t, "jobs", mpRaw(mpArray(t, mpMap(t, "name", "a", "spec", mpRaw(mpMap(t, "schedule", "@hourly", "nomad_job", "p"))))),
				"skip_nomad_check", true, "skip_nomad_check", false), "skip_nomad_check is set twice"},
		{"msgpack, a meta key", "/v1/jobs", api.MsgpackContentType,
			mpMap(t, "jobs", mpRaw(mpArray(t, mpMap(t, "name", "a", "spec", mpRaw(mpMap(t, "schedule", "@hourly", "nomad_job", "p",
				"meta", mpRaw(mpMap(t, "owner", "ops", "owner", "dev")))))))), "jobs[0].spec.meta.owner is set twice"},
		// go-msgpack takes a byte string for a string key: the same key.
		{"msgpack, a key as text and as bytes", "/v1/jobs", api.MsgpackContentType,
			mpMap(t, "jobs", mpRaw(mpArray(t, mpMap(t, "name", "a", "spec", mpRaw(mpMap(t, "schedule", "@hourly", "nomad_job", "p",
				[]byte("schedule"), "@daily")))))), "jobs[0].spec.schedule is set twice"},
		{"msgpack, meta keys that differ in case", "/v1/jobs", api.MsgpackContentType,
			mpMap(t, "jobs", mpRaw(mpArray(t, mpMap(t, "name", "a", "spec", mpRaw(mpMap(t, "schedule", "@hourly", "nomad_job", "p",
				"meta", mpRaw(mpMap(t, "Owner", "ops", "owner", "dev")))))))), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tc.path, nil)
			r.Body = newMemBody(tc.body)
			r.Header.Set("Content-Type", tc.ct)
			var err error
			switch {
			case strings.HasSuffix(tc.path, "/trigger"):
				var body api.Trigger
				err = decodeOptional(r, &body)
			case strings.HasSuffix(tc.path, "/backfill"):
				var body api.Backfill
				err = decodeOptional(r, &body)
			default:
				_, err = decodePutJobs(r)
			}
			if tc.says == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *api.Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, tc.says) {
				t.Fatalf("got %v; want a 400 saying %q", err, tc.says)
			}
		})
	}
}

// mpRaw is msgpack already encoded, for mpMap and mpArray to copy.
type mpRaw []byte

// mpMap encodes a msgpack map of its pairs in order, a key twice if
// asked (go-msgpack encodes a Go map, which cannot hold one).
func mpMap(t *testing.T, pairs ...any) mpRaw {
	t.Helper()
	if len(pairs)%2 != 0 || len(pairs)/2 > 15 {
		t.Fatalf("mpMap: %d items", len(pairs))
	}
	return mpItems(t, 0x80|byte(len(pairs)/2), pairs)
}

func mpArray(t *testing.T, items ...any) mpRaw {
	t.Helper()
	return mpItems(t, 0x90|byte(len(items)), items)
}

func mpItems(t *testing.T, head byte, items []any) mpRaw {
	t.Helper()
	out := []byte{head}
	for _, it := range items {
		if raw, ok := it.(mpRaw); ok {
			out = append(out, raw...)
			continue
		}
		b, err := api.EncodeMsgpack(it)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

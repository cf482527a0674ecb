package server

import (
	"bytes"
	"net/http/httptest"
	"testing"
	"time"

	"paxcron/cron/state"
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

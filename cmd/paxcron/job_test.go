package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestJobValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.hcl")
	os.WriteFile(good, []byte(`
cron "nightly-report" {
  schedule  = "0 ? * * *"
  time_zone = "Europe/Berlin"
  nomad {
    job       = "report"
    namespace = "analytics"
  }
}
cron "every-5m" {
  schedule    = "*/5 * * * *"
  concurrency = "forbid"
  nomad { job = "ping" }
}
`), 0o644)
	bad := filepath.Join(dir, "bad.hcl")
	os.WriteFile(bad, []byte("cron \"a\" {\n  schedule = \"0 25 * * *\"\n  nomad { job = \"p\" }\n}\n"), 0o644)

	code, out, errOut := runCLI(t, "job", "validate", "-n", "2", good)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"nightly-report: 0 ", "(Europe/Berlin), dispatches report in namespace analytics; concurrency allow, catch-up window 5m0s",
		"every-5m: */5 * * * *  (UTC), dispatches ping; concurrency forbid",
		"  2026-11-23T12:05:00Z\n  2026-11-23T12:10:00Z\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "?") {
		t.Errorf("output shows an unresolved schedule:\n%s", out)
	}

	code, out, _ = runCLI(t, "job", "validate", "-json", good)
	var got []jobValidateOutput
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 2 || len(got[1].Next) != 3 || got[1].Concurrency != "forbid" {
		t.Fatalf("json: exit %d, %s", code, out)
	}

	code, _, errOut = runCLI(t, "job", "validate", bad)
	if code != 1 || !strings.Contains(errOut, "bad.hcl:2,14: Invalid schedule") || !strings.Contains(errOut, "hour") {
		t.Fatalf("bad file: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "job", "validate", filepath.Join(dir, "missing.hcl"))
	if code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing file: exit %d, stderr %q", code, errOut)
	}
	for _, args := range [][]string{{"job"}, {"job", "validate"}, {"job", "validate", good, good}, {"job", "validate", "-n", "-1", good}, {"job", "launch"}} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if code, out, _ := runCLI(t, "job", "-h"); code != 0 || !strings.Contains(out, "validate") {
		t.Errorf("job -h: exit %d, %q", code, out)
	}
}

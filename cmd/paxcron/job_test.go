package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"paxcron/cron/cronfile"
	"paxcron/cron/state"
	"paxcron/internal/api"
	"paxcron/nomad/nomadtest"
)

func TestMain(m *testing.M) { os.Exit(nomadtest.Main(m, nomadtest.Options{})) }

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
		"nightly-report: 0 ", "(Europe/Berlin), dispatches report in namespace analytics; concurrency allow, catch-up window 5m0s, at-most-once",
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

// TestJobTakeover: a periodic jobspec read by a real agent becomes cron
// blocks that parse back; -register replaces the job in Nomad.
func TestJobTakeover(t *testing.T) {
	agent := nomadtest.Shared(t)
	t.Setenv("NOMAD_ADDR", agent.Addr)
	t.Setenv("NOMAD_TOKEN", agent.Token)
	dir := t.TempDir()
	spec := filepath.Join(dir, "report.nomad.hcl")
	os.WriteFile(spec, []byte(`
job "report" {
  type        = "batch"
  datacenters = ["*"]
  periodic {
    crons     = ["0 2 * * *", "30 14 * * 1-5"]
    time_zone = "Europe/Berlin"
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
`), 0o644)
	code, out, errOut := runCLI(t, "job", "takeover", spec)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	crons, err := cronfile.Parse("out.hcl", []byte(out), dir)
	if err != nil || len(crons) != 2 || crons[0].Name != "report-1" || crons[1].Spec.Concurrency == state.ConcurrencyForbid || crons[0].Spec.TimeZone != "Europe/Berlin" {
		t.Fatalf("output does not parse to the two cron jobs: %v\n%s", err, out)
	}
	if !strings.Contains(out, "run again with -register") {
		t.Errorf("dry run does not say how to register:\n%s", out)
	}
	if code, _, errOut := runCLI(t, "job", "takeover", "-register", spec); code != 0 || !strings.Contains(errOut, "is now a parameterized job") {
		t.Fatalf("-register: exit %d: %s", code, errOut)
	}
	bad := filepath.Join(dir, "plain.nomad.hcl")
	os.WriteFile(bad, []byte("job \"plain\" {\n type = \"batch\"\n group \"g\" {\n task \"t\" {\n driver = \"raw_exec\"\n config { command = \"/bin/true\" }\n }\n }\n}\n"), 0o644)
	if code, _, errOut := runCLI(t, "job", "takeover", bad); code != 1 || !strings.Contains(errOut, "no periodic block") {
		t.Fatalf("plain job: exit %d: %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "job", "takeover"); code != 2 {
		t.Fatalf("no file: exit %d", code)
	}
}

// The example jobspec that runs paxcron on Nomad is one Nomad accepts.
func TestExampleNomadJobspec(t *testing.T) {
	agent := nomadtest.Shared(t)
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "paxcron.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := nomadapi.NewClient(&nomadapi.Config{Address: agent.Addr, SecretID: agent.Token})
	if err != nil {
		t.Fatal(err)
	}
	for _, vars := range []string{"", "bootstrap=true\n"} {
		job, err := client.Jobs().ParseHCLOpts(&nomadapi.JobsParseRequest{JobHCL: string(src), Variables: vars})
		if err != nil {
			t.Fatalf("parse (%q): %v", vars, err)
		}
		if len(job.TaskGroups) != 3 {
			t.Fatalf("%d groups, want one per replica", len(job.TaskGroups))
		}
		args := job.TaskGroups[0].Tasks[0].Config["args"]
		if got := fmt.Sprint(args); strings.Contains(got, "-bootstrap") != (vars != "") {
			t.Errorf("args %s with variables %q", got, vars)
		}
		resp, _, err := client.Jobs().Validate(job, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Error != "" || len(resp.ValidationErrors) > 0 {
			t.Fatalf("Nomad refuses the example: %s %v", resp.Error, resp.ValidationErrors)
		}
		if resp.Warnings != "" {
			t.Logf("warnings: %s", resp.Warnings)
		}
	}
}

// TestJobStatusNextLaunches: -n is sent as given, 0 included (it once
// left the server's default of 5), and outside 0 to MaxNextLaunches it is
// refused before any call.
func TestJobStatusNextLaunches(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+"?next="+r.URL.Query().Get("next"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"name":"nightly","version":1}`)
	}))
	defer srv.Close()
	status := func(n string) (int, string) {
		code, _, errOut := runCLI(t, "job", "status", "-address", srv.URL, "-token", "cli-test-token-0123456789", "-n", n, "nightly")
		return code, errOut
	}
	if code, errOut := status("0"); code != 0 {
		t.Fatalf("-n 0: exit %d: %s", code, errOut)
	}
	for _, n := range []string{"-1", strconv.Itoa(api.MaxNextLaunches + 1)} {
		if code, errOut := status(n); code != 2 || !strings.Contains(errOut, "-n must be 0 to") {
			t.Errorf("-n %s: exit %d, %q; want 2 and the range", n, code, errOut)
		}
	}
	// A flag of the other form is refused, not ignored (found in review).
	for _, args := range [][]string{{"-n", "3"}, {"-prefix", "night", "nightly"}} {
		code, _, errOut := runCLI(t, append([]string{"job", "status", "-address", srv.URL, "-token", "cli-test-token-0123456789"}, args...)...)
		if code != 2 {
			t.Errorf("job status %v: exit %d, %q; want 2", args, code, errOut)
		}
	}
	if want := []string{"/v1/jobs/nightly?next=0"}; !slices.Equal(asked, want) {
		t.Fatalf("asked %v, want %v", asked, want)
	}
}

// TestJobStatusSaysAJobEnded: a job whose schedule has no launch left
// within reach was listed as "active" with no next launch, and its own
// page showed an empty list of next launches without a word.
func TestJobStatusSaysAJobEnded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/jobs":
			fmt.Fprint(w, `{"jobs":[{"name":"leap","version":1,"resolved_schedule":"0 0 0 * 2 MON#5","ended":true},`+
				`{"name":"held","version":2,"resolved_schedule":"0 * * * * *","paused":true,"next_at":"2040-01-01T00:00:00Z"}],"index":7}`)
		default:
			fmt.Fprint(w, `{"name":"leap","version":1,"ended":true,"paused":true}`)
		}
	}))
	defer srv.Close()
	flags := []string{"-address", srv.URL, "-token", "cli-test-token-0123456789"}
	code, out, errOut := runCLI(t, append([]string{"job", "status"}, flags...)...)
	if code != 0 {
		t.Fatalf("job status: exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[1], "leap") || !strings.HasSuffix(lines[1], "ended") || !strings.HasSuffix(lines[2], "paused") {
		t.Errorf("the listing:\n%s\nwant leap ended and held paused", out)
	}
	code, out, errOut = runCLI(t, append(append([]string{"job", "status"}, flags...), "leap")...)
	if code != 0 {
		t.Fatalf("job status leap: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "ended: its schedule has no launch") || !strings.Contains(out, "Next launches\n  (none)") {
		t.Errorf("job status leap:\n%s\nwant its state ended and no next launch said so", out)
	}
}

// TestExitStatusSaysWhetherAWriteMayHaveBeenDone: 5 ("retry") only where
// nothing was done (the call never reached a replica) or for a read; a
// write that reached one and got no answer, or a 502 or 504 from a
// forwarding replica (unless it says nothing was done), may have been
// done: 6. A script that retried a
// trigger on 5 once launched twice.
func TestExitStatusSaysWhetherAWriteMayHaveBeenDone(t *testing.T) {
	hangUp := hangUpServer(t)
	badGateway := badGatewayServer(t, `{"error":"forwarding to the leader: connection reset"}`)
	// A 502 that says nothing was done (Nomad could not be asked before
	// a job write): 5.
	notDone := badGatewayServer(t, `{"error":"job \"nightly\": could not check it against Nomad (connection refused): nothing was written","not_done":true}`)
	closed := httptest.NewServer(http.NotFoundHandler())
	nowhere := closed.URL
	closed.Close() // nothing listens there now: calls are never sent
	for _, tc := range []struct {
		name, address string
		args          []string
		want          int
		says          string
	}{
		{"trigger, no answer", hangUp.URL, []string{"trigger", "nightly"}, 6, "may have been done"},
		{"trigger, 502", badGateway.URL, []string{"trigger", "nightly"}, 6, "may have been done"},
		{"trigger, 502, nothing done", notDone.URL, []string{"trigger", "nightly"}, 5, "nothing was written"},
		{"trigger, never sent", nowhere, []string{"trigger", "nightly"}, 5, ""},
		{"status, 502", badGateway.URL, []string{"status", "nightly"}, 5, ""},
		{"status, no answer", hangUp.URL, []string{"status", "nightly"}, 5, ""},
	} {
		args := append([]string{"job", tc.args[0], "-address", tc.address, "-token", "cli-test-token-0123456789"}, tc.args[1:]...)
		code, _, errOut := runCLI(t, args...)
		if code != tc.want || !strings.Contains(errOut, tc.says) {
			t.Errorf("%s: exit %d, %q; want %d saying %q", tc.name, code, errOut, tc.want, tc.says)
		}
	}
}

// TestJobRunSendsALargeFileInParts: a file of more jobs than one request
// takes (api.MaxJobsPerRequest) is sent in several, in its order, and a
// failure part way says which jobs were written. Found in review: `job
// validate` passed a file of 1,001 jobs that `job run` could not submit.
func TestJobRunSendsALargeFileInParts(t *testing.T) {
	const jobs = 2*api.MaxJobsPerRequest + 1
	var src strings.Builder
	for i := range jobs {
		fmt.Fprintf(&src, "cron \"j%04d\" {\n  schedule = \"@daily\"\n  nomad { job = \"report\" }\n}\n", i)
	}
	file := filepath.Join(t.TempDir(), "jobs.hcl")
	if err := os.WriteFile(file, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var first []string
	failAt := 0 // the request that fails (1-based), 0 for none
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusUnsupportedMediaType) // the client sends JSON then
			return
		}
		var req api.PutJobs
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sizes = append(sizes, len(req.Jobs))
		first = append(first, req.Jobs[0].Name)
		w.Header().Set("Content-Type", "application/json")
		if len(sizes) == failAt {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"error":"job changed meanwhile"}`)
			return
		}
		var res api.PutJobsResult
		for _, j := range req.Jobs {
			res.Jobs = append(res.Jobs, api.PutResult{Name: j.Name, Created: true, Version: 1})
		}
		_ = json.NewEncoder(w).Encode(res)
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, "job", "run", "-address", srv.URL, "-token", "cli-test-token-0123456789", file)
	if code != 0 || strings.Count(out, "created") != jobs {
		t.Fatalf("exit %d, %d created; stderr %q", code, strings.Count(out, "created"), errOut)
	}
	if !slices.Equal(sizes, []int{1000, 1000, 1}) || !slices.Equal(first, []string{"j0000", "j1000", "j2000"}) {
		t.Fatalf("requests of %v jobs from %v; want 1000, 1000, 1 in the file's order", sizes, first)
	}
	sizes, first, failAt = nil, nil, 2
	code, _, errOut = runCLI(t, "job", "run", "-address", srv.URL, "-token", "cli-test-token-0123456789", file)
	if code != exitConflict || !strings.Contains(errOut, "first 1000 jobs were written; jobs 1001-2001") || len(sizes) != 2 {
		t.Fatalf("a failure in the second request: exit %d, %d requests, %q", code, len(sizes), errOut)
	}
}

// TestOperatorReadsAreNotWrites: `operator status` and `operator snapshot
// save` change nothing, so a call that reached the replica and got no
// answer, or a 502, is as safe to send again as any read: exit 5. They
// were taken for writes: exit 6, saying "the write was sent ... it may
// have been done; look before sending it again" of a status read.
func TestOperatorReadsAreNotWrites(t *testing.T) {
	hangUp := hangUpServer(t)
	badGateway := badGatewayServer(t, `{"error":"upstream failed"}`)
	file := filepath.Join(t.TempDir(), "state.snap")
	for _, addr := range []string{hangUp.URL, badGateway.URL} {
		for _, args := range [][]string{{"operator", "status"}, {"operator", "snapshot", "save", file}} {
			args := append(append([]string{}, args...), "-address", addr, "-token", "cli-test-token-0123456789")
			code, _, errOut := runCLI(t, args...)
			if code != exitUnavailable || strings.Contains(errOut, "write") {
				t.Errorf("%v: exit %d, %q; want %d, and no word of a write", args[:len(args)-4], code, errOut, exitUnavailable)
			}
		}
	}
	// Neither takes -stale: each is served by the replica asked.
	if code, _, _ := runCLI(t, "operator", "status", "-stale", "-address", hangUp.URL); code != exitUsage {
		t.Errorf("operator status -stale: exit %d, want %d", code, exitUsage)
	}
}

// TestJobValidateRefusesAScheduleThatNeverFires: a schedule with no
// launch within schedule.SearchYears is refused by the cluster (a 400:
// the state would hold the job with no next launch), so `job validate`,
// which "checks a file as the cluster will", fails it too, naming the
// block. It passed it (exit 0, no launch listed), and
// `job run` of the same file was then refused.
func TestJobValidateRefusesAScheduleThatNeverFires(t *testing.T) {
	file := filepath.Join(t.TempDir(), "leap.hcl")
	// The fifth Monday of February next falls in 2044; runCLI's clock
	// says 2026.
	src := "cron \"ok\" {\n  schedule = \"@daily\"\n  nomad { job = \"p\" }\n}\ncron \"leap\" {\n  schedule = \"0 0 * 2 MON#5\"\n  nomad { job = \"p\" }\n}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"job", "validate", file}, {"job", "validate", "-n", "0", file}, {"job", "validate", "-json", file}} {
		code, out, errOut := runCLI(t, args...)
		if code != 1 || !strings.Contains(errOut, "leap.hcl:5,1: cron \"leap\"") || !strings.Contains(errOut, "never fires within") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 naming the block", args[:len(args)-1], code, out, errOut)
		}
	}
}

// TestJobValidateRefusesAScheduleThatLapses: a schedule that fires
// soon but then not again for more than schedule.SearchYears is refused
// by the cluster (firesSoonEnough), so `job validate` fails it too,
// naming the block and both launches. It passed it.
func TestJobValidateRefusesAScheduleThatLapses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "lapse.hcl")
	// The 1st of February on a Monday: 2027, then 2038; runCLI's clock
	// says 2026.
	src := "cron \"ok\" {\n  schedule = \"0 0 29 2 *\"\n  nomad { job = \"p\" }\n}\ncron \"monday\" {\n  schedule = \"0 0 */31 2 MON\"\n  nomad { job = \"p\" }\n}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "job", "validate", file)
	if code != 1 || !strings.Contains(errOut, "lapse.hcl:5,1: cron \"monday\"") ||
		!strings.Contains(errOut, "2027-02-01T00:00:00Z and next at 2038-02-01T00:00:00Z") || strings.Contains(errOut, "\"ok\"") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 naming the block and both launches", code, out, errOut)
	}
}

// TestOperatorStatusShowsSharedSettings: `operator status` says whether
// the replica compares the settings every replica must share, and names
// the peers and settings that differ.
func TestOperatorStatusShowsSharedSettings(t *testing.T) {
	for _, c := range []struct {
		status api.Status
		want   string
	}{
		{api.Status{}, "Shared settings  not compared (gossip is off"},
		{api.Status{SettingsCompared: true}, "Shared settings  the same on every replica heard"},
		{api.Status{SettingsCompared: true, SettingsDiffer: []api.SettingsDiffer{{Replica: 2, Settings: []string{"backup.url"}}, {Replica: 3, Settings: []string{"backup.url", "nomad.namespace"}}}},
			"Shared settings  DIFFER: replica 2's backup.url; replica 3's backup.url, nomad.namespace (only the leader"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(c.status)
		}))
		code, out, errOut := runCLI(t, "operator", "status", "-address", srv.URL, "-token", "cli-test-token-0123456789")
		srv.Close()
		if code != exitOK || !strings.Contains(out, c.want) {
			t.Errorf("operator status of %+v: exit %d, want a line %q:\n%s%s", c.status, code, c.want, out, errOut)
		}
	}
}

// hangUpServer takes each request and closes its connection: the call
// arrived, and no answer leaves.
func hangUpServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// badGatewayServer answers every request 502 with the JSON body given.
func badGatewayServer(t *testing.T, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestJobRunBadFileExitsAsValidateDoes: a file with problems is exit 1 in
// `job validate`; `job run` of the same file said 2, "bad usage", though
// its command line was right (found in review). Nothing is sent.
func TestJobRunBadFileExitsAsValidateDoes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.hcl")
	if err := os.WriteFile(bad, []byte("cron \"a\" {\n  schedule = \"0 25 * * *\"\n  nomad { job = \"p\" }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls++ }))
	t.Cleanup(srv.Close)
	for _, file := range []string{bad, filepath.Join(dir, "missing.hcl")} {
		vcode, _, _ := runCLI(t, "job", "validate", file)
		code, _, errOut := runCLI(t, "job", "run", "-address", srv.URL, file)
		if code != vcode || code != exitFailed || !strings.Contains(errOut, filepath.Base(file)) {
			t.Errorf("job run %s: exit %d (validate %d), stderr %q; want %d naming the file", filepath.Base(file), code, vcode, errOut, exitFailed)
		}
	}
	if calls != 0 {
		t.Errorf("%d calls reached the replica; want none", calls)
	}
	if code, _, _ := runCLI(t, "job", "run", "-address", srv.URL); code != exitUsage {
		t.Errorf("job run with no FILE: exit %d, want %d", code, exitUsage)
	}
}

// TestHelpDoesNotShowTheToken: -token took PAXCRON_TOKEN as its flag
// default, so every -h, and every usage error (which prints the flags),
// wrote the API token to stderr, into a terminal's scrollback or a CI
// log ("the API token (PAXCRON_TOKEN) (default \"...\")"). The server's
// help keeps its secrets out; the commands' now do too, and the variable
// is still what the calls send. Found in review.
func TestHelpDoesNotShowTheToken(t *testing.T) {
	const token = "env-token-0123456789-secret"
	t.Setenv("PAXCRON_TOKEN", token)
	for _, args := range [][]string{
		{"job", "status", "-h"}, {"job", "trigger", "-h"}, {"job", "status", "a", "b"},
		{"operator", "status", "-h"}, {"operator", "snapshot", "save", "-h"}, {"job", "run", "-nope"},
	} {
		_, out, errOut := runCLI(t, args...)
		if strings.Contains(out+errOut, token) {
			t.Errorf("%v shows the token:\n%s%s", args, out, errOut)
		}
	}
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"index":7}`)
	}))
	t.Cleanup(srv.Close)
	if code, _, errOut := runCLI(t, "job", "pause", "-address", srv.URL, "nightly"); code != exitOK {
		t.Fatalf("pause: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "job", "pause", "-address", srv.URL, "-token", "flag-token-0123456789", "nightly"); code != exitOK {
		t.Fatalf("pause -token: exit %d, %q", code, errOut)
	}
	if want := []string{"Bearer " + token, "Bearer flag-token-0123456789"}; !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q: PAXCRON_TOKEN, then -token over it", got, want)
	}
}

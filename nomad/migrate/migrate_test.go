package migrate

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/cronexpr"
	"github.com/hashicorp/nomad/api"

	"paxcron/cron/schedule"
	"paxcron/cron/state"
	"paxcron/nomad"
	"paxcron/nomad/nomadtest"
)

func TestMain(m *testing.M) { os.Exit(nomadtest.Main(m, nomadtest.Options{})) }

func periodicJob(id string, p *api.PeriodicConfig) *api.Job {
	j := api.NewBatchJob(id, id, "global", 50)
	j.Namespace = new("default")
	j.Periodic = p
	return j
}

func TestConvert(t *testing.T) {
	j := periodicJob("nightly", &api.PeriodicConfig{Specs: []string{"0 2 * * *", "30 14 * * 1-5"}, TimeZone: new("Europe/Berlin"), ProhibitOverlap: new(false)})
	j.Meta = map[string]string{"owner": "ops"}
	tk, err := Convert(j)
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.Crons) != 2 || tk.Crons[0].Name != "nightly-1" || tk.Crons[1].Name != "nightly-2" || tk.Disabled {
		t.Fatalf("takeover %+v", tk)
	}
	want := state.JobSpec{Schedule: "0 2 * * *", TimeZone: "Europe/Berlin", Concurrency: state.ConcurrencyAllow, NomadJob: "nightly", Namespace: "default", Region: "global"}
	if got := tk.Crons[0].Spec; got.Schedule != want.Schedule || got.TimeZone != want.TimeZone || got.Concurrency != want.Concurrency || got.NomadJob != want.NomadJob || got.Namespace != want.Namespace || got.Region != want.Region {
		t.Fatalf("spec %+v, want %+v", got, want)
	}
	if tk.Parent.Periodic != nil || tk.Parent.ParameterizedJob == nil || !slices.Equal(tk.Parent.ParameterizedJob.MetaOptional, nomad.MetaKeys()) || *tk.Parent.ID != "nightly" || tk.Parent.Meta["owner"] != "ops" {
		t.Fatalf("parent %+v", tk.Parent)
	}
	if j.Periodic == nil || j.ParameterizedJob != nil {
		t.Fatal("Convert modified its input")
	}
	one, err := Convert(periodicJob("hourly", &api.PeriodicConfig{Spec: new("@hourly"), Enabled: new(false)}))
	if err != nil || len(one.Crons) != 1 || one.Crons[0].Name != "hourly" || !one.Disabled || one.Crons[0].Spec.Concurrency != state.ConcurrencyAllow || one.Crons[0].Spec.TimeZone != "" {
		t.Fatalf("single spec: %+v, %v", one, err)
	}
	forbid, err := Convert(periodicJob("hourly", &api.PeriodicConfig{Spec: new("@hourly"), ProhibitOverlap: new(true)}))
	if err != nil || len(forbid.Crons) != 1 || forbid.Crons[0].Spec.Concurrency != state.ConcurrencyForbid {
		t.Fatalf("single spec with prohibit_overlap: %+v, %v", forbid, err)
	}
}

func TestConvertRefuses(t *testing.T) {
	service := periodicJob("svc", &api.PeriodicConfig{Spec: new("@daily")})
	service.Type = new("service")
	both := periodicJob("both", &api.PeriodicConfig{Spec: new("@daily")})
	both.ParameterizedJob = &api.ParameterizedJobConfig{}
	for _, tc := range []struct {
		name string
		job  *api.Job
		want string
	}{
		{"no ID", &api.Job{}, "no job ID"},
		{"not periodic", api.NewBatchJob("x", "x", "global", 50), "no periodic block"},
		{"parameterized too", both, "both periodic and parameterized"},
		{"service", service, `type "service"`},
		{"no spec", periodicJob("x", &api.PeriodicConfig{}), "no cron expression"},
		{"spec type", periodicJob("x", &api.PeriodicConfig{Spec: new("@daily"), SpecType: new("other")}), "not cron"},
		{"year field", periodicJob("x", &api.PeriodicConfig{Spec: new("0 0 2 * * * 2027")}), "year field"},
		{"bad zone", periodicJob("x", &api.PeriodicConfig{Spec: new("@daily"), TimeZone: new("Mars/Olympus")}), "Mars/Olympus"},
		{"bad name", periodicJob("a b", &api.PeriodicConfig{Spec: new("@daily")}), "cannot name a cron job"},
		// Found in review: each cron job forbade overlap with its own
		// children only, where Nomad forbids it across the whole block.
		{"overlap across crons", periodicJob("x", &api.PeriodicConfig{Specs: []string{"0 2 * * *", "30 14 * * *"}, ProhibitOverlap: new(true)}), "prohibit_overlap with 2 crons"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Convert(tc.job); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Convert: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

const periodicSpec = `
job "report" {
  type        = "batch"
  datacenters = ["*"]
  meta { owner = "ops" }
  periodic {
    crons     = ["*/5 * * * *", "2 3 * * *"]
    time_zone = "America/New_York"
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
`

// takeOverRuns numbers TestTakeOverRealPeriodicJob's runs in this process.
var takeOverRuns atomic.Int64

// TestTakeOverRealPeriodicJob: a periodic jobspec read by the real agent's
// parser becomes a parent that Nomad registers as parameterized (its own
// periodic launching then stops) and that accepts a dispatch with
// paxcron's meta.
func TestTakeOverRealPeriodicJob(t *testing.T) {
	agent := nomadtest.Shared(t)
	c, err := api.NewClient(&api.Config{Address: agent.Addr, SecretID: agent.Token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The agent is the package's, kept across runs of the test (-count):
	// each run takes over a job of its own.
	name := fmt.Sprintf("report-%d", takeOverRuns.Add(1))
	spec := strings.Replace(periodicSpec, `job "report"`, `job "`+name+`"`, 1)
	if _, err := Parse(c.Jobs(), "bad.nomad.hcl", []byte(`job "x" {`), Scope{}); err == nil || !strings.Contains(err.Error(), "bad.nomad.hcl") {
		t.Fatalf("bad jobspec: %v", err)
	}
	tk, err := Parse(c.Jobs(), "report.nomad.hcl", []byte(spec), Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.Crons) != 2 || tk.Crons[0].Spec.TimeZone != "America/New_York" || tk.Crons[1].Spec.Concurrency != state.ConcurrencyAllow || tk.Crons[0].Spec.Namespace != "default" {
		t.Fatalf("crons %+v", tk.Crons)
	}
	// prohibit_overlap, as Nomad's parser reads it, is forbid for one
	// cron and refused for several.
	forbidOne := strings.Replace(spec, `crons     = ["*/5 * * * *", "2 3 * * *"]`, "cron = \"*/5 * * * *\"\n    prohibit_overlap = true", 1)
	if one, err := Parse(c.Jobs(), "one.nomad.hcl", []byte(forbidOne), Scope{}); err != nil || len(one.Crons) != 1 || one.Crons[0].Spec.Concurrency != state.ConcurrencyForbid {
		t.Fatalf("one cron with prohibit_overlap: %+v, %v", one, err)
	}
	forbidTwo := strings.Replace(spec, `time_zone = "America/New_York"`, "time_zone = \"America/New_York\"\n    prohibit_overlap = true", 1)
	if _, err := Parse(c.Jobs(), "two.nomad.hcl", []byte(forbidTwo), Scope{}); err == nil || !strings.Contains(err.Error(), "prohibit_overlap with 2 crons") {
		t.Fatalf("two crons with prohibit_overlap: %v, want refused", err)
	}
	// Registered first as Nomad's periodic job, then taken over in place.
	orig, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: spec, Canonicalize: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(orig, nil); err != nil {
		t.Fatal(err)
	}
	// Let Nomad's own dispatcher launch one child first: it must survive.
	if _, _, err := c.Jobs().PeriodicForce(name, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(tk.Parent, nil); err == nil || !strings.Contains(err.Error(), "non-periodic") {
		t.Fatalf("registering over the periodic job directly: %v (Nomad used to refuse it)", err)
	}
	if err := Register(c.Jobs(), tk); err != nil {
		t.Fatalf("registering the parent: %v", err)
	}
	if err := Register(c.Jobs(), tk); err != nil { // again: an update, no purge
		t.Fatalf("registering the parent again: %v", err)
	}
	kids, _, err := c.Jobs().PrefixList(name + "/periodic-")
	if err != nil || len(kids) != 1 {
		t.Fatalf("children of the periodic job after the takeover: %d, %v", len(kids), err)
	}
	got, _, err := c.Jobs().Info(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Periodic != nil || got.ParameterizedJob == nil || !got.IsParameterized() || got.Meta["owner"] != "ops" {
		t.Fatalf("registered parent: periodic %+v parameterized %+v", got.Periodic, got.ParameterizedJob)
	}
	meta := map[string]string{"paxcron_identity": name + "-1-1", "paxcron_job": name + "-1", "paxcron_scheduled_at": time.Unix(1, 0).UTC().Format(time.RFC3339)}
	resp, _, err := c.Jobs().Dispatch(name, meta, nil, name+"-1-1", nil)
	if err != nil {
		t.Fatalf("dispatching the parent with paxcron's meta: %v", err)
	}
	if !strings.HasPrefix(resp.DispatchedJobID, name+"/dispatch-") {
		t.Fatalf("child %q", resp.DispatchedJobID)
	}
}

// checkNomadTimes checks that expr, taken over, launches at Nomad's own
// next n times after from.
func checkNomadTimes(t *testing.T, expr string, from time.Time, n int) {
	t.Helper()
	translated, err := fromNomadCron(expr)
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	s, err := schedule.Parse(translated, schedule.Options{JobName: "report"})
	if err != nil {
		t.Fatalf("%q as %q: %v", expr, translated, err)
	}
	at := from
	for i, w := range cronexpr.MustParse(expr).NextN(from, uint(n)) {
		next, ok := s.Next(at)
		if !ok || !next.Equal(w) {
			t.Errorf("%q as %q: launch %d at %v, Nomad's at %v", expr, translated, i, next, w)
			return
		}
		at = next
	}
}

// TestNomadCronKeepsItsTimes: a taken-over expression launches when
// Nomad's own parser (hashicorp/cronexpr, what the agent runs) says it
// does. Found in review: six fields end in a year for Nomad and start
// with seconds for paxcron ("0 0 * * * *" went from daily to hourly),
// and "?" is any for Nomad, a hashed value for paxcron ("30 2 ? * *" went
// from daily to monthly).
func TestNomadCronKeepsItsTimes(t *testing.T) {
	from := time.Date(2026, 3, 1, 10, 7, 0, 0, time.UTC)
	for _, expr := range []string{
		"0 0 * * * *", "*/15 * * * * *", "30 2 ? * *", "0 0 ? * MON", "15 10 * * 1-5",
		"0 30 2 * * ? *", "@daily", "@hourly", "5 4 1 * *",
	} {
		checkNomadTimes(t, expr, from, 5)
	}
	for _, expr := range []string{"0 0 1 1 * 2030", "0 0 ?/2 * *"} {
		if got, err := fromNomadCron(expr); err == nil {
			t.Errorf("%q: taken as %q; want refused", expr, got)
		}
	}
}

// scopeParser answers as Nomad's parser does: the jobspec's own namespace
// and region, filled in with "default" and "global" when canonicalized.
type scopeParser struct{ namespace, region string }

func (p scopeParser) ParseHCLOpts(req *api.JobsParseRequest) (*api.Job, error) {
	j := api.NewBatchJob("report", "report", p.region, 50)
	j.Periodic = &api.PeriodicConfig{Spec: new("0 2 * * *"), SpecType: new("cron")}
	if p.namespace != "" {
		j.Namespace = new(p.namespace)
	}
	if req.Canonicalize {
		j.Canonicalize()
	} else if p.region == "" {
		j.Region = nil
	}
	return j, nil
}

// TestTakeoverScope: a jobspec that names no namespace or region takes
// the operator's (NOMAD_NAMESPACE, NOMAD_REGION), as `nomad job run`
// did, not "default" and "global"; one that names them keeps its own.
// Found in review: the parent was registered in "default" beside the
// periodic job, which went on launching in its own namespace.
func TestTakeoverScope(t *testing.T) {
	scope := Scope{Namespace: "team", Region: "eu"}
	for _, tc := range []struct {
		parser             scopeParser
		wantNS, wantRegion string
	}{
		{scopeParser{}, "team", "eu"},
		{scopeParser{namespace: "data", region: "us"}, "data", "us"},
	} {
		tk, err := Parse(tc.parser, "report.nomad.hcl", []byte("(the fake reads nothing)"), scope)
		if err != nil {
			t.Fatal(err)
		}
		if ns, r := deref(tk.Parent.Namespace), deref(tk.Parent.Region); ns != tc.wantNS || r != tc.wantRegion {
			t.Errorf("%+v: parent in %s/%s, want %s/%s", tc.parser, ns, r, tc.wantNS, tc.wantRegion)
		}
		if c := tk.Crons[0].Spec; c.Namespace != tc.wantNS || c.Region != tc.wantRegion {
			t.Errorf("%+v: cron dispatches to %s/%s, want %s/%s", tc.parser, c.Namespace, c.Region, tc.wantNS, tc.wantRegion)
		}
	}
}

// TestNomadCronDayFieldsKeepTheirTimes: Nomad's parser (cronexpr) takes
// a day field as "any day" only when one of its terms is * or ?, and
// when both day fields are restricted it launches on either; paxcron, as
// Vixie cron, takes a day field whose text starts with * as "any" and
// ANDs it with the other. So "0 0 */2 * MON" (odd days, or Mondays, for
// Nomad) became odd days that are Mondays, and "0 0 5,* * MON" (Mondays)
// every day, without a word. Found in review.
func TestNomadCronDayFieldsKeepTheirTimes(t *testing.T) {
	from := time.Date(2026, 3, 1, 10, 7, 0, 0, time.UTC)
	for _, expr := range []string{
		"0 0 */2 * MON", "0 0 15 * */2", "0 0 */10 * 1-5", "0 0 */2,15 * MON", "0 0 5,* * MON", "0 0 1 * MON,*",
		"0 0 0 */3 * */3 *", "0 0 0 */3 * * *", "0 0 */2 * *", "0 0 * * */2", "0 0 ? * */3",
	} {
		checkNomadTimes(t, expr, from, 40)
	}
}

// TestCronsSharingALaunchAreRefused: Nomad launches a periodic block of
// several crons at the earliest next time of any of them, so an instant
// two of them share launches once; taken over as one cron job each, it
// launched twice, two children under two identities, without a word
// ("*/5 * * * *" and "0 3 * * *" at 03:00 every day). Such a block is
// refused, naming the two and an instant they share; disjoint ones are
// taken. Found in review.
func TestCronsSharingALaunchAreRefused(t *testing.T) {
	for _, specs := range [][]string{
		{"*/5 * * * *", "0 3 * * *"},
		{"0 2 * * *", "0 2 * * *"},
		{"0 9 * * 1-5", "30 14 * * *", "0 9 1 * *"},
		{"@daily", "0 0 1 * *"},
	} {
		_, err := Convert(periodicJob("report", &api.PeriodicConfig{Specs: specs}))
		if err == nil || !strings.Contains(err.Error(), "both launch at") || !strings.Contains(err.Error(), "twice") {
			t.Errorf("crons %q: %v; want them refused for a shared launch", specs, err)
		}
	}
	for _, specs := range [][]string{
		{"0 2 * * *", "30 14 * * 1-5"},
		{"*/5 * * * *", "2 3 * * *"},
		{"0 9 * * 1-5", "0 9 * * 0,6"},
	} {
		if tk, err := Convert(periodicJob("report", &api.PeriodicConfig{Specs: specs})); err != nil || len(tk.Crons) != len(specs) {
			t.Errorf("crons %q: %v; want them taken over", specs, err)
		}
	}
}

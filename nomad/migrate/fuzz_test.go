package migrate

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/schedule"
	"paxcron/cron/state"
)

// Flags of fuzzJob's shape argument.
const (
	fuzzNoPeriodic = 1 << iota
	fuzzParameterized
	fuzzProhibitOverlap
	fuzzDisabled
	fuzzNoType
	fuzzNilID
)

// fuzzJob builds the job Nomad's parser could hand Convert from the
// fuzzer's fields; specs holds one cron expression per line.
func fuzzJob(id, typ, spec, specs, zone, specType, ns string, shape uint8) *api.Job {
	j := &api.Job{ID: &id, Type: &typ, Namespace: &ns, Region: new("global"), Meta: map[string]string{"k": "v"}}
	if shape&fuzzNilID != 0 {
		j.ID = nil
	}
	if shape&fuzzNoType != 0 {
		j.Type = nil
	}
	if shape&fuzzParameterized != 0 {
		j.ParameterizedJob = &api.ParameterizedJobConfig{Payload: "optional"}
	}
	if shape&fuzzNoPeriodic == 0 {
		j.Periodic = &api.PeriodicConfig{Spec: &spec, SpecType: &specType, TimeZone: &zone,
			ProhibitOverlap: new(shape&fuzzProhibitOverlap != 0), Enabled: new(shape&fuzzDisabled == 0)}
		if specs != "" {
			j.Periodic.Specs = strings.Split(specs, "\n")
		}
	}
	return j
}

// FuzzConvert feeds Convert periodic jobs with any fields (what Nomad's
// parser could return for any jobspec). It never panics nor changes its
// argument; it refuses with an error and no takeover, or returns a parent
// that Nomad will not launch by itself and one cron job per expression,
// each valid for the state, with distinct names, dispatching the parent
// in its scope.
func FuzzConvert(f *testing.F) {
	f.Add("nightly", "batch", "0 2 * * *", "", "Europe/Berlin", "cron", "default", uint8(fuzzProhibitOverlap))
	f.Add("report", "sysbatch", "", "0 2 * * *\n30 14 * * 1-5", "UTC", "", "data", uint8(fuzzDisabled))
	f.Add("svc", "service", "@hourly", "", "", "cron", "default", uint8(0))
	f.Add("both", "batch", "@daily", "", "", "cron", "default", uint8(fuzzParameterized))
	f.Add("none", "batch", "", "", "", "cron", "default", uint8(fuzzNoPeriodic))
	f.Add("../etc", "batch", "@daily", "", "", "cron", "default", uint8(0))
	f.Add("year", "batch", "0 0 1 1 * 2030", "", "", "cron", "default", uint8(0))
	f.Add("tz", "batch", "@daily", "", "Mars/Olympus", "cron", "default", uint8(0))
	f.Add("t", "batch", "@daily", "", "", "interval", "default", uint8(fuzzNoType))
	f.Add("", "batch", "@daily", "", "", "cron", "default", uint8(fuzzNilID))
	f.Fuzz(func(t *testing.T, id, typ, spec, specs, zone, specType, ns string, shape uint8) {
		job := fuzzJob(id, typ, spec, specs, zone, specType, ns, shape)
		tk, err := Convert(job)
		if !reflect.DeepEqual(job, fuzzJob(id, typ, spec, specs, zone, specType, ns, shape)) {
			t.Fatal("Convert changed its argument")
		}
		if err != nil {
			if tk != nil {
				t.Fatalf("a takeover and an error: %v", err)
			}
			return
		}
		checkTakeover(t, job, tk)
	})
}

func checkTakeover(t *testing.T, job *api.Job, tk *Takeover) {
	t.Helper()
	p := tk.Parent
	if p == nil || p.Periodic != nil || p.ParameterizedJob == nil || p.ID == nil || *p.ID != *job.ID {
		t.Fatalf("parent %+v: still periodic, not parameterized, or renamed", p)
	}
	want := 0
	if s := job.Periodic.Spec; s != nil && *s != "" {
		want++
	}
	want += len(job.Periodic.Specs)
	if len(tk.Crons) != want {
		t.Fatalf("%d cron jobs for %d expressions", len(tk.Crons), want)
	}
	seen := map[string]bool{}
	for _, c := range tk.Crons {
		if seen[c.Name] {
			t.Fatalf("two cron jobs named %q", c.Name)
		}
		seen[c.Name] = true
		if err := c.Spec.Validate(c.Name); err != nil {
			t.Fatalf("cron job %q, which the state refuses: %v", c.Name, err)
		}
		if c.Spec.NomadJob != *job.ID || c.Spec.Namespace != *job.Namespace || c.Spec.Region != *job.Region {
			t.Fatalf("cron job %q dispatches %s in %s/%s, not the parent", c.Name, c.Spec.NomadJob, c.Spec.Namespace, c.Spec.Region)
		}
		s, err := schedule.Parse(c.Spec.Schedule, schedule.Options{JobName: c.Name, TimeZone: c.Spec.TimeZone})
		if err != nil || s.Resolved() != c.Resolved {
			t.Fatalf("cron job %q: schedule %q does not resolve to %q: %v", c.Name, c.Spec.Schedule, c.Resolved, err)
		}
		if forbid := *job.Periodic.ProhibitOverlap; forbid != (c.Spec.Concurrency == state.ConcurrencyForbid) {
			t.Fatalf("prohibit_overlap %v became concurrency %q", forbid, c.Spec.Concurrency)
		}
	}
	if tk.Disabled != !*job.Periodic.Enabled {
		t.Fatalf("enabled %v became Disabled %v", *job.Periodic.Enabled, tk.Disabled)
	}
}

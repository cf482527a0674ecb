// Package migrate takes over Nomad periodic jobs: the migration path from
// Nomad's own periodic dispatcher to paxcron. A jobspec with a `periodic`
// block is read through Nomad's own parser (the agent's /v1/jobs/parse
// endpoint), so that every jobspec Nomad accepts is read as Nomad reads it,
// and split into
//
//   - the parent: the same job with its `periodic` block removed, made a
//     parameterized batch job that accepts paxcron's meta keys, to be
//     registered in Nomad under the same ID (which stops Nomad launching
//     it), and
//   - one cron job per `cron`/`crons` value, in the periodic block's
//     `time_zone`, dispatching the parent, with `prohibit_overlap = true`
//     as the forbid concurrency policy.
//
// Convert and Parse write nothing. Register puts the parent in Nomad:
// Nomad refuses to turn a registered periodic job into a non-periodic one
// ("cannot update periodic job to being non-periodic"), so it purges the
// periodic job first, then registers the parent under the same ID; children
// already launched are separate jobs and keep running. The caller submits
// the cron jobs after (the CLI does both, parent first).
package migrate

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/cronfile"
	"paxcron/cron/schedule"
	"paxcron/cron/state"
	"paxcron/nomad"
)

// Takeover is a periodic job split into what paxcron needs.
type Takeover struct {
	// Parent is the job to register in Nomad in place of the periodic one.
	Parent *api.Job
	// Crons dispatch Parent, one per cron expression of the periodic block.
	Crons []cronfile.Cron
	// Disabled says the periodic block had `enabled = false`: the cron jobs
	// should be created paused.
	Disabled bool
}

// fromNomadCron rewrites a Nomad periodic expression (hashicorp/cronexpr)
// into paxcron's language with the same launch times. The two differ
// where the same text means other things, found in review when a
// takeover changed schedules without a word:
//   - six fields are minute to day-of-week then a YEAR for Nomad, seconds
//     first for paxcron: "0 0 * * * *" is daily for Nomad, hourly for
//     paxcron. Seven fields are seconds to year. The year must be any
//     (paxcron has none) and is dropped.
//   - "?" is "any" for Nomad, a value hashed from the job's name for
//     paxcron: it becomes "*".
//   - a day field (day-of-month, day-of-week) is "any" for Nomad when one
//     of its terms is * or ?, for paxcron (as Vixie cron) when its text
//     starts with *; and when both are restricted, a day matching either
//     launches. So "*/2" restricts for Nomad ("0 0 */2 * MON": odd days
//     or Mondays) and is "any" for paxcron (odd days that are Mondays):
//     it is written as the range it covers, "1-31/2"; and "5,*" is any
//     for Nomad, restricted for paxcron: it is written "*".
func fromNomadCron(expr string) (string, error) {
	fields := strings.Fields(expr)
	if len(fields) == 0 || strings.HasPrefix(fields[0], "@") {
		return strings.TrimSpace(expr), nil
	}
	switch len(fields) {
	case 5:
	case 6, 7:
		year := fields[len(fields)-1]
		if year != "*" && year != "?" {
			return "", fmt.Errorf("its year field %q has no equivalent: paxcron schedules have no year", year)
		}
		fields = fields[:len(fields)-1]
	default:
		return "", fmt.Errorf("%d fields: Nomad reads 5 to 7", len(fields))
	}
	for i, f := range fields {
		if f == "?" {
			fields[i] = "*"
		} else if strings.Contains(f, "?") {
			return "", fmt.Errorf("field %q: paxcron reads '?' as a hashed value, Nomad as any", f)
		}
	}
	days := len(fields) - 3 // day-of-month; day-of-week is last
	for i, whole := range map[int]string{days: "1-31", len(fields) - 1: "0-6"} {
		f := fields[i]
		anyForNomad := slices.Contains(strings.Split(f, ","), "*")
		switch anyForPaxcron := strings.HasPrefix(f, "*"); {
		case anyForNomad && !anyForPaxcron:
			fields[i] = "*"
		case !anyForNomad && anyForPaxcron: // "*/n", first in its list
			fields[i] = whole + f[1:]
		}
	}
	return strings.Join(fields, " "), nil
}

// Parser is the part of Nomad's API client that parses jobspecs
// (*api.Jobs has it).
type Parser interface {
	ParseHCLOpts(req *api.JobsParseRequest) (*api.Job, error)
}

// Scope is the namespace and region of a jobspec that names none: those
// `nomad job run` would use (NOMAD_NAMESPACE, NOMAD_REGION), empty for
// Nomad's defaults.
type Scope struct{ Namespace, Region string }

// Parse reads the jobspec src (named filename in messages) through Nomad's
// parser and converts it. A jobspec that names no namespace or region
// takes scope's: Nomad's parser would fill in "default" and "global", and
// the parent would be registered there beside a periodic job that runs
// on where the operator's `nomad job run` put it (found in review).
func Parse(p Parser, filename string, src []byte, scope Scope) (*Takeover, error) {
	raw, err := p.ParseHCLOpts(&api.JobsParseRequest{JobHCL: string(src)})
	if err != nil {
		return nil, fmt.Errorf("migrate: Nomad could not parse %s: %w", filename, err)
	}
	job, err := p.ParseHCLOpts(&api.JobsParseRequest{JobHCL: string(src), Canonicalize: true})
	if err != nil {
		return nil, fmt.Errorf("migrate: Nomad could not parse %s: %w", filename, err)
	}
	if deref(raw.Namespace) == "" && scope.Namespace != "" {
		job.Namespace = &scope.Namespace
	}
	if deref(raw.Region) == "" && scope.Region != "" {
		job.Region = &scope.Region
	}
	t, err := Convert(job)
	if err != nil {
		return nil, fmt.Errorf("migrate: %s: %w", filename, err)
	}
	return t, nil
}

// Convert splits a parsed periodic job. job is not modified.
func Convert(job *api.Job) (*Takeover, error) {
	if job == nil || job.ID == nil || *job.ID == "" {
		return nil, errors.New("the jobspec has no job ID")
	}
	id := *job.ID
	p := job.Periodic
	switch {
	case p == nil:
		return nil, fmt.Errorf("job %q has no periodic block: nothing to take over (a parameterized job is dispatched by a cron block written for paxcron)", id)
	case job.ParameterizedJob != nil:
		return nil, fmt.Errorf("job %q is both periodic and parameterized, which Nomad does not run", id)
	case job.Type != nil && *job.Type != "batch" && *job.Type != "sysbatch":
		return nil, fmt.Errorf("job %q is of type %q: periodic and parameterized jobs are batch or sysbatch", id, *job.Type)
	case p.SpecType != nil && *p.SpecType != "" && *p.SpecType != "cron":
		return nil, fmt.Errorf("job %q: periodic spec type %q is not cron", id, *p.SpecType)
	}
	var specs []string
	if p.Spec != nil && *p.Spec != "" {
		specs = append(specs, *p.Spec)
	}
	specs = append(specs, p.Specs...)
	if len(specs) == 0 {
		return nil, fmt.Errorf("job %q: its periodic block has no cron expression", id)
	}
	zone := ""
	if p.TimeZone != nil && *p.TimeZone != "UTC" {
		zone = *p.TimeZone
	}
	concurrency := state.ConcurrencyAllow
	if p.ProhibitOverlap != nil && *p.ProhibitOverlap {
		if len(specs) > 1 {
			// Nomad keeps any two children of the job from overlapping,
			// whichever cron launched them; a cron job's forbid looks at
			// its own children only, so the takeover would let children
			// of different crons run at once.
			return nil, fmt.Errorf("job %q: prohibit_overlap with %d crons: Nomad keeps any two of the job's children from running at once, and each cron job paxcron would make forbids overlap with its own children only; take over a job with one cron, or without prohibit_overlap", id, len(specs))
		}
		concurrency = state.ConcurrencyForbid
	}
	t := &Takeover{Disabled: p.Enabled != nil && !*p.Enabled}
	scheds := make([]*schedule.Schedule, 0, len(specs))
	for i, expr := range specs {
		name := id
		if len(specs) > 1 {
			name = id + "-" + strconv.Itoa(i+1)
		}
		if err := state.ValidName(name); err != nil {
			return nil, fmt.Errorf("job %q: it cannot name a cron job: %w", id, err)
		}
		translated, err := fromNomadCron(expr)
		if err != nil {
			return nil, fmt.Errorf("job %q: cron %q: %w", id, expr, err)
		}
		s, err := schedule.Parse(translated, schedule.Options{JobName: name, TimeZone: zone})
		if err != nil {
			return nil, fmt.Errorf("job %q: cron %q (as paxcron reads it: %q): %w", id, expr, translated, err)
		}
		c := cronfile.Cron{Name: name, Resolved: s.Resolved(), Spec: state.JobSpec{
			Schedule: translated, TimeZone: zone, Concurrency: concurrency,
			// The parent's own scope, as Nomad's parser filled it in: the
			// dispatches go where it is registered.
			NomadJob: id, Namespace: deref(job.Namespace), Region: deref(job.Region),
		}}
		if err := c.Spec.Validate(name); err != nil {
			return nil, fmt.Errorf("job %q: cron %q: %w", id, expr, err)
		}
		t.Crons = append(t.Crons, c)
		scheds = append(scheds, s)
	}
	if err := sharedLaunch(specs, scheds, now()); err != nil {
		return nil, fmt.Errorf("job %q: %w", id, err)
	}
	parent := *job
	parent.Periodic = nil
	parent.ParameterizedJob = &api.ParameterizedJobConfig{Payload: "optional", MetaOptional: nomad.MetaKeys()}
	parent.Status, parent.StatusDescription = nil, nil
	parent.CreateIndex, parent.ModifyIndex, parent.JobModifyIndex, parent.SubmitTime = nil, nil, nil, nil
	t.Parent = &parent
	return t, nil
}

// now is the clock sharedLaunch looks ahead from.
var now = time.Now

// Bounds of sharedLaunch's look-ahead: a year, or so many launches of
// a pair (a cron of every second would take 31 million).
const (
	sharedLookAhead = 366 * 24 * time.Hour
	sharedMaxSteps  = 200_000
)

// sharedLaunch refuses crons of which two launch at one instant within
// sharedLookAhead of from. Nomad launches a block of several crons at the
// earliest next time of any of them (PeriodicConfig.Next), so a shared
// instant launches once; as one cron job each, it would launch twice,
// two children under two identities (found in review: "*/5 * * * *" and
// "0 3 * * *" launched twice at 03:00 every day).
func sharedLaunch(exprs []string, scheds []*schedule.Schedule, from time.Time) error {
	until := from.Add(sharedLookAhead)
	for i := range scheds {
		for j := i + 1; j < len(scheds); j++ {
			a, okA := scheds[i].Next(from)
			b, okB := scheds[j].Next(from)
			for step := 0; okA && okB && step < sharedMaxSteps; step++ {
				switch {
				case a.Equal(b):
					return fmt.Errorf("crons %q and %q both launch at %s: Nomad launches such an instant once, two cron jobs would launch it twice; make them disjoint (or drop one the other covers) and take it over again",
						exprs[i], exprs[j], a.Format(time.RFC3339))
				case a.After(until) || b.After(until):
					okA = false
				case a.Before(b):
					a, okA = scheds[i].Next(a)
				default:
					b, okB = scheds[j].Next(b)
				}
			}
		}
	}
	return nil
}

// Jobs is the part of Nomad's API client that Register uses (*api.Jobs
// has it).
type Jobs interface {
	Info(jobID string, q *api.QueryOptions) (*api.Job, *api.QueryMeta, error)
	Deregister(jobID string, purge bool, q *api.WriteOptions) (string, *api.WriteMeta, error)
	Register(job *api.Job, q *api.WriteOptions) (*api.JobRegisterResponse, *api.WriteMeta, error)
}

// Register puts t.Parent in Nomad in place of the periodic job of the same
// ID, if there is one. Between the purge and the registration the job does
// not exist in Nomad; paxcron's cron jobs are submitted after, so nothing
// dispatches into that gap.
func Register(jobs Jobs, t *Takeover) error {
	id := *t.Parent.ID
	ns := &api.QueryOptions{Namespace: deref(t.Parent.Namespace), Region: deref(t.Parent.Region)}
	wo := &api.WriteOptions{Namespace: ns.Namespace, Region: ns.Region}
	cur, _, err := jobs.Info(id, ns)
	switch {
	case err != nil && !isNotFound(err):
		return fmt.Errorf("migrate: reading job %q from Nomad: %w", id, err)
	case err == nil && cur.Periodic != nil:
		if _, _, err := jobs.Deregister(id, true, wo); err != nil {
			return fmt.Errorf("migrate: purging periodic job %q before taking it over: %w", id, err)
		}
	}
	if _, _, err := jobs.Register(t.Parent, wo); err != nil {
		return fmt.Errorf("migrate: registering %q as a parameterized job: %w", id, err)
	}
	return nil
}

func isNotFound(err error) bool {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) {
		return ue.StatusCode() == 404
	}
	return strings.Contains(err.Error(), "404")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

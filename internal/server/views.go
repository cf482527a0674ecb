package server

import (
	"net/http"
	"slices"
	"time"

	"paxcron/cron/cronfile"
	"paxcron/cron/state"
	"paxcron/internal/api"
	"paxcron/nomad"
)

// errNomadSpec is what nomad.CheckSpec wraps when Nomad would refuse a
// job's dispatches (a 400, not a 502).
var errNomadSpec = nomad.ErrSpec

func parseSubmitted(src []byte) ([]cronfile.Cron, error) {
	return cronfile.ParseSubmitted("request.hcl", src)
}

func sameSpec(a, b state.JobSpec) bool { return a.Same(b) }

// resolved is the job's schedule with ? and H replaced, or the
// expression itself if it does not parse (it did when it was put).
func resolved(name string, spec state.JobSpec) string {
	s, err := spec.ParsedSchedule(name) // the state's memo: every write's answer resolves its schedule
	if err != nil {
		return spec.Schedule
	}
	return s.Resolved()
}

func summaryOf(j state.Job) api.JobSummary {
	s := api.JobSummary{
		Name: j.Name, Version: j.Version, Schedule: j.Spec.Schedule, Resolved: resolved(j.Name, j.Spec),
		TimeZone: j.Spec.TimeZone, Paused: j.Paused, NomadJob: j.Spec.NomadJob, Open: len(j.Open),
	}
	if s.TimeZone == "" {
		s.TimeZone = "UTC"
	}
	if !j.NextAt.IsZero() {
		next := j.NextAt.UTC()
		s.NextAt = &next
	} else {
		s.Ended = true
	}
	if n := len(j.History); n > 0 {
		last := api.LaunchOf(j.History[n-1])
		s.Last = &last
	}
	return s
}

// jobOf is the whole job, with its next n launch times after now.
func jobOf(j state.Job, now time.Time, n int) (api.Job, error) {
	out := api.Job{
		JobSummary: summaryOf(j), Spec: api.SpecOf(j.Spec), CreatedAt: j.CreatedAt.UTC(), UpdatedAt: j.UpdatedAt.UTC(),
		Next: []time.Time{}, OpenAll: []api.Launch{}, History: []api.Launch{},
		Counters: api.Counters{Started: j.Counters.Started, Dispatched: j.Counters.Dispatched, Failed: j.Counters.Failed, Skipped: j.Counters.Skipped, Unknown: j.Counters.Unknown},
	}
	s, err := j.Spec.ParsedSchedule(j.Name)
	switch {
	case err != nil:
		return api.Job{}, &api.Error{Status: http.StatusInternalServerError, Message: "job " + j.Name + ": its stored schedule no longer parses: " + err.Error()}
	case !j.NextAt.IsZero():
		// An ended job lists no next launch: the schedule may still find
		// one after now, but the state counts from the job's last launch
		// and will launch none of them.
		at := now
		if !j.NextAt.IsZero() && j.NextAt.Before(now) {
			at = j.NextAt.Add(-time.Second) // a launch due and not started yet comes first
		}
		for len(out.Next) < n {
			next, ok := s.Next(at)
			if !ok {
				break
			}
			out.Next = append(out.Next, next.UTC())
			at = next
		}
	}
	for _, l := range j.Open {
		out.OpenAll = append(out.OpenAll, api.LaunchOf(l))
	}
	for _, l := range slices.Backward(j.History) {
		out.History = append(out.History, api.LaunchOf(l))
	}
	return out, nil
}

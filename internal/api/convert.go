package api

import (
	"fmt"
	"time"

	"paxcron/cron/state"
)

// Delivery values of Spec.Delivery.
const (
	DeliveryAtMostOnce  = "at-most-once"
	DeliveryAtLeastOnce = "at-least-once"
)

// SpecOf is spec in its JSON form.
func SpecOf(spec state.JobSpec) Spec {
	s := Spec{
		Schedule: spec.Schedule, TimeZone: spec.TimeZone, Concurrency: string(spec.Concurrency),
		CatchupWindow: Duration(spec.CatchupWindow), NomadJob: spec.NomadJob, Namespace: spec.Namespace,
		Region: spec.Region, Meta: spec.Meta, Payload: spec.Payload, Delivery: DeliveryAtMostOnce,
	}
	if spec.AtLeastOnce {
		s.Delivery = DeliveryAtLeastOnce
	}
	return s
}

// JobSpec is s as the cron state takes it. It checks the fields this
// form adds (delivery, concurrency, a negative window) and what a writer
// refuses that the state does not (meta keys of paxcron's own prefix);
// the state validates the rest when it is proposed (state.JobSpec.Validate).
func (s Spec) JobSpec() (state.JobSpec, error) {
	spec := state.JobSpec{
		Schedule: s.Schedule, TimeZone: s.TimeZone, Concurrency: state.Concurrency(s.Concurrency),
		CatchupWindow: time.Duration(s.CatchupWindow), NomadJob: s.NomadJob, Namespace: s.Namespace,
		Region: s.Region, Meta: s.Meta, Payload: s.Payload,
	}
	// As in a cron file (found in review: "UTC" here was a new version).
	spec.TimeZone = state.WrittenZone(spec.TimeZone)
	switch s.Delivery {
	case "", DeliveryAtMostOnce:
	case DeliveryAtLeastOnce:
		spec.AtLeastOnce = true
	default:
		return state.JobSpec{}, fmt.Errorf("delivery %q: want %q or %q", s.Delivery, DeliveryAtMostOnce, DeliveryAtLeastOnce)
	}
	switch spec.Concurrency {
	case "", state.ConcurrencyAllow, state.ConcurrencyForbid, state.ConcurrencyReplace:
	default:
		return state.JobSpec{}, fmt.Errorf("concurrency %q: want %q, %q or %q", s.Concurrency, state.ConcurrencyAllow, state.ConcurrencyForbid, state.ConcurrencyReplace)
	}
	switch w := spec.CatchupWindow; {
	case w < 0:
		return state.JobSpec{}, fmt.Errorf("catchup_window %v is negative", w)
	case w > 0 && w < state.MinCatchupWindow:
		// Zero asks for the default. A JSON number is nanoseconds, so
		// "catchup_window": 300 asks for 300ns: said plainly.
		return state.JobSpec{}, fmt.Errorf("catchup_window %v is shorter than %v: a launch later than its window is skipped, and launches start up to seconds late after a failover (a JSON number is nanoseconds: write a string such as \"10m\")", w, state.MinCatchupWindow)
	}
	// What a cron file refuses too, and the state does not look at.
	if err := spec.CheckWritable(); err != nil {
		return state.JobSpec{}, err
	}
	return spec, nil
}

// LaunchOf is l in its JSON form.
func LaunchOf(l state.Launch) Launch {
	out := Launch{
		Job: l.Job, Identity: l.Identity, ScheduledAt: l.ScheduledAt.UTC(), Kind: kindName(l.Kind),
		StartedAt: l.StartedAt.UTC(), Outcome: string(l.Outcome.Kind), ChildID: l.Outcome.ChildID,
		Reason: l.Outcome.Reason, Force: l.Force,
	}
	if out.Identity == "" {
		out.Identity = state.LaunchIdentity(l.Job, l.ScheduledAt, l.Kind)
	}
	if l.FinishedSlot == 0 {
		out.Outcome = "open"
	}
	return out
}

func kindName(k state.LaunchKind) string {
	switch k {
	case state.LaunchManual:
		return "manual"
	case state.LaunchBackfill:
		return "backfill"
	}
	return "scheduled"
}

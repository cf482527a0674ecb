package nomad

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/state"
)

// ErrSpec wraps every reason CheckSpec gives for a job spec Nomad would
// refuse to dispatch.
var ErrSpec = errors.New("nomad: the cron job cannot dispatch its Nomad job")

// CheckSpec checks, before a cron job is written, that Nomad will accept
// its dispatches: the parent job exists in the spec's namespace and region,
// is parameterized and not stopped, accepts paxcron's meta keys and every
// key of the spec's meta, gets every key it requires, and gets a payload
// if and only if it takes one. A spec Nomad would refuse is an error
// wrapping ErrSpec that says what to change; a failure to ask Nomad is
// another error.
func (c *Client) CheckSpec(ctx context.Context, name string, spec state.JobSpec) error {
	t := spec.Target()
	ns, region := c.scope(t)
	where := fmt.Sprintf("Nomad job %q (namespace %q, region %q)", t.NomadJob, ns, region)
	var job *api.Job
	err := c.retry(ctx, func(ctx context.Context) error {
		return c.inSlot(ctx, "check", t.NomadJob, func(ctx context.Context) error {
			j, _, err := c.api.Jobs().Info(t.NomadJob, c.query(ctx, t))
			if err != nil {
				if notFound(err) {
					return nil
				}
				return callError("check", t.NomadJob, err)
			}
			job = j
			return nil
		})
	})
	if err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: cron job %q: %s %s", ErrSpec, name, where, fmt.Sprintf(format, args...))
	}
	switch {
	case job == nil:
		return bad("does not exist; register it first (a parameterized batch job)")
	case job.Stop != nil && *job.Stop:
		return bad("is stopped; Nomad refuses to dispatch it")
	case job.Dispatched:
		parent := ""
		if job.ParentID != nil {
			parent = *job.ParentID
		}
		// A child keeps its parent's parameterized block, but Nomad
		// dispatches parents only.
		return bad("is a dispatched child of %q, which Nomad refuses to dispatch; name its parameterized parent", parent)
	case job.ParameterizedJob == nil:
		return bad("is not parameterized; add a parameterized block listing %s in meta_optional", strings.Join(MetaKeys(), ", "))
	case job.Periodic != nil:
		// Nomad dispatches a periodic parent's child as a periodic job of
		// its own, with no evaluation: a template its own dispatcher then
		// launches on the parent's schedule, not one run now.
		return bad("has a periodic block, so each dispatch would make a periodic job that Nomad launches on its own schedule; remove the periodic block and let paxcron schedule it")
	}
	p := job.ParameterizedJob
	allowed := append(slices.Clone(p.MetaRequired), p.MetaOptional...)
	var notAllowed []string
	for _, k := range MetaKeys() {
		if !slices.Contains(allowed, k) {
			notAllowed = append(notAllowed, k)
		}
	}
	if len(notAllowed) > 0 {
		return bad("does not accept paxcron's meta keys %s; add them to its parameterized block's meta_optional", strings.Join(notAllowed, ", "))
	}
	keys := make([]string, 0, len(spec.Meta))
	for k := range spec.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return bad("does not accept meta key %q; add it to meta_optional or drop it from the cron job", k)
		}
	}
	for _, k := range p.MetaRequired {
		if _, ok := spec.Meta[k]; !ok && !slices.Contains(MetaKeys(), k) {
			return bad("requires meta key %q, which the cron job does not set", k)
		}
	}
	switch p.Payload {
	case "required":
		if len(spec.Payload) == 0 {
			return bad("requires a payload, which the cron job does not set")
		}
	case "forbidden":
		if len(spec.Payload) > 0 {
			return bad("forbids a payload, which the cron job sets")
		}
	}
	return nil
}

// MetaKeys are the meta keys paxcron adds to every dispatch; a parent job
// must accept them.
func MetaKeys() []string { return []string{MetaIdentity, MetaJob, MetaScheduledAt} }

package nomad_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/state"
	"paxcron/nomad"
	"paxcron/nomad/nomadtest"
)

// TestAgentCheckSpec: every reason Nomad would refuse a cron job's
// dispatches is found before the job is written, with what to change.
func TestAgentCheckSpec(t *testing.T) {
	agent := nomadtest.Shared(t)
	a, c := admin(t, agent), client(t, agent, agent.Token)
	ctx := ctxFor(t, time.Minute)
	plain := parentJob("chk-plain")
	plain.ParameterizedJob = nil
	register(t, a, plain)
	noKeys := parentJob("chk-nokeys")
	noKeys.ParameterizedJob.MetaOptional = []string{"sleep"}
	register(t, a, noKeys)
	strict := parentJob("chk-strict")
	strict.ParameterizedJob = &api.ParameterizedJobConfig{Payload: "required", MetaRequired: []string{"team"}, MetaOptional: nomad.MetaKeys()}
	register(t, a, strict)
	silent := parentJob("chk-silent")
	silent.ParameterizedJob.Payload = "forbidden"
	register(t, a, silent)
	register(t, a, parentJob("chk-good"))
	stopped := parentJob("chk-stopped")
	register(t, a, stopped)
	if _, _, err := a.Jobs().Deregister("chk-stopped", false, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec state.JobSpec
		want string // "" means accepted
	}{
		{"missing", state.JobSpec{NomadJob: "chk-missing"}, "does not exist"},
		{"not parameterized", state.JobSpec{NomadJob: "chk-plain"}, "is not parameterized"},
		{"stopped", state.JobSpec{NomadJob: "chk-stopped"}, "is stopped"},
		{"paxcron keys not accepted", state.JobSpec{NomadJob: "chk-nokeys"}, "paxcron_identity, paxcron_job, paxcron_scheduled_at"},
		{"meta key not accepted", state.JobSpec{NomadJob: "chk-good", Meta: map[string]string{"colour": "red"}}, `meta key "colour"`},
		{"required meta missing", state.JobSpec{NomadJob: "chk-strict", Payload: []byte("x")}, `requires meta key "team"`},
		{"payload required", state.JobSpec{NomadJob: "chk-strict", Meta: map[string]string{"team": "a"}}, "requires a payload"},
		{"payload forbidden", state.JobSpec{NomadJob: "chk-silent", Payload: []byte("x")}, "forbids a payload"},
		{"wrong namespace", state.JobSpec{NomadJob: "chk-good", Namespace: "elsewhere"}, `namespace "elsewhere"`},
		{"good", state.JobSpec{NomadJob: "chk-good", Meta: map[string]string{"sleep": "1"}}, ""},
		{"strict, satisfied", state.JobSpec{NomadJob: "chk-strict", Payload: []byte("x"), Meta: map[string]string{"team": "a"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.CheckSpec(ctx, "cj", tc.spec)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case !errors.Is(err, nomad.ErrSpec) || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("CheckSpec: %v, want ErrSpec with %q", err, tc.want)
			}
		})
	}
}

package nomad

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"paxcron/cron/state"
)

// TestCheckSpecRefusesADispatchedChild: a dispatched child carries its
// parent's parameterized block, but Nomad refuses to dispatch it ("is not
// a parameterized job": IsParameterized is false for a dispatched job).
// Found in review: CheckSpec accepted a cron job naming one (an ID copied
// from `nomad job status`), and every launch then failed as refused.
func TestCheckSpecRefusesADispatchedChild(t *testing.T) {
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || jobPath(r) != child1 {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
		reply(w, 200, map[string]any{
			"ID": child1, "ParentID": "report", "Dispatched": true, "Stop": false, "Status": "dead",
			"ParameterizedJob": map[string]any{"Payload": "optional", "MetaOptional": MetaKeys()},
		})
	})
	err := c.CheckSpec(context.Background(), "cj", state.JobSpec{NomadJob: child1, Namespace: "analytics"})
	if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), `"report"`) {
		t.Fatalf("CheckSpec = %v; want ErrSpec naming the parent %q", err, "report")
	}
}

// TestCheckSpecRefusesAPeriodicParent: Nomad dispatches a child of a
// parent that is both parameterized and periodic as a periodic job with
// no evaluation (nomad/job_endpoint.go, Dispatch): nothing runs at the
// scheduled time, and Nomad's own dispatcher launches the child on the
// parent's schedule. Found in review: CheckSpec accepted such a parent.
func TestCheckSpecRefusesAPeriodicParent(t *testing.T) {
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, map[string]any{
			"ID": "report", "Stop": false, "Status": "running",
			"Periodic":         map[string]any{"Enabled": true, "Spec": "0 1 * * *", "SpecType": "cron"},
			"ParameterizedJob": map[string]any{"Payload": "optional", "MetaOptional": MetaKeys()},
		})
	})
	err := c.CheckSpec(context.Background(), "cj", state.JobSpec{NomadJob: "report"})
	if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "periodic") {
		t.Fatalf("CheckSpec = %v; want ErrSpec naming the periodic block", err)
	}
}

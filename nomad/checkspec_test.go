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

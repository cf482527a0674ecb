package nomadtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"paxcron/nomad/nomadtest"
)

func TestMain(m *testing.M) { os.Exit(nomadtest.Main(m, nomadtest.Options{})) }

// The parts of Nomad's job that the tests read.
type job struct {
	ID                       string
	ParentID                 string
	Status                   string
	Meta                     map[string]string
	DispatchIdempotencyToken string
}

type dispatchResponse struct {
	DispatchedJobID string
	EvalID          string
}

// parameterizedJob is a batch job of one raw_exec task that exits at once,
// dispatched with an optional "run" meta key.
func parameterizedJob(id string) map[string]any {
	return map[string]any{
		"ID":          id,
		"Name":        id,
		"Type":        "batch",
		"Datacenters": []string{"*"},
		"ParameterizedJob": map[string]any{
			"Payload":      "forbidden",
			"MetaOptional": []string{"run"},
		},
		"TaskGroups": []any{map[string]any{
			"Name":  "g",
			"Count": 1,
			"Tasks": []any{map[string]any{
				"Name":   "t",
				"Driver": "raw_exec",
				"Config": map[string]any{
					"command": "/bin/sh",
					"args":    []string{"-c", `echo "run $NOMAD_META_run"`},
				},
				"Resources": map[string]any{"CPU": 20, "MemoryMB": 32},
			}},
		}},
	}
}

// TestDispatchIdempotency proves the harness and the binary: a
// parameterized raw_exec job is registered and dispatched with an
// idempotency token; the child carries the token and runs to completion,
// and a second dispatch with the token returns the same child.
func TestDispatchIdempotency(t *testing.T) {
	agent := nomadtest.Shared(t)
	t.Logf("Nomad %s at %s (%s)", agent.Version, agent.Addr, agent.Binary)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The agent is the package's: IDs of this run's own (-count=N).
	parent := fmt.Sprintf("nomadtest-dispatch-%d", time.Now().UnixNano())
	token := parent + "-1700000000"
	if err := agent.Call(ctx, "PUT", "/v1/jobs", map[string]any{"Job": parameterizedJob(parent)}, nil); err != nil {
		t.Fatal(err)
	}
	dispatchPath := "/v1/job/" + url.PathEscape(parent) + "/dispatch"
	dispatch := map[string]any{
		"Meta":             map[string]string{"run": "1"},
		"IdPrefixTemplate": token,
		"IdempotencyToken": token,
	}
	var first dispatchResponse
	if err := agent.Call(ctx, "POST", dispatchPath, dispatch, &first); err != nil {
		t.Fatal(err)
	}
	t.Logf("dispatched %s (evaluation %s)", first.DispatchedJobID, first.EvalID)
	if want := parent + "/dispatch-" + token + "-"; !strings.HasPrefix(first.DispatchedJobID, want) {
		t.Errorf("child ID %q does not start with %q", first.DispatchedJobID, want)
	}
	if first.EvalID == "" {
		t.Errorf("the first dispatch created no evaluation")
	}

	childPath := "/v1/job/" + url.PathEscape(first.DispatchedJobID)
	var child job
	if err := agent.Call(ctx, "GET", childPath, nil, &child); err != nil {
		t.Fatal(err)
	}
	if child.ParentID != parent || child.DispatchIdempotencyToken != token || child.Meta["run"] != "1" {
		t.Errorf("child: parent %q, token %q, meta %v; want %q, %q, run=1", child.ParentID, child.DispatchIdempotencyToken, child.Meta, parent, token)
	}

	// The same token again, this time as the query parameter the Go client
	// sends (WriteOptions.IdempotencyToken): the stored child, no new
	// evaluation.
	var second dispatchResponse
	again := map[string]any{"Meta": map[string]string{"run": "2"}, "IdPrefixTemplate": token}
	if err := agent.Call(ctx, "POST", dispatchPath+"?idempotency_token="+url.QueryEscape(token), again, &second); err != nil {
		t.Fatal(err)
	}
	if second.DispatchedJobID != first.DispatchedJobID || second.EvalID != "" {
		t.Errorf("second dispatch with the token: child %q, evaluation %q; want %q and none", second.DispatchedJobID, second.EvalID, first.DispatchedJobID)
	}

	// Another token: another child.
	var other dispatchResponse
	if err := agent.Call(ctx, "POST", dispatchPath, map[string]any{"IdempotencyToken": token + "-other"}, &other); err != nil {
		t.Fatal(err)
	}
	if other.DispatchedJobID == first.DispatchedJobID {
		t.Errorf("a dispatch with another token returned the first child %q", other.DispatchedJobID)
	}

	// raw_exec runs it.
	for {
		var allocs []struct {
			ID           string
			ClientStatus string
		}
		if err := agent.Call(ctx, "GET", childPath+"/allocations", nil, &allocs); err != nil {
			t.Fatal(err)
		}
		if len(allocs) > 0 && allocs[0].ClientStatus == "complete" {
			break
		}
		if len(allocs) > 0 && allocs[0].ClientStatus == "failed" {
			t.Fatalf("the child's allocation %s failed", allocs[0].ID)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the child's allocation did not complete: %v (allocations %+v)", ctx.Err(), allocs)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestACL starts an agent of its own with ACLs on: a request without a
// token is denied, one with the management token is not.
func TestACL(t *testing.T) {
	agent := nomadtest.Start(t, nomadtest.Options{ACL: true})
	if agent.Token == "" {
		t.Fatal("no management token")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	err := agent.CallAs(ctx, "", "GET", "/v1/jobs", nil, nil)
	var httpErr *nomadtest.HTTPError
	if !errors.As(err, &httpErr) || httpErr.Status != http.StatusForbidden {
		t.Errorf("listing jobs without a token: %v; want 403", err)
	}
	var self struct{ Type string }
	if err := agent.Call(ctx, "GET", "/v1/acl/token/self", nil, &self); err != nil {
		t.Fatal(err)
	}
	if self.Type != "management" {
		t.Errorf("token type %q, want management", self.Type)
	}
	if err := agent.Call(ctx, "GET", "/v1/jobs", nil, nil); err != nil {
		t.Error(err)
	}
}

// TestLaunchFailures: an agent that is not ready in time, or exits at
// once, is an error that says so and shows the end of its log, and
// leaves no agent running.
func TestLaunchFailures(t *testing.T) {
	if _, err := nomadtest.Binary(); err != nil {
		t.Skip(err)
	}
	_, err := nomadtest.Launch(nomadtest.Options{Dir: t.TempDir(), ReadyTimeout: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "not ready after 1ms") || !strings.Contains(err.Error(), "end of the agent's log") {
		t.Errorf("agent not ready in time: %v", err)
	}
	_, err = nomadtest.Launch(nomadtest.Options{Dir: t.TempDir(), Config: "client {\n  no_such_option = true\n}\n"})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "no_such_option") {
		t.Errorf("agent with a bad configuration: %v", err)
	}
}

package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paxcron/internal/api"
	"paxcron/nomad/nomadtest"
)

// TestDemo runs the README's first command, shortened: a real Nomad dev
// agent, three replicas, a leader killed half-way, and every slot launched
// exactly once.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Nomad and runs for 15 s")
	}
	if _, err := nomadtest.Binary(); err != nil {
		t.Skip(err)
	}
	bin := filepath.Join(t.TempDir(), "paxcron")
	if out, err := exec.Command("go", "build", "-o", bin, "../paxcron").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-duration", "15s", "-every", "3", "-paxcron", bin}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errOut)
	}
	for _, want := range []string{"SIGKILL to the leader", "leads now", "restarted from its disk", "dispatched  hello-", "every slot was launched exactly once"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
}

func TestDemoUsage(t *testing.T) {
	for _, args := range [][]string{{"-every", "7"}, {"-every", "0"}, {"-duration", "2s"}, {"extra"}, {"-nope"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, code, &errOut)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "three paxcron replicas") {
		t.Errorf("-h: exit %d, %q", code, &errOut)
	}
}

// A replica back from a crash may show a launch it had seen concluded as
// open again until the leader tells it what was chosen: the demo must not
// print that as a second start.
func TestDemoReportsEachLaunchOnce(t *testing.T) {
	var out bytes.Buffer
	d := &demo{out: &out, printed: map[string]bool{}, concluded: map[string]bool{}}
	due := time.Date(2026, 11, 27, 22, 50, 30, 0, time.UTC)
	open := api.Launch{Identity: "hello-30", ScheduledAt: due, Outcome: "open"}
	done := api.Launch{Identity: "hello-30", ScheduledAt: due, Outcome: "dispatched", ChildID: "p/dispatch-hello-30"}
	next := api.Launch{Identity: "hello-35", ScheduledAt: due.Add(5 * time.Second), Outcome: "open"}
	d.report(1, []api.Launch{done})       // the leader's view
	d.report(1, []api.Launch{open, next}) // the same replica, restarted
	d.report(1, []api.Launch{done, next})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "dispatched  hello-30") || !strings.Contains(lines[1], "started     hello-35") {
		t.Fatalf("want hello-30 dispatched, then hello-35 started, each once:\n%s", &out)
	}
}

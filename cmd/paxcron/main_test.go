package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	fixed := func() time.Time { return time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC) }
	code = run(args, &out, &errOut, fixed)
	return code, out.String(), errOut.String()
}

func TestScheduleCommand(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string // exact, when set
		stderr string // substring, when set
	}{
		{
			name:   "resolves ? from the job name and lists launches in the zone",
			args:   []string{"schedule", "-job", "nightly-report", "-tz", "Europe/Berlin", "-n", "2", "0 ? * * *"},
			stdout: "# 0 11 * * *  (Europe/Berlin)\n2026-11-24T11:00:00+01:00\n2026-11-25T11:00:00+01:00\n",
		},
		{
			name:   "flags after the expression",
			args:   []string{"schedule", "*/30 * * * *", "-n", "2"},
			stdout: "# */30 * * * *  (UTC)\n2026-11-23T12:30:00Z\n2026-11-23T13:00:00Z\n",
		},
		{
			name:   "a wall time in a spring-forward gap fires once, right after it",
			args:   []string{"schedule", "-tz", "Europe/Berlin", "-from", "2026-03-29T00:00:00Z", "-n", "2", "30 2 * * *"},
			stdout: "# 30 2 * * *  (Europe/Berlin)\n2026-03-29T03:00:00+02:00\n2026-03-30T02:30:00+02:00\n",
		},
		{name: "bad field named", args: []string{"schedule", "0 25 * * *"}, code: 1, stderr: "hour: 25 is out of range 0-23"},
		{name: "unknown zone", args: []string{"schedule", "-tz", "Mars/Olympus", "0 * * * *"}, code: 1, stderr: "time zone"},
		{name: "missing expression", args: []string{"schedule"}, code: 2, stderr: "missing EXPR"},
		{name: "bad -from", args: []string{"schedule", "-from", "yesterday", "* * * * *"}, code: 2, stderr: "not RFC 3339"},
		{name: "bad -n", args: []string{"schedule", "-n", "0", "* * * * *"}, code: 2, stderr: "-n must be 1 to 1000"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: "unknown command"},
		{name: "no command", args: nil, code: 2, stderr: "Usage: paxcron"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			if c.stdout != "" && stdout != c.stdout {
				t.Fatalf("stdout:\n%s\nwant:\n%s", stdout, c.stdout)
			}
			if c.stderr != "" && !strings.Contains(stderr, c.stderr) {
				t.Fatalf("stderr %q does not mention %q", stderr, c.stderr)
			}
		})
	}
}

func TestScheduleJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "schedule", "-json", "-job", "a", "-n", "3", "H * * * *")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out scheduleOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if out.Expression != "H * * * *" || strings.Contains(out.Resolved, "H") || out.TimeZone != "UTC" || len(out.Next) != 3 {
		t.Fatalf("unexpected output %+v", out)
	}
	for i := 1; i < len(out.Next); i++ {
		a, _ := time.Parse(time.RFC3339, out.Next[i-1])
		b, _ := time.Parse(time.RFC3339, out.Next[i])
		if b.Sub(a) != time.Hour {
			t.Fatalf("launches %v and %v are not an hour apart", a, b)
		}
	}
}

// TestEveryCommandHelps: -h on every command and group prints its usage
// and exits 0. Found in review: `operator snapshot -h` was an unknown
// subcommand.
func TestEveryCommandHelps(t *testing.T) {
	for _, cmd := range [][]string{
		{}, {"server"}, {"schedule"}, {"job"}, {"job", "validate"}, {"job", "takeover"}, {"job", "run"}, {"job", "status"},
		{"job", "history"}, {"job", "pause"}, {"job", "resume"}, {"job", "trigger"}, {"job", "backfill"}, {"job", "delete"},
		{"operator"}, {"operator", "status"}, {"operator", "backup"}, {"operator", "snapshot"},
		{"operator", "snapshot", "save"}, {"operator", "snapshot", "inspect"}, {"operator", "snapshot", "list"}, {"operator", "snapshot", "restore"},
	} {
		code, out, errOut := runCLI(t, append(cmd, "-h")...)
		if code != 0 || !strings.Contains(out+errOut, "Usage") {
			t.Errorf("paxcron %s -h: exit %d, %.120q", strings.Join(cmd, " "), code, out+errOut)
		}
	}
}

// TestScheduleNeverFiringIsDocumented: an expression with no launch
// within schedule.SearchYears exits 1, which the help did not say (it
// listed 1 for an invalid expression or zone only).
func TestScheduleNeverFiringIsDocumented(t *testing.T) {
	code, _, stderr := runCLI(t, "schedule", "0 0 * 2 1#5")
	if code != 1 || !strings.Contains(stderr, "never fires") {
		t.Fatalf("exit %d, %q; want 1, never fires", code, stderr)
	}
	code, _, help := runCLI(t, "schedule", "-h")
	if code != 0 || !strings.Contains(help, "no launch within 10 years") {
		t.Errorf("exit %d; the help does not say what a schedule that never fires exits with:\n%s", code, help)
	}
}

// TestUsageNamesTheOperatorCommands: paxcron's own usage said operator
// looks after the cluster "(status)", as if status were all it does; it
// also backs up and saves, inspects, lists and restores snapshots (the
// disaster-recovery path an operator looks for first). Found in review.
func TestUsageNamesTheOperatorCommands(t *testing.T) {
	_, out, _ := runCLI(t, "-h")
	var line string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(strings.TrimSpace(l), "operator") {
			line = l
		}
	}
	for _, sub := range []string{"status", "backup", "snapshot"} {
		if !strings.Contains(line, sub) {
			t.Errorf("the usage's operator line %q does not name %s", line, sub)
		}
	}
}

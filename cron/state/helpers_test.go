package state

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func spec(expr string) JobSpec { return JobSpec{Schedule: expr, NomadJob: "batch"} }

func put(name, expr string, ifVersion uint64, at time.Time) PutJob {
	return PutJob{Name: name, Spec: spec(expr), IfVersion: ifVersion, At: at}
}

func started(job string, at time.Time, version uint64) LaunchStarted {
	return LaunchStarted{Job: job, ScheduledAt: at, Identity: Identity(job, at), SpecVersion: version, At: at.Add(time.Second)}
}

func finished(job string, at time.Time, kind OutcomeKind) LaunchFinished {
	o := Outcome{Kind: kind, Reason: "because"}
	if kind == OutcomeDispatched {
		o = Outcome{Kind: kind, ChildID: job + "/dispatch-1"}
	}
	return LaunchFinished{Job: job, ScheduledAt: at, Outcome: o}
}

// step is one command and the error it must produce (nil, or a sentinel).
type step struct {
	cmd  Command
	want error
}

// run applies the steps from slot 1 on, through the encoded path (Encode
// then Apply) when the command is valid, and returns the machine.
func run(t *testing.T, steps []step) *Machine {
	t.Helper()
	m := New()
	for i, s := range steps {
		slot := uint64(i + 1)
		err := m.ApplyCommand(slot, s.cmd)
		if !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("step %d (%s): got error %v, want %v", slot, s.cmd.Kind(), err, s.want)
		}
	}
	return m
}

func mustJob(t testing.TB, m *Machine, name string) Job {
	t.Helper()
	j, ok := m.Job(name)
	if !ok {
		t.Fatalf("job %q not found", name)
	}
	return j
}

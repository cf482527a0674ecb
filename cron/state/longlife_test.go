package state

import (
	"fmt"
	"testing"
	"time"
)

// churnJobs creates, launches (scheduled and triggered), concludes and
// deletes n jobs of distinct names, one after another, from slot on, and
// returns the next slot.
func churnJobs(t *testing.T, m *Machine, slot uint64, from, n int) uint64 {
	t.Helper()
	apply := func(c Command) {
		t.Helper()
		slot++
		if err := m.ApplyCommand(slot, c); err != nil {
			t.Fatalf("slot %d (%s): %v", slot, c.Kind(), err)
		}
	}
	for i := from; i < from+n; i++ {
		name := fmt.Sprintf("job-%06d", i)
		at := t0.Add(time.Duration(i) * time.Hour)
		apply(PutJob{Name: name, Spec: spec("0 * * * *"), At: at})
		j, _ := m.Job(name)
		next := j.NextAt
		apply(started(name, next, j.Version))
		apply(finished(name, next, OutcomeFailed))
		apply(Trigger{Name: name, At: next})
		apply(LaunchFinished{Job: name, ScheduledAt: next, LaunchKind: LaunchManual, Outcome: Outcome{Kind: OutcomeUnknown}})
		apply(DeleteJob{Name: name})
	}
	return slot
}

// TestChurnedJobsLeaveABoundedState: a year of jobs created and deleted
// leaves a state whose snapshot stops growing once the tombstones are at
// their limit.
func TestChurnedJobsLeaveABoundedState(t *testing.T) {
	m := New()
	slot := churnJobs(t, m, 0, 0, MaxTombstones)
	first, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	slot = churnJobs(t, m, slot, MaxTombstones, 10_000)
	second, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d jobs: %d bytes; after %d more: %d bytes; tombstones %d, order %d, names %d, added %d, deleted %d, withOpen %d, orphans %d, rejections %d",
		MaxTombstones, len(first), 10_000, len(second), len(m.tombstones), len(m.tombOrder), len(m.names), len(m.added), len(m.deleted), len(m.withOpen), len(m.orphans), len(m.rejections))
	if len(second) > len(first)+64 || len(m.tombstones) > MaxTombstones || len(m.tombOrder) != len(m.tombstones) ||
		len(m.names)+len(m.added)+len(m.deleted) != 0 || len(m.withOpen)+len(m.orphans) != 0 {
		t.Fatalf("the state grew with the jobs ever made")
	}
	_ = slot
}

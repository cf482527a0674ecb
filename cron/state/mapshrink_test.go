package state

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"paxcron/internal/mapshrink"
)

// neverRebuilt applies commands to m through apply, forgetting m's map
// peaks before each, so that its maps are never rebuilt: the state as it
// was before they were.
func neverRebuilt(m *Machine, apply func(Command)) func(Command) {
	return func(c Command) {
		m.jobsPeak, m.withOpenPeak = mapshrink.Peak{}, mapshrink.Peak{}
		apply(c)
	}
}

// shrinkScript makes n jobs and opens a launch of each, concludes all
// but a tenth, deletes all but a tenth of the jobs, and then makes and
// launches a few more.
func shrinkScript(n int, apply func(Command)) {
	name := func(i int) string { return fmt.Sprintf("job-%06d", i) }
	at := t0
	for i := range n {
		apply(PutJob{Name: name(i), Spec: spec("0 * * * *"), At: at})
		apply(Trigger{Name: name(i), At: at})
	}
	for i := range n - n/10 {
		apply(LaunchFinished{Job: name(i), ScheduledAt: at, LaunchKind: LaunchManual, Outcome: Outcome{Kind: OutcomeUnknown}})
	}
	for i := n / 10; i < n; i++ {
		apply(DeleteJob{Name: name(i)})
	}
	for i := n; i < n+100; i++ {
		apply(PutJob{Name: name(i), Spec: spec("0 * * * *"), At: at})
		apply(Trigger{Name: name(i), At: at})
	}
}

// A state whose jobs and open launches fell far below their peak
// rebuilds those maps, and is the same state as one that did not: the
// same snapshot, byte for byte.
func TestMapsFarBelowTheirPeakAreRebuiltUnchanged(t *testing.T) {
	n := 5 * mapshrink.Floor
	shrunk, kept := New(), New()
	shrinkScript(n, applier(t, shrunk))
	shrinkScript(n, neverRebuilt(kept, applier(t, kept)))
	if shrunk.jobsPeak.Rebuilds == 0 || shrunk.withOpenPeak.Rebuilds == 0 {
		t.Fatalf("%d jobs and %d with an open launch, of peaks of %d: rebuilt %d and %d times, want both",
			len(shrunk.jobs), len(shrunk.withOpen), n, shrunk.jobsPeak.Rebuilds, shrunk.withOpenPeak.Rebuilds)
	}
	if kept.jobsPeak.Rebuilds+kept.withOpenPeak.Rebuilds != 0 {
		t.Fatal("the state kept as it was rebuilt its maps")
	}
	a, err := shrunk.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := kept.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("the rebuilt state's snapshot (%d bytes) differs from the kept one's (%d bytes)", len(a), len(b))
	}
}

// BenchmarkMassDeleteHeap reports the heap in use once a million jobs
// were made (MiB-made) and all but 10,000 deleted (MiB-left), with the
// maps rebuilt far below their peak and without. One run is the figure:
// -benchtime 1x.
func BenchmarkMassDeleteHeap(b *testing.B) {
	const made, left = 1_000_000, 10_000
	for _, rebuilt := range []bool{true, false} {
		b.Run(fmt.Sprintf("rebuilt=%v", rebuilt), func(b *testing.B) {
			for range b.N {
				before := heapInUse()
				m := New()
				apply := applier(b, m)
				if !rebuilt {
					apply = neverRebuilt(m, apply)
				}
				for i := range made {
					apply(PutJob{Name: fmt.Sprintf("job-%07d", i), Spec: spec("? ? * * *"), At: t0})
				}
				peak := heapInUse()
				for i := left; i < made; i++ {
					apply(DeleteJob{Name: fmt.Sprintf("job-%07d", i)})
				}
				m.sortedNames() // drops the deleted names it holds for the next snapshot
				after := heapInUse()
				b.ReportMetric(mib(peak, before), "MiB-made")
				b.ReportMetric(mib(after, before), "MiB-left")
				runtime.KeepAlive(m)
			}
		})
	}
}

// mib is the MiB from before to after.
func mib(after, before uint64) float64 { return (float64(after) - float64(before)) / (1 << 20) }

// A state restored from a snapshot, or replaced by one decoded apart,
// keeps its map shrink floor, which is the replica's configuration like
// its limits, and the rebuilds it counted: the simulator sets a floor of
// a few jobs, and a replica that took a snapshot from its peers went on
// with the server's 4,096, so its maps were never rebuilt again and its
// earlier rebuilds went uncounted.
func TestARestoredStateKeepsItsMapShrinkFloor(t *testing.T) {
	const floor = 4
	source := New()
	applier(t, source)(PutJob{Name: "kept", Spec: spec("0 * * * *"), At: t0})
	data, err := source.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, replace := range []struct {
		how  string
		into func(m *Machine) error
	}{
		{"Restore", func(m *Machine) error { return m.Restore(data) }},
		{"Install", func(m *Machine) error {
			restored, err := DecodeSnapshot(data)
			if err == nil {
				m.Install(restored)
			}
			return err
		}},
	} {
		m := New()
		m.SetMapShrinkFloor(floor)
		shrinkScript(2*floor, applier(t, m))
		before := m.MapRebuilds()
		if before == 0 {
			t.Fatalf("%s: no map rebuilt above a floor of %d before the restore", replace.how, floor)
		}
		if err := replace.into(m); err != nil {
			t.Fatalf("%s: %v", replace.how, err)
		}
		after := m.MapRebuilds()
		if after != before {
			t.Errorf("%s: %d map rebuilds counted after it, %d before", replace.how, after, before)
		}
		apply := applier(t, m)
		for i := range 4 * floor {
			apply(PutJob{Name: fmt.Sprintf("after-%d", i), Spec: spec("0 * * * *"), At: t0})
		}
		for i := range 4 * floor {
			apply(DeleteJob{Name: fmt.Sprintf("after-%d", i)})
		}
		if m.MapRebuilds() == after {
			t.Errorf("%s: %d jobs made and deleted after it, above a floor of %d: no map rebuilt", replace.how, 4*floor, floor)
		}
	}
}

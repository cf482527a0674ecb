package state

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

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

// BenchmarkRestoredMassDeleteHeap is BenchmarkMassDeleteHeap for a
// state restored from a snapshot into a fresh machine (a replica
// starting): 1,000,000 jobs as BenchmarkScale makes them (a payload, two
// meta entries, one launch in each history), of which every 100th is
// kept, so that the survivors are spread over every slab and chunk the
// restore cut them from. It reports the heap in use once restored
// (MiB-restored) and once the others are deleted (MiB-left), and the
// slowest delete, the one that rebuilt the job map (slowest-delete-ms);
// with the jobs moved out of the restore's memory at that rebuild, and
// left there (as before leaveRestoreMemory). One run is the figure:
// -benchtime 1x.
func BenchmarkRestoredMassDeleteHeap(b *testing.B) {
	const made, keepEvery = 1_000_000, 100
	snap, err := buildScale(b, made, 1).Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	for _, moved := range []bool{true, false} {
		b.Run(fmt.Sprintf("moved=%v", moved), func(b *testing.B) {
			for range b.N {
				before := heapInUse()
				m := New()
				if err := m.Restore(snap); err != nil {
					b.Fatal(err)
				}
				m.inRestoreMemory = moved
				restored := heapInUse()
				slowest := deleteAllBut(b, m, keepEvery)
				after := heapInUse()
				b.ReportMetric(mib(restored, before), "MiB-restored")
				b.ReportMetric(mib(after, before), "MiB-left")
				b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-delete-ms")
				runtime.KeepAlive(m)
			}
		})
	}
}

// deleteAllBut deletes m's jobs but every keepEvery-th in name order, and
// returns the longest a delete took.
func deleteAllBut(b *testing.B, m *Machine, keepEvery int) time.Duration {
	apply := applier(b, m)
	var slowest time.Duration
	for i, name := range m.JobNames() {
		if i%keepEvery != 0 {
			start := time.Now()
			apply(DeleteJob{Name: name})
			slowest = max(slowest, time.Since(start))
		}
	}
	m.sortedNames() // drops the deleted names it holds for the next snapshot
	return slowest
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

// richJobsN jobs fill three restore slabs; richFloor is the map shrink
// floor of the machines they are restored into, low enough that their
// job maps are rebuilt.
const richJobsN, richFloor = 3 * jobSlab, 256

// richName is the name of richJobs' job i.
func richName(i int) string { return fmt.Sprintf("rich-%05d", i) }

// richJobs makes n jobs holding all a job can that a restore puts in its
// shared memory or beside it: a payload of its own and meta, a history
// with a child and a reason, and, one in five, three launches left open,
// one under the spec before an edit (whose payload it keeps) and two
// under the edited one (sharing its payload); one in three is paused.
// In a new state, job i is made at version 2i+1 and edited at 2i+2.
func richJobs(n int, apply func(Command)) {
	for i := range n {
		name := richName(i)
		edit := func(ifVersion uint64) {
			apply(PutJob{Name: name, At: t0, IfVersion: ifVersion, Spec: JobSpec{Schedule: "0 * * * *", NomadJob: "batch",
				Payload: fmt.Appendf(nil, `{"job":%d,"v":%d}`, i, ifVersion), Meta: map[string]string{"owner": strconv.Itoa(i % 7)}}})
		}
		edit(0)
		manualLaunch(apply, name, 1, OutcomeDispatched)
		manualLaunch(apply, name, 2, OutcomeFailed)
		if i%5 == 0 {
			manualLaunch(apply, name, 3, "")
		}
		edit(uint64(2*i + 1))
		if i%5 == 0 {
			manualLaunch(apply, name, 4, "")
			manualLaunch(apply, name, 5, "")
		}
		if i%3 == 0 {
			apply(Pause{Name: name})
		}
	}
}

// manualLaunch triggers job name at second s after t0, and concludes the
// launch with outcome unless it is "" (left open).
func manualLaunch(apply func(Command), name string, s int, outcome OutcomeKind) {
	at := t0.Add(time.Duration(s) * time.Second)
	apply(Trigger{Name: name, At: at})
	if outcome != "" {
		f := finished(name, at, outcome)
		f.LaunchKind = LaunchManual
		apply(f)
	}
}

// spreadDeletes deletes all of richJobs' n jobs but one in ten, spread
// over every slab; those of them with open launches leave orphans.
func spreadDeletes(n int, apply func(Command)) {
	for i := range n {
		if i%10 != 0 {
			apply(DeleteJob{Name: richName(i)})
		}
	}
}

// richAfter goes on with spreadDeletes' survivors: each concludes its
// launch under the old spec, is edited and triggered, and a deleted job's
// launch under the old spec is concluded.
func richAfter(n int, apply func(Command)) {
	for i := 0; i < n; i += 10 {
		name := richName(i)
		f := finished(name, t0.Add(3*time.Second), OutcomeSkipped)
		f.LaunchKind = LaunchManual
		apply(f)
		apply(PutJob{Name: name, At: t0, IfVersion: uint64(2*i + 2), Spec: JobSpec{Schedule: "0 * * * *", NomadJob: "batch", Payload: []byte("v3")}})
		manualLaunch(apply, name, 6, "")
	}
	f := finished(richName(5), t0.Add(3*time.Second), OutcomeUnknown)
	f.LaunchKind = LaunchManual
	apply(f)
}

// restoredRich is richJobs' state restored into a fresh machine (a
// replica starting) with the map shrink floor richFloor.
func restoredRich(t *testing.T) *Machine {
	t.Helper()
	source := New()
	richJobs(richJobsN, applier(t, source))
	m := New()
	m.SetMapShrinkFloor(richFloor)
	if err := m.Restore(snapshot(t, source)); err != nil {
		t.Fatal(err)
	}
	return m
}

// A restored state whose job map is rebuilt far below its peak moves its
// jobs out of the restore's slabs and chunks, and is the same state as
// one that did not: the same snapshot, byte for byte, after the deletes
// and after more commands on the jobs moved.
func TestARestoredStateMovedOutOfItsRestoreIsUnchanged(t *testing.T) {
	moved, kept := restoredRich(t), restoredRich(t)
	for _, script := range []func(int, func(Command)){spreadDeletes, richAfter} {
		script(richJobsN, applier(t, moved))
		script(richJobsN, neverRebuilt(kept, applier(t, kept)))
		if moved.inRestoreMemory || !kept.inRestoreMemory {
			t.Fatalf("moved out of the restore's memory: %v and %v, want true and false", !moved.inRestoreMemory, !kept.inRestoreMemory)
		}
		if a, b := snapshot(t, moved), snapshot(t, kept); !bytes.Equal(a, b) {
			t.Fatalf("the moved state's snapshot (%d bytes) differs from the kept one's (%d bytes)", len(a), len(b))
		}
		if err := moved.CheckKept(); err != nil {
			t.Fatal(err)
		}
	}
}

// Once a restored state's job map is rebuilt far below its peak, no job
// or orphan holds a struct or payload the restore made (which would keep
// its whole slab or chunk alive), and the launches that shared a payload
// still do.
func TestARestoredStateRebuiltLeavesItsRestoresMemory(t *testing.T) {
	m := restoredRich(t)
	structs, payloads := map[*job]bool{}, map[*byte]bool{}
	//detlint:maprange collected into sets
	for _, j := range m.jobs {
		structs[j] = true
		for _, p := range payloadsOf(j) {
			payloads[p] = true
		}
	}
	spreadDeletes(richJobsN, applier(t, m))
	//detlint:maprange each job checked alone
	for name, j := range m.jobs {
		if structs[j] {
			t.Fatalf("job %q is still in its restore slab", name)
		}
		for _, p := range payloadsOf(j) {
			if payloads[p] {
				t.Fatalf("job %q still holds a payload in a restore chunk", name)
			}
		}
		for _, l := range j.Open {
			if l.SpecVersion == j.Version && unsafe.SliceData(l.payload) != unsafe.SliceData(j.Spec.Payload) {
				t.Fatalf("job %q: launch %s no longer shares its spec's payload", name, l.Identity)
			}
		}
	}
	if len(m.orphans) == 0 {
		t.Fatal("no open launch of a deleted job")
	}
	for _, l := range m.orphans {
		if payloads[unsafe.SliceData(l.payload)] {
			t.Fatalf("the open launch %s of a deleted job still holds a payload in a restore chunk", l.Identity)
		}
	}
}

// payloadsOf returns where the payloads j holds are, its spec's and its
// open launches', but empty ones.
func payloadsOf(j *job) []*byte {
	out := []*byte{unsafe.SliceData(j.Spec.Payload)}
	for _, l := range j.Open {
		out = append(out, unsafe.SliceData(l.payload))
	}
	return slices.DeleteFunc(out, func(p *byte) bool { return p == nil })
}

// A snapshot frozen before a restored state moves out of the restore's
// memory encodes, while it moves and after, what it held: the structs it
// holds are left as they were, down to where their payloads are (a move
// that wrote equal copies into them would encode the same bytes).
func TestAFrozenSnapshotOutlivesTheMoveOutOfARestore(t *testing.T) {
	m := restoredRich(t)
	want := snapshot(t, m)
	held := map[*job][]*byte{} // what the freeze takes
	//detlint:maprange collected into a map
	for _, j := range m.jobs {
		held[j] = payloadsOf(j)
	}
	encode := m.FreezeSnapshot()
	during := encodeWhile(t, encode, func() { spreadDeletes(richJobsN, applier(t, m)) })
	//detlint:maprange each struct checked alone
	for j, payloads := range held {
		if !slices.Equal(payloadsOf(j), payloads) {
			t.Fatalf("job %q: a struct the frozen snapshot holds had its payloads replaced", j.Name)
		}
	}
	if m.inRestoreMemory {
		t.Fatal("the state did not move out of the restore's memory")
	}
	after, err := encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(during, want) || !bytes.Equal(after, want) {
		t.Fatalf("the frozen snapshot encodes %d bytes while the state moves and %d after, not the %d it held (equal: %v, %v)",
			len(during), len(after), len(want), bytes.Equal(during, want), bytes.Equal(after, want))
	}
}

package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// buildContentFixture is buildFixture plus launches that share content:
// a job with open launches of two spec versions, and a deleted job whose
// open launches (now orphans) are of two versions too.
// testdata/snapshot-v4.bin is its snapshot written by the version 4 code
// (at 9750527), testdata/snapshot-v4.json its restoredView.
func buildContentFixture(t testing.TB) *Machine {
	t.Helper()
	m := buildFixture(t)
	slot := m.LastSlot()
	apply := func(c Command) {
		t.Helper()
		slot++
		if err := m.ApplyCommand(slot, c); err != nil {
			t.Fatalf("slot %d %s: %v", slot, c.Kind(), err)
		}
	}
	start := func(name string, n int) {
		t.Helper()
		for range n {
			j, _ := m.Job(name)
			apply(LaunchStarted{Job: name, ScheduledAt: j.NextAt, Identity: Identity(name, j.NextAt), SpecVersion: j.Version, At: j.NextAt})
		}
	}
	at := t0.Add(time.Hour)
	for _, name := range []string{"multi", "doomed"} {
		apply(PutJob{Name: name, At: at, Spec: JobSpec{Schedule: "*/10 * * * *", NomadJob: "report", Namespace: "ops",
			Payload: []byte(name + " payload, first version"), Meta: map[string]string{"edition": "1", "owner": "ops"}}})
		start(name, 2)
		j, _ := m.Job(name)
		apply(PutJob{Name: name, At: at, IfVersion: j.Version, Spec: JobSpec{Schedule: "*/10 * * * *", NomadJob: "report2", Region: "eu",
			Payload: []byte(name + " payload, second version"), Meta: map[string]string{"edition": "2"}}})
		start(name, 3)
	}
	j, _ := m.Job("multi")
	apply(Trigger{Name: "multi", At: j.LastStartedAt})
	apply(DeleteJob{Name: "doomed"})
	return m
}

// contentOf is every open launch's identity with what it dispatches.
func contentOf(m *Machine) map[string]string {
	out := map[string]string{}
	for _, l := range m.OpenLaunches() {
		payload, meta := l.DispatchContent()
		out[l.Identity] = fmt.Sprintf("%q %v %+v", payload, meta, l.Target)
	}
	return out
}

// TestRestoreVersion4: a version 4 snapshot, where every open launch
// carried its own content and target, restores to the state the version
// 4 code had, each launch dispatching what it did; written again it is
// a version 5 snapshot of the same, smaller.
func TestRestoreVersion4(t *testing.T) {
	data, golden := readFixture(t, 4)
	var want stateView
	if err := json.Unmarshal(golden, &want); err != nil {
		t.Fatal(err)
	}
	m := restoreAs(t, data, want, "version 4")
	built := buildContentFixture(t)
	if got, wantContent := contentOf(m), contentOf(built); !reflect.DeepEqual(got, wantContent) {
		t.Fatalf("restored launches dispatch\n%v\nthe state that wrote them\n%v", got, wantContent)
	}
	again := snapshot(t, m)
	if again[0] != snapshotVersion || !bytes.Equal(again, snapshot(t, built)) {
		t.Fatal("written again, a restored version 4 snapshot differs from the same state's own")
	}
	if len(again) >= len(data) {
		t.Fatalf("version 5 takes %d bytes, version 4 %d: nothing shared", len(again), len(data))
	}
	back := New()
	if err := back.Restore(again); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restoredView(back), restoredView(m)) || !reflect.DeepEqual(contentOf(back), contentOf(m)) {
		t.Fatal("version 5 round trip of a restored version 4 snapshot differs")
	}
}

// TestContentIsWrittenOncePerVersion: a job at the limits (a 16 KiB
// payload, 64 open launches of two versions, then deleted, its launches
// orphans) takes one copy of each version's content in a snapshot, and
// one in memory after a restore. Found in review: each open launch wrote
// its own, 65 copies of a 16 KiB payload per job.
func TestContentIsWrittenOncePerVersion(t *testing.T) {
	m := New()
	apply := applier(t, m)
	payload := func(b byte) []byte { return bytes.Repeat([]byte{b}, MaxPayloadBytes) }
	apply(PutJob{Name: "big", At: t0, Spec: JobSpec{Schedule: "* * * * *", NomadJob: "batch", Payload: payload('a')}})
	startN := func(n int) {
		for range n {
			j, _ := m.Job("big")
			apply(LaunchStarted{Job: "big", ScheduledAt: j.NextAt, Identity: Identity("big", j.NextAt), SpecVersion: j.Version, At: j.NextAt})
		}
	}
	startN(MaxOpenLaunches / 2)
	apply(PutJob{Name: "big", At: t0, IfVersion: 1, Spec: JobSpec{Schedule: "* * * * *", NomadJob: "batch", Payload: payload('b')}})
	startN(MaxOpenLaunches / 2)
	check := func(what string, copies int) {
		t.Helper()
		data := snapshot(t, m)
		if n := bytes.Count(data, payload('a')[:1024]) + bytes.Count(data, payload('b')[:1024]); n != copies*MaxPayloadBytes/1024 {
			t.Fatalf("%s: %d KiB of payload in a snapshot of %d bytes, want %d copies of 16 KiB", what, n, len(data), copies)
		}
		back := New()
		if err := back.Restore(data); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(restoredView(back), restoredView(m)) || !reflect.DeepEqual(contentOf(back), contentOf(m)) {
			t.Fatalf("%s: the state restored differs", what)
		}
		arrays := map[*byte]bool{}
		for _, l := range back.OpenLaunches() {
			p, _ := l.DispatchContent()
			arrays[&p[0]] = true
		}
		if len(arrays) != copies {
			t.Fatalf("%s: restored launches hold %d payloads, want %d", what, len(arrays), copies)
		}
	}
	check("open", 2)
	apply(DeleteJob{Name: "big"})
	check("orphans", 2)
}

// TestRestoreRefusesMisplacedContent: in a version 5 snapshot a launch
// carries its spec version's content only where nothing before it does,
// and one marked shared carries none and has a holder.
func TestRestoreRefusesMisplacedContent(t *testing.T) {
	good := snapshot(t, buildContentFixture(t))
	w := decodeSnapshot(t, good)
	if again := encodeSnapshot(t, w); !bytes.Equal(again, good) {
		t.Fatal("the test's snapshot codec does not round-trip")
	}
	var multi int
	for i, j := range w.JobList {
		if j.Name == "multi" {
			multi = i
		}
	}
	if open := w.JobList[multi].Open; len(open) != 6 || open[0].Shared || !open[1].Shared || !open[5].Shared {
		t.Fatalf("fixture's job has open launches %+v, want 6, the first of an old version carrying its content", open)
	}
	enc := func(f func(*wireState)) []byte {
		c := decodeSnapshot(t, good)
		f(&c)
		return encodeSnapshot(t, c)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"the old version's first shares", enc(func(s *wireState) {
			l := &s.JobList[multi].Open[0]
			l.Shared, l.Payload, l.Meta, l.Target = true, nil, nil, Target{}
		})},
		{"a second copy of the old version", enc(func(s *wireState) {
			o := s.JobList[multi].Open
			o[1].Shared, o[1].Payload, o[1].Meta, o[1].Target = false, o[0].Payload, o[0].Meta, o[0].Target
		})},
		{"a copy of the job's version", enc(func(s *wireState) {
			j := &s.JobList[multi]
			l := &j.Open[5]
			l.Shared, l.Payload, l.Meta = false, j.Spec.Payload, j.Spec.Meta
			l.Target = Target{NomadJob: j.Spec.NomadJob, Namespace: j.Spec.Namespace, Region: j.Spec.Region}
		})},
		{"shared but carrying a payload", enc(func(s *wireState) { s.JobList[multi].Open[5].Payload = []byte("x") })},
		{"shared but carrying a target", enc(func(s *wireState) { s.JobList[multi].Open[1].Target.NomadJob = "elsewhere" })},
		{"shared content of another hash", enc(func(s *wireState) { s.JobList[multi].Open[1].Content++ })},
		{"an orphan sharing what no orphan before it holds", enc(func(s *wireState) {
			for i := range s.Orphans {
				if l := &s.Orphans[i].Launch; !l.Shared && s.Orphans[i].Job == "doomed" {
					l.Shared, l.Payload, l.Meta, l.Target = true, nil, nil, Target{}
					return
				}
			}
			t.Fatal("fixture has no orphan carrying content")
		})},
	} {
		if err := New().Restore(tc.b); !errors.Is(err, ErrSnapshot) {
			t.Errorf("%s: Restore = %v, want ErrSnapshot", tc.name, err)
		}
	}
}

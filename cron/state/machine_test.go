package state

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPutJob(t *testing.T) {
	hourly, quarter := "0 * * * *", "*/15 * * * *"
	at := t0.Add(30 * time.Minute)
	for _, tc := range []struct {
		name    string
		steps   []step
		version uint64
		nextAt  time.Time
		expr    string
	}{
		{"create", []step{{put("j", hourly, 0, at), nil}}, 1, t0.Add(time.Hour), hourly},
		{"create twice", []step{{put("j", hourly, 0, at), nil}, {put("j", quarter, 0, at), ErrConflict}}, 1, t0.Add(time.Hour), hourly},
		// The hourly schedule owed 01:00 at the edit: the new one counts
		// from there (TestScheduleEditCountsFromTheEdit).
		{"replace", []step{{put("j", hourly, 0, at), nil}, {put("j", quarter, 1, at.Add(time.Hour)), nil}}, 2, t0.Add(time.Hour), quarter},
		{"replace stale", []step{{put("j", hourly, 0, at), nil}, {put("j", quarter, 1, at), nil}, {put("j", hourly, 1, at), ErrConflict}}, 2, t0.Add(45 * time.Minute), quarter},
		{"replace ahead", []step{{put("j", hourly, 0, at), nil}, {put("j", quarter, 5, at), ErrConflict}}, 1, t0.Add(time.Hour), hourly},
		{"replace missing", []step{{put("j", hourly, 1, at), ErrConflict}}, 0, time.Time{}, ""},
		{"bad schedule", []step{{put("j", "99 * * * *", 0, at), ErrInvalid}}, 0, time.Time{}, ""},
		{"bad schedule on replace", []step{{put("j", hourly, 0, at), nil}, {put("j", "* * 32 * *", 1, at), ErrInvalid}}, 1, t0.Add(time.Hour), hourly},
		{"replace after a launch counts from it", []step{
			{put("j", hourly, 0, at), nil}, {started("j", t0.Add(time.Hour), 1), nil}, {put("j", quarter, 1, at), nil},
		}, 2, t0.Add(75 * time.Minute), quarter},
		{"never fires", []step{{put("j", "0 0 * 2 MON#5", 0, at), nil}}, 1, time.Time{}, "0 0 * 2 MON#5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := run(t, tc.steps)
			j, ok := m.Job("j")
			spec, version, specOK := m.JobSpec("j")
			if specOK != ok || version != j.Version || !reflect.DeepEqual(spec, j.Spec) {
				t.Fatalf("JobSpec: %+v, version %d, %v; Job: %+v, version %d, %v", spec, version, specOK, j.Spec, j.Version, ok)
			}
			if tc.version == 0 {
				if ok {
					t.Fatalf("job exists: %+v", j)
				}
				return
			}
			if j.Version != tc.version || !j.NextAt.Equal(tc.nextAt) || j.Spec.Schedule != tc.expr {
				t.Fatalf("got version %d next %v schedule %q; want %d %v %q", j.Version, j.NextAt, j.Spec.Schedule, tc.version, tc.nextAt, tc.expr)
			}
			if j.Spec.Concurrency != ConcurrencyAllow || j.Spec.CatchupWindow != DefaultCatchupWindow {
				t.Fatalf("defaults not filled in: %+v", j.Spec)
			}
			if !j.CreatedAt.Equal(at) || j.CreatedVersion != 1 {
				t.Fatalf("created %v version %d", j.CreatedAt, j.CreatedVersion)
			}
		})
	}
}

func TestRejectedCommandsAreRecorded(t *testing.T) {
	m := run(t, []step{
		{put("j", "0 * * * *", 0, t0), nil},
		{put("j", "bad", 0, t0), ErrInvalid},
		{Pause{Name: "nope"}, ErrNotFound},
		{put("j", "0 * * * *", 9, t0), ErrConflict},
	})
	want := []Rejection{{Slot: 2, Kind: KindPutJob, Job: "j"}, {Slot: 3, Kind: KindPause, Job: "nope"}, {Slot: 4, Kind: KindPutJob, Job: "j"}}
	got := m.Rejections()
	if len(got) != len(want) {
		t.Fatalf("rejections %+v", got)
	}
	for i := range got {
		if got[i].Slot != want[i].Slot || got[i].Kind != want[i].Kind || got[i].Job != want[i].Job || got[i].Reason == "" {
			t.Errorf("rejection %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := m.Stats(); s.Applied != 1 || s.Rejected != 3 {
		t.Errorf("stats %+v", s)
	}
	for i := range MaxRejections + 5 {
		_ = m.ApplyCommand(uint64(10+i), Resume{Name: "nope"})
	}
	if got := m.Rejections(); len(got) != MaxRejections || got[len(got)-1].Slot != uint64(10+MaxRejections+4) {
		t.Errorf("ring: %d rejections, last %+v", len(got), got[len(got)-1])
	}
}

func TestApplyUndecodable(t *testing.T) {
	m := New()
	m.Apply(1, []byte("garbage"))
	m.Apply(2, nil)
	if s := m.Stats(); s.Undecodable != 2 || s.Applied != 0 || s.Rejected != 0 {
		t.Fatalf("stats %+v", s)
	}
	r := m.Rejections()
	if len(r) != 2 || r[0].Kind != 0 || r[0].Slot != 1 || m.LastSlot() != 2 {
		t.Fatalf("rejections %+v, last slot %d", r, m.LastSlot())
	}
	b, _ := Encode(put("j", "@daily", 0, t0))
	m.Apply(3, b)
	if _, ok := m.Job("j"); !ok {
		t.Fatal("a valid command after garbage was not applied")
	}
}

func TestSlotsMustIncrease(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on a repeated slot")
		}
	}()
	m := New()
	m.Apply(5, nil)
	m.Apply(5, nil)
}

func TestDeleteJob(t *testing.T) {
	hourly := "0 * * * *"
	h1, h2, h3 := t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(3*time.Hour)
	m := run(t, []step{
		{DeleteJob{Name: "j"}, ErrNotFound},
		{put("j", hourly, 0, t0), nil},
		{put("other", hourly, 0, t0), nil},
		{started("j", h1, 1), nil},
		{started("j", h2, 1), nil},
		{started("other", h1, 2), nil},
		{DeleteJob{Name: "j", IfVersion: 2}, ErrConflict},
		{DeleteJob{Name: "j", IfVersion: 1}, nil},
		// The job is gone; its two open launches are orphans, still to be
		// concluded.
		{finished("j", h1, OutcomeDispatched), nil},
		{finished("j", h1, OutcomeDispatched), ErrNotFound},
		// Created again (version 3) while the h2 launch of the old one is
		// open: the new job counts from h2, so its first launch is h3 and
		// no identity is shared.
		{put("j", hourly, 0, t0), nil},
		{started("j", h1, 3), ErrDuplicate},
		{started("j", h3, 1), ErrInvalid}, // a spec version of the old job
		{started("j", h3, 3), nil},
		{finished("j", h2, OutcomeFailed), nil}, // the old job's orphan
		{DeleteJob{Name: "other"}, nil},         // IfVersion 0: any version
	})
	if s := m.Stats(); s.Launches.Started != 4 || s.Launches.Dispatched != 1 || s.Launches.Failed != 1 {
		t.Fatalf("stats %+v: want 4 started, 1 dispatched, 1 failed", s.Launches)
	}
	j := mustJob(t, m, "j")
	if j.Version != 3 || j.CreatedVersion != 3 || len(j.Open) != 1 || j.Counters.Started != 1 || len(j.History) != 0 {
		t.Fatalf("recreated job %+v", j)
	}
	got := m.OpenLaunches()
	if len(got) != 2 || got[0].Job != "j" || !got[0].ScheduledAt.Equal(h3) || got[1].Job != "other" {
		t.Fatalf("open launches %+v", got)
	}
	if o := m.Orphans(); len(o) != 1 || o[0].Job != "other" {
		t.Fatalf("orphans %+v", o)
	}
}

func TestDeleteRefusedPastMaxOrphans(t *testing.T) {
	m := New()
	slot := uint64(0)
	apply := func(c Command) error {
		slot++
		return m.ApplyCommand(slot, c)
	}
	mustApply := func(c Command) {
		t.Helper()
		if err := apply(c); err != nil {
			t.Fatalf("%s: %v", c.Kind(), err)
		}
	}
	jobs := MaxOrphans / MaxOpenLaunches
	for i := range jobs + 1 {
		name := fmt.Sprintf("j%03d", i)
		mustApply(put(name, "* * * * *", 0, t0))
		for k := 1; k <= MaxOpenLaunches; k++ {
			mustApply(started(name, t0.Add(time.Duration(k)*time.Minute), uint64(i+1)))
		}
		if i < jobs {
			mustApply(DeleteJob{Name: name})
		}
	}
	if got := len(m.Orphans()); got != MaxOrphans {
		t.Fatalf("%d orphans, want %d", got, MaxOrphans)
	}
	last := fmt.Sprintf("j%03d", jobs)
	if err := apply(DeleteJob{Name: last}); !errors.Is(err, ErrLimit) {
		t.Fatalf("delete past MaxOrphans: %v, want ErrLimit", err)
	}
	for k := 1; k <= MaxOpenLaunches; k++ {
		mustApply(finished("j000", t0.Add(time.Duration(k)*time.Minute), OutcomeSkipped))
	}
	mustApply(DeleteJob{Name: last})
	if got := len(m.Orphans()); got != MaxOrphans {
		t.Fatalf("%d orphans, want %d", got, MaxOrphans)
	}
}

func TestPauseResume(t *testing.T) {
	m := run(t, []step{
		{Pause{Name: "j"}, ErrNotFound},
		{Resume{Name: "j"}, ErrNotFound},
		{put("j", "0 * * * *", 0, t0), nil},
		{Pause{Name: "j"}, nil},
		{Pause{Name: "j"}, nil},
	})
	if !mustJob(t, m, "j").Paused {
		t.Fatal("not paused")
	}
	due := m.DueBefore(t0.Add(time.Hour))
	if len(due) != 1 || !due[0].Paused {
		t.Fatalf("a paused job must still come due (to be recorded skipped): %+v", due)
	}
	if err := m.ApplyCommand(10, put("j", "*/5 * * * *", 1, t0)); err != nil || !mustJob(t, m, "j").Paused {
		t.Fatalf("replacing the spec unpaused the job (err %v)", err)
	}
	if err := m.ApplyCommand(11, Resume{Name: "j"}); err != nil || mustJob(t, m, "j").Paused {
		t.Fatalf("resume: %v", err)
	}
}

func TestLaunchStarted(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	m := run(t, []step{
		{started("j", h(1), 1), ErrNotFound},
		{put("j", "0 * * * *", 0, t0), nil},
		{started("j", h(2), 1), ErrInvalid}, // would skip h(1)
		{started("j", h(1), 2), ErrInvalid}, // no such spec version
		{started("j", h(1), 1), nil},
		{started("j", h(1), 1), ErrDuplicate}, // open already
		{finished("j", h(1), OutcomeDispatched), nil},
		{started("j", h(1), 1), ErrDuplicate},                   // finished already
		{started("j", t0, 1), ErrDuplicate},                     // before the last launch
		{started("j", h(1).Add(30*time.Minute), 1), ErrInvalid}, // off-schedule
		{started("j", h(2), 1), nil},
	})
	j := mustJob(t, m, "j")
	if !j.NextAt.Equal(h(3)) || !j.LastStartedAt.Equal(h(2)) {
		t.Fatalf("next %v last %v", j.NextAt, j.LastStartedAt)
	}
	if j.Counters.Started != 2 || j.Counters.Duplicates != 3 || m.Stats().Launches.Duplicates != 3 {
		t.Fatalf("counters %+v", j.Counters)
	}
	if len(j.Open) != 1 || j.Open[0].StartedSlot != 11 || j.Open[0].Identity != Identity("j", h(2)) {
		t.Fatalf("open %+v", j.Open)
	}
}

func TestOpenLaunchLimit(t *testing.T) {
	m := run(t, []step{{put("j", "@every 1m", 0, t0), nil}})
	slot := uint64(2)
	for i := range MaxOpenLaunches + 1 {
		want := error(nil)
		if i == MaxOpenLaunches {
			want = ErrLimit
		}
		next := mustJob(t, m, "j").NextAt
		if err := m.ApplyCommand(slot, started("j", next, 1)); !errors.Is(err, want) || (want == nil && err != nil) {
			t.Fatalf("launch %d: %v, want %v", i, err, want)
		}
		slot++
	}
}

func TestLaunchFinished(t *testing.T) {
	m := run(t, []step{{put("j", "@every 1m", 0, t0), nil}})
	slot := uint64(2)
	apply := func(c Command, want error) {
		t.Helper()
		if err := m.ApplyCommand(slot, c); !errors.Is(err, want) || (want == nil && err != nil) {
			t.Fatalf("slot %d %s: %v, want %v", slot, c.Kind(), err, want)
		}
		slot++
	}
	kinds := []OutcomeKind{OutcomeDispatched, OutcomeFailed, OutcomeSkipped, OutcomeUnknown}
	const n = HistoryLen + 6
	for i := range n {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		apply(started("j", at, 1), nil)
		apply(finished("j", at, kinds[i%4]), nil)
	}
	last := t0.Add(n * time.Minute)
	apply(finished("j", last, OutcomeDispatched), ErrDuplicate)
	apply(finished("j", last.Add(time.Minute), OutcomeDispatched), ErrNotFound)
	j := mustJob(t, m, "j")
	// The newest HistoryLen, but that the launches concluded unknown
	// (minutes 4, 8, 12 and 16) stay.
	var kept []int
	for _, l := range j.History {
		kept = append(kept, int(l.ScheduledAt.Sub(t0)/time.Minute))
	}
	if want := []int{4, 8, 9, 10, 11, 12, 13, 14, 15, 16}; !slices.Equal(kept, want) {
		t.Fatalf("history: launches of minutes %v, want %v", kept, want)
	}
	h := j.History[HistoryLen-1]
	if h.Outcome.Kind != kinds[(n-1)%4] || h.FinishedSlot != h.StartedSlot+1 || len(j.Open) != 0 {
		t.Fatalf("last launch %+v", h)
	}
	perKind := func(k int) uint64 { return uint64((n - k + 3) / 4) } // i%4 == k for i in [0, n)
	want := Counters{Started: n, Dispatched: perKind(0), Failed: perKind(1), Skipped: perKind(2), Unknown: perKind(3), Duplicates: 1}
	if j.Counters != want || m.Stats().Launches != want {
		t.Fatalf("counters %+v / %+v, want %+v", j.Counters, m.Stats().Launches, want)
	}
}

func TestQueriesAreSortedAndCopies(t *testing.T) {
	at := t0.Add(time.Second)
	m := run(t, []step{
		{put("b", "0 * * * *", 0, at), nil},  // next 01:00
		{put("a", "0 * * * *", 0, at), nil},  // next 01:00
		{put("c", "30 * * * *", 0, at), nil}, // next 00:30
		{put("d", "0 0 1 1 *", 0, at), nil},  // next year
		{started("b", t0.Add(time.Hour), 1), nil},
		{started("a", t0.Add(time.Hour), 2), nil},
	})
	var names []string
	for _, j := range m.Jobs() {
		names = append(names, j.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "c", "d"}) {
		t.Fatalf("Jobs() order %v", names)
	}
	due := m.DueBefore(t0.Add(2 * time.Hour))
	var got []string
	for _, d := range due {
		got = append(got, d.Job+"@"+d.ScheduledAt.Format("15:04"))
	}
	if want := []string{"c@00:30", "a@02:00", "b@02:00"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("DueBefore = %v, want %v", got, want)
	}
	if len(m.DueBefore(t0)) != 0 {
		t.Fatal("due before anything is scheduled")
	}
	open := m.OpenLaunches()
	if len(open) != 2 || open[0].Job != "a" || open[1].Job != "b" {
		t.Fatalf("OpenLaunches %+v", open)
	}
	j := mustJob(t, m, "a")
	j.Open[0].Job = "mutated"
	j.Spec.Meta = map[string]string{"x": "y"}
	if again := mustJob(t, m, "a"); again.Open[0].Job != "a" || again.Spec.Meta != nil {
		t.Fatal("Job returned shared memory")
	}
}

// TestRecreatedJobNeverReusesAnIdentity: a job deleted after its
// launches concluded, then created again by a writer whose clock is
// behind, still starts after its namesake's last launch; tombstones are
// bounded.
func TestRecreatedJobNeverReusesAnIdentity(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	m := run(t, []step{
		{put("j", "0 * * * *", 0, t0), nil},
		{started("j", h(1), 1), nil},
		{finished("j", h(1), OutcomeDispatched), nil},
		{Trigger{Name: "j", At: h(1)}, nil},
		{DeleteJob{Name: "j"}, nil},
		{put("j", "0 * * * *", 0, t0), nil}, // the writer's clock says t0
		{started("j", h(1), 2), ErrDuplicate},
		{Trigger{Name: "j", At: h(1)}, ErrDuplicate}, // the namesake's manual launch
		// A forced backfill finds no slot of the new job up to the
		// namesake's last launch: it once walked from the writer's t0 and
		// opened h(1) under the namesake's identity.
		{Backfill{Name: "j", From: t0, To: h(1), At: h(1).Add(time.Minute), Force: true}, nil},
		{started("j", h(2), 2), nil},
	})
	for _, l := range m.OpenLaunches() {
		if l.Identity == Identity("j", h(1)) {
			t.Fatalf("the new job opened %s, its namesake's identity", l.Identity)
		}
	}
	if j := mustJob(t, m, "j"); !j.CreatedAt.Equal(h(1)) || !j.UpdatedAt.Equal(h(1)) {
		t.Fatalf("created %s, updated %s: want the namesake's last launch, %s", j.CreatedAt, j.UpdatedAt, h(1))
	}
	if got := len(m.tombstones); got != 0 {
		t.Fatalf("%d tombstones after the name was reused", got)
	}
	m = New()
	slot := uint64(0)
	for i := range MaxTombstones + 1 {
		name := fmt.Sprintf("t%05d", i)
		for _, c := range []Command{put(name, "0 * * * *", 0, t0), started(name, h(1), uint64(i+1)), finished(name, h(1), OutcomeSkipped), DeleteJob{Name: name}} {
			slot++
			if err := m.ApplyCommand(slot, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(m.tombstones) != MaxTombstones || len(m.tombOrder) != MaxTombstones {
		t.Fatalf("%d tombstones, want %d", len(m.tombstones), MaxTombstones)
	}
	if _, ok := m.tombstones["t00000"]; ok {
		t.Fatal("the oldest tombstone was not the one forgotten")
	}
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if again, _ := r.Snapshot(); !bytes.Equal(again, snap) {
		t.Fatal("tombstones do not round-trip through a snapshot")
	}
}

func TestTrigger(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	manual := func(at time.Time, kind OutcomeKind) LaunchFinished {
		f := finished("j", at, kind)
		f.LaunchKind = LaunchManual
		return f
	}
	m := run(t, []step{
		{Trigger{Name: "j", At: h(1)}, ErrNotFound},
		{put("j", "0 * * * *", 0, t0), nil},
		{Trigger{Name: "j", At: h(1).Add(time.Nanosecond)}, ErrInvalid}, // not a whole second
		{Trigger{Name: "j", At: h(1)}, nil},
		{Trigger{Name: "j", At: h(1)}, ErrDuplicate}, // a retried request
		{started("j", h(1), 1), nil},                 // the scheduled launch at the same time is another launch
		{manual(h(1), OutcomeDispatched), nil},
		{finished("j", h(1), OutcomeDispatched), nil},
		{manual(h(1), OutcomeDispatched), ErrDuplicate},
		{Trigger{Name: "j", At: h(2), Force: true}, nil},
	})
	j := mustJob(t, m, "j")
	if len(j.Open) != 1 || j.Open[0].Kind != LaunchManual || !j.Open[0].Force || j.Open[0].Identity != Identity("j", h(2))+"-manual" {
		t.Fatalf("open %+v", j.Open)
	}
	if !j.LastTriggeredAt.Equal(h(2)) || !j.LastStartedAt.Equal(h(1)) || len(j.History) != 2 {
		t.Fatalf("job %+v", j)
	}
}

func TestBackfill(t *testing.T) {
	m5 := func(n int) time.Time { return t0.Add(time.Duration(n) * 5 * time.Minute) }
	spec5 := put("j", "*/5 * * * *", 0, t0)
	backfill := func(from, to time.Time, force bool) Backfill {
		return Backfill{Name: "j", From: from, To: to, At: m5(10), Force: force}
	}
	bf := func(at time.Time, kind OutcomeKind) LaunchFinished {
		f := finished("j", at, kind)
		f.LaunchKind = LaunchBackfill
		return f
	}
	steps := []step{{spec5, nil}}
	// Slots 1-6: dispatched, skipped, failed, unknown, skipped, open.
	outcomes := []OutcomeKind{OutcomeDispatched, OutcomeSkipped, OutcomeFailed, OutcomeUnknown, OutcomeSkipped}
	for i := 1; i <= 6; i++ {
		steps = append(steps, step{started("j", m5(i), 1), nil})
		if i <= len(outcomes) {
			steps = append(steps, step{finished("j", m5(i), outcomes[i-1]), nil})
		}
	}
	steps = append(steps,
		step{backfill(m5(1), m5(7), false), ErrInvalid}, // past the last launch
		step{Backfill{Name: "j", From: m5(3), To: m5(1), At: m5(10)}, ErrInvalid},
		step{backfill(m5(1), m5(6), false), nil}, // opens 2, 3 and 5: not 1 (ran), 4 (unknown), 6 (open)
		step{backfill(m5(1), m5(6), false), nil}, // a retry opens nothing more
		step{bf(m5(2), OutcomeDispatched), nil},
		step{bf(m5(3), OutcomeSkipped), nil},
		step{backfill(m5(0), m5(6), true), nil}, // forced: 3 again and 4 (unknown); 2 ran now
	)
	m := run(t, steps)
	j := mustJob(t, m, "j")
	var open []string
	for _, l := range j.Open {
		open = append(open, fmt.Sprintf("%s@%d", l.Kind, l.ScheduledAt.Sub(t0)/(5*time.Minute)))
	}
	if got, want := strings.Join(open, " "), "backfill@3 backfill@4 backfill@5 scheduled@6"; got != want {
		t.Fatalf("open launches %q, want %q", got, want)
	}
	for _, l := range j.Open {
		if l.Kind == LaunchBackfill && (l.Identity != Identity("j", l.ScheduledAt) || !l.StartedAt.Equal(m5(10))) {
			t.Fatalf("backfill launch %+v: keeps the slot's identity, starts at the request", l)
		}
	}
	if !j.Open[0].Force || j.Open[2].Force {
		t.Fatalf("force flags: %+v", j.Open)
	}
	// A From between two slots leaves out the slot before it. Found in
	// review: a From with a fraction of a second opened that slot too.
	frac := run(t, []step{{spec5, nil},
		{started("j", m5(1), 1), nil}, {finished("j", m5(1), OutcomeSkipped), nil},
		{started("j", m5(2), 1), nil}, {finished("j", m5(2), OutcomeSkipped), nil},
		{backfill(m5(1).Add(500*time.Millisecond), m5(2), false), nil},
	})
	if open := mustJob(t, frac, "j").Open; len(open) != 1 || !open[0].ScheduledAt.Equal(m5(2)) {
		t.Fatalf("backfill from half a second after slot 1 opened %+v, want slot 2 alone", open)
	}
	// A range too long to walk is refused, whole.
	long := New()
	slot := uint64(1)
	if err := long.ApplyCommand(slot, put("s", "* * * * * *", 0, t0)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= MaxBackfillScan+1; i++ {
		slot++
		at := t0.Add(time.Duration(i) * time.Second)
		if err := long.ApplyCommand(slot, LaunchStarted{Job: "s", ScheduledAt: at, Identity: Identity("s", at), SpecVersion: 1, At: at}); err != nil {
			t.Fatal(err)
		}
		slot++
		if err := long.ApplyCommand(slot, finished("s", at, OutcomeSkipped)); err != nil {
			t.Fatal(err)
		}
	}
	to := t0.Add(time.Duration(MaxBackfillScan+1) * time.Second)
	if err := long.ApplyCommand(slot+1, Backfill{Name: "s", From: t0.Add(-48 * time.Hour), To: to, At: to, Force: true}); !errors.Is(err, ErrLimit) {
		t.Fatalf("a backfill over %d slots: %v, want ErrLimit", MaxBackfillScan+1, err)
	}
	if err := long.ApplyCommand(slot+2, Backfill{Name: "s", From: to.Add(-100 * time.Second), To: to, At: to, Force: true}); !errors.Is(err, ErrLimit) {
		t.Fatalf("a backfill that would open too many launches: %v, want ErrLimit", err)
	}
}

// TestBackfillAfterAForcedOpeningNeedsForce: a slot that only a forced
// backfill could reopen (its launch concluded unknown, or left the
// history) still needs force after such a backfill was skipped or
// failed. Found in review: that skip or failure became the slot's last
// record, so a backfill not forced reopened the slot under its token,
// and dispatched a second child if the slot had one that Nomad had since
// collected (an unknown launch is concluded at Nomad's memory horizon; a
// launch leaves the history ten launches later, ten hours for an hourly
// job).
func TestBackfillAfterAForcedOpeningNeedsForce(t *testing.T) {
	m5 := func(n int) time.Time { return t0.Add(time.Duration(n) * 5 * time.Minute) }
	bf := func(at time.Time, kind OutcomeKind, force bool) []step {
		f := finished("j", at, kind)
		f.LaunchKind = LaunchBackfill
		return []step{{Backfill{Name: "j", From: at, To: at, At: m5(30), Force: force}, nil}, {f, nil}}
	}
	slot1 := func(outcomes ...OutcomeKind) []step {
		steps := []step{{put("j", "*/5 * * * *", 0, t0), nil}}
		for i, o := range outcomes {
			steps = append(steps, step{started("j", m5(i+1), 1), nil}, step{finished("j", m5(i+1), o), nil})
		}
		return steps
	}
	pushedOut := make([]OutcomeKind, HistoryLen+1)
	for i := range pushedOut {
		pushedOut[i] = OutcomeDispatched
	}
	for _, tc := range []struct {
		name   string
		steps  []step
		reopen bool
	}{
		{"unknown, then a forced backfill skipped", append(slot1(OutcomeUnknown), bf(m5(1), OutcomeSkipped, true)...), false},
		{"unknown, then a forced backfill failed", append(slot1(OutcomeUnknown), bf(m5(1), OutcomeFailed, true)...), false},
		{"dispatched and out of the history, then a forced backfill skipped", append(slot1(pushedOut...), bf(m5(1), OutcomeSkipped, true)...), false},
		{"skipped, then a forced backfill unknown, then one skipped", append(append(slot1(OutcomeSkipped), bf(m5(1), OutcomeUnknown, true)...), bf(m5(1), OutcomeSkipped, true)...), false},
		// Reopened as before: every opening made no child.
		{"skipped, then a forced backfill skipped", append(slot1(OutcomeSkipped), bf(m5(1), OutcomeSkipped, true)...), true},
		{"failed, then a backfill failed", append(slot1(OutcomeFailed), bf(m5(1), OutcomeFailed, false)...), true},
	} {
		for _, force := range []bool{false, true} {
			steps := append(slices.Clone(tc.steps), step{Backfill{Name: "j", From: m5(1), To: m5(1), At: m5(31), Force: force}, nil})
			open := mustJob(t, run(t, steps), "j").Open
			if want := tc.reopen || force; (len(open) == 1) != want || len(open) > 1 {
				t.Errorf("%s, then a backfill (forced %v): opened %+v, want slot 1 reopened %v", tc.name, force, open, want)
			}
		}
	}
}

// TestTakeoverFencesConclusions: once a leader's Takeover is applied, an
// earlier leader's conclusions are refused, whatever order Paxos chose
// them in.
func TestTakeoverFencesConclusions(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	in := func(f LaunchFinished, term Term) LaunchFinished { f.Term = term; return f }
	old, next := Term{Round: 4, Replica: 1}, Term{Round: 5, Replica: 2}
	m := run(t, []step{
		{put("j", "0 * * * *", 0, t0), nil},
		{Takeover{Term: old}, nil},
		{started("j", h(1), 1), nil},
		{started("j", h(2), 1), nil},
		{in(finished("j", h(1), OutcomeDispatched), old), nil},
		{Takeover{Term: next}, nil},
		{in(finished("j", h(2), OutcomeSkipped), old), ErrStale}, // the deposed leader, too late
		{Takeover{Term: old}, ErrStale},
		{Takeover{}, ErrInvalid},
		{in(finished("j", h(2), OutcomeDispatched), next), nil},
	})
	if m.Term() != next || m.Stats().Stale != 2 {
		t.Fatalf("term %v, stale %d", m.Term(), m.Stats().Stale)
	}
	if j := mustJob(t, m, "j"); len(j.Open) != 0 || j.History[1].Outcome.Kind != OutcomeDispatched {
		t.Fatalf("history %+v", j.History)
	}
}

// TestSnapshotTerm: the term read from a snapshot's header alone is the
// last Takeover's, and a header that does not decode is an error.
func TestSnapshotTerm(t *testing.T) {
	term := Term{Round: 7, Replica: 3}
	m := run(t, []step{{put("j", "0 * * * *", 0, t0), nil}, {Takeover{Term: term}, nil}})
	data, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := SnapshotTerm(data); err != nil || got != term {
		t.Errorf("SnapshotTerm: %v, %v; want %v", got, err, term)
	}
	empty, _ := New().Snapshot()
	if got, err := SnapshotTerm(empty); err != nil || got != (Term{}) {
		t.Errorf("SnapshotTerm of a state with no Takeover: %v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {9}, {snapshotVersion}, data[:3]} {
		if _, err := SnapshotTerm(bad); !errors.Is(err, ErrSnapshot) {
			t.Errorf("SnapshotTerm(%x): %v, want ErrSnapshot", bad, err)
		}
	}
}

// TestNamesStayInOrder: the cached order of job names follows creations,
// deletions and re-creations between snapshots.
func TestNamesStayInOrder(t *testing.T) {
	m := New()
	slot := uint64(0)
	apply := func(c Command) {
		t.Helper()
		slot++
		if err := m.ApplyCommand(slot, c); err != nil {
			t.Fatalf("%s: %v", c.Kind(), err)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	live := map[string]bool{}
	var held, heldCopy []string // JobNames as a round left it
	for round := range 30 {
		if !slices.Equal(held, heldCopy) {
			t.Fatalf("round %d: a JobNames slice changed under its holder: %v, was %v", round, held, heldCopy)
		}
		for range 20 {
			name := fmt.Sprintf("n%02d", r.IntN(40))
			if live[name] {
				apply(DeleteJob{Name: name})
				delete(live, name)
			} else {
				apply(put(name, "0 * * * *", 0, t0))
				live[name] = true
			}
		}
		want := slices.Sorted(maps.Keys(live))
		if got := m.sortedNames(); !slices.Equal(got, want) {
			t.Fatalf("round %d: names %v, want %v", round, got, want)
		}
		held = m.JobNames()
		heldCopy = slices.Clone(held)
	}
}

// TestSchedulesShared: jobs with the same expression and zone share one
// parsed schedule unless it hashes their names, after a restore too.
func TestSchedulesShared(t *testing.T) {
	m := run(t, []step{
		{put("a", "0 * * * *", 0, t0), nil},
		{put("b", "0 * * * *", 0, t0), nil},
		{put("c", "0 ? * * *", 0, t0), nil},
		{put("d", "0 ? * * *", 0, t0), nil},
	})
	check := func(m *Machine) {
		t.Helper()
		if m.jobs["a"].sched != m.jobs["b"].sched {
			t.Error("a and b do not share their schedule")
		}
		if m.jobs["c"].sched == m.jobs["d"].sched {
			t.Error("c and d share a schedule that hashes their names")
		}
	}
	check(m)
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	check(r)
}

// TestLaunchContent: an open launch records the hash of the content it
// dispatches, the history does not keep it, and the hash is pinned: it is
// in snapshots, so every version must compute the same.
func TestLaunchContent(t *testing.T) {
	spec := JobSpec{Schedule: "@hourly", NomadJob: "batch", Payload: []byte(`{"a":1}`), Meta: map[string]string{"k": "v", "a": "b"}}
	if got, want := ContentHash(spec), uint64(0x850afc97efa5b768); got != want {
		t.Fatalf("ContentHash = %#x, want %#x (a changed hash fails every open launch after an upgrade)", got, want)
	}
	other := spec
	other.Meta = map[string]string{"k": "v", "a": "bb"}
	moved := spec
	moved.Meta = map[string]string{"k": "v", "ab": ""}
	if ContentHash(other) == ContentHash(spec) || ContentHash(moved) == ContentHash(other) || ContentHash(JobSpec{}) == ContentHash(spec) {
		t.Fatal("different content, same hash")
	}
	m := run(t, []step{{PutJob{Name: "j", Spec: spec, At: t0}, nil}})
	j := mustJob(t, m, "j")
	next := j.NextAt
	if err := m.ApplyCommand(2, LaunchStarted{Job: "j", ScheduledAt: next, Identity: Identity("j", next), SpecVersion: 1, At: next}); err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyCommand(3, Trigger{Name: "j", At: next}); err != nil {
		t.Fatal(err)
	}
	info, _ := m.Info("j")
	j = mustJob(t, m, "j")
	if info.Content != ContentHash(spec) || len(j.Open) != 2 || j.Open[0].Content != info.Content || j.Open[1].Content != info.Content {
		t.Fatalf("info %#x, open %+v", info.Content, j.Open)
	}
	if err := m.ApplyCommand(4, LaunchFinished{Job: "j", ScheduledAt: next, Outcome: Outcome{Kind: OutcomeDispatched, ChildID: "c"}}); err != nil {
		t.Fatal(err)
	}
	if h := mustJob(t, m, "j").History; len(h) != 1 || h[0].Content != 0 {
		t.Fatalf("history %+v", h)
	}
}

// TestStartAfterEditRunsTheEdit: a start proposed under one spec version
// and applied after an edit fixes, and records, the edited spec.
func TestStartAfterEditRunsTheEdit(t *testing.T) {
	v1 := JobSpec{Schedule: "@hourly", NomadJob: "batch", Payload: []byte("v1")}
	v2 := JobSpec{Schedule: "@hourly", NomadJob: "batch-v2", Payload: []byte("v2")}
	m := run(t, []step{{PutJob{Name: "j", Spec: v1, At: t0}, nil}, {PutJob{Name: "j", Spec: v2, IfVersion: 1, At: t0}, nil}})
	next := mustJob(t, m, "j").NextAt
	if err := m.ApplyCommand(3, LaunchStarted{Job: "j", ScheduledAt: next, Identity: Identity("j", next), SpecVersion: 1, At: next}); err != nil {
		t.Fatal(err)
	}
	l, ok := m.OpenLaunch("j", next, LaunchScheduled)
	payload, _ := l.DispatchContent()
	if !ok || l.SpecVersion != 2 || l.Target.NomadJob != "batch-v2" || string(payload) != "v2" || l.Content != ContentHash(v2) {
		t.Fatalf("open launch %+v (payload %q)", l, payload)
	}
}

func TestJobsPage(t *testing.T) {
	m := New()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"b-2", "a-1", "b-1", "c-1", "b-3"} {
		if err := m.ApplyCommand(uint64(i+1), PutJob{Name: name, Spec: JobSpec{Schedule: "@hourly", NomadJob: "p"}, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(js []Job) []string {
		var out []string
		for _, j := range js {
			out = append(out, j.Name)
		}
		return out
	}
	for _, c := range []struct {
		prefix, after string
		limit         int
		want          []string
		more          bool
	}{
		{"", "", 10, []string{"a-1", "b-1", "b-2", "b-3", "c-1"}, false},
		{"", "", 2, []string{"a-1", "b-1"}, true},
		{"", "b-1", 2, []string{"b-2", "b-3"}, true},
		{"b-", "", 10, []string{"b-1", "b-2", "b-3"}, false},
		{"b-", "b-2", 10, []string{"b-3"}, false},
		{"b-", "b-3", 10, nil, false},
		{"b-", "a", 1, []string{"b-1"}, true},
		{"d", "", 10, nil, false},
		{"", "c-1", 10, nil, false},
	} {
		got, more := m.JobsPage(c.prefix, c.after, c.limit)
		if !slices.Equal(names(got), c.want) || more != c.more {
			t.Errorf("JobsPage(%q, %q, %d) = %v, %v; want %v, %v", c.prefix, c.after, c.limit, names(got), more, c.want, c.more)
		}
	}
	if m.JobCount() != 5 {
		t.Errorf("JobCount %d, want 5", m.JobCount())
	}
}

// TestScheduleEndsAtYear9999: a job's next launch past the last second a
// command or snapshot can hold is none, so its snapshot restores. Found in
// review: NextAt went to 10000-01-01 and every later snapshot was refused.
func TestScheduleEndsAtYear9999(t *testing.T) {
	m := New()
	apply := applier(t, m)
	last := time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)
	apply(put("j", "0 * * * *", 0, last.Add(-30*time.Minute)))
	if got := mustJob(t, m, "j").NextAt; !got.Equal(last) {
		t.Fatalf("next launch %v, want %v", got, last)
	}
	apply(started("j", last, 1))
	if got := mustJob(t, m, "j").NextAt; !got.IsZero() {
		t.Fatalf("next launch after the last hour of 9999: %v, want none", got)
	}
	apply(put("k", "0 * * * *", 0, last.Add(30*time.Minute)))
	if got := mustJob(t, m, "k").NextAt; !got.IsZero() {
		t.Fatalf("job created in the last hour of 9999: next launch %v, want none", got)
	}
	if err := New().Restore(snapshot(t, m)); err != nil {
		t.Fatalf("restore: %v", err)
	}
}

// TestNamesakeOutlivesItsTombstone: a job re-created under a deleted
// one's name counts from its namesakes' last launches however the writers'
// clocks lag, through a chain of re-creations and after the namesake's
// tombstone was evicted while its launch was still open. Found in review:
// both let a new launch take an old one's identity (a Nomad token that
// hands back the old child, or two open launches that share one).
func TestNamesakeOutlivesItsTombstone(t *testing.T) {
	due := t0.Add(time.Hour)
	noReuse := func(t *testing.T, m *Machine) {
		t.Helper()
		j := mustJob(t, m, "a")
		if !j.NextAt.After(due) {
			t.Fatalf("re-created job's next launch %s, the namesake's identity", Identity("a", j.NextAt))
		}
		if !j.LastTriggeredAt.Equal(due) {
			t.Fatalf("re-created job's last manual launch %v, want the namesake's %v", j.LastTriggeredAt, due)
		}
		if err := m.ApplyCommand(m.LastSlot()+1, Trigger{Name: "a", At: due}); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("trigger at the namesake's manual launch: %v, want a duplicate", err)
		}
	}
	t.Run("a chain of re-creations, the last writer's clock behind", func(t *testing.T) {
		m := New()
		apply := applier(t, m)
		apply(put("a", "0 * * * *", 0, t0))
		apply(started("a", due, 1))
		apply(finished("a", due, OutcomeDispatched))
		apply(Trigger{Name: "a", At: due})
		manual := finished("a", due, OutcomeDispatched)
		manual.LaunchKind = LaunchManual
		apply(manual)
		apply(DeleteJob{Name: "a"})
		apply(put("a", "0 * * * *", 0, due.Add(5*time.Second))) // after the last launch
		apply(DeleteJob{Name: "a"})                             // before its first
		apply(put("a", "0 * * * *", 0, due.Add(-10*time.Second)))
		noReuse(t, m)
	})
	t.Run("the tombstone evicted while the launches are open", func(t *testing.T) {
		m := New()
		apply := applier(t, m)
		apply(put("a", "0 * * * *", 0, t0))
		apply(started("a", due, 1))
		apply(Trigger{Name: "a", At: due})
		apply(DeleteJob{Name: "a"}) // both launches left open, as orphans
		for i := range MaxTombstones {
			name := fmt.Sprintf("b%d", i)
			apply(put(name, "0 * * * *", 0, t0))
			apply(started(name, due, mustJob(t, m, name).Version))
			apply(finished(name, due, OutcomeDispatched))
			apply(DeleteJob{Name: name})
		}
		if len(m.Orphans()) != 2 {
			t.Fatalf("orphans %+v, want a's two", m.Orphans())
		}
		apply(put("a", "0 * * * *", 0, t0))
		noReuse(t, m)
		if err := New().Restore(snapshot(t, m)); err != nil {
			t.Fatalf("restore: %v", err)
		}
	})
}

// TestCopyOfAConclusionLeavesTheNextOpeningOpen: a backfill opens a slot
// again once its first opening is concluded; a copy of the first
// conclusion chosen after that (a lost proposal proposed again) is a
// duplicate, not the second opening's conclusion. Found in review: it
// closed the second opening with the first's outcome, though nothing was
// tried for it.
func TestCopyOfAConclusionLeavesTheNextOpeningOpen(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	m := New()
	apply := applier(t, m)
	apply(put("j", "0 * * * *", 0, t0))
	apply(started("j", h(1), 1))
	apply(finished("j", h(1), OutcomeFailed))
	backfill := Backfill{Name: "j", From: h(1), To: h(1), At: h(2), Force: true}
	apply(backfill)
	first, _ := m.OpenLaunch("j", h(1), LaunchBackfill)
	conclusion := finished("j", h(1), OutcomeFailed)
	conclusion.LaunchKind, conclusion.StartedSlot = LaunchBackfill, first.StartedSlot
	apply(conclusion)
	apply(backfill) // the operator asks again
	second, ok := m.OpenLaunch("j", h(1), LaunchBackfill)
	if !ok || second.StartedSlot == first.StartedSlot {
		t.Fatalf("second backfill: open %v, %+v", ok, second)
	}
	if err := m.ApplyCommand(m.LastSlot()+1, conclusion); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a copy of the first opening's conclusion: %v, want a duplicate", err)
	}
	if _, ok := m.OpenLaunch("j", h(1), LaunchBackfill); !ok {
		t.Fatal("a copy of the first opening's conclusion closed the second")
	}
	// One written before StartedSlot existed concludes whatever is open.
	legacy := conclusion
	legacy.StartedSlot = 0
	applier(t, m)(legacy)
	if _, ok := m.OpenLaunch("j", h(1), LaunchBackfill); ok {
		t.Fatal("a conclusion without a started slot left the launch open")
	}
}

// TestLaunchFinishedWithoutStartedSlotDecodes: an entry written before
// LaunchFinished carried StartedSlot (an array one element shorter)
// decodes with zero, and one with it decodes in full.
func TestLaunchFinishedWithoutStartedSlotDecodes(t *testing.T) {
	type oldWire struct {
		Job         string
		ScheduledAt wireTime
		Outcome     wireOutcome
		Kind        uint8
		Term        Term
	}
	at := t0.Add(time.Hour)
	b, err := appendValue([]byte{commandVersion, byte(KindLaunchFinished)},
		&oldWire{Job: "j", ScheduledAt: toWire(at), Outcome: wireOutcome{Kind: string(OutcomeSkipped), Reason: "paused"}, Kind: uint8(LaunchBackfill), Term: Term{Round: 2, Replica: 1}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := LaunchFinished{Job: "j", ScheduledAt: at, LaunchKind: LaunchBackfill, Outcome: Outcome{Kind: OutcomeSkipped, Reason: "paused"}, Term: Term{Round: 2, Replica: 1}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("decoded %+v, want %+v", c, want)
	}
	want.StartedSlot = 7
	nb, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Decode(nb); err != nil || !reflect.DeepEqual(c, want) {
		t.Fatalf("decoded %+v, %v; want %+v", c, err, want)
	}
	if len(nb) != len(b)+1 {
		t.Fatalf("encoding grew by %d bytes, want 1", len(nb)-len(b))
	}
}

// TestScheduleEditCountsFromTheEdit: a new schedule owes its slots from
// the edit, or from the first slot the old schedule still owed by then,
// never from slots no schedule of the job had at the time. Before the
// fix, a yearly job edited a day later to every 5 minutes owed (and
// skipped as missed) every 5-minute slot since its creation.
func TestScheduleEditCountsFromTheEdit(t *testing.T) {
	yearly, five, hourly := "0 0 1 1 *", "*/5 * * * *", "0 * * * *"
	created, edit := t0.Add(90*time.Second), t0.Add(24*time.Hour+7*time.Minute+30*time.Second)
	for _, tc := range []struct {
		name   string
		steps  []step
		nextAt time.Time
	}{
		{"never launched, nothing owed by the edit", []step{
			{put("j", yearly, 0, created), nil}, {put("j", five, 1, edit), nil},
		}, t0.Add(24*time.Hour + 10*time.Minute)},
		{"launched, nothing owed by the edit", []step{
			{put("j", hourly, 0, created), nil}, {started("j", t0.Add(time.Hour), 1), nil},
			{put("j", five, 1, t0.Add(90*time.Minute+time.Second)), nil},
		}, t0.Add(95 * time.Minute)},
		// The old schedule owed 01:00 (no leader launched it): the new
		// one counts from there, so its slots since come due.
		{"owed by the edit", []step{
			{put("j", hourly, 0, created), nil}, {put("j", five, 1, t0.Add(90*time.Minute)), nil},
		}, t0.Add(time.Hour)},
		// An edit that keeps the schedule leaves what it owes alone.
		{"schedule kept", []step{
			{put("j", five, 0, created), nil}, {put("j", five, 1, edit), nil},
		}, t0.Add(5 * time.Minute)},
		// A writer whose clock lags: never before the last launch.
		{"edit before the last launch", []step{
			{put("j", hourly, 0, created), nil}, {started("j", t0.Add(time.Hour), 1), nil},
			{put("j", five, 1, created), nil},
		}, t0.Add(65 * time.Minute)},
		// The old schedule had no slot left: counts from the edit.
		{"old schedule ended", []step{
			{put("j", "0 0 * 2 MON#5", 0, created), nil}, {put("j", five, 1, edit), nil},
		}, t0.Add(24*time.Hour + 10*time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := run(t, tc.steps)
			j, _ := m.Job("j")
			if !j.NextAt.Equal(tc.nextAt) {
				t.Fatalf("next launch %s, want %s", j.NextAt.Format(time.RFC3339), tc.nextAt.Format(time.RFC3339))
			}
			if err := m.CheckKept(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestScheduleEditSupersedesTheSlotOwed: an edit after a slot came due and
// before it started, to a schedule without that slot, records it skipped
// (ReasonSuperseded) and moves LastStartedAt to it; the slots the new
// schedule owes are those it owed before. Before the fix the slot had no
// record at all (a silent skip), and a start of it proposed under the old
// schedule was refused as off the schedule rather than as a duplicate.
func TestScheduleEditSupersedesTheSlotOwed(t *testing.T) {
	hourly, quarters := "0 * * * *", "15,45 * * * *"
	created, edit := t0.Add(90*time.Second), t0.Add(90*time.Minute)
	due := t0.Add(time.Hour) // 01:00, owed by the hourly schedule at 01:30
	m := run(t, []step{
		{put("j", hourly, 0, created), nil},
		{put("j", quarters, 1, edit), nil},
		// Proposed under the old schedule, applied after the edit.
		{started("j", due, 1), ErrDuplicate},
	})
	j := mustJob(t, m, "j")
	want := Launch{Job: "j", ScheduledAt: due, Identity: LaunchIdentity("j", due, LaunchScheduled), SpecVersion: 1, StartedAt: edit,
		StartedSlot: 1, FinishedSlot: 2, Outcome: Outcome{Kind: OutcomeSkipped, Reason: ReasonSuperseded(edit, 2)}}
	if len(j.History) != 1 || !reflect.DeepEqual(j.History[0], want) {
		t.Fatalf("history %+v, want the slot skipped: %+v", j.History, want)
	}
	if !strings.Contains(want.Outcome.Reason, "edited at 2026-03-01T01:30:00Z (version 2)") {
		t.Fatalf("reason %q does not say when the schedule was edited", want.Outcome.Reason)
	}
	if !j.LastStartedAt.Equal(due) || !j.NextAt.Equal(t0.Add(75*time.Minute)) {
		t.Fatalf("last started %s, next %s; want %s and 01:15", j.LastStartedAt.Format(time.RFC3339), j.NextAt.Format(time.RFC3339), due.Format(time.RFC3339))
	}
	if c := j.Counters; c != (Counters{Started: 1, Skipped: 1, Duplicates: 1}) {
		t.Fatalf("job counters %+v", c)
	}
	if s := m.Stats(); s.Launches != (Counters{Started: 1, Skipped: 1, Duplicates: 1}) || s.Rejected != 0 || m.OpenCount() != 0 {
		t.Fatalf("stats %+v, %d open", s, m.OpenCount())
	}
	if err := m.CheckKept(); err != nil {
		t.Fatal(err)
	}
	// A snapshot holding the record restores to the same state.
	back := restored(t, m)
	if !reflect.DeepEqual(restoredView(back), restoredView(m)) {
		t.Fatalf("restored %+v, want %+v", restoredView(back), restoredView(m))
	}
	// The new schedule's slot comes due next, and is started.
	if err := back.ApplyCommand(4, started("j", t0.Add(75*time.Minute), 2)); err != nil {
		t.Fatal(err)
	}
}

// TestScheduleEditKeepsTheSlotOwedThatItHas: an edit after a slot came due,
// to a schedule that has that slot too, records nothing: the new schedule
// owes it, and its start (proposed before the edit or after) is accepted.
func TestScheduleEditKeepsTheSlotOwedThatItHas(t *testing.T) {
	created, edit := t0.Add(90*time.Second), t0.Add(90*time.Minute)
	due := t0.Add(time.Hour)
	m := run(t, []step{
		{put("j", "0 * * * *", 0, created), nil},
		{put("j", "*/20 * * * *", 1, edit), nil},
		{started("j", due, 1), nil},
	})
	j := mustJob(t, m, "j")
	if len(j.History) != 0 || !j.LastStartedAt.Equal(due) || j.Counters != (Counters{Started: 1}) || len(j.Open) != 1 {
		t.Fatalf("history %+v, last started %s, counters %+v, open %d: want the slot started, nothing recorded",
			j.History, j.LastStartedAt.Format(time.RFC3339), j.Counters, len(j.Open))
	}
	if !j.NextAt.Equal(t0.Add(80 * time.Minute)) {
		t.Fatalf("next %s, want 01:20", j.NextAt.Format(time.RFC3339))
	}
}

// TestSupersededSlotWithinTheReasonLimit: the record of a superseded slot
// counts against the histories' reason bytes like any conclusion's: past
// the limit it is kept without its reason.
func TestSupersededSlotWithinTheReasonLimit(t *testing.T) {
	limits := DefaultLimits()
	limits.HistoryReasons = 10
	m, err := NewWithLimits(limits)
	if err != nil {
		t.Fatal(err)
	}
	apply := applier(t, m)
	apply(put("j", "0 * * * *", 0, t0.Add(90*time.Second)))
	apply(put("j", "15,45 * * * *", 1, t0.Add(90*time.Minute)))
	j := mustJob(t, m, "j")
	if len(j.History) != 1 || j.History[0].Outcome != (Outcome{Kind: OutcomeSkipped, Reason: ReasonNotKept}) {
		t.Fatalf("history %+v, want the skip without its reason", j.History)
	}
	if err := m.CheckKept(); err != nil || m.HistoryReasonBytes() != 0 {
		t.Fatalf("reason bytes %d: %v", m.HistoryReasonBytes(), err)
	}
}

// TestZoneEditSupersedesTheSlotOwed: a new zone is a new schedule: hourly
// moved from UTC to Kolkata (+05:30) at 01:10 no longer launches at 01:00,
// which it owed, so the edit records it skipped; 01:30 comes due next.
func TestZoneEditSupersedesTheSlotOwed(t *testing.T) {
	kolkata := spec("0 * * * *")
	kolkata.TimeZone = "Asia/Kolkata"
	edit := t0.Add(70 * time.Minute)
	m := run(t, []step{
		{put("j", "0 * * * *", 0, t0.Add(time.Minute)), nil},
		{PutJob{Name: "j", Spec: kolkata, IfVersion: 1, At: edit}, nil},
	})
	j := mustJob(t, m, "j")
	if len(j.History) != 1 || !j.History[0].ScheduledAt.Equal(t0.Add(time.Hour)) || j.History[0].Outcome.Reason != ReasonSuperseded(edit, 2) {
		t.Fatalf("history %+v, want 01:00 superseded", j.History)
	}
	if !j.NextAt.Equal(t0.Add(90 * time.Minute)) {
		t.Fatalf("next %s, want 01:30", j.NextAt.Format(time.RFC3339))
	}
}

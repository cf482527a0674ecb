package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

// base is a clean run: job "a" (allow, catch-up window 15 s) every 5 s,
// job "b-x" (forbid) every 10 s and job "c-r" (replace) every 20 s over
// one minute, each slot with one child submitted 200 ms after its time,
// one slot of "b-x" skipped by the forbid policy while its previous child
// runs, "b-x"'s children running 9 s and "c-r"'s until 2 s after they
// are stopped, as the next is made; and a fault window.
func base() CheckInput {
	t0 := time.Unix(1_800_000_000, 0) // divisible by 60
	in := CheckInput{
		Jobs: []CheckedJob{
			{Name: "a", EverySeconds: 5, Policy: PolicyAllow, CatchupWindow: 15 * time.Second, From: t0},
			{Name: "b-x", EverySeconds: 10, Policy: PolicyForbid, CatchupWindow: 5 * time.Minute, From: t0},
			{Name: "c-r", EverySeconds: 20, Policy: PolicyReplace, CatchupWindow: 5 * time.Minute, From: t0},
		},
		To:         t0.Add(time.Minute),
		LateBound:  3 * time.Second,
		EarlyBound: time.Second,
		Windows:    []Window{{Fault: "kill-leader", From: t0.Add(40 * time.Second), To: t0.Add(50 * time.Second)}},
	}
	for _, j := range in.Jobs {
		for s := t0.Unix() + j.EverySeconds; s <= in.To.Unix(); s += j.EverySeconds {
			at := time.Unix(s, 0)
			id := Identity(j.Name, at)
			if j.Name == "b-x" && s == t0.Unix()+20 {
				in.Records = append(in.Records, Record{Identity: id, Outcome: "skipped", ChildID: childID("b-x", s-10), Reason: "previous child " + childID("b-x", s-10) + " still running (concurrency forbid)", Source: "replica 1"})
				continue
			}
			child := Child{ID: childID(j.Name, s), Token: id, MetaIdentity: id, Submitted: at.Add(200 * time.Millisecond)}
			switch j.Name {
			case "b-x":
				child.Placed, child.TaskEnded, child.Ended = true, at.Add(9*time.Second), at.Add(9500*time.Millisecond)
			case "c-r":
				// Stopped as the next is made, it ends a little later.
				child.Placed, child.StopAsked = true, at.Add(20*time.Second)
				child.TaskEnded, child.Ended = at.Add(22*time.Second), at.Add(22*time.Second)
				if s == in.To.Unix() {
					child.StopAsked, child.TaskEnded, child.Ended = time.Time{}, time.Time{}, time.Time{}
				}
			}
			in.Children = append(in.Children, child)
			in.Records = append(in.Records, Record{Identity: id, Outcome: "dispatched", ChildID: child.ID, Source: "replica 1"})
		}
	}
	return in
}

func childID(job string, s int64) string {
	return fmt.Sprintf("p/dispatch-%s-%d-0000", Identity(job, time.Unix(s, 0)), s)
}

func TestCheckCleanRunPasses(t *testing.T) {
	r := Check(base())
	if r.Violations() != 0 {
		t.Fatalf("a clean run has violations:\n%s", printed(r))
	}
	if r.Slots != 12+6+3 || r.Dispatched != 20 || r.Skips["previous child <child> still running (concurrency forbid)"] != 1 {
		t.Fatalf("counts: slots %d dispatched %d skips %v", r.Slots, r.Dispatched, r.Skips)
	}
	if !strings.HasPrefix(r.Verdict(), "VERDICT: PASS") {
		t.Fatal(r.Verdict())
	}
}

// Each planted violation is caught, and only it.
func TestCheckCatchesPlantedViolations(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	slot := func(s int64) string { return Identity("a", t0.Add(time.Duration(s)*time.Second)) }
	for _, tc := range []struct {
		name  string
		plant func(in *CheckInput)
		list  func(r *Report) []string
	}{
		{"a doubled child", func(in *CheckInput) {
			id := slot(15)
			in.Children = append(in.Children, Child{ID: "p/dispatch-" + id + "-9-ffff", Token: id, MetaIdentity: id, Submitted: t0.Add(16 * time.Second)})
		}, func(r *Report) []string { return r.Doubled }},
		{"a doubled child inside a fault window", func(in *CheckInput) {
			id := slot(45)
			in.Children = append(in.Children, Child{ID: "p/dispatch-" + id + "-9-ffff", Token: id, MetaIdentity: id, Submitted: t0.Add(46 * time.Second)})
		}, func(r *Report) []string { return r.Doubled }},
		{"a slot with neither child nor skip", func(in *CheckInput) {
			drop(in, slot(25))
		}, func(r *Report) []string { return r.Missing }},
		{"a late slot outside a fault window", func(in *CheckInput) {
			setSubmitted(in, slot(10), t0.Add(10*time.Second+3500*time.Millisecond))
		}, func(r *Report) []string { return r.Late }},
		{"an early slot outside a fault window", func(in *CheckInput) {
			setSubmitted(in, slot(10), t0.Add(8*time.Second))
		}, func(r *Report) []string { return r.Early }},
		{"recorded dispatched, no child", func(in *CheckInput) {
			removeChild(in, slot(30))
		}, func(r *Report) []string { return r.Lost }},
		{"recorded skipped, yet a child", func(in *CheckInput) {
			id := Identity("b-x", t0.Add(20*time.Second))
			in.Children = append(in.Children, Child{ID: "p/dispatch-" + id + "-1-aaaa", Token: id, MetaIdentity: id, Submitted: t0.Add(20 * time.Second),
				Placed: true, TaskEnded: t0.Add(29 * time.Second), Ended: t0.Add(29500 * time.Millisecond)})
		}, func(r *Report) []string { return r.Contradicted }},
		{"two replicas recorded different outcomes", func(in *CheckInput) {
			in.Records = append(in.Records, Record{Identity: slot(5), Outcome: "unknown", Reason: "r", Source: "replica 2"})
		}, func(r *Report) []string { return r.Conflicting }},
		{"a skip without its reason", func(in *CheckInput) {
			drop(in, slot(35))
			in.Records = append(in.Records, Record{Identity: slot(35), Outcome: "skipped", Source: "replica 3"})
		}, func(r *Report) []string { return r.Unexplained }},
		{"a forbid skip on an allow job", func(in *CheckInput) {
			drop(in, slot(25))
			in.Records = append(in.Records, Record{Identity: slot(25), Outcome: "skipped", ChildID: childID("a", t0.Unix()+20), Reason: "previous child " + childID("a", t0.Unix()+20) + " still running (concurrency forbid)"})
		}, func(r *Report) []string { return r.Unjustified }},
		{"a forbid skip naming a child Nomad saw finish", func(in *CheckInput) {
			for i, c := range in.Children {
				if c.ID == childID("b-x", t0.Unix()+10) {
					in.Children[i].Ended = t0.Add(14 * time.Second) // 6 s before the slot
				}
			}
		}, func(r *Report) []string { return r.Unjustified }},
		{"a forbid skip naming an older child than the last", func(in *CheckInput) {
			id := Identity("b-x", t0.Add(60*time.Second))
			drop(in, id)
			in.Records = append(in.Records, Record{Identity: id, Outcome: "skipped", ChildID: childID("b-x", t0.Unix()+10), Reason: "previous child " + childID("b-x", t0.Unix()+10) + " still running (concurrency forbid)"})
		}, func(r *Report) []string { return r.Unjustified }},
		{"a forbid skip without its child", func(in *CheckInput) {
			for i, rec := range in.Records {
				if rec.Identity == Identity("b-x", t0.Add(20*time.Second)) {
					in.Records[i].ChildID = ""
				}
			}
		}, func(r *Report) []string { return r.Unjustified }},
		{"a catch-up skip naming a child", func(in *CheckInput) {
			drop(in, slot(45))
			in.Records = append(in.Records, Record{Identity: slot(45), Outcome: "skipped", ChildID: childID("a", t0.Unix()+40), Reason: "not dispatched within its catch-up window (16s late, window 15s)"})
		}, func(r *Report) []string { return r.Unjustified }},
		{"a skip for a pause the workload never made", func(in *CheckInput) {
			drop(in, slot(25))
			in.Records = append(in.Records, Record{Identity: slot(25), Outcome: "skipped", Reason: "job paused"})
		}, func(r *Report) []string { return r.Unjustified }},
		{"a catch-up skip outside every fault window", func(in *CheckInput) {
			drop(in, slot(25))
			in.Records = append(in.Records, Record{Identity: slot(25), Outcome: "skipped", Reason: "not dispatched within its catch-up window (16s late, window 15s)"})
		}, func(r *Report) []string { return r.Unjustified }},
		{"a catch-up skip with another window than the job's", func(in *CheckInput) {
			drop(in, slot(45))
			in.Records = append(in.Records, Record{Identity: slot(45), Outcome: "skipped", Reason: "not dispatched within its catch-up window (4s late, window 3s)"})
		}, func(r *Report) []string { return r.Unjustified }},
		{"a skip that waited for room, decided before its window ran out", func(in *CheckInput) {
			drop(in, slot(45))
			in.Records = append(in.Records, Record{Identity: slot(45), Outcome: "skipped", At: t0.Add(52 * time.Second),
				Reason: launcher.ReasonNoRoom(1000000, 16*time.Second, 15*time.Second)})
		}, func(r *Report) []string { return r.Unjustified }},
		{"a catch-up skip decided before its window ran out", func(in *CheckInput) {
			drop(in, slot(45))
			in.Records = append(in.Records, Record{Identity: slot(45), Outcome: "skipped", At: t0.Add(52 * time.Second),
				Reason: "missed: no leader could launch it within its catch-up window (16s late, window 15s)"})
		}, func(r *Report) []string { return r.Unjustified }},
		{"a forbid child made while the one before still ran", func(in *CheckInput) {
			setChild(in, childID("b-x", t0.Unix()+30), func(c *Child) { c.TaskEnded = t0.Add(41500 * time.Millisecond) })
		}, func(r *Report) []string { return r.Overlapping }},
		{"a forbid child made while the one before had not ended at the end", func(in *CheckInput) {
			setChild(in, childID("b-x", t0.Unix()+50), func(c *Child) { c.TaskEnded = time.Time{} })
		}, func(r *Report) []string { return r.Overlapping }},
		{"a forbid child made while the one before was pending, never placed", func(in *CheckInput) {
			setChild(in, childID("b-x", t0.Unix()+30), func(c *Child) { unplaced(c, "pending", time.Time{}) })
		}, func(r *Report) []string { return r.Overlapping }},
		{"a forbid child made before Nomad knew the one before, never placed, dead", func(in *CheckInput) {
			setChild(in, childID("b-x", t0.Unix()+30), func(c *Child) { unplaced(c, "dead", t0.Add(42*time.Second)) })
		}, func(r *Report) []string { return r.Overlapping }},
		{"a replace child made while the one before was pending, never placed, not stopped", func(in *CheckInput) {
			setChild(in, childID("c-r", t0.Unix()+20), func(c *Child) { unplaced(c, "pending", time.Time{}); c.StopAsked = time.Time{} })
		}, func(r *Report) []string { return r.Overlapping }},
		{"a replace child made before the one before was stopped", func(in *CheckInput) {
			setChild(in, childID("c-r", t0.Unix()+20), func(c *Child) { c.StopAsked = time.Time{} })
		}, func(r *Report) []string { return r.Overlapping }},
		{"a replace child made before the stop was asked", func(in *CheckInput) {
			setChild(in, childID("c-r", t0.Unix()+40), func(c *Child) { c.StopAsked = t0.Add(62 * time.Second) })
		}, func(r *Report) []string { return r.Overlapping }},
		{"a child for no slot", func(in *CheckInput) {
			id := Identity("a", t0.Add(12*time.Second))
			in.Children = append(in.Children, Child{ID: "p/dispatch-" + id + "-1-bbbb", Token: id, MetaIdentity: id, Submitted: t0.Add(12 * time.Second)})
		}, func(r *Report) []string { return r.Stray }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.plant(&in)
			r := Check(in)
			if got := len(tc.list(r)); got != 1 || r.Violations() != 1 {
				t.Fatalf("want exactly this violation once, got %d of it and %d in all:\n%s", got, r.Violations(), printed(r))
			}
			if !strings.HasPrefix(r.Verdict(), "VERDICT: FAIL") {
				t.Fatal(r.Verdict())
			}
		})
	}
}

// Inside a fault window lateness is not judged, and a slot recorded
// unknown without a child is allowed there (but not outside).
func TestCheckFaultWindows(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	in := base()
	setSubmitted(&in, Identity("a", t0.Add(45*time.Second)), t0.Add(58*time.Second))
	// Due 2 s before the fault began: covered (LateBound before it).
	setSubmitted(&in, Identity("a", t0.Add(40*time.Second)), t0.Add(47*time.Second))
	drop(&in, Identity("b-x", t0.Add(50*time.Second)))
	in.Records = append(in.Records, Record{Identity: Identity("b-x", t0.Add(50*time.Second)), Outcome: "unknown", Reason: "lookup failed"})
	// A catch-up skip in the window, recorded once the window ran out.
	drop(&in, Identity("a", t0.Add(50*time.Second)))
	in.Records = append(in.Records, Record{Identity: Identity("a", t0.Add(50*time.Second)), Outcome: "skipped", At: t0.Add(65*time.Second + 500*time.Millisecond),
		Reason: "missed: no leader could launch it within its catch-up window (15s late, window 15s)"})
	if r := Check(in); r.Violations() != 0 || r.InWindows != 6 || r.Unknown != 1 {
		t.Fatalf("violations %d, in windows %d, unknown %d:\n%s", r.Violations(), r.InWindows, r.Unknown, printed(r))
	}
	// The same skip, having waited for room, is judged as a catch-up skip.
	in.Records[len(in.Records)-1].Reason = launcher.ReasonNoRoomForJob(64, 15*time.Second, 15*time.Second)
	if r := Check(in); r.Violations() != 0 || r.InWindows != 6 || r.Unknown != 1 {
		t.Fatalf("waited for room: violations %d, in windows %d, unknown %d:\n%s", r.Violations(), r.InWindows, r.Unknown, printed(r))
	}
	in.Windows = nil
	if r := Check(in); len(r.Late) != 2 || len(r.Unexplained) != 1 || len(r.Unjustified) != 1 {
		t.Fatalf("without the window: late %v, unexplained %v, unjustified %v", r.Late, r.Unexplained, r.Unjustified)
	}
}

func TestSplitIdentity(t *testing.T) {
	for _, tc := range []struct {
		id   string
		job  string
		unix int64
		ok   bool
	}{
		{"chaos-allow-07-1800000005", "chaos-allow-07", 1800000005, true},
		{"a-1", "a", 1, true},
		{"nodash", "", 0, false},
		{"-5", "", 0, false},
		{"a-b", "", 0, false},
	} {
		job, at, ok := SplitIdentity(tc.id)
		if ok != tc.ok || (ok && (job != tc.job || at.Unix() != tc.unix)) {
			t.Errorf("SplitIdentity(%q) = %q, %v, %v", tc.id, job, at.Unix(), ok)
		}
	}
}

func drop(in *CheckInput, id string) {
	removeChild(in, id)
	var recs []Record
	for _, r := range in.Records {
		if r.Identity != id {
			recs = append(recs, r)
		}
	}
	in.Records = recs
}

func removeChild(in *CheckInput, id string) {
	var cs []Child
	for _, c := range in.Children {
		if c.Token != id {
			cs = append(cs, c)
		}
	}
	in.Children = cs
}

func setChild(in *CheckInput, id string, edit func(*Child)) {
	for i := range in.Children {
		if in.Children[i].ID == id {
			edit(&in.Children[i])
			return
		}
	}
	panic("no child " + id)
}

// unplaced makes c a child Nomad never placed, with the status it had
// when the checker read it and, if dead, when Nomad knew it dead (zero:
// nothing told).
func unplaced(c *Child, status string, dead time.Time) {
	c.Placed, c.TaskEnded, c.Status, c.Ended = false, time.Time{}, status, dead
}

// A child Nomad never placed ran nothing, but the launcher's forbid
// check counts it running while Nomad has it pending: it ended once Nomad
// knew it dead. One Nomad knew dead before the next was made, or whose
// death Nomad kept nothing to date (its evaluations collected), is no
// overlap; nor is one the replace policy stopped first.
func TestCheckPoliciesUnplacedChildEndsWhenDead(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	b30, c20 := childID("b-x", t0.Unix()+30), childID("c-r", t0.Unix()+20)
	for _, tc := range []struct {
		name     string
		edit     func(*Child)
		child    string
		overlaps int
	}{
		{"dead before the next", func(c *Child) { unplaced(c, "dead", t0.Add(35*time.Second)) }, b30, 0},
		{"dead within the slack of the next", func(c *Child) { unplaced(c, "dead", t0.Add(41*time.Second)) }, b30, 0},
		{"dead, Nomad kept nothing that tells when", func(c *Child) { unplaced(c, "dead", time.Time{}) }, b30, 0},
		{"dead after the next", func(c *Child) { unplaced(c, "dead", t0.Add(41500*time.Millisecond)) }, b30, 1},
		{"pending", func(c *Child) { unplaced(c, "pending", time.Time{}) }, b30, 1},
		{"status not read", func(c *Child) { unplaced(c, "", time.Time{}) }, b30, 1},
		{"pending, stopped by the replace policy", func(c *Child) { unplaced(c, "pending", time.Time{}) }, c20, 0},
		{"dead after the next, stopped by the replace policy", func(c *Child) { unplaced(c, "dead", t0.Add(50*time.Second)) }, c20, 0},
	} {
		in := base()
		setChild(&in, tc.child, tc.edit)
		r := Check(in)
		if len(r.Overlapping) != tc.overlaps || r.Violations() != tc.overlaps {
			t.Errorf("%s: want %d overlap and nothing else, got:\n%s", tc.name, tc.overlaps, printed(r))
		}
	}
}

// A slow child never placed and dead died when its last evaluation
// ended; with none left (collected), when it was stopped, if it was.
func TestUnplacedDead(t *testing.T) {
	t1, t2, stop := time.Unix(1_800_000_010, 0), time.Unix(1_800_000_020, 0), time.Unix(1_800_000_015, 0)
	eval := func(status string, modified time.Time) *nomadapi.Evaluation {
		return &nomadapi.Evaluation{Status: status, ModifyTime: modified.UnixNano()}
	}
	for _, tc := range []struct {
		name  string
		evals []*nomadapi.Evaluation
		stop  time.Time
		want  time.Time
	}{
		{"the last of its evaluations", []*nomadapi.Evaluation{eval("failed", t2), eval("canceled", t1)}, stop, t2},
		{"none, stopped", nil, stop, stop},
		{"none, never stopped", nil, time.Time{}, time.Time{}},
		{"one without a time", []*nomadapi.Evaluation{{Status: "complete"}}, time.Time{}, time.Time{}},
	} {
		if got := unplacedDead(tc.evals, tc.stop); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func setSubmitted(in *CheckInput, id string, at time.Time) {
	for i := range in.Children {
		if in.Children[i].Token == id {
			in.Children[i].Submitted = at
		}
	}
}

// A replica whose clock ran ahead decides a catch-up skip that much
// early in true time: the window says so, and the skip passes.
func TestCheckClockAheadExcusesAnEarlySkip(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	in := base()
	id := Identity("a", t0.Add(45*time.Second))
	drop(&in, id)
	in.Records = append(in.Records, Record{Identity: id, Outcome: "skipped", At: t0.Add(52 * time.Second),
		Reason: "not dispatched within its catch-up window (16s late, window 15s)"})
	if r := Check(in); len(r.Unjustified) != 1 {
		t.Fatalf("without a clock ahead: unjustified %v", r.Unjustified)
	}
	in.Windows[0].Ahead = 20 * time.Second
	if r := Check(in); r.Violations() != 0 {
		t.Fatalf("with the clock 20 s ahead: unjustified %v", r.Unjustified)
	}
}

func TestAllocsEnded(t *testing.T) {
	t1, t2, t3 := time.Unix(1_800_000_010, 0), time.Unix(1_800_000_020, 0), time.Unix(1_800_000_030, 0)
	// The server learns of a task's end later than it happened: an agent
	// down when it ended reports it when it is back.
	alloc := func(status string, finished, modified time.Time) *nomadapi.AllocationListStub {
		return &nomadapi.AllocationListStub{ClientStatus: status, ModifyTime: modified.UnixNano(),
			TaskStates: map[string]*nomadapi.TaskState{"t": {FinishedAt: finished}}}
	}
	for _, tc := range []struct {
		name        string
		allocs      []*nomadapi.AllocationListStub
		known, task time.Time
	}{
		{"none", nil, time.Time{}, time.Time{}},
		{"one complete", []*nomadapi.AllocationListStub{alloc("complete", t1, t3)}, t3, t1},
		{"the later of two", []*nomadapi.AllocationListStub{alloc("failed", t2, t3), alloc("complete", t1, t2)}, t3, t2},
		{"one still running", []*nomadapi.AllocationListStub{alloc("complete", t1, t2), alloc("running", time.Time{}, t2)}, time.Time{}, time.Time{}},
		{"lost before its task started", []*nomadapi.AllocationListStub{{ClientStatus: "lost", ModifyTime: t2.UnixNano()}}, t2, t2},
		{"terminal with a task not ended", []*nomadapi.AllocationListStub{alloc("lost", time.Time{}, t2)}, t2, time.Time{}},
	} {
		known, task := allocsEnded(tc.allocs)
		if !known.Equal(tc.known) || !task.Equal(tc.task) {
			t.Errorf("%s: known %v, tasks %v; want %v, %v", tc.name, known, task, tc.known, tc.task)
		}
	}
}

// The forbid policy also acts on the child of a launch recorded unknown
// (it looks such launches up): a skip naming that child is justified.
func TestCheckForbidSkipNamingTheChildOfAnUnknownLaunch(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	in := base()
	s30, s40 := Identity("b-x", t0.Add(30*time.Second)), Identity("b-x", t0.Add(40*time.Second))
	for i, rec := range in.Records {
		if rec.Identity == s30 {
			in.Records[i] = Record{Identity: s30, Outcome: "unknown", Reason: "could not look the launch up in Nomad: timeout", Source: rec.Source}
		}
	}
	drop(&in, s40)
	in.Records = append(in.Records, Record{Identity: s40, Outcome: "skipped", ChildID: childID("b-x", t0.Unix()+30), Reason: "previous child " + childID("b-x", t0.Unix()+30) + " still running (concurrency forbid)"})
	if r := Check(in); r.Violations() != 0 {
		t.Fatalf("a skip naming the unknown launch's child:\n%s", printed(r))
	}
	// The same skip, the launch recorded dispatched to another child: not
	// the last child, and no unknown launch's.
	for i, rec := range in.Records {
		if rec.Identity == s30 {
			in.Records[i] = Record{Identity: s30, Outcome: "dispatched", ChildID: "p/other", Source: rec.Source}
		}
	}
	if r := Check(in); len(r.Unjustified) != 1 {
		t.Fatalf("unjustified %v, want the skip", r.Unjustified)
	}
}

// TestSkipPatternsReadTheLaunchersReasons: the checker's patterns read
// the skips as cron/launcher's own constructors word them, so that a
// change of wording fails here, not in a chaos run.
func TestSkipPatternsReadTheLaunchersReasons(t *testing.T) {
	const child = "p/dispatch-b-x-1800000010-1800000010-0a1b2c3d"
	if m := forbidReason.FindStringSubmatch(launcher.ReasonForbid(child)); m == nil || m[1] != child {
		t.Errorf("forbid skip %q read as %q, want child %s", launcher.ReasonForbid(child), m, child)
	}
	for _, r := range []string{launcher.ReasonCatchup(16*time.Second+700*time.Millisecond, 15*time.Second), launcher.ReasonMissed(16*time.Second, 15*time.Second)} {
		if m := catchupReason.FindStringSubmatch(r); m == nil || m[1] != "16s" || m[2] != "15s" {
			t.Errorf("catch-up skip %q read as %q, want 16s late, window 15s", r, m)
		}
	}
	for _, r := range []string{launcher.ReasonNoRoom(1000000, 16*time.Second+700*time.Millisecond, 15*time.Second), launcher.ReasonNoRoomForJob(64, 16*time.Second, 15*time.Second)} {
		if m := roomReason.FindStringSubmatch(r); m == nil || m[1] != "16s" || m[2] != "15s" || catchupReason.MatchString(r) {
			t.Errorf("skip %q that waited for room read as %q, want 16s late, window 15s", r, m)
		}
	}
	for _, r := range []string{launcher.ReasonPaused, launcher.ReasonDeleted} {
		if forbidReason.MatchString(r) || catchupReason.MatchString(r) || roomReason.MatchString(r) {
			t.Errorf("skip %q read as forbid, catch-up or room", r)
		}
	}
}

// The report names the slot whose child came latest outside the fault
// windows, so that a figure near the bound can be looked into.
func TestCheckNamesTheLatestSlot(t *testing.T) {
	in := base()
	t0 := time.Unix(1_800_000_000, 0)
	id := Identity("a", t0.Add(15*time.Second))
	setSubmitted(&in, id, t0.Add(15*time.Second+1700*time.Millisecond))
	r := Check(in)
	if r.Violations() != 0 || r.MaxLateOutside != 1700*time.Millisecond || !strings.HasPrefix(r.LatestOutside, id+" (") {
		t.Fatalf("violations %d, latest %v at %q; want none, 1.7s at %s", r.Violations(), r.MaxLateOutside, r.LatestOutside, id)
	}
	if !strings.Contains(printed(r), "1.7s after its slot, "+id+" (") {
		t.Fatalf("the report does not name %s:\n%s", id, printed(r))
	}
}

// A record with an outcome the checker does not know (the API's "open",
// or a new outcome) is no child and no skip: the slot must not pass.
func TestCheckUnknownOutcomeIsNoSkip(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	for _, outcome := range []string{"open", "skip", "Dispatched"} {
		in := base()
		id := Identity("a", t0.Add(25*time.Second))
		drop(&in, id)
		in.Records = append(in.Records, Record{Identity: id, Outcome: outcome, Source: "the API's history"})
		if r := Check(in); r.Violations() != 1 || len(r.Unexplained) != 1 {
			t.Errorf("outcome %q with no child:\n%s", outcome, printed(r))
		}
	}
}

// A second child for a slot whose token spells the slot's time another
// way ("a-01800000015") groups apart from the slot's own: it must not
// pass as a child of a slot.
func TestCheckNonCanonicalTokenIsStray(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	in := base()
	tok := "a-0" + fmt.Sprint(t0.Unix()+15)
	in.Children = append(in.Children, Child{ID: "p/dispatch-" + tok + "-9-ffff", Token: tok, MetaIdentity: tok, Submitted: t0.Add(15*time.Second + 300*time.Millisecond)})
	if r := Check(in); r.Violations() != 1 || len(r.Stray) != 1 {
		t.Fatalf("a child with token %s:\n%s", tok, printed(r))
	}
}

// A child made long before the slot its token names is judged early
// even where no slot is checked: a slot after the run's end (a second
// child of a slot, its identity's time in milliseconds), or inside a
// fault window that no clock ran ahead in.
func TestCheckEarlyChildOutsideTheCheckedSlots(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	in := base()
	tok := fmt.Sprintf("a-%d", (t0.Unix()+15)*1000) // a-1800000015000
	in.Children = append(in.Children, Child{ID: "p/dispatch-" + tok + "-9-ffff", Token: tok, MetaIdentity: tok, Submitted: t0.Add(15*time.Second + 300*time.Millisecond)})
	if r := Check(in); r.Violations() != 1 || len(r.Early) != 1 {
		t.Errorf("a child for a slot far after the run:\n%s", printed(r))
	}
	in = base()
	setSubmitted(&in, Identity("a", t0.Add(45*time.Second)), t0.Add(20*time.Second))
	if r := Check(in); r.Violations() != 1 || len(r.Early) != 1 {
		t.Errorf("a child 25 s early in a window of no clock jump:\n%s", printed(r))
	}
	// A clock 30 s ahead there excuses it.
	in.Windows[0].Ahead = 30 * time.Second
	if r := Check(in); r.Violations() != 0 {
		t.Errorf("with the clock 30 s ahead: early %v", r.Early)
	}
}

// A child whose token and paxcron_identity name a slot of one job but
// which Nomad made from another job's parent, or whose other meta name
// another job or time, is a child of the wrong job or time.
func TestCheckChildOfTheWrongJobOrTime(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	id := Identity("b-x", t0.Add(30*time.Second))
	for _, tc := range []struct {
		name string
		edit func(c *Child)
	}{
		{"another parent", func(c *Child) { c.Parent = "quick" }},
		{"another job's meta", func(c *Child) { c.MetaJob = "a" }},
		{"another time's meta", func(c *Child) { c.MetaScheduledAt = t0.Add(40 * time.Second).UTC().Format(time.RFC3339) }},
	} {
		in := base()
		for i := range in.Jobs {
			in.Jobs[i].Parent = "p"
		}
		for i := range in.Children {
			c := &in.Children[i]
			name, at, _ := SplitIdentity(c.Token)
			c.Parent, c.MetaJob, c.MetaScheduledAt = "p", name, at.UTC().Format(time.RFC3339)
		}
		if r := Check(in); r.Violations() != 0 {
			t.Fatalf("%s: the clean run with parents and meta: %d violations", tc.name, r.Violations())
		}
		setChild(&in, childID("b-x", t0.Unix()+30), tc.edit)
		if r := Check(in); r.Violations() != 1 || len(r.Stray) != 1 {
			t.Errorf("%s: a child for %s:\n%s", tc.name, id, printed(r))
		}
	}
}

// Two sources recording one skip with different reasons applied
// different histories: only the first read was judged, so an unjustified
// reason behind a justified one passed. A history that did not keep the
// reason ("reason not kept: ...") disagrees with nothing.
func TestCheckRecordsDisagreeingOnTheReason(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	id := Identity("b-x", t0.Add(20*time.Second))
	in := base()
	in.Records = append(in.Records, Record{Identity: id, Outcome: "skipped", ChildID: childID("b-x", t0.Unix()+10), Reason: "job paused", Source: "replica 2"})
	if r := Check(in); r.Violations() != 1 || len(r.Conflicting) != 1 {
		t.Errorf("two reasons for one skip:\n%s", printed(r))
	}
	in = base()
	in.Records = append(in.Records, Record{Identity: id, Outcome: "skipped", ChildID: childID("b-x", t0.Unix()+10), Reason: state.ReasonNotKept, Source: "the API's history"})
	if r := Check(in); r.Violations() != 0 {
		t.Errorf("a history without the reason: %v", r.Conflicting)
	}
}

// A catch-up skip only the API's history records (no log line, so no
// time) claims its lateness in paxcron's words alone: the checker cannot
// tell it was decided once the window had run out.
func TestCheckCatchupSkipWithoutATime(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	in := base()
	id := Identity("a", t0.Add(45*time.Second))
	drop(&in, id)
	in.Records = append(in.Records, Record{Identity: id, Outcome: "skipped", Source: "the API's history",
		Reason: "not dispatched within its catch-up window (16s late, window 15s)"})
	if r := Check(in); r.Violations() != 1 || len(r.Unjustified) != 1 {
		t.Errorf("a catch-up skip with no time:\n%s", printed(r))
	}
}

// printed is r as Print writes it, for a failing test's message.
func printed(r *Report) string {
	var b strings.Builder
	r.Print(&b)
	return b.String()
}

package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// base is a clean run: job "a" every 5 s and job "b" every 10 s over one
// minute, each slot with one child submitted 200 ms after its time, one
// slot of "b" skipped by the forbid policy, and a fault window.
func base() CheckInput {
	t0 := time.Unix(1_800_000_000, 0) // divisible by 60
	in := CheckInput{
		Jobs:       []CheckedJob{{Name: "a", EverySeconds: 5, From: t0}, {Name: "b-x", EverySeconds: 10, From: t0}},
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
				in.Records = append(in.Records, Record{Identity: id, Outcome: "skipped", Reason: "previous child p/dispatch-b-x-1799999990-1-ab still running (concurrency forbid)", Source: "replica 1"})
				continue
			}
			child := Child{ID: fmt.Sprintf("p/dispatch-%s-%d-0000", id, s), Token: id, MetaIdentity: id, Submitted: at.Add(200 * time.Millisecond)}
			in.Children = append(in.Children, child)
			in.Records = append(in.Records, Record{Identity: id, Outcome: "dispatched", ChildID: child.ID, Source: "replica 1"})
		}
	}
	return in
}

func TestCheckCleanRunPasses(t *testing.T) {
	r := Check(base())
	if r.Violations() != 0 {
		var b strings.Builder
		r.Print(&b)
		t.Fatalf("a clean run has violations:\n%s", b.String())
	}
	if r.Slots != 12+6 || r.Dispatched != 17 || r.Skips["previous child <child> still running (concurrency forbid)"] != 1 {
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
			in.Children = append(in.Children, Child{ID: "p/dispatch-" + id + "-1-aaaa", Token: id, MetaIdentity: id, Submitted: t0.Add(20 * time.Second)})
		}, func(r *Report) []string { return r.Contradicted }},
		{"two replicas recorded different outcomes", func(in *CheckInput) {
			in.Records = append(in.Records, Record{Identity: slot(5), Outcome: "unknown", Reason: "r", Source: "replica 2"})
		}, func(r *Report) []string { return r.Conflicting }},
		{"a skip without its reason", func(in *CheckInput) {
			drop(in, slot(35))
			in.Records = append(in.Records, Record{Identity: slot(35), Outcome: "skipped", Source: "replica 3"})
		}, func(r *Report) []string { return r.Unexplained }},
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
				var b strings.Builder
				r.Print(&b)
				t.Fatalf("want exactly this violation once, got %d of it and %d in all:\n%s", got, r.Violations(), b.String())
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
	if r := Check(in); r.Violations() != 0 || r.InWindows != 5 || r.Unknown != 1 {
		t.Fatalf("violations %d, in windows %d, unknown %d", r.Violations(), r.InWindows, r.Unknown)
	}
	in.Windows = nil
	if r := Check(in); len(r.Late) != 2 || len(r.Unexplained) != 1 {
		t.Fatalf("without the window: late %v, unexplained %v", r.Late, r.Unexplained)
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

func setSubmitted(in *CheckInput, id string, at time.Time) {
	for i := range in.Children {
		if in.Children[i].Token == id {
			in.Children[i].Submitted = at
		}
	}
}

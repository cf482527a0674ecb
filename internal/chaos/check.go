package chaos

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CheckedJob is one cron job of the workload as the checker sees it. Its
// slots are every unix second divisible by EverySeconds, a divisor of 60
// (the schedule "*/N * * * * *"): the checker enumerates them itself
// rather than asking paxcron's schedule package.
type CheckedJob struct {
	Name         string
	EverySeconds int64
	// Policy is the job's concurrency policy: allow, forbid or replace.
	// With CatchupWindow it tells which skips the job may have.
	Policy string
	// CatchupWindow is the job's catch-up window as paxcron holds it (its
	// default when the spec names none).
	CatchupWindow time.Duration
	// From is when the job existed: slots after it are checked.
	From time.Time
	// Parent is the Nomad job the spec dispatches: each child must be
	// Nomad's child of it. Empty (a run.json saved before): not checked.
	Parent string `json:",omitempty"`
}

// The concurrency policies a CheckedJob may have.
const (
	PolicyAllow   = "allow"
	PolicyForbid  = "forbid"
	PolicyReplace = "replace"
)

// Child is one child job in Nomad's job list.
type Child struct {
	ID string
	// Token is the dispatch's idempotency token: the launch identity
	// paxcron gave it, "<job>-<unix seconds>".
	Token string
	// MetaIdentity is the child's paxcron_identity meta, which must equal
	// Token.
	MetaIdentity string
	// Parent is the job Nomad made the child from (its ParentID).
	Parent string
	// MetaJob and MetaScheduledAt are its paxcron_job and
	// paxcron_scheduled_at meta (RFC 3339, UTC), which must name the
	// token's job and time where they are set.
	MetaJob, MetaScheduledAt string
	// Submitted is when Nomad registered the child (its SubmitTime).
	Submitted time.Time
	// Status is Nomad's status of the child job when the checker read it:
	// pending, running or dead.
	Status string
	// Ended is when Nomad knew the child's allocations had all ended (see
	// allocsEnded); zero if it has none or one had not when the checker
	// read it. For a slow parent's child that was never placed and is
	// dead, it is when Nomad knew it dead instead (see unplacedDead);
	// zero if Nomad kept nothing that tells. The forbid policy's skips are
	// judged by it.
	Ended time.Time
	// Placed: Nomad made an allocation for it (the slow parent's
	// children). TaskEnded is then when the last of its tasks ended, by
	// their states (this host's clock); zero while one had not.
	Placed    bool
	TaskEnded time.Time
	// StopAsked is when the child was stopped (the replace policy): the
	// first of its job versions with Stop set; zero if never.
	StopAsked time.Time
}

// Record is one launch outcome paxcron recorded (its history, or the
// replicas' launch log lines): dispatched, skipped, failed or unknown.
type Record struct {
	Identity string
	Outcome  string
	ChildID  string
	Reason   string
	// Source says where it was read (a replica's log, the API).
	Source string
	// At is when the source recorded it (a log line's time; zero where
	// the source tells none): no earlier than the launcher's decision.
	At time.Time
}

// Window is a fault window: from the fault's start to its end plus the
// recovery time the schedule states for it.
type Window struct {
	Fault    string
	From, To time.Time
	// Ahead is how far a replica's launcher clock ran ahead of true time
	// in the window (a clock jump forward), so that it decided that much
	// early.
	Ahead time.Duration `json:",omitempty"`
}

// CheckInput is everything the checker judges.
type CheckInput struct {
	Jobs []CheckedJob
	// To ends the checked slots (inclusive); each job's start at its From.
	To       time.Time
	Children []Child
	Records  []Record
	Windows  []Window
	// LateBound: a slot outside every fault window must have its child
	// submitted within LateBound of its time, and no earlier than
	// EarlyBound before it.
	LateBound, EarlyBound time.Duration
}

// Report is the checker's verdict with its counts. Each violation list
// holds one line per violation.
type Report struct {
	Slots, InWindows        int
	Children, ChildrenSlots int
	Dispatched              int
	Skips                   map[string]int // by reason class
	Failed, Unknown         int
	MaxLateOutside          time.Duration
	// LatestOutside names the slot of MaxLateOutside ("" if none).
	LatestOutside string

	Doubled      []string // a token with two or more children
	Missing      []string // no child and no recorded outcome
	Late         []string // child later than LateBound outside the fault windows
	Early        []string // child more than EarlyBound before its time outside them
	Lost         []string // recorded dispatched, no child in Nomad
	Contradicted []string // recorded skipped or failed, yet Nomad has a child
	WrongChild   []string // recorded dispatched to another child than Nomad's
	Conflicting  []string // two different outcomes recorded for one launch
	Unexplained  []string // a skip without its reason; failed/unknown outside fault windows
	Unjustified  []string // a skip its job's policy, the faults and Nomad's view do not explain
	Overlapping  []string // a forbid child made while the one before ran or was pending; a replace child before the one before was stopped
	Stray        []string // a child whose token is no slot of its job, or meta disagrees
}

// Violations is the number of violations of every kind.
func (r *Report) Violations() int {
	n := 0
	for _, l := range r.lists() {
		n += len(*l.list)
	}
	return n
}

type namedList struct {
	name string
	list *[]string
}

func (r *Report) lists() []namedList {
	return []namedList{
		{"doubled", &r.Doubled}, {"missing", &r.Missing}, {"late", &r.Late}, {"early", &r.Early},
		{"lost", &r.Lost}, {"contradicted", &r.Contradicted}, {"wrong child", &r.WrongChild},
		{"conflicting records", &r.Conflicting}, {"unexplained", &r.Unexplained}, {"unjustified skips", &r.Unjustified},
		{"overlapping children", &r.Overlapping},
		{"stray children", &r.Stray},
	}
}

// Check judges the input. It needs no clock and calls nothing.
func Check(in CheckInput) *Report {
	r := &Report{Skips: map[string]int{}}
	byToken := map[string][]Child{}
	for _, c := range in.Children {
		byToken[c.Token] = append(byToken[c.Token], c)
	}
	r.Children = len(in.Children)
	records := dedupeRecords(in.Records, r)
	jobs := map[string]CheckedJob{}
	for _, j := range in.Jobs {
		if err := j.validate(); err != nil {
			panic(err)
		}
		jobs[j.Name] = j
	}
	lastChild := dispatchedChildren(in.Children, records)
	// Every token: at most one child, and a slot of its job.
	for _, tok := range sortedKeys(byToken) {
		cs := byToken[tok]
		if len(cs) > 1 {
			r.Doubled = append(r.Doubled, fmt.Sprintf("%s: %d children %s", tok, len(cs), childIDs(cs)))
		}
		for _, c := range cs {
			if c.MetaIdentity != c.Token {
				r.Stray = append(r.Stray, fmt.Sprintf("%s: token %q but meta paxcron_identity %q", c.ID, c.Token, c.MetaIdentity))
			}
		}
		name, at, ok := SplitIdentity(tok)
		j, known := jobs[name]
		if ok && known {
			// Token and paxcron_identity are one string paxcron wrote: a
			// child dispatched from another job's spec (its parent, its
			// other meta) under this identity agrees with both.
			for _, c := range cs {
				switch {
				case j.Parent != "" && c.Parent != j.Parent:
					r.Stray = append(r.Stray, fmt.Sprintf("%s: token %q of job %s, whose parent is %s, but Nomad made it from %q", c.ID, tok, name, j.Parent, c.Parent))
				case c.MetaJob != "" && c.MetaJob != name:
					r.Stray = append(r.Stray, fmt.Sprintf("%s: token %q but meta paxcron_job %q", c.ID, tok, c.MetaJob))
				case c.MetaScheduledAt != "" && c.MetaScheduledAt != at.UTC().Format(time.RFC3339):
					r.Stray = append(r.Stray, fmt.Sprintf("%s: token %q but meta paxcron_scheduled_at %q", c.ID, tok, c.MetaScheduledAt))
				}
			}
		}
		// The token must be the slot's identity as written, not only
		// parse to it: a child whose token spells the time another way
		// ("a-0100") groups apart from the slot's own and would hide a
		// second child of it.
		if !ok || !known || at.Unix()%j.EverySeconds != 0 || tok != Identity(name, at) {
			r.Stray = append(r.Stray, fmt.Sprintf("%s: token %q is no slot of a workload job", childIDs(cs), tok))
			continue
		}
		if s := at.Unix(); s < firstSlot(j) || s > in.To.Unix() {
			// No slot check judges this child, yet one made before its
			// slot (a second child of a slot, its identity's time written
			// in another unit) is wrong wherever the slot lies.
			ahead := time.Duration(0)
			if w := window(in.Windows, at, in.LateBound); w != nil {
				ahead = w.Ahead
			}
			for _, c := range cs {
				if early := at.Sub(c.Submitted); early > in.EarlyBound+ahead {
					r.Early = append(r.Early, fmt.Sprintf("%s: child %s submitted %v before its slot, which no slot check covers", tok, c.ID, early.Round(time.Millisecond)))
				}
			}
		}
	}
	r.checkPolicies(in.Jobs, byToken)
	for _, j := range in.Jobs {
		for s := firstSlot(j); s <= in.To.Unix(); s += j.EverySeconds {
			r.checkSlot(in, j, time.Unix(s, 0), byToken, records, lastChild)
		}
	}
	return r
}

// firstSlot is the unix second of j's first checked slot: its first
// after From.
func firstSlot(j CheckedJob) int64 {
	return (j.From.Unix()/j.EverySeconds + 1) * j.EverySeconds
}

func (r *Report) checkSlot(in CheckInput, j CheckedJob, at time.Time, byToken map[string][]Child, records map[string]Record, last lastChildren) {
	id := Identity(j.Name, at)
	r.Slots++
	w := window(in.Windows, at, in.LateBound)
	if w != nil {
		r.InWindows++
	}
	cs := byToken[id]
	rec, recorded := records[id]
	if len(cs) > 0 {
		r.ChildrenSlots++
	}
	switch rec.Outcome {
	case "dispatched":
		r.Dispatched++
	case "skipped":
		r.Skips[ReasonClass(rec.Reason)]++
	case "failed":
		r.Failed++
	case "unknown":
		r.Unknown++
	}
	when := at.UTC().Format(time.TimeOnly)
	switch {
	case recorded && !knownOutcomes[rec.Outcome]:
		// Every case below reads one of the four outcomes; another (the
		// API's "open", a new word) would match none and pass a slot with
		// no child and no skip.
		r.Unexplained = append(r.Unexplained, fmt.Sprintf("%s (%s): recorded outcome %q (%s), which is none of dispatched, skipped, failed, unknown", id, when, rec.Outcome, rec.Source))
	case len(cs) == 0 && !recorded:
		r.Missing = append(r.Missing, fmt.Sprintf("%s (%s): no child in Nomad and no recorded outcome", id, when))
	case len(cs) == 0 && rec.Outcome == "dispatched":
		r.Lost = append(r.Lost, fmt.Sprintf("%s (%s): recorded dispatched to %s (%s), no child in Nomad", id, when, rec.ChildID, rec.Source))
	case len(cs) == 0 && rec.Outcome == "skipped" && strings.TrimSpace(rec.Reason) == "":
		r.Unexplained = append(r.Unexplained, fmt.Sprintf("%s (%s): skipped without a reason (%s)", id, when, rec.Source))
	case len(cs) == 0 && rec.Outcome == "skipped":
		if why := judgeSkip(j, at, rec, w, last); why != "" {
			r.Unjustified = append(r.Unjustified, fmt.Sprintf("%s (%s): skipped (%s, %s) but %s", id, when, rec.Reason, rec.Source, why))
		}
	case len(cs) == 0 && (rec.Outcome == "failed" || rec.Outcome == "unknown") && w == nil:
		r.Unexplained = append(r.Unexplained, fmt.Sprintf("%s (%s): %s outside every fault window: %s", id, when, rec.Outcome, rec.Reason))
	case len(cs) > 0 && (rec.Outcome == "skipped" || rec.Outcome == "failed"):
		r.Contradicted = append(r.Contradicted, fmt.Sprintf("%s (%s): recorded %s (%s) yet Nomad has %s", id, when, rec.Outcome, rec.Reason, childIDs(cs)))
	case len(cs) == 1 && rec.Outcome == "dispatched" && rec.ChildID != "" && rec.ChildID != cs[0].ID:
		r.WrongChild = append(r.WrongChild, fmt.Sprintf("%s (%s): recorded child %s, Nomad's is %s", id, when, rec.ChildID, cs[0].ID))
	}
	if len(cs) == 0 {
		return
	}
	late := cs[0].Submitted.Sub(at)
	for _, c := range cs[1:] {
		late = min(late, c.Submitted.Sub(at))
	}
	if w != nil {
		// A fault excuses lateness, not earliness: only a replica's clock
		// run ahead launches early, by as much as it ran ahead.
		if late < -(in.EarlyBound + w.Ahead) {
			r.Early = append(r.Early, fmt.Sprintf("%s (%s): child submitted %v before its time, in the window of %s (clock ahead %v)", id, when, (-late).Round(time.Millisecond), w.Fault, w.Ahead))
		}
		return
	}
	if r.LatestOutside == "" || late > r.MaxLateOutside {
		r.MaxLateOutside, r.LatestOutside = late, fmt.Sprintf("%s (%s)", id, when)
	}
	switch {
	case late > in.LateBound:
		r.Late = append(r.Late, fmt.Sprintf("%s (%s): child submitted %v after its time, outside every fault window", id, when, late.Round(time.Millisecond)))
	case late < -in.EarlyBound:
		r.Early = append(r.Early, fmt.Sprintf("%s (%s): child submitted %v before its time, outside every fault window", id, when, (-late).Round(time.Millisecond)))
	}
}

// knownOutcomes are the launch outcomes the checker judges.
var knownOutcomes = map[string]bool{"dispatched": true, "skipped": true, "failed": true, "unknown": true}

// PolicySlack is how far the checker lets two children of a forbid or
// replace job overlap: Nomad's times come from its server and its client
// on this host, rounded differently.
const PolicySlack = time.Second

// checkPolicies checks, for each forbid or replace job, every child
// against the one Nomad made for the job's slot before it, whoever
// recorded what: a forbid child must come after the one before had
// ended (the launcher asks Nomad, which counts a pending or running
// allocation as running), and a replace child after the one before was
// stopped or had ended (the launcher stops it first; its tasks may still
// be exiting, by design). A child never placed ran nothing, but it ended
// only once Nomad had it dead (see unplacedEnded): until then the
// launcher's forbid check counts it running.
func (r *Report) checkPolicies(jobs []CheckedJob, byToken map[string][]Child) {
	byJob := map[string][]slotChild{}
	for tok, cs := range byToken {
		name, at, ok := SplitIdentity(tok)
		if !ok || len(cs) != 1 {
			continue // not a slot, or doubled: reported as such
		}
		byJob[name] = append(byJob[name], slotChild{job: name, at: at, Child: cs[0]})
	}
	for _, j := range jobs {
		if j.Policy == PolicyAllow {
			continue
		}
		cs := byJob[j.Name]
		slices.SortFunc(cs, func(a, b slotChild) int { return a.at.Compare(b.at) })
		for i := 1; i < len(cs); i++ {
			prev, next := cs[i-1].Child, cs[i].Child
			ended := prev.Placed && !prev.TaskEnded.IsZero() && !prev.TaskEnded.After(next.Submitted.Add(PolicySlack))
			if !prev.Placed {
				ended = unplacedEnded(prev, next.Submitted)
			}
			stopped := !prev.StopAsked.IsZero() && !prev.StopAsked.After(next.Submitted.Add(PolicySlack))
			switch {
			case j.Policy == PolicyForbid && !ended:
				r.Overlapping = append(r.Overlapping, fmt.Sprintf("%s: child %s made at %s while %s still ran (%s)",
					j.Name, next.ID, clock(next.Submitted), prev.ID, endedText(prev)))
			case j.Policy == PolicyReplace && !ended && !stopped:
				r.Overlapping = append(r.Overlapping, fmt.Sprintf("%s: child %s made at %s before %s was stopped (%s; stop asked %s)",
					j.Name, next.ID, clock(next.Submitted), prev.ID, endedText(prev), clockOrNever(prev.StopAsked)))
			}
		}
	}
}

// unplacedEnded says whether child c, which Nomad never placed, had
// ended by at as the launcher's forbid check sees it: that check counts
// a child running while Nomad has it pending or running (its evaluation
// blocked, say), whether or not a task ever started, and ended once Nomad
// has it dead with no allocation left running. So c ended by at only if
// it was dead when the checker read it (a child's status never goes back
// from dead) and Nomad knew it dead by at (Ended, with PolicySlack). A
// dead child for which Nomad kept nothing that tells when (its
// evaluations garbage-collected, never stopped) passes: Nomad's own
// collection is no overlap, and nothing shows it came late.
func unplacedEnded(c Child, at time.Time) bool {
	switch {
	case c.Status != "dead":
		return false
	case c.Ended.IsZero():
		return true
	}
	return !c.Ended.After(at.Add(PolicySlack))
}

func endedText(c Child) string {
	switch {
	case !c.Placed && c.Status != "dead":
		return fmt.Sprintf("never placed; Nomad had it %q when the checker read it", c.Status)
	case !c.Placed && c.Status == "dead" && !c.Ended.IsZero():
		return "never placed; Nomad knew it dead at " + clock(c.Ended)
	}
	if c.TaskEnded.IsZero() {
		return "not ended when the checker read it"
	}
	return "ended " + clock(c.TaskEnded)
}

func clockOrNever(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return clock(t)
}

// validate checks a job as the checker takes it (from the workload, or
// from a saved run.json).
func (j CheckedJob) validate() error {
	switch {
	case j.EverySeconds <= 0 || 60%j.EverySeconds != 0:
		return fmt.Errorf("chaos: job %s every %d s: want a divisor of 60", j.Name, j.EverySeconds)
	case j.Policy != PolicyAllow && j.Policy != PolicyForbid && j.Policy != PolicyReplace:
		return fmt.Errorf("chaos: job %s has concurrency policy %q: want %s, %s or %s", j.Name, j.Policy, PolicyAllow, PolicyForbid, PolicyReplace)
	case j.CatchupWindow <= 0:
		return fmt.Errorf("chaos: job %s has catch-up window %v: want more than zero", j.Name, j.CatchupWindow)
	}
	return nil
}

// The skips the launcher records, by the wording of its reasons
// (cron/launcher). The checker reads them to know which rule a skip
// claims, then judges the claim by its own view; a reason it cannot read
// is a violation, so that new wording cannot pass unjudged.
var (
	forbidReason  = regexp.MustCompile(`^previous child (\S+) still running \(concurrency forbid\)$`)
	catchupReason = regexp.MustCompile(`catch-up window \((\S+) late, window (\S+)\)$`)
	// roomReason is a catch-up skip of a slot that waited for room (the
	// state's limit of open launches); judged as one.
	roomReason = regexp.MustCompile(`^missed: waited for room past its catch-up window, the state holding its limit of \d+ open launches of (?:all jobs|the job) \((\S+) late, window (\S+)\)$`)
)

// ForbidSlack is how long after Nomad knew a child's allocations ended
// the forbid policy may still find it running: the job turns dead after
// that, and the launcher's call may have been answered just before.
const ForbidSlack = 5 * time.Second

// judgeSkip says why a recorded skip of job j's slot at, in fault window
// w (nil if none), is not justified ("" if it is). The workload never pauses or deletes a job or edits its schedule, so only two
// skips can be right: a catch-up skip, for a job with that window, in a
// fault window, decided once the window had passed; and a forbid skip,
// for a forbid job, naming the job's last dispatched child, which Nomad
// did not know finished before the slot.
func judgeSkip(j CheckedJob, at time.Time, rec Record, w *Window, last lastChildren) string {
	if m := forbidReason.FindStringSubmatch(rec.Reason); rec.ChildID != "" && (m == nil || m[1] != rec.ChildID) {
		// A forbid skip names the running child, the next slot's last
		// child; no other skip names one.
		return fmt.Sprintf("it names child %s, which its reason does not", rec.ChildID)
	}
	m := catchupReason.FindStringSubmatch(rec.Reason)
	if m == nil {
		m = roomReason.FindStringSubmatch(rec.Reason)
	}
	if m != nil {
		late, err1 := time.ParseDuration(m[1])
		window, err2 := time.ParseDuration(m[2])
		switch {
		case err1 != nil || err2 != nil:
			return "its reason's durations do not parse"
		case window != j.CatchupWindow:
			return fmt.Sprintf("the job's catch-up window is %v", j.CatchupWindow)
		case late <= window-time.Second:
			// The reason truncates lateness to the second.
			return fmt.Sprintf("%v late is within the %v window", late, window)
		case w == nil:
			return "the slot lies outside every fault window: no fault delayed it"
		case rec.At.IsZero():
			// Only a log line tells when: without one (the API's history
			// alone) the lateness is paxcron's word, which the checker
			// does not take.
			return fmt.Sprintf("no source recorded when it was decided (%s), so nothing shows its window had run out", rec.Source)
		case rec.At.Add(w.Ahead + time.Second).Before(at.Add(window)):
			return fmt.Sprintf("it was recorded at %s, before its window ran out at %s", clock(rec.At), clock(at.Add(window)))
		}
		return ""
	}
	m = forbidReason.FindStringSubmatch(rec.Reason)
	if m == nil {
		return "the checker knows no such skip: the workload never pauses or deletes a job or edits its schedule"
	}
	named := m[1]
	if rec.ChildID != named {
		return fmt.Sprintf("it does not name %s, the child its reason gives, as its child", named)
	}
	prev, ok := last.before(j.Name, at)
	if u, found := last.ofUnknown[named]; found && u.job == j.Name && u.at.Before(at) {
		// The policy also acts on the children of launches concluded
		// unknown, which it looks up.
		prev, ok = u.Child, true
	}
	ahead := time.Duration(0)
	if w != nil {
		ahead = w.Ahead
	}
	switch {
	case j.Policy != PolicyForbid:
		return fmt.Sprintf("the job's policy is %s", j.Policy)
	case !ok:
		return fmt.Sprintf("Nomad has no child the job dispatched before the slot; the reason names %s", named)
	case prev.ID != named:
		return fmt.Sprintf("the job's last child before the slot is %s (%s), and %s is no child of a launch recorded unknown", prev.ID, prev.Token, named)
	case !prev.Ended.IsZero() && prev.Ended.Add(ForbidSlack+ahead).Before(at):
		return fmt.Sprintf("Nomad knew %s had ended at %s, more than %v before the slot", named, clock(prev.Ended), ForbidSlack+ahead)
	}
	return ""
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// lastChildren holds, per job, its children recorded dispatched, in slot
// order: the forbid policy acts on the last of them, and on the children
// of launches recorded unknown (ofUnknown, by child ID), which it looks
// up.
type lastChildren struct {
	dispatched map[string][]slotChild
	ofUnknown  map[string]slotChild
}

type slotChild struct {
	job string
	at  time.Time
	Child
}

func dispatchedChildren(children []Child, records map[string]Record) lastChildren {
	out := lastChildren{dispatched: map[string][]slotChild{}, ofUnknown: map[string]slotChild{}}
	for _, c := range children {
		name, at, ok := SplitIdentity(c.Token)
		rec := records[c.Token]
		switch {
		case !ok:
		case rec.Outcome == "dispatched" && rec.ChildID == c.ID:
			out.dispatched[name] = append(out.dispatched[name], slotChild{job: name, at: at, Child: c})
		case rec.Outcome == "unknown":
			out.ofUnknown[c.ID] = slotChild{job: name, at: at, Child: c}
		}
	}
	for _, cs := range out.dispatched {
		slices.SortFunc(cs, func(a, b slotChild) int { return a.at.Compare(b.at) })
	}
	return out
}

// before is job's last child recorded dispatched for a slot before at.
func (l lastChildren) before(job string, at time.Time) (Child, bool) {
	cs := l.dispatched[job]
	i, _ := slices.BinarySearchFunc(cs, at, func(c slotChild, t time.Time) int { return c.at.Compare(t) })
	if i == 0 {
		return Child{}, false
	}
	return cs[i-1].Child, true
}

// window is the fault window covering a slot at t, or nil: its launch is
// judged late only outside them. A slot due up to lateBound before a
// fault began was still being launched when it struck.
func window(ws []Window, t time.Time, lateBound time.Duration) *Window {
	for i, w := range ws {
		if !t.Before(w.From.Add(-lateBound)) && !t.After(w.To) {
			return &ws[i]
		}
	}
	return nil
}

// dedupeRecords keeps one record per identity; two sources that disagree
// on a launch's outcome are a violation (replicas applied different
// histories).
func dedupeRecords(recs []Record, r *Report) map[string]Record {
	out := map[string]Record{}
	conflicted := map[string]bool{}
	for _, rec := range recs {
		old, ok := out[rec.Identity]
		if !ok {
			out[rec.Identity] = rec
			continue
		}
		if !rec.At.IsZero() && (old.At.IsZero() || rec.At.Before(old.At)) {
			// The earliest record is nearest the decision.
			old.At = rec.At
			out[rec.Identity] = old
		}
		if reasonNotKept(old.Reason) && rec.Reason != "" && !reasonNotKept(rec.Reason) {
			// Judge the reason the launch concluded with, not a history's
			// stand-in for it.
			old.Reason = rec.Reason
			out[rec.Identity] = old
		}
		// Only the record kept is judged: one whose reason differs (a
		// justified skip read first hiding another's unjustified one)
		// tells of another history, unless a history did not keep it.
		reasons := old.Reason == rec.Reason || reasonNotKept(old.Reason) || reasonNotKept(rec.Reason)
		if (old.Outcome != rec.Outcome || old.ChildID != rec.ChildID || !reasons) && !conflicted[rec.Identity] {
			conflicted[rec.Identity] = true
			r.Conflicting = append(r.Conflicting, fmt.Sprintf("%s: %s %s (%s) vs %s %s (%s)",
				rec.Identity, old.Outcome, old.ChildID, old.Source, rec.Outcome, rec.ChildID, rec.Source))
			if !reasons {
				r.Conflicting[len(r.Conflicting)-1] += fmt.Sprintf(": reasons %q vs %q", old.Reason, rec.Reason)
			}
		}
	}
	return out
}

// reasonNotKept: the reason a history gives a skip or failure whose own
// it did not keep (cron/state's ReasonNotKept).
func reasonNotKept(reason string) bool { return strings.HasPrefix(reason, "reason not kept: ") }

// Identity is paxcron's launch identity for a scheduled slot, written
// here from its documented form (README: "<cron name>-<scheduled unix
// seconds>") rather than imported, so that the checker does not take
// paxcron's word for it.
func Identity(job string, at time.Time) string {
	return job + "-" + strconv.FormatInt(at.Unix(), 10)
}

// SplitIdentity parses an identity back into its job and time.
func SplitIdentity(id string) (string, time.Time, bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return "", time.Time{}, false
	}
	s, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	return id[:i], time.Unix(s, 0), true
}

var (
	digits  = regexp.MustCompile(`[0-9]+`)
	childRe = regexp.MustCompile(`\S+/dispatch-\S+`)
)

// ReasonClass groups skip reasons for the counts: the child IDs and the
// numbers in a reason differ from launch to launch.
func ReasonClass(reason string) string {
	s := childRe.ReplaceAllString(reason, "<child>")
	s = digits.ReplaceAllString(s, "#")
	if len(s) > 70 {
		s = s[:70] + "..."
	}
	return s
}

func childIDs(cs []Child) string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return strings.Join(ids, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// MaxListed is how many lines of each violation kind Print shows.
const MaxListed = 20

// Print writes the counts, every violation (up to MaxListed of a kind),
// and the one-line verdict.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "slots checked: %d (%d in fault windows); children in Nomad: %d (%d of them for checked slots)\n",
		r.Slots, r.InWindows, r.Children, r.ChildrenSlots)
	fmt.Fprintf(w, "recorded: %d dispatched, %d skipped, %d failed, %d unknown\n", r.Dispatched, sum(r.Skips), r.Failed, r.Unknown)
	for _, reason := range sortedKeys(r.Skips) {
		fmt.Fprintf(w, "  skipped %5d  %s\n", r.Skips[reason], reason)
	}
	if r.LatestOutside == "" {
		fmt.Fprintln(w, "latest child outside fault windows: none (no slot outside them had a child)")
	} else {
		fmt.Fprintf(w, "latest child outside fault windows: %v after its slot, %s\n", r.MaxLateOutside.Round(time.Millisecond), r.LatestOutside)
	}
	var counts []string
	for _, l := range r.lists() {
		counts = append(counts, fmt.Sprintf("%s %d", l.name, len(*l.list)))
	}
	fmt.Fprintf(w, "violations: %s\n", strings.Join(counts, ", "))
	for _, l := range r.lists() {
		for i, line := range *l.list {
			if i == MaxListed {
				fmt.Fprintf(w, "  %s: %d more\n", l.name, len(*l.list)-MaxListed)
				break
			}
			fmt.Fprintf(w, "  %s: %s\n", l.name, line)
		}
	}
	fmt.Fprintln(w, r.Verdict())
}

// Verdict is the one-line verdict.
func (r *Report) Verdict() string {
	if n := r.Violations(); n > 0 {
		return fmt.Sprintf("VERDICT: FAIL, %d violations in %d slots", n, r.Slots)
	}
	if r.Slots == 0 {
		return "VERDICT: FAIL, no slot was checked"
	}
	return fmt.Sprintf("VERDICT: PASS, %d slots, none doubled, none missing, none late outside the fault windows", r.Slots)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

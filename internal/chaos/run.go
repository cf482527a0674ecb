package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"paxcron/internal/api"
)

// Options configure a run.
type Options struct {
	Duration time.Duration
	Seed     uint64
	Jobs     int
	// LateBound and EarlyBound are the checker's (CheckInput).
	LateBound, EarlyBound time.Duration
	// Drain bounds the wait after the schedule for the launches due
	// before its end to conclude.
	Drain time.Duration
	// Dir holds the run's files; it is emptied first. Kept after a
	// failed run, removed after a passed one unless Keep.
	Dir  string
	Keep bool
	// ModuleDir is the paxcron module the replicas' binary is built from.
	ModuleDir string
	Out       io.Writer
}

// Setup and check bounds, besides Duration and Drain.
const (
	LeaderTimeout  = 60 * time.Second
	HealthyTimeout = 30 * time.Second
	ProgressEvery  = 15 * time.Second
)

type runner struct {
	o       Options
	d       *docker
	nomad   *nomadAgent
	cl      *cluster
	sched   Schedule
	rng     *rand.Rand
	start   time.Time
	jobs    []CheckedJob
	windows []Window
	outMu   sync.Mutex
}

func (r *runner) say(format string, args ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	elapsed := ""
	if !r.start.IsZero() {
		elapsed = fmt.Sprintf("+%v ", time.Since(r.start).Round(time.Second))
	}
	fmt.Fprintf(r.o.Out, "%s %s%s\n", time.Now().UTC().Format("15:04:05"), elapsed, fmt.Sprintf(format, args...))
}

// Run runs the chaos test: setup, the fault schedule for Duration, the
// drain, the check. It returns the checker's report, or an error if the
// harness failed (ErrNoDocker when no engine answers). Everything it made
// is removed before it returns, also when ctx is cancelled.
func Run(ctx context.Context, o Options) (*Report, error) {
	d, err := findDocker(ctx)
	if err != nil {
		return nil, err
	}
	r := &runner{o: o, d: d, sched: NewSchedule(o.Seed, o.Duration), rng: rand.New(rand.NewPCG(o.Seed, 1))}
	r.sched.Print(o.Out)
	d.cleanup(r.say)
	killUnder(filepath.Join(o.Dir, "nomad")) // a Nomad a killed run left behind, and its tasks
	unmountUnder(filepath.Join(o.Dir, "nomad"))
	if err := os.RemoveAll(o.Dir); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	rep, err := r.run(ctx)
	r.teardown()
	switch {
	case err != nil || rep == nil || rep.Violations() > 0:
		r.say("the run's files (replica outputs, Nomad's log) are kept in %s", o.Dir)
	case !o.Keep:
		os.RemoveAll(o.Dir)
	}
	return rep, err
}

func (r *runner) teardown() {
	r.say("cleaning up: containers, networks, image, Nomad")
	if r.cl != nil {
		if outs, err := r.cl.outputs(context.Background()); err == nil {
			for i, out := range outs {
				os.WriteFile(filepath.Join(r.o.Dir, fmt.Sprintf("replica-%d.log", i+1)), out, 0o644)
			}
		}
		r.cl.remove(context.Background())
	}
	if r.nomad != nil {
		r.nomad.destroy()
	}
	r.d.cleanup(r.say)
}

func (r *runner) run(ctx context.Context) (*Report, error) {
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	if err := r.submit(ctx); err != nil {
		return nil, err
	}
	r.start = time.Now()
	r.say("the fault schedule starts; it ends at %s", r.start.Add(r.o.Duration).UTC().Format("15:04:05"))
	progressCtx, stopProgress := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.progress(progressCtx) })
	err := r.faults(ctx)
	if err == nil {
		sleep(ctx, time.Until(r.start.Add(r.o.Duration)))
		err = ctx.Err()
	}
	stopProgress()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	to := r.start.Add(r.o.Duration)
	r.drain(ctx, to)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return r.check(ctx, to)
}

func (r *runner) setup(ctx context.Context) error {
	r.say("building a static paxcron and the image %s (FROM scratch)", Image)
	if err := r.d.buildImage(ctx, r.o.ModuleDir, r.o.Dir); err != nil {
		return err
	}
	peers, err := r.d.createNetwork(ctx, Prefix+"peers")
	if err != nil {
		return err
	}
	// Replicas reach Nomad on the host through this one, and never one
	// another.
	nomadNet, err := r.d.createNetwork(ctx, Prefix+"nomad", "-o", "com.docker.network.bridge.enable_icc=false")
	if err != nil {
		return err
	}
	r.say("networks: %s %v (replicas), %s %v (Nomad at %v); both internal", peers.Name, peers.Subnet, nomadNet.Name, nomadNet.Subnet, nomadNet.Gateway)
	if r.nomad, err = newNomad(filepath.Join(r.o.Dir, "nomad"), nomadNet.Gateway.String()); err != nil {
		return err
	}
	if err := r.nomad.start(ctx); err != nil {
		return err
	}
	r.say("Nomad %s (server and client, data in %s) at %s and %s", r.nomad.Version, r.nomad.dir, r.nomad.Addr, r.nomad.ReplicaAddr)
	nc := r.nomad.client()
	defer nc.Close()
	for _, p := range parents() {
		if _, _, err := nc.Jobs().Register(p, nil); err != nil {
			return fmt.Errorf("chaos: registering %s in Nomad: %w", *p.ID, err)
		}
	}
	if r.cl, err = newCluster(r.d, r.o.Dir, peers, nomadNet, r.nomad.ReplicaAddr); err != nil {
		return err
	}
	for id := 1; id <= 3; id++ {
		if err := r.cl.create(ctx, id, true); err != nil {
			return err
		}
	}
	leader, _ := r.cl.waitHealthy(ctx, LeaderTimeout)
	if leader == 0 {
		return fmt.Errorf("chaos: no replica leads %v after the start", LeaderTimeout)
	}
	r.say("3 replicas in containers (%s..3); replica %d leads", containerName(1), leader)
	return nil
}

// submit creates the workload's cron jobs through the API.
func (r *runner) submit(ctx context.Context) error {
	work := Workload(r.o.Jobs)
	var put api.PutJobs
	for _, j := range work {
		put.Jobs = append(put.Jobs, api.PutJob{Name: j.Name, Spec: j.Spec})
	}
	deadline := time.Now().Add(LeaderTimeout)
	for {
		leader := leaderOf(r.cl.statuses(ctx))
		if leader != 0 {
			_, err := r.cl.client(leader).PutJobs(ctx, put)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("chaos: submitting the workload: %w", err)
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("chaos: no leader to submit the workload to")
		}
		sleep(ctx, 500*time.Millisecond)
	}
	from := time.Now().Add(time.Second)
	counts := map[string]int{}
	for _, j := range work {
		policy := j.Spec.Concurrency
		if policy == "" {
			policy = PolicyAllow
		}
		r.jobs = append(r.jobs, CheckedJob{Name: j.Name, EverySeconds: j.EverySeconds, Policy: policy,
			CatchupWindow: time.Duration(j.Spec.CatchupWindow), From: from, Parent: j.Spec.NomadJob})
		counts[strings.TrimRight(strings.TrimPrefix(j.Name, "chaos-"), "-0123456789")]++
	}
	r.say("submitted %d cron jobs every 5-30 s (%d allow, %d forbid, %d replace); slots after %s are checked",
		len(work), counts["allow"], counts["forbid"], counts["replace"], from.UTC().Format("15:04:05"))
	return nil
}

// faults injects the schedule's faults at their times.
func (r *runner) faults(ctx context.Context) error {
	end := r.start.Add(r.o.Duration - QuietTail(r.o.Duration)/2)
	for i, f := range r.sched.Faults {
		sleep(ctx, time.Until(r.start.Add(f.At)))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		leader, healthy := r.cl.waitHealthy(ctx, HealthyTimeout)
		if !healthy {
			r.say("fault %d: the cluster is not healthy after %v (leader %d)", i+1, HealthyTimeout, leader)
		}
		if time.Now().Add(f.Down).After(end) {
			r.say("fault %d (%s): no time left before the quiet tail; not injected", i+1, f.Kind)
			continue
		}
		if err := r.inject(ctx, i+1, f, leader); err != nil {
			return err
		}
	}
	return nil
}

// inject applies one fault, waits its Down time, heals it, and records
// its window.
func (r *runner) inject(ctx context.Context, n int, f Fault, leader int) error {
	var followers []int
	for id := 1; id <= 3; id++ {
		if id != leader {
			followers = append(followers, id)
		}
	}
	pickFollower := func() int { return followers[r.rng.IntN(len(followers))] }
	needsLeader := f.Kind == KillLeader || f.Kind == PauseLeader || f.Kind == IsolateLeader || f.Kind == Split ||
		((f.Kind == ClockJump || f.Kind == DiskLoss) && f.OnLeader)
	if needsLeader && leader == 0 {
		r.say("fault %d (%s): no leader to hit; not injected", n, f.Kind)
		return nil
	}
	var target []int
	var apply, heal func() error
	switch f.Kind {
	case KillLeader, KillFollower:
		id := leader
		if f.Kind == KillFollower {
			id = pickFollower()
		}
		target = []int{id}
		apply = func() error { return r.cl.signal(ctx, id, "KILL") }
		heal = func() error { return r.cl.restart(ctx, id) }
	case PauseLeader:
		target = []int{leader}
		apply = func() error { return r.cl.signal(ctx, leader, "STOP") }
		heal = func() error { return r.cl.signal(ctx, leader, "CONT") }
	case IsolateLeader, Split:
		target = []int{leader}
		if f.Kind == Split {
			target = append(target, pickFollower())
		}
		apply = func() error {
			for _, id := range target {
				if err := r.cl.cut(ctx, id); err != nil {
					return err
				}
			}
			return nil
		}
		heal = func() error {
			for _, id := range target {
				if err := r.cl.join(ctx, id); err != nil {
					return err
				}
			}
			return nil
		}
	case ClockJump:
		id := leader
		if !f.OnLeader {
			id = pickFollower()
		}
		target = []int{id}
		apply = func() error { return r.cl.setClock(id, f.Offset) }
		heal = func() error { return r.cl.setClock(id, 0) }
	case DiskLoss:
		id := leader
		if !f.OnLeader {
			id = pickFollower()
		}
		target = []int{id}
		apply = func() error { return r.cl.loseDisk(ctx, id) }
		heal = func() error { return r.cl.create(ctx, id, false) }
	case NomadRestart:
		apply = func() error { r.nomad.stop(); return nil }
		heal = func() error { return r.nomad.start(ctx) }
	default:
		panic(fmt.Sprintf("chaos: fault kind %q", f.Kind))
	}
	what := fmt.Sprintf("%d. %s", n, f.Kind)
	if len(target) > 0 {
		what += fmt.Sprintf(" (replica %s)", joinInts(target))
	}
	if f.Kind == ClockJump {
		what += " " + signed(f.Offset)
	}
	injected := time.Now()
	r.say("fault %s: injected (leader was %d)", what, leader)
	if err := apply(); err != nil {
		return fmt.Errorf("chaos: fault %s: %w", what, err)
	}
	sleep(ctx, time.Until(injected.Add(f.Down)))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := heal(); err != nil {
		return fmt.Errorf("chaos: healing fault %s: %w", what, err)
	}
	healed := time.Now()
	w := Window{Fault: what, From: injected, To: f.WindowEnd(injected, healed)}
	if f.Kind == ClockJump {
		w.Ahead = max(f.Offset, 0)
	}
	r.windows = append(r.windows, w)
	r.say("fault %s: healed after %v; its window runs to +%v", what, healed.Sub(injected).Round(100*time.Millisecond), w.To.Sub(r.start).Round(time.Second))
	return nil
}

func joinInts(ids []int) string {
	var s []string
	for _, id := range ids {
		s = append(s, fmt.Sprint(id))
	}
	return strings.Join(s, " and ")
}

// progress prints the replicas' state and Nomad's child count.
func (r *runner) progress(ctx context.Context) {
	nc := r.nomad.client()
	defer nc.Close()
	for {
		sleep(ctx, ProgressEvery)
		if ctx.Err() != nil {
			return
		}
		children := 0
		for _, p := range []string{QuickParent, SlowParent} {
			if s, _, err := nc.Jobs().Summary(p, nil); err == nil && s.Children != nil {
				children += int(s.Children.Pending + s.Children.Running + s.Children.Dead)
			}
		}
		r.say("progress: %s; %d children in Nomad", describe(r.cl.statuses(ctx)), children)
	}
}

// drain waits, at most Drain, until no launch due at or before to is
// still open, as the replicas' linearizable reads tell.
func (r *runner) drain(ctx context.Context, to time.Time) {
	r.say("the schedule is over: waiting (at most %v) for the launches due before its end to conclude", r.o.Drain)
	deadline := time.Now().Add(r.o.Drain)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		open, err := r.openBefore(ctx, to)
		if err == nil && open == 0 {
			r.say("every launch due before the end has concluded")
			return
		}
		sleep(ctx, 2*time.Second)
	}
	r.say("drain time over; launches still open are checked as they stand")
}

// openBefore counts the workload's launches due at or before to that are
// open or not yet started, through the leader.
func (r *runner) openBefore(ctx context.Context, to time.Time) (int, error) {
	leader := leaderOf(r.cl.statuses(ctx))
	if leader == 0 {
		return 0, errors.New("chaos: no leader")
	}
	c := r.cl.client(leader)
	open := 0
	for _, j := range r.jobs {
		job, err := c.Job(ctx, j.Name, 0, api.ReadOptions{})
		if err != nil {
			return 0, err
		}
		for _, l := range job.OpenAll {
			if !l.ScheduledAt.After(to) {
				open++
			}
		}
		if job.Last == nil || job.Last.ScheduledAt.Before(to.Add(-time.Duration(j.EverySeconds)*time.Second)) {
			open++ // the last slot before the end is not concluded yet
		}
	}
	return open, nil
}

// check gathers Nomad's children and paxcron's records and judges them.
// What it judges besides them is saved in the run's folder (run.json),
// so that Recheck can judge the run again from Nomad's data folder and
// the replicas' outputs.
func (r *runner) check(ctx context.Context, to time.Time) (*Report, error) {
	r.say("checking: Nomad's job list and the replicas' launch records")
	saved := savedRun{Start: r.start, Jobs: r.jobs, To: to, Windows: r.windows, LateBound: r.o.LateBound, EarlyBound: r.o.EarlyBound}
	if err := saved.save(r.o.Dir); err != nil {
		return nil, err
	}
	children, err := r.children(ctx)
	if err != nil {
		return nil, err
	}
	outs, err := r.cl.outputs(ctx)
	if err != nil {
		return nil, err
	}
	var records []Record
	for i, out := range outs {
		records = append(records, launchRecords(out, fmt.Sprintf("replica %d's log", i+1))...)
	}
	// The replicas' own history as well (the last launches of each job),
	// through a linearizable read: it must agree with the logs. Left
	// unread, the check is weaker, and the run says so.
	if leader := leaderOf(r.cl.statuses(ctx)); leader == 0 {
		r.say("no leader at the end: the replicas' history is not read, and not checked against their logs")
	} else {
		unread := 0
		for _, j := range r.jobs {
			job, err := r.cl.client(leader).Job(ctx, j.Name, 0, api.ReadOptions{})
			if err != nil {
				unread++
				continue
			}
			for _, l := range job.History {
				records = append(records, Record{Identity: l.Identity, Outcome: l.Outcome, ChildID: l.ChildID, Reason: l.Reason, Source: "the API's history"})
			}
		}
		if unread > 0 {
			r.say("the history of %d of %d jobs could not be read from replica %d: not checked against the logs", unread, len(r.jobs), leader)
		}
	}
	return saved.judge(r.o.Out, children, records), nil
}

// savedRun is what the checker judges besides Nomad's children and the
// launch records: the run's folder keeps it as run.json.
type savedRun struct {
	Start                 time.Time
	Jobs                  []CheckedJob
	To                    time.Time
	Windows               []Window
	LateBound, EarlyBound time.Duration
}

func (s savedRun) save(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.json"), b, 0o644); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

// judge runs the checker and prints the windows, the bound and the report.
func (s savedRun) judge(out io.Writer, children []Child, records []Record) *Report {
	fmt.Fprintf(out, "%d children in Nomad, %d launch records read\n", len(children), len(records))
	rep := Check(CheckInput{Jobs: s.Jobs, To: s.To, Children: children, Records: records, Windows: s.Windows,
		LateBound: s.LateBound, EarlyBound: s.EarlyBound})
	fmt.Fprintf(out, "\nfault windows (a fault, then %v of recovery; a Nomad outage adds its length, a clock jump its size):\n", RecoveryBase)
	for _, w := range s.Windows {
		fmt.Fprintf(out, "  %-40s +%v .. +%v\n", w.Fault, w.From.Sub(s.Start).Round(time.Second), w.To.Sub(s.Start).Round(time.Second))
	}
	fmt.Fprintf(out, "lateness bound outside the fault windows: a child within %v after its slot, and at most %v before it\n\n", s.LateBound, s.EarlyBound)
	rep.Print(out)
	return rep
}

// Recheck judges a finished run again from its folder (a run that failed
// keeps it): run.json, the replicas' outputs (replica-N.log), and Nomad's
// data folder, which an agent started on loopback only serves again. It
// needs no Docker engine.
func Recheck(ctx context.Context, dir string, out io.Writer) (*Report, error) {
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	var saved savedRun
	if err := json.Unmarshal(b, &saved); err != nil {
		return nil, fmt.Errorf("chaos: %s: %w", filepath.Join(dir, "run.json"), err)
	}
	for _, j := range saved.Jobs {
		if err := j.validate(); err != nil {
			return nil, fmt.Errorf("%w (in %s; a run saved before the checker judged skips by policy has none: judge it with that version)", err, filepath.Join(dir, "run.json"))
		}
	}
	var records []Record
	for id := 1; id <= 3; id++ {
		o, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("replica-%d.log", id)))
		if err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		records = append(records, launchRecords(o, fmt.Sprintf("replica %d's log", id))...)
	}
	agent, err := newNomad(filepath.Join(dir, "nomad"), "")
	if err != nil {
		return nil, err
	}
	defer agent.destroy()
	if err := agent.start(ctx); err != nil {
		return nil, err
	}
	nc := agent.client()
	defer nc.Close()
	children, err := nomadChildren(ctx, nc)
	if err != nil {
		return nil, err
	}
	return saved.judge(out, children, records), nil
}

// children lists every child of the parents in Nomad, with its token,
// meta and the time Nomad registered it (one read per child: the list
// does not carry them).
func (r *runner) children(ctx context.Context) ([]Child, error) {
	nc := r.nomad.client()
	defer nc.Close()
	return nomadChildren(ctx, nc)
}

func nomadChildren(ctx context.Context, nc *nomadapi.Client) ([]Child, error) {
	var stubs []*nomadapi.JobListStub
	for _, p := range []string{QuickParent, SlowParent} {
		s, _, err := nc.Jobs().PrefixList(p + "/dispatch-")
		if err != nil {
			return nil, fmt.Errorf("chaos: listing %s's children in Nomad: %w", p, err)
		}
		stubs = append(stubs, s...)
	}
	out := make([]Child, len(stubs))
	errs := make([]error, len(stubs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, s := range stubs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = readChild(ctx, nc, s)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Child) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// readChild reads one child. Its registration time is its first
// version's SubmitTime: stopping a child (the replace policy) registers
// a new version, which moves the job's SubmitTime to the stop (the first
// chaos run took those children for 10 s late).
func readChild(ctx context.Context, nc *nomadapi.Client, s *nomadapi.JobListStub) (Child, error) {
	q := (&nomadapi.QueryOptions{}).WithContext(ctx)
	j, _, err := nc.Jobs().Info(s.ID, q)
	if err != nil {
		return Child{}, fmt.Errorf("chaos: reading child %s: %w", s.ID, err)
	}
	c := Child{ID: s.ID, Submitted: time.Unix(0, s.SubmitTime), MetaIdentity: j.Meta["paxcron_identity"], Parent: s.ParentID,
		MetaJob: j.Meta["paxcron_job"], MetaScheduledAt: j.Meta["paxcron_scheduled_at"]}
	if j.DispatchIdempotencyToken != nil {
		c.Token = *j.DispatchIdempotencyToken
	}
	if j.Status != nil {
		c.Status = *j.Status
	}
	if s.ParentID == SlowParent {
		// Only the slow parent places a task; the forbid jobs dispatch it.
		allocs, _, err := nc.Jobs().Allocations(s.ID, true, q)
		if err != nil {
			return Child{}, fmt.Errorf("chaos: reading child %s's allocations: %w", s.ID, err)
		}
		c.Placed = len(allocs) > 0
		c.Ended, c.TaskEnded = allocsEnded(allocs)
	}
	if j.Version != nil && *j.Version > 0 {
		versions, _, _, err := nc.Jobs().Versions(s.ID, false, q)
		if err != nil {
			return Child{}, fmt.Errorf("chaos: reading child %s's versions: %w", s.ID, err)
		}
		for _, v := range versions {
			if v.SubmitTime == nil {
				continue
			}
			at := time.Unix(0, *v.SubmitTime)
			if at.Before(c.Submitted) {
				c.Submitted = at
			}
			if v.Stop != nil && *v.Stop && (c.StopAsked.IsZero() || at.Before(c.StopAsked)) {
				c.StopAsked = at
			}
		}
	}
	if s.ParentID == SlowParent && !c.Placed && c.Status == "dead" {
		// Rare (a slow child is placed unless it was stopped first, its
		// evaluation failed, or Nomad collected its allocations with its
		// evaluations): one more read tells when it died.
		evals, _, err := nc.Jobs().Evaluations(s.ID, q)
		if err != nil {
			return Child{}, fmt.Errorf("chaos: reading child %s's evaluations: %w", s.ID, err)
		}
		c.Ended = unplacedDead(evals, c.StopAsked)
	}
	return c, nil
}

// unplacedDead is when Nomad knew a child that it never placed, and has
// dead, was dead: the last change of its evaluations (ModifyTime, the
// server's clock), all terminal by then, as the job turns dead when its
// last evaluation does. Without any (garbage-collected) it is when the
// child was stopped, if it was, else zero: Nomad kept nothing that tells.
func unplacedDead(evals []*nomadapi.Evaluation, stopAsked time.Time) time.Time {
	var known time.Time
	for _, e := range evals {
		if e.ModifyTime != 0 {
			known = later(known, time.Unix(0, e.ModifyTime))
		}
	}
	if known.IsZero() {
		return stopAsked
	}
	return known
}

// allocsEnded reads when allocs ended, two ways; both zero if there is
// none or one is not terminal.
//
// known is when Nomad's server knew the last had ended: the latest of
// their last changes (ModifyTime, the server's clock). The launcher asks
// the server, and a task that ends while its Nomad agent is down is known
// to the server only once the agent is back (the first chaos run with
// the forbid check found skips "wrong" by that lag, in a Nomad restart's
// window). tasks is when the last task ended by the task states (zero if
// one has not), for the overlap of two children; an allocation lost
// before its task started ended at its last change.
func allocsEnded(allocs []*nomadapi.AllocationListStub) (known, tasks time.Time) {
	tasksDone := true
	for _, a := range allocs {
		switch a.ClientStatus {
		case nomadapi.AllocClientStatusComplete, nomadapi.AllocClientStatusFailed, nomadapi.AllocClientStatusLost:
		default:
			return time.Time{}, time.Time{}
		}
		changed := time.Unix(0, a.ModifyTime)
		known = later(known, changed)
		if len(a.TaskStates) == 0 {
			tasks = later(tasks, changed)
		}
		for _, ts := range a.TaskStates {
			tasksDone = tasksDone && !ts.FinishedAt.IsZero()
			tasks = later(tasks, ts.FinishedAt)
		}
	}
	if !tasksDone {
		tasks = time.Time{}
	}
	return known, tasks
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

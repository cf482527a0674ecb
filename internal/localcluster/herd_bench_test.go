package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/replica"
	"paxcron/cron/state"
	"paxcron/internal/localcluster"
	"paxcron/paxos"
	"paxcron/storage"
)

// BenchmarkMidnightHerd measures the midnight herd of issue 3: jobs all
// due in the same second (schedule "0 0 0 * * *"), on a three-replica
// cluster on real Pebble, against a Dispatcher that answers at once. Each
// op is one herd, at one midnight; run it with -benchtime 1x (or Nx for N
// herds at N consecutive midnights):
//
//	go test -run '^$' -bench MidnightHerd -benchtime 1x -timeout 30m ./internal/localcluster
//
// PAXCRON_HERD_JOBS sets the number of jobs (default 100,000), for quick
// runs. The jobs are created through the log before the herd, with
// PutJob, herdCreators proposals in flight, while the launchers' clock
// reads an hour before midnight; the clock is then moved to just before
// midnight (it runs at the real rate throughout), so the herd comes due
// without waiting for a real midnight. Reported, per herd:
//
//   - started-s: from midnight until the leader applied every LaunchStarted;
//   - finished-s: until it applied every LaunchFinished;
//   - late-p50-ms, late-p99-ms, late-max-ms (and late-min-ms): each
//     dispatch call's lateness, when the Dispatcher's Submit ran, on the
//     launchers' clock, against the launch's scheduled time;
//   - lookups: calls other than dispatches, made by a launcher promoted
//     during the herd (a leadership change), zero in a quiet herd;
//   - cpu-cores: the process's CPU time during the herd per second of it;
//   - create-jobs/s: how fast the jobs were created beforehand.
//
// The launchers use their default limits (MaxInflight 256,
// MaxStartsPerStep 1024, MaxCallLatency 10 s) and the cluster
// DefaultOptions (50 ms tick, synchronous writes), with two snapshot
// policies (herdSnapshotEvery). PAXCRON_HERD_CPUPROFILE names a file to
// profile each sub-benchmark's first herd into, from midnight to its last
// finish (see herdProfile).
func BenchmarkMidnightHerd(b *testing.B) {
	jobs := 100_000
	if s := os.Getenv("PAXCRON_HERD_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("PAXCRON_HERD_JOBS=%q: want a positive number of jobs", s)
		}
		jobs = n
	}
	for _, every := range herdSnapshotEvery {
		b.Run(fmt.Sprintf("jobs=%d/snapshot-every=%d", jobs, every), func(b *testing.B) { midnightHerd(b, jobs, every) })
	}
}

// herdSnapshotEvery are the snapshot policies measured, in entries:
// replica.DefaultSnapshotPolicy's, and one that takes no snapshot during
// a 100,000-job run (its 300,000 entries), which shows what the herd
// costs without them.
var herdSnapshotEvery = []uint64{replica.DefaultSnapshotPolicy().EveryEntries, 1_000_000}

const (
	// herdCreators is how many PutJob proposals are in flight while the
	// jobs are created.
	herdCreators = 256
	// herdLead is how far before midnight the clock is set once the jobs
	// exist: time for the launchers to see the clock move before the herd.
	herdLead = time.Second
	// herdSchedule is due once a day, at midnight UTC.
	herdSchedule = "0 0 0 * * *"
)

// firstMidnight is the first herd's; the next herds are the midnights
// after it.
var firstMidnight = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

// herdClock is the launchers' clock: it runs at the real (monotonic) rate
// from a settable instant.
type herdClock struct {
	start time.Time    // real
	shift atomic.Int64 // nanoseconds past firstMidnight at start
}

func newHerdClock(at time.Time) *herdClock {
	c := &herdClock{start: time.Now()}
	c.set(at)
	return c
}

func (c *herdClock) Now() time.Time {
	return firstMidnight.Add(time.Duration(c.shift.Load()) + time.Since(c.start))
}

// set makes the clock read at.
func (c *herdClock) set(at time.Time) {
	c.shift.Store(int64(at.Sub(firstMidnight) - time.Since(c.start)))
}

// herdNomad answers every call at once, from inside Submit, and records
// each dispatch's lateness.
type herdNomad struct {
	clock *herdClock

	mu         sync.Mutex
	lateness   []time.Duration
	dispatched map[string]bool
	others     int // calls other than dispatches: lookups after a takeover
}

type dispatcherFunc func(launcher.Request)

func (f dispatcherFunc) Submit(r launcher.Request) { f(r) }

func (n *herdNomad) dispatcher(_ paxos.ReplicaID, done func(launcher.Result)) launcher.Dispatcher {
	return dispatcherFunc(func(req launcher.Request) {
		late := n.clock.Now().Sub(req.ScheduledAt)
		res := launcher.Result{ID: req.ID, ChildID: req.Spec.NomadJob + "/dispatch-" + req.Identity}
		n.mu.Lock()
		switch req.Op {
		case launcher.OpDispatch:
			n.lateness = append(n.lateness, late)
			n.dispatched[req.Identity] = true
		case launcher.OpLookup:
			res.Found = n.dispatched[req.Identity]
			n.others++
		default:
			n.others++
		}
		n.mu.Unlock()
		done(res)
	})
}

// herdCounts counts, per replica, the launches the state accepted, and
// when each count last changed.
type herdCounts struct {
	started, finished [4]atomic.Int64 // by replica ID
	startedAt         [4]atomic.Int64 // unix nanoseconds of the last accepted start
	finishedAt        [4]atomic.Int64
}

func (h *herdCounts) applied(id paxos.ReplicaID, _ uint64, c state.Command, err error) {
	if err != nil {
		return
	}
	switch c.(type) {
	case state.LaunchStarted:
		h.started[id].Add(1)
		h.startedAt[id].Store(time.Now().UnixNano())
	case state.LaunchFinished:
		h.finished[id].Add(1)
		h.finishedAt[id].Store(time.Now().UnixNano())
	}
}

func midnightHerd(b *testing.B, jobs int, snapshotEvery uint64) {
	clock := newHerdClock(firstMidnight.Add(-time.Hour))
	nomad := &herdNomad{clock: clock, dispatched: make(map[string]bool, jobs)}
	var counts herdCounts
	o := localcluster.DefaultOptions(benchDir(b))
	o.Snapshots.EveryEntries = snapshotEvery
	var snaps snapshotRecorder
	o.OnSave = snaps.record
	o.Cron = &localcluster.CronOptions{
		Launcher:      launcher.Config{MemoryHorizon: 4 * time.Hour},
		NewDispatcher: nomad.dispatcher,
		Now:           clock.Now,
		Applied:       counts.applied,
	}
	cl, err := localcluster.Start(o)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := cl.Close(); err != nil {
			b.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	b.StopTimer()
	if _, err := cl.WaitLeader(ctx); err != nil {
		b.Fatal(err)
	}

	began := time.Now()
	createHerd(ctx, b, cl, clock, jobs)
	created := time.Since(began)
	b.ReportMetric(float64(jobs)/created.Seconds(), "create-jobs/s")
	settle(ctx, b, cl)
	b.Logf("created %d jobs in %v; %s", jobs, created.Round(time.Millisecond), describe(cl))

	var startedSum, finishedSum time.Duration
	var coresSum float64
	for i := range b.N {
		midnight := firstMidnight.AddDate(0, 0, i)
		leader := launchingReplica(ctx, b, cl)
		want := int64(jobs * (i + 1))
		stopProfile := herdProfile(b, i)
		b.StartTimer()
		clock.set(midnight.Add(-herdLead))
		midnightReal := time.Now().Add(herdLead)
		time.Sleep(time.Until(midnightReal)) // nothing is due before
		cpu := processCPU()
		err := waitProgress(ctx, func() int64 { return counts.finished[leader].Load() }, want)
		cpu = processCPU() - cpu
		busy := time.Since(midnightReal)
		b.StopTimer()
		stopProfile()
		if err != nil {
			for id := range paxos.ReplicaID(3) {
				logLauncher(ctx, b, cl, id+1)
			}
			b.Fatalf("herd %d: %v: %d of %d started, %d finished on leader %d; %s", i, err, counts.started[leader].Load(), want, counts.finished[leader].Load(), leader, describe(cl))
		}
		if now, ok := cl.Leader(); !ok || now != leader {
			b.Logf("herd %d: leader %d at midnight, %d (%t) at the end", i, leader, now, ok)
		}
		started := time.Unix(0, counts.startedAt[leader].Load()).Sub(midnightReal)
		finished := time.Unix(0, counts.finishedAt[leader].Load()).Sub(midnightReal)
		startedSum += started
		finishedSum += finished
		// Only the herd runs from midnight on: the CPU time it takes
		// per second says how close it comes to the machine's cores.
		coresSum += cpu.Seconds() / busy.Seconds()
		settle(ctx, b, cl)
		b.Logf("herd %d at %s: every start applied on leader %d after %v, every finish after %v; %s",
			i, midnight.Format(time.DateOnly), leader, started.Round(time.Millisecond), finished.Round(time.Millisecond), describe(cl))
		logLauncher(ctx, b, cl, leader)
		b.Logf("snapshots saved so far: %s", snaps.describe())
	}

	nomad.mu.Lock()
	lateness := slices.Clone(nomad.lateness)
	others := nomad.others
	nomad.mu.Unlock()
	// Every launch is dispatched once: a leader that took over looks up
	// what its predecessor left open, and finds it.
	if len(lateness) != jobs*b.N {
		b.Fatalf("%d dispatch calls, want %d", len(lateness), jobs*b.N)
	}
	b.ReportMetric(float64(others), "lookups")
	slices.Sort(lateness)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	at := func(q float64) float64 { return ms(lateness[int(q*float64(len(lateness)-1))]) }
	b.ReportMetric(startedSum.Seconds()/float64(b.N), "started-s")
	b.ReportMetric(finishedSum.Seconds()/float64(b.N), "finished-s")
	b.ReportMetric(coresSum/float64(b.N), "cpu-cores")
	b.ReportMetric(at(0), "late-min-ms")
	b.ReportMetric(at(0.50), "late-p50-ms")
	b.ReportMetric(at(0.99), "late-p99-ms")
	b.ReportMetric(at(1), "late-max-ms")
}

// herdProfile profiles the CPU during herd i (only the first) if
// PAXCRON_HERD_CPUPROFILE is set, into that file name followed by the
// sub-benchmark's name; it returns the function that stops it. It cannot
// be used with -cpuprofile, which profiles the whole run, job creation
// included.
func herdProfile(b *testing.B, i int) func() {
	path := os.Getenv("PAXCRON_HERD_CPUPROFILE")
	if path == "" || i > 0 {
		return func() {}
	}
	path += "." + strings.NewReplacer("/", ".", "=", "").Replace(b.Name())
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// createHerd creates the jobs through the log, with herdCreators proposals
// in flight, each stamped with the launchers' clock (an hour before the
// first midnight, so each is next due then).
func createHerd(ctx context.Context, b *testing.B, cl *localcluster.Cluster, clock *herdClock, jobs int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range herdCreators {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(jobs) {
					return
				}
				cmd := state.PutJob{
					Name: fmt.Sprintf("herd-%07d", i),
					Spec: state.JobSpec{Schedule: herdSchedule, NomadJob: "batch"},
					At:   clock.Now(),
				}
				if err := cl.ProposeCommand(ctx, cmd); err != nil {
					b.Errorf("creating %s: %v", cmd.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	if now := clock.Now(); !now.Before(firstMidnight) {
		b.Fatalf("creating the jobs took until %v, past the herd's midnight", now)
	}
}

// settle waits until every replica applied what the leader has chosen.
func settle(ctx context.Context, b *testing.B, cl *localcluster.Cluster) {
	id := launchingReplica(ctx, b, cl)
	if err := cl.WaitApplied(ctx, cl.Replica(id).Status().Chosen); err != nil {
		b.Fatal(err)
	}
}

// launchingReplica waits for the replica whose launcher leads.
func launchingReplica(ctx context.Context, b *testing.B, cl *localcluster.Cluster) paxos.ReplicaID {
	var id paxos.ReplicaID
	err := waitFor(ctx, func() bool {
		for _, s := range cl.Statuses() {
			if s.Launching && s.Err == nil {
				id = s.ID
				return true
			}
		}
		return false
	})
	if err != nil {
		b.Fatalf("no launcher leads: %v: %+v", err, cl.Statuses())
	}
	return id
}

// herdStall is how long a herd may go without a launch finishing before
// the benchmark gives up on it.
const herdStall = time.Minute

// waitProgress waits until count reaches want, or fails once it has not
// moved for herdStall.
func waitProgress(ctx context.Context, count func() int64, want int64) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	last, moved := count(), time.Now()
	for last < want {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if n := count(); n != last {
			last, moved = n, time.Now()
		} else if time.Since(moved) > herdStall {
			return fmt.Errorf("no launch finished for %v, at %d of %d", herdStall, n, want)
		}
	}
	return nil
}

// waitFor polls cond every millisecond: the Applied hook does not wake
// waiters, and a millisecond is well below what is measured.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// snapshotRecorder counts the snapshots the replicas saved.
type snapshotRecorder struct {
	mu      sync.Mutex
	count   int
	largest int
}

func (r *snapshotRecorder) record(_ paxos.ReplicaID, u storage.Update) {
	if u.Snapshot == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	r.largest = max(r.largest, len(u.Snapshot.Data))
}

func (r *snapshotRecorder) describe() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d on the three replicas, the largest %.1f MB", r.count, float64(r.largest)/1e6)
}

func describe(cl *localcluster.Cluster) string {
	s := ""
	for _, st := range cl.Statuses() {
		s += fmt.Sprintf("[r%d %v ballot %d.%d chosen %d applied %d, %d saves, %d entries saved, longest turn %v, %d snapshots restored] ",
			st.ID, st.Role, st.Ballot.Round, st.Ballot.Replica, st.Chosen, st.Applied, st.Saves, st.SavedEntries, st.LongestTurn.Round(time.Millisecond), st.Restores)
	}
	return s + fmt.Sprintf("dropped %d messages", cl.Dropped())
}

func logLauncher(ctx context.Context, b *testing.B, cl *localcluster.Cluster, id paxos.ReplicaID) {
	err := cl.Replica(id).Cron(ctx, func(l *launcher.Launcher) {
		st, ms := l.Stats(), l.Machine().Stats()
		b.Logf("launcher %d (leading %t, concluding %d, %d open in the state): %+v; state: %+v",
			id, l.Leading(), l.Open(), len(l.Machine().OpenLaunches()), st, ms)
	})
	if err != nil {
		b.Error(err)
	}
}

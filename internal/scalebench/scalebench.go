package scalebench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/cron/launcher"
	"paxcron/cron/replica"
	"paxcron/cron/state"
	"paxcron/internal/hashsm"
	"paxcron/internal/node"
	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/pebblestore"
)

// Config sizes a run. DefaultConfig is the issue's.
type Config struct {
	// Dir holds the replicas' stores; it must not be on a tmpfs.
	Dir string
	// Jobs is how many cron jobs the cluster holds, MinutelyJobs of them
	// due every minute (at a second hashed from the name, "? * * * * *"),
	// which makes the launch flow; the others are due once a year, at a
	// hashed minute ("? ? ? ? *"), so that they fill the state and the
	// leader's heap but add only Jobs/525,600 launches a minute.
	Jobs, MinutelyJobs int
	// Warmup is how long the launches run once a launcher leads before
	// the measurement starts: the slots that came due while the replicas
	// started are launched late, at once, and the flow settles.
	Warmup time.Duration
	// Steady is how long the steady state is measured, in windows of
	// Window (the plot's points).
	Steady, Window time.Duration
	// DispatchLatency is how long the fake Nomad takes to answer a call.
	DispatchLatency time.Duration
	// Launcher overrides the launchers' limits (MemoryHorizon is set if
	// zero; the node sets Machine, Propose, Dispatcher and Applied).
	Launcher launcher.Config
	// Logf, when set, hears progress.
	Logf func(format string, args ...any)
	// StartProfile, when set, receives a CPU profile of the start and the
	// warm-up (the steady state's windows take their own); RestartProfile
	// one of the follower's restart, from its open until caught up.
	StartProfile, RestartProfile io.Writer
	// WindowProfile, when set, is handed each steady-state window's CPU
	// profile (gzipped profile.proto) once parsed: where the leader's time
	// goes (go tool pprof -tagfocus replica=<id> merges them).
	WindowProfile func(window int, profile []byte)
	// StallTraceDir, when set, keeps an execution trace of the last few
	// seconds in memory (a flight recorder) and writes it to
	// stall-NN.trace there whenever the monitor sees the process stopped
	// for a collection for stallTraceAfter or more (at most
	// maxStallTraces): which goroutine the runtime waited for shows in
	// `go tool trace`.
	StallTraceDir string
}

// DefaultConfig is issue 6's scale: 1,000,000 jobs, 10,000 launches a
// minute, 2.5 minutes of steady state after a minute of warm-up.
func DefaultConfig(dir string) Config {
	return Config{
		Dir: dir, Jobs: 1_000_000, MinutelyJobs: 10_000,
		Warmup: time.Minute, Steady: 150 * time.Second, Window: 5 * time.Second,
		DispatchLatency: 5 * time.Millisecond,
	}
}

func (c *Config) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("scalebench: Dir is required")
	case c.Jobs <= 0 || c.MinutelyJobs < 0 || c.MinutelyJobs > c.Jobs:
		return fmt.Errorf("scalebench: want 0 <= MinutelyJobs (%d) <= Jobs (%d), Jobs > 0", c.MinutelyJobs, c.Jobs)
	case c.Warmup < 0 || c.Window <= 0 || c.Steady < c.Window:
		return fmt.Errorf("scalebench: want Warmup >= 0, Window > 0, Steady >= Window (%v, %v, %v)", c.Warmup, c.Window, c.Steady)
	case c.DispatchLatency < 0:
		return fmt.Errorf("scalebench: DispatchLatency %v is negative", c.DispatchLatency)
	}
	if tmpfs, err := isTmpfs(c.Dir); err != nil {
		return fmt.Errorf("scalebench: %w", err)
	} else if tmpfs {
		return fmt.Errorf("scalebench: %s is on a tmpfs, where fsync costs nothing", c.Dir)
	}
	return nil
}

// Result holds every figure a run measured.
type Result struct {
	Config Config

	// Building the state with the state's API and seeding the stores.
	Build struct {
		State         time.Duration // Jobs PutJobs through state.ApplyCommand
		Encode        time.Duration // its snapshot
		SnapshotBytes int           // as stored, with the node's 16-byte hash header
		Seed          time.Duration // written into the three stores, synced
	}
	// Start: the three replicas opened from their disks at once (each a
	// snapshot of Jobs jobs), then until one's launcher leads.
	Start struct {
		Open        [replicas]openTimes
		ToLaunching time.Duration // from the end of the opens
	}
	Leader paxos.ReplicaID // the launching replica when the steady state began
	// Events are the changes of leadership seen from the cluster's start
	// to the end of the run (polled every few milliseconds).
	Events []Event
	Steady Steady
	Memory Memory
	Snap   Snapshot
	// Restart is a follower stopped and started again from its disk.
	Restart Restart
	// Rebuild is a follower that lost its disk and rejoined from its
	// peers: the leader streamed it the whole snapshot.
	Rebuild Rebuild
}

// Window is one sampling window of the steady state.
type Window struct {
	Start, Wall time.Duration // from the steady state's start; its length
	// CPU time in the window by whose goroutines (from the profile's
	// replica label): each replica's loop and writer goroutines, and the
	// unlabelled rest (the runtime's GC workers, Pebble's background work,
	// the fake Nomad's timers, the harness).
	Replica    [replicas + 1]time.Duration // by ID
	Unlabelled time.Duration
	// Process is the process's CPU time in the window (getrusage), a
	// check on the profile's total.
	Process time.Duration
	// Launches is how many LaunchFinished the leader applied in the window.
	Launches int64
	// Leader is the launching replica at the window's end (None if none).
	Leader paxos.ReplicaID
	// HeapBytes and RSSBytes are read at the window's end, without a GC.
	HeapBytes, RSSBytes uint64
	// GC is the garbage collector's CPU in the window as the runtime
	// estimates it (runtime/metrics /cpu/classes/gc/total), GCAssist the
	// part of it done by the goroutines that allocate (so inside Replica's
	// figures too), and GCCycles the cycles that ended in the window. The
	// runtime folds a cycle's CPU in when the cycle ends.
	GC, GCAssist time.Duration
	GCCycles     uint64
}

// Steady is the steady state's figures.
type Steady struct {
	Windows []Window
	Wall    time.Duration
	// LeaderCores is the leader's loop and writer goroutines' CPU seconds
	// per wall second; FollowerCores the mean of the two followers';
	// UnlabelledCores the rest of the process; ProcessCores getrusage's.
	LeaderCores, FollowerCores, UnlabelledCores, ProcessCores float64
	// LeaderAttributedCores adds to LeaderCores the unlabelled CPU in the
	// leader's share of the labelled CPU: an upper estimate of what the
	// leader costs with its GC and Pebble background work.
	LeaderAttributedCores float64
	// LeaderMedianCores is the median window's leader CPU: the cost of the
	// launches between the GC cycles that the three replicas' heaps cause.
	LeaderMedianCores float64
	// GCCores and GCAssistCores are the windows' GC and GCAssist per wall
	// second; GCCycles the cycles during the steady state.
	GCCores, GCAssistCores float64
	GCCycles               uint64
	LaunchesPerMinute      float64
	// Lateness of the dispatch calls submitted in the window: Submit's
	// time minus the launch's scheduled time.
	Dispatches                            int
	LateP50, LateP99, LateMax             time.Duration
	LeaderChanges                         int
	MaxHeapBytes, MaxRSSBytes             uint64
	DispatchRepeats, OtherCalls           int // over the whole run
	LongestTurnLeader, LongestTurnFollows time.Duration
}

// Memory is measured after the steady state, with the launches running.
type Memory struct {
	// Baseline is the process before the state was built.
	BaselineHeap, BaselineRSS uint64
	// Heap is the live heap after two GCs and RSS the resident set after
	// the heap's free pages went back to the OS, with three replicas.
	Heap, RSS uint64
	// FollowerHeap and FollowerRSS are what stopping one follower and
	// closing its store gave back: one replica's own memory.
	FollowerHeap, FollowerRSS int64
}

// Snapshot is a snapshot the leader took during the flow.
type Snapshot struct {
	Index uint64
	Bytes int
	// Freeze is the time on the leader's loop (FreezeSnapshot);
	// ToDurable from the request until the store synced it (encoded and
	// written by the writer goroutine).
	Freeze, ToDurable time.Duration
	// StoreBytes is the leader's store folder on disk right after.
	StoreBytes int64
	// Jobs is how many jobs the snapshot holds, decoded as a check.
	Jobs int
	// LongestTurn is the leader's longest loop turn after it.
	LongestTurn time.Duration
}

// Restart is a follower started again from its disk.
type Restart struct {
	ID paxos.ReplicaID
	// SnapshotIndex and LogEntries are what its disk held: its snapshot's
	// index and the slots it had applied past it.
	SnapshotIndex, LogEntries uint64
	Open                      openTimes
	// CaughtUp is from the start of the open until it applied everything
	// the leader had chosen when it looked.
	CaughtUp time.Duration
	Jobs     int // its state's jobs once caught up, a check
}

// Rebuild is a follower whose disk was lost, started empty as a
// rebuilding learner and caught up from the leader's snapshot.
type Rebuild struct {
	ID paxos.ReplicaID
	// CaughtUp is from its start until it applied everything the leader
	// had chosen when it looked and voted again.
	CaughtUp time.Duration
	// LeaderChanges counts the times the launching replica lost that role
	// meanwhile (to another, or to none for a while); the leader should
	// keep its lease while it reads and streams its snapshot.
	LeaderChanges int
	// SlowTurns lists the loop turns of slowTurn or more, any replica's,
	// during the rebuild.
	SlowTurns []string
	Jobs      int // its state's jobs once caught up, a check
}

// Names: the minutely jobs first, then the yearly ones.
func jobName(i, minutely int) string {
	kind := "yearly"
	if i < minutely {
		kind = "minutely"
	}
	return fmt.Sprintf("team-%03d.%s-%07d", i%997, kind, i)
}

// Schedules of the two kinds (see Config.Jobs).
const (
	minutelySchedule = "? * * * * *"
	yearlySchedule   = "? ? ? ? *"
)

// buildState applies one PutJob per job (a payload and two meta entries,
// as the state benchmark's jobs), created at at.
func buildState(cfg Config, at time.Time) (*state.Machine, error) {
	m := state.New()
	for i := range cfg.Jobs {
		sched := yearlySchedule
		if i < cfg.MinutelyJobs {
			sched = minutelySchedule
		}
		err := m.ApplyCommand(uint64(i+1), state.PutJob{Name: jobName(i, cfg.MinutelyJobs), At: at, Spec: state.JobSpec{
			Schedule: sched, NomadJob: "batch-runner", Payload: []byte(`{"shard":` + strconv.Itoa(i) + `}`),
			Meta: map[string]string{"owner": "team-" + strconv.Itoa(i%997), "tier": "2"},
		}})
		if err != nil {
			return nil, fmt.Errorf("scalebench: job %d: %w", i, err)
		}
	}
	return m, nil
}

// seedStores writes snap into each replica's empty store, as
// internal/server.RestoreStore does for `paxcron operator snapshot restore`:
// the snapshot, and a promise at the state's term, so that the first
// leader's takeover is in a later one.
func seedStores(c *cluster, snap paxos.Snapshot, term state.Term) error {
	hs := paxos.HardState{Promised: paxos.Ballot{Round: term.Round, Replica: paxos.ReplicaID(term.Replica)}}
	for id := range paxos.ReplicaID(replicas) {
		dir := c.storeDir(id + 1)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		st, err := pebblestore.Open(dir, pebblestore.Options{FS: vfs.Default, Logger: quietLogger{}})
		if err != nil {
			return err
		}
		if err := errors.Join(st.Save(storage.Update{Snapshot: &snap, HardState: &hs}), st.Close()); err != nil {
			return err
		}
	}
	return nil
}

// Run runs the whole measurement (see the package comment).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Launcher.MemoryHorizon == 0 {
		cfg.Launcher.MemoryHorizon = 4 * time.Hour
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	res := &Result{Config: cfg}
	res.Memory.BaselineHeap, res.Memory.BaselineRSS = measureMemory()

	nomad := newFakeNomad(cfg.DispatchLatency)
	c := &cluster{dir: cfg.Dir}
	c.base = node.Config{
		Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}},
		Send:       c.send, TickInterval: 50 * time.Millisecond,
		Timing: paxos.DefaultTiming(), Limits: paxos.DefaultLimits(), Snapshots: replica.DefaultSnapshotPolicy(),
		OnSave: c.snaps.saved,
		Cron: &node.CronOptions{
			Launcher: cfg.Launcher, NewDispatcher: nomad.dispatcher, Applied: c.counts.applied,
		},
	}
	if err := seed(cfg, c, res, logf); err != nil {
		return nil, err
	}
	defer func() { _ = c.close() }()
	mon, err := startMonitor(c, cfg.StallTraceDir, logf)
	if err != nil {
		return nil, err
	}
	stopMonitor := sync.OnceFunc(func() { res.Events = mon.stop() })
	defer stopMonitor()
	if cfg.StartProfile != nil {
		if err := pprof.StartCPUProfile(cfg.StartProfile); err != nil {
			return nil, fmt.Errorf("scalebench: %w", err)
		}
	}
	leader, err := startCluster(ctx, c, res)
	if err == nil {
		logf("cluster started: opens %+v, a launcher leads (replica %d) %v later", res.Start.Open, leader, res.Start.ToLaunching.Round(time.Millisecond))
		err = sleep(ctx, cfg.Warmup)
	}
	if cfg.StartProfile != nil {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return nil, err
	}
	if err := measureSteady(ctx, c, cfg, nomad, res); err != nil {
		return nil, err
	}
	logf("steady state: leader %.3f cores (attributed %.3f), %.0f launches/min, lateness p50 %v p99 %v",
		res.Steady.LeaderCores, res.Steady.LeaderAttributedCores, res.Steady.LaunchesPerMinute, res.Steady.LateP50, res.Steady.LateP99)
	res.Memory.Heap, res.Memory.RSS = measureMemory()
	// The follower first: its memory is measured by removing it, and the
	// leader's snapshot would add the garbage of its encoding (and Pebble's
	// flush of it) to what the removal seems to free.
	if err := restartFollower(ctx, c, res); err != nil {
		return nil, err
	}
	logf("follower %d restarted: %+v", res.Restart.ID, res.Restart)
	if err := takeSnapshot(ctx, c, res); err != nil {
		return nil, err
	}
	logf("snapshot on the leader: %d bytes, freeze %v, durable after %v", res.Snap.Bytes, res.Snap.Freeze, res.Snap.ToDurable)
	if err := rebuildFollower(ctx, c, res); err != nil {
		return nil, err
	}
	logf("follower %d rebuilt from its peers: %+v", res.Rebuild.ID, res.Rebuild)
	if err := c.failed(); err != nil {
		return nil, err
	}
	stopMonitor()
	return res, c.close()
}

// seed builds the state, encodes it as the node's snapshot and writes it
// into the three stores, then lets the builder's memory go.
func seed(cfg Config, c *cluster, res *Result, logf func(string, ...any)) error {
	began := time.Now()
	m, err := buildState(cfg, began)
	if err != nil {
		return err
	}
	res.Build.State = time.Since(began)
	began = time.Now()
	body, err := m.Snapshot()
	if err != nil {
		return err
	}
	res.Build.Encode = time.Since(began)
	term, index := m.Term(), m.LastSlot()
	// The node's cron machine keeps its running hash before the state;
	// a fresh one's, as on every replica restored from the same file.
	header, err := (&hashsm.Machine{}).Snapshot()
	if err != nil {
		return err
	}
	data := append(header, body...)
	res.Build.SnapshotBytes = len(data)
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: index, Membership: c.base.Membership}, Data: data}
	began = time.Now()
	if err := seedStores(c, snap, term); err != nil {
		return err
	}
	res.Build.Seed = time.Since(began)
	logf("built %d jobs in %v, encoded %d bytes in %v, seeded 3 stores in %v",
		cfg.Jobs, res.Build.State.Round(time.Millisecond), len(data), res.Build.Encode.Round(time.Millisecond), res.Build.Seed.Round(time.Millisecond))
	return nil
}

// startCluster opens the three replicas at once, starts them, and waits
// for a launcher to lead.
func startCluster(ctx context.Context, c *cluster, res *Result) (paxos.ReplicaID, error) {
	times, err := c.openAll()
	res.Start.Open = times
	if err != nil {
		return paxos.None, err
	}
	began := time.Now()
	for id := range paxos.ReplicaID(replicas) {
		c.start(id + 1)
	}
	leader, err := waitLaunching(ctx, c)
	res.Start.ToLaunching = time.Since(began)
	return leader, err
}

// waitLaunching waits for a replica whose launcher leads.
func waitLaunching(ctx context.Context, c *cluster) (paxos.ReplicaID, error) {
	var id paxos.ReplicaID
	err := poll(ctx, func() (bool, error) {
		var ok bool
		id, ok = c.launching()
		return ok, c.failed()
	})
	return id, err
}

// poll checks cond every millisecond, far below what is measured.
func poll(ctx context.Context, cond func() (bool, error)) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// measureMemory returns the live heap after two GCs, and the resident set
// once the heap's free pages are back with the OS (debug.FreeOSMemory): the
// memory the process needs, not what the GC has not yet returned. An RSS
// that cannot be read is 0.
func measureMemory() (heap, rss uint64) {
	runtime.GC()
	debug.FreeOSMemory() // a GC too
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _ = residentBytes()
	return ms.HeapAlloc, rss
}

// measureSteady samples cfg.Steady in windows of cfg.Window: a CPU profile
// per window, split by the replicas' pprof labels (internal/node labels
// each replica's goroutines "replica"=<id>; its writer goroutine inherits
// the label), the leader's applied launches, and the dispatches' lateness.
func measureSteady(ctx context.Context, c *cluster, cfg Config, nomad *fakeNomad, res *Result) error {
	leader, err := waitLaunching(ctx, c)
	if err != nil {
		return err
	}
	res.Leader = leader
	s := &res.Steady
	began := time.Now()
	for time.Since(began) < cfg.Steady {
		w, prof, err := sampleWindow(ctx, c, leader, began, cfg.Window)
		if err != nil {
			return err
		}
		if cfg.WindowProfile != nil {
			cfg.WindowProfile(len(s.Windows), prof)
		}
		if w.Leader != leader {
			s.LeaderChanges++
		}
		s.Windows = append(s.Windows, w)
	}
	end := time.Now()
	s.Wall = end.Sub(began)
	summarizeSteady(s, leader)
	late := nomad.dispatchesBetween(began, end)
	s.Dispatches = len(late)
	s.LateP50, s.LateP99, s.LateMax = lateness(late)
	_, s.DispatchRepeats, s.OtherCalls = nomad.counts()
	for id := range paxos.ReplicaID(replicas) {
		turn := c.status(id + 1).LongestTurn
		if id+1 == leader {
			s.LongestTurnLeader = turn
		} else {
			s.LongestTurnFollows = max(s.LongestTurnFollows, turn)
		}
	}
	return c.failed()
}

func sampleWindow(ctx context.Context, c *cluster, leader paxos.ReplicaID, began time.Time, length time.Duration) (Window, []byte, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return Window{}, nil, fmt.Errorf("scalebench: %w (is -cpuprofile set?)", err)
	}
	start := time.Now()
	cpu0, err := processCPU()
	if err != nil {
		pprof.StopCPUProfile()
		return Window{}, nil, err
	}
	fin0 := c.counts.finished[leader].Load()
	gc0 := readGC()
	err = sleep(ctx, length)
	pprof.StopCPUProfile()
	gc1 := readGC()
	cpu1, cerr := processCPU()
	if err = errors.Join(err, cerr); err != nil {
		return Window{}, nil, err
	}
	w := Window{Start: start.Sub(began), Wall: time.Since(start), Process: cpu1 - cpu0,
		Launches: c.counts.finished[leader].Load() - fin0,
		GC:       gc1.total - gc0.total, GCAssist: gc1.assist - gc0.assist, GCCycles: gc1.cycles - gc0.cycles}
	w.Leader, _ = c.launching()
	lc, err := ParseLabelCPU(buf.Bytes(), "replica")
	if err != nil {
		return Window{}, nil, err
	}
	for v, d := range lc.ByValue {
		id, err := strconv.Atoi(v)
		if err != nil || id < 1 || id > replicas {
			return Window{}, nil, fmt.Errorf("scalebench: profile label replica=%q", v)
		}
		w.Replica[id] = d
	}
	w.Unlabelled = lc.Unlabelled
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.HeapBytes = ms.HeapAlloc
	w.RSSBytes, _ = residentBytes()
	return w, buf.Bytes(), nil
}

// gcCounters are the runtime's cumulative GC figures.
type gcCounters struct {
	total, assist time.Duration
	cycles        uint64
}

var gcSamples = []metrics.Sample{
	{Name: "/cpu/classes/gc/total:cpu-seconds"},
	{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"},
	{Name: "/gc/cycles/total:gc-cycles"},
}

func readGC() gcCounters {
	s := slices.Clone(gcSamples)
	metrics.Read(s)
	seconds := func(v metrics.Value) time.Duration {
		if v.Kind() != metrics.KindFloat64 {
			return 0
		}
		return time.Duration(v.Float64() * float64(time.Second))
	}
	var c gcCounters
	c.total, c.assist = seconds(s[0].Value), seconds(s[1].Value)
	if s[2].Value.Kind() == metrics.KindUint64 {
		c.cycles = s[2].Value.Uint64()
	}
	return c
}

// summarizeSteady sums the windows into the steady state's rates.
func summarizeSteady(s *Steady, leader paxos.ReplicaID) {
	var wall, lead, follow, unl, proc, gc, assist time.Duration
	var launches int64
	var leadRates []float64
	for _, w := range s.Windows {
		wall += w.Wall
		gc += w.GC
		assist += w.GCAssist
		s.GCCycles += w.GCCycles
		leadRates = append(leadRates, w.Replica[leader].Seconds()/w.Wall.Seconds())
		lead += w.Replica[leader]
		for id := range paxos.ReplicaID(replicas) {
			if id+1 != leader {
				follow += w.Replica[id+1]
			}
		}
		unl += w.Unlabelled
		proc += w.Process
		launches += w.Launches
		s.MaxHeapBytes = max(s.MaxHeapBytes, w.HeapBytes)
		s.MaxRSSBytes = max(s.MaxRSSBytes, w.RSSBytes)
	}
	if wall <= 0 {
		return
	}
	per := func(d time.Duration) float64 { return d.Seconds() / wall.Seconds() }
	s.LeaderCores = per(lead)
	s.FollowerCores = per(follow) / (replicas - 1)
	s.UnlabelledCores = per(unl)
	s.ProcessCores = per(proc)
	s.GCCores, s.GCAssistCores = per(gc), per(assist)
	slices.Sort(leadRates)
	s.LeaderMedianCores = leadRates[len(leadRates)/2]
	if len(leadRates)%2 == 0 {
		s.LeaderMedianCores = (leadRates[len(leadRates)/2-1] + s.LeaderMedianCores) / 2
	}
	if labelled := lead + follow; labelled > 0 {
		s.LeaderAttributedCores = s.LeaderCores + s.UnlabelledCores*lead.Seconds()/labelled.Seconds()
	}
	s.LaunchesPerMinute = float64(launches) / wall.Minutes()
}

// lateness returns the median, the 99th percentile (nearest rank) and the
// maximum of the calls' lateness; zeros if there are none.
func lateness(calls []dispatchCall) (p50, p99, maxLate time.Duration) {
	if len(calls) == 0 {
		return 0, 0, 0
	}
	l := make([]time.Duration, len(calls))
	for i, c := range calls {
		l[i] = c.late
	}
	slices.Sort(l)
	return percentile(l, 50), percentile(l, 99), l[len(l)-1]
}

// percentile is the nearest-rank percentile of sorted: the smallest value
// with at least p% of the values at or below it.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

// takeSnapshot has the leader snapshot now, during the flow, and follows it
// until durable.
func takeSnapshot(ctx context.Context, c *cluster, res *Result) error {
	leader, err := waitLaunching(ctx, c)
	if err != nil {
		return err
	}
	n := c.node(leader)
	var durable <-chan struct{}
	var index uint64
	var terr error
	began := time.Now()
	err = n.Call(ctx, func(r *replica.Replica) {
		index = r.Applied()
		durable = c.snaps.want(leader, index)
		freeze := time.Now()
		terr = r.TakeSnapshot()
		res.Snap.Freeze = time.Since(freeze)
	})
	if err = errors.Join(err, terr); err != nil {
		return fmt.Errorf("scalebench: snapshot on the leader: %w", err)
	}
	select {
	case <-durable:
	case <-ctx.Done():
		return ctx.Err()
	}
	res.Snap.ToDurable = time.Since(began)
	res.Snap.Index = index
	data := c.snaps.take()
	res.Snap.Bytes = len(data)
	if res.Snap.StoreBytes, err = dirBytes(c.storeDir(leader)); err != nil {
		return err
	}
	sum, err := node.DescribeSnapshot(data)
	if err != nil {
		return fmt.Errorf("scalebench: the leader's snapshot: %w", err)
	}
	res.Snap.Jobs = sum.Jobs
	res.Snap.LongestTurn = c.status(leader).LongestTurn
	return nil
}

// dirBytes sums the sizes of the files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			// Pebble deletes obsolete files as it goes.
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			} else if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// restartFollower measures one follower's memory by stopping it, then
// starts it again from its disk and waits until it has caught up.
func restartFollower(ctx context.Context, c *cluster, res *Result) error {
	leader, f, err := aFollower(ctx, c)
	if err != nil {
		return err
	}
	r := &res.Restart
	r.ID = f
	st := c.status(f)
	r.SnapshotIndex, r.LogEntries = st.SnapshotIndex, st.Applied-st.SnapshotIndex
	heap0, rss0 := measureMemory()
	if err := c.stop(f); err != nil {
		return err
	}
	heap1, rss1 := measureMemory()
	res.Memory.FollowerHeap = int64(heap0) - int64(heap1)
	res.Memory.FollowerRSS = int64(rss0) - int64(rss1)

	if res.Config.RestartProfile != nil {
		if err := pprof.StartCPUProfile(res.Config.RestartProfile); err != nil {
			return fmt.Errorf("scalebench: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	began := time.Now()
	if r.Open, err = c.open(f); err != nil {
		return err
	}
	c.start(f)
	err = poll(ctx, func() (bool, error) {
		chosen := c.status(leader).Chosen
		return chosen > 0 && c.status(f).Applied >= chosen, c.failed()
	})
	if err != nil {
		return err
	}
	r.CaughtUp = time.Since(began)
	if res.Config.RestartProfile != nil {
		pprof.StopCPUProfile() // a second stop does nothing
	}
	return c.node(f).Cron(ctx, func(l *launcher.Launcher) { r.Jobs = l.Machine().JobCount() })
}

// aFollower waits for a launching leader and names the replica after it.
func aFollower(ctx context.Context, c *cluster) (leader, follower paxos.ReplicaID, err error) {
	leader, err = waitLaunching(ctx, c)
	return leader, leader%replicas + 1, err
}

// rebuildFollower stops a follower, deletes its store, and starts it empty
// as a rebuilding learner (an operator replacing a lost disk): the leader
// has compacted its log past anything the learner holds, so it reads its
// snapshot and streams it.
func rebuildFollower(ctx context.Context, c *cluster, res *Result) error {
	leader, f, err := aFollower(ctx, c)
	if err != nil {
		return err
	}
	r := &res.Rebuild
	r.ID = f
	if err := c.stop(f); err != nil {
		return err
	}
	if err := os.RemoveAll(c.storeDir(f)); err != nil {
		return fmt.Errorf("scalebench: deleting replica %d's store: %w", f, err)
	}
	slowBefore := c.slow.count()
	began := time.Now()
	if _, err := c.openRebuilding(f); err != nil {
		return err
	}
	c.start(f)
	stop := make(chan struct{})
	changes := make(chan int, 1)
	go func() { changes <- countLeaderChanges(c, leader, stop) }()
	err = poll(ctx, func() (bool, error) {
		chosen := c.status(leader).Chosen
		st := c.status(f)
		return chosen > 0 && !st.Rebuilding && st.Applied >= chosen, c.failed()
	})
	close(stop)
	r.LeaderChanges = <-changes
	if err != nil {
		return err
	}
	r.CaughtUp = time.Since(began)
	r.SlowTurns = c.slow.since(slowBefore)
	return c.node(f).Cron(ctx, func(l *launcher.Launcher) { r.Jobs = l.Machine().JobCount() })
}

// countLeaderChanges counts, until stop closes, the times the launching
// replica lost that role, to another or to none, even if it took it back
// later (polled every 5 ms).
func countLeaderChanges(c *cluster, was paxos.ReplicaID, stop <-chan struct{}) int {
	changes := 0
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return changes
		case <-t.C:
			id, ok := c.launching()
			if !ok {
				id = paxos.None
			}
			if was != paxos.None && id != was {
				changes++
			}
			was = id
		}
	}
}

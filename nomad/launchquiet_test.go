package nomad_test

import (
	"os"
	"testing"
	"time"

	"paxcron/internal/diskload"
	"paxcron/internal/procfs"
)

// The launch benchmark's quiet guard. The machine is shared: a run is
// started only once the machine has been quiet for a while, and the CPU
// that processes other than this test and what it started (the Nomad
// agent, its executors and tasks) used during the run is recorded; a run
// in which others used more than quietOthersMaxCores is done again, a
// bounded number of times. Disk writes are watched the same way: others
// writing (a file copied, a build) slow the agent's Raft syncs without
// much CPU.

const (
	// quietBusyMaxCores: the machine counts as quiet when all its
	// processes together used at most this many cores over quietWindow.
	quietBusyMaxCores = 0.35
	quietWindow       = 2 * time.Second
	// quietWaitMax bounds the wait for quiet before a run; the run then
	// goes ahead, and the report says how busy the machine was.
	quietWaitMax = 90 * time.Second
	// quietOthersMaxCores: a run during which others used more than this
	// many cores on average is disturbed and done again.
	quietOthersMaxCores = 0.3
	// quietWriteMaxMBps: before a run, others must also have written at
	// most this many megabytes a second over quietWindow;
	// quietOthersMaxWriteMBps is the most they may write during a run.
	quietWriteMaxMBps       = 1.0
	quietOthersMaxWriteMBps = 2.0
	// quietRedosMax bounds the runs done again per measurement.
	quietRedosMax = 2
)

// cpuSample is the machine's and our process tree's CPU time at one
// instant, in clock ticks.
type cpuSample struct {
	at         time.Time
	busy, ours uint64
}

// takeCPUSample reads /proc/stat and the CPU times of this process and
// every descendant of it (with the reaped children's times, so that an
// exited executor's CPU stays counted).
func takeCPUSample() (cpuSample, error) {
	s := cpuSample{at: time.Now()}
	m, err := procfs.Host.CPU()
	if err != nil {
		return s, err
	}
	s.busy = m.Busy()
	s.ours, err = treeCPU(os.Getpid())
	return s, err
}

// treeCPU sums the CPU times of root and its descendants.
func treeCPU(root int) (uint64, error) {
	procs, err := procfs.Host.Procs()
	if err != nil {
		return 0, err
	}
	var sum uint64
	for pid, st := range procs {
		if procs.InTree(pid, root) {
			sum += st.TicksWithChildren()
		}
	}
	return sum, nil
}

// cores is the CPU used between a and b, in cores: by every process
// (all), and by processes outside our tree (others).
func cores(a, b cpuSample) (all, others float64) {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return 0, 0
	}
	busy := float64(b.busy - a.busy)
	ours := float64(b.ours) - float64(a.ours)
	all = busy / procfs.UserHZ / wall
	others = max(busy-ours, 0) / procfs.UserHZ / wall
	return all, others
}

// waitQuiet waits until the whole machine used at most quietBusyMaxCores
// and others wrote at most quietWriteMaxMBps over quietWindow, or
// quietWaitMax passed, and returns how busy the last window was and
// whether it was quiet.
func waitQuiet() (busyCores float64, quiet bool, err error) {
	deadline := time.Now().Add(quietWaitMax)
	for {
		a, err := takeCPUSample()
		if err != nil {
			return 0, false, err
		}
		da, err := diskload.Take(os.Getpid())
		if err != nil {
			return 0, false, err
		}
		time.Sleep(quietWindow)
		b, err := takeCPUSample()
		if err != nil {
			return 0, false, err
		}
		db, err := diskload.Take(os.Getpid())
		if err != nil {
			return 0, false, err
		}
		all, _ := cores(a, b)
		quiet := all <= quietBusyMaxCores && db.Since(da).OthersMBps() <= quietWriteMaxMBps
		if quiet || time.Now().After(deadline) {
			return all, quiet, nil
		}
	}
}

// guard is what the quiet guard recorded of one kept run.
type guard struct {
	// BusyBefore is the machine's load (cores) in the last window before
	// the run; QuietBefore whether that was under quietBusyMaxCores.
	BusyBefore  float64
	QuietBefore bool
	// Others is the CPU (cores, averaged over the run) of processes
	// outside the benchmark's tree, OthersWriteMBps what they wrote to
	// disk; Redos the runs done again before it.
	Others          float64
	OthersWriteMBps float64
	Redos           int
}

// guarded runs run after waiting for quiet, and again (at most
// quietRedosMax times) while others disturbed it; each run replaces what
// the last one measured. An error from run ends it at once.
func guarded(run func() error) (guard, error) {
	var g guard
	for {
		busy, quiet, err := waitQuiet()
		if err != nil {
			return g, err
		}
		g.BusyBefore, g.QuietBefore = busy, quiet
		a, err := takeCPUSample()
		if err != nil {
			return g, err
		}
		da, err := diskload.Take(os.Getpid())
		if err != nil {
			return g, err
		}
		runErr := run()
		b, err := takeCPUSample()
		if err != nil {
			return g, err
		}
		db, err := diskload.Take(os.Getpid())
		if err != nil {
			return g, err
		}
		_, g.Others = cores(a, b)
		g.OthersWriteMBps = db.Since(da).OthersMBps()
		if runErr != nil {
			return g, runErr
		}
		if (g.Others <= quietOthersMaxCores && g.OthersWriteMBps <= quietOthersMaxWriteMBps) || g.Redos == quietRedosMax {
			return g, nil
		}
		g.Redos++
	}
}

// TestQuietCores checks the guard's arithmetic: one second, 150 busy
// ticks of which 50 ours, is 1.5 cores busy and 1 core of others'; ours
// running ahead of the machine's count is clamped at none.
func TestQuietCores(t *testing.T) {
	a := cpuSample{at: time.Unix(100, 0), busy: 1000, ours: 200}
	b := cpuSample{at: time.Unix(101, 0), busy: 1150, ours: 250}
	if all, others := cores(a, b); all != 1.5 || others != 1 {
		t.Errorf("cores = %v, %v; want 1.5, 1", all, others)
	}
	b.ours = 1300
	if _, others := cores(a, b); others != 0 {
		t.Errorf("ours ahead: others %v, want 0", others)
	}
	if all, others := cores(a, a); all != 0 || others != 0 {
		t.Errorf("no time: %v, %v; want 0, 0", all, others)
	}
}

// TestQuietSampleCountsThisTree reads the machine's own /proc: the CPU
// this process burns shows in its tree's count (within 10 s, however
// busy the machine).
func TestQuietSampleCountsThisTree(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	a, err := takeCPUSample()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for deadline := time.Now().Add(10 * time.Second); ; {
		for i := range 1_000_000 {
			x ^= i
		}
		b, err := takeCPUSample()
		if err != nil {
			t.Fatal(err)
		}
		if b.busy < a.busy {
			t.Fatalf("the machine's busy ticks went from %d to %d", a.busy, b.busy)
		}
		if b.ours > a.ours {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ours stayed at %d ticks (x=%d)", a.ours, x)
		}
	}
}

package nomad_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"paxcron/internal/diskload"
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
	// clockTicksPerSecond is the kernel's USER_HZ, the unit of /proc's CPU
	// times; 100 on every Linux the benchmark runs on.
	clockTicksPerSecond = 100
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
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return s, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/stat: %w", err)
		}
		s.busy += n
	}
	s.ours = treeCPU(os.Getpid())
	return s, nil
}

// procStat is what the benchmark reads of /proc/<pid>/stat.
type procStat struct {
	ppid int
	cpu  uint64 // utime + stime + cutime + cstime
}

func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// The command name is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	if len(f) < 15 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	var cpu uint64
	for _, v := range f[11:15] {
		n, _ := strconv.ParseUint(v, 10, 64)
		cpu += n
	}
	return procStat{ppid: ppid, cpu: cpu}, true
}

// treeCPU sums the CPU times of root and its descendants.
func treeCPU(root int) uint64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	stats := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok {
			stats[pid] = st
		}
	}
	var sum uint64
	for pid, st := range stats {
		for p, hops := pid, 0; p > 1 && hops < 64; hops++ {
			if p == root {
				sum += st.cpu
				break
			}
			parent, ok := stats[p]
			if !ok {
				break
			}
			p = parent.ppid
		}
	}
	return sum
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
	all = busy / clockTicksPerSecond / wall
	others = max(busy-ours, 0) / clockTicksPerSecond / wall
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

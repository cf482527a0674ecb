package scalebench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkScaleCluster is issue 6's "Scale" on a replica: a three-replica
// cluster on Pebble holding a million jobs while 10,000 launches a minute
// flow (see the package comment and DefaultConfig). Run it once:
//
//	go test -run '^$' -bench BenchmarkScaleCluster -benchtime 1x -timeout 40m ./internal/scalebench
//
// Environment, for quick runs and for tools/bench/run:
//
//	PAXCRON_SCALE_JOBS      jobs (default 1,000,000; shared with cron/state's BenchmarkScale)
//	PAXCRON_SCALE_LAUNCHES  jobs due every minute (default 10,000)
//	PAXCRON_SCALE_WARMUP    warm-up before measuring (default 1m)
//	PAXCRON_SCALE_STEADY    steady state measured (default 2m30s)
//	PAXCRON_SCALE_OUT       folder to write scale.md and scale-cpu.png into
//	PAXCRON_SCALE_CPUPROFILE file to profile the start and the warm-up into;
//	                        each steady-state window's profile goes beside it
//	                        (<file>.window-NN)
//	PAXCRON_SCALE_RESTART_CPUPROFILE file to profile the follower's restart into
//	PAXCRON_SCALE_STALL_TRACES folder for execution traces of the seconds
//	                        before each stop-the-world of 200 ms or more
//	                        (Config.StallTraceDir)
//
// A quick run: PAXCRON_SCALE_JOBS=20000 PAXCRON_SCALE_WARMUP=3s PAXCRON_SCALE_STEADY=10s.
func BenchmarkScaleCluster(b *testing.B) {
	cfg := DefaultConfig(benchDir(b))
	envInt(b, "PAXCRON_SCALE_JOBS", &cfg.Jobs)
	envInt(b, "PAXCRON_SCALE_LAUNCHES", &cfg.MinutelyJobs)
	envDuration(b, "PAXCRON_SCALE_WARMUP", &cfg.Warmup)
	envDuration(b, "PAXCRON_SCALE_STEADY", &cfg.Steady)
	cfg.MinutelyJobs = min(cfg.MinutelyJobs, cfg.Jobs)
	cfg.Window = min(cfg.Window, cfg.Steady)
	cfg.Logf = b.Logf
	if path := os.Getenv("PAXCRON_SCALE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		cfg.StartProfile = f
		cfg.WindowProfile = func(i int, prof []byte) {
			if err := os.WriteFile(fmt.Sprintf("%s.window-%02d", path, i), prof, 0o644); err != nil {
				b.Error(err)
			}
		}
	}
	if path := os.Getenv("PAXCRON_SCALE_RESTART_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		cfg.RestartProfile = f
	}
	cfg.StallTraceDir = os.Getenv("PAXCRON_SCALE_STALL_TRACES")
	loadBefore := loadAverage()
	var res *Result
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
		var err error
		res, err = Run(ctx, cfg)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		cfg.Dir = benchDir(b) // a further run starts from empty stores
	}
	s := res.Steady
	b.ReportMetric(s.LeaderCores, "leader-cores")
	b.ReportMetric(s.LeaderAttributedCores, "leader-attributed-cores")
	b.ReportMetric(s.LaunchesPerMinute, "launches/min")
	b.ReportMetric(ms(s.LateP50), "late-p50-ms")
	b.ReportMetric(ms(s.LateP99), "late-p99-ms")
	b.ReportMetric(float64(res.Memory.FollowerHeap)/mib, "follower-heap-MiB")
	b.ReportMetric(float64(res.Memory.FollowerRSS)/mib, "follower-rss-MiB")
	b.ReportMetric(float64(res.Snap.Bytes)/mib, "snapshot-MiB")
	b.ReportMetric(res.Snap.ToDurable.Seconds(), "snapshot-s")
	b.ReportMetric(res.Restart.CaughtUp.Seconds(), "restart-s")
	out := os.Getenv("PAXCRON_SCALE_OUT")
	if out == "" {
		return
	}
	meta := ReportMeta{
		Command:    reportCommand(),
		Machine:    machine(),
		Commit:     commit(),
		GoVersion:  runtime.Version(),
		Date:       time.Now(),
		LoadBefore: loadBefore, LoadAfter: loadAverage(),
	}
	if err := os.WriteFile(filepath.Join(out, "scale.md"), []byte(Markdown(res, meta)), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := Chart(res).SavePNG(filepath.Join(out, "scale-cpu.png"), 0, 0); err != nil {
		b.Fatal(err)
	}
}

func envInt(b *testing.B, name string, v *int) {
	s := os.Getenv(name)
	if s == "" {
		return
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a number", name, s)
	}
	*v = n
}

func envDuration(b *testing.B, name string, v *time.Duration) {
	s := os.Getenv(name)
	if s == "" {
		return
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		b.Fatalf("%s=%q: want a duration such as 2m30s", name, s)
	}
	*v = d
}

// reportCommand is the command line the report shows: the environment that
// changed the run, then the benchmark.
func reportCommand() string {
	var env []string
	for _, name := range []string{"PAXCRON_SCALE_JOBS", "PAXCRON_SCALE_LAUNCHES", "PAXCRON_SCALE_WARMUP", "PAXCRON_SCALE_STEADY"} {
		if v := os.Getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	cmd := "go test -run '^$' -bench BenchmarkScaleCluster -benchtime 1x -timeout 40m ./internal/scalebench"
	if len(env) > 0 {
		cmd = strings.Join(env, " ") + " " + cmd
	}
	return cmd
}

// benchDir is a fresh folder on the disk: the test's temporary folder unless
// it is a tmpfs, else one under the repository's .cache.
func benchDir(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if tmpfs, err := isTmpfs(dir); err != nil {
		b.Fatal(err)
	} else if !tmpfs {
		return dir
	}
	base, err := filepath.Abs(filepath.Join("..", "..", ".cache"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		b.Fatal(err)
	}
	dir, err = os.MkdirTemp(base, "scalebench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// machine describes the CPU and memory, as tools/bench/run's header does.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %d CPUs%s", model, runtime.NumCPU(), mem)
}

// commit is the checkout's short commit, marked when files differ from it.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := string(bytes.TrimSpace(out))
	if err := exec.Command("git", "diff", "--quiet", "HEAD", "--", ".").Run(); err != nil {
		c += " (this package modified)"
	}
	return c
}

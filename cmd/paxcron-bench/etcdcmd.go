package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const etcdUsage = `Usage: paxcron-bench etcd [flags]

Replicated writes, paxcron against etcd (issue 6): durable writes per
second, p50/p99 latency and CPU per write of
  etcd         3 members on loopback, each its own data folder, default
               fsync; one Go client spread over all members
  paxcron-api  3 'paxcron server' processes, each its own Pebble store;
               job writes through the HTTP API (see -api-target)
  paxcron-log  3 replicas in this process (internal/localcluster); 256-byte
               commands through the replicated log directly
at each concurrency of -clients, all data on the same disk. Each of -reps
repetitions runs every concurrency in turn, and at each the systems one
after the other, each on a fresh cluster; the order of the systems turns
by one each repetition, so that each goes first in turn. Before a run it waits until the
machine is quiet; a run that others' CPU disturbed is redone.

Writes OUT/etcd.md (tables: medians, ranges, ratios to etcd, CPU/write,
disturbed runs), OUT/etcd.json (every run), OUT/etcd-throughput.png and
OUT/etcd-p99.png. Run it under 'flock /tmp/paxcron-measure.lock' beside
other measurements.

Flags:
`

func runEtcdSuite(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseEtcdFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "paxcron-bench etcd: %v\n", err)
		return 2
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stdout, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := etcdSuite(ctx, cfg, args, logf); err != nil {
		fmt.Fprintf(stderr, "paxcron-bench etcd: %v\n", err)
		return 1
	}
	return 0
}

// parseEtcdFlags parses and checks the suite's flags.
func parseEtcdFlags(args []string, stderr io.Writer) (etcdConfig, error) {
	fs := flag.NewFlagSet("paxcron-bench etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, etcdUsage)
		fs.PrintDefaults()
	}
	var cfg etcdConfig
	var clients, systems string
	var etcdInstall string
	fs.IntVar(&cfg.Reps, "reps", 5, "repetitions; medians and ranges are taken over them (the issue asks at least 5)")
	fs.StringVar(&clients, "clients", "1,8,64,512", "comma-separated concurrencies: clients writing at once, each in a closed loop")
	fs.StringVar(&systems, "systems", strings.Join(allSystems, ","), "comma-separated systems to run, in this order within a concurrency at the first repetition (it turns by one each repetition): "+strings.Join(allSystems, ", "))
	fs.DurationVar(&cfg.Window, "duration", 10*time.Second, "measured time of each run")
	fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "load before each run's measured time, not counted")
	fs.StringVar(&cfg.APITarget, "api-target", targetClient, "where paxcron-api's clients send writes: 'client' (paxcron's Go client given all three replicas, as etcd's client is given all three members: it calls the leader once it learns which one leads), 'spread' (round robin over the replicas, as etcd's client does; followers forward to the leader) or 'leader' (straight to the leader)")
	fs.BoolVar(&cfg.APIStream, "api-stream", true, "paxcron-api's clients call over the API stream: one connection per replica shared by every client, as etcd's gRPC client keeps one per member (false: a request per write, a connection per client and replica)")
	fs.StringVar(&cfg.OutDir, "out", "docs/bench", "folder for etcd.md, etcd.json and the PNG charts")
	fs.StringVar(&cfg.DataDir, "data-dir", os.TempDir(), "folder on the disk under test for every system's data (a fresh subfolder per run, removed after it); a tmpfs is refused")
	fs.StringVar(&cfg.EtcdBin, "etcd-bin", "", "the etcd server binary (default: etcd on PATH, installed by -etcd-install if missing)")
	fs.StringVar(&etcdInstall, "etcd-install", "tools/etcd/install", "script run when etcd is not on PATH; it installs Debian's etcd-server and prints etcd's path ('' to never install)")
	fs.StringVar(&cfg.PaxcronBin, "paxcron-bin", "", "the paxcron binary for paxcron-api (default: built from ./cmd/paxcron with 'go build' into the data folder)")
	fs.StringVar(&cfg.Commit, "commit", "", "the commit measured, for the report (default: git rev-parse --short HEAD, '(modified)' if the tree differs)")
	fs.Float64Var(&cfg.QuietCores, "quiet-cores", 0.10, "before each run, wait until processes other than ours use at most this many cores over one second")
	fs.DurationVar(&cfg.QuietWait, "quiet-wait", 2*time.Minute, "longest wait for a quiet machine before a run (the run then goes ahead, marked disturbed)")
	fs.Float64Var(&cfg.MaxOthersCores, "max-others-cores", 0.20, "a run during which other processes used more cores than this (on average) is disturbed and redone")
	fs.Float64Var(&cfg.QuietWriteMBps, "quiet-write-mbps", 1, "before each run, wait also until processes other than ours write at most this many megabytes a second to disk")
	fs.Float64Var(&cfg.MaxOthersWriteMBps, "max-others-write-mbps", 2, "a run during which other processes wrote more than this to disk (megabytes a second, on average) is disturbed and redone")
	fs.IntVar(&cfg.Retries, "retries", 2, "times a disturbed run is redone before it is kept, marked disturbed")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.Clients, err = parseInts(clients); err != nil {
		return cfg, fmt.Errorf("-clients: %w", err)
	}
	cfg.Systems = strings.Split(systems, ",")
	for _, s := range cfg.Systems {
		if !slices.Contains(allSystems, s) {
			return cfg, fmt.Errorf("-systems: unknown system %q (want some of %s)", s, strings.Join(allSystems, ", "))
		}
	}
	switch {
	case cfg.Reps < 1:
		return cfg, fmt.Errorf("-reps %d: want at least 1", cfg.Reps)
	case cfg.Window <= 0 || cfg.Warmup < 0:
		return cfg, errors.New("-duration must be positive and -warmup not negative")
	case cfg.APITarget != targetClient && cfg.APITarget != targetSpread && cfg.APITarget != targetLeader:
		return cfg, fmt.Errorf("-api-target %q: want %s, %s or %s", cfg.APITarget, targetClient, targetSpread, targetLeader)
	case cfg.QuietCores < 0 || cfg.MaxOthersCores < 0 || cfg.Retries < 0 || cfg.QuietWriteMBps < 0 || cfg.MaxOthersWriteMBps < 0:
		return cfg, errors.New("-quiet-cores, -max-others-cores, -quiet-write-mbps, -max-others-write-mbps and -retries must not be negative")
	}
	if slices.Contains(cfg.Systems, sysEtcd) {
		if cfg.EtcdBin, err = findEtcd(cfg.EtcdBin, etcdInstall, func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// etcdSuite runs the suite and writes its report.
func etcdSuite(ctx context.Context, cfg etcdConfig, args []string, logf func(string, ...any)) error {
	base, err := dataBase(cfg.DataDir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	if slices.Contains(cfg.Systems, sysPaxcronAPI) && cfg.PaxcronBin == "" {
		cfg.PaxcronBin = filepath.Join(base, "paxcron")
		logf("building paxcron into %s", cfg.PaxcronBin)
		if out, err := exec.Command("go", "build", "-o", cfg.PaxcronBin, "paxcron/cmd/paxcron").CombinedOutput(); err != nil {
			return fmt.Errorf("go build paxcron/cmd/paxcron (run from the repository): %v\n%s", err, out)
		}
	}
	meta := reportMeta{
		Command: "paxcron-bench etcd " + strings.Join(args, " "),
		Machine: machine(), Kernel: readTrim("/proc/sys/kernel/osrelease"), Disk: disk(base),
		Commit: cmp.Or(cfg.Commit, commit(cfg.OutDir)), GoVersion: runtime.Version(), EtcdVersion: "not run",
		Started: time.Now().UTC(), LoadBefore: loadavg(), Config: cfg,
	}
	if cfg.EtcdBin != "" {
		meta.EtcdVersion = etcdVersion(cfg.EtcdBin)
	}
	logf("%s; %s; commit %s; data under %s", meta.Machine, meta.EtcdVersion, meta.Commit, base)
	s := &suite{
		cfg: cfg, log: logf, newSystem: newSystemFunc(cfg),
		guard: newGuard(cfg.QuietCores, cfg.QuietWriteMBps, cfg.QuietWait, logf),
	}
	runErr := s.run(ctx, base)
	meta.Ended, meta.LoadAfter = time.Now().UTC(), loadavg()
	if len(s.runs) == 0 {
		return runErr
	}
	if err := writeReport(cfg.OutDir, meta, s.runs); err != nil {
		return errors.Join(runErr, err)
	}
	logf("report in %s", filepath.Join(cfg.OutDir, "etcd.md"))
	return runErr
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// machine names the CPU, the CPU count and the memory.
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
			mem = fmt.Sprintf(", %d GiB", (kb+1<<19)>>20)
		}
	}
	return fmt.Sprintf("%s, %d CPUs%s", model, runtime.NumCPU(), mem)
}

// disk names the file system dir is on.
func disk(dir string) string {
	out, err := exec.Command("findmnt", "-n", "-o", "SOURCE,FSTYPE", "--target", dir).Output()
	if err != nil {
		return dir
	}
	return fmt.Sprintf("%s (%s)", strings.Join(strings.Fields(string(out)), " "), dir)
}

// commit is HEAD, marked modified when a tracked file outside the report
// folder out differs from it (the suite's own earlier reports do not
// count: tools/bench/run writes its log there before this runs).
func commit(out string) string {
	head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(head))
	args := []string{"diff", "--quiet", "HEAD", "--", "."}
	if rel := filepath.Clean(out); !filepath.IsAbs(rel) && !strings.HasPrefix(rel, "..") {
		args = append(args, ":(exclude)"+rel)
	}
	if exec.Command("git", args...).Run() != nil {
		c += " (modified)"
	}
	return c
}

func loadavg() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// etcdConfig is the etcd suite's flags.
type etcdConfig struct {
	Reps           int
	Clients        []int
	Systems        []string
	Warmup, Window time.Duration
	APITarget      string
	APIStream      bool
	OutDir         string
	DataDir        string
	EtcdBin        string
	PaxcronBin     string
	Commit         string
	// QuietCores, QuietWait: the guard before each run; MaxOthersCores,
	// Retries: a run in which others used more is redone, at most
	// Retries times, then kept and marked disturbed.
	QuietCores     float64
	QuietWait      time.Duration
	MaxOthersCores float64
	Retries        int
	// QuietWriteMBps, MaxOthersWriteMBps: the same for what others
	// write to disk (megabytes a second; diskload). Zero in the runs of
	// reports from before the guard read the disk.
	QuietWriteMBps     float64
	MaxOthersWriteMBps float64
}

// runRecord is one run of one system at one concurrency: what the JSON
// keeps of it, every attempt included.
type runRecord struct {
	Rep     int    `json:"rep"`
	Clients int    `json:"clients"`
	System  string `json:"system"`
	Attempt int    `json:"attempt"`
	// Kept: this attempt is the run's figure (the last attempt, or the
	// first undisturbed one).
	Kept      bool      `json:"kept"`
	StartedAt time.Time `json:"started_at"`

	Writes     int    `json:"writes"`
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// LogsKept is where the servers' logs of a run with errors were
	// copied (its data folder is removed).
	LogsKept     string  `json:"logs_kept,omitempty"`
	WindowSec    float64 `json:"window_s"`
	WritesPerSec float64 `json:"writes_per_s"`
	P50Ms        float64 `json:"p50_ms"`
	P90Ms        float64 `json:"p90_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`

	// InProcess: the replicas ran in this process, so ServerCPUSec is
	// the whole process (replicas and clients) and ClientCPUSec is 0.
	InProcess    bool    `json:"in_process"`
	ServerCPUSec float64 `json:"server_cpu_s"`
	ClientCPUSec float64 `json:"client_cpu_s"`

	// OthersCores, KernelCores, InterruptCores, StealCores: the guard's
	// view of the window (cpuDelta).
	OthersCores    float64 `json:"others_cores"`
	KernelCores    float64 `json:"kernel_thread_cores"`
	InterruptCores float64 `json:"interrupt_cores"`
	StealCores     float64 `json:"steal_cores"`
	// OthersWriteMBps is what processes other than ours wrote to disk
	// during the window, DeviceWriteMBps what the disks wrote, ours and
	// theirs (nil in runs from before the guard read the disk).
	OthersWriteMBps *float64 `json:"others_write_mbps,omitempty"`
	DeviceWriteMBps *float64 `json:"device_write_mbps,omitempty"`
	// QuietBefore: the machine was quiet before the run (after
	// QuietWaitSec); OthersBeforeCores is the last check's figure.
	QuietBefore       bool    `json:"quiet_before"`
	QuietWaitSec      float64 `json:"quiet_wait_s"`
	OthersBeforeCores float64 `json:"others_before_cores"`
	// Disturbed: others used more than the limit during the window, or
	// the machine never got quiet before it.
	Disturbed bool `json:"disturbed"`
}

// serverCPUPerWrite and clientCPUPerWrite are CPU microseconds per
// acknowledged write.
func (r runRecord) serverCPUPerWrite() float64 { return perWriteUs(r.ServerCPUSec, r.Writes) }
func (r runRecord) clientCPUPerWrite() float64 { return perWriteUs(r.ClientCPUSec, r.Writes) }

// machineCPUPerWrite is the whole machine's CPU per write: the servers'
// and the client's, and what no process is charged with, the kernel
// threads' (the file system's journal, the disk's completions) and
// interrupt time (a loopback packet's receive runs in softirq), plus
// what the guard counted for other processes (little: a run over its
// limit is redone). A system that crosses more sockets or syncs more
// pays there, out of its processes' sight.
func (r runRecord) machineCPUPerWrite() float64 {
	unowned := (r.OthersCores + r.KernelCores + r.InterruptCores) * r.WindowSec
	return perWriteUs(r.ServerCPUSec+r.ClientCPUSec+unowned, r.Writes)
}

func perWriteUs(sec float64, writes int) float64 {
	if writes == 0 {
		return 0
	}
	return sec * 1e6 / float64(writes)
}

// suite runs the etcd comparison.
type suite struct {
	cfg   etcdConfig
	guard *guard
	log   func(string, ...any)
	// newSystem makes a fresh system for one run.
	newSystem func(name string, clients int) (system, error)
	runs      []runRecord
}

// run runs every repetition: within one, each concurrency in turn, and
// at each the systems one after the other, so that the systems meet the
// same machine at nearly the same time. The order turns by one system
// each repetition: otherwise the first always ran right after the last
// one's heaviest load (the replicated log's, its folder then deleted, at
// the concurrency before), and the last never did.
func (s *suite) run(ctx context.Context, base string) error {
	for rep := 1; rep <= s.cfg.Reps; rep++ {
		for _, clients := range s.cfg.Clients {
			for _, name := range systemsInTurn(s.cfg.Systems, rep) {
				if err := s.runGuarded(ctx, base, rep, clients, name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runGuarded runs one system at one concurrency, redoing a disturbed run
// up to Retries times.
func (s *suite) runGuarded(ctx context.Context, base string, rep, clients int, name string) error {
	for attempt := 1; ; attempt++ {
		rec, err := s.runOnce(ctx, base, rep, clients, name)
		if err != nil {
			return fmt.Errorf("rep %d, %d clients, %s: %w", rep, clients, name, err)
		}
		rec.Attempt = attempt
		last := !rec.Disturbed || attempt > s.cfg.Retries
		rec.Kept = last
		s.runs = append(s.runs, rec)
		s.log("rep %d, %3d clients, %-11s: %8.0f writes/s, p50 %6.2f ms, p99 %7.2f ms, CPU/write server %5.0f µs client %4.0f µs, others %.2f cores%s",
			rep, clients, name, rec.WritesPerSec, rec.P50Ms, rec.P99Ms, rec.serverCPUPerWrite(), rec.clientCPUPerWrite(), rec.OthersCores, disturbedNote(rec))
		if last {
			return nil
		}
	}
}

func disturbedNote(r runRecord) string {
	switch {
	case r.Disturbed && r.Kept:
		return " DISTURBED (kept: retries used up)"
	case r.Disturbed:
		return " DISTURBED: redoing"
	case r.Errors > 0 && r.LogsKept != "":
		return fmt.Sprintf(" (%d errors: %s; the servers' logs are in %s)", r.Errors, r.FirstError, r.LogsKept)
	case r.Errors > 0:
		return fmt.Sprintf(" (%d errors: %s)", r.Errors, r.FirstError)
	}
	return ""
}

// runOnce starts a fresh cluster in a fresh folder, waits for a quiet
// machine, runs the load and stops the cluster.
func (s *suite) runOnce(ctx context.Context, base string, rep, clients int, name string) (runRecord, error) {
	rec := runRecord{Rep: rep, Clients: clients, System: name, StartedAt: time.Now().UTC()}
	sys, err := s.newSystem(name, clients)
	if err != nil {
		return rec, err
	}
	dir, err := os.MkdirTemp(base, fmt.Sprintf("%s-c%d-r%d-", name, clients, rep))
	if err != nil {
		return rec, err
	}
	defer os.RemoveAll(dir)
	if err := sys.start(ctx, dir); err != nil {
		return rec, err
	}
	defer sys.stop()
	pids := sys.serverPIDs()
	q, err := s.guard.waitQuiet(ctx, pids)
	if err != nil {
		return rec, err
	}
	rec.QuietBefore, rec.QuietWaitSec, rec.OthersBeforeCores = q.Quiet, q.Waited.Seconds(), q.Others
	res, err := runLoad(ctx, loadSpec{
		Clients: clients, Warmup: s.cfg.Warmup, Window: s.cfg.Window, NCPU: s.guard.NCPU,
		Sample: func() (cpuSample, error) { return s.guard.sample(pids) },
	}, sys.write)
	if err != nil {
		return rec, err
	}
	if err := sys.stop(); err != nil {
		s.log("stopping %s: %v", name, err)
	}
	fillRecord(&rec, res, pids == nil)
	if rec.Errors > 0 {
		if kept, err := keepLogs(dir); err != nil {
			s.log("keeping the logs of %s: %v", name, err)
		} else {
			rec.LogsKept = kept
		}
	}
	rec.Disturbed = !q.Quiet || rec.OthersCores > s.cfg.MaxOthersCores || *rec.OthersWriteMBps > s.cfg.MaxOthersWriteMBps
	return rec, nil
}

// fillRecord copies a load's figures into rec.
func fillRecord(rec *runRecord, res loadResult, inProcess bool) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rec.Writes, rec.Errors = res.Writes, res.Errors
	if res.FirstErr != nil {
		rec.FirstError = res.FirstErr.Error()
	}
	rec.WindowSec = res.Window.Seconds()
	if rec.WindowSec > 0 {
		rec.WritesPerSec = float64(res.Writes) / rec.WindowSec
	}
	rec.P50Ms, rec.P90Ms = ms(percentile(res.Latencies, 0.50)), ms(percentile(res.Latencies, 0.90))
	rec.P99Ms, rec.MaxMs = ms(percentile(res.Latencies, 0.99)), ms(percentile(res.Latencies, 1))
	rec.InProcess = inProcess
	if inProcess {
		rec.ServerCPUSec = res.CPU.SelfSeconds
	} else {
		rec.ServerCPUSec, rec.ClientCPUSec = res.CPU.ServerSeconds, res.CPU.SelfSeconds
	}
	rec.OthersCores, rec.InterruptCores, rec.StealCores = res.CPU.Others, res.CPU.Interrupts, res.CPU.Steal
	rec.KernelCores = res.CPU.Kernel
	rec.OthersWriteMBps, rec.DeviceWriteMBps = &res.CPU.OthersWriteMBps, &res.CPU.DeviceWriteMBps
}

// newSystemFunc returns the constructor of the systems the suite runs.
func newSystemFunc(cfg etcdConfig) func(string, int) (system, error) {
	return func(name string, clients int) (system, error) {
		switch name {
		case sysEtcd:
			return newEtcd(cfg.EtcdBin), nil
		case sysPaxcronAPI:
			return newPaxcronAPI(cfg.PaxcronBin, cfg.APITarget, cfg.APIStream, clients)
		case sysPaxcronLog:
			return newPaxcronLog(), nil
		}
		panic("paxcron-bench: unknown system " + name) // flags were checked
	}
}

// dataBase makes the folder the runs' data folders go into, under dir,
// and refuses a tmpfs, where a sync costs nothing.
func dataBase(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	base, err := os.MkdirTemp(dir, "paxcron-bench-etcd-")
	if err != nil {
		return "", err
	}
	if tmpfs, err := isTmpfs(base); err != nil || tmpfs {
		os.RemoveAll(base)
		if err == nil {
			err = fmt.Errorf("paxcron-bench: %s is on a tmpfs, where fsync costs nothing: pass -data-dir on a disk", dir)
		}
		return "", err
	}
	return filepath.Abs(base)
}

// keepLogs copies the *.log files of a run's data folder into a new
// folder under the system's temporary directory, which outlives the run,
// and returns it ("" when the run wrote no log).
func keepLogs(dir string) (string, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		return "", err
	}
	kept, err := os.MkdirTemp("", "paxcron-bench-logs-"+filepath.Base(dir))
	if err != nil {
		return "", err
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(kept, filepath.Base(l)), b, 0o644); err != nil {
			return "", err
		}
	}
	return kept, nil
}

// systemsInTurn is systems turned left by one for each repetition after
// the first.
func systemsInTurn(systems []string, rep int) []string {
	if len(systems) == 0 {
		return nil
	}
	k := (rep - 1) % len(systems)
	return append(slices.Clone(systems[k:]), systems[:k]...)
}

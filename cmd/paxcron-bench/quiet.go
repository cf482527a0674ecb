package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"paxcron/internal/diskload"
	"paxcron/internal/procfs"
)

// guard keeps the runs apart from other load on the machine: before a
// run it waits (bounded) until processes other than ours are quiet, and
// it measures what they used during the run, so that a disturbed run can
// be redone.
type guard struct {
	// NCPU is the machine's CPU count.
	NCPU int
	// QuietCores is the most CPU (in cores) others may use over one
	// Window for the machine to count as quiet.
	QuietCores float64
	// QuietWriteMBps is the most others may write to disk over one
	// Window, in megabytes a second.
	QuietWriteMBps float64
	// Window is how long one quiet check measures.
	Window time.Duration
	// MaxWait bounds the wait for quiet before a run.
	MaxWait time.Duration
	// Log receives a line when the guard waits.
	Log func(format string, args ...any)
}

// newGuard returns a guard for this machine.
func newGuard(quietCores, quietWriteMBps float64, maxWait time.Duration, log func(string, ...any)) *guard {
	return &guard{NCPU: runtime.NumCPU(), QuietCores: quietCores, QuietWriteMBps: quietWriteMBps, Window: time.Second, MaxWait: maxWait, Log: log}
}

// sample reads the machine's CPU, our processes' own (the server
// processes given and this process) and the kernel threads', and the
// disk writes.
func (g *guard) sample(servers []int) (cpuSample, error) {
	var s cpuSample
	m, err := procfs.Host.CPU()
	if err != nil {
		return s, fmt.Errorf("paxcron-bench: %w", err)
	}
	s.Machine = m
	for _, pid := range servers {
		st, err := procfs.Host.Stat(pid)
		if err != nil {
			return s, fmt.Errorf("paxcron-bench: server process %d: %w", pid, err)
		}
		s.Servers += st.Ticks()
	}
	self, err := procfs.Host.Stat(os.Getpid())
	if err != nil {
		return s, fmt.Errorf("paxcron-bench: %w", err)
	}
	s.Self = self.Ticks()
	if s.Kernel, err = readKernelThreadTicks(); err != nil {
		return s, err
	}
	if s.Disk, err = diskload.Take(os.Getpid()); err != nil {
		return s, err
	}
	return s, nil
}

// quietResult is what waitQuiet saw.
type quietResult struct {
	// Waited is how long it waited.
	Waited time.Duration
	// Others is what others used in the last window, in cores, and
	// OthersWriteMBps what they wrote to disk.
	Others          float64
	OthersWriteMBps float64
	// Quiet is false when MaxWait passed without a quiet window.
	Quiet bool
}

// waitQuiet measures windows of g.Window until others used at most
// g.QuietCores and wrote at most g.QuietWriteMBps in one, or g.MaxWait
// passes.
func (g *guard) waitQuiet(ctx context.Context, servers []int) (quietResult, error) {
	began := time.Now()
	var r quietResult
	for {
		a, err := g.sample(servers)
		if err != nil {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(g.Window):
		}
		b, err := g.sample(servers)
		if err != nil {
			return r, err
		}
		d := deltaOf(a, b, g.NCPU)
		r.Others, r.OthersWriteMBps = d.Others, d.OthersWriteMBps
		r.Waited = time.Since(began)
		if r.Others <= g.QuietCores && r.OthersWriteMBps <= g.QuietWriteMBps {
			r.Quiet = true
			return r, nil
		}
		if r.Waited >= g.MaxWait {
			return r, nil
		}
		if g.Log != nil {
			g.Log("waiting for a quiet machine: others used %.2f cores and wrote %.1f MB/s over the last %v (at most %.2f and %.1f wanted)", r.Others, r.OthersWriteMBps, g.Window, g.QuietCores, g.QuietWriteMBps)
		}
	}
}

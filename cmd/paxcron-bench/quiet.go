package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"
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
	// Window is how long one quiet check measures.
	Window time.Duration
	// MaxWait bounds the wait for quiet before a run.
	MaxWait time.Duration
	// Log receives a line when the guard waits.
	Log func(format string, args ...any)
}

// newGuard returns a guard for this machine.
func newGuard(quietCores float64, maxWait time.Duration, log func(string, ...any)) *guard {
	return &guard{NCPU: runtime.NumCPU(), QuietCores: quietCores, Window: time.Second, MaxWait: maxWait, Log: log}
}

// sample reads the machine's CPU, our processes' own (the server
// processes given and this process) and the kernel threads'.
func (g *guard) sample(servers []int) (cpuSample, error) {
	var s cpuSample
	m, err := readMachineCPU()
	if err != nil {
		return s, err
	}
	s.Machine = m
	for _, pid := range servers {
		t, err := readPIDTicks(pid)
		if err != nil {
			return s, fmt.Errorf("paxcron-bench: server process %d: %w", pid, err)
		}
		s.Servers += t
	}
	if s.Self, err = readPIDTicks(os.Getpid()); err != nil {
		return s, err
	}
	if s.Kernel, err = readKernelThreadTicks(); err != nil {
		return s, err
	}
	return s, nil
}

// quietResult is what waitQuiet saw.
type quietResult struct {
	// Waited is how long it waited.
	Waited time.Duration
	// Others is what others used in the last window, in cores.
	Others float64
	// Quiet is false when MaxWait passed without a quiet window.
	Quiet bool
}

// waitQuiet measures windows of g.Window until others used at most
// g.QuietCores in one, or g.MaxWait passes.
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
		r.Others = deltaOf(a, b, g.NCPU).Others
		r.Waited = time.Since(began)
		if r.Others <= g.QuietCores {
			r.Quiet = true
			return r, nil
		}
		if r.Waited >= g.MaxWait {
			return r, nil
		}
		if g.Log != nil {
			g.Log("waiting for a quiet machine: others used %.2f cores over the last %v (at most %.2f wanted)", r.Others, g.Window, g.QuietCores)
		}
	}
}

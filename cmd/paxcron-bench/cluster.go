package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// system is one side of the comparison: a fresh three-replica cluster
// started for one run and stopped after it.
type system interface {
	// start starts the cluster with its data under dir and returns once
	// it accepts writes.
	start(ctx context.Context, dir string) error
	// write makes one durable write (see writeFunc).
	write(ctx context.Context, client int, seq uint64) error
	// serverPIDs are the server processes whose CPU is the system's; nil
	// when the replicas run in this process.
	serverPIDs() []int
	// stop stops the cluster and releases what start took.
	stop() error
}

// System names, in the order a repetition runs them.
const (
	sysEtcd       = "etcd"
	sysPaxcronAPI = "paxcron-api"
	sysPaxcronLog = "paxcron-log"
)

var allSystems = []string{sysEtcd, sysPaxcronAPI, sysPaxcronLog}

// valueBytes is the size of every write's value: etcd's value, the
// in-process log's command, and the encoded command of an API job write.
const valueBytes = 256

// proc is one server process of a cluster, its output in a log file.
type proc struct {
	cmd *exec.Cmd
	log string
}

func startProc(bin string, args []string, env []string, logPath string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("paxcron-bench: %w", err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so that a Ctrl-C to the harness reaches the
	// harness first and the servers are stopped by it, not half-killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("paxcron-bench: starting %s: %w", bin, err)
	}
	return &proc{cmd: cmd, log: logPath}, nil
}

// kill stops the process at once: its data is thrown away after the run.
func (p *proc) kill() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

func (p *proc) alive() bool {
	return p != nil && p.cmd.ProcessState == nil && p.cmd.Process.Signal(syscall.Signal(0)) == nil
}

// tail is the end of the process's log, for an error message.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

func pidsOf(ps []*proc) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.cmd.Process.Pid)
	}
	return out
}

// waitFor calls ready every 50 ms until it returns nil, any process
// exits, or timeout passes.
func waitFor(ctx context.Context, what string, timeout time.Duration, ps []*proc, ready func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		for _, p := range ps {
			if !p.alive() {
				return fmt.Errorf("paxcron-bench: %s: a server exited; end of %s:\n%s", what, filepath.Base(p.log), p.tail())
			}
		}
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("paxcron-bench: %s: not ready after %v: %w", what, timeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

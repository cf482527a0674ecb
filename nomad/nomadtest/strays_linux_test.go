package nomadtest

import (
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// killStrays kills a process in a session of its own that names a path
// under the agent's directory (as a task executor names its log file),
// and spares one naming a sibling directory whose name merely starts the
// same.
func TestKillStraysKillsWhatNamesTheAgentsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	start := func(arg string) (*exec.Cmd, <-chan error) {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", "sleep 60", arg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd, done
	}
	_, stray := start(filepath.Join(dir, "data", "alloc", "x", "executor.out"))
	_, sibling := start(filepath.Join(dir+"-other", "executor.out"))

	killStrays(dir)
	select {
	case err := <-stray:
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the stray ended with %v, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the process naming a path under the agent's directory still runs")
	}
	select {
	case err := <-sibling:
		t.Fatalf("the process naming a sibling directory ended: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
}

// The watchdog, fired by the test process's end (here: its pipe closed),
// interrupts the agent and then kills, as Stop does, a stray in a session
// of its own that names a path under the agent's directory, and spares
// one naming a sibling directory.
func TestWatchdogKillsTheAgentsStrays(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	start := func(setsid bool, args ...string) <-chan error {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid, Setpgid: !setsid}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill() })
		return done
	}
	agentCmd := exec.Command("sleep", "60")
	agentCmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := agentCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agentCmd.Process.Kill() })
	agent := make(chan error, 1)
	go func() { agent <- agentCmd.Wait() }()
	stray := start(true, "/bin/sh", "-c", "sleep 60", filepath.Join(dir, "data", "alloc", "x", "executor.out"))
	sibling := start(true, "/bin/sh", "-c", "sleep 60", filepath.Join(dir+"-other", "executor.out"))

	wd, err := startWatchdog(agentCmd.Process.Pid, dir)
	if err != nil {
		t.Fatal(err)
	}
	wd.pipe.Close() // what the test process's exit does
	defer wd.cmd.Wait()
	signalOf := func(err error) syscall.Signal {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return 0
		}
		return ee.Sys().(syscall.WaitStatus).Signal()
	}
	select {
	case err := <-agent:
		if signalOf(err) != syscall.SIGINT {
			t.Fatalf("the agent ended with %v, want SIGINT", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not interrupt the agent")
	}
	select {
	case err := <-stray:
		if signalOf(err) != syscall.SIGKILL {
			t.Fatalf("the stray ended with %v, want SIGKILL", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the process naming a path under the agent's directory still runs after the watchdog fired")
	}
	select {
	case err := <-sibling:
		t.Fatalf("the process naming a sibling directory ended: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
}

package nomadtest

import (
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// startProc starts args as a process of a session of its own (setsid), as
// a task executor is, or of a process group of its own, as the agent is;
// its pid and the channel its end is sent on. It is killed at cleanup.
func startProc(t *testing.T, setsid bool, args ...string) (int, <-chan error) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid, Setpgid: !setsid}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd.Process.Pid, done
}

// startNaming starts a process in a session of its own whose command line
// names path, as an executor names its log file. The shell stays, with
// path as its $0, because its script is not one lone command: a lone
// "sleep 60" bash would exec in its place, and path would be gone from
// every command line (dash forks for it either way).
func startNaming(t *testing.T, path string) <-chan error {
	t.Helper()
	_, done := startProc(t, true, "/bin/sh", "-c", "sleep 60; exit", path)
	return done
}

// wantEndedBy fails unless done reports an end by sig within d.
func wantEndedBy(t *testing.T, done <-chan error, sig syscall.Signal, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != sig {
			t.Fatalf("%s ended with %v, want %v", what, err, sig)
		}
	case <-time.After(d):
		t.Fatalf("%s still runs after %v", what, d)
	}
}

// wantRunning fails if done reports an end within a moment.
func wantRunning(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s ended: %v", what, err)
	case <-time.After(100 * time.Millisecond):
	}
}

// killStrays kills a process in a session of its own that names a path
// under the agent's directory (as a task executor names its log file),
// and spares one naming a sibling directory whose name merely starts the
// same.
func TestKillStraysKillsWhatNamesTheAgentsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	stray := startNaming(t, filepath.Join(dir, "data", "alloc", "x", "executor.out"))
	sibling := startNaming(t, filepath.Join(dir+"-other", "executor.out"))

	killStrays(dir)
	wantEndedBy(t, stray, syscall.SIGKILL, 10*time.Second, "the process naming a path under the agent's directory")
	wantRunning(t, sibling, "the process naming a sibling directory")
}

// The watchdog, fired by the test process's end (here: its pipe closed),
// interrupts the agent and then kills, as Stop does, a stray in a session
// of its own that names a path under the agent's directory, and spares
// one naming a sibling directory.
func TestWatchdogKillsTheAgentsStrays(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	agentPid, agent := startProc(t, false, "sleep", "60")
	stray := startNaming(t, filepath.Join(dir, "data", "alloc", "x", "executor.out"))
	sibling := startNaming(t, filepath.Join(dir+"-other", "executor.out"))

	wd, err := startWatchdog(agentPid, dir)
	if err != nil {
		t.Fatal(err)
	}
	wd.pipe.Close() // what the test process's exit does
	defer wd.cmd.Wait()
	wantEndedBy(t, agent, syscall.SIGINT, 10*time.Second, "the agent")
	wantEndedBy(t, stray, syscall.SIGKILL, 20*time.Second, "the process naming a path under the agent's directory, after the watchdog fired,")
	wantRunning(t, sibling, "the process naming a sibling directory")
}

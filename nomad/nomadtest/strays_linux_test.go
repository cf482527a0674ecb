package nomadtest

import (
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

//go:build unix

package nomadtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// sysProcAttr puts the agent in a process group of its own: a Ctrl-C meant
// for the tests does not reach it (Stop and the watchdog stop it), and Stop
// can kill the plugin processes left in its group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func interrupt(p *os.Process) { p.Signal(os.Interrupt) }

// killGroup kills what is left of the agent's process group.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }

// watchdogScript stops the agent $1 when the test process dies without
// stopping it (a test timeout's panic, a signal): its stdin is a pipe whose
// other end only the test process holds, so read returns when it exits.
// It interrupts the agent once, which in dev mode destroys its allocations
// (tasks, plugin processes, mounts) and exits; then (a zombie until its new
// parent reaps it), or after 15 s, it kills what is left of the agent's
// process group, and, as Stop's killStrays does, every process whose
// command line names a path under the agent's directory $2 (task
// executors, each in a session of its own). A second SIGINT would kill
// the agent in the middle of that shutdown: this is why the agent has no
// Pdeathsig (which the kernel may send once per exiting thread of the
// parent).
const watchdogScript = `trap '' INT HUP TERM
read _
kill -INT "$1" 2>/dev/null || exit 0
i=0
while kill -0 "$1" 2>/dev/null && [ "$i" -lt 150 ] &&
	! grep -qs '^State:[[:space:]]*Z' "/proc/$1/status"; do
	sleep 0.1
	i=$((i + 1))
done
kill -KILL "-$1" 2>/dev/null
[ -n "$2" ] || exit 0
for p in /proc/[0-9]*; do
	[ "${p#/proc/}" = "$$" ] && continue
	cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
	case "$cmd" in *"$2/"*) kill -KILL "${p#/proc/}" 2>/dev/null ;; esac
done
exit 0
`

type watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File // the write end; closing it fires the watchdog
}

// startWatchdog starts the watchdog of the agent pid, whose directory is
// dir (its strays are found by it; "" for none).
func startWatchdog(pid int, dir string) (*watchdog, error) {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if dir != "" {
		dir = filepath.Clean(dir)
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "nomadtest-watchdog", strconv.Itoa(pid), dir)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // out of reach of a Ctrl-C
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	return &watchdog{cmd: cmd, pipe: w}, nil
}

// disarm stops the watchdog without letting it act, before Stop stops the
// agent itself.
func (wd *watchdog) disarm() {
	wd.cmd.Process.Kill()
	wd.cmd.Wait()
	wd.pipe.Close()
}

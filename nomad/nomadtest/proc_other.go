//go:build !unix

package nomadtest

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func interrupt(p *os.Process) {
	if p.Signal(os.Interrupt) != nil {
		p.Kill() // no SIGINT (Windows): the grace period is of no use
	}
}

func killGroup(int) {}

type watchdog struct{}

func startWatchdog(int, string) (*watchdog, error) { return &watchdog{}, nil }

func (*watchdog) disarm() {}

//go:build linux

package localcluster_test

import (
	"syscall"
	"time"
)

// tmpfsMagic is f_type of a tmpfs mount (linux/magic.h).
const tmpfsMagic = 0x01021994

// isTmpfs reports whether dir lies on a tmpfs, where fsync costs nothing
// and a storage benchmark would measure memory, not the disk.
func isTmpfs(dir string) (bool, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false, err
	}
	return st.Type == tmpfsMagic, nil
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

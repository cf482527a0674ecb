package nomadtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// killStrays kills every process left whose command line names a path
// under dir: the agent's task executors (`nomad executor`, whose log file
// lies in the allocation's folder). Each puts itself in a session of its
// own, out of killGroup's reach, and a dev agent interrupted while it
// held many allocations does not always stop them all: a launch benchmark
// left five running, holding the files its parent had open.
func killStrays(dir string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	under := []byte(filepath.Clean(dir) + string(filepath.Separator))
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, under) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

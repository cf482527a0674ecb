package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"paxcron/internal/diskload"
)

// userHZ is the unit of the CPU times in /proc/stat and /proc/<pid>/stat
// (USER_HZ): fixed at 100 by the Linux ABI on the architectures Go runs on.
const userHZ = 100

// cpuStat is the machine-wide "cpu" line of /proc/stat, in USER_HZ ticks
// summed over every CPU.
type cpuStat struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// total is every tick that passed, busy or not: the wall time times the
// number of CPUs.
func (s cpuStat) total() uint64 {
	return s.User + s.Nice + s.System + s.Idle + s.IOWait + s.IRQ + s.SoftIRQ + s.Steal
}

// processBusy is the time spent running processes, the part that the
// processes' own utime and stime account for. Interrupt and steal time
// belong to no process and are kept apart (see cpuSample).
func (s cpuStat) processBusy() uint64 { return s.User + s.Nice + s.System }

// parseProcStat reads the "cpu" line of /proc/stat.
func parseProcStat(b []byte) (cpuStat, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return cpuStat{}, fmt.Errorf("paxcron-bench: /proc/stat: first line %q is not the cpu total", line)
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(string(f[i+1]), 10, 64)
		if err != nil {
			return cpuStat{}, fmt.Errorf("paxcron-bench: /proc/stat: field %d: %w", i+1, err)
		}
		v[i] = n
	}
	return cpuStat{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
}

// pidStat is what the harness reads of a /proc/<pid>/stat line.
type pidStat struct {
	PPID int
	// Ticks is utime+stime.
	Ticks uint64
}

// kthreadd is the parent of every kernel thread (and pid 2 itself).
const kthreadd = 2

// parsePIDStat reads a /proc/<pid>/stat line. The command name (field 2)
// may hold spaces and parentheses, so fields are counted after its last
// ')'.
func parsePIDStat(b []byte) (pidStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return pidStat{}, errors.New("paxcron-bench: a /proc/<pid>/stat line without ')'")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), f[1] field 4 (ppid); utime and stime are
	// fields 14 and 15.
	if len(f) < 13 {
		return pidStat{}, fmt.Errorf("paxcron-bench: a /proc/<pid>/stat line with %d fields after the name", len(f))
	}
	ppid, err0 := strconv.Atoi(string(f[1]))
	utime, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err := errors.Join(err0, err1, err2); err != nil {
		return pidStat{}, fmt.Errorf("paxcron-bench: /proc/<pid>/stat: %w", err)
	}
	return pidStat{PPID: ppid, Ticks: utime + stime}, nil
}

// readMachineCPU reads /proc/stat.
func readMachineCPU() (cpuStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}, fmt.Errorf("paxcron-bench: %w", err)
	}
	return parseProcStat(b)
}

// readPIDTicks returns the CPU a process has used, user and system, in
// ticks, over all its threads.
func readPIDTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("paxcron-bench: %w", err)
	}
	st, err := parsePIDStat(b)
	return st.Ticks, err
}

// readKernelThreadTicks sums the CPU of the kernel threads now alive. The
// block layer's and the file system's threads (kblockd, ext4 conversion)
// mostly complete our own synced writes, so the guard keeps them apart
// from the other processes' load rather than count them as a
// disturbance.
func readKernelThreadTicks() (uint64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("paxcron-bench: %w", err)
	}
	var sum uint64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone meanwhile
		}
		st, err := parsePIDStat(b)
		if err != nil {
			return 0, err
		}
		if pid == kthreadd || st.PPID == kthreadd {
			sum += st.Ticks
		}
	}
	return sum, nil
}

// cpuSample is what the guard and the CPU accounting read at one instant.
type cpuSample struct {
	Machine cpuStat
	// Servers is the CPU of the system's server processes (ticks); zero
	// for the in-process log, whose replicas are this process.
	Servers uint64
	// Self is this process's CPU (the clients, and for the in-process
	// log the replicas too).
	Self uint64
	// Kernel is the CPU of the kernel threads (readKernelThreadTicks).
	Kernel uint64
	// Disk is the machine's write counters, ours being this process's
	// tree (the servers are its children).
	Disk diskload.Sample
}

// cpuDelta is the CPU used between two samples, in cores (seconds of CPU
// per second of wall time) unless said otherwise.
type cpuDelta struct {
	// Others is what processes other than ours used: the machine's
	// process time minus our processes' own and the kernel threads'.
	Others float64
	// Kernel is what the kernel threads used (mostly on our writes).
	Kernel float64
	// Interrupts is irq and softirq time, which no process is charged
	// with (loopback traffic and disk completions, ours or anyone's).
	Interrupts float64
	// Steal is time the hypervisor gave to other guests.
	Steal float64
	// ServerSeconds and SelfSeconds are our processes' CPU seconds.
	ServerSeconds, SelfSeconds float64
	// OthersWriteMBps is what processes other than ours wrote to disk,
	// DeviceWriteMBps what the disks wrote (ours, theirs and the
	// journal's), in megabytes a second.
	OthersWriteMBps, DeviceWriteMBps float64
}

// deltaOf computes what was used between a and b on a machine of ncpu
// CPUs. Process and machine counters are read at slightly different
// instants, so Others is clamped at zero.
func deltaOf(a, b cpuSample, ncpu int) cpuDelta {
	if ncpu <= 0 {
		panic("paxcron-bench: deltaOf with no CPU")
	}
	wall := float64(b.Machine.total()-a.Machine.total()) / float64(ncpu) // ticks of wall time
	ours := float64(b.Servers-a.Servers) + float64(b.Self-a.Self)
	disk := b.Disk.Since(a.Disk)
	d := cpuDelta{
		ServerSeconds:   float64(b.Servers-a.Servers) / userHZ,
		SelfSeconds:     float64(b.Self-a.Self) / userHZ,
		OthersWriteMBps: disk.OthersMBps(),
		DeviceWriteMBps: disk.DeviceMBps(),
	}
	if wall <= 0 {
		return d
	}
	// A kernel thread that exited meanwhile makes the difference
	// negative: count it as none.
	kernel := max(0, float64(b.Kernel)-float64(a.Kernel))
	d.Others = max(0, float64(b.Machine.processBusy()-a.Machine.processBusy())-ours-kernel) / wall
	d.Kernel = kernel / wall
	d.Interrupts = float64(b.Machine.IRQ+b.Machine.SoftIRQ-a.Machine.IRQ-a.Machine.SoftIRQ) / wall
	d.Steal = float64(b.Machine.Steal-a.Machine.Steal) / wall
	return d
}

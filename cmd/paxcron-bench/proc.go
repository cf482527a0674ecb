package main

import (
	"fmt"

	"paxcron/internal/diskload"
	"paxcron/internal/procfs"
)

// readKernelThreadTicks sums the CPU of the kernel threads now alive. The
// block layer's and the file system's threads (kblockd, ext4 conversion)
// mostly complete our own synced writes, so the guard keeps them apart
// from the other processes' load rather than count them as a
// disturbance.
func readKernelThreadTicks() (uint64, error) {
	procs, err := procfs.Host.Procs()
	if err != nil {
		return 0, fmt.Errorf("paxcron-bench: %w", err)
	}
	var sum uint64
	for _, st := range procs {
		if st.KernelThread() {
			sum += st.Ticks()
		}
	}
	return sum, nil
}

// cpuSample is what the guard and the CPU accounting read at one instant.
type cpuSample struct {
	Machine procfs.CPU
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
	wall := float64(b.Machine.Total()-a.Machine.Total()) / float64(ncpu) // ticks of wall time
	ours := float64(b.Servers-a.Servers) + float64(b.Self-a.Self)
	disk := b.Disk.Since(a.Disk)
	d := cpuDelta{
		ServerSeconds:   float64(b.Servers-a.Servers) / procfs.UserHZ,
		SelfSeconds:     float64(b.Self-a.Self) / procfs.UserHZ,
		OthersWriteMBps: disk.OthersMBps(),
		DeviceWriteMBps: disk.DeviceMBps(),
	}
	if wall <= 0 {
		return d
	}
	// A kernel thread that exited meanwhile makes the difference
	// negative: count it as none.
	kernel := max(0, float64(b.Kernel)-float64(a.Kernel))
	d.Others = max(0, float64(b.Machine.ProcessBusy()-a.Machine.ProcessBusy())-ours-kernel) / wall
	d.Kernel = kernel / wall
	d.Interrupts = float64(b.Machine.IRQ+b.Machine.SoftIRQ-a.Machine.IRQ-a.Machine.SoftIRQ) / wall
	d.Steal = float64(b.Machine.Steal-a.Machine.Steal) / wall
	return d
}

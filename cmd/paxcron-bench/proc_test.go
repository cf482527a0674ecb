package main

import (
	"math"
	"os"
	"testing"

	"paxcron/internal/procfs"
)

// TestReadKernelThreadTicks reads the machine's own kernel threads.
func TestReadKernelThreadTicks(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if _, err := readKernelThreadTicks(); err != nil {
		t.Fatal(err)
	}
}

// TestDeltaOf checks the guard's arithmetic on /proc samples of a
// two-CPU machine over one second (200 ticks of CPU time in all).
func TestDeltaOf(t *testing.T) {
	a := cpuSample{Machine: procfs.CPU{User: 1000, System: 500, Idle: 5000, IRQ: 10, SoftIRQ: 10, Steal: 0}, Servers: 300, Self: 100}
	near := func(x, want float64) bool { return math.Abs(x-want) < 1e-9 }
	for _, tc := range []struct {
		name string
		b    cpuSample
		want cpuDelta
	}{
		{
			// 60 user + 20 system ticks busy, all of it ours (50 servers +
			// 30 self), the rest idle: others used nothing.
			name: "only ours",
			b:    cpuSample{Machine: procfs.CPU{User: 1060, System: 520, Idle: 5120, IRQ: 10, SoftIRQ: 10}, Servers: 350, Self: 130},
			want: cpuDelta{Others: 0, ServerSeconds: 0.5, SelfSeconds: 0.3},
		},
		{
			// 100 busy ticks, 40 ours: others used 60 ticks of 100 wall
			// ticks, 0.6 cores; 10 ticks of softirq is 0.1 cores.
			name: "others busy",
			b:    cpuSample{Machine: procfs.CPU{User: 1080, System: 520, Idle: 5090, IRQ: 10, SoftIRQ: 20}, Servers: 330, Self: 110},
			want: cpuDelta{Others: 0.6, Interrupts: 0.1, ServerSeconds: 0.3, SelfSeconds: 0.1},
		},
		{
			// 100 busy ticks, 40 ours, 30 the kernel threads' (kblockd
			// completing our writes): others used 30, 0.3 cores.
			name: "kernel threads apart",
			b:    cpuSample{Machine: procfs.CPU{User: 1050, System: 550, Idle: 5100, IRQ: 10, SoftIRQ: 10}, Servers: 330, Self: 110, Kernel: 30},
			want: cpuDelta{Others: 0.3, Kernel: 0.3, ServerSeconds: 0.3, SelfSeconds: 0.1},
		},
		{
			// Our counters ran ahead of the machine's (read a moment
			// later): clamped at zero, never negative.
			name: "ours ahead of the machine",
			b:    cpuSample{Machine: procfs.CPU{User: 1010, System: 500, Idle: 5180, IRQ: 10, SoftIRQ: 10, Steal: 10}, Servers: 320, Self: 100},
			want: cpuDelta{Others: 0, Steal: 0.1, ServerSeconds: 0.2},
		},
	} {
		got := deltaOf(a, tc.b, 2)
		if !near(got.Others, tc.want.Others) || !near(got.Kernel, tc.want.Kernel) || !near(got.Interrupts, tc.want.Interrupts) || !near(got.Steal, tc.want.Steal) ||
			!near(got.ServerSeconds, tc.want.ServerSeconds) || !near(got.SelfSeconds, tc.want.SelfSeconds) {
			t.Errorf("%s: deltaOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

package main

import (
	"math"
	"os"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	in := "cpu  4705 150 1120 16250 520 30 25 7 0 0\ncpu0 2000 75 560 8125 260 15 12 3 0 0\nintr 1 2 3\n"
	got, err := parseProcStat([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := cpuStat{User: 4705, Nice: 150, System: 1120, Idle: 16250, IOWait: 520, IRQ: 30, SoftIRQ: 25, Steal: 7}
	if got != want {
		t.Fatalf("parseProcStat = %+v, want %+v", got, want)
	}
	if got.total() != 4705+150+1120+16250+520+30+25+7 || got.processBusy() != 4705+150+1120 {
		t.Errorf("total %d, processBusy %d", got.total(), got.processBusy())
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) accepted it", bad)
		}
	}
}

func TestParsePIDStat(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	line := "1234 (etcd (m1) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 555 0 0\n"
	got, err := parsePIDStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != (pidStat{PPID: 1, Ticks: 325}) {
		t.Fatalf("parsePIDStat = %+v, want ppid 1, 250+75 ticks", got)
	}
	for _, bad := range []string{"1234 etcd S 1", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u 7 0 0", "1 (x) S p 1 1 0 -1 0 0 0 0 0 1 7 0 0"} {
		if _, err := parsePIDStat([]byte(bad)); err == nil {
			t.Errorf("parsePIDStat(%q) accepted it", bad)
		}
	}
}

func TestReadPIDTicksOfSelf(t *testing.T) {
	if _, err := readKernelThreadTicks(); err != nil {
		t.Fatal(err)
	}
	n, err := readPIDTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readMachineCPU(); err != nil {
		t.Fatal(err)
	}
	// Burn a little CPU: the count must not go down.
	x := 0
	for i := range 20_000_000 {
		x ^= i
	}
	m, err := readPIDTicks(os.Getpid())
	if err != nil || m < n {
		t.Fatalf("ticks went from %d to %d (%v), x=%d", n, m, err, x)
	}
}

// TestDeltaOf checks the guard's arithmetic on /proc samples of a
// two-CPU machine over one second (200 ticks of CPU time in all).
func TestDeltaOf(t *testing.T) {
	a := cpuSample{Machine: cpuStat{User: 1000, System: 500, Idle: 5000, IRQ: 10, SoftIRQ: 10, Steal: 0}, Servers: 300, Self: 100}
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
			b:    cpuSample{Machine: cpuStat{User: 1060, System: 520, Idle: 5120, IRQ: 10, SoftIRQ: 10}, Servers: 350, Self: 130},
			want: cpuDelta{Others: 0, ServerSeconds: 0.5, SelfSeconds: 0.3},
		},
		{
			// 100 busy ticks, 40 ours: others used 60 ticks of 100 wall
			// ticks, 0.6 cores; 10 ticks of softirq is 0.1 cores.
			name: "others busy",
			b:    cpuSample{Machine: cpuStat{User: 1080, System: 520, Idle: 5090, IRQ: 10, SoftIRQ: 20}, Servers: 330, Self: 110},
			want: cpuDelta{Others: 0.6, Interrupts: 0.1, ServerSeconds: 0.3, SelfSeconds: 0.1},
		},
		{
			// 100 busy ticks, 40 ours, 30 the kernel threads' (kblockd
			// completing our writes): others used 30, 0.3 cores.
			name: "kernel threads apart",
			b:    cpuSample{Machine: cpuStat{User: 1050, System: 550, Idle: 5100, IRQ: 10, SoftIRQ: 10}, Servers: 330, Self: 110, Kernel: 30},
			want: cpuDelta{Others: 0.3, Kernel: 0.3, ServerSeconds: 0.3, SelfSeconds: 0.1},
		},
		{
			// Our counters ran ahead of the machine's (read a moment
			// later): clamped at zero, never negative.
			name: "ours ahead of the machine",
			b:    cpuSample{Machine: cpuStat{User: 1010, System: 500, Idle: 5180, IRQ: 10, SoftIRQ: 10, Steal: 10}, Servers: 320, Self: 100},
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

package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCPU(t *testing.T) {
	in := "cpu  4705 150 1120 16250 520 30 25 7 0 0\ncpu0 2000 75 560 8125 260 15 12 3 0 0\nintr 1 2 3\n"
	got, err := parseCPU([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := CPU{User: 4705, Nice: 150, System: 1120, Idle: 16250, IOWait: 520, IRQ: 30, SoftIRQ: 25, Steal: 7}
	if got != want {
		t.Fatalf("parseCPU = %+v, want %+v", got, want)
	}
	if got.Total() != 4705+150+1120+16250+520+30+25+7 || got.ProcessBusy() != 4705+150+1120 || got.Busy() != 4705+150+1120+30+25+7 {
		t.Errorf("total %d, processBusy %d, busy %d", got.Total(), got.ProcessBusy(), got.Busy())
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if _, err := parseCPU([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("parseCPU(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

// statLine is a whole /proc/<pid>/stat line (52 fields, as Linux 6 has)
// of a process named name.
func statLine(pid, ppid int, name string, utime, stime, cutime, cstime, start uint64) string {
	return fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194560 100 0 0 0 %d %d %d %d 20 0 12 0 %d 1000 50 "+
		"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		pid, name, ppid, pid, pid, utime, stime, cutime, cstime, start)
}

func TestParseStat(t *testing.T) {
	for _, name := range []string{"etcd", "etcd (m1) x", ") (", "a) (b c) ) S 9 9", "x y)"} {
		line := statLine(1234, 77, name, 250, 75, 30, 5, 555)
		got, err := parseStat([]byte(line))
		if err != nil {
			t.Fatalf("name %q: %v", name, err)
		}
		want := Stat{PID: 1234, PPID: 77, Start: 555, UTime: 250, STime: 75, CUTime: 30, CSTime: 5}
		if got != want {
			t.Fatalf("name %q: parseStat = %+v, want %+v", name, got, want)
		}
		if got.Ticks() != 325 || got.TicksWithChildren() != 360 {
			t.Errorf("ticks %d, with children %d; want 325, 360", got.Ticks(), got.TicksWithChildren())
		}
	}
	// A line of the shortest length taken: up to starttime.
	if _, err := parseStat([]byte("1 (x) S 0 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 9")); err != nil {
		t.Errorf("a line ending at starttime: %v", err)
	}
}

func TestParseStatRefusesWhatItCannotRead(t *testing.T) {
	whole := statLine(1234, 1, "a) (b c", 250, 75, 0, 0, 555)
	// Cut short after the name's inner ')', inside the name, and at
	// each of the fields wanted.
	for _, n := range []int{len("1234 (a)"), len("1234 (a) (b"), strings.Index(whole, " 250 "), strings.Index(whole, " 555 "), 0} {
		if _, err := parseStat([]byte(whole[:n])); !errors.Is(err, ErrMalformed) {
			t.Errorf("parseStat(%q) = %v, want ErrMalformed", whole[:n], err)
		}
	}
	for _, bad := range []string{
		"1234 etcd S 1",
		"1 (x) S 1 2 3",
		"x (x) S 1 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 9",
		"1 (x) S p 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 9",
		"1 (x) S 1 1 1 0 -1 0 0 0 0 0 u 2 3 4 20 0 1 0 9",
		"1 (x) S 1 1 1 0 -1 0 0 0 0 0 1 s 3 4 20 0 1 0 9",
		"1 (x) S 1 1 1 0 -1 0 0 0 0 0 1 2 -3 4 20 0 1 0 9",
		"1 (x) S 1 1 1 0 -1 0 0 0 0 0 1 2 3 c 20 0 1 0 9",
		"1 (x) S 1 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 t",
	} {
		if _, err := parseStat([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("parseStat(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestParseRefusesWhatItCannotRead(t *testing.T) {
	if _, err := parseWriteBytes([]byte("rchar: 1\n")); !errors.Is(err, ErrMalformed) {
		t.Error("an io file without write_bytes was taken")
	}
	if _, err := parseWriteBytes([]byte("write_bytes: x\n")); !errors.Is(err, ErrMalformed) {
		t.Error("an io file with a bad write_bytes was taken")
	}
	all := func(string) bool { return true }
	if _, err := parseDiskstats([]byte("8 0 sda 1 2\n"), all); !errors.Is(err, ErrMalformed) {
		t.Error("a short diskstats line was taken")
	}
	if _, err := parseDiskstats([]byte("8 0 sda 1 2 3 4 5 6 x 8\n"), all); !errors.Is(err, ErrMalformed) {
		t.Error("a diskstats line with a bad count was taken")
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFakeTree(t *testing.T) {
	dir := t.TempDir()
	root := FS(dir)
	// 1 init, 2 kthreadd, 3 a kernel thread; 100 the root, 101 its
	// child, 102 its grandchild; 200 another's; 300 and 301 each other's
	// parent (pids reused while reading).
	for pid, ppid := range map[int]int{1: 0, 2: 0, 3: 2, 100: 1, 101: 100, 102: 101, 200: 1, 300: 301, 301: 300} {
		write(t, filepath.Join(dir, fmt.Sprint(pid), "stat"), statLine(pid, ppid, "p (q)", uint64(pid), 1, 0, 0, uint64(10*pid)))
	}
	write(t, filepath.Join(dir, "self", "stat"), "not a process's\n")
	write(t, filepath.Join(dir, "101", "io"), "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n")
	write(t, filepath.Join(dir, "stat"), "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	write(t, filepath.Join(dir, "diskstats"), "   7       0 loop0 0 0 0 0 9 0 999 0 0 0 0\n\n 253       0 vda 10 0 20 5 30 0 1000 7 0 12 12\n 253       1 vdb 10 0 20 5 30 0 24 7 0 12 12\n")

	procs, err := root.Procs()
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 9 || procs[102].PPID != 101 || procs[102].Start != 1020 || procs[102].UTime != 102 {
		t.Fatalf("procs = %+v", procs)
	}
	for pid, want := range map[int]bool{100: true, 101: true, 102: true, 1: false, 2: false, 3: false, 200: false, 300: false, 999: false} {
		if got := procs.InTree(pid, 100); got != want {
			t.Errorf("InTree(%d, 100) = %v, want %v", pid, got, want)
		}
	}
	for pid, want := range map[int]bool{1: false, 2: true, 3: true, 100: false} {
		if got := procs[pid].KernelThread(); got != want {
			t.Errorf("pid %d: KernelThread = %v, want %v", pid, got, want)
		}
	}
	if w, err := root.WriteBytes(101); err != nil || w != 4096 {
		t.Errorf("WriteBytes(101) = %d, %v; want 4096", w, err)
	}
	if _, err := root.WriteBytes(100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteBytes of a process without io: %v, want not exist", err)
	}
	if _, err := root.Stat(999); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat of a process gone: %v, want not exist", err)
	}
	if c, err := root.CPU(); err != nil || c != (CPU{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("CPU = %+v, %v", c, err)
	}
	if n, err := root.SectorsWritten(func(name string) bool { return name != "loop0" }); err != nil || n != 1024 {
		t.Errorf("SectorsWritten = %d, %v; want 1000+24", n, err)
	}

	// One malformed stat fails the listing rather than drop the process.
	write(t, filepath.Join(dir, "200", "stat"), "200 (cut short) S 1 200")
	if _, err := root.Procs(); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), filepath.Join(dir, "200", "stat")) {
		t.Errorf("Procs with a malformed stat: %v, want ErrMalformed naming the file", err)
	}
}

// TestHost reads the machine's own /proc.
func TestHost(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if _, err := Host.CPU(); err != nil {
		t.Fatal(err)
	}
	procs, err := Host.Procs()
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	if st, ok := procs[self]; !ok || st.PID != self || st.PPID != os.Getppid() || !procs.InTree(self, os.Getppid()) {
		t.Fatalf("this process: %+v (listed %v)", st, ok)
	}
	a, err := Host.Stat(self)
	if err != nil {
		t.Fatal(err)
	}
	// Burn a little CPU: the count must not go down.
	x := 0
	for i := range 20_000_000 {
		x ^= i
	}
	b, err := Host.Stat(self)
	if err != nil || b.Ticks() < a.Ticks() || b.Start != a.Start {
		t.Fatalf("ticks went from %d to %d (%v), x=%d", a.Ticks(), b.Ticks(), err, x)
	}
}

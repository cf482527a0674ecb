package diskload

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"paxcron/internal/procfs"
)

// fakeProc writes a /proc of the given processes (pid: ppid, start time,
// write_bytes; an io of -1 is unreadable) and a diskstats.
func fakeProc(t *testing.T, dir string, procs map[int][3]int64, sectors int64) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for pid, p := range procs {
		d := filepath.Join(dir, fmt.Sprint(pid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		// The name holds a space and a parenthesis, as names may.
		line := fmt.Sprintf("%d (a) b) S %d 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, p[0], p[1])
		if err := os.WriteFile(filepath.Join(d, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		if p[2] < 0 {
			continue
		}
		io := fmt.Sprintf("rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: %d\ncancelled_write_bytes: 0\n", p[2])
		if err := os.WriteFile(filepath.Join(d, "io"), []byte(io), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stats := fmt.Sprintf("   7       0 loop0 0 0 0 0 9 0 999 0 0 0 0\n 253       0 vda 10 0 20 5 30 0 %d 7 0 12 12\n", sectors)
	if err := os.WriteFile(filepath.Join(dir, "diskstats"), []byte(stats), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSplitBetweenTreeAndOthers(t *testing.T) {
	dir := t.TempDir()
	proc, block := filepath.Join(dir, "proc"), filepath.Join(dir, "block")
	if err := os.MkdirAll(filepath.Join(block, "vda", "device"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(p procfs.FS, b string) { procFS, sysBlock = p, b }(procFS, sysBlock)
	procFS, sysBlock = procfs.FS(proc), block

	// 100 is ours, 101 its child, 102 its grandchild; 200 another's;
	// 300 exits and its pid is reused by a newcomer; 400 a kernel
	// thread; 500 starts between the samples; 600 is unreadable.
	fakeProc(t, proc, map[int][3]int64{
		1: {0, 1, 0}, 2: {0, 1, 0}, 100: {1, 10, 1000}, 101: {100, 11, 50}, 102: {101, 12, 0},
		200: {1, 20, 7000}, 300: {1, 30, 900}, 400: {2, 40, 123}, 600: {1, 60, -1},
	}, 1000)
	a, err := Take(100)
	if err != nil {
		t.Fatal(err)
	}
	fakeProc(t, proc, map[int][3]int64{
		1: {0, 1, 0}, 2: {0, 1, 0}, 100: {1, 10, 1500}, 101: {100, 11, 50}, 102: {101, 12, 4000},
		200: {1, 20, 9000}, 300: {1, 31, 100}, 400: {2, 40, 99999}, 500: {1, 50, 300}, 600: {1, 60, -1},
	}, 3000)
	b, err := Take(100)
	if err != nil {
		t.Fatal(err)
	}
	b.At = a.At.Add(2 * time.Second)
	d := b.Since(a)
	// Ours: 500 + 0 + 4000. Others: 200 grew 2000; the new 300 wrote
	// 100 (not 100-900); 500 wrote 300; the kernel thread is no one's.
	if d.Ours != 4500 || d.Others != 2400 || d.Device != 2000*procfs.SectorBytes {
		t.Fatalf("ours %d, others %d, device %d; want 4500, 2400, %d", d.Ours, d.Others, d.Device, 2000*procfs.SectorBytes)
	}
	if got := d.OthersMBps(); got != 0.0012 {
		t.Fatalf("others %v MB/s, want 0.0012", got)
	}
	if got := (Delta{Others: 5}).OthersMBps(); got != 0 {
		t.Fatalf("no time: %v MB/s, want 0", got)
	}
}

// TestTakeRefusesWhatItCannotRead: a malformed stat or io fails the
// sample rather than leave a process out of it.
func TestTakeRefusesWhatItCannotRead(t *testing.T) {
	dir := t.TempDir()
	proc := filepath.Join(dir, "proc")
	defer func(p procfs.FS, b string) { procFS, sysBlock = p, b }(procFS, sysBlock)
	procFS, sysBlock = procfs.FS(proc), filepath.Join(dir, "block")
	for _, bad := range []string{"stat", "io"} {
		fakeProc(t, proc, map[int][3]int64{1: {0, 1, 0}, 100: {1, 10, 1000}}, 0)
		if err := os.WriteFile(filepath.Join(proc, "100", bad), []byte("100 (x) S 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Take(100); !errors.Is(err, procfs.ErrMalformed) {
			t.Errorf("a malformed %s: Take = %v, want ErrMalformed", bad, err)
		}
	}
}

// TestLiveWritesAreSplit writes from this process and from a process
// that left our tree (its parent exited, so it was given to another
// parent), on the machine's own /proc. The other process stays alive
// after it wrote: one that exits takes its counters with it.
func TestLiveWritesAreSplit(t *testing.T) {
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skipf("no /proc/self/io here: %v", err)
	}
	dir := t.TempDir()
	a, err := Take(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	const mb = 1 << 20
	writeSynced(t, filepath.Join(dir, "ours"), 4*mb)

	// The outer shell exits at once, leaving the writer without a parent.
	pidFile := filepath.Join(dir, "pid")
	script := fmt.Sprintf(`(%s -test.run='^TestWriterOutsideTheTree$' >/dev/null 2>&1 &) `, os.Args[0])
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "DISKLOAD_WRITER_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var pid int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil {
			if _, err := fmt.Sscan(string(b), &pid); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the other process did not write in 30 s")
		}
	}
	defer func() {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}()
	b, err := Take(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	d := b.Since(a)
	if d.Ours < 4*mb || d.Ours >= 8*mb {
		t.Errorf("ours %d bytes, want 4 MiB (and not the other's 8)", d.Ours)
	}
	if d.Others < 8*mb {
		t.Errorf("others %d bytes, want at least 8 MiB", d.Others)
	}
	if d.Device < 12*mb {
		t.Errorf("the disks wrote %d bytes, want at least 12 MiB (all of it synced)", d.Device)
	}
}

// TestWriterOutsideTheTree is TestLiveWritesAreSplit's other process:
// it writes 8 MiB, says its pid, and waits to be killed.
func TestWriterOutsideTheTree(t *testing.T) {
	dir := os.Getenv("DISKLOAD_WRITER_DIR")
	if dir == "" {
		t.Skip("run by TestLiveWritesAreSplit only")
	}
	writeSynced(t, filepath.Join(dir, "theirs"), 8<<20)
	tmp := filepath.Join(dir, "pid.tmp")
	if err := os.WriteFile(tmp, []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "pid")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Minute)
}

func writeSynced(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

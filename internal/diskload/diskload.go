// Package diskload measures what the machine's processes write to disk,
// split between one process tree (the benchmark and what it started) and
// everyone else, so that a benchmark on a shared machine can tell a run
// that another process's writes disturbed from one they did not. A
// synced write's latency is the disk's: a neighbour copying a file costs
// a run much CPU would not show.
//
// The split comes from each process's write_bytes in /proc/<pid>/io: the
// bytes it caused to be sent to storage, counted when it dirties a page,
// so the kernel's writeback threads are not charged with them. A process
// that started and exited between two samples is missed, and so is the
// file system's journal; the device total (/proc/diskstats) counts both,
// ours and theirs, and is kept beside the split for the reader.
package diskload

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// procRoot is where the process and device counters are read; a variable
// so that tests can give a fixed tree.
var procRoot = "/proc"

// sysBlock lists the block devices; one with a "device" entry is backed
// by hardware (or a hypervisor's disk), not a loop, RAM or mapper device
// layered over one, which would count the same bytes twice.
var sysBlock = "/sys/block"

// sectorBytes is the unit of /proc/diskstats' sector counts, whatever
// the device's own sector size.
const sectorBytes = 512

// kthreadd is the parent of every kernel thread (and pid 2 itself).
const kthreadd = 2

// proc names one process over time: a pid may be reused, its start time
// (in clock ticks since boot) tells the two apart.
type proc struct {
	pid   int
	start uint64
}

// Sample is the machine's write counters at one instant.
type Sample struct {
	At time.Time
	// Ours is the write_bytes of the tree's processes now alive.
	Ours uint64
	// Device is what the machine's disks have written, whoever wrote it.
	Device uint64
	// others holds the write_bytes of every other user process whose
	// counters could be read.
	others map[proc]uint64
}

// Take reads the counters, counting root and its descendants as ours.
func Take(root int) (Sample, error) {
	s := Sample{At: time.Now(), others: map[proc]uint64{}}
	dev, err := deviceBytes()
	if err != nil {
		return s, err
	}
	s.Device = dev
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return s, fmt.Errorf("diskload: %w", err)
	}
	stats := map[int]stat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			stats[pid] = st
		}
	}
	for pid, st := range stats {
		if pid == kthreadd || st.ppid == kthreadd {
			continue
		}
		w, ok := readWriteBytes(pid)
		if !ok {
			continue // gone meanwhile, or not ours to read
		}
		if inTree(pid, root, stats) {
			s.Ours += w
		} else {
			s.others[proc{pid, st.start}] = w
		}
	}
	return s, nil
}

// Delta is what was written between two samples.
type Delta struct {
	Wall time.Duration
	// Others is what processes outside the tree wrote: their growth for
	// those alive at both samples, everything for those that started
	// between them.
	Others uint64
	// Ours is the tree's growth (processes that exited meanwhile lower
	// it; it is clamped at zero).
	Ours uint64
	// Device is what the disks wrote.
	Device uint64
}

// Since returns what was written from a to s.
func (s Sample) Since(a Sample) Delta {
	d := Delta{Wall: s.At.Sub(a.At)}
	if s.Device > a.Device {
		d.Device = s.Device - a.Device
	}
	if s.Ours > a.Ours {
		d.Ours = s.Ours - a.Ours
	}
	for p, w := range s.others {
		if before, ok := a.others[p]; ok {
			if w > before {
				d.Others += w - before
			}
		} else {
			d.Others += w
		}
	}
	return d
}

// OthersMBps is Others in megabytes (10^6) a second; zero for no time.
func (d Delta) OthersMBps() float64 { return perSecond(d.Others, d.Wall) }

// DeviceMBps is Device in megabytes a second.
func (d Delta) DeviceMBps() float64 { return perSecond(d.Device, d.Wall) }

func perSecond(n uint64, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return float64(n) / 1e6 / wall.Seconds()
}

// stat is what Take reads of /proc/<pid>/stat.
type stat struct {
	ppid  int
	start uint64
}

func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return stat{}, false
	}
	st, err := parseStat(b)
	return st, err == nil
}

// parseStat reads a /proc/<pid>/stat line. The command name (field 2) may
// hold spaces and parentheses, so fields are counted after its last ')'.
func parseStat(b []byte) (stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, errors.New("diskload: a stat line without ')'")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22
	// (starttime).
	if len(f) < 20 {
		return stat{}, fmt.Errorf("diskload: a stat line with %d fields after the name", len(f))
	}
	ppid, err0 := strconv.Atoi(string(f[1]))
	start, err1 := strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err0, err1); err != nil {
		return stat{}, fmt.Errorf("diskload: stat: %w", err)
	}
	return stat{ppid: ppid, start: start}, nil
}

// readWriteBytes reads write_bytes from /proc/<pid>/io, which only the
// process's owner (or root) may read.
func readWriteBytes(pid int) (uint64, bool) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "io"))
	if err != nil {
		return 0, false
	}
	w, err := parseWriteBytes(b)
	return w, err == nil
}

func parseWriteBytes(b []byte) (uint64, error) {
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("write_bytes:")); ok {
			return strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, errors.New("diskload: no write_bytes line")
}

// inTree reports whether pid is root or descends from it. The walk is
// bounded: a parent seen twice (pids reused while reading) ends it.
func inTree(pid, root int, stats map[int]stat) bool {
	for hops := 0; hops < 64; hops++ {
		if pid == root {
			return true
		}
		st, ok := stats[pid]
		if !ok || pid <= 1 {
			return false
		}
		pid = st.ppid
	}
	return false
}

// deviceBytes sums the bytes written by the machine's disks.
func deviceBytes() (uint64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "diskstats"))
	if err != nil {
		return 0, fmt.Errorf("diskload: %w", err)
	}
	return parseDiskstats(b, isDisk)
}

func isDisk(name string) bool {
	_, err := os.Stat(filepath.Join(sysBlock, name, "device"))
	return err == nil
}

// parseDiskstats sums the sectors written (the tenth field) of the
// devices disk accepts.
func parseDiskstats(b []byte, disk func(string) bool) (uint64, error) {
	var sum uint64
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 10 {
			return 0, fmt.Errorf("diskload: diskstats line %q has %d fields", bytes.TrimSpace(line), len(f))
		}
		if !disk(string(f[2])) {
			continue
		}
		n, err := strconv.ParseUint(string(f[9]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("diskload: diskstats %s: %w", f[2], err)
		}
		sum += n * sectorBytes
	}
	return sum, nil
}

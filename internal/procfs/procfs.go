// Package procfs reads the Linux /proc counters that the benchmarks'
// load guards use, and is the only place that parses them: the machine's
// CPU line of /proc/stat, a process's /proc/<pid>/stat (parent, start
// time, CPU times), the stat of every process at once and the walk up
// their parents, a process's write_bytes in /proc/<pid>/io, and the
// sectors written in /proc/diskstats. What to make of the numbers (whose
// load is whose, what counts as a disk) is left to the callers.
//
// A file that was read but cannot be parsed is an error wrapping
// ErrMalformed, never skipped: it means this package misreads the
// kernel, and a count without that process would be silently wrong. A
// file that cannot be read (its process exited meanwhile, or is not the
// caller's to read) is returned as the read error, or, when listing
// every process, skipped.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// UserHZ is the unit of the CPU times in /proc/stat and /proc/<pid>/stat
// (USER_HZ, clock ticks a second): fixed at 100 by the Linux ABI on the
// architectures Go runs on.
const UserHZ = 100

// SectorBytes is the unit of /proc/diskstats' sector counts, whatever the
// device's own sector size.
const SectorBytes = 512

// KThreadd is the pid of the parent of every kernel thread.
const KThreadd = 2

// maxHops bounds the walk up a process's parents.
const maxHops = 64

// ErrMalformed is wrapped by the errors about a file that was read but
// could not be parsed.
var ErrMalformed = errors.New("malformed")

// FS is the root of one /proc tree.
type FS string

// Host is the machine's own /proc; tests give a directory of their own
// files instead.
const Host FS = "/proc"

func (fs FS) read(elem ...string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(append([]string{string(fs)}, elem...)...))
	if err != nil {
		return nil, fmt.Errorf("procfs: %w", err)
	}
	return b, nil
}

// CPU is the machine-wide "cpu" line of /proc/stat: the time spent in
// each state, in UserHZ ticks summed over every CPU.
type CPU struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Total is every tick that passed, busy or not: the wall time times the
// number of CPUs.
func (c CPU) Total() uint64 {
	return c.User + c.Nice + c.System + c.Idle + c.IOWait + c.IRQ + c.SoftIRQ + c.Steal
}

// Busy is every tick the CPUs were neither idle nor waiting for I/O:
// processes, interrupts and steal.
func (c CPU) Busy() uint64 { return c.Total() - c.Idle - c.IOWait }

// ProcessBusy is the time spent running processes, the part that the
// processes' own utime and stime account for; interrupt and steal time
// belong to no process.
func (c CPU) ProcessBusy() uint64 { return c.User + c.Nice + c.System }

// CPU reads the machine's CPU line of /proc/stat.
func (fs FS) CPU() (CPU, error) {
	b, err := fs.read("stat")
	if err != nil {
		return CPU{}, err
	}
	c, err := parseCPU(b)
	if err != nil {
		return CPU{}, fmt.Errorf("procfs: %s: %w", filepath.Join(string(fs), "stat"), err)
	}
	return c, nil
}

// parseCPU reads the first line of /proc/stat, which must be the "cpu"
// total (the per-CPU lines follow it).
func parseCPU(b []byte) (CPU, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return CPU{}, fmt.Errorf("%w: first line %q is not the cpu total", ErrMalformed, line)
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(string(f[i+1]), 10, 64)
		if err != nil {
			return CPU{}, fmt.Errorf("%w: cpu field %d: %w", ErrMalformed, i+1, err)
		}
		v[i] = n
	}
	return CPU{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
}

// Stat is what the callers read of a /proc/<pid>/stat line. The times
// are in UserHZ ticks: the start time since boot, the CPU times summed
// over the process's threads.
type Stat struct {
	PID, PPID int
	// Start tells a process from a later one given the same pid.
	Start uint64
	// UTime and STime are the process's own user and system time,
	// CUTime and CSTime those of its children that it has waited for.
	UTime, STime, CUTime, CSTime uint64
}

// Ticks is the CPU the process used itself, user and system.
func (s Stat) Ticks() uint64 { return s.UTime + s.STime }

// TicksWithChildren is Ticks and the CPU of the children it reaped, so
// that the CPU of a child that exited stays counted.
func (s Stat) TicksWithChildren() uint64 { return s.Ticks() + s.CUTime + s.CSTime }

// KernelThread reports whether the process is a kernel thread: kthreadd
// or one of its children.
func (s Stat) KernelThread() bool { return s.PID == KThreadd || s.PPID == KThreadd }

// Stat reads /proc/<pid>/stat.
func (fs FS) Stat(pid int) (Stat, error) {
	name := strconv.Itoa(pid)
	b, err := fs.read(name, "stat")
	if err != nil {
		return Stat{}, err
	}
	st, err := parseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("procfs: %s: %w", filepath.Join(string(fs), name, "stat"), err)
	}
	return st, nil
}

// parseStat reads a /proc/<pid>/stat line. The command name (field 2) is
// in parentheses and may hold spaces and parentheses itself, so the
// fields are counted after the line's last ')'. (A line cut short inside
// the name cannot pass for a whole one: the name has at most 15 bytes,
// too few to hold the 20 fields wanted after it.)
func parseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("%w: a stat line without a (command name)", ErrMalformed)
	}
	f := bytes.Fields(b[end+1:])
	// f[0] is field 3 (state), f[1] field 4 (ppid); utime, stime, cutime
	// and cstime are fields 14 to 17, starttime field 22.
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("%w: a stat line with %d fields after the command name, want 20 at least", ErrMalformed, len(f))
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("%w: pid: %w", ErrMalformed, err)
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return Stat{}, fmt.Errorf("%w: ppid: %w", ErrMalformed, err)
	}
	st := Stat{PID: pid, PPID: ppid}
	for _, v := range []struct {
		to    *uint64
		field int
	}{{&st.UTime, 14}, {&st.STime, 15}, {&st.CUTime, 16}, {&st.CSTime, 17}, {&st.Start, 22}} {
		n, err := strconv.ParseUint(string(f[v.field-3]), 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("%w: field %d: %w", ErrMalformed, v.field, err)
		}
		*v.to = n
	}
	return st, nil
}

// Procs is the stat of every process, by pid.
type Procs map[int]Stat

// Procs reads the stat of every process listed in /proc, each once. A
// process whose stat cannot be read (it exited after the listing) is
// left out; one whose stat is malformed fails the whole.
func (fs FS) Procs() (Procs, error) {
	entries, err := os.ReadDir(string(fs))
	if err != nil {
		return nil, fmt.Errorf("procfs: %w", err)
	}
	procs := Procs{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		st, err := fs.Stat(pid)
		if errors.Is(err, ErrMalformed) {
			return nil, err
		}
		if err != nil {
			continue // gone meanwhile
		}
		procs[pid] = st
	}
	return procs, nil
}

// InTree reports whether pid is root or descends from it, walking up the
// parents in p. A process missing from p (exited), or init, ends the
// walk, and so does a bound of 64 hops: pids reused while p was read may
// make a loop of parents.
func (p Procs) InTree(pid, root int) bool {
	for range maxHops {
		if pid == root {
			return true
		}
		st, ok := p[pid]
		if !ok || pid <= 1 {
			return false
		}
		pid = st.PPID
	}
	return false
}

// WriteBytes reads write_bytes from /proc/<pid>/io: the bytes the
// process caused to be sent to storage, counted when it dirtied the
// pages. Only the process's owner (or root) may read it.
func (fs FS) WriteBytes(pid int) (uint64, error) {
	name := strconv.Itoa(pid)
	b, err := fs.read(name, "io")
	if err != nil {
		return 0, err
	}
	w, err := parseWriteBytes(b)
	if err != nil {
		return 0, fmt.Errorf("procfs: %s: %w", filepath.Join(string(fs), name, "io"), err)
	}
	return w, nil
}

func parseWriteBytes(b []byte) (uint64, error) {
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("write_bytes:")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: write_bytes: %w", ErrMalformed, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: no write_bytes line", ErrMalformed)
}

// SectorsWritten sums the sectors written (the tenth field of
// /proc/diskstats, in SectorBytes units) of the devices that disk
// accepts by name.
func (fs FS) SectorsWritten(disk func(name string) bool) (uint64, error) {
	b, err := fs.read("diskstats")
	if err != nil {
		return 0, err
	}
	n, err := parseDiskstats(b, disk)
	if err != nil {
		return 0, fmt.Errorf("procfs: %s: %w", filepath.Join(string(fs), "diskstats"), err)
	}
	return n, nil
}

func parseDiskstats(b []byte, disk func(string) bool) (uint64, error) {
	var sum uint64
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 10 {
			return 0, fmt.Errorf("%w: line %q has %d fields", ErrMalformed, bytes.TrimSpace(line), len(f))
		}
		if !disk(string(f[2])) {
			continue
		}
		n, err := strconv.ParseUint(string(f[9]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %w", ErrMalformed, f[2], err)
		}
		sum += n
	}
	return sum, nil
}

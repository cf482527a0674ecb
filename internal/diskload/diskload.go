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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"paxcron/internal/procfs"
)

// procFS is where the process and device counters are read; a variable
// so that tests can give a fixed tree.
var procFS = procfs.Host

// sysBlock lists the block devices; one with a "device" entry is backed
// by hardware (or a hypervisor's disk), not a loop, RAM or mapper device
// layered over one, which would count the same bytes twice.
var sysBlock = "/sys/block"

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
	procs, err := procFS.Procs()
	if err != nil {
		return s, fmt.Errorf("diskload: %w", err)
	}
	for pid, st := range procs {
		if st.KernelThread() {
			continue
		}
		w, err := procFS.WriteBytes(pid)
		if errors.Is(err, procfs.ErrMalformed) {
			return s, fmt.Errorf("diskload: %w", err)
		}
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		if procs.InTree(pid, root) {
			s.Ours += w
		} else {
			s.others[proc{pid, st.Start}] = w
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

// deviceBytes sums the bytes written by the machine's disks.
func deviceBytes() (uint64, error) {
	n, err := procFS.SectorsWritten(isDisk)
	if err != nil {
		return 0, fmt.Errorf("diskload: %w", err)
	}
	return n * procfs.SectorBytes, nil
}

func isDisk(name string) bool {
	_, err := os.Stat(filepath.Join(sysBlock, name, "device"))
	return err == nil
}

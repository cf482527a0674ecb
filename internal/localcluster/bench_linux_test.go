//go:build linux

package localcluster_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkRawSyncedOverwrite times one durable 640-byte write (about a
// job write's WAL record) into a file whose blocks were written and
// synced before, as a recycled or written-through WAL's are, three ways:
// write then fdatasync (what Pebble does), a write to a file opened
// O_DSYNC, and pwritev2 with RWF_DSYNC. It asks whether the sync itself
// could be had cheaper than Pebble's; its p50-ms and p99-ms are the
// disk's own latency, with nothing else of ours running.
func BenchmarkRawSyncedOverwrite(b *testing.B) {
	record := make([]byte, 640)
	for _, c := range []struct {
		name  string
		flags int
		write func(fd int, off int64) error
	}{
		{"fdatasync", 0, func(fd int, off int64) error {
			if _, err := unix.Pwrite(fd, record, off); err != nil {
				return err
			}
			return unix.Fdatasync(fd)
		}},
		{"o_dsync", unix.O_DSYNC, func(fd int, off int64) error {
			_, err := unix.Pwrite(fd, record, off)
			return err
		}},
		{"rwf_dsync", 0, func(fd int, off int64) error {
			_, err := unix.Pwritev2(fd, [][]byte{record}, off, unix.RWF_DSYNC)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "written-through")
			if err := os.WriteFile(path, make([]byte, 64<<20), 0o644); err != nil {
				b.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR|c.flags, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			fd := int(f.Fd())
			var off int64
			var took []time.Duration
			began := time.Now()
			for b.Loop() {
				start := time.Now()
				if err := c.write(fd, off); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
				off = (off + int64(len(record))) % (64<<20 - int64(len(record)))
			}
			b.StopTimer()
			reportRate(b, len(took), time.Since(began), "writes/s", took)
		})
	}
}

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSystem acknowledges every write at once, or fails them all.
type fakeSystem struct {
	started, stopped atomic.Int32
	writes           atomic.Int64
	fail             bool
}

func (f *fakeSystem) start(context.Context, string) error { f.started.Add(1); return nil }
func (f *fakeSystem) write(context.Context, int, uint64) error {
	f.writes.Add(1)
	runtime.Gosched()
	if f.fail {
		return errors.New("refused")
	}
	return nil
}
func (f *fakeSystem) serverPIDs() []int { return nil }
func (f *fakeSystem) stop() error       { f.stopped.Add(1); return nil }

func newTestSuite(maxOthers float64, retries int, fail bool) (*suite, *fakeSystem) {
	fake := &fakeSystem{fail: fail}
	s := &suite{
		cfg: etcdConfig{Reps: 1, Clients: []int{2}, Systems: []string{sysEtcd}, Warmup: 10 * time.Millisecond, Window: 100 * time.Millisecond,
			MaxOthersCores: maxOthers, MaxOthersWriteMBps: 1e9, Retries: retries},
		// Any machine counts as quiet before the run.
		guard:     &guard{NCPU: runtime.NumCPU(), QuietCores: 1e9, QuietWriteMBps: 1e9, Window: 10 * time.Millisecond, MaxWait: time.Second},
		log:       func(string, ...any) {},
		newSystem: func(string, int) (system, error) { return fake, nil },
	}
	return s, fake
}

func TestSuiteKeepsAnUndisturbedRun(t *testing.T) {
	s, fake := newTestSuite(1e9, 2, false)
	if err := s.run(context.Background(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if len(s.runs) != 1 || !s.runs[0].Kept || s.runs[0].Disturbed {
		t.Fatalf("runs: %+v", s.runs)
	}
	r := s.runs[0]
	if r.Writes == 0 || r.Writes > int(fake.writes.Load()) || r.WritesPerSec <= 0 || r.Errors != 0 || !r.InProcess {
		t.Errorf("run: %+v (the fake saw %d writes)", r, fake.writes.Load())
	}
	if fake.started.Load() != 1 || fake.stopped.Load() < 1 {
		t.Errorf("started %d, stopped %d", fake.started.Load(), fake.stopped.Load())
	}
}

// With a limit no run can meet, every run is disturbed: it is redone
// Retries times and the last attempt kept, marked disturbed.
func TestSuiteRedoesADisturbedRun(t *testing.T) {
	s, fake := newTestSuite(-1, 2, false)
	if err := s.run(context.Background(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if len(s.runs) != 3 || fake.started.Load() != 3 {
		t.Fatalf("%d runs, %d starts; want 3 (1 + 2 retries)", len(s.runs), fake.started.Load())
	}
	for i, r := range s.runs {
		if !r.Disturbed || r.Attempt != i+1 || r.Kept != (i == 2) {
			t.Errorf("attempt %d: %+v", i+1, r)
		}
	}
}

// Others' disk writes disturb a run as their CPU does: with a limit no
// run can meet, during the run or before it, every run is redone.
func TestSuiteRedoesARunDisturbedByDiskWrites(t *testing.T) {
	for _, during := range []bool{true, false} {
		s, fake := newTestSuite(1e9, 1, false)
		if during {
			s.cfg.MaxOthersWriteMBps = -1
		} else {
			s.guard.QuietWriteMBps, s.guard.MaxWait = -1, 50*time.Millisecond
		}
		if err := s.run(context.Background(), t.TempDir()); err != nil {
			t.Fatal(err)
		}
		if len(s.runs) != 2 || fake.started.Load() != 2 {
			t.Fatalf("during %v: %d runs, %d starts; want 2 (1 + 1 retry)", during, len(s.runs), fake.started.Load())
		}
		for i, r := range s.runs {
			if !r.Disturbed || r.QuietBefore == !during || r.OthersWriteMBps == nil || r.DeviceWriteMBps == nil {
				t.Errorf("during %v, attempt %d: %+v", during, i+1, r)
			}
		}
	}
}

func TestSuiteCountsErrors(t *testing.T) {
	s, _ := newTestSuite(1e9, 0, true)
	if err := s.run(context.Background(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	r := s.runs[0]
	if r.Writes != 0 || r.Errors == 0 || r.FirstError != "refused" {
		t.Errorf("run: %+v", r)
	}
}

func TestKeepLogsCopiesTheServersLogs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "paxcron-1.log"), []byte("stopped leading\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	kept, err := keepLogs(dir)
	if err != nil || kept == "" {
		t.Fatalf("keepLogs: %q, %v", kept, err)
	}
	defer os.RemoveAll(kept)
	if b, err := os.ReadFile(filepath.Join(kept, "paxcron-1.log")); err != nil || string(b) != "stopped leading\n" {
		t.Errorf("kept log: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(kept, "data.bin")); err == nil {
		t.Error("a data file was kept too")
	}
	if kept, err := keepLogs(t.TempDir()); kept != "" || err != nil {
		t.Errorf("no logs: %q, %v; want nothing", kept, err)
	}
}

// Each system goes first in turn: etcd went first at every concurrency
// of every repetition, straight after the replicated log's heaviest load.
func TestSuiteTurnsTheOrderEachRepetition(t *testing.T) {
	s, _ := newTestSuite(1e9, 0, false)
	s.cfg.Reps, s.cfg.Clients = 4, []int{1, 2}
	s.cfg.Systems = []string{sysEtcd, sysPaxcronAPI, sysPaxcronLog}
	s.cfg.Warmup, s.cfg.Window = time.Millisecond, 5*time.Millisecond
	if err := s.run(context.Background(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.runs {
		got = append(got, r.System)
	}
	e, a, l := sysEtcd, sysPaxcronAPI, sysPaxcronLog
	want := []string{e, a, l, e, a, l, a, l, e, a, l, e, l, e, a, l, e, a, e, a, l, e, a, l}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

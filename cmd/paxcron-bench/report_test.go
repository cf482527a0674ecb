package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// syntheticRuns: two repetitions at 1 and 8 clients. At 1 client paxcron
// doubles etcd with a lower p99 (goal met); at 8 its throughput is 1.2x
// (not met). One etcd run at 8 clients was redone.
func syntheticRuns() []runRecord {
	r := func(rep, clients int, sys string, wps, p50, p99 float64) runRecord {
		return runRecord{Rep: rep, Clients: clients, System: sys, Attempt: 1, Kept: true,
			Writes: int(wps * 10), WindowSec: 10, WritesPerSec: wps, P50Ms: p50, P99Ms: p99,
			ServerCPUSec: wps * 10 * 200e-6, ClientCPUSec: wps * 10 * 50e-6, OthersCores: 0.01}
	}
	disturbed := r(1, 8, sysEtcd, 900, 5, 20)
	disturbed.Kept, disturbed.Disturbed, disturbed.OthersCores = false, true, 0.9
	return []runRecord{
		r(1, 1, sysEtcd, 800, 1, 2.4), r(1, 1, sysPaxcronAPI, 1600, 0.5, 1.2),
		r(2, 1, sysEtcd, 1000, 1, 2.0), r(2, 1, sysPaxcronAPI, 2200, 0.5, 1.0),
		disturbed,
		r(1, 8, sysEtcd, 2000, 4, 10), r(1, 8, sysPaxcronAPI, 2400, 3, 9),
		r(2, 8, sysEtcd, 2200, 4, 12), r(2, 8, sysPaxcronAPI, 2640, 3, 10),
	}
}

func TestSummarize(t *testing.T) {
	s := summarize(syntheticRuns(), []int{1, 8}, []string{sysEtcd, sysPaxcronAPI})
	e1 := s.Cells[cellKey{sysEtcd, 1}]
	if e1.Throughput != (stat{Med: 900, Lo: 800, Hi: 1000, N: 2}) {
		t.Errorf("etcd at 1: throughput %+v", e1.Throughput)
	}
	if got := e1.ServerCPU.Med; got < 199.99 || got > 200.01 {
		t.Errorf("etcd at 1: server CPU/write %v µs, want 200", got)
	}
	r1 := s.Ratios[cellKey{sysPaxcronAPI, 1}]
	// Paired: 1600/800 = 2.0 and 2200/1000 = 2.2; p99 0.5 and 0.5.
	if r1.Throughput.Med < 2.0999 || r1.Throughput.Med > 2.1001 || r1.Throughput.Lo != 2.0 || r1.P99.Med != 0.5 {
		t.Errorf("ratios at 1: %+v", r1)
	}
	if !r1.met() {
		t.Errorf("goal at 1 should be met: %+v", r1)
	}
	r8 := s.Ratios[cellKey{sysPaxcronAPI, 8}]
	if r8.met() || r8.Throughput.Med < 1.1999 || r8.Throughput.Med > 1.2001 {
		t.Errorf("goal at 8 should not be met at 1.2x: %+v", r8)
	}
	e8 := s.Cells[cellKey{sysEtcd, 8}]
	if e8.Redone != 1 || e8.Throughput.N != 2 || e8.Throughput.Lo != 2000 {
		t.Errorf("etcd at 8: the redone run must be counted apart, not in the figures: %+v", e8)
	}
	if _, ok := s.Ratios[cellKey{sysEtcd, 1}]; ok {
		t.Error("etcd has a ratio to itself")
	}
}

func TestRenderMarkdown(t *testing.T) {
	cfg := etcdConfig{Reps: 2, Clients: []int{1, 8}, Systems: []string{sysEtcd, sysPaxcronAPI}, Warmup: time.Second, Window: 10 * time.Second,
		APITarget: targetSpread, QuietCores: 0.1, QuietWait: time.Minute, MaxOthersCores: 0.2, Retries: 2}
	m := reportMeta{Command: "paxcron-bench etcd -reps 2", Machine: "Test CPU, 2 CPUs", Commit: "abc1234", Config: cfg,
		Started: time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC), Ended: time.Date(2026, 11, 25, 4, 10, 0, 0, time.UTC)}
	md := renderMarkdown(m, summarize(syntheticRuns(), cfg.Clients, cfg.Systems))
	for _, want := range []string{
		"paxcron-bench etcd -reps 2",
		"Commit abc1234",
		"| clients | etcd | paxcron API | paxcron API / etcd |\n|---|---|---|---|\n",
		"| 1 | 900 (800-1,000) | 1,900 (1,600-2,200) | **2.10** (2.00-2.20) |",
		"| 8 | 2,100 (2,000-2,200) | 2,520 (2,400-2,640) | **1.20** (1.20-1.20) |",
		"| 1 | met (2.10x, p99 0.50x) |",
		"| 8 | **not met** (1.20x, p99 0.87x) |",
		"| 8 | etcd | 0.01 (max 0.01) | 0.00 | 1 | 0 | 0 |",
		"round robin over the three replicas",
		"![writes/s against clients](etcd-throughput.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	// Every table row has as many cells as its header.
	var header int
	for line := range strings.SplitSeq(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			header = 0
			continue
		}
		n := strings.Count(line, "|")
		if header == 0 {
			header = n
		} else if n != header {
			t.Errorf("row %q has %d bars, its header %d", line, n, header)
		}
	}
}

func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	cfg := etcdConfig{Reps: 2, Clients: []int{1, 8}, Systems: []string{sysEtcd, sysPaxcronAPI}}
	if err := writeReport(dir, reportMeta{Config: cfg}, syntheticRuns()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"etcd.md", "etcd.json", "etcd-throughput.png", "etcd-p99.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "etcd.json"))
	if !strings.Contains(string(raw), `"disturbed": true`) {
		t.Error("etcd.json lacks the redone, disturbed run")
	}
}

// Runs that recorded others' disk writes get the column and the guard's
// limits in the set-up; older runs, without either, render as before
// (TestRenderMarkdown, TestEtcdReportRendersAgainFromTheRuns).
func TestRenderMarkdownWithDiskWrites(t *testing.T) {
	cfg := etcdConfig{Reps: 2, Clients: []int{1, 8}, Systems: []string{sysEtcd, sysPaxcronAPI}, Warmup: time.Second, Window: 10 * time.Second,
		QuietCores: 0.1, QuietWait: time.Minute, MaxOthersCores: 0.2, Retries: 2, QuietWriteMBps: 1, MaxOthersWriteMBps: 2}
	runs := syntheticRuns()
	for i := range runs {
		w, d := 0.5*float64(runs[i].Rep), 9.0
		runs[i].OthersWriteMBps, runs[i].DeviceWriteMBps = &w, &d
	}
	md := renderMarkdown(reportMeta{Config: cfg}, summarize(runs, cfg.Clients, cfg.Systems))
	for _, want := range []string{
		"write at most 1.0 MB/s to disk over 1 s; a run in which they used more than 0.20 cores or wrote more than 2.0 MB/s is redone",
		"| clients | system | others' CPU | others' disk writes | kernel threads | redone | disturbed | errors |",
		"| 8 | etcd | 0.01 (max 0.01) | 0.8 (max 1.0) | 0.00 | 1 | 0 | 0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

func TestCommas(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
}

// The CPU table's total is the median of each run's servers + client
// CPU per write, not the sum of the two columns' medians, which can
// belong to different runs.
func TestSummarizeTotalCPUIsTheMedianOfEachRunsTotal(t *testing.T) {
	run := func(rep int, server, client float64) runRecord {
		return runRecord{Rep: rep, Clients: 1, System: sysEtcd, Kept: true, Writes: 1000, WindowSec: 10, WritesPerSec: 100,
			P50Ms: 1, P99Ms: 2, ServerCPUSec: server * 1000e-6, ClientCPUSec: client * 1000e-6}
	}
	// Per write: servers 100, 200, 1000 µs; client 1000, 200, 100 µs:
	// totals 1100, 400, 1100 (median 1100); the medians' sum is 400.
	runs := []runRecord{run(1, 100, 1000), run(2, 200, 200), run(3, 1000, 100)}
	s := summarize(runs, []int{1}, []string{sysEtcd})
	if got := s.Cells[cellKey{sysEtcd, 1}].TotalCPU.Med; got < 1099.9 || got > 1100.1 {
		t.Errorf("total CPU per write: median %v µs, want 1100", got)
	}
	md := renderMarkdown(reportMeta{Config: etcdConfig{Systems: []string{sysEtcd}, Clients: []int{1}}}, s)
	if !strings.Contains(md, "| 1 | 200 | 200 | 1100 |") {
		t.Errorf("the CPU table's total is not the median of the runs' totals:\n%s", md)
	}
}

// A run that acknowledged no write has no latency: it must not enter the
// p99 figures as 0 ms, better than any real run.
func TestSummarizeARunWithoutWritesHasNoGoodP99(t *testing.T) {
	r := func(rep int, sys string, writes int, p99 float64) runRecord {
		return runRecord{Rep: rep, Clients: 1, System: sys, Kept: true, Writes: writes, WindowSec: 10,
			WritesPerSec: float64(writes) / 10, P50Ms: p99 / 2, P99Ms: p99}
	}
	var runs []runRecord
	for rep := 1; rep <= 4; rep++ {
		runs = append(runs, r(rep, sysEtcd, 10000, 4))
	}
	// paxcron: three runs with p99s of 1.1, 2 and 3 times etcd's, and one
	// that failed every write (its p99 recorded as 0).
	runs = append(runs, r(1, sysPaxcronAPI, 20000, 4.4), r(2, sysPaxcronAPI, 20000, 8), r(3, sysPaxcronAPI, 20000, 12), r(4, sysPaxcronAPI, 0, 0))
	s := summarize(runs, []int{1}, []string{sysEtcd, sysPaxcronAPI})
	if got := s.Ratios[cellKey{sysPaxcronAPI, 1}].P99.Med; got < 2 {
		t.Errorf("p99 ratio median %v: the failed run counted as a 0 ms p99", got)
	}
	if got := s.Cells[cellKey{sysPaxcronAPI, 1}].P99.Med; got < 8 {
		t.Errorf("p99 median %v ms: the failed run counted as a 0 ms p99", got)
	}
	if err := writeReport(t.TempDir(), reportMeta{Config: etcdConfig{Systems: []string{sysEtcd, sysPaxcronAPI}, Clients: []int{1}}}, runs); err != nil {
		t.Errorf("writeReport: %v", err)
	}
}

// The whole machine's CPU per write adds to the processes' own what no
// process is charged with: kernel threads and interrupts over the window
// (etcd's forwarding crosses more loopback sockets, whose receive runs in
// softirq), and others' little.
func TestMachineCPUPerWriteCountsWhatNoProcessIsChargedWith(t *testing.T) {
	r := runRecord{Rep: 1, Clients: 1, System: sysEtcd, Kept: true, Writes: 1000, WindowSec: 10, WritesPerSec: 100, P50Ms: 1, P99Ms: 2,
		ServerCPUSec: 0.5, ClientCPUSec: 0.1, KernelCores: 0.02, InterruptCores: 0.03, OthersCores: 0.01}
	// (0.5 + 0.1 + (0.02 + 0.03 + 0.01) * 10) s / 1000 writes = 1200 µs.
	if got := r.machineCPUPerWrite(); got < 1199.9 || got > 1200.1 {
		t.Errorf("machine CPU per write %v µs, want 1200", got)
	}
	s := summarize([]runRecord{r}, []int{1}, []string{sysEtcd})
	md := renderMarkdown(reportMeta{Config: etcdConfig{Systems: []string{sysEtcd}, Clients: []int{1}}}, s)
	if !strings.Contains(md, "The whole machine's CPU per write") || !strings.Contains(md, "| 1 | 1200 |") {
		t.Errorf("no whole-machine CPU table with 1200 µs:\n%s", md)
	}
}

// etcd-report renders a suite's report again from its etcd.json, tables
// added since included, and refuses a folder without runs.
func TestEtcdReportRendersAgainFromTheRuns(t *testing.T) {
	dir := t.TempDir()
	runs := []runRecord{{Rep: 1, Clients: 1, System: sysEtcd, Kept: true, Writes: 1000, WindowSec: 10, WritesPerSec: 100,
		P50Ms: 1, P99Ms: 2, ServerCPUSec: 0.5, ClientCPUSec: 0.1, KernelCores: 0.05, InterruptCores: 0.01}}
	if err := writeReport(dir, reportMeta{Config: etcdConfig{Systems: []string{sysEtcd}, Clients: []int{1}}}, runs); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "etcd.md")); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := run([]string{"etcd-report", dir}, &out, &errOut); code != 0 {
		t.Fatalf("etcd-report: exit %d: %s", code, errOut.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "etcd.md"))
	if err != nil || !strings.Contains(string(md), "| 1 | 1200 |") {
		t.Errorf("the report rendered again lacks the whole machine's 1200 µs per write (%v):\n%s", err, md)
	}
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "etcd.json"), []byte(`{"runs":[]}`), 0o644)
	if code := run([]string{"etcd-report", empty}, &out, &errOut); code != 1 {
		t.Errorf("etcd-report of a folder without runs: exit %d, want 1", code)
	}
}

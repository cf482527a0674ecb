package scalebench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"math"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// pb is a minimal protobuf writer for the test profiles.
type pb []byte

func (b pb) varint(num int, v uint64) pb {
	b = binary.AppendUvarint(b, uint64(num)<<3|wireVarint)
	return binary.AppendUvarint(b, v)
}

func (b pb) bytes(num int, v []byte) pb {
	b = binary.AppendUvarint(b, uint64(num)<<3|wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func (b pb) packed(num int, vs ...uint64) pb {
	var body []byte
	for _, v := range vs {
		body = binary.AppendUvarint(body, v)
	}
	return b.bytes(num, body)
}

func gzipped(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestParseLabelCPU sums a hand-built profile: sample types in either
// order, values packed and not, samples with the label, with another
// label only, and with none, and fields the parser must skip.
func TestParseLabelCPU(t *testing.T) {
	// String table: 0 "", 1 "samples", 2 "count", 3 "cpu", 4 "nanoseconds",
	// 5 "replica", 6 "1", 7 "2", 8 "other", 9 "x".
	strs := []string{"", "samples", "count", "cpu", "nanoseconds", "replica", "1", "2", "other", "x"}
	label := func(k, v uint64) []byte { return pb(nil).varint(1, k).varint(2, v) }
	var p pb
	p = p.bytes(1, pb(nil).varint(1, 1).varint(2, 2)) // samples/count
	p = p.bytes(1, pb(nil).varint(1, 3).varint(2, 4)) // cpu/nanoseconds
	p = p.bytes(2, pb(nil).packed(1, 7, 8).packed(2, 1, 10_000_000).bytes(3, label(5, 6)))
	p = p.bytes(2, pb(nil).varint(2, 3).varint(2, 30_000_000).bytes(3, label(8, 9)).bytes(3, label(5, 7)))
	p = p.bytes(2, pb(nil).packed(2, 2, 20_000_000).bytes(3, label(5, 6)))
	p = p.bytes(2, pb(nil).packed(2, 5, 50_000_000).bytes(3, label(8, 9)))
	p = p.bytes(2, pb(nil).packed(2, 4, 40_000_000))
	p = p.varint(9, 123456) // time_nanos, skipped
	for _, s := range strs {
		p = p.bytes(6, []byte(s))
	}
	got, err := ParseLabelCPU(gzipped(t, p), "replica")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"1": 30 * time.Millisecond, "2": 30 * time.Millisecond}
	if len(got.ByValue) != len(want) || got.ByValue["1"] != want["1"] || got.ByValue["2"] != want["2"] {
		t.Errorf("ByValue = %v, want %v", got.ByValue, want)
	}
	if got.Unlabelled != 90*time.Millisecond || got.Total() != 150*time.Millisecond {
		t.Errorf("Unlabelled %v, Total %v; want 90ms, 150ms", got.Unlabelled, got.Total())
	}
}

func TestParseLabelCPURefuses(t *testing.T) {
	noCPU := pb(nil).bytes(1, pb(nil).varint(1, 1)).bytes(6, nil).bytes(6, []byte("samples"))
	badIndex := pb(nil).bytes(1, pb(nil).varint(1, 7)).bytes(6, nil)
	truncated := pb(nil).bytes(2, []byte{0x12, 0x05, 0x01})
	for name, raw := range map[string][]byte{"no cpu type": noCPU, "string index": badIndex, "truncated": truncated} {
		if _, err := ParseLabelCPU(gzipped(t, raw), "replica"); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
	if _, err := ParseLabelCPU([]byte("not gzip"), "replica"); err == nil {
		t.Error("a profile that is not gzipped parsed")
	}
}

// TestParseLabelCPUReadsRuntimeProfiles parses what runtime/pprof writes:
// whatever samples it took, a labelled goroutine's carry its value only.
func TestParseLabelCPUReadsRuntimeProfiles(t *testing.T) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Skipf("CPU profiling unavailable: %v", err)
	}
	done := make(chan uint64)
	go pprof.Do(context.Background(), pprof.Labels("replica", "7"), func(context.Context) {
		x := uint64(1)
		for i := range 50_000_000 {
			x = x*6364136223846793005 + uint64(i)
		}
		done <- x
	})
	<-done
	pprof.StopCPUProfile()
	got, err := ParseLabelCPU(buf.Bytes(), "replica")
	if err != nil {
		t.Fatal(err)
	}
	for v := range got.ByValue {
		if v != "7" {
			t.Errorf("label value %q, want only \"7\"", v)
		}
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{ms(5), 50, 5 * time.Millisecond},
		{ms(5), 99, 5 * time.Millisecond},
		{ms(1, 2), 50, 1 * time.Millisecond},
		{ms(1, 2, 3), 50, 2 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond},
		{ms(hundred...), 50, 50 * time.Millisecond},
		{ms(hundred...), 100, 100 * time.Millisecond},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("percentile(%d values, %d) = %v, want %v", len(tc.sorted), tc.p, got, tc.want)
		}
	}
}

// TestSummarizeSteady checks the rates against windows worked out by hand.
func TestSummarizeSteady(t *testing.T) {
	s := &Steady{Windows: []Window{
		{Wall: 2 * time.Second, Replica: [4]time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond, 20 * time.Millisecond},
			Unlabelled: 200 * time.Millisecond, Process: 800 * time.Millisecond, Launches: 300, RSSBytes: 5, HeapBytes: 9},
		{Wall: 2 * time.Second, Replica: [4]time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond, 60 * time.Millisecond},
			Unlabelled: 200 * time.Millisecond, Process: 800 * time.Millisecond, Launches: 367, RSSBytes: 7, HeapBytes: 3,
			GC: 400 * time.Millisecond, GCAssist: 100 * time.Millisecond, GCCycles: 1},
		{Wall: 4 * time.Second, Replica: [4]time.Duration{0, 0, 80 * time.Millisecond, 0}},
	}}
	summarizeSteady(s, 2) // replica 2 leads
	near := func(got, want float64) bool { return got > want-1e-9 && got < want+1e-9 }
	// 8 s: leader 880 ms (windows at 0.2, 0.2, 0.02 cores), followers
	// 280 ms (140 each), unlabelled 400 ms, GC 400 ms with 100 ms assists.
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"LeaderCores", s.LeaderCores, 0.11},
		{"LeaderMedianCores", s.LeaderMedianCores, 0.2},
		{"FollowerCores", s.FollowerCores, 0.0175},
		{"UnlabelledCores", s.UnlabelledCores, 0.05},
		{"ProcessCores", s.ProcessCores, 0.2},
		{"LeaderAttributedCores", s.LeaderAttributedCores, 0.11 + 0.05*880.0/1160.0},
		{"LaunchesPerMinute", s.LaunchesPerMinute, 667 * 7.5},
		{"GCCores", s.GCCores, 0.05},
		{"GCAssistCores", s.GCAssistCores, 0.0125},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.MaxRSSBytes != 7 || s.MaxHeapBytes != 9 || s.GCCycles != 1 {
		t.Errorf("MaxRSSBytes %d, MaxHeapBytes %d, GCCycles %d; want 7, 9, 1", s.MaxRSSBytes, s.MaxHeapBytes, s.GCCycles)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1_000_000: "1,000,000", -12345: "-12,345"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestQuickRun runs the whole harness at a small size (the code path of
// the full benchmark, in seconds) and checks what it reports against what
// the cluster holds: every figure that a count or a decode can confirm.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-replica cluster on disk for about ten seconds")
	}
	cfg := DefaultConfig(t.TempDir())
	cfg.Jobs, cfg.MinutelyJobs = 20_000, 10_000
	cfg.Warmup, cfg.Steady, cfg.Window = 2*time.Second, 3*time.Second, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Snap.Jobs != cfg.Jobs || res.Restart.Jobs != cfg.Jobs {
		t.Errorf("the leader's snapshot holds %d jobs, the restarted follower %d; want %d", res.Snap.Jobs, res.Restart.Jobs, cfg.Jobs)
	}
	if res.Snap.Bytes <= 0 || res.Snap.Index <= uint64(cfg.Jobs) {
		t.Errorf("snapshot of %d bytes at %d: want bytes, past the seeded index %d", res.Snap.Bytes, res.Snap.Index, cfg.Jobs)
	}
	if r := res.Restart; r.ID == res.Leader || r.SnapshotIndex != uint64(cfg.Jobs) || r.LogEntries == 0 {
		t.Errorf("restart %+v: want a follower of %d, from the seeded snapshot at %d and the log after it", r, res.Leader, cfg.Jobs)
	}
	if r := res.Rebuild; r.ID == res.Leader || r.Jobs != cfg.Jobs || r.CaughtUp <= 0 {
		t.Errorf("rebuild %+v: want a follower of %d caught up from the leader's snapshot, with %d jobs", r, res.Leader, cfg.Jobs)
	}
	if res.Memory.FollowerHeap <= 0 || res.Memory.Heap <= res.Memory.BaselineHeap {
		t.Errorf("memory %+v: want a follower's heap, and the process's above its baseline", res.Memory)
	}
	s := res.Steady
	if len(s.Windows) == 0 || s.Wall < cfg.Steady {
		t.Fatalf("%d windows over %v, want at least %v", len(s.Windows), s.Wall, cfg.Steady)
	}
	var launches int64
	var wall time.Duration
	for _, w := range s.Windows {
		launches += w.Launches
		wall += w.Wall
		if w.Replica[0] != 0 {
			t.Errorf("window %+v: CPU under replica 0", w)
		}
	}
	if got := float64(launches) / wall.Minutes(); got != s.LaunchesPerMinute {
		t.Errorf("LaunchesPerMinute %v, the windows say %v", s.LaunchesPerMinute, got)
	}
	// The fake Nomad never fails a call, so a token is dispatched once,
	// and nobody needs a lookup unless the leadership moved.
	if s.DispatchRepeats != 0 || (s.LeaderChanges == 0 && s.OtherCalls != 0) {
		t.Errorf("%d repeated dispatches, %d other calls with %d leader changes", s.DispatchRepeats, s.OtherCalls, s.LeaderChanges)
	}
	if s.Dispatches > 0 && (s.LateP50 > s.LateP99 || s.LateP99 > s.LateMax) {
		t.Errorf("lateness p50 %v, p99 %v, max %v out of order", s.LateP50, s.LateP99, s.LateMax)
	}
	if err := Chart(res).Validate(); err != nil {
		t.Error(err)
	}
	md := Markdown(res, ReportMeta{Command: "go test", Machine: "m", Commit: "c", GoVersion: "go", Date: time.Now()})
	for _, want := range []string{"20,000 jobs", "| **leader CPU** |", "| **restart of a follower** |", "| **rebuild of a follower** |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// longestSince names the highest bucket of a pause histogram that gained a
// count, by its upper bound (its lower one for the last, unbounded one).
func TestLongestSince(t *testing.T) {
	h := func(counts ...uint64) *metrics.Float64Histogram {
		return &metrics.Float64Histogram{Counts: counts, Buckets: []float64{0, 0.001, 0.1, 0.5, math.Inf(1)}}
	}
	for _, c := range []struct {
		before, after *metrics.Float64Histogram
		want          time.Duration
	}{
		{h(1, 2, 0, 0), h(1, 2, 0, 0), 0},
		{h(1, 2, 0, 0), h(5, 3, 0, 0), 100 * time.Millisecond},
		{h(1, 2, 0, 0), h(1, 2, 1, 0), 500 * time.Millisecond},
		{h(1, 2, 0, 1), h(1, 2, 1, 2), 500 * time.Millisecond},
	} {
		if got := longestSince(c.before, c.after); got != c.want {
			t.Errorf("longestSince(%v, %v) = %v, want %v", c.before.Counts, c.after.Counts, got, c.want)
		}
	}
	r := gcReading{cycles: 3, stopping: h(0, 0, 0, 0), total: h(0, 0, 0, 0)}
	later := gcReading{cycles: 4, stopping: h(0, 1, 0, 0), total: h(0, 0, 0, 1)}
	if got, want := r.describe(later), "1 GC cycles ended meanwhile; longest stop-the-world up to 500ms, of which stopping up to 100ms"; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
}

// TestStallTraces: a stop-the-world shorter than stallTraceAfter writes
// nothing; longer ones each write the flight recorder's window, up to
// maxStallTraces, and say where in the events.
func TestStallTraces(t *testing.T) {
	dir := t.TempDir()
	m := &monitor{traceDir: dir, logf: t.Logf, recorder: trace.NewFlightRecorder(trace.FlightRecorderConfig{})}
	if err := m.recorder.Start(); err != nil {
		t.Fatal(err)
	}
	defer m.recorder.Stop()
	m.traceStall(stallTraceAfter - time.Millisecond)
	if m.traces != 0 || len(m.events) != 0 {
		t.Fatalf("a %v stop-the-world was traced", stallTraceAfter-time.Millisecond)
	}
	for range maxStallTraces + 1 {
		m.traceStall(stallTraceAfter)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != maxStallTraces || len(m.events) != maxStallTraces {
		t.Fatalf("%d trace files and %d events, want %d of each", len(files), len(m.events), maxStallTraces)
	}
	for _, f := range files {
		if info, err := f.Info(); err != nil || info.Size() == 0 {
			t.Fatalf("trace %s: %v, %v", f.Name(), info, err)
		}
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"paxcron/internal/benchplot"
)

// Goal of issue 6 against etcd, at every concurrency.
const (
	goalThroughputRatio = 1.5 // paxcron's writes/s over etcd's, at least
	goalP99Ratio        = 1.0 // paxcron's p99 over etcd's, at most
)

// stat is a median over runs with its range.
type stat struct {
	Med, Lo, Hi float64
	N           int
}

func statOf(xs []float64) stat {
	lo, hi := span(xs)
	return stat{Med: median(xs), Lo: lo, Hi: hi, N: len(xs)}
}

// cellKey names one system at one concurrency.
type cellKey struct {
	System  string
	Clients int
}

// cell is the kept runs of one system at one concurrency.
type cell struct {
	Throughput, P50, P99, ServerCPU, ClientCPU, Others, Kernel stat
	// TotalCPU is servers + client CPU per write, run by run; MachineCPU
	// the whole machine's (see machineCPUPerWrite).
	TotalCPU, MachineCPU          stat
	InProcess                     bool
	Errors, Redone, DisturbedKept int
	// OthersWrite is what others wrote to disk (MB/s) in the runs that
	// recorded it; its N is 0 in reports from before the guard read it.
	OthersWrite stat
}

// ratio is, over repetitions, a system's figure divided by etcd's in the
// same repetition at the same concurrency.
type ratio struct {
	Throughput, P99 stat
}

// met says whether the goal holds on the medians.
func (r ratio) met() bool {
	return r.Throughput.Med >= goalThroughputRatio && r.P99.Med <= goalP99Ratio
}

// summary is what the report shows.
type summary struct {
	Clients []int
	Systems []string
	Cells   map[cellKey]cell
	// Ratios holds every system but etcd, when etcd ran.
	Ratios map[cellKey]ratio
}

func summarize(runs []runRecord, clients []int, systems []string) summary {
	s := summary{Clients: clients, Systems: systems, Cells: map[cellKey]cell{}, Ratios: map[cellKey]ratio{}}
	kept := map[cellKey]map[int]runRecord{} // by rep
	for _, r := range runs {
		k := cellKey{r.System, r.Clients}
		if !r.Kept {
			c := s.Cells[k]
			c.Redone++
			s.Cells[k] = c
			continue
		}
		if kept[k] == nil {
			kept[k] = map[int]runRecord{}
		}
		kept[k][r.Rep] = r
	}
	for k, byRep := range kept {
		var tput, p50, p99, scpu, ccpu, tcpu, mcpu, others, kernel, writes []float64
		c := s.Cells[k]
		for _, r := range byRep {
			l50, l99 := runLatencies(r)
			tput, p50, p99 = append(tput, r.WritesPerSec), append(p50, l50), append(p99, l99)
			scpu, ccpu = append(scpu, r.serverCPUPerWrite()), append(ccpu, r.clientCPUPerWrite())
			tcpu = append(tcpu, r.serverCPUPerWrite()+r.clientCPUPerWrite())
			mcpu = append(mcpu, r.machineCPUPerWrite())
			others, kernel = append(others, r.OthersCores), append(kernel, r.KernelCores)
			if r.OthersWriteMBps != nil {
				writes = append(writes, *r.OthersWriteMBps)
			}
			c.InProcess = r.InProcess
			c.Errors += r.Errors
			if r.Disturbed {
				c.DisturbedKept++
			}
		}
		c.Throughput, c.P50, c.P99 = statOf(tput), statOf(p50), statOf(p99)
		c.ServerCPU, c.ClientCPU, c.Others, c.Kernel = statOf(scpu), statOf(ccpu), statOf(others), statOf(kernel)
		c.TotalCPU, c.MachineCPU = statOf(tcpu), statOf(mcpu)
		if len(writes) > 0 {
			c.OthersWrite = statOf(writes)
		}
		s.Cells[k] = c
	}
	for k, byRep := range kept {
		if k.System == sysEtcd {
			continue
		}
		base := kept[cellKey{sysEtcd, k.Clients}]
		var tr, pr []float64
		for rep, r := range byRep {
			e, ok := base[rep]
			if !ok || e.WritesPerSec == 0 || e.P99Ms == 0 {
				continue
			}
			_, l99 := runLatencies(r)
			tr = append(tr, r.WritesPerSec/e.WritesPerSec)
			pr = append(pr, l99/e.P99Ms)
		}
		if len(tr) > 0 {
			s.Ratios[k] = ratio{Throughput: statOf(tr), P99: statOf(pr)}
		}
	}
	return s
}

// runLatencies is r's p50 and p99 for the figures: +Inf for a run that
// acknowledged no write, whose recorded 0 ms would otherwise count as
// better than any real run.
func runLatencies(r runRecord) (p50, p99 float64) {
	if r.Writes == 0 {
		return math.Inf(1), math.Inf(1)
	}
	return r.P50Ms, r.P99Ms
}

// reportMeta is the report's header: where, when and how it was measured.
type reportMeta struct {
	Command     string     `json:"command"`
	Machine     string     `json:"machine"`
	Kernel      string     `json:"kernel"`
	Disk        string     `json:"disk"`
	Commit      string     `json:"commit"`
	GoVersion   string     `json:"go_version"`
	EtcdVersion string     `json:"etcd_version"`
	Started     time.Time  `json:"started"`
	Ended       time.Time  `json:"ended"`
	LoadBefore  string     `json:"load_before"`
	LoadAfter   string     `json:"load_after"`
	Config      etcdConfig `json:"config"`
}

// systemLabel is how tables and charts name a system.
var systemLabel = map[string]string{
	sysEtcd:       "etcd",
	sysPaxcronAPI: "paxcron API",
	sysPaxcronLog: "paxcron log",
}

func (s summary) others() []string {
	return slices.DeleteFunc(slices.Clone(s.Systems), func(n string) bool { return n == sysEtcd })
}

func (s summary) hasEtcd() bool { return slices.Contains(s.Systems, sysEtcd) }

// renderMarkdown is the report: header, set-up, tables, charts.
func renderMarkdown(m reportMeta, s summary) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Replicated writes: paxcron against etcd\n\n")
	p("Written by `paxcron-bench etcd` (`make bench`, suite `etcd`); do not edit by hand.\n\n")
	p("```\n%s\n```\n\n", m.Command)
	p("- Machine: %s; kernel %s; data on %s\n", m.Machine, m.Kernel, m.Disk)
	p("- Commit %s, %s, %s\n", m.Commit, m.GoVersion, m.EtcdVersion)
	p("- %s to %s UTC; load average %s before, %s after\n", m.Started.UTC().Format("2006-01-02 15:04"), m.Ended.UTC().Format("15:04"), m.LoadBefore, m.LoadAfter)
	c := m.Config
	p("- %d repetitions; in each, every concurrency in turn, and at each the systems one after the other (%s in the first repetition, the order turned by one in each after it), each on a fresh cluster in fresh folders: %v warm-up, then %v measured\n",
		c.Reps, strings.Join(c.Systems, ", "), c.Warmup, c.Window)
	if c.MaxOthersWriteMBps > 0 {
		p("- Quiet guard: before each run, wait (at most %v) until processes other than ours use at most %.2f cores and write at most %.1f MB/s to disk over 1 s; a run in which they used more than %.2f cores or wrote more than %.1f MB/s is redone (at most %d times, then kept and marked disturbed)\n\n",
			c.QuietWait, c.QuietCores, c.QuietWriteMBps, c.MaxOthersCores, c.MaxOthersWriteMBps, c.Retries)
	} else {
		p("- Quiet guard: before each run, wait (at most %v) until processes other than ours use at most %.2f cores over 1 s; a run in which they used more than %.2f cores is redone (at most %d times, then kept and marked disturbed)\n\n",
			c.QuietWait, c.QuietCores, c.MaxOthersCores, c.Retries)
	}
	renderSetup(&b, c)
	renderThroughput(&b, s)
	renderLatency(&b, s)
	renderCPU(&b, s)
	if s.hasEtcd() {
		renderGoal(&b, s)
	}
	renderLoad(&b, s)
	p("![writes/s against clients](etcd-throughput.png)\n\n![p99 latency against clients](etcd-p99.png)\n\n")
	p("Every run, redone ones included, is in [etcd.json](etcd.json).\n")
	return b.String()
}

func renderSetup(b *strings.Builder, c etcdConfig) {
	fmt.Fprintf(b, "## Set-up\n\n")
	fmt.Fprintf(b, "All three systems keep three replicas on loopback, each in its own folder on the same disk, every write synced before it is acknowledged. Clients write in a closed loop (the next write when the last is acknowledged); a write counts when it is acknowledged within the measured window.\n\n")
	fmt.Fprintf(b, "- **etcd**: three members, defaults otherwise (fsync on, snapshot count 100,000). One Go client (`go.etcd.io/etcd/client/v3`) over all three endpoints, shared by every client goroutine; it balances requests round robin over the members, so two writes in three reach a follower, which forwards them to the leader. Each write is a `Put` of a fresh key (`bench/c<client>/<seq>`) with a %d-byte value.\n", valueBytes)
	target := "each client sends its writes round robin over the three replicas (as etcd's client balances its requests), so two in three reach a follower, which forwards the request to the leader"
	switch c.APITarget {
	case targetLeader:
		target = "every client writes to the leader"
	case targetClient:
		target = "every client goroutine calls through one `api.Client` given all three replicas (as etcd's client is given all three members), which sends its calls to the leader once a follower's answer names it (`X-Paxcron-Leader`)"
	}
	conns := "One HTTP client keeps a connection per client goroutine and replica."
	switch {
	case c.APIStream && c.APITarget == targetClient:
		conns = "Every call travels over the API stream: one connection to the replica called, shared by every client goroutine, as etcd's client keeps one gRPC connection per member."
	case c.APIStream:
		conns = "Every call travels over the API stream: one connection per replica, shared by every client goroutine (`api.Client` with `Stream`), as etcd's client keeps one gRPC connection per member."
	case c.APITarget == targetClient:
		conns = "The client keeps a connection per call in flight to the replica called."
	}
	fmt.Fprintf(b, "- **paxcron API**: three `paxcron server` processes (static peers, backups off, snapshots at the defaults; no Nomad reachable, which only keeps them from launching). Each write is a `POST /v1/jobs` of one new job (`skip_nomad_check`), whose command is %d bytes as replicated; %s. %s\n", valueBytes, target, conns)
	fmt.Fprintf(b, "- **paxcron log**: the replicated log alone: three replicas in the harness process (`internal/localcluster`, as `BenchmarkCommitThroughput`), in-process channels between them, each on its own Pebble store. Each write proposes a %d-byte command and returns once the leader applied it. Its CPU is the harness process's, replicas and clients together.\n\n", valueBytes)
	fmt.Fprintf(b, "CPU per write is the CPU time (user and system, from `/proc/<pid>/stat`) used during the window divided by the writes acknowledged in it: the server processes', and the client's (this process) apart.\n\n")
}

func fmtRate(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return commas(int64(math.Round(x)))
}

// commas writes n with thousands separators.
func commas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	out = append([]string{s}, out...)
	r := strings.Join(out, ",")
	if neg {
		r = "-" + r
	}
	return r
}

func fmtMs(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case x < 10:
		return fmt.Sprintf("%.2f", x)
	case x < 100:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.0f", x)
}

func fmtRatio(r stat) string {
	if r.N == 0 {
		return "-"
	}
	return fmt.Sprintf("**%.2f** (%.2f-%.2f)", r.Med, r.Lo, r.Hi)
}

func renderThroughput(b *strings.Builder, s summary) {
	fmt.Fprintf(b, "## Durable writes per second\n\nMedian over the repetitions (range); ratios are paired by repetition, then the median taken.\n\n| clients |")
	cols := 0
	for _, name := range s.Systems {
		fmt.Fprintf(b, " %s |", systemLabel[name])
		cols++
		if name != sysEtcd && s.hasEtcd() {
			fmt.Fprintf(b, " %s / etcd |", systemLabel[name])
			cols++
		}
	}
	fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---|", cols))
	for _, n := range s.Clients {
		fmt.Fprintf(b, "| %d |", n)
		for _, name := range s.Systems {
			t := s.Cells[cellKey{name, n}].Throughput
			if t.N == 0 {
				fmt.Fprintf(b, " - |")
			} else {
				fmt.Fprintf(b, " %s (%s-%s) |", fmtRate(t.Med), fmtRate(t.Lo), fmtRate(t.Hi))
			}
			if name != sysEtcd && s.hasEtcd() {
				fmt.Fprintf(b, " %s |", fmtRatio(s.Ratios[cellKey{name, n}].Throughput))
			}
		}
		fmt.Fprintf(b, "\n")
	}
	fmt.Fprintf(b, "\n")
}

func renderLatency(b *strings.Builder, s summary) {
	fmt.Fprintf(b, "## Latency\n\nMedians over the repetitions of each run's p50 and p99, in ms (the p99's range); the p99 ratio is paired by repetition.\n\n| clients |")
	cols := 0
	for _, name := range s.Systems {
		fmt.Fprintf(b, " %s p50 | %s p99 |", systemLabel[name], systemLabel[name])
		cols += 2
		if name != sysEtcd && s.hasEtcd() {
			fmt.Fprintf(b, " p99 / etcd |")
			cols++
		}
	}
	fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---|", cols))
	for _, n := range s.Clients {
		fmt.Fprintf(b, "| %d |", n)
		for _, name := range s.Systems {
			c := s.Cells[cellKey{name, n}]
			if c.P99.N == 0 {
				fmt.Fprintf(b, " - | - |")
			} else {
				fmt.Fprintf(b, " %s | %s (%s-%s) |", fmtMs(c.P50.Med), fmtMs(c.P99.Med), fmtMs(c.P99.Lo), fmtMs(c.P99.Hi))
			}
			if name != sysEtcd && s.hasEtcd() {
				fmt.Fprintf(b, " %s |", fmtRatio(s.Ratios[cellKey{name, n}].P99))
			}
		}
		fmt.Fprintf(b, "\n")
	}
	fmt.Fprintf(b, "\n")
}

func renderCPU(b *strings.Builder, s summary) {
	fmt.Fprintf(b, "## CPU per committed write\n\nMedian µs of CPU per acknowledged write (the total: the median of each run's servers + client). The in-process log's figure is the whole harness process (replicas and clients).\n\n| clients |")
	cols := 0
	for _, name := range s.Systems {
		if name == sysPaxcronLog {
			fmt.Fprintf(b, " %s (process) |", systemLabel[name])
			cols++
			continue
		}
		fmt.Fprintf(b, " %s servers | %s client | %s total |", systemLabel[name], systemLabel[name], systemLabel[name])
		cols += 3
	}
	fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---|", cols))
	us := func(x stat) string {
		if x.N == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", x.Med)
	}
	for _, n := range s.Clients {
		fmt.Fprintf(b, "| %d |", n)
		for _, name := range s.Systems {
			c := s.Cells[cellKey{name, n}]
			if name == sysPaxcronLog {
				fmt.Fprintf(b, " %s |", us(c.ServerCPU))
				continue
			}
			fmt.Fprintf(b, " %s | %s | %s |", us(c.ServerCPU), us(c.ClientCPU), us(c.TotalCPU))
		}
		fmt.Fprintf(b, "\n")
	}
	fmt.Fprintf(b, "\nThe whole machine's CPU per write, median µs: the processes' above, and what no process is charged with (kernel threads, such as the file system's journal, and interrupt time, such as a loopback packet's receive), and the little the guard counted for others.\n\n| clients |")
	for _, name := range s.Systems {
		fmt.Fprintf(b, " %s |", systemLabel[name])
	}
	fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---|", len(s.Systems)))
	for _, n := range s.Clients {
		fmt.Fprintf(b, "| %d |", n)
		for _, name := range s.Systems {
			fmt.Fprintf(b, " %s |", us(s.Cells[cellKey{name, n}].MachineCPU))
		}
		fmt.Fprintf(b, "\n")
	}
	fmt.Fprintf(b, "\n")
}

func renderGoal(b *strings.Builder, s summary) {
	fmt.Fprintf(b, "## Goal: at least %.1fx etcd's writes/s with a p99 no worse\n\n| clients |", goalThroughputRatio)
	others := s.others()
	for _, name := range others {
		fmt.Fprintf(b, " %s |", systemLabel[name])
	}
	fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---|", len(others)))
	for _, n := range s.Clients {
		fmt.Fprintf(b, "| %d |", n)
		for _, name := range others {
			r, ok := s.Ratios[cellKey{name, n}]
			switch {
			case !ok:
				fmt.Fprintf(b, " - |")
			case r.met():
				fmt.Fprintf(b, " met (%.2fx, p99 %.2fx) |", r.Throughput.Med, r.P99.Med)
			default:
				fmt.Fprintf(b, " **not met** (%.2fx, p99 %.2fx) |", r.Throughput.Med, r.P99.Med)
			}
		}
		fmt.Fprintf(b, "\n")
	}
	fmt.Fprintf(b, "\n")
}

func renderLoad(b *strings.Builder, s summary) {
	disk := false
	for _, c := range s.Cells {
		disk = disk || c.OthersWrite.N > 0
	}
	if !disk {
		fmt.Fprintf(b, "## Other load during the runs\n\nCPU that processes other than ours used during each kept run's window (cores: median, max); the kernel threads' (median), kept apart since they mostly complete our own synced writes (block I/O); runs redone for others' load, kept runs still disturbed, and failed writes.\n\n| clients | system | others' CPU | kernel threads | redone | disturbed | errors |\n|---|---|---|---|---|---|---|\n")
	} else {
		fmt.Fprintf(b, "## Other load during the runs\n\nCPU that processes other than ours used during each kept run's window (cores: median, max), and what they wrote to disk (MB/s: median, max; the bytes each process dirtied, from /proc/<pid>/io); the kernel threads' CPU (median), kept apart since they mostly complete our own synced writes (block I/O); runs redone for others' load, kept runs still disturbed, and failed writes.\n\n| clients | system | others' CPU | others' disk writes | kernel threads | redone | disturbed | errors |\n|---|---|---|---|---|---|---|---|\n")
	}
	for _, n := range s.Clients {
		for _, name := range s.Systems {
			c := s.Cells[cellKey{name, n}]
			if c.Others.N == 0 {
				continue
			}
			writes := ""
			if disk {
				writes = fmt.Sprintf(" %.1f (max %.1f) |", c.OthersWrite.Med, c.OthersWrite.Hi)
			}
			fmt.Fprintf(b, "| %d | %s | %.2f (max %.2f) |%s %.2f | %d | %d | %d |\n", n, systemLabel[name], c.Others.Med, c.Others.Hi, writes, c.Kernel.Med, c.Redone, c.DisturbedKept, c.Errors)
		}
	}
	fmt.Fprintf(b, "\n")
}

// charts are the report's plots: throughput and p99 against clients.
func charts(s summary) (throughput, p99 benchplot.Chart) {
	throughput = benchplot.Chart{Title: "Durable writes/s (median)", XLabel: "concurrent clients", YLabel: "writes/s", LogX: true, LogY: true}
	p99 = benchplot.Chart{Title: "p99 write latency (median)", XLabel: "concurrent clients", YLabel: "ms", LogX: true, LogY: true}
	var goal *benchplot.Series
	for _, name := range s.Systems {
		var xs, ts, pxs, ps []float64
		for _, n := range s.Clients {
			c := s.Cells[cellKey{name, n}]
			if c.Throughput.N == 0 || c.Throughput.Med <= 0 {
				continue
			}
			xs, ts = append(xs, float64(n)), append(ts, c.Throughput.Med)
			// A median p99 of +Inf (most runs acknowledged nothing) has
			// no point on the chart.
			if c.P99.Med > 0 && !math.IsInf(c.P99.Med, 0) {
				pxs, ps = append(pxs, float64(n)), append(ps, c.P99.Med)
			}
		}
		if len(xs) == 0 {
			continue
		}
		dashed := name == sysEtcd
		throughput.Series = append(throughput.Series, benchplot.Series{Name: systemLabel[name], X: xs, Y: ts, Dashed: dashed})
		if len(pxs) > 0 {
			p99.Series = append(p99.Series, benchplot.Series{Name: systemLabel[name], X: pxs, Y: ps, Dashed: dashed})
		}
		if name == sysEtcd {
			g := make([]float64, len(ts))
			for i, t := range ts {
				g[i] = t * goalThroughputRatio
			}
			goal = &benchplot.Series{Name: fmt.Sprintf("goal: %.1fx etcd", goalThroughputRatio), X: xs, Y: g, Dashed: true}
		}
	}
	// Last, so that each system keeps its colour in both charts.
	if goal != nil {
		throughput.Series = append(throughput.Series, *goal)
	}
	return throughput, p99
}

// writeReport writes etcd.md, etcd.json and the two PNGs into dir.
func writeReport(dir string, m reportMeta, runs []runRecord) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s := summarize(runs, m.Config.Clients, m.Config.Systems)
	raw, err := json.MarshalIndent(struct {
		Meta reportMeta  `json:"meta"`
		Runs []runRecord `json:"runs"`
	}{m, runs}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd.md"), []byte(renderMarkdown(m, s)), 0o644); err != nil {
		return err
	}
	t, p := charts(s)
	if len(t.Series) == 0 {
		return fmt.Errorf("paxcron-bench: no run wrote anything: no chart to draw")
	}
	if err := t.SavePNG(filepath.Join(dir, "etcd-throughput.png"), 0, 0); err != nil {
		return err
	}
	if len(p.Series) == 0 {
		return fmt.Errorf("paxcron-bench: no system has a finite median p99: no p99 chart to draw")
	}
	return p.SavePNG(filepath.Join(dir, "etcd-p99.png"), 0, 0)
}

// runEtcdReport renders an etcd suite's report again from its etcd.json:
// a table added to the report since (the whole machine's CPU per write)
// is then read off runs already measured, by a command anyone can rerun.
func runEtcdReport(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, "usage: paxcron-bench etcd-report DIR (a folder holding an etcd suite's etcd.json)\n")
		return 2
	}
	dir := args[0]
	raw, err := os.ReadFile(filepath.Join(dir, "etcd.json"))
	if err != nil {
		fmt.Fprintf(stderr, "paxcron-bench etcd-report: %v\n", err)
		return 1
	}
	var saved struct {
		Meta reportMeta  `json:"meta"`
		Runs []runRecord `json:"runs"`
	}
	if err := json.Unmarshal(raw, &saved); err != nil {
		fmt.Fprintf(stderr, "paxcron-bench etcd-report: %s: %v\n", filepath.Join(dir, "etcd.json"), err)
		return 1
	}
	if len(saved.Runs) == 0 {
		fmt.Fprintf(stderr, "paxcron-bench etcd-report: %s holds no runs\n", filepath.Join(dir, "etcd.json"))
		return 1
	}
	if err := writeReport(dir, saved.Meta, saved.Runs); err != nil {
		fmt.Fprintf(stderr, "paxcron-bench etcd-report: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "report in %s\n", filepath.Join(dir, "etcd.md"))
	return 0
}

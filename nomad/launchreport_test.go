package nomad_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"paxcron/internal/benchplot"
	"paxcron/nomad"
)

// launchReport gathers the launch benchmark's runs and writes them as a
// Markdown report and PNG plots.
type launchReport struct {
	cfg    launchConfig
	header []string
	runs   []launchRun
	// agentVersion is the Nomad version the groups ran on.
	agentVersion string
}

func newLaunchReport(cfg launchConfig) *launchReport {
	return &launchReport{cfg: cfg, header: []string{
		"machine: " + machineLine(),
		"commit: " + commitLine(),
		"started: " + time.Now().UTC().Format("2006-01-02 15:04 UTC") + ", load " + loadLine(),
	}}
}

// agentLine describes the agents and paxcron's side.
func (r *launchReport) agentLine() string {
	workers := r.cfg.workers
	if workers == 0 {
		workers = nomad.DefaultWorkers
	}
	metrics := "metrics off (telemetry { filter_default = false })"
	if r.cfg.telemetry {
		metrics = "default metrics"
	}
	return fmt.Sprintf("Nomad %s dev agent on loopback, a fresh one per set-up and N, %s; paxcron: 3 replicas in process (Pebble), %d dispatcher workers, at most %d HTTP calls at once",
		r.agentVersion, metrics, workers, nomad.MaxCalls)
}

func machineLine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %d CPUs%s, %s", model, runtime.NumCPU(), mem, runtime.Version())
}

// commitLine is the commit measured: PAXCRON_LAUNCH_COMMIT when the
// benchmark runs from an exported tree, else git's HEAD here.
func commitLine() string {
	if c := os.Getenv("PAXCRON_LAUNCH_COMMIT"); c != "" {
		return c + " (exported tree)"
	}
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if exec.Command("git", "diff", "--quiet", "HEAD", "--", ".").Run() != nil {
		c += " (this package modified)"
	}
	return c
}

func loadLine() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func (r *launchReport) add(run launchRun) { r.runs = append(r.runs, run) }

// group is one set-up at one N.
type group struct {
	setup string
	n     int
}

func (r *launchReport) groups() []group {
	var gs []group
	for _, run := range r.runs {
		if g := (group{run.Setup, run.N}); !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	return gs
}

func (r *launchReport) of(g group, sys string) []launchRun {
	var out []launchRun
	for _, run := range r.runs {
		if run.Setup == g.setup && run.N == g.n && run.System == sys {
			out = append(out, run)
		}
	}
	return out
}

// summary is one system's runs in one group.
type summary struct {
	reps                    int
	p50, p99, max           time.Duration // medians over the repetitions
	p99Lo, p99Hi            time.Duration
	rate                    float64
	missing, doubled, redos int
	othersMax               float64
	p99Ratio, p99RatioLo    float64 // paxcron over Nomad, per repetition
	p99RatioHi, p50Ratio    float64
	haveRatio               bool
	medianRun               launchRun // the run with the median p99
	p99s, p50s, maxes       []time.Duration
}

func summarize(runs []launchRun) summary {
	var s summary
	s.reps = len(runs)
	if len(runs) == 0 {
		return s
	}
	var rates []float64
	for _, r := range runs {
		s.p50s = append(s.p50s, r.L.P50)
		s.p99s = append(s.p99s, r.L.P99)
		s.maxes = append(s.maxes, r.L.Max)
		rates = append(rates, r.L.Rate)
		s.missing += r.L.Missing
		s.doubled += r.L.Doubled
		s.redos += r.G.Redos
		s.othersMax = max(s.othersMax, r.G.Others)
	}
	s.p50, s.p99, s.max = median(s.p50s), median(s.p99s), median(s.maxes)
	s.p99Lo, s.p99Hi = slices.Min(s.p99s), slices.Max(s.p99s)
	s.rate = medianF(rates)
	byP99 := slices.Clone(runs)
	slices.SortFunc(byP99, func(a, b launchRun) int { return int(a.L.P99 - b.L.P99) })
	s.medianRun = byP99[(len(byP99)-1)/2]
	return s
}

// ratios fills s (paxcron's) with its p99 and p50 over Nomad's, per
// repetition.
func ratios(s *summary, pax, nom []launchRun) {
	var r99, r50 []float64
	for _, p := range pax {
		for _, q := range nom {
			if q.Rep == p.Rep && q.L.P99 > 0 && q.L.P50 > 0 {
				r99 = append(r99, float64(p.L.P99)/float64(q.L.P99))
				r50 = append(r50, float64(p.L.P50)/float64(q.L.P50))
			}
		}
	}
	if len(r99) == 0 {
		return
	}
	s.haveRatio = true
	s.p99Ratio, s.p99RatioLo, s.p99RatioHi = medianF(r99), slices.Min(r99), slices.Max(r99)
	s.p50Ratio = medianF(r50)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianF(fs []float64) float64 {
	s := slices.Clone(fs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// systems are the report's rows, in order.
var systems = []string{sysNomad, sysPaxcron, sysBare}

// table is the side-by-side summary as Markdown lines.
func (r *launchReport) table() []string {
	lines := []string{
		"| set-up | N | system | reps | p50 | p99 (range) | max | children/s | missing | doubled | p99 / Nomad's (range) | p50 / Nomad's | others' CPU (max) |",
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|",
	}
	for _, g := range r.groups() {
		nom := r.of(g, sysNomad)
		for _, sys := range systems {
			runs := r.of(g, sys)
			s := summarize(runs)
			if s.reps == 0 {
				continue
			}
			ratio, r50 := "", ""
			if sys != sysNomad {
				ratios(&s, runs, nom)
				if s.haveRatio {
					ratio = fmt.Sprintf("**%.2fx** (%.2f-%.2f)", s.p99Ratio, s.p99RatioLo, s.p99RatioHi)
					r50 = fmt.Sprintf("%.2fx", s.p50Ratio)
				}
			}
			lines = append(lines, fmt.Sprintf("| %s | %d | %s | %d | %s | %s (%s-%s) | %s | %.0f | %d | %d | %s | %s | %.2f cores |",
				g.setup, g.n, sys, s.reps, fmtDur(s.p50), fmtDur(s.p99), fmtDur(s.p99Lo), fmtDur(s.p99Hi), fmtDur(s.max), s.rate,
				s.missing, s.doubled, ratio, r50, s.othersMax))
		}
	}
	return lines
}

// runsTable lists every run as Markdown lines.
func (r *launchReport) runsTable() []string {
	lines := []string{
		"| set-up | N | rep | system | ran | p50 | p99 | max | children/s | children | missing | doubled | load before (cores) | others' CPU | others' disk writes (MB/s) | redos |",
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
	}
	for _, run := range r.runs {
		order := "second"
		if run.First {
			order = "first"
		}
		quiet := ""
		if !run.G.QuietBefore {
			quiet = " (not quiet)"
		}
		lines = append(lines, fmt.Sprintf("| %s | %d | %d | %s | %s | %s | %s | %s | %.0f | %d | %d | %d | %.2f%s | %.2f | %.1f | %d |",
			run.Setup, run.N, run.Rep, run.System, order, fmtDur(run.L.P50), fmtDur(run.L.P99), fmtDur(run.L.Max), run.L.Rate,
			run.L.Children, run.L.Missing, run.L.Doubled, run.G.BusyBefore, quiet, run.G.Others, run.G.OthersWriteMBps, run.G.Redos))
	}
	return lines
}

// goals says, for each of issue 6's goals, whether the runs meet it.
func (r *launchReport) goals() []string {
	var lines []string
	for _, g := range r.groups() {
		nom, pax := r.of(g, sysNomad), r.of(g, sysPaxcron)
		s := summarize(pax)
		ratios(&s, pax, nom)
		switch {
		case g.n == 1000 && s.haveRatio:
			lines = append(lines, fmt.Sprintf("- %s, N = 1,000: paxcron's p99 at most a third of Nomad's: median ratio %.2f: **%s**.",
				g.setup, s.p99Ratio, metWord(s.p99Ratio <= 1.0/3)))
		case g.n == 100 && s.reps > 0:
			lines = append(lines, fmt.Sprintf("- %s, N = 100: paxcron's p99 under 100 ms: median %s (range %s-%s): **%s**.",
				g.setup, fmtDur(s.p99), fmtDur(s.p99Lo), fmtDur(s.p99Hi), metWord(s.p99 < 100*time.Millisecond)))
		}
	}
	bad := 0
	for _, run := range r.runs {
		bad += run.L.Missing + run.L.Doubled
	}
	lines = append(lines, fmt.Sprintf("- Zero missing and zero doubled children, both systems, every run: **%s** (%d slots off).", metWord(bad == 0), bad))
	return lines
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// write writes launch.md, launch-lateness.png and launch-p99.png into dir.
func (r *launchReport) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# The launch path against Nomad's own periodic dispatcher\n\n")
	b.WriteString("Written by `BenchmarkLaunchVsNomadPeriodic` (`nomad/launch_bench_test.go`); `make bench` runs it (`tools/bench/run launch`).\n\n```\n")
	b.WriteString(r.cfg.command + "\n")
	for _, h := range append(slices.Clone(r.header), r.agentLine()) {
		b.WriteString("# " + h + "\n")
	}
	b.WriteString("```\n\n")
	b.WriteString("N jobs all due in the same second: N Nomad periodic batch jobs (Nomad's own dispatcher), and N paxcron cron jobs " +
		"each dispatching its own parameterized parent (what `paxcron job takeover` makes of N periodic jobs). For every child: its creation in Nomad (`SubmitTime`, set by the Nomad server in both " +
		"systems) less its scheduled time. Each repetition runs Nomad's dispatcher and paxcron on the same agent, one after the other, alternating which " +
		"goes first, then the bare dispatch below; figures are medians over the repetitions (range in brackets), ratios are a row's over Nomad's within each " +
		"repetition. A third row, \"bare HTTP dispatch\", is no system: at the due time the benchmark itself sends the N dispatches " +
		"over HTTP with as many in flight as paxcron's Nomad client sends at once (no log, no read-back, no token): the agent's own " +
		"ceiling for children made through its API, whereas Nomad's dispatcher makes its children inside the server. " +
		"Children/s is children over the last one's lateness. \"unplaceable\": the parents carry a constraint no node meets, " +
		"so children are created but no task runs; \"runnable\": each child runs `sleep 0` through raw_exec, so the agent places and " +
		"starts children while it creates the rest. Before each run the harness waits until the whole machine uses at most " +
		fmt.Sprintf("%.2f cores and other processes write at most %.1f MB/s to disk over %v (bounded by %v), records the CPU other processes used "+
			"and what they wrote during the run, and redoes a run in which they used more than %.2f cores or wrote more than %.1f MB/s (at most %d times).\n\n",
			quietBusyMaxCores, quietWriteMaxMBps, quietWindow, quietWaitMax, quietOthersMaxCores, quietOthersMaxWriteMBps, quietRedosMax))
	for _, l := range r.table() {
		b.WriteString(l + "\n")
	}
	b.WriteString("\nIssue 6's goals:\n\n")
	for _, l := range r.goals() {
		b.WriteString(l + "\n")
	}
	b.WriteString("\n![lateness of each child, N = 1,000](launch-lateness.png)\n\n![p99 against N](launch-p99.png)\n\nEvery run:\n\n")
	for _, l := range r.runsTable() {
		b.WriteString(l + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "launch.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := r.latenessChart().SavePNG(filepath.Join(dir, "launch-lateness.png"), 0, 0); err != nil {
		return err
	}
	return r.p99Chart().SavePNG(filepath.Join(dir, "launch-p99.png"), 0, 0)
}

// latenessChart draws each child's lateness against its creation order for
// N = 1,000 (the largest N run, if 1,000 was not), in the repetition with
// the median p99 of each system.
func (r *launchReport) latenessChart() benchplot.Chart {
	n := 0
	for _, g := range r.groups() {
		if g.n == 1000 || (n != 1000 && g.n > n) {
			n = g.n
		}
	}
	c := benchplot.Chart{Title: fmt.Sprintf("Launch lateness, N = %d due in one second (median-p99 repetition)", n),
		XLabel: "child, in creation order", YLabel: "creation less scheduled time (ms)"}
	for _, g := range r.groups() {
		if g.n != n {
			continue
		}
		for _, sys := range systems {
			s := summarize(r.of(g, sys))
			if s.reps == 0 || len(s.medianRun.L.Late) == 0 {
				continue
			}
			var xs, ys []float64
			for i, d := range s.medianRun.L.Late {
				xs = append(xs, float64(i+1))
				ys = append(ys, float64(d)/float64(time.Millisecond))
			}
			c.Series = append(c.Series, benchplot.Series{Name: sys + ", " + g.setup, X: xs, Y: ys, Dashed: sys == sysNomad})
		}
	}
	return c
}

// p99Chart draws the median p99 against N for each system and set-up.
func (r *launchReport) p99Chart() benchplot.Chart {
	c := benchplot.Chart{Title: "Launch lateness p99 against N (median over repetitions)", XLabel: "N (jobs due in one second)",
		YLabel: "p99 lateness (ms)", LogX: true, LogY: true}
	for _, setup := range r.cfg.setups {
		for _, sys := range systems {
			var xs, ys []float64
			for _, g := range r.groups() {
				if g.setup != setup {
					continue
				}
				if s := summarize(r.of(g, sys)); s.reps > 0 && s.p99 > 0 {
					xs = append(xs, float64(g.n))
					ys = append(ys, float64(s.p99)/float64(time.Millisecond))
				}
			}
			if len(xs) > 0 {
				c.Series = append(c.Series, benchplot.Series{Name: sys + ", " + setup, X: xs, Y: ys, Dashed: sys == sysNomad})
			}
		}
	}
	return c
}

// metrics reports the medians as benchmark metrics.
func (r *launchReport) metrics(b *testing.B) {
	for _, g := range r.groups() {
		nom, pax := r.of(g, sysNomad), r.of(g, sysPaxcron)
		for sys, who := range map[string]string{sysNomad: "nomad", sysPaxcron: "paxcron", sysBare: "bare"} {
			runs := r.of(g, sys)
			if s := summarize(runs); s.reps > 0 {
				key := fmt.Sprintf("%s%d-%s", g.setup[:1], g.n, who)
				b.ReportMetric(float64(s.p99)/float64(time.Millisecond), key+"-p99-ms")
				b.ReportMetric(s.rate, key+"-children/s")
			}
		}
		s := summarize(pax)
		if ratios(&s, pax, nom); s.haveRatio {
			b.ReportMetric(s.p99Ratio, fmt.Sprintf("%s%d-p99-ratio", g.setup[:1], g.n))
		}
	}
}

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

const commitUsage = `Usage: paxcron-bench commit-table FILE...

Sums up repetitions of issue 2's commit-throughput benchmarks (the output
of 'go test -bench "BenchmarkCommitThroughput$|BenchmarkRawPebbleSynced"'
in ./internal/localcluster, run several times into one FILE, each run
after a line starting "=== run"): for each FILE and proposer count, the
cluster's median commits/s and latency, and its ratio (median, range over
the runs) to raw Pebble on the same disk in the same run:
  (a) as many writers, one synced 256-byte write each (Pebble's own group commit)
  (b) one store, synced batches of the size the cluster's median command was saved in
  (c) three stores at once, batches of that size (what three replicas write)
tools/bench/run commit writes the FILEs and calls this.
`

// benchLine is one benchmark result line: name (GOMAXPROCS suffix cut)
// and its metrics by unit.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

var benchMetric = regexp.MustCompile(`([0-9.e+-]+) (\S+)`)

// commitRun is one repetition: metrics by benchmark name and unit.
type commitRun map[string]map[string]float64

func runCommitTable(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(stderr, commitUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, path := range args {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "paxcron-bench commit-table: %v\n", err)
			return 1
		}
		runs, err := parseCommitRuns(f)
		f.Close()
		if err == nil {
			err = writeCommitTable(stdout, path, runs)
		}
		if err != nil {
			fmt.Fprintf(stderr, "paxcron-bench commit-table: %s: %v\n", path, err)
			return 1
		}
	}
	return 0
}

// parseCommitRuns reads repetitions of benchmark output.
func parseCommitRuns(r io.Reader) ([]commitRun, error) {
	var runs []commitRun
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "=== run") {
			runs = append(runs, commitRun{})
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if len(runs) == 0 {
			return nil, errors.New(`a benchmark result before the first "=== run" line`)
		}
		metrics := map[string]float64{}
		for _, mm := range benchMetric.FindAllStringSubmatch(m[2], -1) {
			v, err := strconv.ParseFloat(mm[1], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", line, err)
			}
			metrics[mm[2]] = v
		}
		runs[len(runs)-1][m[1]] = metrics
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, errors.New(`no "=== run" line: not the output of tools/bench/run commit`)
	}
	return runs, nil
}

// writeCommitTable writes one Markdown table: a row per proposer count
// that every run measured with all three comparators.
func writeCommitTable(w io.Writer, title string, runs []commitRun) error {
	fmt.Fprintf(w, "%s (%d runs; medians, ratio ranges in brackets)\n\n", title, len(runs))
	fmt.Fprintln(w, "| proposers | commits/s | p50 | p99 | (a) writes/s | / (a) | (b) entries/s | / (b) | (c) entries/s per store | / (c) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	rows := 0
	for _, p := range []int{1, 8, 64, 512} {
		cl := fmt.Sprintf("BenchmarkCommitThroughput/proposers=%d", p)
		raw := map[string]string{
			"a": fmt.Sprintf("BenchmarkRawPebbleSynced/writers=%d", p),
			"b": fmt.Sprintf("BenchmarkRawPebbleSyncedSaveBatch/proposers=%d/size=cmd-p50/dbs=1", p),
			"c": fmt.Sprintf("BenchmarkRawPebbleSyncedSaveBatch/proposers=%d/size=cmd-p50/dbs=3", p),
		}
		unit := map[string]string{"a": "writes/s", "b": "entries/s", "c": "entries/s"}
		var commits, p50, p99 []float64
		rates, ratios := map[string][]float64{}, map[string][]float64{}
		complete := true
		for _, r := range runs {
			c, ok := r[cl]["commits/s"]
			if !ok {
				complete = false
				break
			}
			commits = append(commits, c)
			p50 = append(p50, r[cl]["p50-ms"])
			p99 = append(p99, r[cl]["p99-ms"])
			for k, name := range raw {
				v, ok := r[name][unit[k]]
				if !ok || v <= 0 {
					complete = false
					break
				}
				rates[k] = append(rates[k], v)
				ratios[k] = append(ratios[k], c/v)
			}
		}
		if !complete {
			continue
		}
		rows++
		cell := func(k string) string {
			lo, hi := span(ratios[k])
			return fmt.Sprintf("%s | **%.2f** (%.2f-%.2f)", fmtRate(median(rates[k])), median(ratios[k]), lo, hi)
		}
		fmt.Fprintf(w, "| %d | %s | %.2f ms | %.2f ms | %s | %s | %s |\n",
			p, fmtRate(median(commits)), median(p50), median(p99), cell("a"), cell("b"), cell("c"))
	}
	fmt.Fprintln(w)
	if rows == 0 {
		return errors.New("no proposer count with the cluster and all three raw comparators in every run")
	}
	return nil
}

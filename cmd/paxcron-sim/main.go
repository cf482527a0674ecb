// Command paxcron-sim runs paxcron's deterministic simulator over a range
// of seeds: each seed simulates a whole cluster under faults and checks
// every invariant after every step. A failing seed prints the command that
// replays it; a replay is bit for bit the same run (same trace hash).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"paxcron/sim"
	"paxcron/sim/check"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paxcron-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: paxcron-sim [flags]

Runs the deterministic cluster simulator for -seeds seeds starting at
-start, and ends with "N passed, M failed". Exit status 1 if any failed.

Replay one seed with its event log:
  go run ./cmd/paxcron-sim -seeds 1 -start 42 -v

Flags:
`)
		fs.PrintDefaults()
	}
	seeds := fs.Uint64("seeds", 100, "how many seeds to run")
	start := fs.Uint64("start", 0, "first seed")
	replicas := fs.Int("replicas", 3, "replicas per cluster (3 or 5)")
	duration := fs.Duration("duration", 0, "simulated time per seed (default 60s; faults stop at 75%)")
	faultEvery := fs.Duration("fault-every", 0, "mean simulated time between injected faults (default 700ms); a calmer run leaves healthy intervals between faults, in which launches are held to the lateness bound")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "seeds run in parallel (results are the same)")
	bug := fs.String("bug", "", "plant a known bug to see the checkers catch it: "+strings.Join(sim.PlantedBugs(), ", "))
	verbose := fs.Bool("v", false, "print each seed's result and, for a single seed, its event log")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *seeds == 0 || *workers < 1 || (*replicas != 3 && *replicas != 5) || *faultEvery < 0 {
		fs.Usage()
		return 2
	}
	opts := func(seed uint64) sim.Options {
		o := sim.DefaultOptions(seed)
		o.Replicas = *replicas
		o.Bug = *bug
		if *faultEvery > 0 {
			o.FaultEvery = *faultEvery
		}
		if *duration > 0 {
			o.Duration = *duration
			o.HealAt = *duration * 3 / 4
			o.LivenessBound = min(o.LivenessBound, *duration/4)
		}
		if *verbose && *seeds == 1 {
			o.Log = func(line string) { fmt.Fprintln(stdout, line) }
		}
		return o
	}
	began := time.Now()
	results := runSeeds(*start, *seeds, *workers, opts)
	failed := 0
	var simulated time.Duration
	for _, r := range results {
		simulated += r.SimTime
		if r.Err != nil {
			failed++
			fmt.Fprintf(stdout, "FAIL seed %d (trace %016x): %v\n  faults: %s\n  replay: go run ./cmd/paxcron-sim -seeds 1 -start %d -replicas %d%s%s -v\n",
				r.Seed, r.TraceHash, r.Err, r.FaultSummary(), r.Seed, *replicas, bugFlag(*bug), faultEveryFlag(*faultEvery))
		} else if *verbose {
			fmt.Fprintf(stdout, "ok   seed %d (trace %016x) acked=%d events=%d %s faults: %s\n", r.Seed, r.TraceHash, r.Acked, r.Events, r.Cron, r.FaultSummary())
		}
	}
	wall := time.Since(began)
	fmt.Fprintln(stdout, justifiedLine(results))
	fmt.Fprintf(stdout, "simulated %v in %v (%.0f simulated seconds per wall second, %d workers)\n",
		simulated.Round(time.Second), wall.Round(time.Millisecond), simulated.Seconds()/wall.Seconds(), *workers)
	fmt.Fprintf(stdout, "%d passed, %d failed\n", len(results)-failed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// justifiedLine sums, over the seeds, the skips and failures the cron
// checker judged against its view, by kind, every kind listed (a kind at
// zero is one the swarm did not exercise), the forbid children it judged
// for overlap, and the launches it held to the lateness bound, scheduled
// and manual.
func justifiedLine(results []sim.Result) string {
	total := map[string]uint64{}
	var forbid, onTime, onTimeEarly, manual, manualEarly, manualShort uint64
	for _, r := range results {
		k := r.Cron.Checked
		for reason, n := range k.Justified {
			total[reason] += n
		}
		forbid += k.ForbidJudged
		onTime, onTimeEarly = onTime+k.OnTime, onTimeEarly+k.OnTimeEarly
		manual, manualEarly, manualShort = manual+k.OnTimeManual, manualEarly+k.OnTimeManualEarly, manualShort+k.ManualWindowShort
	}
	var parts []string
	for _, k := range check.ReasonClasses() {
		parts = append(parts, fmt.Sprintf("%s=%d", k, total[k]))
	}
	return "skips and failures justified: " + strings.Join(parts, ", ") + fmt.Sprintf("; forbid children judged against the job's others: %d", forbid) +
		fmt.Sprintf("\nheld to the lateness bound while healthy: %d scheduled launches (%d before the tail), %d manual (%d before the tail; %d more skipped for a catch-up window that could end within the bound)",
			onTime, onTimeEarly, manual, manualEarly, manualShort)
}

func faultEveryFlag(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return " -fault-every " + d.String()
}

func bugFlag(bug string) string {
	if bug == "" {
		return ""
	}
	return " -bug " + bug
}

// runSeeds runs seeds in parallel and returns their results in seed order.
func runSeeds(start, count uint64, workers int, opts func(uint64) sim.Options) []sim.Result {
	results := make([]sim.Result, count)
	next := make(chan uint64)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = sim.Run(opts(start + i))
			}
		}()
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

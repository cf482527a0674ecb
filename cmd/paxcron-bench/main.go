// Command paxcron-bench runs the side-by-side benchmarks of issue 6 that
// compare paxcron with other systems on one machine, and writes their
// reports (Markdown tables, PNG charts, raw runs as JSON) for `make bench`.
//
// It owns the harness: starting the systems compared as real processes
// (or, for the replicated log alone, in process), driving closed-loop
// clients, guarding every run against other load on the machine, and the
// statistics and rendering of the report. It reads /proc, so it runs on
// Linux only.
//
//	paxcron-bench etcd -reps 5 -clients 1,8,64,512 -duration 10s -out docs/bench
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `Usage: paxcron-bench SUITE [flags]

Suites:
  etcd   replicated writes: a 3-member etcd cluster against 3 paxcron
         replicas (job writes through the HTTP API, and commands through
         the replicated log directly), same disk, same run, alternating;
         writes/s, p50/p99 and CPU per write at each concurrency
  etcd-report DIR
         renders DIR/etcd.md and its charts again from DIR/etcd.json (the
         runs of an earlier etcd suite), with this version's report
  commit-table FILE...
         issue 2's commit throughput against raw Pebble: medians and
         ratios over repetitions of the Go benchmarks (tools/bench/run commit)
  hops DIR
         where a lone write's time goes: the hop traces of a 1-client run
         of binaries built with -tags hoptrace, lined up write by write

paxcron-bench SUITE -h lists the suite's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "etcd":
		return runEtcdSuite(args[1:], stdout, stderr)
	case "etcd-report":
		return runEtcdReport(args[1:], stdout, stderr)
	case "commit-table":
		return runCommitTable(args[1:], stdout, stderr)
	case "hops":
		return runHops(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "paxcron-bench: unknown suite %q\n\n%s", args[0], usage)
	return 2
}

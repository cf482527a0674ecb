package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCommitTableMediansAndRatios(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"commit-table", "testdata/commit-runs.txt"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	// Runs 1-3 commit 1,000, 2,000 and 3,000 a second at 1 proposer
	// against raw (a) 2,000, (b) 4,000 and (c) 1,333: medians 2,000
	// commits/s and ratios 1.00, 0.50 and 1.50; 64 proposers lack the
	// raw comparators, so they have no row.
	for _, want := range []string{
		"testdata/commit-runs.txt (3 runs;",
		"| 1 | 2,000 | 0.50 ms | 1.50 ms | 2,000 | **1.00** (0.50-1.50) | 4,000 | **0.50** (0.25-0.75) | 1,333 | **1.50** (0.75-2.25) |",
		"| 8 | 16,000 | 0.50 ms | 1.50 ms | 16,000 | **1.00** (0.50-1.50) | 32,000 | **0.50** (0.25-0.75) | 10,666 | **1.50** (0.75-2.25) |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "| 64 |") {
		t.Errorf("a row for 64 proposers, which lack the raw comparators:\n%s", out.String())
	}
}

func TestCommitTableRefusesOtherOutput(t *testing.T) {
	for _, in := range []string{"", "BenchmarkCommitThroughput/proposers=1-2 1 1 ns/op 5 commits/s\n", "=== run 1\nPASS\n"} {
		runs, err := parseCommitRuns(strings.NewReader(in))
		if err == nil {
			err = writeCommitTable(&bytes.Buffer{}, "x", runs)
		}
		if err == nil {
			t.Errorf("%q: accepted", in)
		}
	}
}

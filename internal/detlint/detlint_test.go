package detlint

import (
	"strings"
	"testing"
)

// TestSimPackagesAreDeterministic lints the simulator's infrastructure.
func TestSimPackagesAreDeterministic(t *testing.T) {
	for _, dir := range []string{"../../simclock", "../../simnet", "../../check"} {
		findings, err := Dir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range findings {
			t.Errorf("%s", f)
		}
	}
}

// TestLintCatchesEachConstruct plants every forbidden construct and
// expects each to be reported, and the allowed ones not.
func TestLintCatchesEachConstruct(t *testing.T) {
	dir := "testdata/bad"
	findings, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range findings {
		got = append(got, f.Reason)
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"crypto/rand", "goroutine", "select", "time.Now", "time.Sleep", "math/rand/v2.IntN", "ranges over a map"} {
		if !strings.Contains(all, want) {
			t.Errorf("not reported: %s\n(got:\n%s)", want, all)
		}
	}
	if len(findings) != 7 {
		t.Errorf("got %d findings, want 7:\n%s", len(findings), all)
	}
}

package detlint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackagesAreDeterministic lints every package in Packages (the Paxos
// core and the simulator's infrastructure) and fails on any finding.
func TestPackagesAreDeterministic(t *testing.T) {
	for _, pkg := range Packages {
		findings, err := Dir(filepath.Join("..", "..", pkg))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range findings {
			t.Errorf("%s", f)
		}
	}
}

// TestLintCatchesEachConstruct plants every forbidden construct and
// expects each to be reported, on the lines marked "want", and the
// allowed ones not.
func TestLintCatchesEachConstruct(t *testing.T) {
	dir := filepath.Join("testdata", "bad")
	findings, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	lines := map[int]bool{}
	for _, f := range findings {
		got = append(got, f.String())
		lines[f.Pos.Line] = true
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"crypto/rand", "goroutine", "select", "time.Now", "time.Sleep", "math/rand/v2.IntN", "ranges over a map", "maps.Keys", "maps.Values"} {
		if !strings.Contains(all, want) {
			t.Errorf("not reported: %s\n(got:\n%s)", want, all)
		}
	}
	wantLines := markedLines(t, filepath.Join(dir, "bad.go"))
	for line := range wantLines {
		if !lines[line] {
			t.Errorf("bad.go:%d: marked want, not reported", line)
		}
	}
	for _, f := range findings {
		if !wantLines[f.Pos.Line] {
			t.Errorf("reported, not marked want: %s", f)
		}
	}
	if len(findings) != len(wantLines) {
		t.Errorf("got %d findings, want %d:\n%s", len(findings), len(wantLines), all)
	}
}

// markedLines returns the lines of path that end in "// want".
func markedLines(t *testing.T, path string) map[int]bool {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	marked := map[int]bool{}
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), "// want") {
			marked[i+1] = true
		}
	}
	return marked
}

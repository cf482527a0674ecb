package detlint

import (
	"os"
	"path/filepath"
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
	dir := t.TempDir()
	src := `package bad

import (
	crand "crypto/rand"
	"math/rand/v2"
	"time"
)

var _ = crand.Reader

func bad(m map[int]int, ch chan int) {
	go func() {}()
	select {
	case <-ch:
	}
	_ = time.Now()
	time.Sleep(1)
	_ = rand.IntN(3)
	for k := range m {
		_ = k
	}
	//detlint:maprange summing is order-free
	for _, v := range m {
		_ = v
	}
	r := rand.New(rand.NewPCG(1, 2))
	_ = r.IntN(3)
	_ = time.Duration(3) * time.Second
}
`
	if err := os.WriteFile(filepath.Join(dir, "bad.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
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

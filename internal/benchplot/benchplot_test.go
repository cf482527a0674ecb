package benchplot

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSavePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.png")
	c := Chart{
		Title: "commit latency", XLabel: "clients", YLabel: "p99 (ms)", LogX: true, LogY: true,
		Series: []Series{
			{Name: "paxcron", X: []float64{1, 8, 64, 512}, Y: []float64{0.5, 1.6, 6, 11}},
			{Name: "etcd", X: []float64{1, 8, 64, 512}, Y: []float64{2.4, 10.5, 38, 253}, Dashed: true},
		},
	}
	if err := c.SavePNG(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	// 7 x 4.5 inches at gonum's default 96 dpi.
	if got := img.Bounds().Dx(); got != 7*96 {
		t.Errorf("width %d px, want %d", got, 7*96)
	}
	// A drawn chart has many colours; a blank canvas has one.
	seen := map[uint32]bool{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 3 {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 3 {
			r, g, b, _ := img.At(x, y).RGBA()
			seen[r>>8<<16|g>>8<<8|b>>8] = true
		}
	}
	if len(seen) < 4 {
		t.Errorf("only %d colours drawn", len(seen))
	}
}

func TestValidateRefuses(t *testing.T) {
	ok := Series{Name: "a", X: []float64{1, 2}, Y: []float64{1, 2}}
	for _, tc := range []struct {
		name  string
		chart Chart
		want  string
	}{
		{"no series", Chart{}, "no series"},
		{"lengths", Chart{Series: []Series{{Name: "a", X: []float64{1}, Y: []float64{1, 2}}}}, "1 x and 2 y"},
		{"empty", Chart{Series: []Series{{Name: "a"}}}, "0 x and 0 y"},
		{"nan", Chart{Series: []Series{ok, {Name: "b", X: []float64{1}, Y: []float64{math.NaN()}}}}, "not finite"},
		{"log zero", Chart{LogY: true, Series: []Series{{Name: "a", X: []float64{1}, Y: []float64{0}}}}, "not positive"},
	} {
		err := tc.chart.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
		if err := tc.chart.SavePNG(filepath.Join(t.TempDir(), "x.png"), 0, 0); err == nil {
			t.Errorf("%s: SavePNG drew an invalid chart", tc.name)
		}
	}
	if err := (Chart{Series: []Series{ok}}).Validate(); err != nil {
		t.Errorf("valid chart refused: %v", err)
	}
}

// A chart of one concurrency (a single x, and a single y) on logarithmic
// axes draws: plot alone widens such a range down to zero, and panicked
// on the logarithm (paxcron-bench etcd -clients 1).
func TestSavePNGOnePoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "one.png")
	c := Chart{
		Title: "p99", XLabel: "clients", YLabel: "ms", LogX: true, LogY: true,
		Series: []Series{{Name: "paxcron", X: []float64{1}, Y: []float64{8.9}}},
	}
	if err := c.SavePNG(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// Package benchplot draws the charts that `make bench` commits beside the
// tables in BENCHMARKS.md: line charts of one figure against another (commit
// latency against concurrency, launch lateness against time), saved as PNG.
//
// It owns only the drawing; the figures come from the benchmark harnesses,
// which also write them as tables so that a chart never holds a number the
// text does not.
package benchplot

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Series is one line of a chart: points (X[i], Y[i]) joined in order.
type Series struct {
	Name string
	X, Y []float64
	// Dashed draws the line dashed, e.g. for a reference system.
	Dashed bool
}

// Chart is a titled line chart.
type Chart struct {
	Title, XLabel, YLabel string
	// LogX and LogY use a logarithmic axis; every value on it must then be
	// positive.
	LogX, LogY bool
	Series     []Series
}

// Size of a saved chart unless the caller says otherwise.
const (
	DefaultWidthInches  = 7
	DefaultHeightInches = 4.5
)

// palette is distinguishable in colour and in grey.
var palette = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// Validate reports why c cannot be drawn: no series, a series whose X and Y
// differ in length or are empty, a value that is not finite, or a value not
// above zero on a logarithmic axis.
func (c Chart) Validate() error {
	if len(c.Series) == 0 {
		return errors.New("benchplot: chart has no series")
	}
	for _, s := range c.Series {
		if len(s.X) == 0 || len(s.X) != len(s.Y) {
			return fmt.Errorf("benchplot: series %q has %d x and %d y values", s.Name, len(s.X), len(s.Y))
		}
		for i := range s.X {
			x, y := s.X[i], s.Y[i]
			if math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(y) || math.IsInf(y, 0) {
				return fmt.Errorf("benchplot: series %q point %d is not finite (%v, %v)", s.Name, i, x, y)
			}
			if (c.LogX && x <= 0) || (c.LogY && y <= 0) {
				return fmt.Errorf("benchplot: series %q point %d (%v, %v) is not positive on a logarithmic axis", s.Name, i, x, y)
			}
		}
	}
	return nil
}

// SavePNG draws c into a PNG file of the given size in inches (zero: the
// defaults).
func (c Chart) SavePNG(path string, widthInches, heightInches float64) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if widthInches <= 0 {
		widthInches = DefaultWidthInches
	}
	if heightInches <= 0 {
		heightInches = DefaultHeightInches
	}
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	if c.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if c.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	for i, s := range c.Series {
		points := make(plotter.XYs, len(s.X))
		for j := range s.X {
			points[j] = plotter.XY{X: s.X[j], Y: s.Y[j]}
		}
		line, dots, err := plotter.NewLinePoints(points)
		if err != nil {
			return fmt.Errorf("benchplot: series %q: %w", s.Name, err)
		}
		col := palette[i%len(palette)]
		line.Color = col
		line.Width = vg.Points(1.5)
		if s.Dashed {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		dots.Color = col
		dots.Radius = vg.Points(2.5)
		p.Add(line, dots)
		p.Legend.Add(s.Name, line, dots)
	}
	// A logarithmic axis over a single value (one concurrency, one
	// figure) gets a range of its own: plot widens an empty range
	// linearly, down to zero or below, which a logarithm cannot take.
	if c.LogX && p.X.Min == p.X.Max {
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	if c.LogY && p.Y.Min == p.Y.Max {
		p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2
	}
	if err := p.Save(vg.Length(widthInches)*vg.Inch, vg.Length(heightInches)*vg.Inch, path); err != nil {
		return fmt.Errorf("benchplot: save %s: %w", path, err)
	}
	return nil
}

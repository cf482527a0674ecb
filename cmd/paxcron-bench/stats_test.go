package main

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of odd", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"median of even takes the lower", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of 100", hundred, 0.99, 99 * time.Millisecond},
		{"p50 of 100", hundred, 0.50, 50 * time.Millisecond},
		{"max", hundred, 1, 100 * time.Millisecond},
		{"p99 of 10 is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{"tiny q is the smallest", ms(5, 6), 0.001, 5 * time.Millisecond},
	} {
		if got := percentile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("%s: percentile(%v) = %v, want %v", tc.name, tc.q, got, tc.want)
		}
	}
}

func TestPercentilePanicsOnBadQ(t *testing.T) {
	for _, q := range []float64{0, -0.1, 1.01} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("percentile(q=%v) did not panic", q)
				}
			}()
			percentile([]time.Duration{1}, q)
		}()
	}
}

func TestMedianAndSpan(t *testing.T) {
	for _, tc := range []struct {
		xs          []float64
		med, lo, hi float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{9, 1, 1, 1, 1}, 1, 1, 9},
	} {
		in := append([]float64(nil), tc.xs...)
		if got := median(tc.xs); got != tc.med {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.med)
		}
		for i := range in {
			if in[i] != tc.xs[i] {
				t.Fatalf("median reordered its argument: %v", tc.xs)
			}
		}
		if lo, hi := span(tc.xs); lo != tc.lo || hi != tc.hi {
			t.Errorf("span(%v) = %v, %v, want %v, %v", tc.xs, lo, hi, tc.lo, tc.hi)
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
}

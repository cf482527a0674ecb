package main

import (
	"math"
	"slices"
	"time"
)

// percentile returns the q-quantile (0 < q <= 1) of sorted by the
// nearest-rank method: the smallest value with at least q of the values
// at or below it. It returns 0 for no values.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if q <= 0 || q > 1 {
		panic("paxcron-bench: percentile wants 0 < q <= 1")
	}
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// median returns the median of xs (the mean of the two middle values for
// an even count), or NaN for none. xs is not changed.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// span is the smallest and largest of xs (NaN, NaN for none).
func span(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}

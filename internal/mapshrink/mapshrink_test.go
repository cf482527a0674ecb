package mapshrink

import (
	"maps"
	"testing"
)

// filled is a map of n entries, i -> 2i.
func filled(n int) map[int]int {
	m := make(map[int]int)
	for i := range n {
		m[i] = 2 * i
	}
	return m
}

func TestKeepRebuildsBelowAQuarterOfThePeak(t *testing.T) {
	const peak, left = 2 * Floor, 2*Floor/shrinkFactor - 1
	var p Peak
	m := Keep(filled(peak), &p)
	for i := range peak - left {
		if p.Rebuilds != 0 {
			t.Fatalf("rebuilt at %d entries of a peak of %d", len(m), peak)
		}
		delete(m, i)
		m = Keep(m, &p)
	}
	if p.Rebuilds != 1 || p.Len() != left {
		t.Fatalf("at %d entries: %d rebuilds, peak %d; want 1 rebuild, peak %d", len(m), p.Rebuilds, p.Len(), left)
	}
	want := filled(peak)
	maps.DeleteFunc(want, func(k, _ int) bool { return k < peak-left })
	if !maps.Equal(m, want) {
		t.Fatalf("the rebuilt map holds %d entries, not the %d left", len(m), len(want))
	}
}

func TestKeepLeavesSmallMapsAlone(t *testing.T) {
	var p Peak
	m := Keep(filled(Floor-1), &p)
	for i := range Floor - 1 {
		delete(m, i)
		m = Keep(m, &p)
	}
	if p.Rebuilds != 0 {
		t.Fatalf("a map of a peak of %d, under Floor, was rebuilt %d times", Floor-1, p.Rebuilds)
	}
}

// Package mapshrink gives back the memory of a long-lived map after most
// of its entries are deleted. A Go map never shrinks: one that held a
// million jobs keeps the buckets (and the time a range spends walking
// them) of a million after all but ten thousand are deleted. Keep copies
// such a map into a fresh one sized to what it holds.
//
// The decision depends on lengths alone, and the copy holds the same
// entries, so a deterministic state machine stays deterministic: no
// outcome depends on the order the copy walks the map in.
package mapshrink

// Floor is the peak below which a map is never rebuilt: a small map's
// buckets are not worth a copy.
const Floor = 4096

// shrinkFactor: a map is rebuilt when it holds less than 1/shrinkFactor
// of its peak. Each rebuild copies fewer entries than were deleted since
// the last one (at least 3/4 of the peak), so its cost per delete stays
// bounded; a map that swings around one size is not copied back and
// forth.
const shrinkFactor = 4

// FarBelow reports whether a map (or an index) of length n, whose peak
// was peak, is to be rebuilt: when it holds less than a quarter of a
// peak of at least floor (Floor where floor is 0).
func FarBelow(n, peak, floor int) bool {
	if floor <= 0 {
		floor = Floor
	}
	return peak >= floor && n < peak/shrinkFactor
}

// Peak is a map's peak length since it was made or last rebuilt. The
// zero value is a map's that has held nothing yet, rebuilt above Floor.
type Peak struct {
	// Floor, where not 0, replaces the package's Floor for this map: the
	// simulator's clusters hold a few jobs, and set a small one so that
	// their maps are rebuilt too, at moments its faults choose.
	Floor int
	peak  int
	// Rebuilds counts the rebuilds: for tests and counters, and for a
	// caller that does more at a rebuild (cron/state's keepJobs).
	Rebuilds uint64
}

// Replaced forgets the peak of a map replaced by another (a state
// restored from a snapshot): the next Keep starts from the new map's
// length. Floor and Rebuilds are kept.
func (p *Peak) Replaced() { p.peak = 0 }

// Len is the peak length Keep last saw.
func (p *Peak) Len() int { return p.peak }

// Keep notes m's length in p and returns m, or, once m holds less than a
// quarter of a peak of at least Floor, a fresh copy of it whose peak is
// its length. Call it after a change to m, at least after deletes and
// often enough after inserts that the peak it sees is near the true one
// (a missed peak only delays a rebuild); use its result in m's place.
func Keep[M ~map[K]V, K comparable, V any](m M, p *Peak) M {
	n := len(m)
	if n > p.peak {
		p.peak = n
	}
	if !FarBelow(n, p.peak, p.Floor) {
		return m
	}
	fresh := make(M, n)
	//detlint:maprange a copy of every entry: the order is not seen
	for k, v := range m {
		fresh[k] = v
	}
	p.peak = n
	p.Rebuilds++
	return fresh
}

// Package sim owns deterministic simulation of whole paxcron clusters in one
// goroutine: a simulated network, clocks, disks, crashes and restarts, the
// invariant checkers, and the seed runner. Every run is reproducible from
// its seed; nothing in production imports this package.
package sim

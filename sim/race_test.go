//go:build race

package sim

// raceEnabled: the race detector is on. The simulator runs each seed on
// one goroutine, so it finds nothing there and only slows the seeds
// eightfold; the heavy tests skip under it and `make test` runs them
// without it.
const raceEnabled = true

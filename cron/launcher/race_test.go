//go:build race

package launcher

// raceEnabled: the race detector is on. The randomized launcher test runs
// on one goroutine, where it finds nothing, and slows tenfold: it runs
// fewer seeds under it, and `make test` runs it in full without it.
const raceEnabled = true

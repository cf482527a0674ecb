// Package simclock owns simulated time: the event Scheduler that drives a
// whole simulated cluster from one goroutine, and the per-replica Clock that
// turns true (simulated) time into what a replica's own drifting, jumping
// clocks read.
//
// True time is a time.Duration since the start of the run. Nothing here
// reads the real clock, starts a goroutine or draws from global randomness:
// a run is a pure function of its seed.
package simclock

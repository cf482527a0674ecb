// Package simnet owns the simulated network between replicas: it carries
// paxos.Message values over the simclock.Scheduler with a drawn delay per
// message, and injects the network's faults (loss, duplication, reordering
// through jitter, long-tail delays, symmetric and asymmetric partitions, and
// drops at a crashed receiver), counting every fault it injects.
//
// All randomness comes from the *rand.Rand handed to New, and messages are
// deep-copied on Send, so a run is a pure function of its seed and no
// replica can reach into another's memory through a message.
package simnet

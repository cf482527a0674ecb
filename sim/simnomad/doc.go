// Package simnomad owns the simulated Nomad that the launcher dispatches
// to: parameterized parent jobs per (namespace, region), children created
// by dispatch with an idempotency token, their run and stop, garbage
// collection that forgets a token, and the faults of the HTTP API between
// the launcher and Nomad (an unreachable server, latency on each leg, lost
// replies, and client deadlines the server knows nothing about).
//
// Its behaviour follows what a real Nomad 1.11 agent does: a token only
// deduplicates while the child that carries it is alive, so once the child
// is collected the same token creates a second child. Every child ever
// created is recorded, collected or not, so that a checker can prove that
// no (job, scheduled time) ever got two children.
//
// Everything runs on the simclock.Scheduler and draws from the *rand.Rand
// handed to New; no reply is ever delivered inside Call. A run is a pure
// function of its seed and the calls made.
package simnomad

// Package conformance holds no code: its test runs the same cases, as the
// launcher's requests and results, against the simulator's Nomad
// (sim/simnomad) and a real Nomad dev agent through the dispatcher
// (nomad.Call), so that the fake the simulator proves paxcron against cannot
// drift from what Nomad does: tokens, their scope, look-ups, garbage
// collection, missing and stopped parents, running and stopped children,
// and concurrent dispatches, each proved (in batches, on the real agent)
// to have its token's one child.
package conformance

// Package launcher owns the leader's launch protocol: it is the replica's
// state machine (it applies the log to the cron state), and while its
// replica leads, holds the lease and has caught up, it starts the due
// launches, dispatches them through a Dispatcher and records how each
// ended, so that after any failover nothing is launched twice and nothing
// is skipped without a record.
//
// # The protocol
//
// For job J at scheduled time T, identity id = state.Identity(J, T):
//
//  1. propose LaunchStarted(J, T, id); wait until it is chosen and applied;
//  2. if the lease still holds, call Nomad: dispatch with id as the
//     idempotency token (after the concurrency policy's check);
//  3. propose LaunchFinished(J, T, outcome).
//
// A new leader first builds its heap of next launches from the state and
// looks every open launch up in Nomad: found, it records it dispatched;
// not found, it dispatches it (the same token), unless the launch is older
// than Nomad's memory horizon (then "outcome unknown": fail closed) or
// beyond its catch-up window (then skipped, with the reason). A dispatch
// whose answer is lost is looked up before it is tried again.
//
// # The cluster's name
//
// A leader that has caught up and finds the state without a cluster ID
// proposes one it drew (NameCluster, state.SetClusterID); the first
// applied names the cluster on every replica. It is the launcher's only
// proposal that is not about a launch: the launcher is what proposes on
// the leader's behalf.
//
// # Determinism
//
// No goroutine, clock or randomness: time comes in through Step, Nomad's
// answers through Done, and every collection is walked in a fixed order,
// so the simulator runs the same code as the server. The package is in
// internal/detlint's list.
package launcher

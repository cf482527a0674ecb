// Package membership is how paxcron replicas find one another and get an
// early hint that one has crashed: one github.com/hashicorp/memberlist
// instance per replica, beside its Paxos transport.
//
// # What it owns
//
//   - Identity on the gossip layer: a replica's node is named
//     "replica-<id>" after its Paxos replica ID, wherever it runs, and
//     carries a PeerInfo (ID, Paxos and API addresses) as its node meta,
//     encoded in a small versioned layout (meta.go). A replica that
//     restarts or moves to another machine is the same node with new
//     addresses, and the server is told (Events.PeerUpdated).
//   - Admission: a node whose name is not replica-<its meta's ID>, whose
//     ID is not among Config.Members, or whose meta does not decode, is
//     refused before memberlist takes it in, and counted (Stats).
//   - The failure-detection hint: memberlist declaring a peer dead, or
//     the peer leaving, becomes Events.PeerSuspected; its return,
//     Events.PeerAlive. Timing tunes memberlist so that a killed replica
//     is declared dead in about 0.5-1 s instead of memberlist's 5-8 s.
//   - Joining: the seeds are retried in the background with capped
//     backoff until one answers.
//
// # What it does not own
//
// Safety never depends on it. The Paxos core elects leaders with its own
// ballots, heartbeats and timeouts, and its leases make a wrong hint
// harmless: a suspicion of a live replica costs at most an early
// election, a missed one only a slower failover. Nor is it a membership
// service in the consensus sense: the set of replicas (Config.Members) is
// fixed by configuration, not by gossip; a node gossip knows is not a
// voter. It authenticates nothing unless Config.SecretKey is set, and
// then only the gossip itself: the Paxos transport authenticates its own
// messages.
//
// memberlist reads the real clock and runs goroutines, so this package
// belongs to the server layer; the simulator never sees it and feeds the
// core's suspicion input itself.
//
// # How suspicion is reported
//
// memberlist (v0.7.0) marks a peer that fails a probe (direct, indirect
// and TCP) as suspect, and declares it dead when nobody refutes the
// suspicion within the suspicion timeout. It tells its delegates only
// about the second step: EventDelegate.NotifyLeave for dead or left
// nodes, NotifyJoin when a dead node comes back, NotifyUpdate when an
// alive node's meta changes. The suspect state lives in an unexported
// field (Node.State is filled in only for a MergeDelegate), PingDelegate
// hears only successful probes, and AliveDelegate only alive messages. So
// PeerSuspected follows NotifyLeave, and Timing keeps the suspicion
// timeout short (two probe intervals) instead of guessing from silence.
package membership

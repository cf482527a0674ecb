// Package transport carries paxos.Messages between replicas over TCP. It
// owns the replica-to-replica sockets: listening, dialing with backoff,
// the cluster-key handshake (and optional mutual TLS), framing, bounded
// per-peer send queues and inbound delivery. It knows nothing of Paxos
// beyond the message codec and replica IDs; the server layer feeds
// received messages to the replica and hands it the replica's outbound
// messages through Send.
//
// # Connections
//
// Each replica dials every peer for its own outbound messages and accepts
// the peers' connections for inbound ones: between two replicas there is
// one persistent connection per direction, each carrying frames one way.
// One-way connections need no tie-breaking when both sides dial at once,
// and an address change (SetPeerAddr) only concerns the side that dials. A
// newer authenticated inbound connection from a peer replaces the older
// one.
//
// # Handshake
//
// After TCP (and TLS when Config.TLS is set), the dialer sends a hello:
// magic "PXT\x03", its replica ID, the ID it wants to reach, its
// incarnation (drawn when its transport starts), its cluster ID (zero
// while it knows none) and a 32-byte random nonce. The acceptor checks
// that the target is itself and the sender a member, and answers with its
// own nonce, its own cluster ID and
// HMAC-SHA256(key, "accept" | hello | acceptor nonce | acceptor cluster
// ID | members | agreed), the members being the count and the sorted IDs
// of the cluster as this replica is configured, and agreed the other
// settings every replica must share (Config.Agreed: the server's timing);
// the dialer checks it and answers with the same MAC under the label
// "dial". Both sides thus prove knowledge of the cluster key over fresh
// nonces from both sides, so a recorded handshake cannot be replayed, and
// the acceptor learns an authenticated sender ID; and replicas whose
// member lists (or agreed settings) differ refuse each other, since
// quorums of two lists need not intersect.
//
// The cluster IDs (Config.ClusterID, from the replicated state: see
// cron/state.ClusterID) are covered by both MACs, so each side's is its
// own. When both are known and differ, each side refuses the other once
// the MACs check (the dialer after sending its proof, so that the
// acceptor refuses it too and says why), with ErrOtherCluster and both
// IDs: the two share the key and the member IDs, but one holds another
// cluster's state (a data folder copied from elsewhere), whose promises
// and accepted values belong to another log. A zero ID on either side
// connects: a new or rebuilding replica has nothing to contradict. A
// replica that learns its ID calls Redial, so that no connection made
// while it knew none outlives that; and one still applying what its own
// disk holds (Config.Ready) neither dials nor answers, so that it does
// not connect with a zero ID its disk contradicts. (Version 2, "PXT\x02", bound no
// cluster ID, and version 1 not even the members: replicas of either and
// these do not connect, and such a hello is refused naming its version.)
// Every message received on the connection must then have that From and
// this replica's To; others are dropped and counted (Stats.Misaddressed).
//
// A replica may accept more than one key (Config.AcceptKeys), so that
// the cluster key can be changed without an outage. The acceptor proves
// itself with its first key (Config.Key); the dialer checks that proof
// under each key it accepts and answers under the one that matched. Two
// replicas thus connect whenever each accepts the other's first key: the
// new key is first accepted by every replica, then made the first on
// each, then the old one dropped, one replica at a time. A handshake
// this side refuses is counted (Stats.AuthFailures) and told to
// Config.OnAuthFailure with why; one the other end closed is counted
// apart (Stats.HandshakesClosed), since the side that refuses says why,
// and a peer that stops closes its handshakes too.
//
// A peer whose dials fail on the network (refused, no route, timed out)
// is told to Config.OnReachability once as unreachable, with the address
// and the error, and once as reached again when a dial yields a
// connection; the redials between are only counted (Stats.DialFailures),
// so a log of these says each change once.
//
// A restarted replica dials with a new incarnation, and its old one never
// comes back. An incarnation that dials in again after another replaced
// it, within twice Limits.BackoffMax, is a second process running with
// the replica's ID and key: the two would take turns as that peer, each
// with its own promises. The acceptor then refuses the peer altogether
// (and closes its connection) until only one incarnation has dialed for
// that long, and says why.
//
// Without TLS the key authenticates connections, not frames: a process
// that does not hold the key cannot connect or inject, but an attacker on
// the network path could still hijack an established TCP stream. Use TLS
// where that matters.
//
// # Frames
//
// A frame is a 4-byte big-endian length followed by paxos.AppendMessage's
// bytes. A length above paxos.MaxMessageBytes closes the connection before
// anything is read (Stats.Oversized); a frame that paxos.DecodeMessage
// rejects is dropped and counted (Stats.Undecodable) and the connection
// kept, since the framing is intact.
//
// # Back-pressure
//
// Send never blocks. It encodes the message and appends it to the peer's
// queue, bounded by Limits.QueueMessagesMax and Limits.QueueBytesMax; when
// either is reached the message is dropped and counted (Stats.Dropped).
// Paxos tolerates loss (retries, heartbeats, catch-up), so dropping is
// safe, and it keeps a slow or dead peer from growing memory or stalling
// the replica's loop. Frames queued for a peer are written in order on its
// connection; frames taken from the queue when a connection fails are
// lost (Stats.Lost).
//
// # Delivery
//
// Received messages are passed to Config.Handler from the goroutine that
// reads the connection they arrived on: messages from one peer one at a
// time and in the order it sent them, messages from different peers
// concurrently. When a peer's newer connection replaces the older one,
// what the older one had read but not handed over yet is dropped (the
// peer sent it first; handing it over after the newer connection's
// messages would reorder them), and the newer one's first message waits
// for the handler call in progress on the older one. The handler must be
// safe for concurrent use and should return quickly: a blocked handler
// stops reading that peer's connections (TCP then pushes back on the
// sender, whose queue drops).
package transport

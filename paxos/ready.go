package paxos

// Ready is everything the core asks of its caller after a batch of inputs.
// Process it in this order (see the package doc):
//
//  1. Persist HardState (if HardStateChanged), Entries and Snapshot in one
//     synced write. An acceptor's promise and its accepted values are
//     replied to in Messages, so nothing in Messages may leave the replica
//     before this write has returned from its sync. EarlyMessages may leave
//     before or while it is written.
//  2. Send Messages.
//  3. If Snapshot is set, restore the state machine from it; then apply
//     Committed in order.
//  4. Call Advance.
type Ready struct {
	// HardState is written when HardStateChanged. A change of the chosen
	// index alone does not set it (a replica relearns its chosen index from
	// the leader), so it rides along with the next write that must happen.
	HardState        HardState
	HardStateChanged bool
	// Entries are accepted entries to persist; an entry replaces whatever
	// the slot held before.
	Entries []Entry
	// Snapshot, when set, is a snapshot to persist (dropping held entries
	// at or below its index) and to restore the state machine from.
	Snapshot *Snapshot
	// Committed are chosen entries to apply, in slot order, with no gap
	// from the last applied slot.
	Committed []Entry
	// EarlyMessages are messages that acknowledge nothing durable (a
	// leader's accepts, heartbeats and catch-up, pre-votes, snapshot
	// chunks and their acks, which count bytes held in memory): they may
	// be sent before or during the write of step 1, so that followers
	// write while the leader does. The leader counts its own vote only
	// once persisted.
	EarlyMessages []Message
	// Messages to send once the write in step 1 is durable.
	Messages []Message
}

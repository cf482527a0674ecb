package paxos

// Ready is everything the core asks of its caller after a batch of inputs.
// Process it in this order (see the package doc):
//
//  1. Persist HardState (if HardStateChanged), Entries and Snapshot in one
//     synced write. An acceptor's promise and its accepted values are
//     replied to in Messages, so nothing in Messages may leave the replica
//     before this write has returned from its sync.
//  2. Send Messages.
//  3. If Snapshot is set, restore the state machine from it; then apply
//     Committed in order.
//  4. Call Advance.
type Ready struct {
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
	// Messages to send once the write in step 1 is durable.
	Messages []Message
}

// MustSync reports whether step 1 has anything to write.
func (rd *Ready) MustSync() bool {
	return rd.HardStateChanged || len(rd.Entries) > 0 || rd.Snapshot != nil
}

// IsEmpty reports whether the Ready asks for nothing.
func (rd *Ready) IsEmpty() bool {
	return !rd.MustSync() && len(rd.Committed) == 0 && len(rd.Messages) == 0
}

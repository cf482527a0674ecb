// Package storage owns durable replica state: the acceptor's promised ballot,
// accepted entries per slot, the chosen index and snapshots, each record
// checksummed. It knows nothing of what entries mean.
//
// Two stores implement the same contract and pass one conformance suite
// (storage/storetest): a Pebble store for production (storage/pebblestore)
// and an in-memory store that can lose unsynced writes and flip bytes on
// demand, for the deterministic simulator (storage/memstore).
//
// This package holds what both share: the write-side contract (Store,
// Update), the record format and its Codec (record.go: msgpack value, format
// version, CRC-32C; any mismatch is an error wrapping ErrCorrupt that names
// the record), and the small rules every store applies the same way
// (CheckUpdate, KeepsEntry, FirstSlot, CheckEntriesRange,
// SizeBudget).
//
// Choices the paxos.Storage contract leaves open, made here once:
//   - Entries' maxBytes is a ceiling: entries are returned while their summed
//     paxos.EntrySize stays within it, and the first one always.
//   - Entries with lo below FirstSlot returns paxos.ErrCompacted itself,
//     unwrapped; FirstSlot is at least 1, so lo = 0 is compacted too.
//   - The log's tail: a snapshot may keep the entries of its last TailSlots
//     slots (Update.TailSlots); FirstSlot is then the lowest held slot. It
//     is read from the keys, not stored: the tail a replica keeps is
//     contiguous (every slot it applied since its last compaction), so the
//     lowest key says where compaction stopped.
//   - Save drops entries at or below the stored snapshot index, and those
//     its own snapshot deletes, and rejects a snapshot older than the
//     stored one (ErrInvalid), so that no entry is ever held where Entries
//     could not return it.
//   - Stores cache only what their keys say (snapshot index, first and last
//     slot) and decode every value on read, so a byte flipped on disk after
//     Open is still caught by the next read of that record.
package storage

// Package storage owns durable replica state: the acceptor's promised ballot,
// accepted entries per slot, the chosen index and snapshots, each record
// checksummed. It knows nothing of what entries mean.
//
// Two stores implement the same contract and pass one conformance suite
// (storage/storetest): a Pebble store for production (storage/pebblestore)
// and an in-memory store that can lose unsynced writes and flip bytes on
// demand, for the deterministic simulator (storage/memstore).
package storage

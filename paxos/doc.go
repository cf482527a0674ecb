// Package paxos owns the consensus core: a pure, deterministic, leader-based
// Multi-Paxos state machine in the style of etcd's raft.
//
// The core is driven only by Step (a message from a peer), Tick (one unit of
// the replica's own local time) and Propose (a command to replicate). It reads
// durable state through the read-only Storage interface and hands everything
// else back to the caller in a Ready: state and entries to persist (synced),
// a snapshot to install, chosen entries to apply and messages to send. The
// caller must process a Ready in this order:
//
//  0. send EarlyMessages (requests that acknowledge nothing) at once;
//  1. persist HardState, Entries and Snapshot in one synced write;
//  2. send Messages (replies may depend on step 1 having returned);
//  3. install Snapshot, then apply Committed entries in order (this may
//     also happen before step 1: chosen entries are durable on a quorum
//     whatever this replica's write does);
//  4. call Persisted (or Advance, which confirms every Ready handed out).
//
// A caller may write asynchronously: keep stepping the node and take more
// Readys while earlier writes are in flight, as long as it writes them in
// order and confirms each, in order, with Persisted.
//
// The core owns no goroutines, timers, clocks or I/O and takes all randomness
// from a seeded source in its Config, so that a whole cluster can be
// simulated deterministically (see package sim). It imports only the
// standard library and, for the wire codec (AppendMessage, DecodeMessage),
// go-msgpack.
package paxos

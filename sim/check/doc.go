// Package check owns the simulator's invariant checkers (the list is in the
// design brief's invariants.md). Each checker is fed observations by the
// cluster runner as they happen and returns a *Violation on the first one
// that breaks its invariant, so that a run can be checked after every step
// at little cost:
//
//   - Agreement (1), Validity (2), Durability (3) and Prefix (4) watch what
//     replicas learn, apply and acknowledge; Consensus wires them together;
//   - Promises (5) and Ballots watch the messages replicas send;
//   - Liveness (6) watches for progress after the last fault heals;
//   - Cron (7, 8, and the Nomad half of 9) judges the cron layer from the
//     commands chosen in the log and Nomad's record, with its own view of
//     each job and its own reading of each schedule (Oracle); Lease (9)
//     watches who believes it holds the lease;
//   - Corruption (12) keeps the books on flipped bytes;
//   - ClusterIDs (15, beyond the brief's list) holds every replica to one
//     cluster ID, never changed once its state holds it;
//   - Trace hashes a run's events for the determinism invariant (13).
//
// Checkers copy whatever they keep (callers may reuse buffers), never range
// over a map to decide anything, and report violations with the replica,
// slot, ballots and values involved.
package check

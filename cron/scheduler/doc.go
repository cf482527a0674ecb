// Package scheduler owns the leader's schedule: a min-heap of jobs by next
// scheduled time that tells the leader which launch comes due next and
// hands out the due ones in bounded batches (the midnight herd).
//
// # Order
//
// Jobs are ordered by (scheduled time, name). Names are unique, so the order
// is total: every replica that applies the same operations pops the same
// entries in the same order, whatever shape its heap has. It is the order
// of state.Machine.DueBefore, which stays the reference.
//
// # Determinism
//
// No clock, goroutine or randomness; the name-to-position index is a map
// that is only looked up, never ranged over. The package is in
// internal/detlint's list, so make lint and that package's test hold it to
// this.
//
// # Times
//
// A scheduled time is kept as Unix seconds in an int64: 8 bytes, exact over
// the state's whole range (1970-9999), where Unix nanoseconds stop at 2262.
// The state's scheduled times are whole seconds (cron/schedule computes
// whole seconds and cron/state refuses launches at fractional ones), so a
// fractional time handed to the heap is a programmer error and panics.
// The zero time means "no next launch", as in state.Job.NextAt: Build
// leaves such a job out, and Set removes it.
//
// # Cost
//
// Per job: one 32-byte slot (time, name header, id) in the heap's array, a
// 4-byte position and one entry of the name-to-id map, about 90 bytes in
// all at a million jobs; the name's bytes are shared with the caller,
// never copied. The positions and the list of free ids keep the size of
// the largest heap since the last Build. Build is O(n); Set and Remove are
// O(log n); Peek is O(1); PopDue is O(k log n) for k entries popped.
//
// A Heap is not safe for concurrent use.
package scheduler

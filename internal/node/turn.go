package node

import (
	"fmt"
	"time"
)

// DefaultSlowTurn is the loop turn reported as slow when Config.SlowTurn
// is zero: a quarter of the default lease (20 ticks of 50 ms). While a
// turn runs the replica reads no message and no tick; a few such turns in
// a row can cost a leader its lease.
const DefaultSlowTurn = 250 * time.Millisecond

// DefaultMaxApplyPerTurn is Config.MaxApplyPerTurn's default. At a million
// jobs a follower restarted from its disk applied 71-75k entries in one
// turn of 1.2-1.4 s, and one Ready of 4,096 entries right after its
// snapshot was restored took 656 ms; with 512 (Readys of a quarter of it,
// paxos.Limits.MaxApplyEntries) no turn of a restarted follower reached
// 100 ms in three runs (BENCHMARKS.md, "A lagging peer's snapshot and a
// restart's log").
const DefaultMaxApplyPerTurn = 512

// Input names what woke the loop for a turn.
type Input uint8

const (
	InputMessage         Input = iota + 1 // a message from a peer
	InputProposal                         // a proposal to hand to the core
	InputTick                             // the ticker
	InputWrite                            // a write completed (what it made durable is applied)
	InputResults                          // the cron layer's call results
	InputCall                             // a function run on the loop (Call, Cron, ProposeCommandFrom)
	InputWake                             // the launcher's timer
	InputWorkLeft                         // entries a bounded Process left to apply
	InputSnapshotWritten                  // the local snapshot was saved
	InputSnapshotDecoded                  // a snapshot from the leader was decoded
)

var inputNames = [...]string{InputMessage: "message", InputProposal: "proposal", InputTick: "tick",
	InputWrite: "write", InputResults: "results", InputCall: "call", InputWake: "wake",
	InputWorkLeft: "work left", InputSnapshotWritten: "snapshot written", InputSnapshotDecoded: "snapshot decoded"}

func (i Input) String() string {
	if int(i) < len(inputNames) && inputNames[i] != "" {
		return inputNames[i]
	}
	return fmt.Sprintf("input(%d)", uint8(i))
}

// Turn is where one turn of the loop spent its time, from the moment the
// input that woke it was received to the status published at its end.
type Turn struct {
	At   time.Time     // when the turn began
	Took time.Duration // the whole turn
	// Woke is the input that woke the loop, and First its handling (for a
	// completed write: what became durable applied; for a call: the
	// function).
	Woke  Input
	First time.Duration
	// Drained counts the other inputs taken in the same turn, and Drain
	// the time their handling took.
	Drained int
	Drain   time.Duration
	// Process is Process: writes handed out, messages sent, entries
	// applied, snapshots frozen. Launcher is the cron layer's Step and
	// its wake timer.
	Process  time.Duration
	Launcher time.Duration
	// Applied counts the entries applied during the turn.
	Applied uint64
}

// String is the turn for a log line.
func (t Turn) String() string {
	return fmt.Sprintf("%v (woken by %s, handled in %v; %d more inputs %v; process %v; launcher %v; %d entries applied)",
		t.Took.Round(time.Microsecond), t.Woke, t.First.Round(time.Microsecond), t.Drained, t.Drain.Round(time.Microsecond),
		t.Process.Round(time.Microsecond), t.Launcher.Round(time.Microsecond), t.Applied)
}

// turnClock times the phases of the turn under way.
type turnClock struct {
	t       Turn
	mark    time.Time // the end of the last phase timed
	applied uint64    // the applied index when the turn began
}

// begin starts a turn woken by in.
func (c *turnClock) begin(in Input, applied uint64) {
	now := time.Now()
	c.t = Turn{At: now, Woke: in}
	c.mark, c.applied = now, applied
}

// lap returns the time since the last phase ended and starts the next.
func (c *turnClock) lap() time.Duration {
	now := time.Now()
	d := now.Sub(c.mark)
	c.mark = now
	return d
}

// end closes the turn.
func (c *turnClock) end(applied uint64) Turn {
	c.t.Took = c.mark.Sub(c.t.At)
	c.t.Applied = applied - c.applied
	return c.t
}

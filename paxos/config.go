package paxos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Timing sets the protocol's clocks, all in ticks of the replica's own local
// time. The caller chooses how long a tick is (see DefaultTiming).
type Timing struct {
	// HeartbeatTicks is how often a leader sends heartbeats (and renews its
	// lease).
	HeartbeatTicks int
	// ElectionTicks is the least time a follower waits without hearing a
	// leader before it asks for pre-votes; each wait is drawn at random from
	// [ElectionTicks, 2*ElectionTicks).
	ElectionTicks int
	// LeaseTicks is how long an acceptor, after hearing from a leader,
	// refuses to promise any other replica. It must not exceed ElectionTicks,
	// so that a follower that times out has let its own lease lapse.
	LeaseTicks int
	// MaxClockDriftPPM bounds how fast or slow any replica's clock runs
	// against true time, in parts per million. The leader shortens its view
	// of the lease by it (twice: its own clock and the acceptor's).
	MaxClockDriftPPM int
}

// DefaultTiming suits a 50 ms tick: heartbeats every 200 ms, elections
// after 1-2 s of silence, a 1 s lease and clocks within 1% of true time.
func DefaultTiming() Timing {
	return Timing{HeartbeatTicks: 4, ElectionTicks: 20, LeaseTicks: 20, MaxClockDriftPPM: 10_000}
}

// Limits bounds every queue and batch of the core.
type Limits struct {
	// MaxBatchEntries and MaxBatchBytes bound one MsgAccept or MsgChosen.
	MaxBatchEntries int
	MaxBatchBytes   uint64
	// MaxInflightAccepts bounds the MsgAccepts sent to one peer and not yet
	// answered (pipelining).
	MaxInflightAccepts int
	// MaxUncommittedSlots bounds how far proposals may run ahead of the
	// chosen index; Propose returns ErrBusy beyond it.
	MaxUncommittedSlots int
	// MaxUncommittedBytes bounds the same in bytes (EntrySize): a leader's
	// slots not yet chosen, its re-proposals included. Propose returns
	// ErrBusy when a command would pass it, unless nothing is pending, so
	// that any command under MaxBatchBytes/2 can be proposed. An acceptor
	// sends every entry it accepted and does not know chosen in each
	// promise, and this is what bounds them: at most about twice it (a
	// tail left by one leader under another's). In [1, MaxMessageBytes/8],
	// so that a promise, with MaxPromiseBytes of chosen entries, fits a
	// frame.
	MaxUncommittedBytes uint64
	// MaxPromiseLagSlots is how far a candidate's chosen index may trail an
	// acceptor's and still be promised; a candidate further behind is
	// caught up instead, which keeps promises small.
	MaxPromiseLagSlots int
	// MaxPromiseBytes bounds the same in bytes: a promise to a candidate
	// whose chosen index trails this acceptor's carries the chosen
	// entries it lacks, and when those pass MaxPromiseBytes the acceptor
	// refuses and catches the candidate up instead. (65,536 slots of 2 MiB
	// commands would not fit a frame.) The entries accepted and not known
	// chosen are sent whatever their size, as the candidate must learn
	// every one; the leaders' MaxUncommittedBytes bounds them. In [1,
	// MaxMessageBytes/2]: a candidate one entry behind, larger than the
	// bound, is caught up, then promised.
	MaxPromiseBytes uint64
	// MaxSnapshotChunkBytes bounds the data of one MsgSnapshot: a snapshot
	// is streamed in chunks of at most this size, one chunk in flight per
	// peer. At most MaxMessageBytes/2.
	MaxSnapshotChunkBytes uint64
	// MaxSnapshotBytes is the largest snapshot this replica accepts from a
	// peer: it holds a transfer's bytes in memory until the last chunk
	// arrives, and refuses (ErrSnapshotTooLarge) a transfer announcing more.
	MaxSnapshotBytes uint64
	// MaxApplyEntries bounds the chosen entries one Ready hands over to
	// apply (Ready.Committed); zero means MaxBatchEntries. A caller that
	// bounds the applies of a turn of its loop (replica.Config.
	// MaxApplyPerProcess) can only stop between Readys.
	MaxApplyEntries int
}

// applyEntries is MaxApplyEntries with its default.
func (l Limits) applyEntries() int {
	if l.MaxApplyEntries > 0 {
		return l.MaxApplyEntries
	}
	return l.MaxBatchEntries
}

// DefaultLimits returns limits that keep a message under about 4 MiB, and
// accept snapshots of up to 1 GiB: four times the state of a million cron
// jobs (DESIGN.md).
func DefaultLimits() Limits {
	return Limits{
		MaxBatchEntries:       4096,
		MaxBatchBytes:         4 << 20,
		MaxInflightAccepts:    8,
		MaxUncommittedSlots:   32768,
		MaxUncommittedBytes:   8 << 20,
		MaxPromiseLagSlots:    2 * 32768,
		MaxPromiseBytes:       16 << 20,
		MaxSnapshotChunkBytes: 4 << 20,
		MaxSnapshotBytes:      1 << 30,
	}
}

// Config configures a Node. Every field is required: a missing dependency is
// an error, never a silent default.
type Config struct {
	ID         ReplicaID
	Membership Membership
	Storage    Storage
	// Rand is the only source of randomness (election timeouts).
	Rand *rand.Rand
	// Applied is the highest slot the caller's state machine has applied
	// (its snapshot index after a restart). Committed entries start after it.
	Applied uint64
	// Rebuilding starts a replica that lost its disk and rejoins an
	// existing cluster as a learner (see HardState.Rebuilding). It only
	// matters when the storage is empty.
	Rebuilding bool
	Timing     Timing
	Limits     Limits
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("paxos: invalid config")

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.ID == None:
		return bad("ID must be non-zero")
	case c.Storage == nil:
		return bad("Storage is required")
	case c.Rand == nil:
		return bad("Rand is required (seeded, for determinism)")
	case len(c.Membership.Voters) == 0:
		return bad("Membership has no voters")
	case !c.Membership.Contains(c.ID):
		return bad("replica %d is not among the voters %v", c.ID, c.Membership.Voters)
	}
	voters := slices.Clone(c.Membership.Voters)
	slices.Sort(voters)
	for i := range voters {
		if voters[i] == None || (i > 0 && voters[i] == voters[i-1]) {
			return bad("voters must be distinct and non-zero: %v", c.Membership.Voters)
		}
	}
	t, l := c.Timing, c.Limits
	switch {
	case t.HeartbeatTicks <= 0 || t.ElectionTicks <= 0 || t.LeaseTicks <= 0:
		return bad("HeartbeatTicks, ElectionTicks and LeaseTicks must be positive: %+v", t)
	case t.HeartbeatTicks*2 > t.LeaseTicks:
		return bad("HeartbeatTicks (%d) must be at most half of LeaseTicks (%d) so the lease is renewed in time", t.HeartbeatTicks, t.LeaseTicks)
	case t.LeaseTicks > t.ElectionTicks:
		return bad("LeaseTicks (%d) must not exceed ElectionTicks (%d)", t.LeaseTicks, t.ElectionTicks)
	case t.MaxClockDriftPPM < 0 || t.MaxClockDriftPPM >= 200_000:
		return bad("MaxClockDriftPPM must be in [0, 200000): %d", t.MaxClockDriftPPM)
	case leaderLeaseTicks(t) <= t.HeartbeatTicks:
		return bad("LeaseTicks %d leaves no usable lease after drift %d ppm", t.LeaseTicks, t.MaxClockDriftPPM)
	case l.MaxBatchEntries <= 0 || l.MaxBatchBytes == 0 || l.MaxInflightAccepts <= 0:
		return bad("batch and inflight limits must be positive: %+v", l)
	case l.MaxUncommittedSlots <= 0 || l.MaxPromiseLagSlots < 2*l.MaxUncommittedSlots:
		return bad("MaxUncommittedSlots must be positive and MaxPromiseLagSlots at least twice it: %+v", l)
	case l.MaxUncommittedBytes == 0 || l.MaxUncommittedBytes > MaxMessageBytes/8:
		return bad("MaxUncommittedBytes must be in [1, %d] (MaxMessageBytes/8): %d", MaxMessageBytes/8, l.MaxUncommittedBytes)
	case l.MaxPromiseBytes == 0 || l.MaxPromiseBytes > MaxMessageBytes/2:
		return bad("MaxPromiseBytes must be in [1, %d] (MaxMessageBytes/2): %d", MaxMessageBytes/2, l.MaxPromiseBytes)
	case l.MaxSnapshotChunkBytes == 0 || l.MaxSnapshotChunkBytes > MaxMessageBytes/2:
		return bad("MaxSnapshotChunkBytes must be in [1, %d] (MaxMessageBytes/2): %d", MaxMessageBytes/2, l.MaxSnapshotChunkBytes)
	case l.MaxApplyEntries < 0:
		return bad("MaxApplyEntries must not be negative: %d", l.MaxApplyEntries)
	case l.MaxSnapshotBytes == 0:
		return bad("MaxSnapshotBytes must be positive")
	}
	return nil
}

// leaderLeaseTicks is how long, on the leader's own clock, a lease lasts
// from the moment the leader sent the round that won it. An acceptor counts
// LeaseTicks on its clock from a later instant; the two clocks may each be
// off by the drift bound in opposite directions, and each tick count may be
// off by one tick through rounding, hence the margins.
func leaderLeaseTicks(t Timing) int {
	ppm := int64(t.MaxClockDriftPPM)
	lease := int64(t.LeaseTicks) * (1_000_000 - ppm) / (1_000_000 + ppm)
	return int(lease) - 2
}

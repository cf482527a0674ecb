package sim

import (
	"fmt"
	"time"

	"paxcron/cron/replica"
	"paxcron/cron/state"
	"paxcron/paxos"
	"paxcron/sim/simnomad"
)

// Options configures one simulated run.
type Options struct {
	Seed     uint64
	Replicas int // 3 or 5
	// Duration is the simulated time the run lasts. Faults are injected
	// until HealAt; then everything heals and the cluster must elect a
	// leader and commit within LivenessBound.
	Duration      time.Duration
	HealAt        time.Duration
	LivenessBound time.Duration
	TickInterval  time.Duration
	Timing        paxos.Timing
	Limits        paxos.Limits
	Snapshots     replica.SnapshotPolicy
	// ProposalEvery is the mean simulated time between client proposals.
	ProposalEvery time.Duration
	// FaultEvery is the mean simulated time between injected faults.
	FaultEvery time.Duration
	// DiskLatencyMax, when positive, makes writes asynchronous: each takes
	// a latency drawn from (0, DiskLatencyMax], they complete in order, the
	// replica keeps working meanwhile, and a crash loses those in flight.
	// Zero writes inline, as if the disk were instantaneous.
	DiskLatencyMax time.Duration
	// SnapshotReadLatencyMax, when positive, has a replica read the
	// snapshot it sends to a peer in the background, as the server does:
	// the read completes after a latency drawn from (0, max], and the core
	// sends nothing until it asks again (replica.Config.ReadSnapshots).
	SnapshotReadLatencyMax time.Duration
	// SnapshotDecodeLatencyMax, when positive, has a replica decode a
	// snapshot received from the leader in the background, as the server
	// does: the decode completes after a latency drawn from (0, max], the
	// replica going on meanwhile and holding the entries chosen after it
	// (replica.Config.DecodeSnapshots).
	SnapshotDecodeLatencyMax time.Duration
	// MaxApplyPerProcess bounds the entries one Process applies
	// (replica.Config.MaxApplyPerProcess); the rest is processed a moment
	// later, other inputs possibly first. Zero applies all at once.
	MaxApplyPerProcess uint64
	// Epoch is the wall-clock time at the start of the run.
	Epoch time.Time
	// Nomad configures the simulated Nomad (its Epoch is set from Epoch).
	Nomad simnomad.Config
	// MemoryHorizon and ClockSkew configure the launchers: how long Nomad
	// remembers a token (at most Nomad.GCThreshold) and the margin for
	// replicas' clocks disagreeing.
	MemoryHorizon time.Duration
	ClockSkew     time.Duration
	// LatenessBound is invariant 8's bound: once healthy, a launch is
	// dispatched within it of its time, and at the end every launch due
	// before End-LatenessBound is concluded.
	LatenessBound time.Duration
	// State holds the cron state's limits on every replica. DefaultOptions
	// lowers the launches open of all jobs in one seed in four, so that
	// starts wait for room and triggers and backfills are refused, and
	// those of each job in another, so that jobs wait for their own.
	State state.Limits
	// Bug plants a known defect, to prove the checkers catch it (see
	// plantedBugs); empty in real runs.
	Bug string
	// Log, when set, receives a line per notable event (faults, crashes,
	// restarts, leadership), for replaying a failing seed.
	Log func(string)
}

// DefaultOptions is a 70-second run of a 3-replica cluster under faults.
func DefaultOptions(seed uint64) Options {
	limits := paxos.DefaultLimits()
	// Small batches and windows exercise pipelining, back-pressure and
	// retransmission within a short run.
	limits.MaxBatchEntries = 16
	limits.MaxInflightAccepts = 4
	limits.MaxUncommittedSlots = 256
	limits.MaxPromiseLagSlots = 1024
	// A candidate 30 or so commands behind is caught up rather than
	// promised, so that elections meet the promise's byte bound.
	limits.MaxPromiseBytes = 8 << 10
	// A leader's unchosen proposals past 2 KiB (some 5-20 commands) are
	// refused as busy, so that the bound is met now and then under the
	// simulator's bursts and slow disks, and the launcher's retries with
	// it (16 KiB was never met in 230 seeds; 2 KiB 5 times in seeds
	// 20000000-20000099, counted once with a temporary print in Propose).
	limits.MaxUncommittedBytes = 2 << 10
	// The simulator's snapshots are 1-6 KiB: chunks of 512 bytes make every
	// snapshot catch-up a transfer of several chunks, with their losses,
	// duplicates and reordering.
	limits.MaxSnapshotChunkBytes = 512
	// Half the seeds run with asynchronous disks, half with inline writes:
	// both ways of driving the replica are production paths.
	var diskLatency time.Duration
	if seed%2 == 1 {
		diskLatency = 3 * time.Millisecond
	}
	// Independently of that, half the seeds read snapshots to send, and
	// decode those received, in the background, and half bound the
	// entries a Process applies.
	var snapshotReads, snapshotDecodes time.Duration
	if seed/2%2 == 1 {
		snapshotReads, snapshotDecodes = 200*time.Millisecond, 500*time.Millisecond
	}
	var maxApply uint64
	if seed/4%2 == 1 {
		maxApply = 1 + seed/8%8
	}
	stateLimits := state.DefaultLimits()
	switch seed / 64 % 4 {
	case 0:
		stateLimits.OpenLaunches = 3 + int(seed/256%6)
	case 1:
		stateLimits.OpenLaunchesJob = 1 + int(seed/256%3)
	case 2:
		// A few reasons in all: the histories keep most outcomes
		// without theirs.
		stateLimits.HistoryReasons = 200 + 100*int(seed/256%8)
	}
	nomad := simnomad.DefaultConfig()
	nomad.GCThreshold = 10 * time.Second
	nomad.RunMin, nomad.RunMax = 200*time.Millisecond, 4*time.Second
	return Options{
		Epoch:                    EpochFor(seed),
		Nomad:                    nomad,
		MemoryHorizon:            10 * time.Second,
		ClockSkew:                2 * time.Second,
		LatenessBound:            4 * time.Second,
		DiskLatencyMax:           diskLatency,
		SnapshotReadLatencyMax:   snapshotReads,
		SnapshotDecodeLatencyMax: snapshotDecodes,
		MaxApplyPerProcess:       maxApply,
		State:                    stateLimits,
		Seed:                     seed,
		Replicas:                 3,
		Duration:                 70 * time.Second,
		HealAt:                   50 * time.Second,
		LivenessBound:            10 * time.Second,
		TickInterval:             50 * time.Millisecond,
		Timing:                   paxos.DefaultTiming(),
		Limits:                   limits,
		Snapshots:                replica.SnapshotPolicy{EveryEntries: 64, TailEntries: 16},
		ProposalEvery:            150 * time.Millisecond,
		FaultEvery:               700 * time.Millisecond,
	}
}

func (o Options) validate() error {
	switch {
	case o.Replicas < 1 || o.Replicas > 9:
		return fmt.Errorf("sim: %d replicas, want 1 to 9", o.Replicas)
	case o.Duration <= 0 || o.HealAt > o.Duration || o.LivenessBound <= 0:
		return fmt.Errorf("sim: need 0 < HealAt <= Duration and a LivenessBound: %v %v %v", o.HealAt, o.Duration, o.LivenessBound)
	case o.HealAt+o.LivenessBound > o.Duration:
		return fmt.Errorf("sim: HealAt %v + LivenessBound %v passes Duration %v", o.HealAt, o.LivenessBound, o.Duration)
	case o.TickInterval <= 0 || o.ProposalEvery <= 0 || o.FaultEvery <= 0:
		return fmt.Errorf("sim: TickInterval, ProposalEvery and FaultEvery must be positive")
	case o.MemoryHorizon <= o.ClockSkew || o.MemoryHorizon > o.Nomad.GCThreshold:
		return fmt.Errorf("sim: MemoryHorizon %v must exceed ClockSkew %v and stay within Nomad's GC threshold %v", o.MemoryHorizon, o.ClockSkew, o.Nomad.GCThreshold)
	case o.LatenessBound <= 0:
		return fmt.Errorf("sim: LatenessBound must be positive")
	case o.Bug != "" && plantedBugs[o.Bug] == nil:
		return fmt.Errorf("sim: unknown planted bug %q", o.Bug)
	}
	return nil
}

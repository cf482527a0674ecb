package chaos

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults, each healed after its Down time.
const (
	// KillLeader SIGKILLs the leader's process and restarts it on its
	// disk.
	KillLeader Kind = "kill-leader"
	// KillFollower does the same to a follower.
	KillFollower Kind = "kill-follower"
	// PauseLeader SIGSTOPs the leader for longer than its lease (1 s),
	// then SIGCONTs it: it wakes up deposed, with calls it may still make.
	PauseLeader Kind = "pause-leader"
	// IsolateLeader cuts the leader off the replicas' network; it still
	// reaches Nomad (its own network), so only its lease stops it.
	IsolateLeader Kind = "isolate-leader"
	// Split cuts the leader and one follower off the replicas' network:
	// each replica is alone, no side has a majority.
	Split Kind = "split"
	// ClockJump shifts one replica's launcher clock by Offset (the
	// server's test-only clock offset), then back to zero.
	ClockJump Kind = "clock-jump"
	// DiskLoss SIGKILLs a replica, deletes its data folder and starts it
	// empty: it rejoins as a learner from its peers.
	DiskLoss Kind = "disk-loss"
	// NomadRestart stops the Nomad agent (SIGINT) and starts it again on
	// its data folder.
	NomadRestart Kind = "nomad-restart"
)

// AllKinds is every kind, in the order a schedule's first round draws
// them from.
var AllKinds = []Kind{KillLeader, KillFollower, PauseLeader, IsolateLeader, Split, ClockJump, DiskLoss, NomadRestart}

// Fault is one planned fault.
type Fault struct {
	Kind Kind
	// At is when it is due, counted from the schedule's start.
	At time.Duration
	// Down is how long it lasts before it heals.
	Down time.Duration
	// OnLeader: ClockJump and DiskLoss hit the leader, else a follower.
	OnLeader bool
	// Offset is ClockJump's jump.
	Offset time.Duration
}

// Recovery is the time after a fault heals that its fault window still
// covers: a new leader waits MaxCallLatency (10 s) before it concludes
// what the old one left open, after an election (about 1 s), and then
// launches what came due; RecoveryBase gives that 15 s in all.
const RecoveryBase = 15 * time.Second

// WindowEnd is when the fault window of a fault injected at injected and
// healed at healed ends. A Nomad outage of d adds d: the launcher retries
// a failed call with a doubling backoff, so the first retry after Nomad
// came back may come up to the outage's length later. A clock jump adds
// its size: a replica ahead launches slots that much early.
func (f Fault) WindowEnd(injected, healed time.Time) time.Time {
	return healed.Add(f.recovery(healed.Sub(injected)))
}

// recovery is how long the fault window of f, down for down, runs past
// its heal (WindowEnd tells why).
func (f Fault) recovery(down time.Duration) time.Duration {
	switch f.Kind {
	case NomadRestart:
		return RecoveryBase + down
	case ClockJump:
		return RecoveryBase + f.Offset.Abs()
	}
	return RecoveryBase
}

func (f Fault) String() string {
	s := fmt.Sprintf("%-15s at +%-6v for %v", f.Kind, f.At.Round(time.Second), f.Down.Round(100*time.Millisecond))
	switch f.Kind {
	case ClockJump:
		s += fmt.Sprintf(", offset %s on %s", signed(f.Offset), leaderOr(f.OnLeader))
	case DiskLoss:
		s += " on " + leaderOr(f.OnLeader)
	}
	return s
}

func leaderOr(leader bool) string {
	if leader {
		return "the leader"
	}
	return "a follower"
}

func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

// Schedule is a seeded fault schedule over a run's duration.
type Schedule struct {
	Seed     uint64
	Duration time.Duration
	Faults   []Fault
}

// MinDuration is the shortest schedule: room for one fault or two.
const MinDuration = 40 * time.Second

// Warmup is fault-free time at the start of a schedule of d, for the
// workload to settle: d/8 within [5 s, 20 s].
func Warmup(d time.Duration) time.Duration { return min(max(d/8, 5*time.Second), 20*time.Second) }

// QuietTail is fault-free time at the end of a schedule of d: the last
// fault heals before it, so that the launches it delayed conclude
// within the run. d/6 within [10 s, 30 s].
func QuietTail(d time.Duration) time.Duration { return min(max(d/6, 10*time.Second), 30*time.Second) }

// NewSchedule draws the faults for a run of duration d from seed: rounds
// of every kind in a shuffled order, each with its own Down time, for as
// long as they fit before the quiet tail. After each fault's window
// closes (its heal plus its recovery) comes healthy time drawn from
// [S, 2S], S = d/40 within [6 s, 30 s], before the next fault: the
// checker judges lateness only outside the windows, so windows that ran
// into each other would leave it little to judge (a review found them
// covering 85-95% of a five-minute run when the gap was counted from the
// heal).
func NewSchedule(seed uint64, d time.Duration) Schedule {
	if d < MinDuration {
		panic(fmt.Sprintf("chaos: a schedule of %v: want at least %v", d, MinDuration))
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	s := Schedule{Seed: seed, Duration: d}
	settle := min(max(d/40, 6*time.Second), 30*time.Second)
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	at, end := Warmup(d), d-QuietTail(d)
	for {
		round := append([]Kind(nil), AllKinds...)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		for _, k := range round {
			f := Fault{Kind: k, At: at}
			switch k {
			case KillLeader, KillFollower:
				f.Down = between(3*time.Second, 8*time.Second)
			case PauseLeader:
				f.Down = between(3*time.Second, 8*time.Second)
			case IsolateLeader, Split:
				f.Down = between(4*time.Second, 10*time.Second)
			case ClockJump:
				f.Down = between(8*time.Second, 15*time.Second)
				f.OnLeader = rng.IntN(4) > 0
				f.Offset = between(10*time.Second, 40*time.Second).Round(time.Second)
				if rng.IntN(2) == 0 {
					f.Offset = -f.Offset
				}
			case DiskLoss:
				f.Down = between(2*time.Second, 5*time.Second)
				f.OnLeader = rng.IntN(2) == 0
			case NomadRestart:
				f.Down = between(3*time.Second, 8*time.Second)
			}
			f.Down = f.Down.Round(100 * time.Millisecond)
			if at+f.Down > end {
				return s
			}
			s.Faults = append(s.Faults, f)
			at += f.Down + f.recovery(f.Down) + between(settle, 2*settle)
		}
	}
}

// Missing lists the kinds the schedule lacks (a run too short for all).
func (s Schedule) Missing() []Kind {
	var out []Kind
	for _, k := range AllKinds {
		found := false
		for _, f := range s.Faults {
			found = found || f.Kind == k
		}
		if !found {
			out = append(out, k)
		}
	}
	return out
}

// Print writes the schedule: its seed and every fault with its time.
func (s Schedule) Print(w io.Writer) {
	fmt.Fprintf(w, "fault schedule: seed %d, %v, %d faults (replay: -seed %d -duration %v)\n", s.Seed, s.Duration, len(s.Faults), s.Seed, s.Duration)
	for i, f := range s.Faults {
		fmt.Fprintf(w, "  %2d. %s\n", i+1, f)
	}
	if m := s.Missing(); len(m) > 0 {
		var names []string
		for _, k := range m {
			names = append(names, string(k))
		}
		fmt.Fprintf(w, "  (too short for every kind: no %s)\n", strings.Join(names, ", "))
	}
}

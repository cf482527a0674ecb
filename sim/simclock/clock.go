package simclock

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"time"
)

// ppmScale is one million: drift is in parts per million.
const ppmScale = 1_000_000

// Clock is one replica's local clock against true time. It has two
// readings, as a real host has:
//
//   - the monotonic reading (Mono), which starts at zero, never jumps and
//     runs at rate 1+DriftPPM/1e6 of true time; paxos ticks follow it;
//   - the wall reading (Wall), which runs at the same rate but also moves
//     by Jump (an NTP step or an operator setting the date); cron schedules
//     follow it.
//
// The rate is piecewise constant: SetDriftPPM re-anchors the clock at the
// instant of the change, so readings stay continuous. Because the future
// rate is unknown, TrueAtMono and its helpers answer for the current rate;
// a caller that changes the drift must reschedule whatever it derived from
// them.
type Clock struct {
	maxDriftPPM int
	driftPPM    int
	exceeded    bool
	// The monotonic reading was anchorMono at true time anchorTrue, and
	// has run at the current rate since.
	anchorTrue time.Duration
	anchorMono time.Duration
	// wallBase is Wall minus Mono: the true time the clock was created at
	// plus every jump.
	wallBase time.Duration
	jumps    int
}

// NewClock returns a clock created at true time now, whose monotonic reading
// starts at zero and whose wall reading starts at now. Its drift is drawn
// uniformly from [-maxDriftPPM, +maxDriftPPM] using r.
func NewClock(now time.Duration, maxDriftPPM int, r *rand.Rand) *Clock {
	c := NewClockWithDrift(now, maxDriftPPM, 0)
	c.RedrawDrift(now, r)
	return c
}

// NewClockWithDrift is NewClock with a chosen drift, for tests and for
// scenarios that pin the worst case.
func NewClockWithDrift(now time.Duration, maxDriftPPM, driftPPM int) *Clock {
	if maxDriftPPM < 0 || maxDriftPPM >= ppmScale {
		panic(fmt.Sprintf("simclock: maxDriftPPM %d outside [0, 1e6)", maxDriftPPM))
	}
	c := &Clock{maxDriftPPM: maxDriftPPM, anchorTrue: now, wallBase: now}
	c.SetDriftPPM(now, driftPPM)
	return c
}

// MaxDriftPPM returns the drift bound the clock was configured with.
func (c *Clock) MaxDriftPPM() int { return c.maxDriftPPM }

// DriftPPM returns the current drift: positive runs fast, negative slow.
func (c *Clock) DriftPPM() int { return c.driftPPM }

// WithinBound reports whether the drift has stayed within MaxDriftPPM for
// the clock's whole life. Invariants that hold only under bounded drift
// (mutual exclusion, 9) are judged by it.
func (c *Clock) WithinBound() bool { return !c.exceeded }

// Jumps returns how many times the wall reading was jumped.
func (c *Clock) Jumps() int { return c.jumps }

// SetDriftPPM changes the rate from true time now on. A drift beyond
// MaxDriftPPM is allowed (the simulator injects such faults on purpose) and
// clears WithinBound for good; a drift of ±1e6 or more would stop or reverse
// the clock and panics.
func (c *Clock) SetDriftPPM(now time.Duration, ppm int) {
	if ppm <= -ppmScale || ppm >= ppmScale {
		panic(fmt.Sprintf("simclock: drift %d ppm would stop or reverse the clock", ppm))
	}
	c.anchorMono = c.Mono(now)
	c.anchorTrue = now
	c.driftPPM = ppm
	if abs(ppm) > c.maxDriftPPM {
		c.exceeded = true
	}
}

// RedrawDrift draws a new drift within the bound, effective from now, and
// returns it.
func (c *Clock) RedrawDrift(now time.Duration, r *rand.Rand) int {
	ppm := r.IntN(2*c.maxDriftPPM+1) - c.maxDriftPPM
	c.SetDriftPPM(now, ppm)
	return ppm
}

// Jump moves the wall reading by d (either way); the monotonic reading is
// untouched.
func (c *Clock) Jump(d time.Duration) {
	c.wallBase += d
	c.jumps++
}

// Mono returns the monotonic reading at true time now. Asking about an
// instant before the last drift change panics: the clock keeps no history.
func (c *Clock) Mono(now time.Duration) time.Duration {
	if now < c.anchorTrue {
		panic(fmt.Sprintf("simclock: Mono(%v) before the clock's anchor %v", now, c.anchorTrue))
	}
	elapsed := uint64(now - c.anchorTrue)
	return c.anchorMono + time.Duration(mulDiv(elapsed, c.rate(), ppmScale))
}

// Wall returns the wall reading at true time now, as a duration since the
// run's epoch (the caller adds its epoch to get a time.Time).
func (c *Clock) Wall(now time.Duration) time.Duration {
	return c.wallBase + c.Mono(now)
}

// TrueAtMono returns the earliest true instant at which the monotonic
// reading is at least mono, at the current rate. The rounding is exact:
// Mono(TrueAtMono(m)) >= m and Mono(TrueAtMono(m)-1) < m.
func (c *Clock) TrueAtMono(mono time.Duration) time.Duration {
	if mono <= c.anchorMono {
		if mono < c.anchorMono {
			panic(fmt.Sprintf("simclock: TrueAtMono(%v) before the clock's anchor reading %v", mono, c.anchorMono))
		}
		return c.anchorTrue
	}
	local := uint64(mono - c.anchorMono)
	return c.anchorTrue + time.Duration(mulDivCeil(local, ppmScale, c.rate()))
}

// TrueAfter returns the true instant at which d of local (monotonic) time
// will have elapsed from true time now: what a local timer of d set at now
// fires at.
func (c *Clock) TrueAfter(now, d time.Duration) time.Duration {
	if d < 0 {
		panic(fmt.Sprintf("simclock: TrueAfter with negative duration %v", d))
	}
	return c.TrueAtMono(c.Mono(now) + d)
}

// NextTick returns the true instant at which the monotonic reading next
// reaches a multiple of interval strictly after its reading at now, and
// that multiple's index k (the tick number). A replica's ticker schedules
// its next Tick there.
func (c *Clock) NextTick(now, interval time.Duration) (at time.Duration, k int64) {
	if interval <= 0 {
		panic(fmt.Sprintf("simclock: NextTick with interval %v", interval))
	}
	k = int64(c.Mono(now)/interval) + 1
	return c.TrueAtMono(time.Duration(k) * interval), k
}

// rate is the clock's speed in millionths of true time.
func (c *Clock) rate() uint64 { return uint64(ppmScale + c.driftPPM) }

// mulDiv returns floor(a*b/d) without overflowing 64 bits in the product
// (a run of a few hours in nanoseconds times 1e6 would).
func mulDiv(a, b, d uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, d) // panics only if the quotient overflows
	return q
}

// mulDivCeil returns ceil(a*b/d).
func mulDivCeil(a, b, d uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, r := bits.Div64(hi, lo, d)
	if r != 0 {
		q++
	}
	return q
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

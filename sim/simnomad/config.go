package simnomad

import (
	"errors"
	"fmt"
	"time"
)

// Config sets the simulated Nomad's timing and faults. Ranges are inclusive
// and drawn uniformly; each may be a single value (min == max).
type Config struct {
	// Epoch is the server's wall clock at true time zero. Child IDs carry
	// the server's unix seconds, as Nomad's do.
	Epoch time.Time
	// RequestLatencyMin and RequestLatencyMax bound the request leg: a call
	// takes effect at Nomad that long after it is made. A slow Nomad is a
	// large range here and in the reply leg.
	RequestLatencyMin time.Duration
	RequestLatencyMax time.Duration
	// ReplyLatencyMin and ReplyLatencyMax bound the reply leg, from the
	// call taking effect to its reply reaching the caller.
	ReplyLatencyMin time.Duration
	ReplyLatencyMax time.Duration
	// ReplyLossProbability is the chance, per call, that the reply never
	// arrives although the call took effect: the caller only sees its
	// deadline pass.
	ReplyLossProbability float64
	// NotSentProbability is the chance, per call, that it never reaches
	// Nomad (its time ran out waiting for a connection) and the caller
	// knows it: answered at its deadline with an error wrapping
	// launcher.ErrNotSent, and no effect.
	NotSentProbability float64
	// RunMin and RunMax bound how long a child runs after its creation
	// before it finishes on its own.
	RunMin time.Duration
	RunMax time.Duration
	// GCThreshold is how long a child stays, finished, before garbage
	// collection removes it and forgets its token (Nomad's
	// job_gc_threshold). Zero collects a child as soon as it finishes.
	GCThreshold time.Duration
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("simnomad: invalid config")

// Validate reports whether c is usable.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Epoch.IsZero():
		return bad("Epoch must be set")
	case !span(c.RequestLatencyMin, c.RequestLatencyMax):
		return bad("need 0 <= RequestLatencyMin (%v) <= RequestLatencyMax (%v)", c.RequestLatencyMin, c.RequestLatencyMax)
	case !span(c.ReplyLatencyMin, c.ReplyLatencyMax):
		return bad("need 0 <= ReplyLatencyMin (%v) <= ReplyLatencyMax (%v)", c.ReplyLatencyMin, c.ReplyLatencyMax)
	case !(c.ReplyLossProbability >= 0 && c.ReplyLossProbability <= 1):
		return bad("ReplyLossProbability must lie in [0, 1]: %v", c.ReplyLossProbability)
	case !(c.NotSentProbability >= 0 && c.NotSentProbability <= 1):
		return bad("NotSentProbability must lie in [0, 1]: %v", c.NotSentProbability)
	case !span(c.RunMin, c.RunMax):
		return bad("need 0 <= RunMin (%v) <= RunMax (%v)", c.RunMin, c.RunMax)
	case c.GCThreshold < 0:
		return bad("GCThreshold must not be negative: %v", c.GCThreshold)
	}
	return nil
}

// span reports whether lo and hi bound a range of durations.
func span(lo, hi time.Duration) bool { return lo >= 0 && hi >= lo }

// DefaultConfig is a healthy Nomad: 1-20 ms each way, no lost replies,
// children that run 1-30 s, and Nomad's default 4 h GC threshold. Its
// epoch is fixed so that child IDs do not depend on when the run happens.
func DefaultConfig() Config {
	return Config{
		Epoch:             time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		RequestLatencyMin: time.Millisecond,
		RequestLatencyMax: 20 * time.Millisecond,
		ReplyLatencyMin:   time.Millisecond,
		ReplyLatencyMax:   20 * time.Millisecond,
		RunMin:            time.Second,
		RunMax:            30 * time.Second,
		GCThreshold:       4 * time.Hour,
	}
}

package simnet

import (
	"errors"
	"fmt"
	"time"
)

// JitterKind is the shape of the random part of a message's delay.
type JitterKind uint8

const (
	// JitterNone adds nothing: every message takes DelayBase (plus tails).
	JitterNone JitterKind = iota
	// JitterExponential adds an exponential delay of mean DelayJitter:
	// mostly small, sometimes several times the mean, as queues behave.
	JitterExponential
	// JitterUniform adds a delay uniform in [0, DelayJitter).
	JitterUniform
)

func (k JitterKind) String() string {
	switch k {
	case JitterNone:
		return "none"
	case JitterExponential:
		return "exponential"
	case JitterUniform:
		return "uniform"
	}
	return fmt.Sprintf("JitterKind(%d)", uint8(k))
}

// Config sets the network's delays and fault rates. Probabilities are per
// message, in [0, 1].
type Config struct {
	// DelayBase is the least one-way delay of every message.
	DelayBase time.Duration
	// DelayJitterKind and DelayJitter shape the random delay added to
	// DelayBase. Jitter is what reorders messages on one link.
	DelayJitterKind JitterKind
	DelayJitter     time.Duration
	// DelayTailProbability is the chance that a message is held up by an
	// extra delay drawn uniformly from [DelayTailMin, DelayTailMax] (a
	// retransmission, a GC pause in a switch): the long tail.
	DelayTailProbability float64
	DelayTailMin         time.Duration
	DelayTailMax         time.Duration
	// LossProbability is the chance that a message is dropped on send.
	LossProbability float64
	// DuplicateProbability is the chance that a message is delivered twice,
	// the copy with a delay of its own.
	DuplicateProbability float64
	// MaxInFlightMessages bounds the messages sent and not yet delivered;
	// beyond it Send drops (and counts) the message, as a full buffer
	// would, so a message storm cannot exhaust the simulator's memory.
	MaxInFlightMessages int
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("simnet: invalid config")

// Validate reports whether c is usable.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	prob := func(p float64) bool { return p >= 0 && p <= 1 }
	switch {
	case c.DelayBase < 0 || c.DelayJitter < 0:
		return bad("DelayBase (%v) and DelayJitter (%v) must not be negative", c.DelayBase, c.DelayJitter)
	case c.DelayJitterKind > JitterUniform:
		return bad("unknown DelayJitterKind %v", c.DelayJitterKind)
	case c.DelayTailMin < 0 || c.DelayTailMax < c.DelayTailMin:
		return bad("need 0 <= DelayTailMin (%v) <= DelayTailMax (%v)", c.DelayTailMin, c.DelayTailMax)
	case !prob(c.DelayTailProbability) || !prob(c.LossProbability) || !prob(c.DuplicateProbability):
		return bad("probabilities must lie in [0, 1]: tail %v, loss %v, duplicate %v",
			c.DelayTailProbability, c.LossProbability, c.DuplicateProbability)
	case c.MaxInFlightMessages <= 0:
		return bad("MaxInFlightMessages must be positive: %d", c.MaxInFlightMessages)
	}
	return nil
}

// DefaultLANConfig is a healthy data-centre network: 0.5 ms base, 0.2 ms
// mean exponential jitter, one message in a thousand delayed 20-200 ms, and
// no loss or duplication.
func DefaultLANConfig() Config {
	return Config{
		DelayBase:            500 * time.Microsecond,
		DelayJitterKind:      JitterExponential,
		DelayJitter:          200 * time.Microsecond,
		DelayTailProbability: 0.001,
		DelayTailMin:         20 * time.Millisecond,
		DelayTailMax:         200 * time.Millisecond,
		MaxInFlightMessages:  1 << 20,
	}
}

// DefaultLossyConfig is a bad network for fault runs: 1 ms base, 5 ms mean
// jitter (so reordering is common), 1% long tails of 50-500 ms, 5% loss and
// 2% duplication.
func DefaultLossyConfig() Config {
	return Config{
		DelayBase:            time.Millisecond,
		DelayJitterKind:      JitterExponential,
		DelayJitter:          5 * time.Millisecond,
		DelayTailProbability: 0.01,
		DelayTailMin:         50 * time.Millisecond,
		DelayTailMax:         500 * time.Millisecond,
		LossProbability:      0.05,
		DuplicateProbability: 0.02,
		MaxInFlightMessages:  1 << 20,
	}
}

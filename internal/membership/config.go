package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"
)

// Limits on a Config: a Paxos cluster has a handful of replicas, so
// anything near these is a mistake, not a large cluster.
const (
	// MembersMax bounds Config.Members.
	MembersMax = 64
	// SeedsMax bounds Config.Join.
	SeedsMax = 64
)

// Config configures Start. Every field without "optional" is required: a
// missing one is an error from Start, never a silent default.
type Config struct {
	// Self is this replica: its ID names its memberlist node
	// ("replica-<id>") and the whole is its node meta.
	Self PeerInfo
	// Members are the cluster's replica IDs, Self.ID among them. A node
	// claiming another ID is ignored (and counted in Stats).
	Members []uint64
	// BindAddr is the host:port memberlist listens on, UDP and TCP alike.
	// Port 0 picks a free port (the same for both); Addr tells which.
	BindAddr string
	// AdvertiseAddr (optional) is the ip:port the others reach this
	// replica at; by default BindAddr's (with an unspecified BindAddr host
	// such as 0.0.0.0, memberlist then picks a private IP of the machine).
	// Port 0 means the bound port.
	AdvertiseAddr string
	// Join (optional) are other replicas' gossip addresses, host:port.
	// Start tries them in the background until one answers or Close. The
	// first replica up may have nobody to join: the others join it.
	Join []string
	// SecretKey (optional) is memberlist's gossip key, 16, 24 or 32 bytes
	// (AES-128, -192, -256): every packet is then encrypted and
	// authenticated, and a node without the key can neither join nor be
	// heard. Without it, anyone who reaches BindAddr can gossip; the
	// Members filter keeps strangers out of Peers but authenticates
	// nothing. Set it in production.
	SecretKey []byte
	// Logger receives this package's logs and memberlist's (at their
	// levels: memberlist's DEBUG lines are many).
	Logger *slog.Logger
	// Events receives the peers' comings and goings.
	Events Events
	// Timing tunes failure detection: DefaultTiming() unless there is a
	// reason.
	Timing Timing
}

// Events is what membership tells the server about the other replicas
// (never about Self).
//
// Calls come from memberlist's goroutines while memberlist holds its own
// state lock, one at a time and in the order below for any one peer. An
// implementation must not block (hand the news to the server's loop and
// return: a slow handler stalls failure detection for everyone) and must
// not call Leave or Close. No call starts after Close begins, and none is
// in flight when Close returns.
//
// For one peer the calls follow this order: PeerUpdated then PeerAlive
// when it joins (the first time or again after PeerSuspected);
// PeerUpdated alone when it announces new addresses while alive;
// PeerSuspected when memberlist declares it dead or it leaves.
type Events interface {
	// PeerUpdated: the peer joined, or its addresses changed. The server
	// points its transport at p.PaxosAddr.
	PeerUpdated(p PeerInfo)
	// PeerSuspected: memberlist declared the peer dead (it stopped
	// answering probes for the suspicion timeout) or it left. A hint for
	// the Paxos core's suspicion input, nothing more.
	PeerSuspected(id uint64)
	// PeerAlive: the peer is alive, after joining or coming back.
	PeerAlive(id uint64)
}

// ErrConfig wraps every error of Config.validate.
var ErrConfig = errors.New("membership: invalid config")

func (c *Config) validate() error {
	if err := c.validateMembers(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if err := c.validateAddrs(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	switch {
	case len(c.SecretKey) != 0 && len(c.SecretKey) != 16 && len(c.SecretKey) != 24 && len(c.SecretKey) != 32:
		return fmt.Errorf("%w: SecretKey has %d bytes, want 16, 24 or 32 (or none)", ErrConfig, len(c.SecretKey))
	case c.Logger == nil:
		return fmt.Errorf("%w: no Logger", ErrConfig)
	case c.Events == nil:
		return fmt.Errorf("%w: no Events", ErrConfig)
	}
	if err := c.Timing.validate(); err != nil {
		return fmt.Errorf("%w: Timing: %v", ErrConfig, err)
	}
	return nil
}

func (c *Config) validateMembers() error {
	if _, err := appendPeerInfo(nil, c.Self); err != nil {
		return fmt.Errorf("bad Self: %v", err)
	}
	if len(c.Members) == 0 || len(c.Members) > MembersMax {
		return fmt.Errorf("%d replicas in Members, want 1 to %d", len(c.Members), MembersMax)
	}
	sorted := slices.Sorted(slices.Values(c.Members))
	if sorted[0] == 0 {
		return fmt.Errorf("replica ID zero in Members %v", c.Members)
	}
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return fmt.Errorf("replica %d twice in Members %v", sorted[i], c.Members)
		}
	}
	if !slices.Contains(c.Members, c.Self.ID) {
		return fmt.Errorf("Self.ID %d is not among the Members %v", c.Self.ID, c.Members)
	}
	return nil
}

func (c *Config) validateAddrs() error {
	if c.BindAddr == "" {
		return errors.New("no BindAddr")
	}
	if _, _, err := splitHostPort(c.BindAddr); err != nil {
		return fmt.Errorf("BindAddr: %v", err)
	}
	if c.AdvertiseAddr != "" {
		host, _, err := splitHostPort(c.AdvertiseAddr)
		if err != nil {
			return fmt.Errorf("AdvertiseAddr: %v", err)
		}
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			return fmt.Errorf("AdvertiseAddr %q: the host must be an IP address others can reach", c.AdvertiseAddr)
		}
	}
	if len(c.Join) > SeedsMax {
		return fmt.Errorf("%d Join seeds, at most %d", len(c.Join), SeedsMax)
	}
	for _, seed := range c.Join {
		host, port, err := splitHostPort(seed)
		if err != nil || host == "" || port == 0 {
			return fmt.Errorf("seed %q in Join is not host:port", seed)
		}
	}
	return nil
}

// splitHostPort splits a host:port whose port is 0 to 65535.
func splitHostPort(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port", addr)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("%q: the port must be 0-65535", addr)
	}
	return host, int(p), nil
}

// Timing tunes memberlist's failure detector (SWIM). A crashed replica is
// declared dead after
//
//	wait for a probe + ProbeInterval + SuspicionMult × ProbeInterval
//
// where the wait is at most (members - 1) probe intervals for one prober
// (each replica probes the others in turn) and usually far less, since
// every other replica probes it too: a probe that gets no ack within
// ProbeTimeout is retried through IndirectChecks other replicas and over
// TCP until the probe interval ends; then the replica is suspected, and
// declared dead unless it refutes within the suspicion timeout. For up to
// 10 replicas memberlist's log10 scaling of the suspicion timeout is 1.
//
// Durations are time.Duration; the integer fields are counts or
// multipliers as their comments say. Field names are memberlist's.
type Timing struct {
	// ProbeInterval: how often each replica probes another.
	ProbeInterval time.Duration
	// ProbeTimeout: how long a direct probe waits for its ack before the
	// indirect and TCP probes start; below ProbeInterval.
	ProbeTimeout time.Duration
	// SuspicionMult: the suspicion timeout in probe intervals (times
	// log10 of the cluster size when above 10).
	SuspicionMult int
	// SuspicionMaxTimeoutMult: how many suspicion timeouts a suspicion
	// may last while waiting for other replicas to confirm it (it is not
	// used below SuspicionMult 3, nor with fewer than SuspicionMult
	// replicas).
	SuspicionMaxTimeoutMult int
	// IndirectChecks: how many other replicas probe on behalf of a
	// failed direct probe.
	IndirectChecks int
	// GossipInterval: how often queued gossip (joins, suspicions,
	// deaths) is sent.
	GossipInterval time.Duration
	// GossipToTheDeadTime: how long a dead replica is still gossiped to,
	// so that one declared dead wrongly learns it and refutes.
	GossipToTheDeadTime time.Duration
	// PushPullInterval: how often a replica exchanges its whole view with
	// another over TCP, healing what gossip lost.
	PushPullInterval time.Duration
	// TCPTimeout bounds a TCP exchange: a join, a push/pull.
	TCPTimeout time.Duration
	// RetransmitMult: how many times each gossip message is sent, times
	// ceil(log10(cluster size + 1)).
	RetransmitMult int
	// DeadNodeReclaimTime: how long after a replica is declared dead its
	// name may come back from another address (a replica moved to another
	// machine, or restarted on a new port). Memberlist's default, zero,
	// never lets it.
	DeadNodeReclaimTime time.Duration
	// JoinBackoffInitial and JoinBackoffMax: the wait after the first
	// failed join of the seeds, doubled after each failure up to the max.
	JoinBackoffInitial time.Duration
	JoinBackoffMax     time.Duration
}

// DefaultTiming is for three to seven replicas on one LAN or one machine:
// a SIGKILLed replica is declared dead in about 0.5-1 s (memberlist's
// LAN defaults take 5-8 s). The Paxos core's own heartbeats elect a new
// leader within about a second anyway; this hint only has to be sooner.
func DefaultTiming() Timing {
	return Timing{
		// A LAN round trip is well under a millisecond; 200 ms leaves
		// room for a replica busy with fsyncs or a GC pause before a
		// probe fails, yet keeps detection under a second.
		ProbeInterval: 200 * time.Millisecond,
		// Half the interval: the indirect and TCP probes then still get
		// the other half before the interval ends.
		ProbeTimeout: 100 * time.Millisecond,
		// Suspected for 2 probe intervals (400 ms): time for a live but
		// slow replica to hear the suspicion and refute it. At 2 no
		// confirmations are awaited, so three replicas behave like five.
		SuspicionMult: 2,
		// Unused at SuspicionMult 2 (no confirmations are awaited). Should
		// SuspicionMult be raised to await them, an unconfirmed suspicion
		// then lasts 3 timeouts, not memberlist's 6.
		SuspicionMaxTimeoutMult: 3,
		// Every other replica of a five-replica cluster: a bad link
		// between prober and target alone never makes a suspicion.
		IndirectChecks: 3,
		// Suspicion and death spread within a tick or two (memberlist's
		// 200 ms would add up to that to every replica's detection).
		GossipInterval: 50 * time.Millisecond,
		// Two push/pull intervals: a wrongly declared replica hears of it
		// by gossip or by its next push/pull, whichever comes first.
		GossipToTheDeadTime: 4 * time.Second,
		// A handful of replicas exchange a few hundred bytes: cheap every
		// 2 s, and a restarted or moved replica is found again within it.
		PushPullInterval: 2 * time.Second,
		// Far above any LAN exchange, short enough that an unreachable
		// seed does not hold up the join loop (memberlist's is 10 s).
		TCPTimeout: 2 * time.Second,
		// Memberlist's: four sends to up to three replicas each reach a
		// small cluster many times over; messages are tiny.
		RetransmitMult: 4,
		// A name comes back from a new address only after its old owner
		// has been dead this long, which damps two live processes fighting
		// over one ID; a replica moved to another machine is then found at
		// its next push/pull (2-4 s after a restart in the tests).
		DeadNodeReclaimTime: 1 * time.Second,
		// Retry soon (the seed may just be starting), then every 5 s at
		// most: cheap, and a late replica joins within that.
		JoinBackoffInitial: 100 * time.Millisecond,
		JoinBackoffMax:     5 * time.Second,
	}
}

// MemberlistLANTiming is memberlist's own DefaultLANConfig, for a
// congested network where DefaultTiming suspects replicas that are only
// slow: a crash is then declared dead in 5-8 s. DeadNodeReclaimTime, zero
// there (never), is 30 s here, a push/pull interval.
func MemberlistLANTiming() Timing {
	return Timing{
		ProbeInterval:           1 * time.Second,
		ProbeTimeout:            500 * time.Millisecond,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 6,
		IndirectChecks:          3,
		GossipInterval:          200 * time.Millisecond,
		GossipToTheDeadTime:     30 * time.Second,
		PushPullInterval:        30 * time.Second,
		TCPTimeout:              10 * time.Second,
		RetransmitMult:          4,
		DeadNodeReclaimTime:     30 * time.Second,
		JoinBackoffInitial:      1 * time.Second,
		JoinBackoffMax:          30 * time.Second,
	}
}

func (t Timing) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ProbeInterval", t.ProbeInterval}, {"ProbeTimeout", t.ProbeTimeout},
		{"GossipInterval", t.GossipInterval}, {"GossipToTheDeadTime", t.GossipToTheDeadTime},
		{"PushPullInterval", t.PushPullInterval}, {"TCPTimeout", t.TCPTimeout},
		{"DeadNodeReclaimTime", t.DeadNodeReclaimTime},
		{"JoinBackoffInitial", t.JoinBackoffInitial}, {"JoinBackoffMax", t.JoinBackoffMax},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s is %v, want more than 0", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"SuspicionMult", t.SuspicionMult}, {"SuspicionMaxTimeoutMult", t.SuspicionMaxTimeoutMult},
		{"IndirectChecks", t.IndirectChecks}, {"RetransmitMult", t.RetransmitMult},
	} {
		if n.v < 1 {
			return fmt.Errorf("%s is %d, want at least 1", n.name, n.v)
		}
	}
	switch {
	case t.ProbeTimeout >= t.ProbeInterval:
		return fmt.Errorf("ProbeTimeout %v is not below ProbeInterval %v", t.ProbeTimeout, t.ProbeInterval)
	case t.JoinBackoffInitial > t.JoinBackoffMax:
		return fmt.Errorf("JoinBackoffInitial %v is above JoinBackoffMax %v", t.JoinBackoffInitial, t.JoinBackoffMax)
	}
	return nil
}

// Package gossip owns how replicas find one another and notice a crash:
// one hashicorp/memberlist instance per replica, named after its replica
// ID, carrying in its node meta where the replica's Paxos transport and
// HTTP API listen, and its cluster ID. The server learns from it each
// peer's current addresses (a replica moved to another machine keeps its
// ID and is found again) and a hint when a peer is declared dead, which
// it feeds to the Paxos core's suspicion input to elect a new leader
// sooner. A node whose cluster ID is another than this replica's, both
// known, is ignored: a replica started on another cluster's data folder,
// with the same key and replica ID, must not take the real replica's
// place in the others' address books. The meta also carries a
// fingerprint of each setting every replica must hold alike (Setting:
// the backup target, Nomad's address, region and namespace...), and a
// peer whose differ from this replica's is logged, once per change, and
// listed (Differing); it is not refused.
//
// Nothing safe depends on it: the core elects leaders by its own
// heartbeats and timeouts, and its leases keep a wrong hint harmless.
// memberlist reads the clock and runs goroutines, so the simulator never
// sees this package; it drives the core's ReportSuspect directly.
package gossip

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// ClusterIDBytes is the length of a cluster ID (cron/state.ClusterID).
const ClusterIDBytes = 16

// Peer is a replica as gossip carries it.
type Peer struct {
	ID uint64
	// ClusterID is the cluster its state belongs to, zero while it knows
	// none. A peer of another cluster than this replica's, both known,
	// is ignored: its addresses are not this cluster's replica's.
	ClusterID [ClusterIDBytes]byte
	// PaxosAddr and APIAddr are where its transport and API listen.
	PaxosAddr string
	APIAddr   string
	// settings are the fingerprints of its shared settings
	// (Config.Settings), none from a replica of a version before them.
	settings settingSums
}

// Events is what gossip tells the server. Each is called from memberlist's
// goroutines and must not block.
type Events struct {
	// Updated: the peer joined, or its addresses changed.
	Updated func(Peer)
	// Dead: the peer stopped answering probes (or left); a hint that it
	// may have crashed.
	Dead func(id uint64)
}

// Timing tunes memberlist for replicas on a LAN. A replica that stops
// answering is declared dead after a failed probe (ProbeInterval +
// ProbeTimeout) and the suspicion timeout: SuspicionMult probe intervals,
// up to SuspicionMaxTimeoutMult times that without confirmation from the
// third replica. memberlist's LAN defaults take 5-8 s; these about 1 s,
// close to the leader's lease, which a new leader must wait out anyway.
type Timing struct {
	// ProbeInterval: how often each node probes a random other.
	ProbeInterval time.Duration
	// ProbeTimeout: how long a probe waits for an ack (a LAN round trip
	// is well under a millisecond; a busy replica's may be tens).
	ProbeTimeout time.Duration
	// SuspicionMult: the suspicion timeout in probe intervals (at least
	// 1, scaled by the log of the cluster size).
	SuspicionMult int
	// SuspicionMaxTimeoutMult: how many times longer it may last without
	// confirmation from another node.
	SuspicionMaxTimeoutMult int
	// IndirectChecks: how many other nodes probe on a failed probe's
	// behalf (two in a three-replica cluster: all there are).
	IndirectChecks int
	// GossipInterval: how often gossip is sent (suspicion and death
	// spread with it).
	GossipInterval time.Duration
	// PushPullInterval: how often a full state exchange heals what
	// gossip missed.
	PushPullInterval time.Duration
	// TCPTimeout bounds a TCP exchange (join, push/pull).
	TCPTimeout time.Duration
	// RetransmitMult: how many times a gossip message is retransmitted,
	// scaled by the log of the cluster size.
	RetransmitMult int
	// GossipToTheDeadTime: how long a dead node is still gossiped to, so
	// that one that comes back learns it was declared dead.
	GossipToTheDeadTime time.Duration
}

// DefaultTiming suits three or five replicas on a LAN.
func DefaultTiming() Timing {
	return Timing{
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		SuspicionMult:           2,
		SuspicionMaxTimeoutMult: 2,
		IndirectChecks:          2,
		GossipInterval:          50 * time.Millisecond,
		PushPullInterval:        5 * time.Second,
		TCPTimeout:              2 * time.Second,
		RetransmitMult:          3,
		GossipToTheDeadTime:     5 * time.Second,
	}
}

// Config configures Start.
type Config struct {
	// Self is this replica.
	Self Peer
	// Members are the cluster's replica IDs: a node gossiping another ID
	// is ignored.
	Members []uint64
	// BindAddr is where memberlist listens (UDP and TCP), host:port;
	// AdvertiseAddr what others reach it at (default BindAddr).
	BindAddr, AdvertiseAddr string
	// Join are other replicas' gossip addresses; joining is retried in the
	// background until one answers (the first replica up has nobody to
	// join yet, and is joined by the others).
	Join []string
	// Key is the cluster key: gossip is encrypted and authenticated with a
	// key derived from it, so a process without it can neither read nor
	// inject membership.
	Key []byte
	// AcceptKeys are further cluster keys whose gossip is accepted
	// (optional, during a key rotation): gossip is sent under Key's and
	// read under any of them (memberlist's keyring).
	AcceptKeys [][]byte
	// Settings are those every replica must hold alike (Setting): their
	// fingerprints are gossiped, and a peer's that differ are logged and
	// listed (Differing). Optional: none compared.
	Settings []Setting
	Logger   *slog.Logger
	Events   Events
	// Timing: DefaultTiming when zero.
	Timing Timing
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("gossip: invalid config")

// Gossip is a running member. Its methods are safe for concurrent use.
type Gossip struct {
	cfg     Config
	ml      *memberlist.Memberlist
	log     *slog.Logger
	ignored atomic.Uint64
	stop    chan struct{}
	done    chan struct{}

	// conflicts counts NotifyConflict calls.
	conflicts atomic.Uint64

	// settings are Config.Settings by code, without their values.
	settings []Setting

	mu    sync.Mutex
	self  Peer            // Config.Self, its ClusterID as SetClusterID left it, its settings' fingerprints
	peers map[uint64]Peer // alive, by ID
	// differ holds, per alive peer whose shared settings differ from
	// this replica's, their names.
	differ map[uint64][]string
}

// Start starts memberlist and joins the others in the background.
func Start(cfg Config) (*Gossip, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Timing == (Timing{}) {
		cfg.Timing = DefaultTiming()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AdvertiseAddr == "" {
		cfg.AdvertiseAddr = cfg.BindAddr
	}
	g := &Gossip{cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), done: make(chan struct{}), self: cfg.Self, peers: map[uint64]Peer{}, differ: map[uint64][]string{}}
	g.self.settings, _ = sumsOf(cfg.Settings) // validated
	for _, x := range cfg.Settings {
		g.settings = append(g.settings, Setting{Code: x.Code, Name: x.Name})
	}
	slices.SortFunc(g.settings, func(a, b Setting) int { return cmp.Compare(a.Code, b.Code) })
	mc, err := g.memberlistConfig()
	if err != nil {
		return nil, err
	}
	if g.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("gossip: starting memberlist on %s: %w", cfg.BindAddr, err)
	}
	go g.joinLoop()
	return g, nil
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Self.ID == 0:
		return bad("Self.ID is zero")
	case !slices.Contains(c.Members, c.Self.ID):
		return bad("replica %d is not among the members %v", c.Self.ID, c.Members)
	case len(c.Key) < 16:
		return bad("the cluster key has %d bytes, want at least 16", len(c.Key))
	}
	for i, k := range c.AcceptKeys {
		if len(k) < 16 {
			return bad("accepted cluster key %d has %d bytes, want at least 16", i+1, len(k))
		}
	}
	if _, err := splitHostPort(c.BindAddr); err != nil {
		return bad("BindAddr: %v", err)
	}
	if c.AdvertiseAddr != "" {
		if _, err := splitHostPort(c.AdvertiseAddr); err != nil {
			return bad("AdvertiseAddr: %v", err)
		}
	}
	sums, err := sumsOf(c.Settings)
	if err != nil {
		return bad("%v", err)
	}
	self := c.Self
	self.settings = sums
	if _, err := encodeMeta(self); err != nil {
		return bad("%v", err)
	}
	return nil
}

type hostPort struct {
	host string
	port int
}

func splitHostPort(addr string) (hostPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return hostPort{}, fmt.Errorf("%q is not host:port", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return hostPort{}, fmt.Errorf("%q: bad port", addr)
	}
	return hostPort{host, p}, nil
}

// resolveAdvertised returns an address of host for memberlist to
// advertise: its first IPv4 address, or else its first.
func resolveAdvertised(host string) (string, error) {
	ips, err := net.LookupIP(host)
	if err != nil {
		return "", err
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("%s has no address", host)
	}
	for _, ip := range ips {
		if ip.To4() != nil {
			return ip.String(), nil
		}
	}
	return ips[0].String(), nil
}

// nodeName is a replica's memberlist name: the same wherever it runs.
func nodeName(id uint64) string { return "replica-" + strconv.FormatUint(id, 10) }

// idOfName is the replica ID a memberlist name stands for, if it is one.
func idOfName(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, "replica-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 || nodeName(id) != name {
		return 0, false
	}
	return id, true
}

func (g *Gossip) memberlistConfig() (*memberlist.Config, error) {
	c, t := g.cfg, g.cfg.Timing
	mc := memberlist.DefaultLANConfig()
	mc.Name = nodeName(c.Self.ID)
	bind, _ := splitHostPort(c.BindAddr)
	adv, _ := splitHostPort(c.AdvertiseAddr)
	mc.BindAddr, mc.BindPort = bind.host, bind.port
	switch ip := net.ParseIP(adv.host); {
	case ip != nil && !ip.IsUnspecified():
		mc.AdvertiseAddr, mc.AdvertisePort = adv.host, adv.port
	case ip == nil && adv.host != "":
		// memberlist takes an IP: a host name is resolved once, here. It
		// was once passed over, and memberlist then advertised a guessed
		// address with the bind port, wrong behind NAT or a port map.
		addr, err := resolveAdvertised(adv.host)
		if err != nil {
			return nil, fmt.Errorf("%w: advertise address %q: %v", ErrConfig, c.AdvertiseAddr, err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = addr, adv.port
	default:
		mc.AdvertisePort = bind.port
	}
	mc.ProbeInterval, mc.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = t.SuspicionMult, t.SuspicionMaxTimeoutMult
	mc.IndirectChecks, mc.GossipInterval = t.IndirectChecks, t.GossipInterval
	mc.PushPullInterval, mc.TCPTimeout = t.PushPullInterval, t.TCPTimeout
	mc.RetransmitMult, mc.GossipToTheDeadTime = t.RetransmitMult, t.GossipToTheDeadTime
	mc.SecretKey = gossipKey(c.Key)
	var accepted [][]byte
	for _, k := range c.AcceptKeys {
		accepted = append(accepted, gossipKey(k))
	}
	kr, err := memberlist.NewKeyring(accepted, mc.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	mc.Keyring = kr
	mc.Delegate = delegate{g}
	mc.Events = events{g}
	mc.Conflict = conflicts{g}
	mc.Logger = log.New(io.Discard, "", 0)
	if g.log.Enabled(context.Background(), slog.LevelDebug) {
		mc.Logger = slog.NewLogLogger(g.log.Handler(), slog.LevelDebug)
	}
	return mc, nil
}

// gossipKey is memberlist's AES-256 key for a cluster key.
func gossipKey(clusterKey []byte) []byte {
	key := sha256.Sum256(append([]byte("paxcron gossip key\x00"), clusterKey...))
	return key[:]
}

// joinLoop joins the seeds, retrying with capped backoff until one
// answers or Close.
func (g *Gossip) joinLoop() {
	defer close(g.done)
	if len(g.cfg.Join) == 0 {
		return
	}
	wait := 100 * time.Millisecond
	for {
		n, err := g.ml.Join(g.cfg.Join)
		if n > 0 {
			g.log.Info("joined the cluster's gossip", "through", strings.Join(g.cfg.Join, ","), "reached", n)
			return
		}
		g.log.Debug("joining the cluster's gossip", "seeds", strings.Join(g.cfg.Join, ","), "err", err)
		select {
		case <-g.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// Peers returns the alive peers, by ID.
func (g *Gossip) Peers() []Peer {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Peer, 0, len(g.peers))
	//detlint:maprange sorted below
	for _, p := range g.peers {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Peer) int { return int(a.ID) - int(b.ID) })
	return out
}

// SetClusterID gives this replica's cluster ID, once its state holds
// one: it is gossiped in its meta from then on, and peers known of
// another cluster are dropped (their addresses were never this
// cluster's). It waits up to timeout for the new meta to be sent.
func (g *Gossip) SetClusterID(id [ClusterIDBytes]byte, timeout time.Duration) error {
	g.mu.Lock()
	if g.self.ClusterID == id {
		g.mu.Unlock()
		return nil
	}
	g.self.ClusterID = id
	var foreign []Peer
	//detlint:maprange collected, then sorted
	for pid, p := range g.peers {
		if otherCluster(id, p.ClusterID) {
			foreign = append(foreign, p)
			delete(g.peers, pid)
			delete(g.differ, pid)
		}
	}
	g.mu.Unlock()
	slices.SortFunc(foreign, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) })
	for _, p := range foreign {
		g.ignored.Add(1)
		g.log.Error("a gossip peer known before this replica's cluster ID belongs to another cluster: its addresses are forgotten",
			"peer", p.ID, "paxos", p.PaxosAddr, "its_cluster_id", hexID(p.ClusterID), "cluster_id", hexID(id))
	}
	return g.ml.UpdateNode(timeout)
}

// otherCluster reports whether two cluster IDs are both known and
// differ.
func otherCluster(ours, theirs [ClusterIDBytes]byte) bool {
	var zero [ClusterIDBytes]byte
	return ours != zero && theirs != zero && ours != theirs
}

func hexID(id [ClusterIDBytes]byte) string {
	if id == ([ClusterIDBytes]byte{}) {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// Ignored counts nodes ignored: not a member, or a name that is not their
// ID's, or meta that does not decode, or of another cluster.
func (g *Gossip) Ignored() uint64 { return g.ignored.Load() }

// Close leaves the cluster (telling the others, within timeout: they
// then see this replica leave, not die) and stops.
func (g *Gossip) Close(timeout time.Duration) error {
	close(g.stop)
	<-g.done
	leaveErr := g.ml.Leave(timeout)
	return errors.Join(leaveErr, g.ml.Shutdown())
}

// peerOf decodes a node, or reports why it is ignored.
func (g *Gossip) peerOf(n *memberlist.Node) (Peer, bool) {
	p, err := decodeMeta(n.Meta)
	switch {
	case err != nil:
	case n.Name != nodeName(p.ID):
		err = fmt.Errorf("its name %q is not replica %d's", n.Name, p.ID)
	case !slices.Contains(g.cfg.Members, p.ID):
		err = fmt.Errorf("replica %d is not a member of %v", p.ID, g.cfg.Members)
	case otherCluster(g.clusterID(), p.ClusterID):
		err = fmt.Errorf("replica %d holds the state of cluster %s, this replica that of cluster %s: its data folder comes from another cluster (or its gossip reached this one); "+
			"its addresses are not taken for this cluster's replica %d", p.ID, hexID(p.ClusterID), hexID(g.clusterID()), p.ID)
	}
	if err != nil {
		g.ignored.Add(1)
		g.log.Warn("ignoring a gossip node", "node", n.Name, "addr", n.Address(), "err", err)
		return Peer{}, false
	}
	return p, true
}

// clusterID is this replica's cluster ID as SetClusterID left it.
func (g *Gossip) clusterID() [ClusterIDBytes]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.self.ClusterID
}

func (g *Gossip) alive(n *memberlist.Node) {
	p, ok := g.peerOf(n)
	if !ok {
		if q, err := decodeMeta(n.Meta); err == nil && otherCluster(g.clusterID(), q.ClusterID) {
			// Known before it said which cluster it is of: forget it.
			g.mu.Lock()
			if known, in := g.peers[q.ID]; in && known.PaxosAddr == q.PaxosAddr {
				delete(g.peers, q.ID)
				delete(g.differ, q.ID)
			}
			g.mu.Unlock()
		}
		return
	}
	if p.ID == g.cfg.Self.ID {
		return
	}
	g.mu.Lock()
	prev, known := g.peers[p.ID]
	g.peers[p.ID] = p
	before, now, changed := g.noteSettings(p)
	g.mu.Unlock()
	if changed {
		g.logSettings(p.ID, before, now)
	}
	if (!known || prev != p) && g.cfg.Events.Updated != nil {
		g.cfg.Events.Updated(p)
	}
}

func (g *Gossip) dead(n *memberlist.Node) {
	p, ok := g.peerOf(n)
	if !ok {
		if q, err := decodeMeta(n.Meta); err == nil && otherCluster(g.clusterID(), q.ClusterID) {
			return // another cluster's replica: this cluster's lives on
		}
		// Its meta no longer decodes (or never did): its name still says
		// which replica it is, and a member known alive must not stay so.
		id, named := idOfName(n.Name)
		if !named || !slices.Contains(g.cfg.Members, id) {
			return
		}
		p = Peer{ID: id}
	}
	if p.ID == g.cfg.Self.ID {
		return
	}
	g.mu.Lock()
	delete(g.peers, p.ID)
	delete(g.differ, p.ID) // heard again, it is compared again
	g.mu.Unlock()
	if g.cfg.Events.Dead != nil {
		g.cfg.Events.Dead(p.ID)
	}
}

type events struct{ g *Gossip }

func (e events) NotifyJoin(n *memberlist.Node)   { e.g.alive(n) }
func (e events) NotifyUpdate(n *memberlist.Node) { e.g.alive(n) }
func (e events) NotifyLeave(n *memberlist.Node)  { e.g.dead(n) }

// conflicts hears of two nodes of one name at two addresses: two
// processes running as the same replica. Found in review (the operator's
// procedures): memberlist said so only in its own log, which is off
// below debug, and the second process went on.
type conflicts struct{ g *Gossip }

func (c conflicts) NotifyConflict(existing, other *memberlist.Node) {
	c.g.conflicts.Add(1)
	c.g.log.Error("two processes run as one replica: gossip hears "+existing.Name+" at two addresses; "+
		"stop the one started by mistake (each replica needs its own replica_id), or, if it moved, wait for its old address to be declared dead",
		"node", existing.Name, "known_at", existing.Address(), "also_at", other.Address())
}

// Conflicts counts the nodes heard at a second address under a name
// already alive at another (two processes as one replica).
func (g *Gossip) Conflicts() uint64 { return g.conflicts.Load() }

// delegate gives memberlist this replica's meta; it exchanges nothing else.
type delegate struct{ g *Gossip }

func (d delegate) NodeMeta(limit int) []byte {
	d.g.mu.Lock()
	self := d.g.self
	d.g.mu.Unlock()
	b, err := encodeMeta(self)
	if err != nil || len(b) > limit {
		panic(fmt.Sprintf("gossip: this replica's meta does not fit: %v", err)) // validated in Start
	}
	return b
}
func (delegate) NotifyMsg([]byte)                           {}
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (delegate) LocalState(join bool) []byte                { return nil }
func (delegate) MergeRemoteState(buf []byte, join bool)     {}

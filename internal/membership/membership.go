package membership

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// label is put on every memberlist packet and stream (authenticated data
// when SecretKey is set): a memberlist of another program that happens to
// reach BindAddr is not heard.
const label = "paxcron-membership"

// IgnoredNamesMax bounds how many distinct ignored node names are
// remembered; past it, ignored nodes are still refused and counted in
// Stats.IgnoredAliveMessages, only not told apart.
const IgnoredNamesMax = 1024

// ErrClosed is returned by Leave after Close.
var ErrClosed = errors.New("membership: closed")

// Membership is one replica's memberlist instance. Its methods are safe
// for concurrent use.
type Membership struct {
	cfg  Config
	meta []byte // cfg.Self encoded
	log  *slog.Logger
	ml   *memberlist.Memberlist
	addr string // where the others join this replica
	// seeds: cfg.Join less this replica's own address.
	seeds []string

	// gate stops deliveries to cfg.Events: each delivery holds it for
	// reading, and Close sets closed under it, so that no call starts
	// after Close begins, nor is in flight when it returns.
	gate   sync.RWMutex
	closed bool

	// life orders Leave and Close: memberlist panics on a Leave after
	// its Shutdown.
	life     sync.Mutex
	shutDown bool

	stopJoin chan struct{}
	joinDone chan struct{}

	// mu guards what follows. Never call memberlist with mu held: its
	// callbacks, which take mu, run under memberlist's own lock.
	mu    sync.Mutex
	peers map[uint64]*peerState // at most len(cfg.Members) - 1
	// ignoredNames: the names of ignored nodes, at most IgnoredNamesMax.
	ignoredNames map[string]struct{}
	counts       counts
}

type peerState struct {
	info  PeerInfo
	alive bool
}

type counts struct {
	ignoredAliveMessages uint64
	addressConflicts     uint64
	joinAttempts         uint64
	joined               bool
}

// Stats are counters for status pages and metrics.
type Stats struct {
	// PeersAlive: how many other replicas are alive now.
	PeersAlive int
	// IgnoredNodes: how many distinct nodes were ignored (a name not
	// replica-<its meta's ID>, an ID not among the Members, or a meta
	// that does not decode), at most IgnoredNamesMax.
	IgnoredNodes int
	// IgnoredAliveMessages: how many of their alive messages were
	// refused (memberlist repeats them).
	IgnoredAliveMessages uint64
	// AddressConflicts: alive messages giving a member's name at a new
	// address while memberlist still holds it alive (or dead for less
	// than Timing.DeadNodeReclaimTime): refused by memberlist.
	AddressConflicts uint64
	// JoinAttempts: rounds of contacting the seeds.
	JoinAttempts uint64
	// Joined: a seed answered (or there were none to try).
	Joined bool
	// HealthScore: memberlist's view of its own timeliness; 0 is
	// healthy, higher stretches its probe interval.
	HealthScore int
}

// Start creates this replica's memberlist, listening at once, and joins
// the seeds in the background.
func Start(cfg Config) (*Membership, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	meta, err := encodePeerInfo(cfg.Self)
	if err != nil {
		panic(fmt.Sprintf("membership: Self passed validate but does not encode: %v", err))
	}
	cfg.Members = slices.Clone(cfg.Members)
	cfg.Join = slices.Clone(cfg.Join)
	cfg.SecretKey = slices.Clone(cfg.SecretKey)
	m := &Membership{
		cfg:          cfg,
		meta:         meta,
		log:          cfg.Logger.With("replica", cfg.Self.ID),
		stopJoin:     make(chan struct{}),
		joinDone:     make(chan struct{}),
		peers:        make(map[uint64]*peerState, len(cfg.Members)),
		ignoredNames: make(map[string]struct{}),
	}
	ml, err := memberlist.Create(m.memberlistConfig())
	if err != nil {
		return nil, fmt.Errorf("membership: starting memberlist on %s: %w", cfg.BindAddr, err)
	}
	m.ml = ml
	local := ml.LocalNode()
	m.addr = net.JoinHostPort(local.Addr.String(), strconv.Itoa(int(local.Port)))
	m.seeds = m.seedsOtherThanSelf()
	j := joiner{
		seeds:     m.seeds,
		join:      ml.Join,
		initial:   cfg.Timing.JoinBackoffInitial,
		max:       cfg.Timing.JoinBackoffMax,
		log:       m.log,
		attempted: m.joinAttempted,
		stop:      m.stopJoin,
	}
	if len(j.seeds) == 0 {
		m.joinAttempted(0)
	}
	go func() {
		defer close(m.joinDone)
		j.run()
	}()
	m.log.Info("membership: started", "addr", m.addr, "name", nodeName(cfg.Self.ID), "seeds", j.seeds)
	return m, nil
}

// nodeName is a replica's memberlist name: the same wherever it runs, so
// that a replica moved to another machine is the same node.
func nodeName(id uint64) string { return "replica-" + strconv.FormatUint(id, 10) }

func (m *Membership) memberlistConfig() *memberlist.Config {
	c, t := m.cfg, m.cfg.Timing
	mc := memberlist.DefaultLANConfig()
	mc.Name = nodeName(c.Self.ID)
	host, port, _ := splitHostPort(c.BindAddr) // validated
	if host == "" {
		host = "0.0.0.0"
	}
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = host, port, port
	if c.AdvertiseAddr != "" {
		ahost, aport, _ := splitHostPort(c.AdvertiseAddr) // validated
		mc.AdvertiseAddr = ahost
		if aport != 0 {
			mc.AdvertisePort = aport
		}
	}
	mc.ProbeInterval, mc.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = t.SuspicionMult, t.SuspicionMaxTimeoutMult
	mc.IndirectChecks = t.IndirectChecks
	mc.GossipInterval, mc.GossipToTheDeadTime = t.GossipInterval, t.GossipToTheDeadTime
	mc.PushPullInterval, mc.TCPTimeout = t.PushPullInterval, t.TCPTimeout
	mc.RetransmitMult = t.RetransmitMult
	mc.DeadNodeReclaimTime = t.DeadNodeReclaimTime
	if len(c.SecretKey) > 0 {
		mc.SecretKey = c.SecretKey
	}
	mc.Label = label
	mc.Logger = memberlistLogger(m.log)
	mc.Delegate = metaDelegate{m}
	mc.Events = eventDelegate{m}
	mc.Alive = aliveDelegate{m}
	mc.Conflict = conflictDelegate{m}
	return mc
}

// seedsOtherThanSelf drops the seeds that are literally this replica's
// own address: a configuration listing every replica would otherwise
// "join" itself and stop looking for the others.
func (m *Membership) seedsOtherThanSelf() []string {
	return slices.DeleteFunc(slices.Clone(m.cfg.Join), func(s string) bool {
		return s == m.addr || s == m.cfg.BindAddr || s == m.cfg.AdvertiseAddr
	})
}

func (m *Membership) joinAttempted(reached int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.seeds) > 0 {
		m.counts.joinAttempts++
	}
	m.counts.joined = m.counts.joined || reached > 0 || len(m.seeds) == 0
}

// Addr is where this replica's memberlist listens for the others
// (ip:port, the port chosen if BindAddr's was 0): a seed for them.
func (m *Membership) Addr() string { return m.addr }

// Peers returns the other replicas alive now, by ID.
func (m *Membership) Peers() []PeerInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PeerInfo, 0, len(m.peers))
	//detlint:maprange sorted below
	for _, st := range m.peers {
		if st.alive {
			out = append(out, st.info)
		}
	}
	slices.SortFunc(out, func(a, b PeerInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Stats returns the counters.
func (m *Membership) Stats() Stats {
	health := m.ml.GetHealthScore() // not under mu: see mu
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Stats{
		IgnoredNodes:         len(m.ignoredNames),
		IgnoredAliveMessages: m.counts.ignoredAliveMessages,
		AddressConflicts:     m.counts.addressConflicts,
		JoinAttempts:         m.counts.joinAttempts,
		Joined:               m.counts.joined,
		HealthScore:          health,
	}
	//detlint:maprange a count
	for _, st := range m.peers {
		if st.alive {
			s.PeersAlive++
		}
	}
	return s
}

// Leave tells the others that this replica is leaving, waiting up to
// timeout for the news to go out: they report it suspected at once
// instead of after the suspicion timeout. It keeps running until Close.
func (m *Membership) Leave(timeout time.Duration) error {
	m.life.Lock()
	defer m.life.Unlock()
	if m.shutDown {
		return ErrClosed
	}
	if err := m.ml.Leave(timeout); err != nil {
		return fmt.Errorf("membership: leaving: %w", err)
	}
	return nil
}

// Close stops memberlist without telling anyone (call Leave first for
// that): to the others this replica has crashed. Events stop before it
// returns. Close is idempotent.
func (m *Membership) Close() error {
	m.gate.Lock()
	m.closed = true
	m.gate.Unlock()
	m.life.Lock()
	defer m.life.Unlock()
	if m.shutDown {
		return nil
	}
	m.shutDown = true
	close(m.stopJoin)
	err := m.ml.Shutdown()
	<-m.joinDone // at most one seed's TCPTimeout after Shutdown
	if err != nil {
		return fmt.Errorf("membership: stopping memberlist: %w", err)
	}
	m.log.Info("membership: closed")
	return nil
}

// admit decodes a node and checks that it is a member under its own
// name.
func (m *Membership) admit(n *memberlist.Node) (PeerInfo, error) {
	p, err := decodePeerInfo(n.Meta)
	switch {
	case err != nil:
		return PeerInfo{}, err
	case n.Name != nodeName(p.ID):
		return PeerInfo{}, fmt.Errorf("membership: node %q carries replica %d's meta", n.Name, p.ID)
	case !slices.Contains(m.cfg.Members, p.ID):
		return PeerInfo{}, fmt.Errorf("membership: replica %d is not among the members %v", p.ID, m.cfg.Members)
	}
	return p, nil
}

// ignore counts a refused node, and warns the first time it is seen.
func (m *Membership) ignore(n *memberlist.Node, err error) {
	m.mu.Lock()
	m.counts.ignoredAliveMessages++
	_, seen := m.ignoredNames[n.Name]
	first := !seen && len(m.ignoredNames) < IgnoredNamesMax
	if first {
		m.ignoredNames[n.Name] = struct{}{}
	}
	m.mu.Unlock()
	level := slog.LevelDebug
	if first {
		level = slog.LevelWarn
	}
	m.log.Log(context.Background(), level, "membership: ignoring a node", "node", n.Name, "addr", n.Address(), "err", err)
}

// deliver calls f with the events unless Close has begun.
func (m *Membership) deliver(f func(Events)) {
	m.gate.RLock()
	defer m.gate.RUnlock()
	if !m.closed {
		f(m.cfg.Events)
	}
}

// nodeAlive handles a node that joined or changed its meta.
func (m *Membership) nodeAlive(n *memberlist.Node) {
	p, err := m.admit(n)
	if err != nil {
		m.ignore(n, err) // refused by aliveDelegate first: not reached
		return
	}
	if p.ID == m.cfg.Self.ID {
		return
	}
	m.mu.Lock()
	st, known := m.peers[p.ID]
	if !known {
		st = &peerState{}
		m.peers[p.ID] = st
	}
	cameAlive, changed := !st.alive, st.info != p
	st.info, st.alive = p, true
	m.mu.Unlock()
	m.log.Info("membership: peer alive", "peer", p.ID, "paxos", p.PaxosAddr, "api", p.APIAddr, "gossip", n.Address())
	m.deliver(func(e Events) {
		if cameAlive || changed {
			e.PeerUpdated(p)
		}
		if cameAlive {
			e.PeerAlive(p.ID)
		}
	})
}

// nodeGone handles a node declared dead, or that left.
func (m *Membership) nodeGone(n *memberlist.Node) {
	p, err := m.admit(n)
	if err != nil || p.ID == m.cfg.Self.ID {
		return // never admitted: nothing to take back
	}
	m.mu.Lock()
	st, known := m.peers[p.ID]
	wasAlive := known && st.alive
	if wasAlive {
		st.alive = false
	}
	m.mu.Unlock()
	if !wasAlive {
		return
	}
	m.log.Info("membership: peer suspected", "peer", p.ID, "gossip", n.Address())
	m.deliver(func(e Events) { e.PeerSuspected(p.ID) })
}

// eventDelegate: memberlist's EventDelegate.
type eventDelegate struct{ m *Membership }

func (d eventDelegate) NotifyJoin(n *memberlist.Node)   { d.m.nodeAlive(n) }
func (d eventDelegate) NotifyUpdate(n *memberlist.Node) { d.m.nodeAlive(n) }
func (d eventDelegate) NotifyLeave(n *memberlist.Node)  { d.m.nodeGone(n) }

// aliveDelegate refuses the alive messages of nodes that are not
// members under their own names, so that memberlist neither probes nor
// gossips about them.
type aliveDelegate struct{ m *Membership }

func (d aliveDelegate) NotifyAlive(n *memberlist.Node) error {
	if _, err := d.m.admit(n); err != nil {
		d.m.ignore(n, err)
		return err
	}
	return nil
}

// conflictDelegate counts a member's name claimed from another address
// while memberlist still holds the old one (memberlist logs it).
type conflictDelegate struct{ m *Membership }

func (d conflictDelegate) NotifyConflict(existing, other *memberlist.Node) {
	d.m.mu.Lock()
	d.m.counts.addressConflicts++
	d.m.mu.Unlock()
}

// metaDelegate gives memberlist this replica's meta; it exchanges no
// other state and no messages.
type metaDelegate struct{ m *Membership }

func (d metaDelegate) NodeMeta(limit int) []byte {
	if len(d.m.meta) > limit {
		panic(fmt.Sprintf("membership: meta of %d bytes over memberlist's limit %d (checked in Start)", len(d.m.meta), limit))
	}
	return d.m.meta
}
func (metaDelegate) NotifyMsg([]byte)                           {}
func (metaDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (metaDelegate) LocalState(join bool) []byte                { return nil }
func (metaDelegate) MergeRemoteState(buf []byte, join bool)     {}

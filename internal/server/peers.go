package server

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"paxcron/internal/api"
	"paxcron/internal/transport"
	"paxcron/paxos"
)

// Health of a peer as membership reports it.
const (
	healthUnknown = "unknown" // never heard of
	healthAlive   = "alive"
	healthSuspect = "suspect"
	healthSelf    = "self"
)

// peers is what this replica knows of the others: where they are and
// whether membership thinks them alive.
type peers struct {
	self    paxos.ReplicaID
	selfAPI string
	selfPax string

	mu   sync.Mutex
	byID map[paxos.ReplicaID]*peer
}

type peer struct {
	addrs  PeerAddrs
	health string
}

func newPeers(cfg Config) *peers {
	p := &peers{self: cfg.ID, selfAPI: cfg.HTTPAdvertise, selfPax: cfg.PaxosAdvertise, byID: map[paxos.ReplicaID]*peer{}}
	for _, id := range cfg.Members {
		if id != cfg.ID {
			p.byID[id] = &peer{addrs: cfg.Peers[id], health: healthUnknown}
		}
	}
	return p
}

func (p *peers) set(id paxos.ReplicaID, addrs PeerAddrs) error {
	if err := addrs.check(id); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	x, ok := p.byID[id]
	if !ok {
		return fmt.Errorf("server: replica %d is not a peer of %d", id, p.self)
	}
	if addrs.Paxos != "" {
		x.addrs.Paxos = addrs.Paxos
	}
	if addrs.HTTP != "" {
		x.addrs.HTTP = addrs.HTTP
	}
	x.health = healthAlive
	return nil
}

func (p *peers) setHealth(id paxos.ReplicaID, health string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if x, ok := p.byID[id]; ok {
		x.health = health
	}
}

// apiAddr is where replica id serves its API ("" if not known).
func (p *peers) apiAddr(id paxos.ReplicaID) string {
	if id == p.self {
		return p.selfAPI
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if x, ok := p.byID[id]; ok {
		return x.addrs.HTTP
	}
	return ""
}

// list is every member, by ID.
func (p *peers) list() []api.Replica {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []api.Replica{{ID: uint64(p.self), PaxosAddr: p.selfPax, APIAddr: p.selfAPI, Health: healthSelf}}
	//detlint:maprange sorted below
	for id, x := range p.byID {
		out = append(out, api.Replica{ID: uint64(id), PaxosAddr: x.addrs.Paxos, APIAddr: x.addrs.HTTP, Health: x.health})
	}
	slices.SortFunc(out, func(a, b api.Replica) int { return int(a.ID) - int(b.ID) })
	return out
}

// logReachability is the transport's OnReachability: a line when a peer
// becomes unreachable and one when it is reached again, not one per
// redial (those are counted in paxcron_transport_dial_failures_total).
// Found in review: a replica that could not reach another said nothing.
func (s *Server) logReachability(r transport.Reachability) {
	if r.Reachable {
		s.log.Info("peer reached again", "peer", uint64(r.Peer), "paxos", r.Addr,
			"failed_dials", r.FailedDials, "unreachable_for", r.Down.Round(time.Millisecond))
		return
	}
	s.log.Warn("cannot reach peer: redialing, with backoff, until it answers; check that it runs, that its advertise.paxos is this address, and the network between",
		"peer", uint64(r.Peer), "paxos", r.Addr, "err", r.Err)
}

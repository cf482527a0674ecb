package transport

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"paxcron/paxos"
)

// namedPair is two transports, replicas 1 and 2 of a cluster of two,
// each with its cluster ID in ids (changed at will) and its refusals
// that were not the other end closing.
type namedPair struct {
	trs     [2]*Transport
	recs    [2]*recorder
	ids     [2]atomic.Pointer[ClusterID]
	mu      sync.Mutex
	refused [2][]AuthFailure
}

func startNamedPair(t *testing.T, a, b ClusterID) *namedPair {
	t.Helper()
	p := &namedPair{recs: [2]*recorder{newRecorder(), newRecorder()}}
	p.ids[0].Store(&a)
	p.ids[1].Store(&b)
	for i := range p.trs {
		peer := paxos.ReplicaID(2 - i)
		tr, err := New(Config{ID: paxos.ReplicaID(i + 1), Peers: map[paxos.ReplicaID]string{peer: ""}, Key: testKey, ListenAddr: "127.0.0.1:0",
			Handler: p.recs[i].handle, Limits: testLimits(),
			ClusterID: func() ClusterID { return *p.ids[i].Load() },
			OnAuthFailure: func(f AuthFailure) {
				if !f.Closed {
					p.mu.Lock()
					p.refused[i] = append(p.refused[i], f)
					p.mu.Unlock()
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		p.trs[i] = tr
	}
	p.trs[0].SetPeerAddr(2, p.trs[1].Addr().String())
	p.trs[1].SetPeerAddr(1, p.trs[0].Addr().String())
	return p
}

// send sends a heartbeat each way.
func (p *namedPair) send(round uint64) {
	p.trs[0].Send(heartbeat(1, 2, round))
	p.trs[1].Send(heartbeat(2, 1, round))
}

func (p *namedPair) refusals(i int) []AuthFailure {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]AuthFailure(nil), p.refused[i]...)
}

// TestOtherClusterIsRefused: two replicas that hold the key and the
// members but the states of two clusters refuse each other, both ways,
// each saying so with both cluster IDs and what to check; no message
// crosses.
func TestOtherClusterIsRefused(t *testing.T) {
	p := startNamedPair(t, testCluster, otherCluster)
	eventually(t, "both to refuse the other", func() bool {
		p.send(1)
		return len(p.refusals(0)) > 0 && len(p.refusals(1)) > 0
	})
	if n := p.recs[0].total() + p.recs[1].total(); n != 0 {
		t.Fatalf("%d messages crossed between two clusters", n)
	}
	for i := range 2 {
		for _, f := range p.refusals(i) {
			msg := f.Err.Error()
			if !errors.Is(f.Err, ErrOtherCluster) || !isAuthErr(f.Err) ||
				!strings.Contains(msg, testCluster.String()) || !strings.Contains(msg, otherCluster.String()) ||
				!strings.Contains(msg, "data folder") {
				t.Errorf("replica %d's refusal (dialing %t) does not name both clusters and the data folder: %v", i+1, f.Dialing, f.Err)
			}
		}
	}
	if s := p.trs[0].Stats(); s.AuthFailures == 0 {
		t.Fatalf("refusals not counted: %+v", s)
	}
}

// TestUnknownOrSameClusterIDConnects: a replica that knows no cluster ID
// yet (new, or rebuilding) has nothing to contradict, and replicas of
// one cluster connect.
func TestUnknownOrSameClusterIDConnects(t *testing.T) {
	for _, tc := range []struct{ a, b ClusterID }{
		{testCluster, ClusterID{}}, {ClusterID{}, testCluster}, {ClusterID{}, ClusterID{}}, {testCluster, testCluster},
	} {
		t.Run(fmt.Sprintf("%s-%s", tc.a, tc.b), func(t *testing.T) {
			p := startNamedPair(t, tc.a, tc.b)
			eventually(t, "messages both ways", func() bool {
				p.send(1)
				return p.recs[0].total() > 0 && p.recs[1].total() > 0
			})
			if r := append(p.refusals(0), p.refusals(1)...); len(r) != 0 {
				t.Fatalf("refused: %v", r[0].Err)
			}
		})
	}
}

// TestRedialChecksTheNewClusterID: replicas connected while one knew no
// cluster ID are checked again once it learns one and redials: of
// different clusters, they then refuse each other.
func TestRedialChecksTheNewClusterID(t *testing.T) {
	p := startNamedPair(t, ClusterID{}, otherCluster)
	eventually(t, "connected unnamed", func() bool {
		p.send(1)
		return p.recs[0].total() > 0 && p.recs[1].total() > 0
	})
	id := testCluster
	p.ids[0].Store(&id)
	p.trs[0].Redial()
	eventually(t, "both to refuse the other once named", func() bool {
		p.send(2)
		return len(p.refusals(0)) > 0 && len(p.refusals(1)) > 0
	})
	// A reader of a connection Redial closed may still hand on frames it
	// had read; it has ended once its connection is no inbound one.
	eventually(t, "the readers of the connections before Redial to end", func() bool {
		for _, tr := range p.trs {
			tr.mu.Lock()
			open := len(tr.inbound)
			tr.mu.Unlock()
			if open > 0 {
				return false
			}
		}
		return true
	})
	before := [2]int{p.recs[0].total(), p.recs[1].total()}
	for r := uint64(3); r < 20; r++ {
		p.send(r)
	}
	eventually(t, "more refusals", func() bool { return len(p.refusals(0)) > 2 && len(p.refusals(1)) > 2 })
	if after := [2]int{p.recs[0].total(), p.recs[1].total()}; after != before {
		t.Fatalf("messages crossed after both were named apart: %v then %v", before, after)
	}
}

// TestNotReadyNeitherDialsNorAnswers: a replica not ready yet (still
// applying its own disk's state, its cluster ID unread) neither dials nor
// answers; once ready, both ways connect.
func TestNotReadyNeitherDialsNorAnswers(t *testing.T) {
	var ready atomic.Bool
	recs := [2]*recorder{newRecorder(), newRecorder()}
	trs := [2]*Transport{}
	for i := range trs {
		cfg := Config{ID: paxos.ReplicaID(i + 1), Peers: map[paxos.ReplicaID]string{paxos.ReplicaID(2 - i): ""}, Key: testKey,
			ListenAddr: "127.0.0.1:0", Handler: recs[i].handle, Limits: testLimits()}
		if i == 0 {
			cfg.Ready = ready.Load
		}
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		trs[i] = tr
	}
	trs[0].SetPeerAddr(2, trs[1].Addr().String())
	trs[1].SetPeerAddr(1, trs[0].Addr().String())
	send := func(r uint64) {
		trs[0].Send(heartbeat(1, 2, r))
		trs[1].Send(heartbeat(2, 1, r))
	}
	eventually(t, "replica 2's dials to fail", func() bool {
		send(1)
		return trs[1].Stats().DialFailures >= 3
	})
	if n := recs[0].total() + recs[1].total(); n != 0 || trs[0].Stats().Sent != 0 {
		t.Fatalf("%d messages crossed, %d sent, before replica 1 was ready", n, trs[0].Stats().Sent)
	}
	ready.Store(true)
	eventually(t, "messages both ways once ready", func() bool {
		send(2)
		return recs[0].total() > 0 && recs[1].total() > 0
	})
}

package launcher

import (
	"testing"
	"time"

	"paxcron/cron/state"
	"paxcron/paxos"
)

// namings returns the SetClusterID commands among cs.
func namings(cs []state.Command) []state.SetClusterID {
	var out []state.SetClusterID
	for _, c := range cs {
		if n, ok := c.(state.SetClusterID); ok {
			out = append(out, n)
		}
	}
	return out
}

// TestLeaderNamesTheCluster: a caught-up leader whose state is unnamed
// proposes the ID it drew, once; applied, it names the state and nothing
// more is proposed or drawn, in this term or the next.
func TestLeaderNamesTheCluster(t *testing.T) {
	h := newHarness(t, func(*Config) {})
	h.holdNaming = true
	h.step() // a follower names nothing
	h.lead = Leadership{Leader: true, Term: paxos.Ballot{Round: 1, Replica: 1}}
	h.step() // nor a leader that has not caught up
	if len(h.proposed) != 0 || h.drawn != 0 {
		t.Fatalf("proposed %v, drew %d, before leading caught up", describe(h.proposed), h.drawn)
	}
	h.lease(1, 10*time.Second)
	h.step()
	got := namings(h.proposed)
	if len(got) != 1 || got[0].ID.IsZero() || h.drawn != 1 {
		t.Fatalf("proposed %v after taking the lead (drew %d), want one SetClusterID", describe(h.proposed), h.drawn)
	}
	h.commit()
	if h.l.Machine().ClusterID() != got[0].ID {
		t.Fatalf("state named %s, want %s", h.l.Machine().ClusterID(), got[0].ID)
	}
	h.at(h.now.Add(2 * DefaultProposalTimeout))
	h.lease(2, 10*time.Second)
	h.step()
	if n := namings(h.proposed); len(n) != 0 || h.drawn != 1 {
		t.Fatalf("a named state: proposed %v, drew %d", n, h.drawn)
	}
}

// TestNamingIsProposedAgainWithTheSameID: a SetClusterID not applied
// within ProposalTimeout, or when a new term begins, is proposed again
// with the ID drawn first: one draw per launcher.
func TestNamingIsProposedAgainWithTheSameID(t *testing.T) {
	h := newHarness(t, func(*Config) {})
	h.holdNaming = true
	h.lease(1, 10*time.Second)
	h.step()
	h.at(h.now.Add(DefaultProposalTimeout / 2))
	if n := namings(h.proposed); len(n) != 1 {
		t.Fatalf("proposed %d SetClusterID within the proposal timeout, want 1", len(n))
	}
	h.at(h.now.Add(DefaultProposalTimeout))
	h.lease(2, 10*time.Second)
	h.step()
	n := namings(h.proposed)
	if len(n) != 3 || n[1] != n[0] || n[2] != n[0] || h.drawn != 1 {
		t.Fatalf("proposed %v (drew %d): want the first ID again after the timeout and in the new term", n, h.drawn)
	}
	h.commit() // chosen three times: the first names, the others are duplicates
	if h.l.Machine().ClusterID() != n[0].ID || h.l.Machine().Stats().Rejected != 0 {
		t.Fatalf("named %s with stats %+v", h.l.Machine().ClusterID(), h.l.Machine().Stats())
	}
}

// TestAnotherLeadersNameWins: two leaders each drew an ID; the one
// applied first names the cluster, the other's is refused as stale when
// it is applied after, and the loser proposes no more.
func TestAnotherLeadersNameWins(t *testing.T) {
	h := newHarness(t, func(*Config) {})
	h.holdNaming = true
	h.lease(1, 10*time.Second)
	h.step()
	first := state.ClusterID{0xf1, 0x57}
	h.apply(state.SetClusterID{ID: first}) // an earlier leader's, chosen before ours
	cs := h.proposed
	h.proposed = nil
	h.apply(cs...)
	if h.l.Machine().ClusterID() != first || h.l.Machine().Stats().Stale == 0 {
		t.Fatalf("named %s (stats %+v), want the first applied, %s, the other stale", h.l.Machine().ClusterID(), h.l.Machine().Stats(), first)
	}
	h.at(h.now.Add(2 * DefaultProposalTimeout))
	if n := namings(h.proposed); len(n) != 0 {
		t.Fatalf("proposed %v once named", n)
	}
}

// TestNamingNeedsNoLease: NameCluster, as a driver calls it while it
// holds the launcher back from launching, proposes without a lease; a
// Propose that fails is tried again at the next call.
func TestNamingNeedsNoLease(t *testing.T) {
	h := newHarness(t, func(*Config) {})
	h.holdNaming = true
	lead := Leadership{Leader: true, CaughtUp: true, Term: paxos.Ballot{Round: 3, Replica: 1}}
	h.busy = true
	h.l.NameCluster(h.now, lead)
	h.busy = false
	h.l.NameCluster(h.now, lead)
	if n := namings(h.proposed); len(n) != 1 {
		t.Fatalf("proposed %v without a lease, after a busy refusal: want one SetClusterID", n)
	}
	h.l.Step(h.now, Leadership{}) // held back from launching: no takeover
	if h.l.Leading() {
		t.Fatal("leading with no leadership")
	}
}

// TestZeroClusterIDDrawIsABug: a NewClusterID that draws the zero ID is a
// programmer error.
func TestZeroClusterIDDrawIsABug(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.NewClusterID = func() state.ClusterID { return state.ClusterID{} } })
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic")
		}
	}()
	h.l.NameCluster(h.now, Leadership{Leader: true, CaughtUp: true})
}

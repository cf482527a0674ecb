package membership

import (
	"bytes"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestThreeReplicasFindEachOtherFromOneSeed(t *testing.T) {
	ms, rs := cluster(t)
	for i, m := range ms {
		self := uint64(i + 1)
		var want []PeerInfo
		for _, id := range members3 {
			if id == self {
				continue
			}
			want = append(want, info(id))
			// PeerUpdated, with the addresses the peer announced, came
			// before PeerAlive.
			up, iu := rs[i].waitKind(t, 0, updated, id)
			_, ia := rs[i].waitKind(t, 0, alive, id)
			if up.info != info(id) || iu > ia {
				t.Errorf("replica %d: %v at %d, alive at %d; want %+v first", self, up, iu, ia, info(id))
			}
		}
		if got := m.Peers(); !slices.Equal(got, want) {
			t.Errorf("replica %d: Peers() = %+v, want %+v", self, got, want)
		}
		s := m.Stats()
		if !s.Joined || s.PeersAlive != 2 || s.IgnoredNodes != 0 || s.IgnoredAliveMessages != 0 {
			t.Errorf("replica %d: Stats() = %+v", self, s)
		}
		if evs := rs[i].about(self); len(evs) != 0 {
			t.Errorf("replica %d was told about itself: %v", self, evs)
		}
	}
}

func TestCrashIsSuspectedAndRestartAtNewAddressIsFound(t *testing.T) {
	ms, rs := cluster(t)
	marks := []int{rs[0].mark(), rs[1].mark()}

	// Crash replica 3: stop memberlist without leaving.
	crashed := time.Now()
	if err := ms[2].Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		e, _ := rs[i].waitKind(t, marks[i], suspected, 3)
		t.Logf("replica %d suspected replica 3 after %v", i+1, e.at.Sub(crashed).Round(time.Millisecond))
		if slices.ContainsFunc(ms[i].Peers(), func(p PeerInfo) bool { return p.ID == 3 }) {
			t.Errorf("replica %d: Peers() = %+v still has replica 3", i+1, ms[i].Peers())
		}
		marks[i] = rs[i].mark()
	}

	// Replica 3 comes back on another port with another Paxos address,
	// as if moved to another machine.
	moved := info(3)
	moved.PaxosAddr = "127.0.0.1:27003"
	cfg := testConfig(t, 3, ms[0].Addr())
	cfg.Self = moved
	c2, rc2 := start(t, cfg)
	if c2.Addr() == ms[2].Addr() {
		t.Fatalf("restarted on the same gossip address %s", c2.Addr())
	}
	for i := range 2 {
		_, iu := rs[i].waitFor(t, marks[i], "replica 3 at its new address", func(e event) bool {
			return e.kind == updated && e.info == moved
		})
		_, ia := rs[i].waitKind(t, marks[i], alive, 3)
		if iu > ia {
			t.Errorf("replica %d: PeerAlive(3) before PeerUpdated", i+1)
		}
		rc2.waitFor(t, 0, "the restarted replica finds its peer", func(e event) bool {
			return e.kind == updated && e.info == info(uint64(i+1))
		})
	}
	if got, want := ms[0].Peers(), []PeerInfo{info(2), moved}; !slices.Equal(got, want) {
		t.Errorf("Peers() = %+v, want %+v", got, want)
	}
}

func TestQuickRestartOnTheSamePortIsAnUpdate(t *testing.T) {
	ms, rs := cluster(t)
	mark := rs[0].mark()
	if err := ms[2].Close(); err != nil {
		t.Fatal(err)
	}
	// Back at once, before it is declared dead, on its old gossip port
	// (as a replica with a fixed port restarts) with a new Paxos address:
	// memberlist takes the new meta once the restarted node refutes the
	// old incarnation it hears about.
	restarted := info(3)
	restarted.PaxosAddr = "127.0.0.1:27003"
	cfg := testConfig(t, 3, ms[0].Addr())
	cfg.Self, cfg.BindAddr = restarted, ms[2].Addr()
	c2, _ := start(t, cfg)
	if c2.Addr() != ms[2].Addr() {
		t.Fatalf("restarted at %s, want %s", c2.Addr(), ms[2].Addr())
	}
	rs[0].waitFor(t, mark, "replica 3's new Paxos address", func(e event) bool {
		return e.kind == updated && e.info == restarted
	})
	eventually(t, "replica 1 has replica 3 alive at its new address", func() bool {
		return slices.Contains(ms[0].Peers(), restarted)
	})
}

func TestLeaveIsSuspectedWithoutWaitingForProbes(t *testing.T) {
	ms, rs := cluster(t)
	mark := rs[0].mark()
	left := time.Now()
	if err := ms[2].Leave(time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	e, _ := rs[0].waitKind(t, mark, suspected, 3)
	t.Logf("replica 1 heard replica 3 leave after %v", e.at.Sub(left).Round(time.Millisecond))
	if err := ms[2].Close(); err != nil {
		t.Fatal(err)
	}
	if err := ms[2].Leave(time.Second); err != ErrClosed {
		t.Errorf("Leave after Close = %v, want ErrClosed", err)
	}
	if err := ms[2].Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNoEventsAfterClose(t *testing.T) {
	ms, rs := cluster(t)
	if err := ms[0].Close(); err != nil {
		t.Fatal(err)
	}
	mark := rs[0].mark()
	if err := ms[2].Close(); err != nil { // replica 2 will report it; 1 must not
		t.Fatal(err)
	}
	rs[1].waitKind(t, 0, suspected, 3)
	if evs, _ := rs[0].snapshot(); len(evs) != mark {
		t.Errorf("events after Close: %v", evs[mark:])
	}
}

func TestForeignReplicaIDIsIgnored(t *testing.T) {
	a, ra := start(t, testConfig(t, 1))
	// Replica 99 of another configuration: it counts itself a member, not
	// the cluster it joins.
	cfg := testConfig(t, 99, a.Addr())
	cfg.Members = []uint64{1, 2, 3, 99}
	f, _ := start(t, cfg)
	eventually(t, "replica 1 ignores replica 99", func() bool { return a.Stats().IgnoredNodes == 1 })
	eventually(t, "replica 99 joined (as far as it knows)", func() bool { return f.Stats().Joined })

	// The cluster still works: replica 2 joins through replica 1.
	b, rb := start(t, testConfig(t, 2, a.Addr()))
	ra.waitKind(t, 0, alive, 2)
	rb.waitKind(t, 0, alive, 1)
	for _, m := range []*Membership{a, b} {
		if got := m.Peers(); len(got) != 1 {
			t.Errorf("Peers() = %+v, want one peer", got)
		}
	}
	if evs := ra.about(99); len(evs) != 0 {
		t.Errorf("events about the foreign replica: %v", evs)
	}
	if s := a.Stats(); s.IgnoredNodes != 1 || s.IgnoredAliveMessages == 0 {
		t.Errorf("Stats() = %+v, want 1 ignored node", s)
	}
}

// rawNode is a memberlist node that speaks paxcron's label but carries
// whatever name and meta a test gives it.
type rawNode struct{ meta []byte }

func (r rawNode) NodeMeta(int) []byte                  { return r.meta }
func (rawNode) NotifyMsg([]byte)                       {}
func (rawNode) GetBroadcasts(int, int) [][]byte        { return nil }
func (rawNode) LocalState(bool) []byte                 { return nil }
func (rawNode) MergeRemoteState(buf []byte, join bool) {}

func startRaw(t *testing.T, name string, meta []byte, join string) {
	t.Helper()
	mc := memberlist.DefaultLANConfig()
	mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertisePort = name, "127.0.0.1", 0, 0
	mc.Label = label
	mc.Delegate = rawNode{meta}
	mc.Logger = memberlistLogger(testLogger(t, slog.LevelWarn))
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	if _, err := ml.Join([]string{join}); err != nil {
		t.Fatalf("%s: Join: %v", name, err)
	}
}

func TestNodeNotNamedAfterItsReplicaIsIgnored(t *testing.T) {
	a, ra := start(t, testConfig(t, 1))
	member2, err := encodePeerInfo(info(2))
	if err != nil {
		t.Fatal(err)
	}
	startRaw(t, "replica-7", member2, a.Addr())        // a member's meta under another name
	startRaw(t, "replica-3", []byte("junk"), a.Addr()) // a member's name, a meta that does not decode
	startRaw(t, "replica-2", nil, a.Addr())            // no meta at all
	eventually(t, "three nodes ignored", func() bool { return a.Stats().IgnoredNodes == 3 })
	if evs, _ := ra.snapshot(); len(evs) != 0 {
		t.Errorf("events: %v", evs)
	}
	if got := a.Peers(); len(got) != 0 {
		t.Errorf("Peers() = %+v", got)
	}
}

func TestSecretKeyKeepsOutNodesWithoutIt(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	withKey := func(id uint64, k []byte, join ...string) Config {
		cfg := testConfig(t, id, join...)
		cfg.SecretKey = k
		return cfg
	}
	a, ra := start(t, withKey(1, key))
	_, rb := start(t, withKey(2, key, a.Addr()))
	ra.waitKind(t, 0, alive, 2)
	rb.waitKind(t, 0, alive, 1)

	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"no key", nil},
		{"another key", bytes.Repeat([]byte{8}, 32)},
		{"a shorter key", key[:16]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, rc := start(t, withKey(3, tc.key, a.Addr()))
			eventually(t, "three failed join rounds", func() bool { return c.Stats().JoinAttempts >= 3 })
			if s := c.Stats(); s.Joined || s.PeersAlive != 0 {
				t.Errorf("replica 3 joined: %+v", s)
			}
			if evs, _ := rc.snapshot(); len(evs) != 0 {
				t.Errorf("replica 3 heard: %v", evs)
			}
			if evs := ra.about(3); len(evs) != 0 {
				t.Errorf("replica 1 heard of replica 3: %v", evs)
			}
		})
	}
	if s := a.Stats(); s.PeersAlive != 1 || s.IgnoredNodes != 0 {
		t.Errorf("replica 1: Stats() = %+v", s)
	}
}

func TestSeedsListingSelfStillJoinTheOthers(t *testing.T) {
	a, ra := start(t, testConfig(t, 1))
	cfg := testConfig(t, 2)
	// Every replica configured with every address: its own is skipped.
	cfg.BindAddr = freeAddr(t)
	cfg.Join = []string{cfg.BindAddr, a.Addr()}
	b, _ := start(t, cfg)
	ra.waitKind(t, 0, alive, 2)
	eventually(t, "replica 2 joined", func() bool { return b.Stats().Joined })
	if s := b.Stats(); s.JoinAttempts != 1 {
		t.Errorf("Stats() = %+v, want joined at the first round", s)
	}
}

// freeAddr returns a loopback address whose port was free for TCP and
// UDP a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	// memberlist picks one the same way (port 0, then the same port for
	// UDP); let it, and hand the port back.
	mc := memberlist.DefaultLANConfig()
	mc.Name, mc.BindAddr, mc.BindPort = "probe", "127.0.0.1", 0
	mc.Logger = memberlistLogger(slog.New(slog.DiscardHandler))
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	n := ml.LocalNode()
	addr := n.Address()
	if err := ml.Shutdown(); err != nil {
		t.Fatal(err)
	}
	return addr
}

package server

// The day-two procedures an operator performs on a running cluster, each
// walked through end to end while launches are due.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"paxcron/cron/replica"
	"paxcron/internal/api"
	"paxcron/paxos"
)

// restartGracefully stops replica id as SIGTERM does (Shutdown: a leader
// drains and hands over) and starts it again on its data folder, on new
// ports (every replica is told, as gossip would); it returns once the
// replica applied what the cluster had chosen when it came back, as an
// operator waits on `paxcron operator status` before the next replica.
func (c *cluster) restartGracefully(id paxos.ReplicaID) {
	c.t.Helper()
	if s := c.servers[id-1]; s != nil { // nil: stopped already
		if err := s.Shutdown(context.Background()); err != nil {
			c.t.Fatalf("shutting replica %d down: %v", id, err)
		}
	}
	c.servers[id-1] = nil
	lead := c.leader() // another replica leads, the old leader handed over
	target := c.servers[lead-1].Node().Status().Applied
	c.start(id, false)
	eventually(c.t, fmt.Sprintf("replica %d to catch up to index %d", id, target), func() bool {
		return c.servers[id-1].Node().Status().Applied >= target
	})
}

// checkEverySecondOnce checks that every second from the first launch of
// job to its last has exactly one child and was dispatched once: none
// doubled, none missed.
func (c *cluster) checkEverySecondOnce(job string) {
	c.t.Helper()
	if rep := c.nomad.Repeated(); len(rep) > 0 {
		c.t.Errorf("dispatched more than once: %v", rep)
	}
	var secs []int64
	for identity := range c.nomad.Children() {
		s, ok := strings.CutPrefix(identity, job+"-")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			c.t.Fatalf("identity %q", identity)
		}
		secs = append(secs, n)
	}
	slices.Sort(secs)
	if len(secs) == 0 {
		c.t.Fatal("no launch")
	}
	var missed []int64
	for i := 1; i < len(secs); i++ {
		for s := secs[i-1] + 1; s < secs[i]; s++ {
			missed = append(missed, s)
		}
	}
	if len(missed) > 0 {
		c.t.Errorf("seconds missed between %d and %d: %v", secs[0], secs[len(secs)-1], missed)
	}
}

// A rolling restart (the upgrade path): every replica stopped gracefully
// and started again, one at a time, the leader last or first. Launches go
// on throughout; none is doubled or missed.
func TestRollingRestartNeitherDoublesNorMisses(t *testing.T) {
	for _, leaderFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("leader first %v", leaderFirst), func(t *testing.T) {
			c := startCluster(t)
			leader := c.leader()
			if _, err := c.client(leader, writeToken).PutJobs(context.Background(), everySecond("tick")); err != nil {
				t.Fatal(err)
			}
			c.waitChildren(2)
			order := []paxos.ReplicaID{leader%3 + 1, (leader+1)%3 + 1, leader}
			if leaderFirst {
				order = []paxos.ReplicaID{leader, leader%3 + 1, (leader+1)%3 + 1}
			}
			for _, id := range order {
				c.restartGracefully(id)
				c.waitChildren(len(c.nomad.Children()) + 2)
			}
			// Launches the restarts delayed are caught up: wait for a few more.
			c.waitChildren(len(c.nomad.Children()) + 3)
			c.checkEverySecondOnce("tick")
			// A restart is no authentication failure: the handshakes a
			// stopping replica closed are counted apart.
			for _, s := range c.servers {
				if got := s.TransportStats().AuthFailures; got != 0 {
					t.Errorf("replica %d counted %d authentication failures in a rolling restart of one cluster", s.cfg.ID, got)
				}
			}
			st, err := c.client(c.leader(), readToken).Job(context.Background(), "tick", 0, api.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range st.History {
				if l.Outcome != "dispatched" {
					t.Errorf("launch %s concluded %s (%s)", l.Identity, l.Outcome, l.Reason)
				}
			}
		})
	}
}

// clusterKeys are a replica's cluster keys: the first, and those also
// accepted.
type clusterKeys struct {
	first  []byte
	accept [][]byte
}

// withKeys is a mutate that gives each replica the keys keys holds for
// it when it (re)starts.
func withKeys(keys map[paxos.ReplicaID]clusterKeys) func(*Config) {
	return func(cfg *Config) {
		k := keys[cfg.ID]
		cfg.ClusterKey, cfg.AcceptKeys = k.first, k.accept
	}
}

// Changing the cluster key without an outage: the new key accepted by
// every replica, then made the first on every replica, then the old one
// dropped, each step a rolling restart. Launches go on throughout, none
// doubled or missed, and forwarded writes (bundles, MACed with the
// forwarding replica's first key) are taken at every step.
func TestClusterKeyRotationWithoutAnOutage(t *testing.T) {
	oldKey, newKey := []byte("test-cluster-key-0123456789"), []byte("the-new-cluster-key-9876543210")
	keys := map[paxos.ReplicaID]clusterKeys{}
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		keys[id] = clusterKeys{first: oldKey}
	}
	logs := map[paxos.ReplicaID]*syncBuffer{1: {}, 2: {}, 3: {}}
	c := startClusterWith(t, func(cfg *Config) {
		withKeys(keys)(cfg)
		cfg.Logger = slog.New(slog.NewTextHandler(logs[cfg.ID], &slog.HandlerOptions{Level: slog.LevelError}))
	})
	ctx := context.Background()
	c.putEverySecond(c.leader(), "tick")
	c.waitChildren(2)
	for step, k := range []clusterKeys{
		{first: oldKey, accept: [][]byte{newKey}},
		{first: newKey, accept: [][]byte{oldKey}},
		{first: newKey},
	} {
		for id := paxos.ReplicaID(1); id <= 3; id++ {
			keys[id] = k
			c.restartGracefully(id)
			c.waitChildren(len(c.nomad.Children()) + 2)
			// A write through a follower: forwarded in a bundle.
			lead := c.leader()
			if _, err := c.client(lead%3+1, writeToken).PutJobs(ctx, everySecond(fmt.Sprintf("w%d-%d", step, id))); err != nil {
				t.Fatalf("step %d, replica %d restarted: a write through replica %d: %v", step+1, id, lead%3+1, err)
			}
		}
	}
	c.waitChildren(len(c.nomad.Children()) + 3)
	c.checkEverySecondOnce("tick")
	// Peers that stop close handshakes under way: that is no refusal.
	for id, l := range logs {
		if strings.Contains(l.String(), "refused") {
			t.Errorf("replica %d refused a peer: %s", id, l)
		}
	}
}

// syncBuffer is a log's output that tests read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A replica restarted with the wrong cluster key is refused, and both it
// and its peers say why in their logs; the others go on launching, and
// once its key is fixed it rejoins.
func TestWrongClusterKeyIsRefusedAndSaidSo(t *testing.T) {
	goodKey := []byte("test-cluster-key-0123456789")
	keys := map[paxos.ReplicaID]clusterKeys{1: {first: goodKey}, 2: {first: goodKey}, 3: {first: goodKey}}
	logs := map[paxos.ReplicaID]*syncBuffer{1: {}, 2: {}, 3: {}}
	c := startClusterWith(t, func(cfg *Config) {
		withKeys(keys)(cfg)
		cfg.Logger = slog.New(slog.NewTextHandler(logs[cfg.ID], nil))
	})
	ctx := context.Background()
	leader := c.leader()
	c.putEverySecond(leader, "tick")
	c.waitChildren(2)
	wrong := leader%3 + 1
	if err := c.servers[wrong-1].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	keys[wrong] = clusterKeys{first: []byte("a-mistyped-cluster-key-000")}
	c.start(wrong, false)
	for _, id := range []paxos.ReplicaID{wrong, leader} {
		eventually(t, fmt.Sprintf("replica %d's log to say that the key does not match", id), func() bool {
			return strings.Contains(logs[id].String(), "a replica-to-replica connection was refused") &&
				strings.Contains(logs[id].String(), "cluster key")
		})
	}
	// The others go on; the replica with the wrong key learns nothing.
	stuck := c.servers[wrong-1].Node().Status().Applied
	c.waitChildren(len(c.nomad.Children()) + 2)
	if _, err := c.client(leader, writeToken).PutJobs(ctx, everySecond("during")); err != nil {
		t.Fatal(err)
	}
	if got := c.servers[wrong-1].Node().Status().Applied; got != stuck {
		t.Errorf("the replica with the wrong key applied %d -> %d", stuck, got)
	}
	// Fixed, it rejoins.
	keys[wrong] = clusterKeys{first: goodKey}
	c.restartGracefully(wrong)
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
	t.Logf("replica %d's log:\n%s", wrong, logs[wrong])
}

// Rotating a write token, replica by replica: the new token added to
// every replica, then the old one removed from every replica. A client
// holding either token works whenever both the replica it asks and the
// leader know it; a leader that does not know a token a follower
// forwarded says so, naming the rotation.
func TestWriteTokenRotation(t *testing.T) {
	const newToken = "the-new-write-token-0123456789"
	tokens := map[paxos.ReplicaID][]string{1: {writeToken}, 2: {writeToken}, 3: {writeToken}}
	c := startClusterWith(t, func(cfg *Config) { cfg.WriteTokens = tokens[cfg.ID] })
	ctx := context.Background()
	c.putEverySecond(c.leader(), "tick")
	c.waitChildren(2)
	put := func(id paxos.ReplicaID, token, name string) error {
		_, err := c.client(id, token).PutJobs(ctx, everySecond(name))
		return err
	}
	// Add the new token on a follower: the leader does not know it yet.
	f := c.leader()%3 + 1
	tokens[f] = []string{writeToken, newToken}
	c.restartGracefully(f)
	var ae *api.Error
	for attempt := 1; ; attempt++ {
		// The mixed state needs f to follow: a graceful restart of f while
		// it leads hands the lead to another replica, which lacks the new
		// token.
		l := c.lead()
		for try := 0; l.id == f; try++ {
			if try == 3 {
				t.Fatalf("replica %d led after each of %d graceful restarts: the mixed state is not reached", f, try)
			}
			c.restartGracefully(f)
			l = c.lead()
		}
		err := put(f, newToken, fmt.Sprintf("early-%d", attempt))
		if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || !strings.Contains(ae.Message, "leader") ||
			!strings.Contains(ae.Message, "rotation") {
			// On a loaded machine the lead may move to f meanwhile, which
			// then rightly takes its own token: again, with f following.
			if !c.held(l) && attempt < 3 {
				t.Logf("attempt %d: the lead moved from replica %d: %v; again", attempt, l.id, err)
				continue
			}
			t.Errorf("a new token forwarded to a leader that does not know it yet: %v, want 401 naming the leader and the rotation (the lead moved meanwhile: %v)", err, !c.held(l))
		}
		break
	}
	if err := put(f, writeToken, "old-through-f"); err != nil {
		t.Errorf("the old token mid-rotation: %v", err)
	}
	// The new token everywhere: both work everywhere.
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		if id != f {
			tokens[id] = []string{writeToken, newToken}
			c.restartGracefully(id)
		}
	}
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		for _, tok := range []string{writeToken, newToken} {
			if err := put(id, tok, fmt.Sprintf("both-%d", id)); err != nil {
				t.Errorf("replica %d, a token of both: %v", id, err)
			}
		}
	}
	// Clients switched; the old token removed, replica by replica.
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		tokens[id] = []string{newToken}
		c.restartGracefully(id)
		if err := put(id, writeToken, "old"); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
			t.Errorf("replica %d took the token it dropped: %v", id, err)
		}
		if err := put(c.leader(), newToken, "new"); err != nil {
			t.Errorf("the new token after replica %d dropped the old: %v", id, err)
		}
	}
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
}

// Wrong starts are refused with what is wrong and what to do, and the
// running cluster loses nothing: -bootstrap on a store that holds state.
func TestBootstrapOnAStoreThatHoldsStateIsRefused(t *testing.T) {
	c := startCluster(t)
	leader := c.leader()
	c.putEverySecond(leader, "tick")
	c.waitChildren(2)
	f := leader%3 + 1
	if err := c.servers[f-1].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.servers[f-1] = nil
	_, err := New(testConfig(t, f, c.dirs[f-1], c.nomad), true)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "start it without -bootstrap") {
		t.Fatalf("-bootstrap on a store that holds state: %v, want ErrConfig saying to start without it", err)
	}
	// Without the flag it starts from its store and catches up.
	c.restartGracefully(f) // its server is nil: only the start and catch-up
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
}

// A replica restarted with another member list (a five-replica config
// given to a three-replica cluster) is refused by its peers, both sides
// naming cluster.members, and the others go on launching; with the
// cluster's list again, it rejoins. Before, the handshake did not bind
// the members: it joined in, and a replica given a shorter list than its
// peers' would have counted a quorum the others' need not meet.
func TestMembersListThatDiffersIsRefused(t *testing.T) {
	members := map[paxos.ReplicaID][]paxos.ReplicaID{1: {1, 2, 3}, 2: {1, 2, 3}, 3: {1, 2, 3}}
	logs := map[paxos.ReplicaID]*syncBuffer{1: {}, 2: {}, 3: {}}
	c := startClusterWith(t, func(cfg *Config) {
		cfg.Members = members[cfg.ID]
		cfg.Logger = slog.New(slog.NewTextHandler(logs[cfg.ID], &slog.HandlerOptions{Level: slog.LevelError}))
	})
	ctx := context.Background()
	leader := c.leader()
	c.putEverySecond(leader, "tick")
	c.waitChildren(2)
	odd := leader%3 + 1
	if err := c.servers[odd-1].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	members[odd] = []paxos.ReplicaID{1, 2, 3, 4, 5}
	c.start(odd, false)
	for _, id := range []paxos.ReplicaID{odd, leader} {
		eventually(t, fmt.Sprintf("replica %d's log to name the members", id), func() bool {
			return strings.Contains(logs[id].String(), "cluster.members differ")
		})
	}
	stuck := c.servers[odd-1].Node().Status().Applied
	c.waitChildren(len(c.nomad.Children()) + 2)
	if _, err := c.client(leader, writeToken).PutJobs(ctx, everySecond("during")); err != nil {
		t.Fatal(err)
	}
	if got := c.servers[odd-1].Node().Status().Applied; got != stuck {
		t.Errorf("the replica with other members applied %d -> %d", stuck, got)
	}
	members[odd] = []paxos.ReplicaID{1, 2, 3}
	c.restartGracefully(odd)
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
}

// A second server on a running replica's data folder (the same replica
// started twice on one machine) is refused by the store's lock, saying
// what is wrong; the running one goes on.
func TestSecondServerOnADataFolderIsRefused(t *testing.T) {
	c := startCluster(t)
	leader := c.leader()
	c.putEverySecond(leader, "tick")
	f := leader%3 + 1
	_, err := New(testConfig(t, f, c.dirs[f-1], c.nomad), false)
	if err == nil || !strings.Contains(err.Error(), "another paxcron server runs on this data folder") {
		t.Fatalf("a second server on replica %d's folder: %v", f, err)
	}
	c.waitChildren(len(c.nomad.Children()) + 2)
	target := c.servers[leader-1].Node().Status().Applied
	eventually(t, "the running replica to keep up", func() bool { return c.servers[f-1].Node().Status().Applied >= target })
	c.checkEverySecondOnce("tick")
}

// Snapshot settings are each replica's own (when it snapshots and how
// much log it keeps behind): one replica restarted snapshotting every
// few entries and keeping almost no log, then made the leader, keeps the
// cluster launching, none doubled or missed, and the others catch up
// from it.
func TestSnapshotSettingsMayDifferPerReplica(t *testing.T) {
	policy := map[paxos.ReplicaID]replica.SnapshotPolicy{}
	c := startClusterWith(t, func(cfg *Config) { cfg.Snapshots = policy[cfg.ID] })
	ctx := context.Background()
	leader := c.leader()
	c.putEverySecond(leader, "tick")
	c.waitChildren(2)
	odd := leader%3 + 1
	policy[odd] = replica.SnapshotPolicy{EveryEntries: 4, TailEntries: 1}
	c.restartGracefully(odd)
	c.waitChildren(len(c.nomad.Children()) + 3)
	// The others step aside until the odd one leads.
	for c.leader() != odd {
		c.restartGracefully(c.leader())
		c.waitChildren(len(c.nomad.Children()) + 2)
	}
	// A follower stopped for a while is caught up by the odd leader,
	// from a snapshot since it keeps one entry of log.
	other := odd%3 + 1
	if err := c.servers[other-1].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.servers[other-1] = nil
	c.waitChildren(len(c.nomad.Children()) + 3)
	c.restartGracefully(other)
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
	st := c.servers[odd-1].Node().Status()
	if st.Applied-st.SnapshotIndex > 8 {
		t.Errorf("the odd replica's snapshot is at %d, applied %d: its own policy was not followed", st.SnapshotIndex, st.Applied)
	}
}

// Moving a replica to a new address without gossip: the others dial the
// addresses their cluster.peers give, so until they are restarted with
// its new one, the moved replica hears nothing (it is cut off, not
// confused: the cluster goes on with the other two). Restarted one at a
// time with the new address, they reach it and it catches up.
func TestMovingAReplicaWithStaticPeers(t *testing.T) {
	addrs := map[paxos.ReplicaID]PeerAddrs{}
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		addrs[id] = PeerAddrs{Paxos: freeAddr(t), HTTP: freeAddr(t)}
	}
	// What each replica's configuration says of the others.
	known := map[paxos.ReplicaID]map[paxos.ReplicaID]PeerAddrs{}
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		known[id] = map[paxos.ReplicaID]PeerAddrs{}
		for p, a := range addrs {
			if p != id {
				known[id][p] = a
			}
		}
	}
	nomad := newFakeNomad()
	servers := map[paxos.ReplicaID]*Server{}
	dirs := map[paxos.ReplicaID]string{1: t.TempDir(), 2: t.TempDir(), 3: t.TempDir()}
	start := func(id paxos.ReplicaID, bootstrap bool) {
		cfg := testConfig(t, id, dirs[id], nomad)
		cfg.PaxosAddr, cfg.HTTPAddr = addrs[id].Paxos, addrs[id].HTTP
		cfg.Peers = maps.Clone(known[id])
		s, err := New(cfg, bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		servers[id] = s
	}
	stop := func(id paxos.ReplicaID) {
		if err := servers[id].Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		delete(servers, id)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Close()
		}
	})
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		start(id, true)
	}
	leader := func() paxos.ReplicaID {
		var l paxos.ReplicaID
		eventually(t, "a leader", func() bool {
			for id, s := range servers {
				if s.Node().Status().Launching {
					l = id
					return true
				}
			}
			return false
		})
		return l
	}
	c := &cluster{t: t, nomad: nomad}
	w, err := api.NewClient(api.ClientConfig{Address: "http://" + addrs[leader()].HTTP, Token: writeToken})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.PutJobs(context.Background(), everySecond("tick")); err != nil {
		t.Fatal(err)
	}
	c.waitChildren(2)
	// Replica 3 (or whichever follows) moves: new ports, same data.
	moved := leader()%3 + 1
	stop(moved)
	addrs[moved] = PeerAddrs{Paxos: freeAddr(t), HTTP: freeAddr(t)}
	start(moved, false)
	stuck := servers[moved].Node().Status().Applied
	c.waitChildren(len(nomad.Children()) + 3)
	if got := servers[moved].Node().Status().Applied; got > stuck+1 {
		t.Logf("the moved replica applied %d -> %d before its peers knew its address", stuck, got)
	}
	// The others learn its address, restarted one at a time.
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		if id == moved {
			continue
		}
		known[id][moved] = addrs[moved]
		stop(id)
		start(id, false)
		c.waitChildren(len(nomad.Children()) + 2)
	}
	target := servers[leader()].Node().Status().Applied
	eventually(t, "the moved replica to catch up", func() bool { return servers[moved].Node().Status().Applied >= target })
	c.checkEverySecondOnce("tick")
}

// A second process started as a running replica (another replica's ID
// given by mistake, on another machine: its own data folder) is refused
// by the peers it dials, which say why; the cluster goes on launching,
// and once the second process stops the replica is taken again.
func TestSecondProcessAsARunningReplicaIsRefused(t *testing.T) {
	logs := map[paxos.ReplicaID]*syncBuffer{1: {}, 2: {}, 3: {}}
	c := startClusterWith(t, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(logs[cfg.ID], &slog.HandlerOptions{Level: slog.LevelError}))
	})
	ctx := context.Background()
	leader := c.leader()
	c.putEverySecond(leader, "tick")
	c.waitChildren(2)
	twin := leader%3 + 1
	cfg := testConfig(t, twin, t.TempDir(), c.nomad)
	cfg.Peers = map[paxos.ReplicaID]PeerAddrs{}
	for _, s := range c.servers {
		if s.cfg.ID != twin {
			cfg.Peers[s.cfg.ID] = PeerAddrs{Paxos: s.PaxosAddr(), HTTP: s.HTTPAddr()}
		}
	}
	second, err := New(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	second.Start()
	eventually(t, "the leader to say two processes run as one replica", func() bool {
		return strings.Contains(logs[leader].String(), fmt.Sprintf("two processes run as replica %d", twin))
	})
	c.waitChildren(len(c.nomad.Children()) + 2)
	if _, err := c.client(leader, writeToken).PutJobs(ctx, everySecond("during")); err != nil {
		t.Fatal(err)
	}
	second.Close()
	// Taken again: with the third replica stopped, the cluster commits
	// only with the replica's own answers.
	third := 6 - leader - twin
	if err := c.servers[third-1].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.servers[third-1] = nil
	eventually(t, "a write answered by the replica taken again", func() bool {
		_, err := c.client(c.leader(), writeToken).PutJobs(ctx, everySecond("after"))
		return err == nil
	})
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
}

// A replica whose timing differs from its peers' (a tick of 20 ms among
// replicas of 10 ms: each counts the lease in its own ticks) is refused
// and said so, as members that differ are; the others go on launching.
// Before, it joined in, and as leader it would have held its lease twice
// as long as its acceptors kept their promise.
func TestTimingThatDiffersIsRefused(t *testing.T) {
	tick := map[paxos.ReplicaID]time.Duration{}
	logs := map[paxos.ReplicaID]*syncBuffer{1: {}, 2: {}, 3: {}}
	c := startClusterWith(t, func(cfg *Config) {
		if d := tick[cfg.ID]; d != 0 {
			cfg.TickInterval = d
		}
		cfg.Logger = slog.New(slog.NewTextHandler(logs[cfg.ID], &slog.HandlerOptions{Level: slog.LevelError}))
	})
	ctx := context.Background()
	leader := c.leader()
	c.putEverySecond(leader, "tick")
	c.waitChildren(2)
	odd := leader%3 + 1
	if err := c.servers[odd-1].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	tick[odd] = 20 * time.Millisecond
	c.start(odd, false)
	eventually(t, "the leader's log to name the timing", func() bool {
		return strings.Contains(logs[leader].String(), "timing differs")
	})
	c.waitChildren(len(c.nomad.Children()) + 2)
	tick[odd] = 0
	c.restartGracefully(odd)
	c.waitChildren(len(c.nomad.Children()) + 2)
	c.checkEverySecondOnce("tick")
}

// putEverySecond writes a job named name launching every second, through
// replica id.
func (c *cluster) putEverySecond(id paxos.ReplicaID, name string) {
	c.t.Helper()
	if _, err := c.client(id, writeToken).PutJobs(context.Background(), everySecond(name)); err != nil {
		c.t.Fatal(err)
	}
}

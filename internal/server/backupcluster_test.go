package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"paxcron/cron/replica"
	"paxcron/cron/state"
	"paxcron/internal/api"
	"paxcron/internal/node"
	"paxcron/paxos"
	"paxcron/storage/backup"
)

// Staging and production given one backup.url: production (A) backs up
// there first; staging's (B) leader is refused, naming both cluster IDs
// and what to do, logs it and counts it as a backup error, and shows no
// last backup; A's backups are all still there, and A goes on backing
// up. Once the target holds backups of both (copied in by hand, or an
// upload killed between its manifest and the listing after it that would
// have made it back off), "the newest" is refused unless the cluster is
// named.
func TestTwoClustersGivenOneBackupTarget(t *testing.T) {
	dir := t.TempDir()
	target := "file://" + dir
	var logB syncBuffer
	onDemand := func(cfg *Config) {
		cfg.Backup, cfg.BackupKeep = target, 3
		cfg.Snapshots = replica.SnapshotPolicy{EveryEntries: 1 << 40}
	}
	a := startClusterWith(t, onDemand)
	b := startClusterWith(t, func(cfg *Config) {
		onDemand(cfg)
		cfg.Logger = slog.New(slog.NewTextHandler(&logB, nil))
	})
	idA, idB := a.namedAlike().String(), b.namedAlike().String()
	ctx := context.Background()
	st, err := backup.Open(ctx, target, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ofA := []api.BackupInfo{putAndBackUp(t, a, "a-1"), putAndBackUp(t, a, "a-2")}
	if ofA[1].ClusterID != idA {
		t.Fatalf("A's backup names cluster %q, want %s", ofA[1].ClusterID, idA)
	}
	before, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}

	leaderB := b.leader()
	w := b.client(leaderB, writeToken)
	putYearly(t, w, "b-1")
	_, refusal := w.BackupNow(ctx)
	if refusal == nil {
		t.Fatal("B backed up into A's target")
	}
	for _, part := range []string{idA, idB, "another cluster", "own backup target"} {
		if !strings.Contains(refusal.Error(), part) {
			t.Errorf("the refusal does not say %q: %v", part, refusal)
		}
	}
	if e := (*api.Error)(nil); !errors.As(refusal, &e) || !e.NotDone {
		t.Errorf("the refusal does not say nothing was done: %#v", refusal)
	}
	// Counted by the replica that refused: leaderB, unless the lead moved
	// meanwhile (a loaded machine) and the call was forwarded. B backs up
	// nothing else, so any of its replicas' count is this refusal's.
	var counted float64
	for _, s := range b.servers {
		var m dto.Metric
		if err := s.metrics.backupErrors.Write(&m); err != nil {
			t.Fatal(err)
		}
		counted += m.GetCounter().GetValue()
	}
	if counted < 1 {
		t.Errorf("the refusal is not counted as a backup error")
	}
	if !slices.ContainsFunc(strings.Split(logB.String(), "\n"), func(line string) bool {
		return strings.Contains(line, "level=ERROR") && strings.Contains(line, "another cluster's backups") &&
			strings.Contains(line, idA) && strings.Contains(line, idB)
	}) {
		t.Errorf("B's leader logged no error naming both clusters:\n%s", logB.String())
	}
	if st, err := w.Status(ctx); err != nil || st.LastBackup != nil {
		t.Errorf("B's status: last backup %+v, %v; want none (A's are not B's)", st.LastBackup, err)
	}
	// B restarted: its last backup is still none of A's.
	b.servers[leaderB-1].Close()
	b.servers[leaderB-1] = nil
	b.start(leaderB, false)
	if st, err := b.client(leaderB, readToken).Status(ctx); err != nil || st.LastBackup != nil {
		t.Errorf("B's restarted replica's status: last backup %+v, %v; want none", st.LastBackup, err)
	}

	after, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(after, before, func(x, y backup.Info) bool { return x.Key == y.Key && x.ClusterID == idA }) {
		t.Fatalf("B's refused upload changed the target: %d backups before, %d after", len(before), len(after))
	}
	ofA = append(ofA, putAndBackUp(t, a, "a-3"))
	// Shown by the replica that took it, which led then: the lead may have
	// moved since (a loaded machine), and another replica's last backup
	// is its own.
	var shown []string
	for _, s := range a.servers {
		st, err := a.client(s.cfg.ID, readToken).Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.LastBackup != nil {
			shown = append(shown, st.LastBackup.Key)
		}
	}
	if !slices.Contains(shown, ofA[2].Key) {
		t.Errorf("A's status: last backups %v; want one of them %s", shown, ofA[2].Key)
	}

	// B's state lands beside A's by another way than an upload.
	var file bytes.Buffer
	if _, err := b.client(b.leader(), writeToken).Snapshot(ctx, &file); err != nil {
		t.Fatal(err)
	}
	info, data, err := backup.DecodeFile(file.Bytes())
	if err != nil || info.ClusterID != idB {
		t.Fatalf("B's snapshot file: %+v, %v; want cluster %s", info, err, idB)
	}
	other := t.TempDir()
	stB, err := backup.Open(ctx, "file://"+other, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer stB.Close()
	info.Meta.Generation += 100 // above A's
	if _, err := stB.Upload(ctx, info.Meta, data); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(other)); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.Latest(ctx, "")
	if !errors.Is(err, backup.ErrSeveralClusters) || !strings.Contains(err.Error(), idA) || !strings.Contains(err.Error(), idB) {
		t.Fatalf("the newest of a target of two clusters: %v, want ErrSeveralClusters naming both", err)
	}
	got, gotData, err := st.Latest(ctx, idA)
	if err != nil || got.Key != ofA[2].Key {
		t.Fatalf("A's newest: %+v, %v; want %s", got, err, ofA[2].Key)
	}
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: got.Index, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}}, Data: gotData}
	if _, err := RestoreStore(t.TempDir(), snap, []paxos.ReplicaID{1, 2, 3}, 0); err != nil {
		t.Fatal(err)
	}
}

// newestOf: the last backup a replica shows at start is its own
// cluster's newest, or one of no cluster ID; with its ID unknown, the
// target's newest only when the target holds one cluster's backups.
func TestNewestOf(t *testing.T) {
	const a, b = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	list := func(ids ...string) []backup.Info {
		var out []backup.Info
		for i, id := range ids {
			out = append(out, backup.Info{Meta: backup.Meta{Index: uint64(len(ids) - i), ClusterID: id}})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		list []backup.Info
		id   string
		want uint64 // the index; 0 for none
	}{
		{"empty", nil, a, 0},
		{"own newest", list(a, b, a), a, 3},
		{"another's newest", list(b, b, a), a, 1},
		{"only another's", list(b, b), a, 0},
		{"unnamed counts", list(b, "", a), a, 2},
		{"unknown id, one cluster", list(a, ""), "", 2},
		{"unknown id, none named", list("", ""), "", 2},
		{"unknown id, two clusters", list(a, b), "", 0},
	} {
		got, ok := newestOf(tc.list, tc.id)
		if ok != (tc.want != 0) || got.Index != tc.want {
			t.Errorf("%s: %+v, %v; want index %d", tc.name, got, ok, tc.want)
		}
	}
}

// A state not named yet (after an upgrade to cluster IDs, or a restore
// as a new cluster, before its leader names it) is not backed up into a
// target of a named cluster's backups: it cannot tell whether they are
// its own, and found in review, its upload went in above them and its
// pruning deleted them. The refusal is a warning that says why, and no
// backup error: the backups after the naming carry the ID.
func TestUnnamedStateDoesNotPruneANamedClustersBackups(t *testing.T) {
	dir := t.TempDir()
	var logs syncBuffer
	c := startClusterWith(t, func(cfg *Config) {
		cfg.Backup, cfg.BackupKeep = "file://"+dir, 2
		cfg.Snapshots = replica.SnapshotPolicy{EveryEntries: 1 << 40}
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	id := c.namedAlike().String()
	ctx := context.Background()
	st, err := backup.Open(ctx, "file://"+dir, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	putAndBackUp(t, c, "a-1")
	putAndBackUp(t, c, "a-2")
	before, err := st.List(ctx)
	if err != nil || len(before) != 2 {
		t.Fatalf("the named backups: %d, %v", len(before), err)
	}

	leader := c.leader()
	s := c.servers[leader-1]
	putYearly(t, c.client(leader, writeToken), "a-3")
	snap, err := s.node.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Data, err = node.SnapshotWithClusterID(snap.Data, state.ClusterID{}); err != nil {
		t.Fatal(err)
	}
	_, err = s.uploadBackup(ctx, snap)
	if !errors.Is(err, backup.ErrUnnamed) || !strings.Contains(err.Error(), id) {
		t.Fatalf("the unnamed state's upload: %v, want ErrUnnamed naming cluster %s", err, id)
	}
	after, err := st.List(ctx)
	if err != nil || !slices.EqualFunc(after, before, func(x, y backup.Info) bool { return x.Key == y.Key && x.ClusterID == id }) {
		t.Fatalf("the refused upload changed the target: %d backups before, %d after (%v)", len(before), len(after), err)
	}
	if !slices.ContainsFunc(strings.Split(logs.String(), "\n"), func(line string) bool {
		return strings.Contains(line, "level=WARN") && strings.Contains(line, "no cluster ID yet") && strings.Contains(line, id)
	}) {
		t.Errorf("the leader logged no warning saying why:\n%s", logs.String())
	}
	var m dto.Metric
	if err := s.metrics.backupErrors.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 0 {
		t.Errorf("backup errors: %v, want 0", got)
	}
}

// A copy of a cluster restored beside it AS A NEW CLUSTER (staging cloned
// from production's backup, with the same key and replica IDs, and even
// production's backup.url left in its configuration), each replica's
// folder under one fresh ID, holds the state under that ID from its first
// start. So the original's replicas refuse a replica of the copy, and the
// copy's backups are refused by the original's target, which stays as it
// was. Restored as before, the copy kept the original's ID and was taken
// for it.
func TestClusterRestoredAsNewIsAnotherCluster(t *testing.T) {
	dir := t.TempDir()
	logs := map[paxos.ReplicaID]*syncBuffer{1: {}, 2: {}, 3: {}}
	onDemand := func(cfg *Config) {
		cfg.Backup, cfg.BackupKeep = "file://"+dir, 3
		cfg.Snapshots = replica.SnapshotPolicy{EveryEntries: 1 << 40}
	}
	a := startClusterWith(t, func(cfg *Config) {
		onDemand(cfg)
		cfg.Logger = slog.New(slog.NewTextHandler(logs[cfg.ID], nil))
	})
	idA := a.namedAlike()
	ctx := context.Background()
	st, err := backup.Open(ctx, "file://"+dir, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	info := putAndBackUp(t, a, "a-1")
	_, data, err := st.Fetch(ctx, info.Key)
	if err != nil {
		t.Fatal(err)
	}
	drawn := node.DrawClusterID()
	asNew, err := node.SnapshotWithClusterID(data, drawn)
	if err != nil {
		t.Fatal(err)
	}

	clone := &cluster{t: t, nomad: newFakeNomad(), mutate: onDemand, servers: make([]*Server, 3)}
	t.Cleanup(func() {
		for _, s := range clone.servers {
			if s != nil {
				s.Close()
			}
		}
	})
	for range 3 {
		clone.dirs = append(clone.dirs, t.TempDir())
	}
	restoreInto(t, clone, st, info.Index, asNew, 1, 2, 3)
	idClone := clone.namedAlike()
	if idClone != drawn || idClone == idA {
		t.Fatalf("the cluster restored as new holds the ID %s, want the one drawn for it, %s (the original's is %s)", idClone, drawn, idA)
	}
	w := clone.client(clone.leader(), writeToken)
	if jobs, err := w.Jobs(ctx, api.ReadOptions{}); err != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].Name != "a-1" {
		t.Fatalf("the clone's jobs: %+v, %v; want the original's a-1", jobs, err)
	}
	before, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, refusal := w.BackupNow(ctx)
	if refusal == nil || !strings.Contains(refusal.Error(), idA.String()) || !strings.Contains(refusal.Error(), idClone.String()) {
		t.Fatalf("the clone's backup into the original's target: %v, want a refusal naming both clusters", refusal)
	}
	if after, err := st.List(ctx); err != nil || !slices.EqualFunc(after, before, func(x, y backup.Info) bool { return x.Key == y.Key }) {
		t.Fatalf("the refused backup changed the original's target: %d backups before, %d after (%v)", len(before), len(after), err)
	}

	// One of the clone's folders under one of the original's replicas.
	victim := a.leader()%3 + 1
	for i, s := range clone.servers {
		s.Close()
		clone.servers[i] = nil
	}
	a.servers[victim-1].Close()
	a.servers[victim-1] = nil
	a.dirs[victim-1] = clone.dirs[victim-1]
	a.start(victim, false)
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		if id == victim {
			continue
		}
		eventually(t, fmt.Sprintf("replica %d to refuse the clone's, naming both clusters", id), func() bool {
			return slices.ContainsFunc(strings.Split(logs[id].String(), "\n"), func(line string) bool {
				return strings.Contains(line, "a replica-to-replica connection was refused") &&
					strings.Contains(line, idA.String()) && strings.Contains(line, idClone.String())
			})
		}, func() string { return fmt.Sprintf("victim %d\n1: %s\n2: %s\n3: %s", victim, logs[1], logs[2], logs[3]) })
	}
	if got := a.servers[victim-1].ClusterID(); got != idClone {
		t.Errorf("the clone's replica now holds %s, want the clone's %s", got, idClone)
	}
}

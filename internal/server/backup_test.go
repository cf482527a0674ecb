package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"paxcron/cron/replica"
	"paxcron/internal/api"
	"paxcron/internal/node"
	"paxcron/paxos"
	"paxcron/storage/backup"
)

// The disaster: every replica's disk is lost. The newest backup rebuilds
// the cluster: every job is back, launches go on, and no launch the
// backup recorded is dispatched again.
func TestBackupAndDisasterRecovery(t *testing.T) {
	target := "file://" + t.TempDir()
	c := startClusterWith(t, func(cfg *Config) {
		cfg.Backup, cfg.BackupKeep = target, 3
		cfg.Snapshots = replica.SnapshotPolicy{EveryEntries: 50, TailEntries: 10}
	})
	leader := c.leader()
	ctx := context.Background()
	w := c.client(leader, writeToken)
	var put api.PutJobs
	for i := range 20 {
		put.Jobs = append(put.Jobs, api.PutJob{Name: fmt.Sprintf("job-%02d", i), Spec: api.Spec{Schedule: "* * * * * *", NomadJob: "p"}})
	}
	if _, err := w.PutJobs(ctx, put); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a backup after a snapshot", func() bool {
		st, err := w.Status(ctx)
		return err == nil && st.LastBackup != nil
	})
	// A backup on demand, through a follower (forwarded to the leader).
	info, err := c.client(leader%3+1, writeToken).BackupNow(ctx)
	if err != nil || info.Index == 0 {
		t.Fatalf("BackupNow: %+v, %v", info, err)
	}
	// What the backup recorded as launched.
	st, err := backup.Open(ctx, target, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	latest, data, err := st.Latest(ctx)
	if err != nil || latest.Index < info.Index {
		t.Fatalf("Latest: %+v, %v", latest, err)
	}
	sum, err := node.DescribeSnapshot(data)
	if err != nil || sum.Jobs != 20 {
		t.Fatalf("the backup holds %+v, %v", sum, err)
	}
	backedUp := c.finishedIn(data)

	// A snapshot file from the API decodes to the same kind of state.
	var file bytes.Buffer
	if _, err := w.Snapshot(ctx, &file); err != nil {
		t.Fatal(err)
	}
	if _, fdata, err := backup.DecodeFile(file.Bytes()); err != nil {
		t.Fatal(err)
	} else if s, err := node.DescribeSnapshot(fdata); err != nil || s.Jobs != 20 {
		t.Fatalf("the saved file holds %+v, %v", s, err)
	}
	if _, err := c.client(leader, readToken).Snapshot(ctx, &file); api.StatusOf(err) != 403 {
		t.Errorf("a snapshot with a read token: %v, want 403", err)
	}

	// Every disk is lost.
	for i, s := range c.servers {
		s.Close()
		c.servers[i] = nil
		c.dirs[i] = t.TempDir()
	}
	c.nomad.mu.Lock()
	callsBefore := map[string]int{}
	for id := range c.nomad.children {
		callsBefore[id] = 1
	}
	c.nomad.dispatched = map[string]int{}
	c.nomad.mu.Unlock()
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: latest.Index, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}}, Data: data}
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		if err := RestoreStore(c.dirs[id-1], snap, []paxos.ReplicaID{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := RestoreStore(c.dirs[0], snap, []paxos.ReplicaID{1, 2, 3}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a second restore into the same folder: %v, want ErrNotEmpty", err)
	}
	for id := paxos.ReplicaID(1); id <= 3; id++ {
		c.start(id, false)
	}
	leader = c.leader()
	w = c.client(leader, writeToken)
	jobs, err := w.Jobs(ctx, api.ReadOptions{})
	if err != nil || len(jobs.Jobs) != 20 {
		t.Fatalf("after the restore: %d jobs, %v", len(jobs.Jobs), err)
	}
	eventually(t, "launches after the restore", func() bool {
		c.nomad.mu.Lock()
		defer c.nomad.mu.Unlock()
		return len(c.nomad.dispatched) >= 20
	})
	c.nomad.mu.Lock()
	defer c.nomad.mu.Unlock()
	for id := range c.nomad.dispatched {
		if backedUp[id] {
			t.Errorf("%s, finished in the backup, was dispatched again after the restore", id)
		}
	}
}

// finishedIn lists the identities a cron snapshot records as finished.
func (c *cluster) finishedIn(data []byte) map[string]bool {
	c.t.Helper()
	out := map[string]bool{}
	m, err := node.RestoreState(data)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, j := range m.Jobs() {
		for _, l := range j.History {
			out[l.Identity] = true
		}
	}
	return out
}

func TestRestoreStoreChecks(t *testing.T) {
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: 5, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}}, Data: []byte("x")}
	if err := RestoreStore(t.TempDir(), snap, []paxos.ReplicaID{1, 2, 4}); err == nil {
		t.Error("restored a snapshot of other members")
	}
	snap.Meta.Index = 0
	if err := RestoreStore(t.TempDir(), snap, []paxos.ReplicaID{1, 2, 3}); err == nil {
		t.Error("restored a snapshot at index 0")
	}
}

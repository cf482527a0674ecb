package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/cron/state"
	"paxcron/internal/node"
	"paxcron/storage/backup"
	"paxcron/storage/pebblestore"
)

var (
	clusterA = state.ClusterID{0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	clusterB = state.ClusterID{0xb2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
)

// uploadNamed uploads the state of cluster id, generation gen and jobs
// to st, at the index the state is at.
func uploadNamed(t *testing.T, st *backup.Store, id state.ClusterID, gen uint64, jobs ...string) backup.Info {
	t.Helper()
	meta := backup.Meta{Generation: gen, Index: uint64(2 + len(jobs)), Membership: []uint64{1, 2, 3}, Cluster: "paxcron", ClusterID: id.String(),
		TakenAt: time.Date(2026, 4, 1, 0, len(jobs), 0, 0, time.UTC)}
	info, err := st.Upload(context.Background(), meta, namedSnapshot(t, id, gen, jobs...))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// twoClustersAt is a file:// target holding backups of cluster A (of
// generation 5, at indexes 3 and 4) and one of cluster B (of generation
// 7, at index 3: the newest), as if two clusters had been given it before
// uploads checked (B's are uploaded elsewhere and copied in).
func twoClustersAt(t *testing.T) (string, []backup.Info, backup.Info) {
	t.Helper()
	dir, other := t.TempDir(), t.TempDir()
	ctx := context.Background()
	st, err := backup.Open(ctx, "file://"+dir, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ofA := []backup.Info{uploadNamed(t, st, clusterA, 5, "a"), uploadNamed(t, st, clusterA, 5, "a", "b")}
	stB, err := backup.Open(ctx, "file://"+other, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer stB.Close()
	ofB := uploadNamed(t, stB, clusterB, 7, "x")
	if err := os.CopyFS(dir, os.DirFS(other)); err != nil {
		t.Fatal(err)
	}
	return "file://" + dir, ofA, ofB
}

// "snapshot list" shows each backup's cluster ID, and says when a target
// holds several clusters' backups.
func TestSnapshotListShowsClusters(t *testing.T) {
	url, ofA, ofB := twoClustersAt(t)
	code, out, errOut := runCLI(t, "operator", "snapshot", "list", "-backup", url)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), out)
	}
	// A's first backup landed first (B's were copied in after): it owns
	// the target; B's only backup is its cluster's first.
	for i, want := range []struct {
		info backup.Info
		kept string
	}{{ofB, "first of its cluster"}, {ofA[1], "-"}, {ofA[0], "first, owns the target"}} {
		line := lines[i+1]
		if !strings.HasSuffix(line, want.kept) {
			t.Errorf("line %d: %q, want it to end in %q", i+1, line, want.kept)
		}
		f := strings.Fields(strings.TrimSuffix(line, want.kept))
		if f[len(f)-2] != want.info.Key || f[len(f)-1] != want.info.ClusterID {
			t.Errorf("line %d: %q, want %s of cluster %s", i+1, line, want.info.Key, want.info.ClusterID)
		}
	}
	if !strings.Contains(lines[4], "2 clusters") || !strings.Contains(lines[4], clusterA.String()) || !strings.Contains(lines[4], "-cluster") {
		t.Errorf("the warning: %q", lines[4])
	}
	code, out, _ = runCLI(t, "operator", "snapshot", "list", "-backup", url, "-json")
	var rows []listedBackup
	if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil || len(rows) != 3 || rows[0].ClusterID != clusterB.String() || rows[2].ClusterID != clusterA.String() {
		t.Fatalf("-json: exit %d, %+v, %v", code, rows, err)
	}
	if !rows[0].FirstOfCluster || rows[0].OwnsTarget || rows[1].FirstOfCluster || !rows[2].FirstOfCluster || !rows[2].OwnsTarget {
		t.Errorf("-json: %+v; want B's first of its cluster, A's oldest first and owning the target", rows)
	}
}

// "snapshot restore" from a target of two clusters does not choose a
// cluster by itself: the newest, the newest that verifies and a backup
// by index are refused unless -cluster names one; with it, that
// cluster's own newest is restored, and the output says which cluster.
func TestSnapshotRestoreFromATargetOfTwoClusters(t *testing.T) {
	url, ofA, ofB := twoClustersAt(t)
	for _, args := range [][]string{{}, {"-skip-corrupt"}, {"-index", "3"}} {
		code, out, errOut := restore(t, append([]string{"-backup", url}, args...)...)
		if code != exitFailed || !strings.Contains(errOut, clusterA.String()) || !strings.Contains(errOut, clusterB.String()) || !strings.Contains(errOut, "-cluster") {
			t.Errorf("restore %v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	for _, tc := range []struct {
		args []string
		want backup.Info
	}{
		{[]string{"-cluster", clusterA.String()}, ofA[1]},
		{[]string{"-cluster", strings.ToUpper(clusterB.String())}, ofB},
		{[]string{"-cluster", clusterA.String(), "-skip-corrupt"}, ofA[1]},
		{[]string{"-cluster", clusterA.String(), "-index", "3"}, ofA[0]},
		{[]string{"-key", ofB.Key}, ofB},
	} {
		code, out, errOut := restore(t, append([]string{"-backup", url}, tc.args...)...)
		want := "restored the state of cluster " + tc.want.ClusterID + " at log index " + itoa(tc.want.Index) + " (generation " + itoa(tc.want.Generation)
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("restore %v: exit %d, want %q\n%s%s", tc.args, code, want, out, errOut)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"-backup", url, "-cluster", clusterA.String(), "-key", ofB.Key}, exitFailed, "not of cluster " + clusterA.String()},
		{[]string{"-backup", url, "-cluster", "a1b2"}, exitUsage, "want a cluster ID of 32 hex digits"},
		{[]string{"-backup", url, "-cluster", strings.Repeat("0", 32)}, exitUsage, "want a cluster ID"},
		{[]string{"-backup", url, "-cluster", "c0" + clusterA.String()[2:]}, exitFailed, "no backup of cluster c0"},
		{[]string{"-file", "x.snap", "-cluster", clusterA.String()}, exitUsage, "-cluster chooses a backup at -backup"},
	} {
		code, out, errOut := restore(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) {
			t.Errorf("restore %v: exit %d, want %d saying %q\n%s%s", tc.args, code, tc.code, tc.says, out, errOut)
		}
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// A snapshot whose description names another cluster than its state
// holds is not the snapshot it was written for: refused. "snapshot
// inspect" shows a file's cluster ID, or none.
func TestSnapshotFileClusterID(t *testing.T) {
	dir := t.TempDir()
	data := namedSnapshot(t, clusterB, 3, "x")
	meta := backup.Meta{Generation: 3, Index: 3, Membership: []uint64{1, 2, 3}, TakenAt: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	write := func(name string, id state.ClusterID, data []byte) string {
		m := meta
		m.ClusterID = id.String()
		b, err := backup.EncodeFile(backup.NewInfo(m, data), data)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	wrong := write("wrong.snap", clusterA, data)
	if code, out, errOut := restore(t, "-file", wrong); code != exitFailed || !strings.Contains(errOut, "described as of cluster "+clusterA.String()+", but its state is of cluster "+clusterB.String()) {
		t.Errorf("restore of a file whose header names another cluster: exit %d\n%s%s", code, out, errOut)
	}
	right := write("right.snap", clusterB, data)
	if code, out, errOut := restore(t, "-file", right); code != exitOK || !strings.Contains(out, "state of cluster "+clusterB.String()) {
		t.Errorf("restore of a file of cluster B: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, "operator", "snapshot", "inspect", right)
	if code != exitOK || !strings.Contains(out, "Cluster ID") || !strings.Contains(out, clusterB.String()) {
		t.Errorf("inspect: exit %d\n%s%s", code, out, errOut)
	}
	meta.Index = 2
	unnamed := write("unnamed.snap", state.ClusterID{}, cronSnapshot(t, 3, "x"))
	code, out, errOut = runCLI(t, "operator", "snapshot", "inspect", unnamed)
	if code != exitOK || !strings.Contains(out, "none (taken before the cluster was named)") {
		t.Errorf("inspect of an unnamed state: exit %d\n%s%s", code, out, errOut)
	}
}

// restoredClusterID reads the cluster ID of the state restored into the
// data folder dir.
func restoredClusterID(t *testing.T, dir string) state.ClusterID {
	t.Helper()
	st, err := pebblestore.Open(filepath.Join(dir, "store"), pebblestore.Options{FS: vfs.Default})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	id, err := node.SnapshotClusterID(snap.Data)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// "snapshot restore -new-cluster" restores a copy beside the original
// under a fresh cluster ID, which it prints with how to restore the other
// replicas (-new-cluster-id); they hold the same ID. Without either, the
// restore keeps the snapshot's ID (disaster recovery). The new ID cannot
// be the snapshot's own, nor given both ways.
func TestSnapshotRestoreAsANewCluster(t *testing.T) {
	url, ofA, _ := twoClustersAt(t)
	restoreTo := func(dir string, args ...string) (int, string, string) {
		base := []string{"operator", "snapshot", "restore", "-data-dir", dir, "-cluster-members", "1,2,3", "-backup", url, "-cluster", clusterA.String()}
		return runCLI(t, append(base, args...)...)
	}
	kept := t.TempDir()
	if code, out, errOut := restoreTo(kept); code != exitOK || restoredClusterID(t, kept) != clusterA {
		t.Fatalf("a restore of cluster A: exit %d, the state's ID %s\n%s%s", code, restoredClusterID(t, kept), out, errOut)
	}
	first := t.TempDir()
	code, out, errOut := restoreTo(first, "-new-cluster")
	id := restoredClusterID(t, first)
	if code != exitOK || id.IsZero() || id == clusterA || !strings.Contains(out, "state of cluster "+clusterA.String()+" as a new cluster, "+id.String()+" at log index "+itoa(ofA[1].Index)) ||
		!strings.Contains(out, "-new-cluster-id "+id.String()) {
		t.Fatalf("-new-cluster: exit %d, the state's ID %s\n%s%s", code, id, out, errOut)
	}
	second := t.TempDir()
	if code, out, errOut := restoreTo(second, "-new-cluster-id", id.String()); code != exitOK || restoredClusterID(t, second) != id || strings.Contains(out, "-new-cluster-id") {
		t.Fatalf("-new-cluster-id: exit %d, the state's ID %s, want %s\n%s%s", code, restoredClusterID(t, second), id, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"-new-cluster-id", clusterA.String()}, exitFailed, "is the ID of the cluster the snapshot is of"},
		{[]string{"-new-cluster", "-new-cluster-id", id.String()}, exitUsage, "not both"},
		{[]string{"-new-cluster-id", "a1b2"}, exitUsage, "want the cluster ID of 32 hex digits"},
		{[]string{"-new-cluster-id", strings.Repeat("0", 32)}, exitUsage, "want the cluster ID"},
	} {
		code, out, errOut := restoreTo(t.TempDir(), tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) {
			t.Errorf("restore %v: exit %d, want %d saying %q\n%s%s", tc.args, code, tc.code, tc.says, out, errOut)
		}
	}
	code, _, errOut = runCLI(t, "operator", "snapshot", "restore", "-help")
	if code != exitOK || !strings.Contains(errOut, "COPY beside the original") || !strings.Contains(errOut, "Never for disaster") || !strings.Contains(errOut, "-new-cluster-id") {
		t.Errorf("restore -help: exit %d, it does not say when to use -new-cluster:\n%s", code, errOut)
	}
}

// A snapshot taken before its cluster was named (an older binary's
// backup, or a file), restored with -backup from a target that holds the
// cluster's named backups, takes that cluster's ID, and the restore says
// so: before, the leader named it afresh and its own target refused its
// backups. Of a target of two clusters' backups, the restore is refused,
// saying how to choose, and explicit flags win; of a target without named
// backups, the state stays unnamed (TestSnapshotRestoreChoosesABackup).
func TestUnnamedSnapshotRestoredFromItsClustersTarget(t *testing.T) {
	url, _, unnamed := backupsAt(t)
	st, err := backup.Open(context.Background(), url, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	uploadNamed(t, st, clusterA, 6, "a", "b", "c")
	file := filepath.Join(firstLayout, "..", "layout1.snap")
	for _, args := range [][]string{{"-backup", url, "-key", unnamed[1].Key}, {"-backup", url, "-file", file}} {
		dir := t.TempDir()
		code, out, errOut := runCLI(t, append([]string{"operator", "snapshot", "restore", "-data-dir", dir, "-cluster-members", "1,2,3"}, args...)...)
		if code != exitOK || restoredClusterID(t, dir) != clusterA || !strings.Contains(out, "state of cluster "+clusterA.String()+" (the snapshot names none") {
			t.Errorf("restore %v: exit %d, the state's ID %s\n%s%s", args, code, restoredClusterID(t, dir), out, errOut)
		}
	}
	two, _, _ := twoClustersAt(t)
	code, out, errOut := restore(t, "-backup", two, "-file", file)
	if code != exitFailed || !strings.Contains(errOut, "names no cluster") || !strings.Contains(errOut, clusterA.String()) || !strings.Contains(errOut, clusterB.String()) ||
		!strings.Contains(errOut, "-new-cluster-id") || !strings.Contains(errOut, "-new-cluster ") {
		t.Errorf("an unnamed file with a target of two clusters: exit %d\n%s%s", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want func(state.ClusterID) bool
		says string
	}{
		{[]string{"-new-cluster-id", clusterB.String()}, func(id state.ClusterID) bool { return id == clusterB }, "state of cluster " + clusterB.String() + " (the snapshot names none"},
		{[]string{"-new-cluster"}, func(id state.ClusterID) bool { return !id.IsZero() && id != clusterA && id != clusterB }, " as a new cluster, "},
	} {
		dir := t.TempDir()
		args := append([]string{"operator", "snapshot", "restore", "-data-dir", dir, "-cluster-members", "1,2,3", "-backup", two, "-file", file}, tc.args...)
		if code, out, errOut := runCLI(t, args...); code != exitOK || !tc.want(restoredClusterID(t, dir)) || !strings.Contains(out, tc.says) {
			t.Errorf("restore %v: exit %d, the state's ID %s\n%s%s", tc.args, code, restoredClusterID(t, dir), out, errOut)
		}
	}
	code, _, errOut = runCLI(t, "operator", "snapshot", "restore", "-help")
	if code != exitOK || !strings.Contains(errOut, "takes the ID of the cluster whose backups are there") {
		t.Errorf("restore -help does not say what becomes of an unnamed snapshot:\n%s", errOut)
	}
}

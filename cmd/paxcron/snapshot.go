package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"paxcron/cron/state"
	"paxcron/internal/api"
	"paxcron/internal/node"
	"paxcron/internal/server"
	"paxcron/paxos"
	"paxcron/storage/backup"
)

var operatorSnapshotSave = apiCommand{
	usage: `Usage: paxcron operator snapshot save [flags] FILE

Saves the cluster's state as the replica asked holds it now (every job,
its launches and history) to FILE, checksummed. It holds the jobs'
payloads: it needs a write token. Restore it with
"paxcron operator snapshot restore -file FILE".`,
	// A read (of the replica asked), though it needs a write token: one
	// that got no answer may be sent again.
	reads: true, local: true,
	args: 1,
	action: func(ctx context.Context, c *api.Client, f *apiFlags, words []string, out io.Writer) error {
		var buf bytes.Buffer
		index, err := c.Snapshot(ctx, &buf)
		if err != nil {
			return err
		}
		info, _, err := backup.DecodeFile(buf.Bytes())
		if err != nil {
			return fmt.Errorf("the replica sent a damaged snapshot: %w", err)
		}
		if err := writeFileAtomic(words[0], buf.Bytes()); err != nil {
			// Exit 1, not 5 (retry): the snapshot arrived; the file is
			// what failed (found in review).
			return fileError{fmt.Errorf("writing %s: %w", words[0], err)}
		}
		if f.json {
			return printJSON(out, info)
		}
		fmt.Fprintf(out, "saved the state at log index %d (generation %d, %s) to %s (%d bytes, SHA-256 %s)\n", index, info.Generation, clusterName(info.ClusterID), words[0], buf.Len(), info.SHA256)
		return nil
	},
}

var operatorBackup = apiCommand{
	usage: `Usage: paxcron operator backup [flags]

Has the leader upload the cluster's state to its backup target now
(backup.url), rather than at its next snapshot. "paxcron operator
snapshot list -backup URL" lists the backups there.`,
	args: 0,
	action: func(ctx context.Context, c *api.Client, f *apiFlags, _ []string, out io.Writer) error {
		info, err := c.BackupNow(ctx)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(out, info)
		}
		fmt.Fprintf(out, "backed up the state at log index %d as %s (generation %d, %d bytes, %s)\n", info.Index, info.Key, info.Generation, info.Size, clusterName(info.ClusterID))
		return nil
	},
}

// writeFileAtomic writes to a temporary file beside path, then renames.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	// The rename is the folder's: synced, the file is there after a
	// power cut too (found in review: it was not).
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

const snapshotInspectUsage = `Usage: paxcron operator snapshot inspect [-json] FILE

Checks a snapshot file (saved with "snapshot save") against its checksum
and says what it holds: its log index, the members, the jobs and the
launches. It reads nothing but FILE.

Flags:
`

func runSnapshotInspect(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paxcron operator snapshot inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON for scripts")
	fs.Usage = func() { fmt.Fprint(stderr, snapshotInspectUsage); fs.PrintDefaults() }
	words, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(words) != 1 {
		fs.Usage()
		return exitUsage
	}
	b, err := os.ReadFile(words[0])
	if err != nil {
		fmt.Fprintf(stderr, "paxcron operator snapshot inspect: %v\n", err)
		return exitFailed
	}
	info, data, err := backup.DecodeFile(b)
	if err != nil {
		fmt.Fprintf(stderr, "paxcron operator snapshot inspect: %s: %v\n", words[0], err)
		return exitFailed
	}
	sum, err := node.DescribeSnapshot(data)
	if err != nil {
		fmt.Fprintf(stderr, "paxcron operator snapshot inspect: %s: the checksum holds but the state does not decode: %v\n", words[0], err)
		return exitFailed
	}
	if *asJSON {
		printJSON(stdout, struct {
			backup.Info
			Summary node.SnapshotSummary `json:"summary"`
		}{info, sum})
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	l := sum.Stats.Launches
	for _, kv := range [][2]string{
		{"Log index", strconv.FormatUint(info.Index, 10)}, {"Generation", fmt.Sprintf("%d (the round of the last takeover, %v)", sum.Term.Round, sum.Term)},
		{"Members", fmt.Sprint(info.Membership)}, {"Cluster ID", orDefault(sum.ClusterID.String(), "none (taken before the cluster was named)")},
		{"Taken at", info.TakenAt.Local().Format(time.RFC3339)}, {"Size", fmt.Sprintf("%d bytes, SHA-256 %s (verified)", info.Size, info.SHA256)},
		{"Jobs", fmt.Sprintf("%d (%d paused)", sum.Jobs, sum.Paused)},
		{"Launches", fmt.Sprintf("%d open; %d started, %d dispatched, %d failed, %d skipped, %d unknown", sum.Open, l.Started, l.Dispatched, l.Failed, l.Skipped, l.Unknown)},
		{"State hash", fmt.Sprintf("%016x after %d commands", sum.Hash, sum.Commands)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	tw.Flush()
	return exitOK
}

const snapshotRestoreUsage = `Usage: paxcron operator snapshot restore -data-dir DIR -cluster-members IDS (-file FILE | -backup URL) [flags]

Disaster recovery, for a cluster that lost every replica's disk: writes a
snapshot into a replica's empty data folder, offline. Restore the same
snapshot into every replica's folder, then start the replicas as usual,
WITHOUT -bootstrap. The cluster comes back at the snapshot's log index:
what happened after it is lost, and launches due since are launched again
under their identities, so Nomad's idempotency tokens keep them from
running twice (within its job_gc_threshold).

Not for one lost disk while the other replicas run: start that replica
on an empty data folder instead, and it rejoins from its peers. Restored
beside running peers it would vote without the promises it had made,
which can undo a launch already chosen.

The snapshot comes from a file ("snapshot save") or from the backups at
-backup, checked against its checksum: the newest; with -skip-corrupt,
the newest that verifies (it names those it skips); or the one chosen
with -key or -index ("snapshot list" shows them).

Each backup names its cluster, and the restore says which it brings
back. A target that holds the backups of several clusters (given to more
than one) is refused unless -cluster names the one to restore, whose
backups alone are chosen from (-key chooses any).

The restored cluster keeps the snapshot's cluster ID: right for disaster
recovery, as it is the same cluster, and goes on with its own backups.
A snapshot taken before its cluster was named (by an older binary, or
before the first leader named it) holds no ID: restored with -backup, it
takes the ID of the cluster whose backups are there, and the restore
prints it (every replica's restore from there does the same), so that
the target goes on taking the cluster's backups. Where they are several
clusters' backups, the restore is refused: choose with -new-cluster-id
ID (the ID of the cluster the state is: it is restored as that cluster)
or -new-cluster. Without named backups there, the leader names it.
To start a COPY beside the original instead (production cloned into
staging, with the same key file and replica IDs), restore it as a new
cluster: give -new-cluster to the first replica's restore, which draws a
fresh cluster ID and prints it, and -new-cluster-id ID with that ID to
every other replica's. The copy then holds the state under its own ID
from its first start: the two clusters' replicas refuse each other, and
each one's backup target refuses the other's backups. Give the copy its
own backup.url. Never for disaster recovery: a cluster restored as new
is refused by its own backup target.

Backups rank by generation, then log index. The restored cluster backs
up in a generation above every one at -backup and the snapshot's own, so
that its backups rank above those of the history it replaces, which
pruning then deletes first (all but the cluster's first backup there,
kept as its claim on the target). With -file, give -backup too (the cluster's
backup.url): the file is restored, and the backup target only read for
its generations; without it, a leader whose generation is below one at
its backup target refuses to back up there. A folder that holds a
replica's state is refused.

Flags:
`

// restoreFlags are the flags of "snapshot restore".
type restoreFlags struct {
	dataDir, members, file, backupURL, key, cluster string
	index                                           uint64
	indexSet, skipCorrupt                           bool
	// newCluster draws the ID of a new cluster; newClusterID is the ID
	// drawn at another replica's restore.
	newCluster   bool
	newClusterID string
}

func runSnapshotRestore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paxcron operator snapshot restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f restoreFlags
	fs.StringVar(&f.dataDir, "data-dir", "", "the replica's data folder (its data_dir), empty")
	fs.StringVar(&f.members, "cluster-members", "", "the cluster's replica IDs, e.g. 1,2,3 (they must be the snapshot's)")
	fs.StringVar(&f.file, "file", "", "a snapshot file saved with `snapshot save`")
	fs.StringVar(&f.backupURL, "backup", "", "the backup target (backup.url): file:///path, s3://..., gs://..., azblob://...")
	fs.StringVar(&f.key, "key", "", "with -backup: this backup (its key) instead of the newest")
	fs.Uint64Var(&f.index, "index", 0, "with -backup: the backup at this log index instead of the newest")
	fs.BoolVar(&f.skipCorrupt, "skip-corrupt", false, "with -backup: the newest backup that verifies, skipping newer corrupt ones")
	fs.StringVar(&f.cluster, "cluster", "", "with -backup: choose among this cluster's backups (its ID, as \"snapshot list\" shows it)")
	fs.BoolVar(&f.newCluster, "new-cluster", false, "restore a copy BESIDE the original (staging cloned from production) as a new cluster, under a fresh cluster ID it prints; not for disaster recovery")
	fs.StringVar(&f.newClusterID, "new-cluster-id", "", "restore under this cluster ID: the one -new-cluster printed (the other replicas of a new cluster), or, for a snapshot that names no cluster, the ID of the cluster it is")
	fs.Usage = func() { fmt.Fprint(stderr, snapshotRestoreUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "paxcron operator snapshot restore: "+format+"\n", a...)
		return code
	}
	fs.Visit(func(fl *flag.Flag) { f.indexSet = f.indexSet || fl.Name == "index" })
	members, err := parseMembers(f.members)
	if err != nil {
		return fail(exitUsage, "-cluster-members: %v", err)
	}
	if msg := f.check(fs); msg != "" {
		return fail(exitUsage, "%s", msg)
	}
	if f.cluster != "" {
		id, err := state.ParseClusterID(f.cluster)
		if err != nil || id.IsZero() {
			return fail(exitUsage, "-cluster %q: want a cluster ID of %d hex digits, as \"snapshot list\" shows it", f.cluster, 2*state.ClusterIDBytes)
		}
		f.cluster = id.String()
	}
	newID, err := f.newID()
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var st *backup.Store
	if f.backupURL != "" {
		if st, err = backup.Open(ctx, f.backupURL, backup.Options{}); err != nil {
			return fail(exitUsage, "%v", err)
		}
		defer st.Close()
	}
	info, data, err := restoreSource(ctx, f, st, stderr)
	if err != nil {
		return fail(exitFailed, "%v", err)
	}
	gen, err := checkRestored(info, data)
	if err != nil {
		return fail(exitFailed, "%v", err)
	}
	restoredAs := clusterName(info.ClusterID)
	if newID.IsZero() && st != nil {
		named, renamed, err := nameFromTarget(ctx, st, data)
		if err != nil {
			return fail(exitFailed, "the snapshot at %d: %v", info.Index, err)
		}
		if !named.IsZero() {
			data = renamed
			restoredAs = fmt.Sprintf("cluster %s (the snapshot names none, taken before its cluster was named: it takes the ID of the cluster whose backups are at %s, as every replica's restore from there does)", named, st.URL())
		}
	}
	if !newID.IsZero() {
		if data, err = asNewCluster(data, newID); err != nil {
			return fail(exitFailed, "the snapshot at %d: %v", info.Index, err)
		}
		restoredAs = restoredUnder(restoredAs, info.ClusterID, newID, f.newCluster)
	}
	var above uint64
	switch {
	case st != nil:
		if above, err = st.HighestGeneration(ctx); err != nil {
			return fail(exitFailed, "%v", err)
		}
	case !newID.IsZero():
		// A new cluster backs up to a target of its own, where no
		// generation of the original's ranks.
	default:
		fmt.Fprintf(stderr, "paxcron operator snapshot restore: warning: without -backup, the restore knows of no generation but the file's (%d): if the cluster's backup target holds a later one, the restored cluster's leader will refuse to back up there (its backups would rank below the old history's); give -backup with the cluster's backup.url\n", gen)
	}
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: info.Index}, Data: data}
	for _, id := range info.Membership {
		snap.Meta.Membership.Voters = append(snap.Meta.Membership.Voters, paxos.ReplicaID(id))
	}
	round, err := server.RestoreStore(f.dataDir, snap, members, above)
	if err != nil {
		return fail(exitFailed, "%v", err)
	}
	fmt.Fprintf(stdout, "restored the state of %s at log index %d (generation %d, taken %s) into %s: start this replica without -bootstrap\n",
		restoredAs, info.Index, gen, info.TakenAt.Local().Format(time.RFC3339), f.dataDir)
	if f.newCluster {
		fmt.Fprintf(stdout, "restore every other replica of the new cluster from the same snapshot with -new-cluster-id %s (not -new-cluster: replicas of two IDs refuse each other), and give the new cluster a backup.url of its own\n", newID)
	}
	fmt.Fprintf(stdout, "once a leader takes over, the cluster backs up in generation %d or later, above every backup of generation %d or below\n", round, max(above, gen))
	return exitOK
}

// check returns what is wrong with the flags' combination, or "".
func (f restoreFlags) check(fs *flag.FlagSet) string {
	choices := 0
	for _, set := range []bool{f.key != "", f.indexSet, f.skipCorrupt} {
		if set {
			choices++
		}
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	case f.dataDir == "":
		return "-data-dir is required"
	case f.file == "" && f.backupURL == "":
		return "give -file or -backup (or both: the file is restored, above the backups' generations)"
	case choices > 0 && (f.backupURL == "" || f.file != ""):
		return "-key, -index and -skip-corrupt choose a backup at -backup, without -file"
	case choices > 1:
		return "give at most one of -key, -index and -skip-corrupt"
	case f.cluster != "" && (f.backupURL == "" || f.file != ""):
		return "-cluster chooses a backup at -backup, without -file"
	case f.newCluster && f.newClusterID != "":
		return "give -new-cluster to the first replica's restore, and -new-cluster-id with the ID it printed to the others', not both"
	case f.indexSet && f.index == 0:
		// Found in review: taken for no -index, it restored the newest.
		return "-index 0: log indexes start at 1 (\"snapshot list\" shows the backups' indexes)"
	}
	return ""
}

// newID is the cluster ID a restore as a new cluster gives the state:
// drawn (-new-cluster), or the one drawn at another replica's restore
// (-new-cluster-id); zero to keep the snapshot's.
func (f restoreFlags) newID() (state.ClusterID, error) {
	switch {
	case f.newCluster:
		return node.DrawClusterID(), nil
	case f.newClusterID == "":
		return state.ClusterID{}, nil
	}
	id, err := state.ParseClusterID(f.newClusterID)
	if err != nil || id.IsZero() {
		return state.ClusterID{}, fmt.Errorf("-new-cluster-id %q: want the cluster ID of %d hex digits the first replica's restore with -new-cluster printed", f.newClusterID, 2*state.ClusterIDBytes)
	}
	return id, nil
}

// asNewCluster re-encodes data through the state's codec under cluster
// ID id, which must not be the snapshot's own: a copy under the
// original's ID would be taken for the original.
func asNewCluster(data []byte, id state.ClusterID) ([]byte, error) {
	own, err := node.SnapshotClusterID(data)
	if err != nil {
		return nil, err
	}
	if own == id {
		return nil, fmt.Errorf("-new-cluster-id %s is the ID of the cluster the snapshot is of: a copy under it would be taken for that cluster (a disaster recovery keeps the ID without -new-cluster-id)", id)
	}
	return node.SnapshotWithClusterID(data, id)
}

// nameFromTarget names the state of a snapshot taken before its cluster
// was named (by an older binary, or before its first leader named it)
// after the cluster whose backups st holds, and returns the ID and the
// data re-encoded under it. Left unnamed, the restored state was named
// afresh by its leader, and its own backup target, which holds the lost
// cluster's named backups, refused the backups of that new ID. A target
// of several clusters' backups cannot say which this state is: refused,
// for the operator to choose. Zero, and data as it was, for a snapshot
// that names its cluster, or a target of no named backups (the leader
// names the state).
func nameFromTarget(ctx context.Context, st *backup.Store, data []byte) (state.ClusterID, []byte, error) {
	own, err := node.SnapshotClusterID(data)
	if err != nil || !own.IsZero() {
		return state.ClusterID{}, data, err
	}
	listed, err := st.Scan(ctx)
	if err != nil {
		return state.ClusterID{}, nil, err
	}
	ids := clusterIDsIn(listed)
	switch len(ids) {
	case 0:
		return state.ClusterID{}, data, nil
	case 1:
	default:
		return state.ClusterID{}, nil, fmt.Errorf("it names no cluster (taken before its cluster was named), and %s holds the backups of %d clusters (%s): the restore cannot tell which this state is. "+
			"Give -new-cluster-id with the ID of the cluster it is, to restore that cluster (its backups there go on), or -new-cluster to restore a copy beside it under a fresh ID",
			st.URL(), len(ids), strings.Join(ids, ", "))
	}
	id, err := state.ParseClusterID(ids[0])
	if err != nil {
		return state.ClusterID{}, nil, err
	}
	renamed, err := node.SnapshotWithClusterID(data, id)
	return id, renamed, err
}

// clusterIDsIn is the cluster IDs that listed's backups name, newest
// first.
func clusterIDsIn(listed []backup.Listed) []string {
	var ids []string
	for _, l := range listed {
		if id := l.Info.ClusterID; id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// restoreSource reads the snapshot to restore, as f chooses it, and says
// on stderr which backups -skip-corrupt passed over.
func restoreSource(ctx context.Context, f restoreFlags, st *backup.Store, stderr io.Writer) (backup.Info, []byte, error) {
	switch {
	case f.file != "":
		b, err := os.ReadFile(f.file)
		if err != nil {
			return backup.Info{}, nil, err
		}
		info, data, err := backup.DecodeFile(b)
		if err != nil {
			return backup.Info{}, nil, fmt.Errorf("%s: %w", f.file, err)
		}
		return info, data, nil
	case f.key != "":
		info, data, err := st.Fetch(ctx, f.key)
		if err == nil && f.cluster != "" && info.ClusterID != f.cluster {
			return backup.Info{}, nil, fmt.Errorf("the backup %s is of %s, not of cluster %s", f.key, clusterName(info.ClusterID), f.cluster)
		}
		return info, data, err
	case f.indexSet:
		return fetchAtIndex(ctx, st, f.index, f.cluster)
	case f.skipCorrupt:
		info, data, skipped, err := st.LatestValid(ctx, f.cluster)
		for _, s := range skipped {
			fmt.Fprintf(stderr, "paxcron operator snapshot restore: skipped the backup of generation %d at index %d: %v\n", s.Generation, s.Index, s.Err)
		}
		return info, data, severalHint(err)
	}
	info, data, err := st.Latest(ctx, f.cluster)
	err = severalHint(err)
	if errors.Is(err, backup.ErrCorrupt) {
		err = fmt.Errorf("%w (-skip-corrupt restores the newest backup that verifies; \"snapshot list\" shows them all)", err)
	}
	return info, data, err
}

// severalHint adds to ErrSeveralClusters how to choose.
func severalHint(err error) error {
	if errors.Is(err, backup.ErrSeveralClusters) {
		return fmt.Errorf("%w (-cluster ID chooses among that cluster's backups; \"snapshot list\" shows each backup's)", err)
	}
	return err
}

// fetchAtIndex reads the one backup at a log index, of cluster if it is
// named: several generations may hold one each (histories before and
// after a restore). In a target of several clusters' backups, the index
// alone does not say which cluster's state is meant: refused without
// cluster.
func fetchAtIndex(ctx context.Context, st *backup.Store, index uint64, cluster string) (backup.Info, []byte, error) {
	listed, err := st.Scan(ctx)
	if err != nil {
		return backup.Info{}, nil, err
	}
	var found []backup.Listed
	var gens []uint64
	ids := clusterIDsIn(listed)
	for _, l := range listed {
		if l.Index == index && (cluster == "" || l.Err != nil || l.Info.ClusterID == cluster) {
			found, gens = append(found, l), append(gens, l.Generation)
		}
	}
	switch {
	case cluster == "" && len(ids) > 1:
		return backup.Info{}, nil, fmt.Errorf("%s holds the backups of %d clusters (%s): choose the one to restore with -cluster ID (\"snapshot list\" shows each backup's)",
			st.URL(), len(ids), strings.Join(ids, ", "))
	case len(found) == 0:
		return backup.Info{}, nil, fmt.Errorf("no backup at log index %d%s in %s (\"snapshot list\" shows those there are)", index, ofCluster(cluster), st.URL())
	case len(found) > 1:
		return backup.Info{}, nil, fmt.Errorf("%d backups at log index %d, of generations %v: choose one with -key (\"snapshot list\" shows their keys)", len(found), index, gens)
	case found[0].Err != nil:
		return backup.Info{}, nil, found[0].Err
	}
	return st.Fetch(ctx, found[0].Info.Key)
}

// clusterName names a cluster by its ID ("" for none) in messages.
// restoredUnder says under which ID a restore given -new-cluster or
// -new-cluster-id put the state: for a snapshot that names no cluster,
// -new-cluster-id names the cluster it is (no new cluster); otherwise it
// is a new cluster beside the one the snapshot names.
func restoredUnder(restoredAs, snapshotID string, newID state.ClusterID, drawn bool) string {
	if snapshotID == "" && !drawn {
		return "cluster " + newID.String() + " (the snapshot names none, taken before its cluster was named: -new-cluster-id names it)"
	}
	return restoredAs + " as a new cluster, " + newID.String()
}

func clusterName(id string) string {
	if id == "" {
		return "a cluster not named (taken before its first leader named it, or by an older binary)"
	}
	return "cluster " + id
}

// ofCluster is " of cluster ID", or "" for none.
func ofCluster(id string) string {
	if id == "" {
		return ""
	}
	return " of cluster " + id
}

// checkRestored returns the generation of a snapshot's state, and
// refuses one that does not decode or whose generation or cluster ID is
// not the one its manifest or header says (generation 0: written before
// generations, it says none; no cluster ID: written before IDs, or of a
// state not named yet).
func checkRestored(info backup.Info, data []byte) (uint64, error) {
	sum, err := node.DescribeSnapshot(data)
	if err != nil {
		return 0, fmt.Errorf("the snapshot at %d does not decode: %w", info.Index, err)
	}
	if id := sum.ClusterID.String(); info.ClusterID != "" && info.ClusterID != id {
		return 0, fmt.Errorf("the snapshot at %d is described as of cluster %s, but its state is of %s: it is not the snapshot its description was written for",
			info.Index, info.ClusterID, clusterName(id))
	}
	gen, err := server.BackupGeneration(data)
	if err != nil {
		return 0, err
	}
	if info.Generation != 0 && info.Generation != gen {
		return 0, fmt.Errorf("the snapshot at %d is described as of generation %d, but its state's is %d: it is not the snapshot its description was written for", info.Index, info.Generation, gen)
	}
	return gen, nil
}

func parseMembers(s string) ([]paxos.ReplicaID, error) {
	if s == "" {
		return nil, errors.New("required")
	}
	var out []paxos.ReplicaID
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(part), 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q is not a replica ID", part)
		}
		if slices.Contains(out, paxos.ReplicaID(n)) {
			return nil, fmt.Errorf("replica %d is named twice", n)
		}
		out = append(out, paxos.ReplicaID(n))
	}
	return out, nil
}

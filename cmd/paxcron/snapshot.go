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
			return err
		}
		if f.json {
			return printJSON(out, info)
		}
		fmt.Fprintf(out, "saved the state at log index %d to %s (%d bytes, SHA-256 %s)\n", index, words[0], buf.Len(), info.SHA256)
		return nil
	},
}

var operatorBackup = apiCommand{
	usage: `Usage: paxcron operator backup [flags]

Has the leader upload the cluster's state to its backup target now
(backup.url), rather than at its next snapshot.`,
	args: 0,
	action: func(ctx context.Context, c *api.Client, f *apiFlags, _ []string, out io.Writer) error {
		info, err := c.BackupNow(ctx)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(out, info)
		}
		fmt.Fprintf(out, "backed up the state at log index %d as %s (%d bytes)\n", info.Index, info.Key, info.Size)
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
	return os.Rename(tmp.Name(), path)
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
		{"Log index", strconv.FormatUint(info.Index, 10)}, {"Members", fmt.Sprint(info.Membership)},
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

The snapshot comes from a file ("snapshot save") or from the backups at
-backup (the newest, or -key), checked against its checksum. A folder that
holds a replica's state is refused.

Flags:
`

func runSnapshotRestore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paxcron operator snapshot restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "the replica's data folder (its data_dir), empty")
	membersFlag := fs.String("cluster-members", "", "the cluster's replica IDs, e.g. 1,2,3 (they must be the snapshot's)")
	file := fs.String("file", "", "a snapshot file saved with `snapshot save`")
	backupURL := fs.String("backup", "", "the backup target (backup.url): file:///path, s3://..., gs://..., azblob://...")
	key := fs.String("key", "", "with -backup: this backup (its key) instead of the newest")
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
	members, err := parseMembers(*membersFlag)
	switch {
	case fs.NArg() > 0:
		return fail(exitUsage, "unexpected argument %q", fs.Arg(0))
	case *dataDir == "":
		return fail(exitUsage, "-data-dir is required")
	case err != nil:
		return fail(exitUsage, "-cluster-members: %v", err)
	case (*file == "") == (*backupURL == ""):
		return fail(exitUsage, "give one of -file and -backup")
	case *key != "" && *backupURL == "":
		return fail(exitUsage, "-key goes with -backup")
	}
	var info backup.Info
	var data []byte
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return fail(exitFailed, "%v", err)
		}
		if info, data, err = backup.DecodeFile(b); err != nil {
			return fail(exitFailed, "%s: %v", *file, err)
		}
	} else {
		st, err := backup.Open(ctx, *backupURL, backup.Options{})
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		defer st.Close()
		if *key != "" {
			info, data, err = st.Fetch(ctx, *key)
		} else {
			info, data, err = st.Latest(ctx)
		}
		if err != nil {
			return fail(exitFailed, "%v", err)
		}
	}
	if _, err := node.DescribeSnapshot(data); err != nil {
		return fail(exitFailed, "the snapshot at %d does not decode: %v", info.Index, err)
	}
	snap := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: info.Index}, Data: data}
	for _, id := range info.Membership {
		snap.Meta.Membership.Voters = append(snap.Meta.Membership.Voters, paxos.ReplicaID(id))
	}
	if _, err := server.RestoreStore(*dataDir, snap, members, 0); err != nil {
		return fail(exitFailed, "%v", err)
	}
	fmt.Fprintf(stdout, "restored the state at log index %d (taken %s) into %s: start this replica without -bootstrap\n",
		info.Index, info.TakenAt.Local().Format(time.RFC3339), *dataDir)
	return exitOK
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

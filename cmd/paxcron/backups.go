package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"paxcron/storage/backup"
)

const snapshotListUsage = `Usage: paxcron operator snapshot list -backup URL [-verify-all] [-json]

Lists the backups at a backup target (backup.url), newest first: by
generation, then by log index. A cluster restored from a snapshot backs
up in a generation above every one the target held, so its backups rank
above those of the history it replaced, whatever their indexes. Backups
of binaries older than generations are generation 0.

Each backup names the cluster whose state it holds (its cluster ID, as
"paxcron operator status" shows it; "-" for a state not named yet, or a
backup older binaries wrote). A target holding backups of several
clusters was given to more than one cluster: it is said, and "snapshot
restore" then needs -cluster to choose.

KEPT marks each named cluster's first backup in the target ("first of
its cluster"): pruning keeps it beside the newest backup.keep, as it
holds the cluster's claim on the target. Where several clusters' backups
lie, the target belongs to the cluster whose first backup landed first
("first, owns the target"): its uploads go on, the others' are refused.

The newest backup is read back and checked against its checksum (every
one with -verify-all); a manifest that does not decode is listed with its
error. It exits 1 when the newest backup does not verify: restore then
takes "snapshot restore -skip-corrupt", or a backup chosen with -key.

Flags:
`

// listedBackup is one row of "snapshot list".
type listedBackup struct {
	Generation uint64    `json:"generation"`
	Index      uint64    `json:"index"`
	TakenAt    time.Time `json:"taken_at,omitzero"`
	Size       int64     `json:"size"`
	Key        string    `json:"key"`
	Manifest   string    `json:"manifest"`
	// ClusterID is the cluster's whose state it holds, "" for none.
	ClusterID string `json:"cluster_id,omitempty"`
	// Status is "verified", "corrupt", "bad manifest" or "" (not read).
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// FirstOfCluster marks its cluster's first backup in the target,
	// which pruning keeps whatever backup.keep says; OwnsTarget the one
	// of them that gives the target to its cluster.
	FirstOfCluster bool `json:"first_of_cluster,omitempty"`
	OwnsTarget     bool `json:"owns_target,omitempty"`
}

func runSnapshotList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paxcron operator snapshot list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backupURL := fs.String("backup", "", "the backup target (backup.url): file:///path, s3://..., gs://..., azblob://...")
	all := fs.Bool("verify-all", false, "read back and verify every backup, not only the newest")
	asJSON := fs.Bool("json", false, "print JSON for scripts")
	fs.Usage = func() { fmt.Fprint(stderr, snapshotListUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "paxcron operator snapshot list: "+format+"\n", a...)
		return code
	}
	switch {
	case fs.NArg() > 0:
		return fail(exitUsage, "unexpected argument %q", fs.Arg(0))
	case *backupURL == "":
		return fail(exitUsage, "-backup is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	st, err := backup.Open(ctx, *backupURL, backup.Options{})
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	defer st.Close()
	rows, err := listBackups(ctx, st, *all)
	if err != nil {
		return fail(exitFailed, "%v", err)
	}
	if *asJSON {
		printJSON(stdout, rows)
	} else {
		printBackups(stdout, st, rows)
	}
	if len(rows) > 0 && rows[0].Status != "verified" {
		return fail(exitFailed, "the newest backup (generation %d, index %d) does not verify: %s", rows[0].Generation, rows[0].Index, rows[0].Error)
	}
	return exitOK
}

// listBackups scans st and verifies the newest backup, or all of them.
func listBackups(ctx context.Context, st *backup.Store, all bool) ([]listedBackup, error) {
	listed, err := st.Scan(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]listedBackup, 0, len(listed))
	for i, l := range listed {
		row := listedBackup{Generation: l.Generation, Index: l.Index, Manifest: l.Manifest,
			TakenAt: l.Info.TakenAt, Size: l.Info.Size, Key: l.Info.Key, ClusterID: l.Info.ClusterID,
			FirstOfCluster: l.First, OwnsTarget: l.Owns}
		switch {
		case l.Err != nil:
			row.Status, row.Error = "bad manifest", l.Err.Error()
		case i == 0 || all:
			row.Status = "verified"
			if _, _, err := st.Fetch(ctx, l.Info.Key); errors.Is(err, backup.ErrCorrupt) {
				row.Status, row.Error = "corrupt", err.Error()
			} else if err != nil {
				return nil, err
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// clusterIDs is the cluster IDs rows name, in order.
func clusterIDs(rows []listedBackup) []string {
	var ids []string
	for _, r := range rows {
		if r.ClusterID != "" && !slices.Contains(ids, r.ClusterID) {
			ids = append(ids, r.ClusterID)
		}
	}
	return ids
}

func printBackups(out io.Writer, st *backup.Store, rows []listedBackup) {
	if len(rows) == 0 {
		fmt.Fprintf(out, "no backup in %s\n", st.URL())
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GENERATION\tINDEX\tTAKEN AT\tSIZE\tSTATUS\tKEY\tCLUSTER\tKEPT")
	for _, r := range rows {
		key, taken, size := r.Key, "-", "-"
		if r.Status == "bad manifest" {
			key = r.Manifest
		} else {
			taken, size = r.TakenAt.Local().Format(time.RFC3339), strconv.FormatInt(r.Size, 10)
		}
		kept := "-"
		switch {
		case r.OwnsTarget:
			kept = "first, owns the target"
		case r.FirstOfCluster:
			kept = "first of its cluster"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Generation, r.Index, taken, size, orDefault(r.Status, "-"), key, orDefault(r.ClusterID, "-"), kept)
	}
	tw.Flush()
	if ids := clusterIDs(rows); len(ids) > 1 {
		fmt.Fprintf(out, "this target holds the backups of %d clusters (%s): each cluster needs its own backup.url, and a restore from here needs -cluster ID\n",
			len(ids), strings.Join(ids, ", "))
	}
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(out, "generation %d, index %d: %s\n", r.Generation, r.Index, r.Error)
		}
	}
}

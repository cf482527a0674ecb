package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
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
	// Status is "verified", "corrupt", "bad manifest" or "" (not read).
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
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
			TakenAt: l.Info.TakenAt, Size: l.Info.Size, Key: l.Info.Key}
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

func printBackups(out io.Writer, st *backup.Store, rows []listedBackup) {
	if len(rows) == 0 {
		fmt.Fprintf(out, "no backup in %s\n", st.URL())
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GENERATION\tINDEX\tTAKEN AT\tSIZE\tSTATUS\tKEY")
	for _, r := range rows {
		key, taken, size := r.Key, "-", "-"
		if r.Status == "bad manifest" {
			key = r.Manifest
		} else {
			taken, size = r.TakenAt.Local().Format(time.RFC3339), strconv.FormatInt(r.Size, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", r.Generation, r.Index, taken, size, orDefault(r.Status, "-"), key)
	}
	tw.Flush()
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(out, "generation %d, index %d: %s\n", r.Generation, r.Index, r.Error)
		}
	}
}

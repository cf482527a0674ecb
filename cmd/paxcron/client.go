package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"paxcron/cron/cronfile"
	"paxcron/cron/schedule"
	"paxcron/internal/api"
)

// Exit statuses of the commands that call a replica, for scripts.
const (
	exitOK          = 0
	exitFailed      = 1 // the request failed (see the message)
	exitUsage       = 2
	exitNotFound    = 3 // no such job
	exitConflict    = 4 // the job changed meanwhile, or a duplicate
	exitUnavailable = 5 // no leader now, or the replica cannot be reached: nothing was done
	exitUnknown     = 6 // a write was sent and no answer came back: it may have been done
)

const apiExitStatus = `Exit status: 0 done, 1 the request failed, 2 bad usage, 3 no such job,
4 a conflict (the job changed meanwhile: read it again), 5 no leader right
now or the replica cannot be reached (nothing was done: retry), 6 a write
was sent but no answer came back (it may have been done: look, for example
with "paxcron job history", before sending it again).`

// apiFlags are the flags of every command that calls a replica.
type apiFlags struct {
	address, token, caCert string
	tokenEnv               string // PAXCRON_TOKEN, used unless -token is given
	json, stale            bool
}

func (f *apiFlags) register(fs *flag.FlagSet, getenv func(string) string, reads bool) {
	addr := getenv("PAXCRON_ADDR")
	if addr == "" {
		addr = api.DefaultAddress
	}
	fs.StringVar(&f.address, "address", addr, "a replica's API, http(s)://host:port; or several, comma-separated, to call whichever leads and go on when one is down (PAXCRON_ADDR)")
	// Not the flag's default: the help and every usage error print
	// defaults, and so wrote the token out (found in review).
	f.tokenEnv = getenv("PAXCRON_TOKEN")
	fs.StringVar(&f.token, "token", "", "the API token (PAXCRON_TOKEN)")
	fs.StringVar(&f.caCert, "ca-cert", getenv("PAXCRON_CACERT"), "CA certificates (PEM, one or several: during a CA move the old and the new) to verify an https API (PAXCRON_CACERT)")
	fs.BoolVar(&f.json, "json", false, "print the answer as JSON, for scripts")
	if reads {
		fs.BoolVar(&f.stale, "stale", false, "answer from the replica asked, without the leader (faster, maybe behind)")
	}
}

func (f *apiFlags) client(fs *flag.FlagSet) (*api.Client, error) {
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == "token" })
	if !given {
		f.token = f.tokenEnv
	}
	return api.NewClient(api.ClientConfig{Address: f.address, Token: f.token, CACert: f.caCert})
}

// apiCommand is a command that calls a replica: its usage, whether it
// reads, its argument count, and what it does.
type apiCommand struct {
	usage string
	// reads: the command changes nothing, so a call left without an
	// answer may be sent again (exit 5, never 6).
	reads bool
	// local: served by the replica asked, whatever it is (a status, a
	// snapshot download), so it takes no -stale.
	local bool
	// args is the number of words it takes (-1: zero or one).
	args   int
	extra  func(fs *flag.FlagSet)
	action func(ctx context.Context, c *api.Client, f *apiFlags, words []string, out io.Writer) error
}

func runAPICommand(name string, cmd apiCommand, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f apiFlags
	f.register(fs, getenv, cmd.reads && !cmd.local)
	if cmd.extra != nil {
		cmd.extra(fs)
	}
	fs.Usage = func() {
		fmt.Fprint(stderr, cmd.usage+"\n\n"+apiExitStatus+"\n\nFlags:\n")
		fs.PrintDefaults()
	}
	words, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if (cmd.args >= 0 && len(words) != cmd.args) || (cmd.args < 0 && len(words) > 1) {
		fmt.Fprintf(stderr, "%s: wrong number of arguments\n\n", name)
		fs.Usage()
		return exitUsage
	}
	client, err := f.client(fs)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cmd.action(withFlags(ctx, fs), client, &f, words, stdout); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		code := exitCodeOf(err, cmd.reads)
		if code == exitUnknown {
			fmt.Fprintf(stderr, "%s: the write was sent and no answer came back: it may have been done; look before sending it again\n", name)
		}
		return code
	}
	return exitOK
}

// exitCodeOf is err's exit status. A 503 is answered before anything is
// done, and a read may always be sent again; but a write that reached a
// replica and got no answer, or a 502 or 504 (the leader it was forwarded
// to did not answer in full), may have been done: a script that sent a
// trigger again on "retry" would launch twice.
func exitCodeOf(err error, read bool) int {
	var usage usageError
	if errors.As(err, &usage) {
		return exitUsage
	}
	var file fileError
	if errors.As(err, &file) {
		return exitFailed
	}
	switch api.StatusOf(err) {
	case 0: // no answer at all
		if read || api.NeverSent(err) {
			return exitUnavailable
		}
		return exitUnknown
	case http.StatusNotFound:
		return exitNotFound
	case http.StatusConflict:
		return exitConflict
	case http.StatusServiceUnavailable:
		return exitUnavailable
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		var apiErr *api.Error
		if read || errors.As(err, &apiErr) && apiErr.NotDone {
			return exitUnavailable
		}
		return exitUnknown
	}
	return exitFailed
}

// usageError is a bad argument found after flags were parsed.
type usageError struct{ error }

// fileError is a file with problems: exit 1, as in `job validate`, not 2
// (the command line was right), nor 5 or 6 (no call failed): a file to
// submit, for which nothing was sent, or one a read could not write.
type fileError struct{ error }

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

var jobAPICommands = map[string]apiCommand{
	"run": {
		usage: `Usage: paxcron job run [flags] FILE.hcl

Submits the cron jobs of FILE.hcl: creates the new ones, replaces those
whose spec changed, and leaves the same ones alone. file() calls are read
here, relative to the file. Before writing, the cluster checks with Nomad
that it will accept each job's dispatches (-skip-nomad-check to skip).
A file of more than 1,000 jobs is sent 1,000 at a time, in order; if one
request fails, the jobs before it stay written. A file with problems
(see "paxcron job validate") exits 1 and sends nothing.`,
		args: 1,
		extra: func(fs *flag.FlagSet) {
			fs.Bool("skip-nomad-check", false, "write without first checking the jobs against Nomad")
		},
		action: func(ctx context.Context, c *api.Client, f *apiFlags, words []string, out io.Writer) error {
			crons, err := cronfile.ParseFile(words[0])
			if err != nil {
				return fileError{err}
			}
			// A file may hold more jobs than one request takes: it goes in
			// several, in the file's order (found in review: a file that
			// validated could not be submitted).
			var res api.PutJobsResult
			for from := 0; from < len(crons); from += api.MaxJobsPerRequest {
				req := api.PutJobs{SkipNomadCheck: flagBool(ctx, "skip-nomad-check")}
				for _, cr := range crons[from:min(from+api.MaxJobsPerRequest, len(crons))] {
					req.Jobs = append(req.Jobs, api.PutJob{Name: cr.Name, Spec: api.SpecOf(cr.Spec)})
				}
				part, err := c.PutJobs(ctx, req)
				if err != nil && from > 0 {
					return fmt.Errorf("the file's first %d jobs were written; jobs %d-%d: %w", from, from+1, len(crons), err)
				}
				if err != nil {
					return err
				}
				res.Jobs = append(res.Jobs, part.Jobs...)
			}
			if f.json {
				return printJSON(out, res)
			}
			for _, j := range res.Jobs {
				verb := "updated"
				switch {
				case j.Created:
					verb = "created"
				case j.Unchanged:
					verb = "unchanged"
				}
				fmt.Fprintf(out, "%-9s %s (version %d, schedule %s)\n", verb, j.Name, j.Version, j.Resolved)
			}
			return nil
		},
	},
	"status": {
		usage: `Usage: paxcron job status [flags] [NAME]

Without NAME, lists every job with its next and last launch. With NAME,
shows the job: its resolved schedule, its next launch times, its open
launches and its recent history.`,
		reads: true,
		args:  -1,
		extra: func(fs *flag.FlagSet) {
			fs.Int("n", 5, fmt.Sprintf("next launch times to show (0-%d)", api.MaxNextLaunches))
			fs.String("prefix", "", "list only the jobs whose names start with this")
		},
		action: func(ctx context.Context, c *api.Client, f *apiFlags, words []string, out io.Writer) error {
			// Each flag belongs to one form: given to the other, it would
			// be ignored without a word (found in review).
			switch {
			case len(words) == 0 && flagGiven(ctx, "n"):
				return usageError{errors.New("-n is for one job's next launches: give its NAME")}
			case len(words) > 0 && flagGiven(ctx, "prefix"):
				return usageError{errors.New("-prefix lists jobs: give it without a NAME")}
			}
			if len(words) == 0 {
				return listJobs(ctx, c, f, flagString(ctx, "prefix"), out)
			}
			n := flagInt(ctx, "n")
			if n < 0 || n > api.MaxNextLaunches {
				return usageError{fmt.Errorf("-n must be 0 to %d, not %d", api.MaxNextLaunches, n)}
			}
			j, err := c.Job(ctx, words[0], n, api.ReadOptions{Stale: f.stale})
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(out, j)
			}
			printJob(out, j)
			return nil
		},
	},
	"history": {
		usage: `Usage: paxcron job history [flags] NAME

Lists the job's recent launches, newest first, with their outcomes: the
Nomad child dispatched, or why a launch failed, was skipped or is unknown.`,
		reads: true,
		args:  1,
		action: func(ctx context.Context, c *api.Client, f *apiFlags, words []string, out io.Writer) error {
			j, err := c.Job(ctx, words[0], 0, api.ReadOptions{Stale: f.stale})
			if err != nil {
				return err
			}
			launches := append(append([]api.Launch{}, j.OpenAll...), j.History...)
			if f.json {
				return printJSON(out, launches)
			}
			printLaunches(out, launches)
			return nil
		},
	},
	"pause": simpleCommand("pause", "Pauses the job: its launches are recorded as skipped (paused) until resumed.",
		func(ctx context.Context, c *api.Client, name string) (api.Done, error) { return c.Pause(ctx, name) }),
	"resume": simpleCommand("resume", "Resumes a paused job.",
		func(ctx context.Context, c *api.Client, name string) (api.Done, error) { return c.Resume(ctx, name) }),
	"delete": simpleCommand("delete", "Deletes the job. Launches already started are still concluded.",
		func(ctx context.Context, c *api.Client, name string) (api.Done, error) { return c.DeleteJob(ctx, name) }),
	"trigger": {
		usage: `Usage: paxcron job trigger [flags] NAME

Launches the job now, outside its schedule, under an identity of its own
(<name>-<unix seconds>-manual). A paused job, or one whose concurrency
policy refuses a launch now, is skipped unless -force.`,
		args: 1,
		extra: func(fs *flag.FlagSet) {
			fs.Bool("force", false, "launch even if the job is paused or its concurrency policy refuses")
		},
		action: func(ctx context.Context, c *api.Client, f *apiFlags, words []string, out io.Writer) error {
			d, err := c.Trigger(ctx, words[0], api.Trigger{Force: flagBool(ctx, "force")})
			return printDone(out, f, d, err, "triggered "+words[0])
		},
	},
	"backfill": {
		usage: `Usage: paxcron job backfill [flags] -from TIME -to TIME NAME

Launches again the job's scheduled slots between -from and -to (RFC 3339)
whose launch did not run: skipped or failed ones (with -force, unknown ones
too). Each keeps its slot's identity, so Nomad refuses a second child of a
slot that has one.`,
		args: 1,
		extra: func(fs *flag.FlagSet) {
			fs.String("from", "", "the first slot's time, RFC 3339")
			fs.String("to", "", "the last slot's time, RFC 3339")
			fs.Bool("force", false, "also relaunch slots whose outcome is unknown, and ignore pause and concurrency")
		},
		action: func(ctx context.Context, c *api.Client, f *apiFlags, words []string, out io.Writer) error {
			from, err1 := time.Parse(time.RFC3339, flagString(ctx, "from"))
			to, err2 := time.Parse(time.RFC3339, flagString(ctx, "to"))
			if err1 != nil || err2 != nil {
				return usageError{errors.New("-from and -to are required, in RFC 3339 (2026-03-01T00:00:00Z)")}
			}
			d, err := c.Backfill(ctx, words[0], api.Backfill{From: from, To: to, Force: flagBool(ctx, "force")})
			return printDone(out, f, d, err, "backfill of "+words[0]+" opened")
		},
	},
}

func simpleCommand(verb, what string, call func(context.Context, *api.Client, string) (api.Done, error)) apiCommand {
	return apiCommand{
		usage: fmt.Sprintf("Usage: paxcron job %s [flags] NAME\n\n%s", verb, what),
		args:  1,
		action: func(ctx context.Context, c *api.Client, f *apiFlags, words []string, out io.Writer) error {
			d, err := call(ctx, c, words[0])
			return printDone(out, f, d, err, verb+"d "+words[0])
		},
	}
}

func printDone(out io.Writer, f *apiFlags, d api.Done, err error, msg string) error {
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(out, d)
	}
	fmt.Fprintf(out, "%s (log index %d)\n", msg, d.Index)
	return nil
}

func listJobs(ctx context.Context, c *api.Client, f *apiFlags, prefix string, out io.Writer) error {
	jobs, err := c.JobsWithPrefix(ctx, prefix, api.ReadOptions{Stale: f.stale})
	if err != nil {
		return err
	}
	shown := jobs.Jobs
	if f.json {
		return printJSON(out, shown)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSCHEDULE\tNEXT\tLAST\tOUTCOME\tSTATE")
	for _, j := range shown {
		next, last, outcome, st := "-", "-", "-", "active"
		if j.NextAt != nil {
			next = j.NextAt.Local().Format(time.RFC3339)
		}
		if j.Last != nil {
			last, outcome = j.Last.ScheduledAt.Local().Format(time.RFC3339), j.Last.Outcome
		}
		switch {
		case j.Ended:
			st = "ended"
		case j.Paused:
			st = "paused"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.Name, j.Resolved, next, last, outcome, st)
	}
	return tw.Flush()
}

func printJob(out io.Writer, j api.Job) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	state := "active"
	switch {
	case j.Ended:
		state = fmt.Sprintf("ended: its schedule has no launch within %d years of its last; it launches nothing more until its schedule is edited", schedule.SearchYears)
	case j.Paused:
		state = "paused"
	}
	for _, kv := range [][2]string{
		{"Name", j.Name}, {"Version", fmt.Sprint(j.Version)}, {"State", state},
		{"Schedule", j.Spec.Schedule}, {"Resolved", j.Resolved}, {"Time zone", j.TimeZone},
		{"Concurrency", orDefault(j.Spec.Concurrency, "allow")}, {"Catch-up window", time.Duration(j.Spec.CatchupWindow).String()},
		{"Delivery", j.Spec.Delivery}, {"Nomad job", j.Spec.NomadJob}, {"Namespace", orDefault(j.Spec.Namespace, "(the server's)")},
		{"Launches", fmt.Sprintf("%d started, %d dispatched, %d failed, %d skipped, %d unknown", j.Counters.Started, j.Counters.Dispatched, j.Counters.Failed, j.Counters.Skipped, j.Counters.Unknown)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	tw.Flush()
	fmt.Fprintln(out, "\nNext launches")
	if len(j.Next) == 0 {
		fmt.Fprintln(out, "  (none)")
	}
	for _, t := range j.Next {
		fmt.Fprintf(out, "  %s\n", t.Local().Format(time.RFC3339))
	}
	fmt.Fprintln(out, "\nOpen and recent launches")
	printLaunches(out, append(append([]api.Launch{}, j.OpenAll...), j.History...))
}

func printLaunches(out io.Writer, ls []api.Launch) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULED\tKIND\tOUTCOME\tCHILD OR REASON")
	for _, l := range ls {
		detail := l.ChildID
		if l.Reason != "" {
			detail = l.Reason
		}
		outcome := l.Outcome
		if outcome == "unknown" || outcome == "skipped" || outcome == "failed" {
			outcome = strings.ToUpper(outcome)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.ScheduledAt.Local().Format(time.RFC3339), l.Kind, outcome, detail)
	}
	tw.Flush()
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Extra flags reach the action through the context, by name.
type flagsKey struct{}

func withFlags(ctx context.Context, fs *flag.FlagSet) context.Context {
	return context.WithValue(ctx, flagsKey{}, fs)
}

func flagValue(ctx context.Context, name string) flag.Getter {
	fs, _ := ctx.Value(flagsKey{}).(*flag.FlagSet)
	if fs == nil {
		return nil
	}
	f := fs.Lookup(name)
	if f == nil {
		return nil
	}
	g, _ := f.Value.(flag.Getter)
	return g
}

func flagBool(ctx context.Context, name string) bool {
	if g := flagValue(ctx, name); g != nil {
		b, _ := g.Get().(bool)
		return b
	}
	return false
}

func flagInt(ctx context.Context, name string) int {
	if g := flagValue(ctx, name); g != nil {
		n, _ := g.Get().(int)
		return n
	}
	return 0
}

// flagGiven reports whether the flag name was given on the command line.
func flagGiven(ctx context.Context, name string) bool {
	fs, _ := ctx.Value(flagsKey{}).(*flag.FlagSet)
	given := false
	if fs != nil {
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	}
	return given
}

func flagString(ctx context.Context, name string) string {
	if g := flagValue(ctx, name); g != nil {
		s, _ := g.Get().(string)
		return s
	}
	return ""
}

const operatorUsage = `Usage: paxcron operator <subcommand> [arguments]

Subcommands:
  status             show the cluster as a replica sees it: leader, replicas, log, lease
  backup             have the leader upload the state to the backup target now
  snapshot save      save the cluster's state to a file
  snapshot inspect   check a snapshot file and say what it holds
  snapshot list      list the backups at a backup target, newest first
  snapshot restore   rebuild a replica's data folder from a snapshot (disaster recovery)

Run "paxcron operator <subcommand> -h" for a subcommand's flags.
`

func runOperator(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, operatorUsage)
		return exitUsage
	}
	switch args[0] {
	case "status":
		return runAPICommand("paxcron operator status", operatorStatus, args[1:], stdout, stderr, getenv)
	case "backup":
		return runAPICommand("paxcron operator backup", operatorBackup, args[1:], stdout, stderr, getenv)
	case "snapshot":
		return runSnapshot(args[1:], stdout, stderr, getenv)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, operatorUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "paxcron operator: unknown subcommand %q\n\n%s", args[0], operatorUsage)
	return exitUsage
}

var operatorStatus = apiCommand{
	usage: `Usage: paxcron operator status [flags]

Shows the cluster as the replica asked sees it: its cluster ID, who leads,
each replica's addresses and health, the log's chosen and applied indexes,
the lease, and the newest snapshot and backup.`,
	// A read: one that got no answer was once reported as a write that
	// may have been done (exit 6).
	reads: true, local: true,
	args: 0,
	action: func(ctx context.Context, c *api.Client, f *apiFlags, _ []string, out io.Writer) error {
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(out, st)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		leader := "none (an election is under way, or too few replicas are up)"
		if st.Leader != 0 {
			leader = fmt.Sprintf("replica %d (%s)", st.Leader, orDefault(st.LeaderAPI, "address unknown"))
		}
		for _, kv := range [][2]string{
			{"Replica", fmt.Sprintf("%d (%s%s)", st.Replica, st.Role, map[bool]string{true: ", rebuilding: catching up from its peers before it votes"}[st.Rebuilding])}, {"Leader", leader},
			{"Cluster ID", orDefault(st.ClusterID, "not known yet (the first leader names the cluster; a rebuilding replica learns it from its peers)")},
			{"Log", fmt.Sprintf("chosen %d, applied %d, last snapshot %d", st.Chosen, st.Applied, st.LastSnapshot)},
			{"Launching", fmt.Sprint(st.Launching)}, {"Lease", time.Duration(st.Lease).String()},
			{"Jobs", fmt.Sprintf("%d, %d launches open", st.Jobs, st.Open)}, {"State hash", st.StateHash},
			{"Version", st.Version},
		} {
			fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
		}
		if b := st.LastBackup; b != nil {
			fmt.Fprintf(tw, "Last backup\tgeneration %d, index %d at %s (%s)\n", b.Generation, b.Index, b.TakenAt.Local().Format(time.RFC3339), b.Key)
		}
		fmt.Fprintf(tw, "Shared settings\t%s\n", sharedSettingsLine(st))
		tw.Flush()
		fmt.Fprintln(out, "\nReplicas")
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tHEALTH\tAPI\tPAXOS")
		for _, r := range st.Replicas {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.ID, r.Health, orDefault(r.APIAddr, "-"), orDefault(r.PaxosAddr, "-"))
		}
		return tw.Flush()
	},
}

// sharedSettingsLine says whether the peers hold the settings every
// replica must share as the replica asked does.
func sharedSettingsLine(st api.Status) string {
	switch {
	case !st.SettingsCompared:
		return "not compared (gossip is off: bind.gossip is not set)"
	case len(st.SettingsDiffer) == 0:
		return "the same on every replica heard"
	}
	var differ []string
	for _, d := range st.SettingsDiffer {
		differ = append(differ, fmt.Sprintf("replica %d's %s", d.Replica, strings.Join(d.Settings, ", ")))
	}
	return "DIFFER: " + strings.Join(differ, "; ") + " (only the leader backs up and launches, so where depends on who leads: give every replica the same)"
}

func runSnapshot(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, operatorUsage)
		return exitUsage
	}
	switch args[0] {
	case "save":
		return runAPICommand("paxcron operator snapshot save", operatorSnapshotSave, args[1:], stdout, stderr, getenv)
	case "inspect":
		return runSnapshotInspect(args[1:], stdout, stderr)
	case "restore":
		return runSnapshotRestore(args[1:], stdout, stderr)
	case "list":
		return runSnapshotList(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, operatorUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "paxcron operator snapshot: unknown subcommand %q (save, inspect, list, restore)\n", args[0])
	return exitUsage
}

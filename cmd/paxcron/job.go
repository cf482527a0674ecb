package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"paxcron/cron/cronfile"
	"paxcron/cron/schedule"
)

const jobUsage = `Usage: paxcron job <subcommand> [arguments]

Subcommands:
  run        submit a file of cron jobs to the cluster
  status     list the jobs, or show one with its next and recent launches
  history    list a job's recent launches and their outcomes
  pause      record a job's launches as skipped until it is resumed
  resume     resume a paused job
  trigger    launch a job now
  backfill   launch again a job's slots that did not run
  delete     delete a job
  validate   check a file of cron jobs and show when each would run (no server needed)
  takeover   turn a Nomad periodic job into cron jobs (and, with -register, replace it in Nomad)

The commands that call a replica take -address (PAXCRON_ADDR, default
http://127.0.0.1:4750), -token (PAXCRON_TOKEN) and -json. Given every
replica, comma-separated, a command calls the leader and goes on through
another replica when one is down.

Run "paxcron job <subcommand> -h" for a subcommand's flags.
`

func runJob(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, jobUsage)
		return 2
	}
	switch args[0] {
	case "validate":
		return runJobValidate(args[1:], stdout, stderr, now)
	case "takeover":
		return runJobTakeover(args[1:], stdout, stderr)
	case "run", "status", "history", "pause", "resume", "trigger", "backfill", "delete":
		return runAPICommand("paxcron job "+args[0], jobAPICommands[args[0]], args[1:], stdout, stderr, os.Getenv)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, jobUsage)
		return 0
	}
	fmt.Fprintf(stderr, "paxcron job: unknown subcommand %q\n\n%s", args[0], jobUsage)
	return 2
}

const jobValidateUsage = `Usage: paxcron job validate [flags] FILE.hcl

Reads the cron jobs in FILE.hcl (cron "<name>" { ... } blocks), checks each
as the cluster will, and prints each job's resolved schedule and next launch
times. Nothing is submitted. Problems are listed with FILE:LINE,COLUMN.
The file must be UTF-8 in Unicode normal form C (NFC): HCL would change
text in another form (a decomposed "é", say) to NFC on its way to Nomad,
so such a file is refused at its first character not in NFC, as is a
file() whose content is not NFC.

  paxcron job validate -n 3 jobs.hcl

Exit status: 0 every job is valid, 1 the file has problems, 2 bad usage.

Flags:
`

type jobValidateOutput struct {
	Name        string            `json:"name"`
	Schedule    string            `json:"schedule"`
	Resolved    string            `json:"resolved"`
	TimeZone    string            `json:"time_zone"`
	Concurrency string            `json:"concurrency"`
	Catchup     string            `json:"catchup_window"`
	Delivery    string            `json:"delivery"`
	NomadJob    string            `json:"nomad_job"`
	Namespace   string            `json:"namespace,omitempty"`
	Region      string            `json:"region,omitempty"`
	Meta        map[string]string `json:"meta,omitempty"`
	Payload     int               `json:"payload_bytes"`
	Next        []string          `json:"next"`
}

func runJobValidate(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	fs := flag.NewFlagSet("paxcron job validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, jobValidateUsage)
		fs.PrintDefaults()
	}
	n := fs.Int("n", 3, fmt.Sprintf("how many launches to list per job (0-%d)", maxLaunches))
	asJSON := fs.Bool("json", false, "print JSON for scripts")
	words, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(words) != 1 {
		fmt.Fprintln(stderr, "paxcron job validate: want exactly one FILE")
		fs.Usage()
		return 2
	}
	if *n < 0 || *n > maxLaunches {
		fmt.Fprintf(stderr, "paxcron job validate: -n must be 0 to %d, not %d\n", maxLaunches, *n)
		return 2
	}
	crons, err := cronfile.ParseFile(words[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	out := make([]jobValidateOutput, 0, len(crons))
	at := now()
	never := false
	for _, c := range crons {
		sched, err := schedule.Parse(c.Spec.Schedule, schedule.Options{JobName: c.Name, TimeZone: c.Spec.TimeZone})
		if err != nil { // cronfile checked it: a bug
			panic(fmt.Sprintf("paxcron: %s: schedule accepted, then refused: %v", c.Name, err))
		}
		// The cluster refuses a schedule it cannot follow
		// (firesSoonEnough in internal/server), so this check does too:
		// it passed such a file, which `job run` then failed (found in
		// review).
		if err := sched.Followable(at); err != nil {
			fmt.Fprintf(stderr, "%s:%d,%d: cron %q: schedule %q %v: the cluster refuses it\n",
				c.Range.Filename, c.Range.Start.Line, c.Range.Start.Column, c.Name, c.Spec.Schedule, err)
			never = true
			continue
		}
		o := jobValidateOutput{
			Name: c.Name, Schedule: c.Spec.Schedule, Resolved: c.Resolved, TimeZone: sched.Location().String(),
			Concurrency: string(c.Spec.Concurrency), Catchup: c.Spec.CatchupWindow.String(),
			NomadJob: c.Spec.NomadJob, Namespace: c.Spec.Namespace, Region: c.Spec.Region, Meta: c.Spec.Meta,
			Payload: len(c.Spec.Payload), Next: []string{}, Delivery: "at-most-once",
		}
		if c.Spec.AtLeastOnce {
			o.Delivery = "at-least-once"
		}
		if o.Concurrency == "" {
			o.Concurrency = "allow"
		}
		if c.Spec.CatchupWindow == 0 {
			o.Catchup = "5m0s"
		}
		for t := at; len(o.Next) < *n; {
			next, ok := sched.Next(t)
			if !ok {
				break
			}
			o.Next = append(o.Next, next.Format(time.RFC3339))
			t = next
		}
		out = append(out, o)
	}
	if never {
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "paxcron job validate: %v\n", err)
			return 1
		}
		return 0
	}
	for i, o := range out {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s: %s  (%s), dispatches %s", o.Name, o.Resolved, o.TimeZone, o.NomadJob)
		if o.Namespace != "" {
			fmt.Fprintf(stdout, " in namespace %s", o.Namespace)
		}
		if o.Region != "" {
			fmt.Fprintf(stdout, " in region %s", o.Region)
		}
		fmt.Fprintf(stdout, "; concurrency %s, catch-up window %s, %s\n", o.Concurrency, o.Catchup, o.Delivery)
		for _, t := range o.Next {
			fmt.Fprintln(stdout, "  "+t)
		}
	}
	return 0
}

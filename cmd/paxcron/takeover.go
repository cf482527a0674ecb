package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"paxcron/cron/cronfile"
	"paxcron/nomad"
	"paxcron/nomad/migrate"
)

const jobTakeoverUsage = `Usage: paxcron job takeover [flags] JOBSPEC.nomad.hcl

Takes over a Nomad periodic job: reads the jobspec through Nomad's own parser
(the agent at NOMAD_ADDR, with the usual NOMAD_* settings), and prints the
cron jobs that replace its periodic block, in paxcron's HCL: one per cron
expression, in the block's time zone, prohibit_overlap as the forbid policy.
A block is refused where the takeover would launch differently: two crons
meeting at one instant (Nomad launches once there), prohibit_overlap with
several crons (Nomad forbids overlap across all of them, a cron job only
with its own children), or a year other than *.
With -register it also replaces the periodic job in Nomad by the same job made
parameterized (accepting paxcron's meta keys): Nomad cannot make a periodic job
non-periodic in place, so the periodic job is purged first; children already
launched keep running. Submit the printed cron jobs after that.

  paxcron job takeover report.nomad.hcl > report.cron.hcl
  paxcron job takeover -register report.nomad.hcl

Exit status: 0 success, 1 the jobspec cannot be taken over or Nomad failed,
2 bad usage.

Flags:
`

func runJobTakeover(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paxcron job takeover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, jobTakeoverUsage)
		fs.PrintDefaults()
	}
	register := fs.Bool("register", false, "replace the periodic job in Nomad by its parameterized form")
	words, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(words) != 1 {
		fmt.Fprintln(stderr, "paxcron job takeover: want exactly one JOBSPEC file")
		fs.Usage()
		return 2
	}
	src, err := os.ReadFile(words[0])
	if err != nil {
		fmt.Fprintf(stderr, "paxcron job takeover: %v\n", err)
		return 1
	}
	cfg, err := nomad.ConfigFromEnv()
	if err != nil {
		fmt.Fprintf(stderr, "paxcron job takeover: %v\n", err)
		return 1
	}
	client, err := nomad.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "paxcron job takeover: %v\n", err)
		return 1
	}
	defer client.Close()
	t, err := migrate.Parse(client.API().Jobs(), words[0], src, migrate.Scope{Namespace: cfg.Namespace, Region: cfg.Region})
	if err != nil {
		fmt.Fprintf(stderr, "paxcron job takeover: %v\n", err)
		return 1
	}
	out, err := cronfile.Format(t.Crons)
	if err != nil {
		fmt.Fprintf(stderr, "paxcron job takeover: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "# Cron jobs taking over the periodic block of Nomad job %q.\n", *t.Parent.ID)
	if t.Disabled {
		fmt.Fprintln(stdout, "# Its periodic block was disabled: pause these jobs once submitted.")
	}
	if !*register {
		fmt.Fprintf(stdout, "# Nomad still runs it as a periodic job: run again with -register to replace it.\n")
	}
	stdout.Write(out)
	if *register {
		if err := migrate.Register(client.API().Jobs(), t); err != nil {
			fmt.Fprintf(stderr, "paxcron job takeover: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "paxcron job takeover: Nomad job %q is now a parameterized job; submit the cron jobs above\n", *t.Parent.ID)
	}
	return 0
}

// Command paxcron-chaos runs paxcron's real-cluster chaos test (make
// chaos): three replicas in containers built FROM scratch, a real Nomad
// agent on the host, fifty cron jobs firing every few seconds, a seeded
// schedule of faults, and at the end an independent check of Nomad's job
// list against paxcron's records. The work is internal/chaos's; this
// command parses the flags, skips cleanly where no Docker engine answers,
// and turns the verdict into the exit status.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"paxcron/internal/chaos"
)

const usage = `Usage: paxcron-chaos [flags]

Starts three paxcron replicas as containers (an image FROM scratch holding
a static paxcron built from this module) on two docker networks of their
own, and a Nomad agent (server and client, with a data folder) on the
host; submits -jobs cron jobs firing every 5-30 s with the allow, forbid
and replace policies; runs a seeded fault schedule for -duration (SIGKILL
of the leader and of followers, SIGSTOP of the leader beyond its lease,
partitions, a clock jump, a lost data folder, Nomad restarted); waits at
most -drain for the launches due to conclude; then checks Nomad's job list
and the replicas' launch records: no slot with two children, every slot
with a child or a recorded skip, children on time outside the fault
windows. Everything it creates is named paxcron-chaos-* and removed at the
end (leftovers of an earlier run at the start).

-recheck DIR judges a finished run again from the folder it kept (a run
with a violation keeps it): its run.json, the replicas' outputs, and
Nomad's data folder, which a Nomad agent on loopback serves again. It
needs no Docker engine.

The nomad binary is NOMAD_BIN, else nomad on PATH (make chaos passes the
one make nomad builds). Without a Docker engine it says so and exits 0
(skipped), unless -require-docker.

Exit status: 0 passed (or skipped), 1 a violation or a failure, 2 bad
usage.

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paxcron-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	o := chaos.Options{Out: stdout}
	var seed int64
	var requireDocker bool
	var recheck string
	fs.DurationVar(&o.Duration, "duration", 5*time.Minute, "how long the fault schedule runs")
	fs.Int64Var(&seed, "seed", 0, "the fault schedule's seed (0: from the clock; the schedule prints it)")
	fs.IntVar(&o.Jobs, "jobs", 50, "cron jobs in the workload (at least 4)")
	fs.DurationVar(&o.LateBound, "late", 5*time.Second, "a child must be submitted within this of its slot outside the fault windows")
	fs.DurationVar(&o.EarlyBound, "early", time.Second, "and no earlier than this before it")
	fs.DurationVar(&o.Drain, "drain", 90*time.Second, "the longest wait after the schedule for the launches due to conclude")
	fs.StringVar(&o.Dir, "dir", filepath.Join(os.TempDir(), "paxcron-chaos-run"), "the run's files (emptied first; kept after a failure)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the run's files after a passed run too")
	fs.StringVar(&o.ModuleDir, "module", ".", "the paxcron module the replicas' binary is built from")
	fs.BoolVar(&requireDocker, "require-docker", false, "fail, rather than skip, where no Docker engine answers")
	fs.StringVar(&recheck, "recheck", "", "judge the finished run kept in this folder again (no run)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "paxcron-chaos: unexpected argument %q\n", fs.Arg(0))
		return 2
	case o.Duration < chaos.MinDuration:
		fmt.Fprintf(stderr, "paxcron-chaos: -duration %v: want at least %v\n", o.Duration, chaos.MinDuration)
		return 2
	case o.Jobs < 4:
		fmt.Fprintf(stderr, "paxcron-chaos: -jobs %d: want at least 4\n", o.Jobs)
		return 2
	case o.LateBound <= 0 || o.EarlyBound < 0 || o.Drain <= 0:
		fmt.Fprintln(stderr, "paxcron-chaos: -late and -drain must be positive, -early not negative")
		return 2
	}
	o.Seed = uint64(seed)
	if seed == 0 {
		o.Seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	var err error
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		fmt.Fprintf(stderr, "paxcron-chaos: %v\n", err)
		return 2
	}
	if o.ModuleDir, err = filepath.Abs(o.ModuleDir); err != nil {
		fmt.Fprintf(stderr, "paxcron-chaos: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if recheck != "" {
		rep, err := chaos.Recheck(ctx, recheck, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "paxcron-chaos: %v\n", err)
			return 1
		}
		return verdictCode(rep)
	}
	began := time.Now()
	rep, err := chaos.Run(ctx, o)
	if errors.Is(err, chaos.ErrNoDocker) {
		if requireDocker {
			fmt.Fprintf(stderr, "paxcron-chaos: %v (-require-docker)\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "paxcron-chaos: %v\nSKIPPED: the chaos test needs a Docker engine (pass -require-docker to fail instead)\n", err)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "paxcron-chaos: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "(the whole run took %v)\n", time.Since(began).Round(time.Second))
	return verdictCode(rep)
}

func verdictCode(rep *chaos.Report) int {
	if rep.Violations() > 0 || rep.Slots == 0 {
		return 1
	}
	return 0
}

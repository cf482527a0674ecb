// Command paxcron is paxcron's binary: the replica server (`paxcron
// server`), the operator CLI that talks to its API (`paxcron job ...`,
// `paxcron operator ...`), and offline checks of schedules and files of
// cron jobs (`paxcron schedule`, `paxcron job validate`).
package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, time.Now))
}

const usage = `Usage: paxcron <command> [arguments]

Commands:
  job        submit, inspect and operate cron jobs (run, status, history, pause, ...)
  operator   look after the cluster (status, backup, snapshot save, inspect, list, restore)
  server     run one replica
  schedule   show how a cron expression resolves and when it next fires
  version    print the version

Run "paxcron <command> -h" for a command's flags.
`

// run is main without the process: it returns the exit code (0 success,
// 1 the request failed, 2 bad usage).
func run(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "schedule":
		return runSchedule(args[1:], stdout, stderr, now)
	case "job":
		return runJob(args[1:], stdout, stderr, now)
	case "server":
		return runServer(args[1:], stdout, stderr, os.Getenv)
	case "operator":
		return runOperator(args[1:], stdout, stderr, os.Getenv)
	case "version":
		fmt.Fprintf(stdout, "paxcron %s\n", version)
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "paxcron: unknown command %q\n\n%s", args[0], usage)
	return 2
}

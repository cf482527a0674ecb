package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"paxcron/cron/schedule"
)

const scheduleUsage = `Usage: paxcron schedule [flags] EXPR

Shows how EXPR resolves (with ? and H replaced by the values hashed from the
job's name) and prints its next launch times, RFC 3339 with the zone's
offset, one per line. Quote EXPR so the shell leaves * and ? alone:

  paxcron schedule -job nightly-report -tz Europe/Berlin '0 ? * * *'
  paxcron schedule -n 3 -from 2026-03-29T00:00:00Z -tz Europe/Berlin '30 2 * * *'

Exit status: 0 success, 1 an invalid expression or zone (the message names
the field) or an expression with no launch within 10 years, 2 bad usage.

Flags:
`

// maxLaunches bounds -n.
const maxLaunches = 1000

type scheduleOutput struct {
	Expression string   `json:"expression"`
	Resolved   string   `json:"resolved"`
	TimeZone   string   `json:"time_zone"`
	Job        string   `json:"job,omitempty"`
	Next       []string `json:"next"`
}

func runSchedule(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	fs := flag.NewFlagSet("paxcron schedule", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, scheduleUsage)
		fs.PrintDefaults()
	}
	tz := fs.String("tz", "UTC", "IANA time zone the schedule runs in")
	job := fs.String("job", "", "the cron job's name, which ? and H hash")
	from := fs.String("from", "", "list launches after this instant, RFC 3339 (default now)")
	n := fs.Int("n", 5, fmt.Sprintf("how many launches to list (1-%d)", maxLaunches))
	asJSON := fs.Bool("json", false, "print JSON for scripts")
	words, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(words) == 0 {
		fmt.Fprintln(stderr, "paxcron schedule: missing EXPR")
		fs.Usage()
		return 2
	}
	if *n < 1 || *n > maxLaunches {
		fmt.Fprintf(stderr, "paxcron schedule: -n must be 1 to %d, not %d\n", maxLaunches, *n)
		return 2
	}
	after := now()
	if *from != "" {
		if after, err = time.Parse(time.RFC3339, *from); err != nil {
			fmt.Fprintf(stderr, "paxcron schedule: -from %q is not RFC 3339 (like 2026-01-02T15:04:05Z): %v\n", *from, err)
			return 2
		}
	}
	expr := strings.Join(words, " ")
	sched, err := schedule.Parse(expr, schedule.Options{JobName: *job, TimeZone: *tz})
	if err != nil {
		fmt.Fprintf(stderr, "paxcron %v\n", err) // "schedule: hour: ..."
		return 1
	}
	out := scheduleOutput{Expression: expr, Resolved: sched.String(), TimeZone: sched.Location().String(), Job: *job, Next: []string{}}
	for t := after; len(out.Next) < *n; {
		next, ok := sched.Next(t)
		if !ok {
			break
		}
		out.Next = append(out.Next, next.Format(time.RFC3339))
		t = next
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "paxcron schedule: %v\n", err)
			return 1
		}
	} else {
		fmt.Fprintf(stdout, "# %s  (%s)\n", out.Resolved, out.TimeZone)
		for _, t := range out.Next {
			fmt.Fprintln(stdout, t)
		}
	}
	if len(out.Next) == 0 {
		fmt.Fprintf(stderr, "paxcron schedule: %q never fires within %d years of %s\n", expr, schedule.SearchYears, after.Format(time.RFC3339))
		return 1
	}
	return 0
}

// parseInterleaved parses flags wherever they stand among the words, so
// that `paxcron schedule '0 * * * *' -n 3` works as well as flags first.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return words, nil
		}
		words = append(words, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

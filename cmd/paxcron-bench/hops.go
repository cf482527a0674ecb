package main

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"paxcron/internal/hoptrace"
	"paxcron/paxos"
)

const hopsUsage = `Usage: paxcron-bench hops DIR

Lines up the hop traces in DIR (one PID.hops file a process, written by
binaries built with -tags hoptrace and run with PAXCRON_HOPTRACE=DIR) write
by write: for each point a write passes in the client, the leader and the
followers, how long after the client's call it was reached (median, 10th
and 90th percentiles over the writes, and in how many writes it was seen).
Each write runs from a client's call to the return of that call, so the
trace must come from one closed-loop client (-clients 1). The first tenth
of the writes (the warm-up) is left out. For example:

  go build -tags hoptrace -o /tmp/pax-hops ./cmd/paxcron
  go build -tags hoptrace -o /tmp/bench-hops ./cmd/paxcron-bench
  PAXCRON_HOPTRACE=/tmp/hops /tmp/bench-hops etcd -systems paxcron-api \
    -clients 1 -reps 1 -duration 20s -paxcron-bin /tmp/pax-hops -out /tmp/hops-run
  paxcron-bench hops /tmp/hops
`

// hopMark is one recorded mark.
type hopMark struct {
	at    int64
	point hoptrace.Point
	arg   uint32
}

// hopProcess is one process's trace.
type hopProcess struct {
	replica string // the -replica-id, empty for the client
	leads   bool   // the replica took proposals
	marks   []hopMark
}

// name is how the report names the process.
func (p *hopProcess) name() string {
	switch {
	case p.replica == "":
		return "client"
	case p.leads:
		return "leader " + p.replica
	}
	return "follower " + p.replica
}

// hopRow is one point of one process, over the writes.
type hopRow struct {
	process       string
	point         string
	p10, p50, p90 time.Duration
	seen          int
}

func runHops(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, hopsUsage)
		if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	procs, err := readHopDir(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "paxcron-bench hops: %v\n", err)
		return 1
	}
	rows, writes, total, err := lineUpHops(procs)
	if err != nil {
		fmt.Fprintf(stderr, "paxcron-bench hops: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%d writes, median %v from call to return\n\n", writes, total)
	fmt.Fprintf(stdout, "%10s %10s %10s %6s  %-10s %s\n", "p50 µs", "p10 µs", "p90 µs", "seen", "process", "point")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%10.1f %10.1f %10.1f %5d%%  %-10s %s\n", us(r.p50), us(r.p10), us(r.p90), 100*r.seen/writes, r.process, r.point)
	}
	return 0
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func readHopDir(dir string) ([]*hopProcess, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.hops"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no .hops files in %s (were the binaries built with -tags hoptrace, and run with PAXCRON_HOPTRACE=%s?)", dir, dir)
	}
	var procs []*hopProcess
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		p, err := readHops(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// readHops reads one file: the process's arguments (quoted), then one
// "nanoseconds point argument" line a mark.
func readHops(r io.Reader) (*hopProcess, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		return nil, errors.New("empty trace")
	}
	p := &hopProcess{replica: replicaID(sc.Text())}
	for line := 2; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want 3 fields, have %d", line, len(f))
		}
		at, err1 := strconv.ParseInt(f[0], 10, 64)
		point, err2 := strconv.ParseUint(f[1], 10, 16)
		arg, err3 := strconv.ParseUint(f[2], 10, 32)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		p.marks = append(p.marks, hopMark{at: at, point: hoptrace.Point(point), arg: uint32(arg)})
		p.leads = p.leads || hoptrace.Point(point) == hoptrace.NodeTake
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(p.marks) == 0 {
		return nil, errors.New("no marks")
	}
	slices.SortStableFunc(p.marks, func(a, b hopMark) int { return cmp.Compare(a.at, b.at) })
	return p, nil
}

// replicaID is the -replica-id in a trace's first line (the process's
// arguments, quoted), or "" for a process that is not a replica.
func replicaID(args string) string {
	for _, flag := range []string{`"-replica-id" "`, `"--replica-id" "`, `"-replica-id=`, `"--replica-id=`} {
		if _, after, ok := strings.Cut(args, flag); ok {
			id, _, _ := strings.Cut(after, `"`)
			return id
		}
	}
	return ""
}

// lineUpHops finds the writes in the client's trace and, for every point
// of every process, how long after each write's call it was first
// reached before the call returned.
func lineUpHops(procs []*hopProcess) ([]hopRow, int, time.Duration, error) {
	var client *hopProcess
	from, to := int64(0), int64(1<<63-1)
	for _, p := range procs {
		if p.replica == "" {
			if client != nil {
				return nil, 0, 0, errors.New("two client traces: trace one client process")
			}
			client = p
		}
		from, to = max(from, p.marks[0].at), min(to, p.marks[len(p.marks)-1].at)
	}
	if client == nil {
		return nil, 0, 0, errors.New("no client trace")
	}
	type span struct{ call, done int64 }
	var writes []span
	var call int64 = -1
	for _, m := range client.marks {
		switch m.point {
		case hoptrace.ClientCall:
			if call >= 0 {
				return nil, 0, 0, errors.New("a call began before the one before it returned: trace a single closed-loop client (-clients 1)")
			}
			call = m.at
		case hoptrace.ClientDone:
			if call >= 0 && call >= from && m.at <= to {
				writes = append(writes, span{call, m.at})
			}
			call = -1
		}
	}
	writes = writes[len(writes)/10:]
	if len(writes) == 0 {
		return nil, 0, 0, errors.New("no write lies within every process's trace")
	}
	type key struct {
		process string
		point   hoptrace.Point
		arg     uint32
	}
	offsets := map[key][]time.Duration{}
	for _, p := range procs {
		i := 0
		for _, w := range writes {
			for i < len(p.marks) && p.marks[i].at < w.call {
				i++
			}
			seen := map[key]bool{}
			for j := i; j < len(p.marks) && p.marks[j].at <= w.done; j++ {
				m := p.marks[j]
				k := key{process: p.name(), point: m.point}
				switch m.point {
				case hoptrace.TransportSend, hoptrace.TransportReceived, hoptrace.NodeStep:
					k.arg = m.arg
				}
				if !seen[k] {
					seen[k] = true
					offsets[k] = append(offsets[k], time.Duration(m.at-w.call))
				}
			}
		}
	}
	var rows []hopRow
	for k, ds := range offsets {
		if 2*len(ds) < len(writes) {
			continue // not on most writes' path (heartbeats and the like)
		}
		slices.Sort(ds)
		name := k.point.String()
		switch k.point {
		case hoptrace.TransportSend:
			name += fmt.Sprintf(" %s to %d", paxos.MessageType(k.arg>>8), k.arg&0xff)
		case hoptrace.TransportReceived, hoptrace.NodeStep:
			name += fmt.Sprintf(" %s from %d", paxos.MessageType(k.arg>>8), k.arg&0xff)
		}
		rows = append(rows, hopRow{process: k.process, point: name, seen: len(ds),
			p10: percentile(ds, 0.1), p50: percentile(ds, 0.5), p90: percentile(ds, 0.9)})
	}
	slices.SortFunc(rows, func(a, b hopRow) int {
		if a.p50 != b.p50 {
			return int(a.p50 - b.p50)
		}
		return strings.Compare(a.process+a.point, b.process+b.point)
	})
	totals := make([]time.Duration, len(writes))
	for i, w := range writes {
		totals[i] = time.Duration(w.done - w.call)
	}
	slices.Sort(totals)
	return rows, len(writes), percentile(totals, 0.5), nil
}

package scalebench

import (
	"fmt"
	"strings"
	"time"

	"paxcron/internal/benchplot"
	"paxcron/paxos"
)

// ReportMeta says where and how a run was made, for the report's header.
type ReportMeta struct {
	Command, Machine, Commit, GoVersion string
	Date                                time.Time
	LoadBefore, LoadAfter               string
}

const mib = 1 << 20

// Markdown is the run's report: its setup, the figures, and the windows
// the plot draws.
func Markdown(res *Result, meta ReportMeta) string {
	var b strings.Builder
	cfg := res.Config
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Scale: %s jobs on a three-replica cluster (issue 6)\n\n", thousands(cfg.Jobs))
	p("Measured on %s, %s, commit %s, %s UTC; load average %s before, %s after.\n\n",
		meta.Machine, meta.GoVersion, meta.Commit, meta.Date.UTC().Format("2006-01-02 15:04"), meta.LoadBefore, meta.LoadAfter)
	p("```\n%s\n```\n\n", meta.Command)
	p("Setup (`internal/scalebench`): three `internal/node` replicas in one process over an in-process transport, each on its own Pebble store on the disk (synced writes, 50 ms tick, `paxos.DefaultTiming`, `replica.DefaultSnapshotPolicy`, launcher defaults). ")
	p("%s jobs: %s due every minute at a second hashed from the name (`%s`), which make the flow of %s launches a minute; the other %s due once a year at a hashed minute (`%s`), about %.1f launches a minute more. ",
		thousands(cfg.Jobs), thousands(cfg.MinutelyJobs), minutelySchedule, thousands(cfg.MinutelyJobs), thousands(cfg.Jobs-cfg.MinutelyJobs), yearlySchedule, float64(cfg.Jobs-cfg.MinutelyJobs)/525_600)
	p("Each job has a payload and two meta entries. The jobs are built with the state's own API (`state.ApplyCommand`), and the snapshot is written into each replica's empty store as `paxcron operator snapshot restore` does; the replicas then start from their disks. ")
	p("Nomad is an in-process fake that answers every call after %v (not the bottleneck; the real dev agent cannot make 167 children a second on this machine beside three replicas). ", cfg.DispatchLatency)
	p("The steady state is measured for %v after %v of warm-up (the slots that came due while the replicas started are launched at once).\n\n", cfg.Steady, cfg.Warmup)

	s := res.Steady
	perJob := func(bytes int64) string { return fmt.Sprintf("%.0f B/job", float64(bytes)/float64(cfg.Jobs)) }
	heap3 := int64(res.Memory.Heap) - int64(res.Memory.BaselineHeap)
	rss3 := int64(res.Memory.RSS) - int64(res.Memory.BaselineRSS)
	p("| figure | value | how |\n|---|---|---|\n")
	p("| **memory per replica**, one follower | **%.0f MiB heap** (%s), %.0f MiB RSS | live heap and resident set given back when a follower was stopped and its store closed (GC, then `debug.FreeOSMemory`) |\n",
		float64(res.Memory.FollowerHeap)/mib, perJob(res.Memory.FollowerHeap), float64(res.Memory.FollowerRSS)/mib)
	p("| memory per replica, process / 3 | %.0f MiB heap (%s), %.0f MiB RSS | the process's live heap and RSS with three replicas, less the process before the build, divided by 3 (the leader also holds its schedule heap and the fake Nomad's children) |\n",
		float64(heap3)/3/mib, perJob(heap3/3), float64(rss3)/3/mib)
	p("| RSS while running, process / 3 | %.0f MiB | the highest RSS sampled at the end of each window, without forcing a GC (GOGC=100 lets the heap grow to twice the live heap) |\n",
		float64(s.MaxRSSBytes)/3/mib)
	p("| **snapshot size** | **%.1f MiB** (%s bytes) | the leader's snapshot, as stored; it decodes to %s jobs |\n", float64(res.Snap.Bytes)/mib, thousands(res.Snap.Bytes), thousands(res.Snap.Jobs))
	p("| **snapshot time** | **%v** until durable; %v on the loop | `TakeSnapshot` on the leader during the flow: frozen on its loop, encoded and synced by its writer goroutine |\n",
		res.Snap.ToDurable.Round(time.Millisecond), res.Snap.Freeze.Round(time.Millisecond))
	p("| leader's store on disk after it | %.0f MiB | every file under the store's folder (WAL, tables; the old snapshot until a compaction drops it) |\n", float64(res.Snap.StoreBytes)/mib)
	r := res.Restart
	p("| **restart of a follower** | **%v** until caught up | replica %d stopped and opened again from its disk (snapshot at %s and %s log entries after it): store open %v, `node.New` (snapshot restored) %v, then until it applied what the leader had chosen; %s jobs |\n",
		r.CaughtUp.Round(time.Millisecond), r.ID, thousands(r.SnapshotIndex), thousands(r.LogEntries), r.Open.Store.Round(time.Millisecond), r.Open.Node.Round(time.Millisecond), thousands(r.Jobs))
	rb := res.Rebuild
	p("| **rebuild of a follower** | **%v** until caught up; %d leader changes | replica %d stopped, its store deleted, started empty as a rebuilding learner: the leader read its snapshot (off its loop) and streamed it in chunks; %s jobs. Loop turns of %v or more meanwhile: %s |\n",
		rb.CaughtUp.Round(time.Millisecond), rb.LeaderChanges, rb.ID, thousands(rb.Jobs), slowTurn, orNone(rb.SlowTurns))
	var opens []string
	for _, o := range res.Start.Open {
		opens = append(opens, (o.Store + o.Node).Round(time.Millisecond).String())
	}
	p("| cold start of the cluster | %s; a launcher led %v later | the three replicas opened from their seeded disks at once, on %s |\n",
		strings.Join(opens, ", "), res.Start.ToLaunching.Round(time.Millisecond), "the same cores")
	p("| **leader CPU** | **%.3f cores** | CPU seconds per wall second of the leader's loop and writer goroutines: profile samples labelled with its ID (%s samples of 10 ms) |\n",
		s.LeaderCores, thousands(int(s.LeaderCores*s.Wall.Seconds()*100+0.5)))
	p("| leader CPU with its share of the rest | %.3f cores | adds the unlabelled CPU (GC workers, Pebble's background work, timers) in proportion to the leader's share of the labelled CPU |\n", s.LeaderAttributedCores)
	p("| leader CPU, median window | %.3f cores | the median of the %d windows' leader CPU: the launches' cost between GC cycles |\n", s.LeaderMedianCores, len(s.Windows))
	p("| each follower's CPU | %.3f cores | the same for each follower (mean of two) |\n", s.FollowerCores)
	p("| garbage collector | %.3f cores, of which %.3f in assists; %d cycles | runtime/metrics' estimate for the whole process (three replicas' heaps); assists run on the allocating goroutines, so they are inside the replicas' figures |\n",
		s.GCCores, s.GCAssistCores, s.GCCycles)
	p("| unlabelled CPU; whole process | %.3f; %.3f cores | the profile's unlabelled samples; getrusage over the same windows |\n", s.UnlabelledCores, s.ProcessCores)
	p("| **launches per minute** | **%s** (%s scheduled) | LaunchFinished applied by the leader during the steady state, per minute |\n", thousands(int(s.LaunchesPerMinute+0.5)), thousands(cfg.MinutelyJobs))
	p("| **lateness** p50 / p99 / max | **%v / %v** / %v | %s dispatch calls in the steady state: when the fake Nomad's Submit ran, minus the scheduled time |\n",
		s.LateP50.Round(time.Millisecond), s.LateP99.Round(time.Millisecond), s.LateMax.Round(time.Millisecond), thousands(s.Dispatches))
	p("| longest loop turn | leader %v, followers %v | `Status.LongestTurn` since start, at the end of the steady state |\n", s.LongestTurnLeader.Round(time.Millisecond), s.LongestTurnFollows.Round(time.Millisecond))
	p("| leader changes; repeated dispatches; other calls | %d; %d; %d | windows ending with another launcher; dispatches of a token already dispatched, and lookups, over the run |\n\n", s.LeaderChanges, s.DispatchRepeats, s.OtherCalls)
	p("Building the state took %v, encoding it %v (%.1f MiB), writing it into the three stores %v.\n\n",
		res.Build.State.Round(time.Millisecond), res.Build.Encode.Round(time.Millisecond), float64(res.Build.SnapshotBytes)/mib, res.Build.Seed.Round(time.Millisecond))

	p("Leadership, from the replicas' start (polled every %v), and the loop turns and synced writes of %v or more (at most %d):\n\n", monitorEvery, slowTurn, maxSlowTurns)
	for _, e := range res.Events {
		p("- %.2f s: %s\n", e.At.Seconds(), e.What)
	}
	p("\n")
	p("Windows of the steady state (the plot, `scale-cpu.png`); CPU in milliseconds per second:\n\n")
	p("| from (s) | leader CPU | followers' CPU | unlabelled | process | GC (assists) | GC cycles | launches/s | heap (MiB) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range s.Windows {
		var follow time.Duration
		for id := range paxos.ReplicaID(replicas) {
			if id+1 != res.Leader {
				follow += w.Replica[id+1]
			}
		}
		sec := w.Wall.Seconds()
		p("| %.0f | %.0f | %.0f | %.0f | %.0f | %.0f (%.0f) | %d | %.1f | %.0f |\n", w.Start.Seconds(),
			ms(w.Replica[res.Leader])/sec, ms(follow)/sec, ms(w.Unlabelled)/sec, ms(w.Process)/sec,
			ms(w.GC)/sec, ms(w.GCAssist)/sec, w.GCCycles, float64(w.Launches)/sec, float64(w.HeapBytes)/mib)
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Chart is the leader's CPU and the launches per second over the steady
// state, one point per window (at its end).
func Chart(res *Result) benchplot.Chart {
	var x, cpu, launches, follow []float64
	for _, w := range res.Steady.Windows {
		sec := w.Wall.Seconds()
		x = append(x, (w.Start + w.Wall).Seconds())
		cpu = append(cpu, ms(w.Replica[res.Leader])/sec)
		launches = append(launches, float64(w.Launches)/sec)
		var f time.Duration
		for id := range paxos.ReplicaID(replicas) {
			if id+1 != res.Leader {
				f += w.Replica[id+1]
			}
		}
		follow = append(follow, ms(f)/sec/(replicas-1))
	}
	// Launches (about 167 a second) and the leader's CPU (milliseconds a
	// second) differ by an order of magnitude: a logarithmic axis shows
	// both, unless a window has no sample of one of them.
	logY := true
	for i := range x {
		logY = logY && cpu[i] > 0 && launches[i] > 0 && follow[i] > 0
	}
	return benchplot.Chart{
		LogY:   logY,
		Title:  fmt.Sprintf("%s jobs, %s launches/min: leader CPU and launches", thousands(res.Config.Jobs), thousands(res.Config.MinutelyJobs)),
		XLabel: "seconds into the steady state",
		YLabel: "per second",
		Series: []benchplot.Series{
			{Name: "leader CPU (ms)", X: x, Y: cpu},
			{Name: "launches", X: x, Y: launches},
			{Name: "a follower's CPU (ms)", X: x, Y: follow, Dashed: true},
		},
	}
}

// thousands formats n with commas.
func thousands[T ~int | ~int64 | ~uint64](n T) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// orNone joins a list for a table cell, or says there was none.
func orNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, "; ")
}

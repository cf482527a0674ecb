// Command paxcron-demo shows paxcron's main job on one machine, with
// nothing to set up: it starts a Nomad dev agent, registers a
// parameterized job in it, runs three paxcron replicas in this process
// (each on its own Pebble store, with the real Paxos core, cron state,
// launcher and Nomad dispatcher), submits a cron job that fires every few
// seconds, prints each launch as the cluster records it, kills the leader
// half-way through, and at the end checks Nomad's own job list: one child
// per scheduled slot, none doubled, none missing. It exits 1 if not.
//
// Replicas talk over in-process channels here; `paxcron server` runs them
// as processes over the network.
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
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/cronfile"
	"paxcron/cron/launcher"
	"paxcron/cron/schedule"
	"paxcron/cron/state"
	"paxcron/internal/localcluster"
	"paxcron/nomad"
	"paxcron/nomad/nomadtest"
	"paxcron/paxos"
)

const usage = `Usage: paxcron-demo [flags]

Starts a Nomad dev agent and three paxcron replicas on this machine, submits
a cron job that fires every few seconds, kills the Paxos leader half-way,
and checks in Nomad that every scheduled slot got exactly one child.

The nomad binary is NOMAD_BIN, else nomad on PATH, else tools/nomad/bin/nomad
(make nomad builds it). Exit status: 0 every slot launched once, 1 a slot was
missed or doubled or something failed, 2 bad usage.

Flags:
`

// parent is the parameterized job the demo registers in Nomad.
const parent = "paxcron-demo"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	duration  time.Duration
	every     int
	kill      bool
	dir       string
	nomadAddr string
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paxcron-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var o options
	fs.DurationVar(&o.duration, "duration", 40*time.Second, "how long the cron job runs")
	fs.IntVar(&o.every, "every", 5, "the cron job's period in seconds (1-59, dividing 60)")
	fs.BoolVar(&o.kill, "kill-leader", true, "kill the Paxos leader half-way through")
	fs.StringVar(&o.dir, "dir", "", "folder for the replicas' stores and Nomad's data (default: a new temporary folder, removed at the end)")
	fs.StringVar(&o.nomadAddr, "nomad-addr", "", "use this running Nomad (1.11.2 or later, raw_exec enabled) instead of starting a dev agent")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "paxcron-demo: unexpected argument %q\n", fs.Arg(0))
		return 2
	case o.every < 1 || o.every > 59 || 60%o.every != 0:
		fmt.Fprintf(stderr, "paxcron-demo: -every %d: want 1 to 59 seconds, dividing 60\n", o.every)
		return 2
	case o.duration < 3*time.Duration(o.every)*time.Second:
		fmt.Fprintf(stderr, "paxcron-demo: -duration %v: want at least three periods (%v)\n", o.duration, 3*time.Duration(o.every)*time.Second)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{opts: o, out: stdout, started: map[string]time.Time{}, outcome: map[string]string{}, printed: map[uint64]bool{}}
	if err := d.run(ctx); err != nil {
		fmt.Fprintf(stderr, "paxcron-demo: %v\n", err)
		return 1
	}
	return 0
}

type demo struct {
	opts options
	out  io.Writer

	mu      sync.Mutex
	started map[string]time.Time // scheduled time by identity
	outcome map[string]string    // by identity
	printed map[uint64]bool      // slots printed, so each is printed once
}

func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (d *demo) run(ctx context.Context) error {
	dir := d.opts.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "paxcron-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}

	addr, token := d.opts.nomadAddr, os.Getenv("NOMAD_TOKEN")
	if addr == "" {
		if _, err := nomadtest.Binary(); errors.Is(err, nomadtest.ErrNoBinary) {
			// Run from the repository: `make nomad` builds it there.
			if built, err := filepath.Abs(filepath.Join("tools", "nomad", "bin", "nomad")); err == nil {
				if _, err := os.Stat(built); err == nil {
					os.Setenv("NOMAD_BIN", built)
				}
			}
		}
		agent, err := nomadtest.Launch(nomadtest.Options{Dir: filepath.Join(dir, "nomad")})
		if err != nil {
			return fmt.Errorf("starting a Nomad dev agent: %w", err)
		}
		defer agent.Stop()
		addr, token = agent.Addr, agent.Token
		d.say("Nomad %s dev agent at %s (its log: %s)", agent.Version, addr, agent.LogPath)
	}
	admin, err := api.NewClient(&api.Config{Address: addr, SecretID: token})
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, _, err := admin.Jobs().Register(parentJob(), nil); err != nil {
		return fmt.Errorf("registering the parameterized job %q: %w", parent, err)
	}
	d.say("registered the parameterized batch job %q in Nomad (raw_exec: echo)", parent)

	cfg := nomad.DefaultConfig()
	cfg.Address, cfg.Token = addr, token
	client, err := nomad.New(cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	if _, err := client.CheckVersion(ctx); err != nil {
		return err
	}

	var dispatchers []*nomad.Dispatcher
	var dmu sync.Mutex
	defer func() {
		for _, x := range dispatchers {
			x.Close()
		}
	}()
	opts := localcluster.DefaultOptions(filepath.Join(dir, "replicas"))
	opts.Cron = &localcluster.CronOptions{
		Launcher: launcher.Config{MemoryHorizon: client.MemoryHorizon()},
		NewDispatcher: func(_ paxos.ReplicaID, done func(launcher.Result)) launcher.Dispatcher {
			x, err := nomad.NewDispatcher(nomad.DispatcherConfig{Caller: client, Deliver: done})
			if err != nil {
				panic(err) // the config is fixed above; an error is a bug
			}
			dmu.Lock()
			dispatchers = append(dispatchers, x)
			dmu.Unlock()
			return x
		},
		Applied: d.applied,
	}
	c, err := localcluster.Start(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		return err
	}
	d.say("3 replicas running, each on its own Pebble store under %s; replica %d leads", filepath.Join(dir, "replicas"), leader)

	src := fmt.Sprintf("cron \"hello\" {\n  schedule = \"*/%d * * * * *\"\n  nomad { job = %q }\n}\n", d.opts.every, parent)
	crons, err := cronfile.Parse("demo.hcl", []byte(src), ".")
	if err != nil {
		return err
	}
	put := state.PutJob{Name: crons[0].Name, Spec: crons[0].Spec, At: time.Now()}
	cmd, err := state.Encode(put)
	if err != nil {
		return err
	}
	if err := c.Propose(ctx, cmd); err != nil {
		return fmt.Errorf("submitting the cron job: %w", err)
	}
	d.say("submitted, through the Paxos log:\n%s", indent(src))

	sched, err := schedule.Parse(put.Spec.Schedule, schedule.Options{JobName: put.Name})
	if err != nil {
		return err
	}
	begin := time.Now()
	end := begin.Add(d.opts.duration)
	if d.opts.kill {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.opts.duration / 2):
		}
		if id, ok := c.Leader(); ok {
			d.say("killing the leader, replica %d, as a crash would (its disk stays)", id)
			if err := c.Stop(id); err != nil {
				return err
			}
			next, err := c.WaitLeader(ctx)
			if err != nil {
				return err
			}
			d.say("replica %d leads now: it concludes what the old leader left open, then launches on", next)
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(end)):
	}
	// Let the last launch finish before checking.
	time.Sleep(3 * time.Second)
	return d.check(admin, sched, put.Name, begin, end)
}

// applied prints each launch command once, when the first replica applies
// it.
func (d *demo) applied(id paxos.ReplicaID, slot uint64, cmd state.Command, err error) {
	d.mu.Lock()
	if d.printed[slot] {
		d.mu.Unlock()
		return
	}
	d.printed[slot] = true
	var line string
	switch c := cmd.(type) {
	case state.LaunchStarted:
		if err == nil {
			d.started[c.Identity] = c.ScheduledAt
			line = fmt.Sprintf("slot %-4d started    %s (due %s)", slot, c.Identity, c.ScheduledAt.Local().Format("15:04:05"))
		}
	case state.LaunchFinished:
		if err == nil {
			id := state.LaunchIdentity(c.Job, c.ScheduledAt, c.LaunchKind)
			d.outcome[id] = string(c.Outcome.Kind)
			line = fmt.Sprintf("slot %-4d %-10s %s -> %s%s", slot, c.Outcome.Kind, id, c.Outcome.ChildID, c.Outcome.Reason)
		}
	case state.PutJob:
		if err == nil {
			line = fmt.Sprintf("slot %-4d put job   %s (%s)", slot, c.Name, c.Spec.Schedule)
		}
	case state.Takeover:
		line = fmt.Sprintf("slot %-4d takeover   a new leader's term %d.%d begins", slot, c.Term.Round, c.Term.Replica)
	}
	d.mu.Unlock()
	if line != "" {
		d.say("replica %d applied %s", id, line)
	}
}

// check compares the launches the cluster recorded and the children in
// Nomad with the schedule's slots between begin and end.
func (d *demo) check(admin *api.Client, sched *schedule.Schedule, name string, begin, end time.Time) error {
	stubs, _, err := admin.Jobs().PrefixList(parent + "/dispatch-" + name + "-")
	if err != nil {
		return fmt.Errorf("listing the children in Nomad: %w", err)
	}
	children := map[string][]string{} // by identity
	for _, s := range stubs {
		j, _, err := admin.Jobs().Info(s.ID, nil)
		if err != nil {
			return fmt.Errorf("reading child %s: %w", s.ID, err)
		}
		if j.DispatchIdempotencyToken != nil {
			token := *j.DispatchIdempotencyToken
			children[token] = append(children[token], s.ID)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var slots []time.Time
	for t := begin; ; {
		next, ok := sched.Next(t)
		if !ok || next.After(end) {
			break
		}
		slots = append(slots, next)
		t = next
	}
	// Slots before the first launch passed while the job was being
	// submitted; every one after must have been launched once.
	for len(slots) > 0 {
		if _, ok := d.started[state.Identity(name, slots[0])]; ok {
			break
		}
		slots = slots[1:]
	}
	var missing, doubled, skipped []string
	launched, inNomad := 0, 0
	for _, t := range slots {
		id := state.Identity(name, t)
		inNomad += len(children[id])
		if _, ok := d.started[id]; !ok {
			skipped = append(skipped, id)
			continue
		}
		launched++
		switch n := len(children[id]); {
		case n == 0 && d.outcome[id] == string(state.OutcomeDispatched):
			missing = append(missing, id)
		case n > 1:
			doubled = append(doubled, fmt.Sprintf("%s (%s)", id, strings.Join(children[id], ", ")))
		}
	}
	fmt.Fprintf(d.out, "\n%d slots due since the first launch; %d launched, %d children in Nomad; doubled: %d, missing in Nomad: %d, never launched: %d\n",
		len(slots), launched, inNomad, len(doubled), len(missing), len(skipped))
	if len(doubled)+len(missing)+len(skipped) > 0 {
		sort.Strings(doubled)
		return fmt.Errorf("doubled %v, missing %v, never launched %v", doubled, missing, skipped)
	}
	if launched == 0 {
		return errors.New("nothing was launched")
	}
	fmt.Fprintln(d.out, "every slot was launched exactly once")
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// parentJob is a parameterized batch job whose one raw_exec task echoes
// the launch it runs for; it accepts paxcron's meta keys.
func parentJob() *api.Job {
	j := api.NewBatchJob(parent, parent, "global", 50)
	j.Datacenters = []string{"*"}
	j.ParameterizedJob = &api.ParameterizedJobConfig{Payload: "optional", MetaOptional: []string{nomad.MetaIdentity, nomad.MetaJob, nomad.MetaScheduledAt}}
	task := api.NewTask("echo", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", `echo "launched by paxcron: $NOMAD_META_paxcron_identity, due $NOMAD_META_paxcron_scheduled_at"`}).
		Require(&api.Resources{CPU: new(20), MemoryMB: new(32)})
	tg := api.NewTaskGroup("g", 1).AddTask(task)
	tg.RestartPolicy = &api.RestartPolicy{Attempts: new(0), Mode: new("fail")}
	tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: new(0), Unlimited: new(false)}
	j.AddTaskGroup(tg)
	return j
}

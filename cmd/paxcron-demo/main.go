// Command paxcron-demo shows paxcron's main job on one machine, with
// nothing to set up: it starts a Nomad dev agent, registers a
// parameterized job in it, starts three `paxcron server` processes on
// loopback (each with its own Pebble store), submits a cron job that fires
// every few seconds through the API, prints each launch as the cluster
// records it, SIGKILLs the leader half-way through and restarts it, and at
// the end checks Nomad's own job list: one child per scheduled slot, none
// doubled, none missing. It exits 1 if not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"paxcron/cron/cronfile"
	"paxcron/cron/schedule"
	"paxcron/cron/state"
	"paxcron/internal/api"
	"paxcron/internal/freeport"
	"paxcron/nomad"
	"paxcron/nomad/nomadtest"
)

const usage = `Usage: paxcron-demo [flags]

Starts a Nomad dev agent and three paxcron replicas (paxcron server
processes) on this machine, submits a cron job that fires every few
seconds, SIGKILLs the Paxos leader half-way and restarts it, and checks in
Nomad that every scheduled slot got exactly one child.

The paxcron binary is -paxcron (make demo builds bin/paxcron). The nomad
binary is NOMAD_BIN, else nomad on PATH, else tools/nomad/bin/nomad (make
nomad builds it). Exit status: 0 every slot launched once, 1 a slot was
missed or doubled or something failed, 2 bad usage.

Flags:
`

// parent is the parameterized job the demo registers in Nomad.
const parent = "paxcron-demo"

// token is the demo's API token (the servers also let reads through
// without one, so that the status page opens in a browser).
const token = "paxcron-demo-token-0123456789"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	duration  time.Duration
	every     int
	kill      bool
	dir       string
	nomadAddr string
	paxcron   string
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paxcron-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var o options
	fs.DurationVar(&o.duration, "duration", 40*time.Second, "how long the cron job runs")
	fs.IntVar(&o.every, "every", 5, "the cron job's period in seconds (1-59, dividing 60)")
	fs.BoolVar(&o.kill, "kill-leader", true, "SIGKILL the Paxos leader half-way through, then restart it")
	fs.StringVar(&o.dir, "dir", "", "folder for the replicas' stores, logs and Nomad's data (default: a new temporary folder, removed at the end)")
	fs.StringVar(&o.nomadAddr, "nomad-addr", "", "use this running Nomad (1.11.2 or later, raw_exec enabled) instead of starting a dev agent")
	fs.StringVar(&o.paxcron, "paxcron", filepath.Join("bin", "paxcron"), "the paxcron binary (make build puts it in bin/)")
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
	bin, err := exec.LookPath(o.paxcron)
	if err != nil {
		fmt.Fprintf(stderr, "paxcron-demo: no paxcron binary at %s (run `make build`, or pass -paxcron): %v\n", o.paxcron, err)
		return 1
	}
	o.paxcron, _ = filepath.Abs(bin)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{opts: o, out: stdout, printed: map[string]bool{}, concluded: map[string]bool{}}
	if err := d.run(ctx); err != nil {
		fmt.Fprintf(stderr, "paxcron-demo: %v\n", err)
		return 1
	}
	return 0
}

type demo struct {
	opts options
	out  io.Writer
	dir  string

	nomadAddr, nomadToken string
	stopNomad             func()
	http, paxos, gossip   [3]int

	mu        sync.Mutex
	procs     [3]*exec.Cmd    // running replicas (watch reads them)
	printed   map[string]bool // launches printed, by identity and outcome
	concluded map[string]bool // identities printed with an outcome other than open
}

func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (d *demo) run(ctx context.Context) error {
	d.dir = d.opts.dir
	if d.dir == "" {
		tmp, err := os.MkdirTemp("", "paxcron-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		d.dir = tmp
	}
	d.stopNomad = func() {}
	if err := d.startNomad(); err != nil {
		return err
	}
	defer d.stopNomad()
	admin, err := nomadapi.NewClient(&nomadapi.Config{Address: d.nomadAddr, SecretID: d.nomadToken})
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, _, err := admin.Jobs().Register(parentJob(), nil); err != nil {
		return fmt.Errorf("registering the parameterized job %q: %w", parent, err)
	}
	d.say("registered the parameterized batch job %q in Nomad (raw_exec: echo)", parent)

	if err := d.startReplicas(); err != nil {
		return err
	}
	defer d.stopReplicas()
	leader, err := d.waitLeader(ctx, 0)
	if err != nil {
		return err
	}
	d.say("3 replicas running (logs in %s); replica %d leads; status page: http://127.0.0.1:%d/", d.dir, leader, d.http[leader-1])

	src := fmt.Sprintf("cron \"hello\" {\n  schedule = \"*/%d * * * * *\"\n  nomad { job = %q }\n}\n", d.opts.every, parent)
	file := filepath.Join(d.dir, "hello.hcl")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		return err
	}
	crons, err := cronfile.ParseFile(file)
	if err != nil {
		return err
	}
	res, err := d.client(leader).PutJobs(ctx, api.PutJobs{Jobs: []api.PutJob{{Name: crons[0].Name, Spec: api.SpecOf(crons[0].Spec)}}})
	if err != nil {
		return fmt.Errorf("submitting the cron job: %w", err)
	}
	d.say("submitted through the API (as `paxcron job run %s` does), version %d:\n%s", file, res.Jobs[0].Version, indent(src))

	sched, err := schedule.Parse(crons[0].Spec.Schedule, schedule.Options{JobName: crons[0].Name})
	if err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go d.watch(watchCtx, "hello")

	begin := time.Now()
	end := begin.Add(d.opts.duration)
	if d.opts.kill {
		if err := sleep(ctx, d.opts.duration/2); err != nil {
			return err
		}
		if id, err := d.waitLeader(ctx, 0); err == nil {
			d.say("SIGKILL to the leader, replica %d, as a crash would (its disk stays)", id)
			killed := time.Now()
			d.kill(id)
			next, err := d.waitLeader(ctx, id)
			if err != nil {
				return err
			}
			d.say("replica %d leads now, %v after the kill: it concludes what the old leader left open, then launches on", next, time.Since(killed).Round(time.Millisecond))
			if err := d.start(id, false); err != nil {
				return err
			}
			d.say("replica %d restarted from its disk: it catches up as a follower", id)
		}
	}
	if err := sleep(ctx, time.Until(end)); err != nil {
		return err
	}
	// Let the last launch finish before checking.
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	stopWatch()
	return d.check(admin, sched, crons[0].Name, begin, end)
}

func (d *demo) startNomad() error {
	if d.opts.nomadAddr != "" {
		d.nomadAddr, d.nomadToken = d.opts.nomadAddr, os.Getenv("NOMAD_TOKEN")
		return nil
	}
	if _, err := nomadtest.Binary(); errors.Is(err, nomadtest.ErrNoBinary) {
		// Run from the repository: `make nomad` builds it there.
		if built, err := filepath.Abs(filepath.Join("tools", "nomad", "bin", "nomad")); err == nil {
			if _, err := os.Stat(built); err == nil {
				os.Setenv("NOMAD_BIN", built)
			}
		}
	}
	agent, err := nomadtest.Launch(nomadtest.Options{Dir: filepath.Join(d.dir, "nomad")})
	if err != nil {
		return fmt.Errorf("starting a Nomad dev agent: %w", err)
	}
	d.stopNomad = func() { agent.Stop() }
	d.nomadAddr, d.nomadToken = agent.Addr, agent.Token
	d.say("Nomad %s dev agent at %s (its log: %s)", agent.Version, agent.Addr, agent.LogPath)
	return nil
}

func (d *demo) startReplicas() error {
	key := filepath.Join(d.dir, "cluster.key")
	if err := os.WriteFile(key, []byte("paxcron-demo-cluster-key-0123456789\n"), 0o600); err != nil {
		return err
	}
	ports, err := freeport.Pick(9)
	if err != nil {
		return err
	}
	for i := range 3 {
		d.http[i], d.paxos[i], d.gossip[i] = ports[3*i], ports[3*i+1], ports[3*i+2]
	}
	for id := 1; id <= 3; id++ {
		if err := d.start(id, true); err != nil {
			return err
		}
	}
	return nil
}

// start runs replica id: `paxcron server` with its settings as flags.
func (d *demo) start(id int, bootstrap bool) error {
	var join []string
	for p := 1; p <= 3; p++ {
		join = append(join, fmt.Sprintf("127.0.0.1:%d", d.gossip[p-1]))
	}
	// The replicas find one another by gossip: each knows only where
	// to join.
	args := []string{"server",
		"-replica-id", fmt.Sprint(id), "-data-dir", filepath.Join(d.dir, fmt.Sprintf("replica-%d", id)),
		"-cluster-members", "1,2,3", "-cluster-key-file", filepath.Join(d.dir, "cluster.key"),
		"-bind-gossip", fmt.Sprintf("127.0.0.1:%d", d.gossip[id-1]), "-cluster-join", strings.Join(join, ","),
		"-bind-http", fmt.Sprintf("127.0.0.1:%d", d.http[id-1]), "-bind-paxos", fmt.Sprintf("127.0.0.1:%d", d.paxos[id-1]),
		"-api-write-tokens", token, "-api-anonymous-reads", "-nomad-address", d.nomadAddr,
	}
	if bootstrap {
		args = append(args, "-bootstrap")
	}
	logFile, err := os.OpenFile(filepath.Join(d.dir, fmt.Sprintf("replica-%d.log", id)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(d.opts.paxcron, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "NOMAD_TOKEN="+d.nomadToken)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting replica %d: %w", id, err)
	}
	d.setProc(id, cmd)
	return nil
}

func (d *demo) proc(id int) *exec.Cmd {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.procs[id-1]
}

func (d *demo) setProc(id int, cmd *exec.Cmd) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.procs[id-1] = cmd
}

func (d *demo) kill(id int) {
	if p := d.proc(id); p != nil {
		_ = p.Process.Signal(syscall.SIGKILL)
		_ = p.Wait()
		d.setProc(id, nil)
	}
}

// stopReplicas asks each replica to stop (SIGTERM: the leader hands over).
func (d *demo) stopReplicas() {
	for id := 1; id <= 3; id++ {
		if p := d.proc(id); p != nil {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
	}
	for id := 1; id <= 3; id++ {
		if p := d.proc(id); p != nil {
			done := make(chan struct{})
			go func() { _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				d.kill(id)
			}
		}
	}
}

func (d *demo) client(id int) *api.Client {
	c, err := api.NewClient(api.ClientConfig{Address: fmt.Sprintf("http://127.0.0.1:%d", d.http[id-1]), Token: token, Timeout: 5 * time.Second})
	if err != nil {
		panic(err) // the address is built here
	}
	return c
}

// waitLeader waits until a running replica other than not launches.
func (d *demo) waitLeader(ctx context.Context, not int) (int, error) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for id := 1; id <= 3; id++ {
			if id == not || d.proc(id) == nil {
				continue
			}
			if st, err := d.client(id).Status(ctx); err == nil && st.Launching {
				return id, nil
			}
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return 0, errors.New("no replica leads after 60 s (see the replicas' logs)")
}

// watch prints every launch of job as the cluster records it, read from
// any running replica.
func (d *demo) watch(ctx context.Context, job string) {
	for ctx.Err() == nil {
		for id := 1; id <= 3; id++ {
			if d.proc(id) == nil {
				continue
			}
			j, err := d.client(id).Job(ctx, job, 0, api.ReadOptions{Stale: true})
			if err != nil {
				continue
			}
			d.report(id, append(append([]api.Launch{}, j.OpenAll...), j.History...))
			break
		}
		_ = sleep(ctx, 250*time.Millisecond)
	}
}

// report prints, oldest first, what launches shows that was not printed
// before.
func (d *demo) report(id int, launches []api.Launch) {
	sort.Slice(launches, func(a, b int) bool { return launches[a].ScheduledAt.Before(launches[b].ScheduledAt) })
	for _, l := range launches {
		key := l.Identity + "/" + l.Outcome
		d.mu.Lock()
		seen := d.printed[key]
		// A replica that restarts reads as open, for a moment, a launch
		// it saw concluded before its crash (it learns that the
		// conclusion was chosen once the leader tells it): that is no new
		// start.
		reopened := l.Outcome == "open" && d.concluded[l.Identity]
		d.printed[key] = true
		if l.Outcome != "open" {
			d.concluded[l.Identity] = true
		}
		d.mu.Unlock()
		if seen || reopened {
			continue
		}
		if l.Outcome == "open" {
			d.say("replica %d reports  started     %s (due %s)", id, l.Identity, l.ScheduledAt.Local().Format("15:04:05"))
		} else {
			d.say("replica %d reports  %-11s %s -> %s%s", id, l.Outcome, l.Identity, l.ChildID, l.Reason)
		}
	}
}

// check compares the launches the cluster recorded and the children in
// Nomad with the schedule's slots between begin and end.
func (d *demo) check(admin *nomadapi.Client, sched *schedule.Schedule, name string, begin, end time.Time) error {
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
	var slots []time.Time
	for t := begin; ; {
		next, ok := sched.Next(t)
		if !ok || next.After(end) {
			break
		}
		slots = append(slots, next)
		t = next
	}
	// Slots before the first child passed while the job was being
	// submitted; every one after must have exactly one.
	for len(slots) > 0 && len(children[state.Identity(name, slots[0])]) == 0 {
		slots = slots[1:]
	}
	var missing, doubled []string
	inNomad := 0
	for _, t := range slots {
		id := state.Identity(name, t)
		inNomad += len(children[id])
		switch n := len(children[id]); {
		case n == 0:
			missing = append(missing, id)
		case n > 1:
			doubled = append(doubled, fmt.Sprintf("%s (%s)", id, strings.Join(children[id], ", ")))
		}
	}
	fmt.Fprintf(d.out, "\n%d slots due since the first launch; %d children in Nomad for them; doubled: %d, missing: %d\n",
		len(slots), inNomad, len(doubled), len(missing))
	if len(doubled)+len(missing) > 0 {
		sort.Strings(doubled)
		return fmt.Errorf("doubled %v, missing %v", doubled, missing)
	}
	if len(slots) == 0 {
		return errors.New("nothing was launched")
	}
	fmt.Fprintln(d.out, "every slot was launched exactly once")
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// parentJob is a parameterized batch job whose one raw_exec task echoes
// the launch it runs for; it accepts paxcron's meta keys.
func parentJob() *nomadapi.Job {
	j := nomadapi.NewBatchJob(parent, parent, "global", 50)
	j.Datacenters = []string{"*"}
	j.ParameterizedJob = &nomadapi.ParameterizedJobConfig{Payload: "optional", MetaOptional: nomad.MetaKeys()}
	task := nomadapi.NewTask("echo", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", `echo "launched by paxcron: $NOMAD_META_paxcron_identity, due $NOMAD_META_paxcron_scheduled_at"`}).
		Require(&nomadapi.Resources{CPU: new(20), MemoryMB: new(32)})
	tg := nomadapi.NewTaskGroup("g", 1).AddTask(task)
	tg.RestartPolicy = &nomadapi.RestartPolicy{Attempts: new(0), Mode: new("fail")}
	tg.ReschedulePolicy = &nomadapi.ReschedulePolicy{Attempts: new(0), Unlimited: new(false)}
	j.AddTaskGroup(tg)
	return j
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"paxcron/internal/api"
	"paxcron/internal/freeport"
	"paxcron/nomad"
	"paxcron/nomad/nomadtest"
)

const e2eToken = "e2e-write-token-0123456789"

// e2eCluster is three `paxcron server` processes on loopback.
type e2eCluster struct {
	t     testing.TB
	bin   string
	dir   string
	agent *nomadtest.Agent
	http  []int
	paxos []int
	// gossip are the replicas' gossip addresses: they find one another
	// by joining the first, with no static peers.
	gossip []string
	procs  []*exec.Cmd
	// backup, when set, is every replica's backup.url.
	backup string
}

// buildPaxcron builds this command into dir.
func buildPaxcron(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "paxcron")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func startE2E(t testing.TB, agent *nomadtest.Agent) *e2eCluster {
	return startE2EWith(t, agent, "")
}

// startE2EWith starts the cluster with backups to backupURL ("": none).
func startE2EWith(t testing.TB, agent *nomadtest.Agent, backupURL string) *e2eCluster {
	t.Helper()
	c := &e2eCluster{t: t, dir: t.TempDir(), agent: agent, backup: backupURL}
	c.bin = buildPaxcron(t, c.dir)
	if err := os.WriteFile(filepath.Join(c.dir, "cluster.key"), []byte("e2e-cluster-key-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := freeport.Pick(9)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c.http = append(c.http, ports[3*i])
		c.paxos = append(c.paxos, ports[3*i+1])
		c.gossip = append(c.gossip, fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]))
	}
	c.procs = make([]*exec.Cmd, 3)
	for id := 1; id <= 3; id++ {
		c.start(id, true)
	}
	t.Cleanup(func() {
		for id := 1; id <= 3; id++ {
			c.kill(id)
		}
		if t.Failed() {
			for id := 1; id <= 3; id++ {
				b, _ := os.ReadFile(c.logPath(id))
				lines := strings.Split(string(b), "\n")
				t.Logf("replica %d, end of its log:\n%s", id, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	})
	return c
}

func (c *e2eCluster) logPath(id int) string {
	return filepath.Join(c.dir, fmt.Sprintf("replica-%d.log", id))
}

func (c *e2eCluster) addr(id int) string { return fmt.Sprintf("http://127.0.0.1:%d", c.http[id-1]) }

func (c *e2eCluster) start(id int, bootstrap bool) {
	c.t.Helper()
	args := []string{"server",
		"-replica-id", fmt.Sprint(id), "-data-dir", filepath.Join(c.dir, fmt.Sprintf("data-%d", id)),
		"-cluster-members", "1,2,3", "-cluster-key-file", filepath.Join(c.dir, "cluster.key"),
		"-bind-gossip", c.gossip[id-1], "-cluster-join", strings.Join(c.gossip, ","),
		"-bind-http", fmt.Sprintf("127.0.0.1:%d", c.http[id-1]), "-bind-paxos", fmt.Sprintf("127.0.0.1:%d", c.paxos[id-1]),
		"-api-write-tokens", e2eToken, "-nomad-address", c.agent.Addr, "-log-level", "debug",
	}
	if bootstrap {
		args = append(args, "-bootstrap")
	}
	if c.backup != "" {
		args = append(args, "-backup-url", c.backup)
	}
	logFile, err := os.OpenFile(c.logPath(id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "NOMAD_TOKEN="+c.agent.Token)
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.procs[id-1] = cmd
}

// kill sends SIGKILL, as a crash would.
func (c *e2eCluster) kill(id int) {
	if p := c.procs[id-1]; p != nil {
		p.Process.Signal(syscall.SIGKILL)
		p.Wait()
		c.procs[id-1] = nil
	}
}

func (c *e2eCluster) client(id int) *api.Client {
	cl, err := api.NewClient(api.ClientConfig{Address: c.addr(id), Token: e2eToken, Timeout: 5 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// leader waits until a live replica says it launches.
func (c *e2eCluster) leader() int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for id := 1; id <= 3; id++ {
			if c.procs[id-1] == nil {
				continue
			}
			st, err := c.client(id).Status(context.Background())
			if err == nil && st.Launching {
				return id
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatal("no replica launches after 30 s")
	return 0
}

// children lists the parent's children in Nomad by idempotency token.
func children(t testing.TB, admin *nomadapi.Client, parent, job string) map[string][]string {
	t.Helper()
	stubs, _, err := admin.Jobs().PrefixList(parent + "/dispatch-" + job + "-")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, s := range stubs {
		j, _, err := admin.Jobs().Info(s.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if j.DispatchIdempotencyToken != nil {
			out[*j.DispatchIdempotencyToken] = append(out[*j.DispatchIdempotencyToken], s.ID)
		}
	}
	return out
}

// parentNames numbers the parents registered in the package's shared
// agent, so that a test run again in the same process (-count) counts
// only its own children, not the earlier run's.
var parentNames atomic.Int64

// parentName is base with a number no other parent in the shared agent
// has.
func parentName(base string) string {
	return fmt.Sprintf("%s-%d", base, parentNames.Add(1))
}

// registerParent registers a parameterized batch job whose task exits at
// once and accepts paxcron's meta.
func registerParent(t testing.TB, admin *nomadapi.Client, name string) {
	t.Helper()
	j := nomadapi.NewBatchJob(name, name, "global", 50)
	j.Datacenters = []string{"*"}
	j.ParameterizedJob = &nomadapi.ParameterizedJobConfig{Payload: "optional", MetaOptional: append(nomad.MetaKeys(), "team")}
	task := nomadapi.NewTask("t", "raw_exec").SetConfig("command", "/bin/true").Require(&nomadapi.Resources{CPU: new(20), MemoryMB: new(32)})
	j.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(task))
	if _, _, err := admin.Jobs().Register(j, nil); err != nil {
		t.Fatal(err)
	}
}

// Three replica processes and the real Nomad: jobs submitted with the
// CLI, the leader SIGKILLed and restarted; in Nomad's own job list every
// slot due meanwhile has exactly one child.
func TestEndToEndLeaderKilled(t *testing.T) {
	agent := nomadtest.Shared(t)
	admin, err := nomadapi.NewClient(&nomadapi.Config{Address: agent.Addr, SecretID: agent.Token})
	if err != nil {
		t.Fatal(err)
	}
	parent := parentName("e2e-parent")
	registerParent(t, admin, parent)
	c := startE2E(t, agent)
	leader := c.leader()
	follower := leader%3 + 1

	jobs := filepath.Join(c.dir, "jobs.hcl")
	os.WriteFile(jobs, []byte(`
cron "tick" {
  schedule = "*/2 * * * * *"
  nomad {
    job  = "`+parent+`"
    meta = { team = "e2e" }
  }
}
`), 0o644)
	jobCLI := func(sub string, args ...string) (int, string, string) {
		return runCLI(t, append([]string{"job", sub, "-address", c.addr(follower), "-token", e2eToken}, args...)...)
	}
	if code, out, errOut := jobCLI("run", jobs); code != 0 || !strings.Contains(out, "created   tick") {
		t.Fatalf("job run through follower %d: exit %d\n%s%s", follower, code, out, errOut)
	}
	if code, out, _ := jobCLI("run", jobs); code != 0 || !strings.Contains(out, "unchanged tick") {
		t.Fatalf("job run again: exit %d\n%s", code, out)
	}
	first := time.Now()
	time.Sleep(7 * time.Second)

	c.kill(leader)
	killedAt := time.Now()
	next := c.leader()
	t.Logf("replica %d killed; replica %d leads %v later", leader, next, time.Since(killedAt).Round(time.Millisecond))
	time.Sleep(7 * time.Second)
	c.start(leader, false)
	time.Sleep(5 * time.Second)
	end := time.Now().Add(-3 * time.Second) // slots until then are concluded

	if code, out, errOut := runCLI(t, "operator", "status", "-address", c.addr(follower), "-token", e2eToken); code != 0 || !strings.Contains(out, "Leader") {
		t.Errorf("operator status: exit %d\n%s%s", code, out, errOut)
	}
	// The leader measured its calls to Nomad.
	req, _ := http.NewRequest(http.MethodGet, c.addr(next)+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `paxcron_nomad_call_seconds_count{op="dispatch"}`) {
			t.Errorf("the leader's metrics lack its Nomad calls")
		}
	}
	code, out, errOut := jobCLI("history", "-json", "tick")
	if code != 0 {
		t.Fatalf("job history: exit %d: %s", code, errOut)
	}
	var history []api.Launch
	if err := json.Unmarshal([]byte(out), &history); err != nil {
		t.Fatal(err)
	}
	got := children(t, admin, parent, "tick")
	var tokens []string
	for tok, ids := range got {
		tokens = append(tokens, tok)
		if len(ids) > 1 {
			t.Errorf("slot %s has %d children: %v", tok, len(ids), ids)
		}
	}
	sort.Strings(tokens)
	// Every even second from the first child to end has one.
	if len(tokens) == 0 {
		t.Fatal("no child in Nomad")
	}
	var firstSlot int64
	fmt.Sscanf(strings.TrimPrefix(tokens[0], "tick-"), "%d", &firstSlot)
	missing := 0
	for s := firstSlot; s <= end.Unix(); s += 2 {
		if len(got[fmt.Sprintf("tick-%d", s)]) != 1 {
			missing++
			t.Errorf("slot tick-%d (%s) has no child", s, time.Unix(s, 0).Format(time.TimeOnly))
		}
	}
	if firstSlot > first.Add(4*time.Second).Unix() {
		t.Errorf("the first child is for %s, the job was submitted at %s", time.Unix(firstSlot, 0), first)
	}
	for _, l := range history {
		if l.Outcome == "dispatched" && (len(got[l.Identity]) != 1 || got[l.Identity][0] != l.ChildID) {
			t.Errorf("history says %s -> %s; Nomad has %v", l.Identity, l.ChildID, got[l.Identity])
		}
	}
	t.Logf("%d children in Nomad, %d slots checked, %d missing, none doubled", len(tokens), (end.Unix()-firstSlot)/2+1, missing)
}

// Every replica's disk is lost: the cluster is rebuilt from the newest
// backup with the CLI, every job is back, launches go on, and Nomad's job
// list shows no slot launched twice (none before the backup repeated).
func TestEndToEndDisasterRecovery(t *testing.T) {
	agent := nomadtest.Shared(t)
	admin, err := nomadapi.NewClient(&nomadapi.Config{Address: agent.Addr, SecretID: agent.Token})
	if err != nil {
		t.Fatal(err)
	}
	parent := parentName("dr-parent")
	registerParent(t, admin, parent)
	backups := "file://" + t.TempDir()
	c := startE2EWith(t, agent, backups)
	leader := c.leader()
	jobs := filepath.Join(c.dir, "jobs.hcl")
	os.WriteFile(jobs, []byte(`
cron "dr-a" {
  schedule = "*/2 * * * * *"
  nomad { job = "`+parent+`" }
}
cron "dr-b" {
  schedule = "*/3 * * * * *"
  nomad { job = "`+parent+`" }
}
`), 0o644)
	api := func(args ...string) (int, string, string) {
		return runCLI(t, append(args, "-address", c.addr(leader), "-token", e2eToken)...)
	}
	if code, out, errOut := api("job", "run", jobs); code != 0 {
		t.Fatalf("job run: exit %d\n%s%s", code, out, errOut)
	}
	time.Sleep(5 * time.Second)
	code, out, errOut := runCLI(t, "operator", "backup", "-address", c.addr(leader), "-token", e2eToken)
	if code != 0 || !strings.Contains(out, "backed up the state at log index") {
		t.Fatalf("operator backup: exit %d\n%s%s", code, out, errOut)
	}
	backedUpAt := time.Now()
	saved := filepath.Join(c.dir, "saved.snap")
	if code, out, errOut := runCLI(t, "operator", "snapshot", "save", "-address", c.addr(leader), "-token", e2eToken, saved); code != 0 {
		t.Fatalf("snapshot save: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "operator", "snapshot", "inspect", saved); code != 0 || !strings.Contains(out, "Jobs") || !strings.Contains(out, "2 (0 paused)") {
		t.Fatalf("snapshot inspect: exit %d\n%s%s", code, out, errOut)
	}
	time.Sleep(4 * time.Second) // launches after the backup, which it does not know of

	// Every disk is lost.
	for id := 1; id <= 3; id++ {
		c.kill(id)
		if err := os.RemoveAll(filepath.Join(c.dir, fmt.Sprintf("data-%d", id))); err != nil {
			t.Fatal(err)
		}
	}
	lostAt := time.Now()
	for id := 1; id <= 3; id++ {
		dir := filepath.Join(c.dir, fmt.Sprintf("data-%d", id))
		code, out, errOut := runCLI(t, "operator", "snapshot", "restore", "-data-dir", dir, "-cluster-members", "1,2,3", "-backup", backups)
		if code != 0 || !strings.Contains(out, "start this replica without -bootstrap") {
			t.Fatalf("restore replica %d: exit %d\n%s%s", id, code, out, errOut)
		}
	}
	for id := 1; id <= 3; id++ {
		c.start(id, false)
	}
	leader = c.leader()
	t.Logf("rebuilt from the backup taken %v before the disks were lost; replica %d leads", lostAt.Sub(backedUpAt).Round(time.Millisecond), leader)
	time.Sleep(6 * time.Second)

	if code, out, errOut := api("job", "status"); code != 0 || !strings.Contains(out, "dr-a") || !strings.Contains(out, "dr-b") {
		t.Fatalf("job status after the restore: exit %d\n%s%s", code, out, errOut)
	}
	end := time.Now().Add(-2 * time.Second)
	for _, job := range []struct {
		name  string
		every int64
	}{{"dr-a", 2}, {"dr-b", 3}} {
		got := children(t, admin, parent, job.name)
		var first int64
		for tok := range got {
			var s int64
			fmt.Sscanf(strings.TrimPrefix(tok, job.name+"-"), "%d", &s)
			if first == 0 || s < first {
				first = s
			}
		}
		// Every slot from the first child on has one, the ones whose
		// launch only the lost log knew and those due while no replica ran
		// included.
		for s := first; s <= end.Unix(); s += job.every {
			if len(got[fmt.Sprintf("%s-%d", job.name, s)]) == 0 {
				t.Errorf("%s: slot %s has no child", job.name, time.Unix(s, 0).Format(time.TimeOnly))
			}
		}
		after := 0
		for tok, ids := range got {
			if len(ids) > 1 {
				t.Errorf("slot %s has %d children: %v", tok, len(ids), ids)
			}
			var s int64
			fmt.Sscanf(strings.TrimPrefix(tok, job.name+"-"), "%d", &s)
			if time.Unix(s, 0).After(lostAt) {
				after++
			}
		}
		if after == 0 {
			t.Errorf("%s: no launch after the restore", job.name)
		}
		t.Logf("%s: %d slots with one child each, %d of them after the restore", job.name, len(got), after)
	}
}

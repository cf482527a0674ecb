package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"paxcron/internal/freeport"
	"paxcron/nomad/nomadtest"
)

// nomadAgent is one Nomad agent on the host, server and client in one
// process, with a data folder, so that it keeps its jobs (and their
// idempotency tokens) when it is restarted; a dev agent (nomadtest)
// keeps nothing. Its HTTP API listens on loopback and on the gateway of
// the network the replicas reach it by; RPC and serf on loopback only.
type nomadAgent struct {
	bin     string
	dir     string
	gateway string
	ports   [3]int // http, rpc, serf
	Addr    string // on loopback, for the harness
	// ReplicaAddr is where the containers reach the API.
	ReplicaAddr string
	Version     string

	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File
	// groups are the process groups of every agent this run started.
	// Its logmon plugins stay in them and outlive the agent by design
	// (a restarted agent reattaches to them), and their command lines do
	// not name the run's folder: only the group finds them at the end.
	groups []int
}

// NomadReadyTimeout bounds an agent's start (a restart included).
const NomadReadyTimeout = 90 * time.Second

// newNomad prepares an agent in dir, reachable at gateway by the
// replicas (empty: on loopback only, to read a finished run's Nomad
// again); start starts it. An agent on a data folder it ran on before
// finds its jobs there.
func newNomad(dir, gateway string) (*nomadAgent, error) {
	bin, err := nomadtest.Binary()
	if err != nil {
		return nil, err
	}
	version, err := nomadtest.CheckVersion(bin)
	if err != nil {
		return nil, err
	}
	a := &nomadAgent{bin: bin, dir: dir, gateway: gateway, Version: version}
	hosts := []string{"127.0.0.1"}
	if gateway != "" {
		hosts = append(hosts, gateway)
	}
	ports, err := freeport.Pick(len(a.ports), hosts...)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	copy(a.ports[:], ports)
	a.Addr = fmt.Sprintf("http://127.0.0.1:%d", a.ports[0])
	a.ReplicaAddr = fmt.Sprintf("http://%s:%d", gateway, a.ports[0])
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.hcl"), []byte(a.config()), 0o600); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return a, nil
}

func (a *nomadAgent) config() string {
	http := "127.0.0.1"
	if a.gateway != "" {
		http += " " + a.gateway
	}
	return fmt.Sprintf(`# Written by paxcron-chaos: one agent, server and client, that keeps
# its state in data_dir across restarts.
data_dir             = %q
bind_addr            = "127.0.0.1"
log_level            = "INFO"
disable_update_check = true

addresses {
  http = %q
}
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
ports {
  http = %d
  rpc  = %d
  serf = %d
}

server {
  enabled          = true
  bootstrap_expect = 1
}

client {
  enabled           = true
  servers           = ["127.0.0.1:%d"]
  network_interface = "lo"
  options {
    "fingerprint.denylist" = %q
    "driver.denylist"      = "docker,podman,qemu,java,exec"
  }
}

# No Consul or Vault even if one runs on this machine.
consul {
  auto_advertise   = false
  server_auto_join = false
  client_auto_join = false
}

plugin "raw_exec" {
  config {
    enabled = true
  }
}
`, filepath.Join(a.dir, "data"), http, a.ports[0], a.ports[1], a.ports[2], a.ports[1], nomadtest.FingerprintDenylist)
}

// start starts the agent and waits until it is ready: a leader, and the
// client node ready with a healthy raw_exec driver.
func (a *nomadAgent) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(a.dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	cmd := exec.Command(a.bin, "agent", "-config", filepath.Join(a.dir, "agent.hcl"))
	cmd.Dir = a.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = agentEnv()
	// A group of its own: a Ctrl-C meant for this command does not reach
	// it (the cleanup stops it), and its plugin processes can be killed
	// with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("chaos: starting nomad: %w", err)
	}
	a.cmd, a.log, a.exited = cmd, logf, make(chan struct{})
	a.groups = append(a.groups, cmd.Process.Pid)
	go func() { cmd.Wait(); close(a.exited) }()
	return a.waitReady(ctx)
}

func (a *nomadAgent) client() *nomadapi.Client {
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: a.Addr})
	if err != nil {
		panic(err) // the address is built here
	}
	return c
}

func (a *nomadAgent) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, NomadReadyTimeout)
	defer cancel()
	c := a.client()
	defer c.Close()
	waiting := "its HTTP API"
	for {
		if leader, err := c.Status().Leader(); err == nil && leader != "" {
			waiting = "its client node"
			nodes, _, err := c.Nodes().List(nil)
			if err == nil && len(nodes) > 0 && nodes[0].Status == "ready" {
				if d := nodes[0].Drivers["raw_exec"]; d != nil && d.Healthy {
					return nil
				}
			}
		}
		select {
		case <-a.exited:
			return fmt.Errorf("chaos: nomad exited before it was ready (waiting for %s); see %s", waiting, filepath.Join(a.dir, "agent.log"))
		case <-ctx.Done():
			return fmt.Errorf("chaos: nomad not ready after %v (waiting for %s); see %s", NomadReadyTimeout, waiting, filepath.Join(a.dir, "agent.log"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop interrupts the agent and waits for it (SIGKILL after 20 s). A
// client agent that is not in dev mode leaves its tasks running, and
// reattaches to them when it starts again.
func (a *nomadAgent) stop() {
	if a.cmd == nil {
		return
	}
	a.cmd.Process.Signal(os.Interrupt)
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		a.cmd.Process.Kill()
		<-a.exited
	}
	a.log.Close()
	a.cmd = nil
}

// destroy stops the agent for good: then every process left in the
// agents' groups (logmon plugins) or running under its folder (task
// executors and their tasks: their command lines name it) is killed, and
// the mounts under it are detached.
func (a *nomadAgent) destroy() {
	a.stop()
	for _, g := range a.groups {
		syscall.Kill(-g, syscall.SIGKILL)
	}
	a.groups = nil
	killUnder(a.dir)
	unmountUnder(a.dir)
}

// killUnder SIGKILLs the processes whose command line or working folder
// lies in dir: only this run's Nomad made such processes.
func killUnder(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if strings.Contains(string(cmdline), dir+"/") || strings.HasPrefix(cwd, dir+"/") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder detaches the mounts left under dir (as root, the Nomad
// client mounts a tmpfs on each task's secrets folder).
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && strings.HasPrefix(fields[1], dir+"/") {
			points = append(points, fields[1])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// agentEnv is this process's environment without what points Nomad,
// Consul or Vault clients elsewhere.
func agentEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NOMAD_") || strings.HasPrefix(kv, "CONSUL_") || strings.HasPrefix(kv, "VAULT_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

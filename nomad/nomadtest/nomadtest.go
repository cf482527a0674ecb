// Package nomadtest owns the real Nomad agent that paxcron's integration
// tests run against: it finds the nomad binary (NOMAD_BIN, then PATH),
// refuses one older than MinVersion, starts `nomad agent -dev` on free
// loopback ports with the raw_exec driver enabled (and, on request, ACLs
// bootstrapped with a management token), polls until the agent is ready,
// and stops it when the test or the test package ends, so that no agent is
// left running. It also holds a small JSON client for Nomad's HTTP API,
// written on the standard library only, so that the harness adds nothing to
// paxcron's module graph.
//
// One agent per test package:
//
//	func TestMain(m *testing.M) { os.Exit(nomadtest.Main(m, nomadtest.Options{})) }
//
//	func TestSomething(t *testing.T) {
//		agent := nomadtest.Shared(t) // started on first use, stopped by Main
//		...
//	}
//
// A test that needs an agent of its own (ACLs on, another configuration)
// calls Start, which stops the agent in t.Cleanup. Launch is the primitive
// under both, for code that has no testing.TB.
//
// Without a nomad binary (NOMAD_BIN unset and none on PATH) Shared and Start
// skip the test and say to run `make nomad`; `make test` always provides one
// through NOMAD_BIN, and a NOMAD_BIN that names no executable is an error,
// not a skip.
//
// Nomad is BUSL-licensed: it is built for the tests (`make nomad`, from the
// tools/nomad module into tools/nomad/bin) and never committed.
package nomadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"paxcron/internal/freeport"
)

const (
	// DefaultReadyTimeout bounds the wait for a new agent to be ready. A dev
	// agent is ready in a few seconds; the margin is for a loaded 2-core
	// machine that is also running the rest of `make test`.
	DefaultReadyTimeout = 90 * time.Second
	// DefaultStopGrace is how long Stop waits after SIGINT before SIGKILL.
	DefaultStopGrace = 15 * time.Second
	// FingerprintDenylist is the client's fingerprint.denylist: with the
	// dependency set Nomad is built from, the cloud-environment
	// fingerprinters stop the client from starting.
	FingerprintDenylist = "env_aws,env_gce,env_azure,env_digitalocean"
)

// ErrNoBinary says that no nomad binary was found: NOMAD_BIN is unset and
// there is no nomad on PATH. Shared and Start skip the test on it.
var ErrNoBinary = errors.New("nomadtest: no nomad binary: NOMAD_BIN is unset and there is no nomad on PATH; " +
	"run `make nomad` (it builds tools/nomad/bin/nomad) and set NOMAD_BIN to it, or run the tests with `make test`")

// Options configure an agent.
type Options struct {
	// ACL enables Nomad's ACL system and bootstraps it: Agent.Token is then
	// a management token, which Agent.Call sends.
	ACL bool
	// Config is extra agent configuration in HCL, passed as a second
	// -config file so that its blocks merge with the harness's own (e.g.
	// `server { job_gc_threshold = "1s" }`).
	Config string
	// Dir receives the configuration, the data directory and the agent's
	// log. Empty: a new temporary directory, which Stop removes. Start
	// passes tb.TempDir().
	Dir string
	// ReadyTimeout bounds the wait for readiness; zero means
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// StopGrace is how long Stop waits after SIGINT before SIGKILL; zero
	// means DefaultStopGrace.
	StopGrace time.Duration
}

// Agent is a running dev agent.
type Agent struct {
	// Addr is the base URL of the HTTP API, e.g. "http://127.0.0.1:40123";
	// it is what NOMAD_ADDR would be.
	Addr string
	// Token is the management token when Options.ACL, else empty.
	Token string
	// Version is the agent's version, e.g. "1.11.3".
	Version string
	// Binary is the absolute path of the nomad binary that runs.
	Binary string
	// NodeID is the ID of the agent's (only) client node.
	NodeID string
	// Dir holds dev.hcl, the data directory (data/) and the log.
	Dir string
	// LogPath is the agent's combined stdout and stderr.
	LogPath string
	// HTTPPort, RPCPort and SerfPort are the ports it listens on
	// (127.0.0.1).
	HTTPPort, RPCPort, SerfPort int

	cmd     *exec.Cmd
	logFile *os.File
	wd      *watchdog
	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error         // cmd.Wait's result, set before exited is closed
	ownDir  bool
	grace   time.Duration

	stopOnce sync.Once
	stopErr  error
}

// Binary returns the nomad binary the tests use: NOMAD_BIN if set (an error
// if it names no executable), else nomad on PATH, else ErrNoBinary.
func Binary() (string, error) {
	if p := os.Getenv("NOMAD_BIN"); p != "" {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("nomadtest: NOMAD_BIN=%s: %w (run `make nomad`, or unset NOMAD_BIN to use nomad from PATH)", p, err)
		}
		abs, err := filepath.Abs(found)
		if err != nil {
			return "", fmt.Errorf("nomadtest: NOMAD_BIN=%s: %w", p, err)
		}
		return abs, nil
	}
	found, err := exec.LookPath("nomad")
	if err != nil {
		return "", ErrNoBinary
	}
	abs, err := filepath.Abs(found)
	if err != nil {
		return "", fmt.Errorf("nomadtest: nomad on PATH (%s): %w", found, err)
	}
	return abs, nil
}

// Start launches an agent for one test and stops it in tb.Cleanup. It skips
// the test when there is no nomad binary (ErrNoBinary) and fails it on any
// other error, which for a timeout includes the end of the agent's log.
// When the test has failed, the cleanup logs the end of the agent's log.
func Start(tb testing.TB, opts Options) *Agent {
	tb.Helper()
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	a, err := Launch(opts)
	if errors.Is(err, ErrNoBinary) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("nomad agent %s, end of its log (%s):\n%s", a.Addr, a.LogPath, a.LogTail(60))
		}
		if err := a.Stop(); err != nil {
			tb.Logf("nomadtest: %v", err)
		}
	})
	return a
}

// Launch starts a dev agent and waits until it is ready: a leader is
// elected, ACLs are bootstrapped if asked for, and the client node is ready
// and eligible with a healthy raw_exec driver. The caller must Stop it.
// It fails with ErrNoBinary when there is no nomad binary, and refuses a
// Nomad older than MinVersion. An agent that does not become ready is
// stopped, and the error ends with the end of its log; its directory stays
// for a look even if Launch made it.
func Launch(opts Options) (*Agent, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	version, err := CheckVersion(bin)
	if err != nil {
		return nil, err
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	dir, ownDir := opts.Dir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "nomadtest-"); err != nil {
			return nil, fmt.Errorf("nomadtest: %w", err)
		}
		ownDir = true
	}
	// The free ports are picked, then released for the agent to bind: another
	// process may take one in between. Then the agent exits at once, and
	// another set of ports is tried.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		a, err := launch(bin, version, dir, opts)
		if err == nil {
			a.ownDir = ownDir
			return a, nil
		}
		if attempt == attempts || !errors.Is(err, errPortTaken) {
			return nil, err // the directory stays, with the agent's log
		}
	}
}

var errPortTaken = errors.New("a port was taken")

func launch(bin, version, dir string, opts Options) (*Agent, error) {
	ports, err := freeport.Pick(3)
	if err != nil {
		return nil, fmt.Errorf("nomadtest: picking free ports: %w", err)
	}
	a := &Agent{
		Addr:     fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		Version:  version,
		Binary:   bin,
		Dir:      dir,
		LogPath:  filepath.Join(dir, "agent.log"),
		HTTPPort: ports[0],
		RPCPort:  ports[1],
		SerfPort: ports[2],
		exited:   make(chan struct{}),
		grace:    opts.StopGrace,
	}
	dataDir := filepath.Join(dir, "data")
	if err := os.RemoveAll(dataDir); err != nil { // a failed attempt's
		return nil, fmt.Errorf("nomadtest: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("nomadtest: %w", err)
	}
	args := []string{"agent", "-dev", "-bind", "127.0.0.1"}
	cfgPath := filepath.Join(dir, "dev.hcl")
	if err := os.WriteFile(cfgPath, []byte(devConfig(dataDir, a, opts.ACL)), 0o600); err != nil {
		return nil, fmt.Errorf("nomadtest: %w", err)
	}
	args = append(args, "-config", cfgPath)
	if opts.Config != "" {
		extra := filepath.Join(dir, "extra.hcl")
		if err := os.WriteFile(extra, []byte(opts.Config), 0o600); err != nil {
			return nil, fmt.Errorf("nomadtest: %w", err)
		}
		args = append(args, "-config", extra)
	}
	a.logFile, err = os.Create(a.LogPath)
	if err != nil {
		return nil, fmt.Errorf("nomadtest: %w", err)
	}

	a.cmd = exec.Command(bin, args...)
	a.cmd.Dir = dir
	a.cmd.Env = agentEnv()
	// A file, not a pipe: Wait returns as soon as the agent exits, even if
	// a plugin process it started still holds the descriptor.
	a.cmd.Stdout = a.logFile
	a.cmd.Stderr = a.logFile
	a.cmd.SysProcAttr = sysProcAttr()
	if err := a.cmd.Start(); err != nil {
		a.logFile.Close()
		return nil, fmt.Errorf("nomadtest: starting %s: %w", bin, err)
	}
	go func() {
		a.waitErr = a.cmd.Wait()
		close(a.exited)
	}()
	if a.wd, err = startWatchdog(a.cmd.Process.Pid, a.Dir); err != nil {
		a.cmd.Process.Kill()
		<-a.exited
		killGroup(a.cmd.Process.Pid)
		a.logFile.Close()
		return nil, fmt.Errorf("nomadtest: %w", err)
	}

	if err := a.waitReady(opts.ReadyTimeout, opts.ACL); err != nil {
		tail := a.LogTail(60)
		var exited bool
		select {
		case <-a.exited:
			exited = true
		default:
		}
		stopErr := a.Stop()
		if strings.Contains(tail, "address already in use") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		msg := fmt.Sprintf("nomadtest: %v\n--- end of the agent's log (%s) ---\n%s", err, a.LogPath, tail)
		if stopErr != nil && !exited {
			msg += "\n--- stopping it: " + stopErr.Error()
		}
		return nil, &launchError{msg: msg, err: err}
	}
	return a, nil
}

type launchError struct {
	msg string
	err error
}

func (e *launchError) Error() string { return e.msg }
func (e *launchError) Unwrap() error { return e.err }

// devConfig is the agent's dev.hcl.
func devConfig(dataDir string, a *Agent, acl bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "data_dir  = %s\n", strconv.Quote(dataDir))
	b.WriteString(`log_level = "DEBUG"

# No call home, and no Consul or Vault even if one runs on this machine:
# a test agent must not find or join anything but itself.
disable_update_check = true
consul {
  auto_advertise   = false
  server_auto_join = false
  client_auto_join = false
}

`)
	fmt.Fprintf(&b, "ports {\n  http = %d\n  rpc  = %d\n  serf = %d\n}\n\n", a.HTTPPort, a.RPCPort, a.SerfPort)
	if acl {
		b.WriteString("acl {\n  enabled = true\n}\n\n")
	}
	fmt.Fprintf(&b, `plugin "raw_exec" {
  config {
    enabled = true
  }
}

client {
  options {
    "fingerprint.denylist" = %q
  }
}
`, FingerprintDenylist)
	return b.String()
}

// agentEnv is the test process's environment without the variables that
// point Nomad, Consul or Vault clients somewhere else.
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

// waitReady polls the agent until it is ready, it exits, or timeout passes.
func (a *Agent) waitReady(timeout time.Duration, acl bool) error {
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var secret string
	if acl {
		secret = newUUID()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	waiting := "the HTTP API"
	for {
		ok, state := a.readyStep(ctx, acl, secret)
		if ok {
			return nil
		}
		if state != "" {
			waiting = state
		}
		select {
		case <-a.exited:
			return fmt.Errorf("nomad agent exited before it was ready (%v); it was waiting for %s", a.waitErr, waiting)
		case <-ctx.Done():
			return fmt.Errorf("nomad agent at %s not ready after %v; still waiting for %s", a.Addr, timeout, waiting)
		case <-tick.C:
		}
	}
}

// readyStep checks the next condition of readiness, and says what is
// missing when it is not met.
func (a *Agent) readyStep(ctx context.Context, acl bool, secret string) (bool, string) {
	call := func(method, path, token string, in, out any) error {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return a.CallAs(c, token, method, path, in, out)
	}
	var leader string
	if err := call("GET", "/v1/status/leader", "", nil, &leader); err != nil {
		return false, fmt.Sprintf("the HTTP API (%v)", err)
	}
	if leader == "" {
		return false, "a leader to be elected"
	}
	if acl && a.Token == "" {
		// The secret is ours, so that a bootstrap whose reply was lost is
		// no loss: the token then already works.
		var token struct{ SecretID string }
		err := call("POST", "/v1/acl/bootstrap", "", map[string]string{"BootstrapSecret": secret}, &token)
		if err != nil {
			if call("GET", "/v1/acl/token/self", secret, nil, nil) != nil {
				return false, fmt.Sprintf("the ACL bootstrap (%v)", err)
			}
			token.SecretID = secret
		}
		a.Token = token.SecretID
	}
	var nodes []struct {
		ID                    string
		Status                string
		SchedulingEligibility string
		Drivers               map[string]*struct {
			Detected          bool
			Healthy           bool
			HealthDescription string
		}
	}
	if err := call("GET", "/v1/nodes", a.Token, nil, &nodes); err != nil {
		return false, fmt.Sprintf("the node list (%v)", err)
	}
	if len(nodes) == 0 {
		return false, "the client node to register"
	}
	n := nodes[0]
	if n.Status != "ready" || n.SchedulingEligibility != "eligible" {
		return false, fmt.Sprintf("node %s to be ready and eligible (it is %s, %s)", n.ID, n.Status, n.SchedulingEligibility)
	}
	d := n.Drivers["raw_exec"]
	switch {
	case d == nil || !d.Detected:
		return false, fmt.Sprintf("node %s to detect the raw_exec driver", n.ID)
	case !d.Healthy:
		return false, fmt.Sprintf("node %s's raw_exec driver to be healthy (%s)", n.ID, d.HealthDescription)
	}
	a.NodeID = n.ID
	return true, ""
}

// Stop stops the agent: SIGINT, then SIGKILL if it has not exited within
// the grace period, and SIGKILL to whatever is left of its process group
// (its plugin processes) and to any process naming a path under its
// directory (task executors, in sessions of their own), then detaches any
// mount left under its directory.
// It removes the directory if Launch made it. It returns an error if the agent had to be killed or had exited on
// its own. Calling it again returns the same result.
func (a *Agent) Stop() error {
	a.stopOnce.Do(func() { a.stopErr = a.stop() })
	return a.stopErr
}

func (a *Agent) stop() error {
	a.wd.disarm()
	var err error
	select {
	case <-a.exited:
		err = fmt.Errorf("nomad agent %s had exited before it was stopped: %v", a.Addr, a.waitErr)
	default:
		interrupt(a.cmd.Process)
		select {
		case <-a.exited:
		case <-time.After(a.grace):
			a.cmd.Process.Kill()
			<-a.exited
			err = fmt.Errorf("nomad agent %s did not stop within %v of SIGINT; killed", a.Addr, a.grace)
		}
	}
	killGroup(a.cmd.Process.Pid)
	killStrays(a.Dir)
	unmountUnder(a.Dir) // left by an agent that was killed
	a.logFile.Close()
	if a.ownDir {
		if rmErr := os.RemoveAll(a.Dir); rmErr != nil && err == nil {
			err = fmt.Errorf("nomadtest: %w", rmErr)
		}
	}
	return err
}

// Pid is the agent's process ID, to read its CPU time from /proc.
func (a *Agent) Pid() int { return a.cmd.Process.Pid }

// Exited is closed when the agent's process has exited.
func (a *Agent) Exited() <-chan struct{} { return a.exited }

// LogTail returns the last n lines of the agent's log.
func (a *Agent) LogTail(n int) string {
	data, err := os.ReadFile(a.LogPath)
	if err != nil {
		return fmt.Sprintf("(reading the log: %v)", err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// newUUID returns a random UUID (version 4), the form Nomad's secrets take.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"paxcron/internal/freeport"
)

// etcdCluster is three etcd members on loopback, each on its own data
// folder, with etcd's defaults otherwise (every write fsynced), and one
// client over all three: etcd's Go client balances its requests round
// robin over the endpoints, so that two writes in three reach a follower
// and are forwarded to the leader.
type etcdCluster struct {
	bin     string
	procs   []*proc
	clients []string
	cli     *clientv3.Client
	value   string
}

func newEtcd(bin string) *etcdCluster {
	return &etcdCluster{bin: bin, value: strings.Repeat("v", valueBytes)}
}

func (e *etcdCluster) start(ctx context.Context, dir string) error {
	ports, err := freeport.Pick(6)
	if err != nil {
		return err
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("m%d=http://127.0.0.1:%d", i+1, ports[3+i]))
		e.clients = append(e.clients, fmt.Sprintf("http://127.0.0.1:%d", ports[i]))
	}
	token := filepath.Base(dir)
	for i := range 3 {
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[3+i])
		args := []string{
			"--name", fmt.Sprintf("m%d", i+1),
			"--data-dir", filepath.Join(dir, fmt.Sprintf("etcd-%d", i+1)),
			"--listen-client-urls", e.clients[i], "--advertise-client-urls", e.clients[i],
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-token", token,
			"--initial-cluster-state", "new",
			"--logger", "zap", "--log-level", "warn",
		}
		p, err := startProc(e.bin, args, nil, filepath.Join(dir, fmt.Sprintf("etcd-%d.log", i+1)))
		if err != nil {
			e.stop()
			return err
		}
		e.procs = append(e.procs, p)
	}
	e.cli, err = clientv3.New(clientv3.Config{
		Endpoints: e.clients, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		e.stop()
		return fmt.Errorf("paxcron-bench: etcd client: %w", err)
	}
	err = waitFor(ctx, "etcd", 30*time.Second, e.procs, func(ctx context.Context) error {
		for _, ep := range e.clients {
			st, err := e.cli.Status(ctx, ep)
			if err != nil {
				return err
			}
			if st.Leader == 0 {
				return fmt.Errorf("%s knows no leader", ep)
			}
		}
		_, err := e.cli.Put(ctx, "bench/ready", "1")
		return err
	})
	if err != nil {
		e.stop()
	}
	return err
}

// write puts a fresh key, bench/c<client>/<seq>, with a 256-byte value.
func (e *etcdCluster) write(ctx context.Context, client int, seq uint64) error {
	_, err := e.cli.Put(ctx, fmt.Sprintf("bench/c%03d/%09d", client, seq), e.value)
	return err
}

func (e *etcdCluster) serverPIDs() []int { return pidsOf(e.procs) }

func (e *etcdCluster) stop() error {
	var err error
	if e.cli != nil {
		err = e.cli.Close()
	}
	for _, p := range e.procs {
		p.kill()
	}
	e.procs, e.cli = nil, nil
	return err
}

// findEtcd returns the etcd binary to run: bin if set, else etcd on PATH,
// else what the install script installs.
func findEtcd(bin, installScript string, log func(string, ...any)) (string, error) {
	if bin != "" {
		return exec.LookPath(bin)
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	if installScript == "" {
		return "", errors.New("paxcron-bench: etcd is not on PATH (pass -etcd-bin, or -etcd-install to install it)")
	}
	log("etcd is not on PATH: running %s", installScript)
	cmd := exec.Command(installScript)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("paxcron-bench: etcd is not on PATH and %s could not install it: %w", installScript, err)
	}
	return exec.LookPath(strings.TrimSpace(string(out)))
}

// etcdVersion is the first line of `etcd --version`.
func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first)
}

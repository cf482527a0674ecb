package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"paxcron/internal/api"
)

// Replica ports inside each container.
const (
	apiPort    = 4750
	paxosPort  = 4751
	gossipPort = 4752
)

// apiToken is the replicas' write token.
const apiToken = "paxcron-chaos-write-token-0123456789"

// cluster is three `paxcron server` replicas, each a container on two
// networks: peers, which carries Paxos, gossip and forwarded requests
// (partitions cut it), and nomadNet, by which a replica reaches Nomad on
// the host and the harness reaches its API. Containers on nomadNet cannot
// reach one another (inter-container traffic is off there), so a replica
// cut off peers is cut off its peers for real.
type cluster struct {
	d                *docker
	dir              string
	peers, nomadNet  network
	nomadAddr        string
	keyDir           string
	mu               sync.Mutex
	savedLogs        [3][]byte // output of containers removed (restart, disk loss)
	peerIP, apiIP    [3]netip.Addr
	dataDir, clockDr [3]string
}

func containerName(id int) string { return fmt.Sprintf("%sreplica-%d", Prefix, id) }

func newCluster(d *docker, dir string, peers, nomadNet network, nomadAddr string) (*cluster, error) {
	c := &cluster{d: d, dir: dir, peers: peers, nomadNet: nomadNet, nomadAddr: nomadAddr, keyDir: filepath.Join(dir, "key")}
	if err := os.MkdirAll(c.keyDir, 0o700); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.keyDir, "cluster.key"), []byte("paxcron-chaos-cluster-key-0123456789abcdef\n"), 0o600); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	for i := range 3 {
		c.peerIP[i], c.apiIP[i] = peers.addr(11+i), nomadNet.addr(11+i)
		c.dataDir[i] = filepath.Join(dir, fmt.Sprintf("replica-%d", i+1), "data")
		c.clockDr[i] = filepath.Join(dir, fmt.Sprintf("replica-%d", i+1), "clock")
		for _, p := range []string{c.dataDir[i], c.clockDr[i]} {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return nil, fmt.Errorf("chaos: %w", err)
			}
		}
	}
	return c, nil
}

// create makes replica id's container on both networks and starts it.
// bootstrap is for the first start of the new cluster only: a replica
// started again empty (its disk lost) must rejoin as a learner.
func (c *cluster) create(ctx context.Context, id int, bootstrap bool) error {
	i := id - 1
	var join []string
	for _, ip := range c.peerIP {
		join = append(join, fmt.Sprintf("%s:%d", ip, gossipPort))
	}
	args := []string{"create", "--name", containerName(id), "--label", "paxcron-chaos=1",
		"--network", c.peers.Name, "--ip", c.peerIP[i].String(),
		"-v", c.dataDir[i] + ":/data", "-v", c.clockDr[i] + ":/clock:ro", "-v", c.keyDir + ":/key:ro",
		Image, "server",
		"-replica-id", fmt.Sprint(id), "-data-dir", "/data", "-cluster-members", "1,2,3",
		"-cluster-key-file", "/key/cluster.key",
		"-bind-gossip", fmt.Sprintf("0.0.0.0:%d", gossipPort), "-advertise-gossip", fmt.Sprintf("%s:%d", c.peerIP[i], gossipPort),
		"-cluster-join", strings.Join(join, ","),
		"-bind-paxos", fmt.Sprintf("0.0.0.0:%d", paxosPort), "-advertise-paxos", fmt.Sprintf("%s:%d", c.peerIP[i], paxosPort),
		"-bind-http", fmt.Sprintf("0.0.0.0:%d", apiPort), "-advertise-http", fmt.Sprintf("%s:%d", c.peerIP[i], apiPort),
		"-api-write-tokens", apiToken, "-nomad-address", c.nomadAddr,
		"-log-level", "debug", "-log-format", "json",
		"-test-clock-offset-file", "/clock/offset",
	}
	if bootstrap {
		args = append(args, "-bootstrap")
	}
	if _, err := c.d.run(ctx, args...); err != nil {
		return err
	}
	if _, err := c.d.run(ctx, "network", "connect", "--ip", c.apiIP[i].String(), c.nomadNet.Name, containerName(id)); err != nil {
		return err
	}
	_, err := c.d.run(ctx, "start", containerName(id))
	return err
}

// signal sends sig (KILL, STOP, CONT) to the replica's process.
func (c *cluster) signal(ctx context.Context, id int, sig string) error {
	_, err := c.d.run(ctx, "kill", "--signal", sig, containerName(id))
	return err
}

// restart starts a killed replica again, on its disk, in a container
// made anew without -bootstrap: started again, the first container would
// run its command as created, -bootstrap and all, which a store holding
// state refuses (as it should a unit file that kept the flag).
func (c *cluster) restart(ctx context.Context, id int) error {
	if err := c.removeKeepingLogs(ctx, id); err != nil {
		return err
	}
	return c.create(ctx, id, false)
}

// cut takes the replica off the peers' network; join puts it back at
// its address.
func (c *cluster) cut(ctx context.Context, id int) error {
	_, err := c.d.run(ctx, "network", "disconnect", "--force", c.peers.Name, containerName(id))
	return err
}

func (c *cluster) join(ctx context.Context, id int) error {
	_, err := c.d.run(ctx, "network", "connect", "--ip", c.peerIP[id-1].String(), c.peers.Name, containerName(id))
	return err
}

// removeKeepingLogs keeps a stopped replica's output (the checker reads every
// process's log) and removes its container.
func (c *cluster) removeKeepingLogs(ctx context.Context, id int) error {
	out, err := c.d.logs(ctx, containerName(id))
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.savedLogs[id-1] = append(c.savedLogs[id-1], out...)
	c.mu.Unlock()
	_, err = c.d.run(ctx, "rm", "-f", containerName(id))
	return err
}

// loseDisk kills the replica, keeps its output, removes its container and
// deletes its data folder.
func (c *cluster) loseDisk(ctx context.Context, id int) error {
	if err := c.signal(ctx, id, "KILL"); err != nil {
		return err
	}
	if err := c.removeKeepingLogs(ctx, id); err != nil {
		return err
	}
	if err := os.RemoveAll(c.dataDir[id-1]); err != nil {
		return fmt.Errorf("chaos: deleting replica %d's data folder: %w", id, err)
	}
	return os.MkdirAll(c.dataDir[id-1], 0o755)
}

// setClock writes the replica's test clock offset (the server re-reads
// it every 250 ms); the rename makes the change atomic.
func (c *cluster) setClock(id int, offset time.Duration) error {
	tmp := filepath.Join(c.clockDr[id-1], ".offset.tmp")
	if err := os.WriteFile(tmp, []byte(offset.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(c.clockDr[id-1], "offset")); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

func (c *cluster) client(id int) *api.Client {
	cl, err := api.NewClient(api.ClientConfig{Address: fmt.Sprintf("http://%s:%d", c.apiIP[id-1], apiPort), Token: apiToken, Timeout: 3 * time.Second})
	if err != nil {
		panic(err) // the address is built here
	}
	return cl
}

// statuses asks every replica for its status at once; nil: no answer.
func (c *cluster) statuses(ctx context.Context) [3]*api.Status {
	var out [3]*api.Status
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if st, err := c.client(i + 1).Status(ctx); err == nil {
				out[i] = &st
			}
		})
	}
	wg.Wait()
	return out
}

// leader is the replica that says it launches (0: none).
func leaderOf(sts [3]*api.Status) int {
	for i, st := range sts {
		if st != nil && st.Launching {
			return i + 1
		}
	}
	return 0
}

// waitHealthy waits, at most timeout, until a replica launches and all
// three answer, none rebuilding; it returns the leader it found last
// (0: none) and whether the cluster was healthy.
func (c *cluster) waitHealthy(ctx context.Context, timeout time.Duration) (int, bool) {
	deadline := time.Now().Add(timeout)
	leader := 0
	for {
		sts := c.statuses(ctx)
		leader = leaderOf(sts)
		healthy := leader != 0
		for _, st := range sts {
			healthy = healthy && st != nil && !st.Rebuilding
		}
		if healthy || time.Now().After(deadline) || ctx.Err() != nil {
			return leader, healthy
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// describe is one line on the replicas: each one's role, or down.
func describe(sts [3]*api.Status) string {
	var parts []string
	for i, st := range sts {
		switch {
		case st == nil:
			parts = append(parts, fmt.Sprintf("%d: no answer", i+1))
		case st.Launching:
			parts = append(parts, fmt.Sprintf("%d: leader (applied %d)", i+1, st.Applied))
		case st.Rebuilding:
			parts = append(parts, fmt.Sprintf("%d: rebuilding", i+1))
		default:
			parts = append(parts, fmt.Sprintf("%d: %s", i+1, st.Role))
		}
	}
	return strings.Join(parts, ", ")
}

// outputs are every replica's whole output: what its removed containers
// wrote, then what the current one did.
func (c *cluster) outputs(ctx context.Context) ([3][]byte, error) {
	var out [3][]byte
	for i := range 3 {
		c.mu.Lock()
		out[i] = append([]byte(nil), c.savedLogs[i]...)
		c.mu.Unlock()
		cur, err := c.d.logs(ctx, containerName(i+1))
		if err != nil {
			return out, err
		}
		out[i] = append(out[i], cur...)
	}
	return out, nil
}

// remove removes the containers.
func (c *cluster) remove(ctx context.Context) {
	for id := 1; id <= 3; id++ {
		c.d.run(ctx, "rm", "-f", containerName(id))
	}
}

// launchRecords reads the launch outcomes a replica logged (one JSON line
// per launch: "launch dispatched", "launch skipped"...). A line that does
// not parse is passed over: a replica SIGKILLed mid-write leaves one cut
// short. Lines have no length limit: a scanner's ended the records of a
// replica at the first line over it, quietly.
func launchRecords(output []byte, source string) []Record {
	var recs []Record
	for line := range bytes.SplitSeq(output, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"msg":"launch `)) {
			continue
		}
		var l struct {
			Time     time.Time `json:"time"`
			Msg      string    `json:"msg"`
			Identity string    `json:"identity"`
			Outcome  string    `json:"outcome"`
			Child    string    `json:"child"`
			Reason   string    `json:"reason"`
		}
		if json.Unmarshal(line, &l) != nil || l.Outcome == "" || l.Identity == "" {
			continue // "launch started" has no outcome
		}
		recs = append(recs, Record{Identity: l.Identity, Outcome: l.Outcome, ChildID: l.Child, Reason: l.Reason, Source: source, At: l.Time})
	}
	return recs
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"paxcron/cron/state"
	"paxcron/internal/api"
	"paxcron/internal/freeport"
)

// API targets: which replica each client sends its writes to.
const (
	// targetSpread: each client sends its writes round robin over the
	// three replicas, as etcd's client balances its requests, so that two
	// writes in three reach a follower, which forwards them to the leader.
	targetSpread = "spread"
	// targetLeader: every client writes to the leader.
	targetLeader = "leader"
	// targetClient: one api.Client given all three replicas, as etcd's
	// client is given all three members; it sends its calls to the
	// leader once a follower's answer names it.
	targetClient = "client"
)

const apiToken = "paxcron-bench-write-token-0123456789"

// paxcronAPI is three `paxcron server` processes on loopback, each on its
// own Pebble store, with static peers, backups off and no reachable
// Nomad: a write is a POST /v1/jobs of one new job with skip_nomad_check
// (the server asks nothing of Nomad for it), which the leader reads,
// proposes and answers once applied.
type paxcronAPI struct {
	bin     string
	target  string
	clients int
	procs   []*proc
	addrs   []string // http://127.0.0.1:port, by replica ID - 1
	leader  int      // replica ID
	http    *http.Client
	spec    api.Spec
	// stream: writes go over each replica's API stream, through these
	// clients (by replica ID - 1), shared by every client goroutine.
	stream  bool
	streams []*api.Client
	// all: with targetClient, the one client over every replica.
	all *api.Client
}

func newPaxcronAPI(bin, target string, stream bool, clients int) (*paxcronAPI, error) {
	spec, err := paddedSpec()
	if err != nil {
		return nil, err
	}
	return &paxcronAPI{bin: bin, target: target, stream: stream, clients: clients, spec: spec}, nil
}

// jobName is client's seq-th job: fixed width, so that every command is
// the same size.
func jobName(client int, seq uint64) string { return fmt.Sprintf("b%03d-%09d", client, seq) }

// paddedSpec is the job every write puts: a daily schedule and a payload
// sized so that the encoded command (state.Encode of the PutJob the
// leader proposes) is valueBytes-8 bytes, plus the 8-byte proposal ID the
// node puts in front: valueBytes replicated, as the log's commands.
func paddedSpec() (api.Spec, error) {
	spec := api.Spec{Schedule: "@daily", NomadJob: "bench"}
	for pad := 0; pad < valueBytes; pad++ {
		spec.Payload = bytes.Repeat([]byte{'p'}, pad)
		js, err := spec.JobSpec()
		if err != nil {
			return spec, fmt.Errorf("paxcron-bench: the benchmark job: %w", err)
		}
		enc, err := state.Encode(state.PutJob{Name: jobName(0, 0), Spec: js, At: time.Now()})
		if err != nil {
			return spec, fmt.Errorf("paxcron-bench: encoding the benchmark job: %w", err)
		}
		if len(enc) >= valueBytes-8 {
			return spec, nil
		}
	}
	panic("paxcron-bench: no payload makes the command valueBytes long")
}

func (p *paxcronAPI) start(ctx context.Context, dir string) error {
	ports, err := freeport.Pick(7)
	if err != nil {
		return err
	}
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte("paxcron-bench-cluster-key-0123456789\n"), 0o600); err != nil {
		return fmt.Errorf("paxcron-bench: %w", err)
	}
	var peers []string
	for i := range 3 {
		p.addrs = append(p.addrs, fmt.Sprintf("http://127.0.0.1:%d", ports[i]))
		peers = append(peers, fmt.Sprintf("%d=127.0.0.1:%d/127.0.0.1:%d", i+1, ports[3+i], ports[i]))
	}
	// Nothing listens on ports[6]: the replicas find no Nomad, which only
	// keeps them from launching.
	nomadAddr := fmt.Sprintf("http://127.0.0.1:%d", ports[6])
	for i := range 3 {
		args := []string{"server", "-bootstrap",
			"-replica-id", fmt.Sprint(i + 1), "-data-dir", filepath.Join(dir, fmt.Sprintf("paxcron-%d", i+1)),
			"-cluster-members", "1,2,3", "-cluster-key-file", keyFile,
			"-cluster-peers", strings.Join(append(append([]string{}, peers[:i]...), peers[i+1:]...), ","),
			"-bind-http", fmt.Sprintf("127.0.0.1:%d", ports[i]), "-bind-paxos", fmt.Sprintf("127.0.0.1:%d", ports[3+i]),
			"-api-write-tokens", apiToken, "-nomad-address", nomadAddr,
			"-backup-url", "off", "-log-level", "warn",
		}
		pr, err := startProc(p.bin, args, nil, filepath.Join(dir, fmt.Sprintf("paxcron-%d.log", i+1)))
		if err != nil {
			p.stop()
			return err
		}
		p.procs = append(p.procs, pr)
	}
	// One connection per client and replica stays open: a closed loop
	// never has more requests in flight than clients.
	p.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 3 * p.clients, MaxIdleConnsPerHost: p.clients, IdleConnTimeout: time.Minute,
	}}
	if p.stream {
		for _, addr := range p.addrs {
			c, err := api.NewClient(api.ClientConfig{Address: addr, Token: apiToken, Timeout: 30 * time.Second, Stream: true, NoLeaderWait: -1})
			if err != nil {
				p.stop()
				return err
			}
			p.streams = append(p.streams, c)
		}
	}
	if p.target == targetClient {
		p.all, err = api.NewClient(api.ClientConfig{Address: strings.Join(p.addrs, ","), Token: apiToken,
			Timeout: 30 * time.Second, Stream: p.stream, NoLeaderWait: -1})
		if err != nil {
			p.stop()
			return err
		}
	}
	err = waitFor(ctx, "paxcron", 30*time.Second, p.procs, func(ctx context.Context) error {
		leader, err := p.findLeader(ctx)
		if err != nil {
			return err
		}
		p.leader = leader
		// A write through every replica: the followers know where to
		// forward.
		for id := 1; id <= 3; id++ {
			if err := p.put(ctx, id, fmt.Sprintf("ready-%d", id)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		p.stop()
	}
	return err
}

// findLeader returns the replica that says it leads, once the other two
// name it too.
func (p *paxcronAPI) findLeader(ctx context.Context) (int, error) {
	var leaders []uint64
	for id := 1; id <= 3; id++ {
		var st api.Status
		if err := p.get(ctx, id, "/v1/status", &st); err != nil {
			return 0, err
		}
		leaders = append(leaders, st.Leader)
		if st.Leader == uint64(id) && st.Role != "leader" {
			return 0, fmt.Errorf("replica %d is named leader but is %s", id, st.Role)
		}
	}
	if leaders[0] == 0 || leaders[0] != leaders[1] || leaders[1] != leaders[2] {
		return 0, fmt.Errorf("the replicas name leaders %v", leaders)
	}
	return int(leaders[0]), nil
}

func (p *paxcronAPI) get(ctx context.Context, id int, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.addrs[id-1]+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// put creates the job name through replica id's API, as a client of the
// API would: a JSON api.PutJobs body, and the answer read whole.
func (p *paxcronAPI) put(ctx context.Context, id int, name string) error {
	if p.stream {
		return p.putThrough(ctx, p.streams[id-1], name)
	}
	body, err := json.Marshal(api.PutJobs{Jobs: []api.PutJob{{Name: name, Spec: p.spec}}, SkipNomadCheck: true})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.addrs[id-1]+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/jobs to replica %d: %s: %s", id, resp.Status, strings.TrimSpace(string(b)))
	}
	var res api.PutJobsResult
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("POST /v1/jobs to replica %d: %w", id, err)
	}
	if len(res.Jobs) != 1 || !res.Jobs[0].Created {
		return fmt.Errorf("POST /v1/jobs to replica %d: job %s not created: %s", id, name, b)
	}
	return nil
}

// putThrough creates the job name through c.
func (p *paxcronAPI) putThrough(ctx context.Context, c *api.Client, name string) error {
	res, err := c.PutJobs(ctx, api.PutJobs{Jobs: []api.PutJob{{Name: name, Spec: p.spec}}, SkipNomadCheck: true})
	if err != nil {
		return fmt.Errorf("POST /v1/jobs through %s: %w", c.Address(), err)
	}
	if len(res.Jobs) != 1 || !res.Jobs[0].Created {
		return fmt.Errorf("POST /v1/jobs through %s: job %s not created: %+v", c.Address(), name, res)
	}
	return nil
}

func (p *paxcronAPI) write(ctx context.Context, client int, seq uint64) error {
	if p.all != nil {
		return p.putThrough(ctx, p.all, jobName(client, seq))
	}
	id := p.leader
	if p.target == targetSpread {
		id = int((uint64(client)+seq)%3) + 1
	}
	return p.put(ctx, id, jobName(client, seq))
}

func (p *paxcronAPI) serverPIDs() []int { return pidsOf(p.procs) }

func (p *paxcronAPI) stop() error {
	for _, pr := range p.procs {
		pr.kill()
	}
	if p.http != nil {
		p.http.CloseIdleConnections()
	}
	for _, c := range p.streams {
		c.Close()
	}
	if p.all != nil {
		p.all.Close()
	}
	p.procs, p.streams, p.all = nil, nil, nil
	return nil
}

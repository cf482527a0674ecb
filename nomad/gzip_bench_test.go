package nomad_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"paxcron/internal/procfs"
	"paxcron/nomad"
)

// BenchmarkDispatchReplyGzip measures what asking for gzipped replies
// costs a dispatch, on one Nomad dev agent: rounds of PAXCRON_GZIP_N
// [300] dispatches, 16 at a time, through the Go API client as it comes
// (it asks for gzip on every call, and Nomad compresses every reply asked
// so) and through nomad.Client's transport, which takes the ask off, the
// order turned each round. For each: the agent's CPU per dispatch (from
// /proc), this process's (the client's), and dispatches per second; the
// ratios plain / gzip are paired by round, then the median taken.
// PAXCRON_GZIP_ROUNDS [6].
func BenchmarkDispatchReplyGzip(b *testing.B) {
	cfg := launchConfigFromEnv(b)
	agent, a := benchAgent(b, cfg)
	n := envInt(b, "PAXCRON_GZIP_N", 300)
	rounds := envInt(b, "PAXCRON_GZIP_ROUNDS", 6)
	const parents, workers = 8, 16
	for i := range parents {
		if _, _, err := a.Jobs().Register(benchParentFor(setupUnplaceable, fmt.Sprintf("gz-%d", i)), nil); err != nil {
			b.Fatal(err)
		}
	}
	// "gzip": the Go API client as it comes, over a pool as large as
	// nomad.Client's; "plain": nomad.Client's own transport.
	tr := &http.Transport{MaxIdleConns: workers, MaxIdleConnsPerHost: workers, IdleConnTimeout: time.Minute}
	b.Cleanup(tr.CloseIdleConnections)
	gz, err := api.NewClient(&api.Config{Address: agent.Addr, SecretID: agent.Token, HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		b.Fatal(err)
	}
	ncfg := nomad.DefaultConfig()
	ncfg.Address, ncfg.Token = agent.Addr, agent.Token
	nc, err := nomad.New(ncfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	clients := map[string]*api.Client{"gzip": gz, "plain": nc.API()}
	type result struct{ agentUS, clientUS, perSec float64 }
	run := func(mode string) result {
		c := clients[mode]
		var next atomic.Int64
		a0, err := procfs.Host.Stat(agent.Pid())
		if err != nil {
			b.Fatal(err)
		}
		c0, start := selfCPUTime(), time.Now()
		err = parallel(n, workers, func(int) error {
			i := next.Add(1)
			_, _, err := c.Jobs().Dispatch(fmt.Sprintf("gz-%d", i%parents), nil, nil, "", nil)
			return err
		})
		if err != nil {
			b.Fatalf("%s: %v", mode, err)
		}
		wall, c1 := time.Since(start), selfCPUTime()
		a1, err := procfs.Host.Stat(agent.Pid())
		if err != nil {
			b.Fatal(err)
		}
		agentCPU := time.Duration(a1.Ticks()-a0.Ticks()) * time.Second / procfs.UserHZ
		return result{
			agentUS:  float64(agentCPU.Microseconds()) / float64(n),
			clientUS: float64((c1 - c0).Microseconds()) / float64(n),
			perSec:   float64(n) / wall.Seconds(),
		}
	}
	run("gzip") // warm-up: connections, the agent's first dispatches
	run("plain")
	var agentRatio, clientRatio, rateRatio []float64
	for r := range rounds {
		order := []string{"gzip", "plain"}
		if r%2 == 1 {
			order = []string{"plain", "gzip"}
		}
		got := map[string]result{}
		for _, m := range order {
			got[m] = run(m)
		}
		g, p := got["gzip"], got["plain"]
		fmt.Printf("round %d: gzip agent %.0f µs client %.0f µs %.0f/s; plain agent %.0f µs client %.0f µs %.0f/s\n",
			r+1, g.agentUS, g.clientUS, g.perSec, p.agentUS, p.clientUS, p.perSec)
		agentRatio = append(agentRatio, p.agentUS/g.agentUS)
		clientRatio = append(clientRatio, p.clientUS/g.clientUS)
		rateRatio = append(rateRatio, p.perSec/g.perSec)
	}
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	fmt.Printf("plain / gzip, medians of %d rounds of %d dispatches: agent CPU per dispatch %.2fx, client CPU %.2fx, dispatches/s %.2fx\n",
		rounds, n, med(agentRatio), med(clientRatio), med(rateRatio))
}

// selfCPUTime is this process's CPU time, finer than /proc's ticks.
func selfCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

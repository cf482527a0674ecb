package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"paxcron/internal/api"
	"paxcron/paxos"
)

// TestForwardReusesConnections: a follower forwarding concurrent writes
// to the leader keeps its connections to the leader open between rounds,
// rather than dialling again for nearly every request (net/http's default
// keeps two idle connections per host).
func TestForwardReusesConnections(t *testing.T) {
	c := startCluster(t)
	leader := c.leader()
	follower := leader%3 + 1
	dials := countDials(c.servers[follower-1])
	fc := c.client(follower, writeToken)
	const inFlight, rounds = 16, 4
	for round := range rounds {
		var wg sync.WaitGroup
		for i := range inFlight {
			wg.Go(func() {
				name := fmt.Sprintf("fwd-%d-%d", round, i)
				put := api.PutJobs{Jobs: []api.PutJob{{Name: name, Spec: api.Spec{Schedule: "@daily", NomadJob: "p"}}}}
				if _, err := fc.PutJobs(context.Background(), put); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	// The first round may dial once per request in flight; later rounds
	// find those connections idle. Without reuse it is about
	// inFlight*rounds.
	if n := dials.Load(); n > inFlight+rounds {
		t.Errorf("the follower dialled the leader %d times for %d rounds of %d forwarded writes; want at most %d", n, rounds, inFlight, inFlight+rounds)
	}
}

// countDials counts the connections s opens to forward calls to the
// leader (bundles, and calls proxied alone).
func countDials(s *Server) *atomic.Int64 {
	var dials atomic.Int64
	dial := s.proxy.DialContext
	s.proxy.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	return &dials
}

// TestNoLeaderErrorsNameTheCause: a 503 says why it is one. A replica
// elected but not yet serving (catching up, or before its lease) once
// answered that it could not reach the API of the leader, naming itself.
func TestNoLeaderErrorsNameTheCause(t *testing.T) {
	s := &Server{cfg: Config{ID: 2}}
	for _, tc := range []struct {
		err       error
		want, not string
	}{
		{s.errNoLeader(paxos.None), "no leader right now", "cannot reach"},
		{s.errNoLeader(2), "replica 2 (this one) was just elected", "cannot reach"},
		{s.errNoLeader(3), "replica 3 leads but this replica cannot reach its API", "this one"},
		{errForwardedHere(3), "no longer leads; replica 3 does", "cannot reach"},
		{errForwardedHere(paxos.None), "no leader is known yet", "cannot reach"},
	} {
		var e *api.Error
		if !errors.As(tc.err, &e) || e.Status != http.StatusServiceUnavailable ||
			!strings.Contains(e.Message, tc.want) || strings.Contains(e.Message, tc.not) {
			t.Errorf("%v: want a 503 saying %q and not %q", tc.err, tc.want, tc.not)
		}
	}
}

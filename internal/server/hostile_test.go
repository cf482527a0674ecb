package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"paxcron/internal/api"
	"paxcron/internal/transport"
	"paxcron/paxos"
)

// TestHostileInput throws at a running replica what a stranger, a broken
// peer or a careless script might send: each gets a clear refusal, the
// replica keeps serving, and nothing is lost or changed.
func TestHostileInput(t *testing.T) {
	c := startCluster(t)
	leader := c.leader()
	ctx := context.Background()
	w := c.client(leader, writeToken)
	if _, err := w.PutJobs(ctx, everySecond("keep")); err != nil {
		t.Fatal(err)
	}
	target := c.servers[leader-1]

	t.Run("paxos port from strangers", func(t *testing.T) {
		before := target.TransportStats()
		addr := target.PaxosAddr()
		send := func(b []byte) {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write(b)
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			io.Copy(io.Discard, conn) // until the replica hangs up
		}
		send([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) // not the protocol
		send(bytes.Repeat([]byte{0xff}, 4096))            // garbage
		var hello [52]byte                                // the right magic, unknown sender
		copy(hello[:], "PXT\x01")
		binary.BigEndian.PutUint64(hello[4:], 99)
		binary.BigEndian.PutUint64(hello[12:], uint64(leader))
		send(hello[:])
		// A process with the wrong cluster key, claiming to be replica 2.
		as := leader%3 + 1 // claims to be another member
		impostor, err := transport.New(transport.Config{
			ID: as, Peers: map[paxos.ReplicaID]string{leader: addr}, Key: []byte("not-the-cluster-key-0123456789"),
			ListenAddr: "127.0.0.1:0", Handler: func(paxos.Message) {}, Limits: transport.DefaultLimits(),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer impostor.Close()
		impostor.Send(paxos.Message{Type: paxos.MsgHeartbeat, From: as, To: leader, Ballot: paxos.Ballot{Round: 99, Replica: as}, Round: 1})
		eventually(t, "the impostor's handshake refused", func() bool {
			return target.TransportStats().AuthFailures > before.AuthFailures
		})
		if target.Node().Status().Role != paxos.Leader {
			t.Fatalf("a stranger's ballot 99 deposed the leader")
		}
	})

	t.Run("replayed and stale messages from a member", func(t *testing.T) {
		// A key holder replays what a member might: old accepts, with
		// other values, for slots that are chosen. Paxos refuses lower
		// ballots; nothing chosen changes.
		hashBefore := target.Node().Status()
		member, err := transport.New(transport.Config{
			ID: leader%3 + 1, Peers: map[paxos.ReplicaID]string{leader: target.PaxosAddr()}, Key: c.servers[0].cfg.ClusterKey,
			ListenAddr: "127.0.0.1:0", Handler: func(paxos.Message) {}, Limits: transport.DefaultLimits(),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer member.Close()
		stale := paxos.Ballot{Round: 1, Replica: leader%3 + 1}
		for slot := uint64(1); slot <= hashBefore.Chosen; slot++ {
			member.Send(paxos.Message{Type: paxos.MsgAccept, From: stale.Replica, To: leader, Ballot: stale, Start: slot,
				Entries: []paxos.Entry{{Slot: slot, Ballot: stale, Kind: paxos.EntryCommand, Data: []byte("forged")}}})
		}
		time.Sleep(300 * time.Millisecond) // let them arrive; nothing may come of them
		c.waitChildren(c.nomad.count() + 1)
		c.agree(t)
	})

	t.Run("API path tricks and bad tokens", func(t *testing.T) {
		base := "http://" + target.HTTPAddr()
		for _, tc := range []struct {
			method, path, token string
			want                int
		}{
			{"GET", "/v1/jobs/..%2F..%2Fetc%2Fpasswd", readToken, 400},
			{"GET", "/v1/jobs/%2e%2e", readToken, 404}, // cleaned to /v1/: no such API
			{"GET", "/v1/jobs/" + strings.Repeat("a", 300), readToken, 400},
			{"GET", "/v1/jobs/caf%C3%A9", readToken, 400},
			{"DELETE", "/v1/jobs/keep%00", writeToken, 400},
			{"POST", "/v1/jobs/..%2Fkeep/pause", writeToken, 400},
			{"GET", "/v1/jobs/../jobs/keep/../../status", readToken, 200}, // dot segments resolve: the status, nothing else
			{"GET", "/v1/jobs", "", 401},                                  // no token
			{"GET", "/v1/jobs", "Bearer", 401},                            // a token of nothing
			{"DELETE", "/v1/jobs/keep", readToken, 403},                   // a read token writing
			{"DELETE", "/v1/jobs/keep", strings.Repeat("x", 64), 401},     // an unknown token
			{"POST", "/v1/jobs?skip_nomad_check=1", writeToken, 400},      // no body
			{"PUT", "/v1/jobs", writeToken, 404},                          // no such method: no such API
		} {
			r := httpDo(t, tc.method, base+tc.path, tc.token, "application/json", nil)
			if r.code != tc.want {
				t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, r.code, r.body, tc.want)
			}
			if r.code >= 400 && !strings.Contains(r.body, `"error"`) {
				t.Errorf("%s %s: the refusal is not a JSON error: %s", tc.method, tc.path, r.body)
			}
		}
		// Deeply nested JSON and a huge HCL string are refused, not crashed on.
		deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
		if r := httpDo(t, "POST", base+"/v1/jobs", writeToken, "application/json", []byte(deep)); r.code != 400 {
			t.Errorf("deep JSON: %d", r.code)
		}
		long := []byte("cron \"x\" {\n schedule = \"" + strings.Repeat("*", 3<<20) + "\"\n}\n")
		if r := httpDo(t, "POST", base+"/v1/jobs", writeToken, "application/hcl", long); r.code != 400 && r.code != 413 {
			t.Errorf("a 3 MiB schedule: %d", r.code)
		}
		// A request that never finishes its body does not hold the server.
		conn, err := net.Dial("tcp", target.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000000\r\n\r\n{", writeToken)
		defer conn.Close()
	})

	// The replica still serves, and lost nothing.
	jobs, err := c.client(leader, readToken).Jobs(ctx, api.ReadOptions{})
	if err != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].Name != "keep" {
		t.Fatalf("after the hostile input: %+v, %v", jobs, err)
	}
	if _, err := w.PutJobs(ctx, everySecond("after")); err != nil {
		t.Fatalf("a write after the hostile input: %v", err)
	}
	c.agree(t)
}

// agree waits until every replica applied the same prefix, with the same
// state hash.
func (c *cluster) agree(t *testing.T) {
	t.Helper()
	eventually(t, "the replicas to agree", func() bool {
		var first Status
		for i, s := range c.servers {
			if s == nil {
				continue
			}
			st := s.Node().Status()
			if i == 0 || first.Applied == 0 {
				first = Status{Applied: st.Applied, Hash: st.Hash}
				continue
			}
			if st.Applied != first.Applied || st.Hash != first.Hash {
				return false
			}
		}
		return true
	})
}

// Status is what agree compares.
type Status struct {
	Applied uint64
	Hash    uint64
}

package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"paxcron/internal/api"
	"paxcron/internal/transport"
	"paxcron/paxos"
)

// TestHostileInput throws at a running replica what a stranger, a broken
// or hostile key holder, or a careless script might send: each gets a
// clear refusal, the replica keeps serving, and nothing committed is
// lost or changed.
func TestHostileInput(t *testing.T) {
	c := startCluster(t)
	leader := c.leader()
	ctx := context.Background()
	w := c.client(leader, writeToken)
	if _, err := w.PutJobs(ctx, everySecond("keep")); err != nil {
		t.Fatal(err)
	}
	keep, err := w.Job(ctx, "keep", 0, api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitChildren(1)
	target := c.servers[leader-1]

	// A stranger that sends the start of a frame, a length of 4 GiB, and
	// stalls: it is cut off after the handshake timeout (checked at the
	// end, so that the rest runs meanwhile).
	stalled := dialPaxos(t, target)
	stalled.Write([]byte{0xff, 0xff, 0xff, 0xff})
	authBefore := target.TransportStats().AuthFailures

	// Each part aims at the replica that leads when it starts (a loaded
	// machine may move the leadership meanwhile).
	lead := func() *Server { return c.servers[c.leader()-1] }
	t.Run("paxos port from strangers", func(t *testing.T) { strangers(t, c, lead()) })
	t.Run("a key holder's hostile frames and replays", func(t *testing.T) { keyHolder(t, c, lead()) })
	t.Run("API path tricks and bad tokens", func(t *testing.T) { apiTricks(t, lead()) })
	t.Run("API bodies", func(t *testing.T) { apiBodies(t, lead()) })

	expectClosed(t, stalled, "the stranger stalled in its hello")
	if target.TransportStats().AuthFailures <= authBefore {
		t.Errorf("the stalled hello was not counted as an authentication failure")
	}

	// The replica still serves, and lost nothing: the job is as it was,
	// still launching, and a write commits on every replica.
	l := c.leader()
	jobs, err := c.client(l, readToken).Jobs(ctx, api.ReadOptions{})
	if err != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].Name != "keep" {
		t.Fatalf("after the hostile input: %+v, %v", jobs, err)
	}
	if j, err := c.client(l, readToken).Job(ctx, "keep", 0, api.ReadOptions{}); err != nil || j.Version != keep.Version || j.Paused {
		t.Fatalf("the job changed: %+v, %v; was version %d", j, err, keep.Version)
	}
	c.waitChildren(len(c.nomad.Children()) + 1)
	if _, err := c.client(l, writeToken).PutJobs(ctx, everySecond("after")); err != nil {
		t.Fatalf("a write after the hostile input: %v", err)
	}
	c.agree(t)
}

// strangers: processes without the cluster key on the Paxos port.
func strangers(t *testing.T, c *cluster, target *Server) {
	leader := target.cfg.ID
	before := target.TransportStats()
	send := func(b []byte) {
		conn := dialPaxos(t, target)
		conn.Write(b)
		expectClosed(t, conn, fmt.Sprintf("a stranger's %q", b[:min(len(b), 8)]))
	}
	send([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) // not the protocol
	send(bytes.Repeat([]byte{0xff}, 4096))            // garbage
	// A frame's length prefix (2 GiB) and a kilobyte of it, as a peer
	// would send after the handshake: it is not a hello.
	send(append([]byte{0x7f, 0xff, 0xff, 0xff}, make([]byte, 1024)...))
	// The right magic, unknown sender: a whole hello, refused once read.
	// One short of it, as this was (68 bytes, the size before hellos
	// carried a cluster ID), is cut off only at the handshake timeout,
	// 5 s, before any check.
	var hello [transport.HelloBytes]byte
	copy(hello[:], "PXT\x03")
	binary.BigEndian.PutUint64(hello[4:], 99)
	binary.BigEndian.PutUint64(hello[12:], uint64(leader))
	send(hello[:])
	binary.BigEndian.PutUint64(hello[4:], uint64(leader)) // itself
	send(hello[:])
	if got := target.TransportStats().AuthFailures - before.AuthFailures; got < 5 {
		t.Errorf("%d authentication failures counted for 5 strangers", got)
	}

	// A process with the wrong cluster key, claiming to be a member.
	as := leader%3 + 1
	impostor, err := transport.New(transport.Config{
		ID: as, Peers: map[paxos.ReplicaID]string{leader: target.PaxosAddr()}, Key: []byte("not-the-cluster-key-0123456789"),
		ListenAddr: "127.0.0.1:0", Handler: func(paxos.Message) {}, Limits: transport.DefaultLimits(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	before = target.TransportStats()
	impostor.Send(paxos.Message{Type: paxos.MsgHeartbeat, From: as, To: leader, Ballot: paxos.Ballot{Round: 99, Replica: as}, Round: 1})
	// The acceptor proves itself first, so the impostor is the side that
	// finds the key wrong and refuses; the replica sees the handshake
	// closed before any proof, and nothing gets in.
	eventually(t, "the impostor's handshake refused", func() bool {
		return impostor.Stats().AuthFailures > 0 && target.TransportStats().HandshakesClosed > before.HandshakesClosed
	})
	for _, s := range c.servers {
		if st := s.Node().Status(); st.Ballot.Round >= 99 {
			t.Fatalf("replica %d leads under the stranger's ballot 99: %+v", st.ID, st)
		}
	}

	// A flood of connections that never finish their hello: beyond
	// InboundConnsMax each new one closes the oldest still in its hello,
	// the peers' established connections carry on, and writes commit
	// meanwhile.
	before = target.TransportStats()
	limit := transport.DefaultLimits().InboundConnsMax
	var flood []net.Conn
	for range limit + 8 {
		flood = append(flood, dialPaxos(t, target))
	}
	eventually(t, "connections over the bound refused", func() bool {
		return target.TransportStats().Rejected >= before.Rejected+8
	})
	if _, err := c.client(leader, writeToken).PutJobs(context.Background(), everySecond("during-flood")); err != nil {
		t.Errorf("a write during the flood: %v", err)
	}
	if _, err := c.client(leader, writeToken).DeleteJob(context.Background(), "during-flood"); err != nil {
		t.Errorf("a delete during the flood: %v", err)
	}
	for _, conn := range flood {
		conn.Close()
	}
	// Once the replica noticed, a connection is served again (its bad
	// hello is refused by the handshake, not by the bound).
	eventually(t, "the flood's connections released", func() bool {
		before := target.TransportStats()
		conn := dialPaxos(t, target)
		conn.Write(make([]byte, len(hello))) // refused once read whole, not at the handshake timeout
		expectClosed(t, conn, "a probe")
		return target.TransportStats().AuthFailures > before.AuthFailures
	})
}

// keyHolder: a process that holds the key and claims a member's ID sends
// what no correct replica does. The member it claims to be is stopped
// meanwhile (else its own connection would replace the hostile one at
// once), and restarted at the end from its disk.
func keyHolder(t *testing.T, c *cluster, target *Server) {
	leader := target.cfg.ID
	as, other := leader%3+1, (leader+1)%3+1
	c.servers[as-1].Close()
	c.servers[as-1] = nil
	key := c.servers[leader-1].cfg.ClusterKey
	st := target.Node().Status()
	conn, sent := memberHandshake(t, target, key, as)
	before := target.TransportStats()

	// Stale accepts with forged values for every chosen slot: a lower
	// ballot, refused. A garbage frame after them is a barrier: frames
	// are handled in order, so once it is counted they all were.
	stale := paxos.Ballot{Round: 1, Replica: as}
	for slot := uint64(1); slot <= st.Chosen; slot++ {
		writeFrame(t, conn, paxos.Message{Type: paxos.MsgAccept, From: as, To: leader, Ballot: stale, Start: slot, Commit: slot,
			Entries: []paxos.Entry{{Slot: slot, Ballot: stale, Kind: paxos.EntryCommand, Data: []byte("forged")}}})
	}
	// The leader's own heartbeat and accept, replayed under this
	// member's name (the transport pins the sender): following them, the
	// leader would step down, and accept a forged value under its own
	// ballot. Refused: only a ballot's owner sends under it.
	writeFrame(t, conn, paxos.Message{Type: paxos.MsgHeartbeat, From: as, To: leader, Ballot: st.Ballot, Start: 1, Commit: st.Chosen, Round: 1 << 40})
	writeFrame(t, conn, paxos.Message{Type: paxos.MsgAccept, From: as, To: leader, Ballot: st.Ballot, Start: st.Chosen + 1, Commit: st.Chosen,
		Entries: []paxos.Entry{{Slot: st.Chosen + 1, Ballot: st.Ballot, Kind: paxos.EntryCommand, Data: []byte("forged")}}})
	// A message under another member's name, and one for another replica.
	writeFrame(t, conn, paxos.Message{Type: paxos.MsgHeartbeat, From: other, To: leader, Ballot: paxos.Ballot{Round: 1 << 40, Replica: other}, Round: 1})
	writeFrame(t, conn, paxos.Message{Type: paxos.MsgHeartbeat, From: as, To: other, Ballot: paxos.Ballot{Round: 1 << 40, Replica: as}, Round: 1})
	writeRaw(t, conn, []byte("not a message"))
	eventually(t, "the garbage frame counted", func() bool {
		return target.TransportStats().Undecodable > before.Undecodable
	})
	if got := target.TransportStats().Misaddressed - before.Misaddressed; got != 2 {
		t.Errorf("%d misaddressed messages counted, want 2", got)
	}
	// The member this key holder claims to be is down: no replica may
	// follow it.
	for _, s := range c.servers {
		if s != nil && s.Node().Status().Leader == as {
			t.Fatalf("replica %d follows replica %d, which is down, on a replayed message", s.cfg.ID, as)
		}
	}

	// A frame over paxos.MaxMessageBytes: the connection is closed before
	// its payload is read.
	hdr := binary.BigEndian.AppendUint32(nil, paxos.MaxMessageBytes+1)
	conn.Write(hdr)
	expectClosed(t, conn, "a key holder's oversized frame")
	if target.TransportStats().Oversized <= before.Oversized {
		t.Error("the oversized frame was not counted")
	}

	// A recorded handshake, replayed: the acceptor's nonce is fresh, so
	// the recorded proof does not match.
	before = target.TransportStats()
	replay := dialPaxos(t, target)
	replay.Write(sent)
	expectClosed(t, replay, "a replayed handshake")
	if target.TransportStats().AuthFailures <= before.AuthFailures {
		t.Error("the replayed handshake was not counted as an authentication failure")
	}

	// A frame that claims the largest size allowed, then stalls: the
	// replica serves on, and the real member, back, replaces the
	// connection.
	stall, _ := memberHandshake(t, target, key, as)
	stall.Write(append(binary.BigEndian.AppendUint32(nil, paxos.MaxMessageBytes), "a few bytes"...))
	if _, err := c.client(leader, writeToken).PutJobs(context.Background(), everySecond("during-stall")); err != nil {
		t.Errorf("a write while a frame stalls: %v", err)
	}
	if _, err := c.client(leader, writeToken).DeleteJob(context.Background(), "during-stall"); err != nil {
		t.Errorf("a delete while a frame stalls: %v", err)
	}
	c.start(as, false)
	expectClosed(t, stall, "a stalled frame once the real member reconnected")
	eventually(t, "the restarted member to catch up", func() bool {
		return c.servers[as-1].Node().Status().Applied >= target.Node().Status().Applied
	})
	c.agree(t)
}

// apiTricks: names and paths that try to escape /v1/jobs/{name}, and
// tokens that are not the write token. Nothing may change.
func apiTricks(t *testing.T, target *Server) {
	base := "http://" + target.HTTPAddr()
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/v1/jobs/..%2F..%2Fetc%2Fpasswd", readToken, 400},
		{"GET", "/v1/jobs/%2e%2e", readToken, 404}, // cleaned to /v1/: no such API
		{"GET", "/v1/jobs/%2e%2e%2fstatus", readToken, 400},
		{"GET", "/v1/jobs/%252e%252e", readToken, 400}, // decoded once: "%2e%2e", not a name
		{"GET", "/v1/jobs/..%5Ckeep", readToken, 400},  // a backslash
		{"GET", "/v1/jobs/" + strings.Repeat("a", 300), readToken, 400},
		{"GET", "/v1/jobs/caf%C3%A9", readToken, 400},
		{"GET", "/v1/jobs/k%D0%B5ep", readToken, 400},                            // a Cyrillic е in keep
		{"GET", "/v1/jobs/%EF%BD%8B%EF%BD%85%EF%BD%85%EF%BD%90", readToken, 400}, // fullwidth ｋｅｅｐ
		{"GET", "/v1/jobs/ke%E2%80%8Bep", readToken, 400},                        // a zero-width space
		{"GET", "/v1/jobs/keep%20", readToken, 400},
		{"DELETE", "/v1/jobs/keep%00", writeToken, 400},
		{"POST", "/v1/jobs/..%2Fkeep/pause", writeToken, 400},
		{"POST", "/v1/jobs/keep%2F..%2F..%2Fjobs/pause", writeToken, 400},
		{"GET", "/v1/jobs/../jobs/keep/../../status", readToken, 200}, // dot segments resolve: the status, nothing else
		{"GET", "/v1/jobs", "", 401},                                  // no token
		{"GET", "/v1/jobs", "Bearer", 401},                            // a token of nothing
		{"DELETE", "/v1/jobs/keep", readToken, 403},                   // a read token writing
		{"POST", "/v1/jobs/keep/pause", readToken, 403},
		{"POST", "/v1/jobs/keep/trigger", readToken, 403},
		{"GET", "/v1/operator/snapshot", readToken, 403},          // the whole state: a write token's
		{"DELETE", "/v1/jobs/keep", strings.Repeat("x", 64), 401}, // an unknown token
		{"DELETE", "/v1/jobs/keep", writeToken + "x", 401},
		{"DELETE", "/v1/jobs/keep", writeToken[:len(writeToken)-1], 401},
		{"DELETE", "/v1/jobs/keep?token=" + writeToken, "", 401}, // not from the query
		{"POST", "/v1/jobs?skip_nomad_check=1", writeToken, 400}, // no body
		{"PUT", "/v1/jobs", writeToken, 404},                     // no such method: no such API
	} {
		r := httpDo(t, tc.method, base+tc.path, tc.token, "application/json", nil)
		if r.code != tc.want {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, r.code, r.body, tc.want)
		}
		if r.code >= 400 && !strings.Contains(r.body, `"error"`) {
			t.Errorf("%s %s: the refusal is not a JSON error: %s", tc.method, tc.path, r.body)
		}
	}
	// Other ways to send the write token: none is taken, and the refusal
	// says the header is not a bearer token (found in review: it said no
	// token was sent).
	for _, auth := range []string{"Basic " + writeToken, "Token " + writeToken, writeToken} {
		req, _ := http.NewRequest("DELETE", base+"/v1/jobs/keep", nil)
		req.Header.Set("Authorization", auth)
		if r := doRequest(t, req); r.code != 401 || !strings.Contains(r.body, "is not") {
			t.Errorf("Authorization %q: %d %s, want 401 saying the header is not a bearer token", auth, r.code, r.body)
		}
	}
	// The scheme's name is taken in any case, and after one space or
	// more (RFC 9110 11.1, RFC 6750 2.1).
	for _, auth := range []string{"bearer " + writeToken, "BEARER " + writeToken, "Bearer  " + writeToken} {
		req, _ := http.NewRequest("GET", base+"/v1/jobs/keep", nil)
		req.Header.Set("Authorization", auth)
		if r := doRequest(t, req); r.code != 200 {
			t.Errorf("Authorization %q: %d %s, want 200", auth, r.code, r.body)
		}
	}
	// The metrics and the status page need a token too (the page answers
	// in HTML, for a browser).
	if r := httpDo(t, "GET", base+"/metrics", "", "", nil); r.code != 401 || strings.Contains(r.body, "paxcron_") {
		t.Errorf("the metrics without a token: %d %.200s", r.code, r.body)
	}
	if r := httpDo(t, "GET", base+"/", "nope", "", nil); r.code != 401 || strings.Contains(r.body, "keep") {
		t.Errorf("the status page with an unknown token: %d %.200s", r.code, r.body)
	}
	// A wrong token with a valid body writes nothing.
	body := []byte(`{"jobs":[{"name":"sneaky","spec":{"schedule":"@hourly","nomad_job":"p"}}],"skip_nomad_check":true}`)
	for token, want := range map[string]int{"": 401, readToken: 403, "nope-" + writeToken: 401} {
		if r := httpDo(t, "POST", base+"/v1/jobs", token, "application/json", body); r.code != want {
			t.Errorf("a write with token %q: %d %s, want %d", token, r.code, r.body, want)
		}
	}
	// A URL too long for the server: refused by net/http (not JSON).
	if r := httpDo(t, "GET", base+"/v1/jobs/"+strings.Repeat("a", 100<<10), readToken, "", nil); r.code != 431 && r.code != 414 {
		t.Errorf("a 100 KiB URL: %d", r.code)
	}
	// A request that never finishes its headers does not hold the server.
	conn, err := net.Dial("tcp", target.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nX-Slow: ", readToken)
	if r := httpDo(t, "GET", base+"/v1/status", readToken, "", nil); r.code != 200 {
		t.Errorf("the status while a request hangs: %d %s", r.code, r.body)
	}
	if r := httpDo(t, "GET", base+"/v1/jobs/sneaky", readToken, "", nil); r.code != 404 {
		t.Errorf("the refused write made job sneaky: %d %s", r.code, r.body)
	}
}

// apiBodies: bodies too deep, too large, malformed, or naming jobs that
// could not be addressed afterwards.
func apiBodies(t *testing.T, target *Server) {
	base := "http://" + target.HTTPAddr()
	post := func(ct string, body []byte) httpResult {
		return httpDo(t, "POST", base+"/v1/jobs?skip_nomad_check=true", writeToken, ct, body)
	}
	job := func(name string) string {
		return `{"name":` + name + `,"spec":{"schedule":"@hourly","nomad_job":"p"}}`
	}
	many := strings.Repeat(job(`"m"`)+",", api.MaxJobsPerRequest) + job(`"m"`)
	mp := func(v any) []byte {
		b, err := api.EncodeMsgpack(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mpJob := func(name string) map[string]any {
		return map[string]any{"name": name, "spec": map[string]any{"schedule": "@hourly", "nomad_job": "p"}}
	}
	mpMany := make([]any, api.MaxJobsPerRequest+1)
	for i := range mpMany {
		mpMany[i] = mpJob("m")
	}
	const msgpack = api.MsgpackContentType
	for _, tc := range []struct {
		name, ct string
		body     []byte
		want     int
	}{
		{"deep JSON", "application/json", []byte(strings.Repeat("[", 100000) + strings.Repeat("]", 100000)), 400},
		{"deep JSON in meta", "application/json", []byte(`{"jobs":[{"name":"d","spec":{"meta":` + strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat("}", 10000) + `}}]}`), 400},
		{"over MaxBodyBytes", "application/json", append([]byte(`{"jobs":[`+job(`"big"`)+`],"x":"`), bytes.Repeat([]byte("a"), api.MaxBodyBytes)...), 413},
		{"two objects", "application/json", []byte(`{"jobs":[` + job(`"a"`) + `]}{"jobs":[]}`), 400},
		{"two dots behind a duplicate key", "application/json", []byte(`{"jobs":[{"name":"a","name":"..","spec":{"schedule":"@hourly","nomad_job":"p"}}]}`), 400},
		{"more jobs than allowed", "application/json", []byte(`{"jobs":[` + many + `]}`), 400},
		{"one name twice", "application/json", []byte(`{"jobs":[` + job(`"twice"`) + `,` + job(`"twice"`) + `]}`), 400},
		{"a name with NUL", "application/json", []byte(`{"jobs":[` + job(`"keep\u0000"`) + `]}`), 400},
		{"a name with a slash", "application/json", []byte(`{"jobs":[` + job(`"../keep"`) + `]}`), 400},
		{"a name of two dots", "application/json", []byte(`{"jobs":[` + job(`".."`) + `]}`), 400},
		{"a name of one dot", "application/json", []byte(`{"jobs":[` + job(`"."`) + `]}`), 400},
		{"a confusable name", "application/json", []byte(`{"jobs":[` + job(`"k\u0435ep"`) + `]}`), 400},
		{"a long name", "application/json", []byte(`{"jobs":[` + job(`"`+strings.Repeat("n", 10000)+`"`) + `]}`), 400},
		{"invalid UTF-8", "application/json", []byte("{\"jobs\":[" + job("\"\xff\xfe\"") + "]}"), 400},
		{"a 3 MiB HCL string", "application/hcl", []byte("cron \"x\" {\n schedule = \"" + strings.Repeat("*", 3<<20) + "\"\n}\n"), 400},
		{"unterminated HCL", "application/hcl", []byte("cron \"x\" {\n schedule = \"@hourly\"\n"), 400},
		{"HCL of two dots", "application/hcl", []byte("cron \"..\" {\n schedule = \"@hourly\"\n nomad { job = \"p\" }\n}\n"), 400},
		{"HCL with file()", "application/hcl", []byte("cron \"f\" {\n schedule = \"@hourly\"\n nomad {\n job = \"p\"\n payload = file(\"/etc/passwd\")\n }\n}\n"), 400},
		{"HCL with env", "application/hcl", []byte("cron \"e\" {\n schedule = \"@hourly\"\n nomad { job = env(\"HOME\") }\n}\n"), 400},
		{"HCL too deep", "application/hcl", []byte("cron \"x\" {\n" + strings.Repeat("a {\n", 10000) + strings.Repeat("}\n", 10000) + "}\n"), 400},
		{"a wrong content type", "image/png", []byte("x"), 415},
		{"JSON sent as msgpack", msgpack, []byte(`{"jobs":[` + job(`"a"`) + `]}`), 400},
		{"msgpack sent as JSON", "application/json", mp(map[string]any{"jobs": []any{mpJob("a")}}), 400},
		{"msgpack with a field the API lacks", msgpack, mp(map[string]any{"jobs": []any{mpJob("a")}, "force": true}), 400},
		{"msgpack with a second value", msgpack, append(mp(map[string]any{"jobs": []any{mpJob("a")}}), 0x80), 400},
		{"msgpack cut short", msgpack, mp(map[string]any{"jobs": []any{mpJob("a")}})[:20], 400},
		{"a msgpack map claiming 4 billion entries", msgpack, []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'x'}, 400},
		{"a msgpack string claiming 4 GiB", msgpack, []byte{0x81, 0xa4, 'j', 'o', 'b', 's', 0x91, 0x81, 0xa4, 'n', 'a', 'm', 'e', 0xdb, 0xff, 0xff, 0xff, 0xff}, 400},
		{"msgpack nested deep in meta", msgpack, append([]byte{0x81, 0xa4, 'j', 'o', 'b', 's', 0x91, 0x81, 0xa4, 's', 'p', 'e', 'c', 0x81, 0xa4, 'm', 'e', 't', 'a'}, bytes.Repeat([]byte{0x81, 0xa1, 'a'}, 10000)...), 400},
		{"msgpack over MaxBodyBytes", msgpack, mp(map[string]any{"jobs": []any{mpJob("big")}, "x": bytes.Repeat([]byte("a"), api.MaxBodyBytes)}), 413},
		// A payload past the state's bound, as one msgpack byte string of
		// 3 MiB: refused; its decode is linear (at the handle's first
		// MaxInitLen it took about half a minute of the leader's CPU).
		{"a 3 MiB msgpack payload", msgpack, mp(map[string]any{"jobs": []any{map[string]any{"name": "big", "spec": map[string]any{"schedule": "@hourly", "nomad_job": "p", "payload": bytes.Repeat([]byte("p"), 3<<20)}}}}), 400},
		{"more jobs than allowed in msgpack", msgpack, mp(map[string]any{"jobs": mpMany}), 400},
		{"a msgpack name of two dots", msgpack, mp(map[string]any{"jobs": []any{mpJob("..")}}), 400},
		{"a msgpack name with a slash", msgpack, mp(map[string]any{"jobs": []any{mpJob("../keep")}}), 400},
		{"a msgpack name of invalid UTF-8", msgpack, mp(map[string]any{"jobs": []any{mpJob("\xff\xfe")}}), 400},
		{"a msgpack name as bytes with NUL", msgpack, mp(map[string]any{"jobs": []any{map[string]any{"name": []byte("keep\x00"), "spec": map[string]any{"schedule": "@hourly", "nomad_job": "p"}}}}), 400},
		{"a negative msgpack version", msgpack, mp(map[string]any{"jobs": []any{map[string]any{"name": "keep", "if_version": -1, "spec": map[string]any{"schedule": "@hourly", "nomad_job": "p"}}}}), 400},
	} {
		r := post(tc.ct, tc.body)
		if r.code != tc.want || !strings.Contains(r.body, `"error"`) {
			t.Errorf("%s: %d %.300s, want %d with a JSON error", tc.name, r.code, r.body, tc.want)
		}
	}
	// A second JSON value after the first is refused, not ignored.
	if r := httpDo(t, "POST", base+"/v1/jobs/keep/trigger", writeToken, "application/json", []byte(`{}{"force":true}`)); r.code != 400 {
		t.Errorf("a trigger with two bodies: %d %s", r.code, r.body)
	}
	// A request that never finishes its body does not hold the server.
	conn, err := net.Dial("tcp", target.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000000\r\n\r\n{", writeToken)
	if r := httpDo(t, "GET", base+"/v1/jobs", readToken, "", nil); r.code != 200 || strings.Contains(r.body, `"..`) {
		t.Errorf("the jobs while a body hangs: %d %s", r.code, r.body)
	}
}

// dialPaxos opens a TCP connection to target's Paxos port.
func dialPaxos(t *testing.T, target *Server) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", target.PaxosAddr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// expectClosed waits until the replica closes conn (a read ends), within
// the handshake timeout and a margin.
func expectClosed(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(transport.DefaultLimits().HandshakeTimeout + 10*time.Second))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: the connection is still open", what)
	}
}

// memberHandshake connects to target as replica from and runs the
// handshake of internal/transport's package comment, written here from
// that description: what a key holder's own program would send. It
// returns the connection and the bytes it sent (hello and proof).
func memberHandshake(t *testing.T, target *Server, key []byte, from paxos.ReplicaID) (net.Conn, []byte) {
	t.Helper()
	conn := dialPaxos(t, target)
	hello := binary.BigEndian.AppendUint64([]byte("PXT\x03"), uint64(from))
	hello = binary.BigEndian.AppendUint64(hello, uint64(target.cfg.ID))
	incarnation := make([]byte, 8)
	rand.Read(incarnation)
	hello = append(hello, incarnation...)
	hello = append(hello, make([]byte, 16)...) // no cluster ID known: nothing to contradict
	nonce := make([]byte, 32)
	rand.Read(nonce)
	hello = append(hello, nonce...)
	if _, err := conn.Write(hello); err != nil {
		t.Fatal(err)
	}
	var challenge [80]byte // nonce, cluster ID, MAC
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn, challenge[:]); err != nil {
		t.Fatalf("the handshake as replica %d: %v", from, err)
	}
	conn.SetReadDeadline(time.Time{})
	mac := func(role string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte("paxcron transport v3 " + role))
		m.Write(hello)
		m.Write(challenge[:48])
		members := slices.Sorted(slices.Values(target.cfg.Members))
		m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(members))))
		for _, id := range members {
			m.Write(binary.BigEndian.AppendUint64(nil, uint64(id)))
		}
		m.Write(agreedSettings(target.cfg))
		return m.Sum(nil)
	}
	if !hmac.Equal(challenge[48:], mac("accept")) {
		t.Fatal("the replica's proof does not match the key")
	}
	proof := mac("dial")
	if _, err := conn.Write(proof); err != nil {
		t.Fatal(err)
	}
	return conn, append(hello, proof...)
}

func writeFrame(t *testing.T, conn net.Conn, m paxos.Message) {
	t.Helper()
	b, err := paxos.AppendMessage(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, conn, b)
}

// writeRaw writes payload as one frame: its length, then its bytes.
func writeRaw(t *testing.T, conn net.Conn, payload []byte) {
	t.Helper()
	if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)); err != nil {
		t.Fatal(err)
	}
}

// doRequest makes req and reads the answer.
func doRequest(t *testing.T, req *http.Request) httpResult {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpResult{resp.StatusCode, string(b)}
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

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"paxcron/internal/hoptrace"
	"paxcron/paxos"
)

// writeHops writes a trace file as a process built with the hoptrace tag
// does.
func writeHops(t *testing.T, dir, name, args string, marks [][3]int64) {
	t.Helper()
	var b strings.Builder
	b.WriteString(args + "\n")
	for _, m := range marks {
		fmt.Fprintf(&b, "%d %d %d\n", m[0], m[1], m[2])
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestHopsLinesUpWrites(t *testing.T) {
	dir := t.TempDir()
	const us = 1000 // nanoseconds
	var client, leader, follower [][3]int64
	accept := int64(hoptrace.Message(uint8(paxos.MsgAccept), 2))
	for i := range int64(20) {
		at := 1_000_000_000 + i*1000*us
		client = append(client, [3]int64{at, int64(hoptrace.ClientCall), 0}, [3]int64{at + 500*us + i*us, int64(hoptrace.ClientDone), 0})
		leader = append(leader, [3]int64{at + 100*us, int64(hoptrace.NodeTake), 0}, [3]int64{at + 110*us, int64(hoptrace.TransportSend), accept})
		follower = append(follower, [3]int64{at + 150*us, int64(hoptrace.TransportReceived), int64(hoptrace.Message(uint8(paxos.MsgAccept), 1))})
		if i%3 == 0 { // off most writes' path: left out
			follower = append(follower, [3]int64{at + 200*us, int64(hoptrace.TransportSend), int64(hoptrace.Message(uint8(paxos.MsgHeartbeatReply), 1))})
		}
	}
	writeHops(t, dir, "1.hops", `["paxcron-bench" "etcd"]`, client)
	writeHops(t, dir, "2.hops", `["paxcron" "server" "-replica-id" "1"]`, leader)
	writeHops(t, dir, "3.hops", `["paxcron" "server" "-replica-id=2"]`, follower)
	var out, errs bytes.Buffer
	if code := run([]string{"hops", dir}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	got := out.String()
	// 20 writes: the first and the last lie partly outside the replicas'
	// traces, and the first tenth of the 18 left is the warm-up; the 17
	// reported take 502-518 µs.
	for _, want := range []string{
		"17 writes, median 510µs from call to return",
		"     100.0      100.0      100.0   100%  leader 1   node: loop takes proposal",
		"     110.0      110.0      110.0   100%  leader 1   transport: send Accept to 2",
		"     150.0      150.0      150.0   100%  follower 2 transport: received Accept from 1",
		"     510.0      503.0      517.0   100%  client     client: call returns",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "HeartbeatReply") {
		t.Errorf("a mark on a third of the writes is reported:\n%s", got)
	}
}

func TestHopsRefusesWhatItCannotLineUp(t *testing.T) {
	empty := t.TempDir()
	overlapping := t.TempDir()
	writeHops(t, overlapping, "1.hops", `["paxcron-bench"]`, [][3]int64{
		{1, int64(hoptrace.ClientCall), 0}, {2, int64(hoptrace.ClientCall), 0}, {3, int64(hoptrace.ClientDone), 0},
	})
	noClient := t.TempDir()
	writeHops(t, noClient, "1.hops", `["paxcron" "server" "-replica-id" "1"]`, [][3]int64{{1, int64(hoptrace.NodeTake), 0}})
	bad := t.TempDir()
	writeHops(t, bad, "1.hops", `["paxcron-bench"]`, nil)
	if err := os.WriteFile(filepath.Join(bad, "1.hops"), []byte("[]\n12 x 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{empty, "no .hops files"},
		{overlapping, "trace a single closed-loop client"},
		{noClient, "no client trace"},
		{bad, "line 2"},
	} {
		var out, errs bytes.Buffer
		if code := run([]string{"hops", c.dir}, &out, &errs); code != 1 || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%s: exit %d, %q; want 1 and an error naming %q", c.dir, code, errs.String(), c.want)
		}
	}
	var out, errs bytes.Buffer
	if code := run([]string{"hops"}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "Usage: paxcron-bench hops DIR") {
		t.Errorf("no folder: exit %d, %q; want 2 and the usage", code, errs.String())
	}
}

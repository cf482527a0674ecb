package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"paxcron/paxos"
)

// A replica that cannot reach a peer says so once, naming its address,
// however often it redials, and once that it reached it again. Found in
// review: dial failures were only counted.
func TestUnreachablePeerIsLoggedOncePerChange(t *testing.T) {
	logs := newLogs()
	c := startClusterWith(t, withLogs(logs, slog.LevelInfo))
	ctx := context.Background()
	c.leader()
	const gone = paxos.ReplicaID(3)
	addr := c.servers[gone-1].PaxosAddr()
	if err := c.servers[gone-1].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.servers[gone-1] = nil
	unreachable := func(id paxos.ReplicaID) int {
		return linesWith(logs[id].String(), "cannot reach peer", "peer=3", "paxos="+addr)
	}
	for _, id := range []paxos.ReplicaID{1, 2} {
		eventually(t, fmt.Sprintf("replica %d to log that replica 3 is unreachable at %s", id, addr), func() bool { return unreachable(id) > 0 })
	}
	failed := c.servers[0].tr.Stats().DialFailures
	eventually(t, "replica 1 to redial replica 3 five more times", func() bool { return c.servers[0].tr.Stats().DialFailures >= failed+5 })
	for _, id := range []paxos.ReplicaID{1, 2} {
		if n := unreachable(id); n != 1 {
			t.Errorf("replica %d logged replica 3 unreachable %d times, want once:\n%s", id, n, logs[id])
		}
	}
	c.start(gone, false)
	for _, id := range []paxos.ReplicaID{1, 2} {
		eventually(t, fmt.Sprintf("replica %d to log that replica 3 is reached again", id), func() bool {
			return linesWith(logs[id].String(), "peer reached again", "peer=3") == 1
		}, func() string { return logs[id].String() })
	}
}

// linesWith counts the lines of log that hold every one of parts.
func linesWith(log string, parts ...string) int {
	n := 0
	for line := range strings.Lines(log) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

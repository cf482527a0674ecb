package paxos

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// knownBugs names the scripts under testdata/ that show a bug in the core.
// They are left out of the run (so the suite stays green) until the bug is
// fixed. Their last expected outputs were written by hand to say what Paxos
// requires: once the bug is fixed, remove the entry, run the test and check
// that those outputs hold before rewriting the rest of the trace.
var knownBugs = map[string]string{}

// TestInteraction runs the protocol scripts in testdata/. Each script drives
// a test cluster through a small DSL and its expected output is the
// protocol's trace; regenerate it with
//
//	go test ./paxos -run TestInteraction -rewrite
//
// and review the diff. The commands:
//
//	cluster n=3 [seed=1] [chunk=N] [max-snapshot=N]
//	                                     a fresh cluster; chunk and max-snapshot set
//	                                     MaxSnapshotChunkBytes and MaxSnapshotBytes
//	tick [node=1[,2...]] [n=1]           ticks (every node if none given), no delivery
//	deliver [to=..] [from=..] [hold=Chosen] [drop=Accept,Heartbeat] [max=N]
//	                                     delivers queued messages matching to/from
//	                                     (and the ones they cause) in the order they
//	                                     were sent; hold= types stay queued (delayed),
//	                                     drop= types are dropped, max bounds how many
//	                                     are delivered
//	campaign node=2                      the election timer fires at the next tick; tick once
//	propose node=1 data=a,b,c            prints each value's slot or the error
//	crash node=2 / restart node=2        loses what was not persisted / restarts from storage
//	isolate node=1 / block from=1 to=2 / heal
//	compact node=1 index=3 [keep=2]      snapshot the applied values and drop the log <= index,
//	                                     but for a tail of the last keep slots
//	write-log node=2 ballot=1.1 entries=1:a,3:c
//	                                     writes accepted entries into a down replica's storage
//	status                               roles, chosen, applied, leases and local time
//	run ticks=N                          N times: tick every node, deliver everything;
//	                                     prints role changes (no messages) and a summary
//
// After every command the harness checks that no two replicas applied
// different values for a slot.
func TestInteraction(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts in testdata/ (%v)", err)
	}
	for _, path := range paths {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".txt"), func(t *testing.T) {
			if bug, ok := knownBugs[name]; ok {
				t.Skipf("BUG: %s", bug)
			}
			e := &interactionEnv{}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return e.handle(t, d)
			})
		})
	}
}

func (e *interactionEnv) handle(t *testing.T, d *datadriven.TestData) string {
	e.out.Reset()
	if d.Cmd != "cluster" && e.c == nil {
		d.Fatalf(t, "no cluster yet: start the script with cluster n=...")
	}
	if e.c != nil {
		for _, key := range []string{"node", "to", "from"} {
			for _, id := range idsArg(t, d, key, nil) {
				if !e.c.members.Contains(id) {
					d.Fatalf(t, "%s: %s=%d is not a replica of the cluster", d.Cmd, key, id)
				}
			}
		}
	}
	switch d.Cmd {
	case "cluster":
		expectArgs(t, d, "n", "seed", "chunk", "max-snapshot")
		limits := DefaultLimits()
		limits.MaxSnapshotChunkBytes = uint64(intArg(t, d, "chunk", int(limits.MaxSnapshotChunkBytes)))
		limits.MaxSnapshotBytes = uint64(intArg(t, d, "max-snapshot", int(limits.MaxSnapshotBytes)))
		e.newCluster(t, intArg(t, d, "n", 3), uint64(intArg(t, d, "seed", 1)), limits)
	case "tick":
		expectArgs(t, d, "node", "n")
		e.tickNodes(idsArg(t, d, "node", e.c.ids()), intArg(t, d, "n", 1))
	case "deliver":
		expectArgs(t, d, "to", "from", "hold", "drop", "max")
		e.deliver(msgFilter{
			to:   idsArg(t, d, "to", nil),
			from: idsArg(t, d, "from", nil),
			hold: typesArg(t, d, "hold"),
			drop: typesArg(t, d, "drop"),
			max:  intArg(t, d, "max", 1<<30),
		})
	case "campaign":
		expectArgs(t, d, "node")
		e.campaign(e.liveNode(t, d))
	case "propose":
		expectArgs(t, d, "node", "data")
		e.propose(e.liveNode(t, d), listArg(d, "data"))
	case "crash":
		expectArgs(t, d, "node")
		e.c.crash(e.liveNode(t, d))
	case "restart":
		expectArgs(t, d, "node")
		e.restart(t, d, nodeArg(t, d, "node"))
	case "isolate":
		expectArgs(t, d, "node")
		e.c.isolate(nodeArg(t, d, "node"))
	case "block":
		expectArgs(t, d, "from", "to")
		e.c.block(nodeArg(t, d, "from"), nodeArg(t, d, "to"))
	case "heal":
		expectArgs(t, d)
		e.c.unblockAll()
	case "compact":
		expectArgs(t, d, "node", "index", "keep")
		e.compact(t, d, e.liveNode(t, d), uint64(intArg(t, d, "index", 0)), uint64(intArg(t, d, "keep", 0)))
	case "snapshot-unavailable":
		expectArgs(t, d, "node", "reads")
		id := e.liveNode(t, d)
		reads := intArg(t, d, "reads", 1)
		e.c.replicas[id].storage.unavailable = reads
		e.printf("%d's next %d snapshot read(s) find it still being read", id, reads)
	case "write-log":
		expectArgs(t, d, "node", "ballot", "entries")
		e.writeLog(t, d, nodeArg(t, d, "node"), ballotArg(t, d, "ballot"), listArg(d, "entries"))
	case "status":
		expectArgs(t, d)
		e.status()
	case "run":
		expectArgs(t, d, "ticks")
		e.run(intArg(t, d, "ticks", 1))
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	e.c.checkAgreement()
	return e.out.String()
}

// expectArgs fails the test on an argument the command does not take, so
// that a typo in a script does not silently change its meaning.
func expectArgs(t *testing.T, d *datadriven.TestData, keys ...string) {
	t.Helper()
	for _, a := range d.CmdArgs {
		if !contains(keys, a.Key) {
			d.Fatalf(t, "%s: unknown argument %q (takes %s)", d.Cmd, a.Key, strings.Join(keys, ", "))
		}
	}
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// listArg returns the comma-separated values of key, whether written as
// key=a,b or key=(a, b).
func listArg(d *datadriven.TestData, key string) []string {
	a, ok := d.Arg(key)
	if !ok {
		return nil
	}
	var out []string
	for _, v := range strings.Split(strings.Join(a.Vals, ","), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	t.Helper()
	if !d.HasArg(key) {
		return def
	}
	var v int
	d.ScanArgs(t, key, &v)
	return v
}

func nodeArg(t *testing.T, d *datadriven.TestData, key string) ReplicaID {
	t.Helper()
	ids := idsArg(t, d, key, nil)
	if len(ids) != 1 {
		d.Fatalf(t, "%s: want exactly one replica in %s=", d.Cmd, key)
	}
	return ids[0]
}

func idsArg(t *testing.T, d *datadriven.TestData, key string, def []ReplicaID) []ReplicaID {
	t.Helper()
	vals := listArg(d, key)
	if vals == nil {
		return def
	}
	var ids []ReplicaID
	for _, v := range vals {
		var id uint64
		if _, err := fmt.Sscan(v, &id); err != nil || id == 0 {
			d.Fatalf(t, "%s: bad replica %q in %s=", d.Cmd, v, key)
		}
		ids = append(ids, ReplicaID(id))
	}
	return ids
}

func typesArg(t *testing.T, d *datadriven.TestData, key string) map[MessageType]bool {
	t.Helper()
	types := map[MessageType]bool{}
	for _, v := range listArg(d, key) {
		found := false
		for mt := MsgPreVote; mt <= MsgSnapshotAck; mt++ {
			if mt.String() == v {
				types[mt], found = true, true
			}
		}
		if !found {
			d.Fatalf(t, "%s: unknown message type %q", d.Cmd, v)
		}
	}
	return types
}

func ballotArg(t *testing.T, d *datadriven.TestData, key string) Ballot {
	t.Helper()
	var b Ballot
	var s string
	d.ScanArgs(t, key, &s)
	if _, err := fmt.Sscanf(s, "%d.%d", &b.Round, &b.Replica); err != nil || b.Replica == None {
		d.Fatalf(t, "%s: bad ballot %q (want round.replica)", d.Cmd, s)
	}
	return b
}

package paxos

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// interactionEnv drives a testCluster for the datadriven scripts and writes
// the protocol's trace: delivered and dropped messages, and after each input
// the events it caused (role changes, applied slots, installed snapshots).
type interactionEnv struct {
	c      *testCluster
	out    strings.Builder
	indent string // prefix of events, set while they follow a message line
	quiet  bool   // run: only role changes are written, not messages or applies
}

func (e *interactionEnv) printf(format string, args ...any) {
	fmt.Fprintf(&e.out, format+"\n", args...)
}

// event writes a line caused by the last input.
func (e *interactionEnv) event(format string, args ...any) {
	e.printf(e.indent+format, args...)
}

func (e *interactionEnv) newCluster(t *testing.T, n int, seed uint64, limits Limits) {
	e.c = newTestCluster(t, n, seed)
	e.c.setLimits(limits)
	tm := e.c.timing
	e.printf("%d replicas, seed %d: heartbeat every %d ticks, election timeout in [%d,%d), acceptor lease %d, leader lease %d",
		n, seed, tm.HeartbeatTicks, tm.ElectionTicks, 2*tm.ElectionTicks, tm.LeaseTicks, leaderLeaseTicks(tm))
	if d := DefaultLimits(); limits.MaxSnapshotChunkBytes != d.MaxSnapshotChunkBytes || limits.MaxSnapshotBytes != d.MaxSnapshotBytes {
		e.printf("snapshots travel in chunks of at most %d bytes; a replica accepts snapshots of at most %d bytes",
			limits.MaxSnapshotChunkBytes, limits.MaxSnapshotBytes)
	}
}

func (e *interactionEnv) node(id ReplicaID) *Node { return e.c.replicas[id].node }

func (e *interactionEnv) liveNode(t *testing.T, d *datadriven.TestData) ReplicaID {
	t.Helper()
	id := nodeArg(t, d, "node")
	r, ok := e.c.replicas[id]
	if !ok || r.down {
		d.Fatalf(t, "%s: replica %d is not running", d.Cmd, id)
	}
	return id
}

// nodeView is what observe compares before and after an input.
type nodeView struct {
	role   Role
	leader ReplicaID
	ballot Ballot // campaigned for or led (a follower's promises show in its messages)
}

func (e *interactionEnv) view(id ReplicaID) nodeView {
	n := e.node(id)
	v := nodeView{role: n.role, leader: n.leader}
	switch n.role {
	case PreCandidate, Candidate:
		v.ballot = n.cand.ballot
	case Leader:
		v.ballot = n.lead.ballot
	}
	return v
}

// observe runs an input to replica id and reports the role change it made.
func (e *interactionEnv) observe(id ReplicaID, input func()) {
	before := e.view(id)
	input()
	after := e.view(id)
	if after == before {
		return
	}
	n := e.node(id)
	switch after.role {
	case Follower:
		if after.leader == None {
			e.event("%d becomes follower at tick %d (no leader known)", id, n.now)
		} else {
			e.event("%d follows %d at tick %d (ballot %s)", id, after.leader, n.now, n.hs.Promised)
		}
	case PreCandidate:
		e.event("%d becomes precandidate at tick %d (pre-vote for ballot %s)", id, n.now, after.ballot)
	case Candidate:
		e.event("%d becomes candidate at tick %d (ballot %s, phase 1 from slot %d)", id, n.now, after.ballot, n.cand.start)
	case Leader:
		e.event("%d becomes leader at tick %d (ballot %s, start %d): %s", id, n.now, after.ballot, n.lead.start, e.reproposals(n))
	}
}

// reproposals describes what a new leader put in its log from its start
// slot on: the values found in promises and the no-ops filling gaps.
func (e *interactionEnv) reproposals(n *Node) string {
	l := n.lead
	if l.caughtUpAt < l.start {
		return "nothing to re-propose"
	}
	es, err := n.log.entries(l.start, l.caughtUpAt+1, int(l.caughtUpAt-l.start)+1, ^uint64(0))
	if err != nil {
		e.c.t.Fatalf("reading the re-proposals of %d: %v", n.id, err)
	}
	return "re-proposes " + describeValues(es)
}

func describeValues(es []Entry) string {
	parts := make([]string, 0, len(es))
	for _, en := range es {
		parts = append(parts, fmt.Sprintf("%d=%s", en.Slot, valueOf(en)))
	}
	if len(parts) > 8 {
		parts = slices.Concat(parts[:3], []string{fmt.Sprintf("... %d more ...", len(parts)-6)}, parts[len(parts)-3:])
	}
	return strings.Join(parts, " ")
}

// process runs every pending Ready (persist, send, apply) and reports the
// snapshots installed and the slots applied.
func (e *interactionEnv) process() {
	type mark struct {
		applied int
		snap    uint64
	}
	before := map[ReplicaID]mark{}
	for _, id := range e.c.ids() {
		r := e.c.replicas[id]
		before[id] = mark{len(r.applied), r.storage.snap.Meta.Index}
	}
	e.c.process()
	if e.quiet {
		return
	}
	for _, id := range e.c.ids() {
		r, b := e.c.replicas[id], before[id]
		from := b.applied
		if snap := r.storage.snap; snap.Meta.Index != b.snap {
			e.event("%d installs snapshot index=%d (%s)", id, snap.Meta.Index, strings.Join(decodeSnapshotValues(snap), ","))
			from = int(snap.Meta.Index)
		}
		if len(r.applied) > from {
			var parts []string
			for i := from; i < len(r.applied); i++ {
				parts = append(parts, fmt.Sprintf("%d=%s", i+1, r.applied[i]))
			}
			e.event("%d applies %s", id, strings.Join(parts, " "))
		}
	}
}

// msgFilter selects the queued messages deliver considers.
type msgFilter struct {
	to, from []ReplicaID          // nil: any
	hold     map[MessageType]bool // left queued, as if delayed
	drop     map[MessageType]bool // dropped instead of delivered
	max      int                  // delivered at most
}

func (f msgFilter) selects(m Message) bool {
	return (f.to == nil || contains(f.to, m.To)) && (f.from == nil || contains(f.from, m.From)) && !f.hold[m.Type]
}

// deliver persists and sends what every node has ready, then delivers the
// selected messages in the order they were sent, and the ones they cause,
// until none is left or max went through. Unselected messages stay queued.
func (e *interactionEnv) deliver(f msgFilter) {
	e.process()
	for delivered := 0; delivered < f.max; {
		i := slices.IndexFunc(e.c.queue, f.selects)
		if i < 0 {
			break
		}
		m := e.c.queue[i]
		e.c.queue = slices.Delete(e.c.queue, i, i+1)
		if reason := e.dropReason(m, f); reason != "" {
			if !e.quiet {
				e.printf("drop %s (%s)", m, reason)
			}
			continue
		}
		if !e.quiet {
			e.printf("%s", m)
			e.indent = "  "
		}
		e.observe(m.To, func() {
			// An invalid message is an operating error: the caller drops
			// it. The trace shows it.
			if err := e.node(m.To).Step(m); err != nil {
				e.event("%d refuses it: %v", m.To, err)
			}
		})
		delivered++
		e.process()
		e.indent = ""
	}
	if n := len(e.c.queue); n > 0 && !e.quiet {
		e.printf("(%d %s still queued)", n, map[bool]string{true: "message", false: "messages"}[n == 1])
	}
}

func (e *interactionEnv) dropReason(m Message, f msgFilter) string {
	switch {
	case f.drop[m.Type]:
		return "dropped by the script"
	case e.c.replicas[m.To].down:
		return fmt.Sprintf("%d is down", m.To)
	case e.c.blocked[[2]ReplicaID{m.From, m.To}]:
		return "partitioned"
	}
	return ""
}

func (e *interactionEnv) tickNodes(ids []ReplicaID, ticks int) {
	for range ticks {
		for _, id := range ids {
			if !e.c.replicas[id].down {
				e.observe(id, e.node(id).Tick)
			}
		}
	}
}

// campaign makes id's election timer fire at its next tick and ticks it.
func (e *interactionEnv) campaign(id ReplicaID) {
	n := e.node(id)
	if n.role == Leader {
		e.printf("%d is already leader", id)
		return
	}
	n.electionElapsed = max(n.electionElapsed, n.electionTimeout-1)
	before := n.role
	e.observe(id, n.Tick)
	if n.role == before && n.role == Follower {
		holder := fmt.Sprintf("replica %d", n.leaseHolder)
		if n.leaseHolder == None {
			holder = "nobody (restart guard)"
		}
		e.printf("%d does not campaign at tick %d: its acceptor promises %s until tick %d", id, n.now, holder, n.leaseUntil)
	}
}

func (e *interactionEnv) propose(id ReplicaID, values []string) {
	for _, v := range values {
		slot, err := e.node(id).Propose([]byte(v))
		if err != nil {
			e.printf("%s: %v", v, err)
			continue
		}
		e.printf("%s: slot %d", v, slot)
	}
}

func (e *interactionEnv) restart(t *testing.T, d *datadriven.TestData, id ReplicaID) {
	if !e.c.replicas[id].down {
		d.Fatalf(t, "restart: replica %d is running; crash it first", id)
	}
	e.c.restart(id)
	r, n := e.c.replicas[id], e.node(id)
	e.printf("%d restarts: promised=%s chosen=%d snapshot=%d last slot=%d applied=%s; promises nobody before tick %d",
		id, n.hs.Promised, n.hs.Chosen, r.storage.snap.Meta.Index, n.log.lastSlot, strings.Join(r.applied, ","), n.leaseUntil)
}

// compact snapshots id's applied values through index and drops its log at
// or below it, but for a tail of the last keep slots, as a caller of the
// core would (see TestSnapshotCatchUp).
func (e *interactionEnv) compact(t *testing.T, d *datadriven.TestData, id ReplicaID, index, keep uint64) {
	r := e.c.replicas[id]
	if index > uint64(len(r.applied)) || index <= r.storage.snap.Meta.Index {
		d.Fatalf(t, "compact: index %d outside (snapshot %d, applied %d]", index, r.storage.snap.Meta.Index, len(r.applied))
	}
	data := strings.Join(r.applied[:index], ",")
	through := index - min(keep, index)
	r.storage.compact(index, through, []byte(data), e.c.members)
	r.node.Compacted(index, through)
	if keep == 0 {
		e.printf("%d compacts through slot %d (snapshot %s)", id, index, data)
		return
	}
	e.printf("%d compacts through slot %d (snapshot %s), keeping slots %d to %d", id, through, data, through+1, index)
}

// writeLog writes entries accepted under b straight into a down replica's
// storage, for histories this cluster's own runs do not produce.
func (e *interactionEnv) writeLog(t *testing.T, d *datadriven.TestData, id ReplicaID, b Ballot, specs []string) {
	r := e.c.replicas[id]
	if !r.down {
		d.Fatalf(t, "write-log: replica %d is running; crash it first", id)
	}
	st := r.storage
	if st.hs.Promised.Less(b) {
		st.hs.Promised = b
	}
	var es []Entry
	for _, s := range specs {
		var slot uint64
		var val string
		if _, err := fmt.Sscanf(strings.Replace(s, ":", " ", 1), "%d %s", &slot, &val); err != nil || slot <= st.snap.Meta.Index {
			d.Fatalf(t, "write-log: bad entry %q (want slot:value above the snapshot; _ is a no-op)", s)
		}
		en := Entry{Slot: slot, Ballot: b, Kind: EntryCommand, Data: []byte(val)}
		if val == "_" {
			en.Kind, en.Data = EntryNoop, nil
		}
		st.entries[slot] = en
		st.last = max(st.last, slot)
		es = append(es, en)
	}
	e.printf("%d holds %s under ballot %s (promised %s)", id, describeValues(es), b, st.hs.Promised)
}

// status prints describe() and, for each running replica, its local time,
// its snapshot index, its leader lease and the lease its acceptor honours.
func (e *interactionEnv) status() {
	lines := strings.Split(strings.TrimSuffix(e.c.describe(), "\n"), "\n")
	for i, id := range e.c.ids() {
		e.printf("%s", lines[i])
		r := e.c.replicas[id]
		if r.down {
			continue
		}
		n := r.node
		lease := "none"
		if until, ok := n.LeaseValidUntil(); until != 0 || ok {
			lease = fmt.Sprintf("until %d (%s)", until, map[bool]string{true: "valid", false: "expired"}[ok])
		}
		acceptor := "free"
		if n.now < n.leaseUntil {
			acceptor = fmt.Sprintf("promises only %d until %d", n.leaseHolder, n.leaseUntil)
			if n.leaseHolder == None {
				acceptor = fmt.Sprintf("promises nobody until %d", n.leaseUntil)
			}
		}
		e.printf("   now=%d snapshot=%d lease=%s acceptor=%s", n.now, r.storage.snap.Meta.Index, lease, acceptor)
	}
}

// run ticks every replica and delivers everything, ticks times, writing
// only role changes, then a summary.
func (e *interactionEnv) run(ticks int) {
	e.quiet = true
	for range ticks {
		e.tickNodes(e.c.ids(), 1)
		e.deliver(msgFilter{max: 1 << 30})
	}
	e.quiet = false
	e.out.WriteString(e.c.describe())
}

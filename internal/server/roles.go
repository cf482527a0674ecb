package server

import (
	"log/slog"
	"sync"

	"paxcron/internal/node"
	"paxcron/paxos"
)

// roleLog writes a log line when the replica's role or the leader it
// knows changes: who leads is the first thing an operator asks after an
// outage, and a leadership lost for want of a quorum's replies (a stalled
// process, a cut network, a disk slower than the election timeout) is
// worth a warning of its own.
type roleLog struct {
	mu         sync.Mutex
	role       paxos.Role
	leader     paxos.ReplicaID
	quorumLost uint64
}

// note logs what changed since the last status noted. It is called from
// the replica's loop, so it only writes a line.
func (r *roleLog) note(log *slog.Logger, st node.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st.Role == r.role && st.Leader == r.leader && st.QuorumLost == r.quorumLost {
		return
	}
	wasLeader := r.role == paxos.Leader
	lost := st.QuorumLost > r.quorumLost
	r.role, r.leader, r.quorumLost = st.Role, st.Leader, st.QuorumLost
	switch {
	case st.Role == paxos.Leader && !wasLeader:
		log.Info("leading", "ballot", st.Ballot.String())
	case wasLeader && st.Role != paxos.Leader && lost:
		log.Warn("stopped leading: no quorum answered for an election timeout",
			"longest_loop_turn", st.LongestTurn.String(), "leader_now", uint64(st.Leader))
	case wasLeader && st.Role != paxos.Leader:
		log.Info("stopped leading", "leader_now", uint64(st.Leader))
	case st.Role != paxos.Leader && st.Leader != paxos.None:
		log.Info("following", "leader", uint64(st.Leader))
	case st.Role != paxos.Leader:
		log.Info("no leader known", "role", roleName(st.Role))
	}
}

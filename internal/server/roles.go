package server

import (
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"paxcron/internal/node"
	"paxcron/internal/transport"
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
// diag, when set, adds counters to the warning of a lost quorum.
func (r *roleLog) note(log *slog.Logger, st node.Status, diag func() []any) {
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
		args := []any{"longest_loop_turn", st.LongestTurn.String(), "leader_now", uint64(st.Leader)}
		if diag != nil {
			args = append(args, diag()...)
		}
		log.Warn("stopped leading: no quorum answered for an election timeout", args...)
	case wasLeader && st.Role != paxos.Leader:
		log.Info("stopped leading", "leader_now", uint64(st.Leader))
	case st.Role != paxos.Leader && st.Leader != paxos.None:
		log.Info("following", "leader", uint64(st.Leader))
	case st.Role != paxos.Leader:
		log.Info("no leader known", "role", roleName(st.Role))
	}
}

// throttledLog lets a warning through at most once in slowSaveEvery and
// counts the ones held back, which the next line reports.
type throttledLog struct {
	mu     sync.Mutex
	last   time.Time
	missed int // warnings held back since the last line
}

const slowSaveEvery = 10 * time.Second

// warn logs msg with args and the count held back since the last line,
// unless a line went out less than slowSaveEvery ago.
func (l *throttledLog) warn(log *slog.Logger, msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.last) >= slowSaveEvery {
		log.Warn(msg, append(args, "slow_since_last_line", l.missed)...)
		l.last, l.missed = now, 0
		return
	}
	l.missed++
}

// slowSaveLog warns when a synced write of the store took more than half
// the election timeout: a replica whose disk is that slow answers its
// leader late (its replies wait for the write), and a leader's followers
// that answer late make it give up.
type slowSaveLog struct{ throttledLog }

func (l *slowSaveLog) note(log *slog.Logger, entries int, took, electionTimeout time.Duration) {
	if took <= electionTimeout/2 {
		return
	}
	l.warn(log, "a synced write to the store was slow: replies to the leader wait for it",
		"took", took.String(), "entries", entries, "election_timeout", electionTimeout.String())
}

// slowTurnLog logs a slow turn of the replica's loop, at most one line per
// slowSaveEvery with a count of those in between: while a turn runs the
// replica reads no message and no tick, and a leader whose turns approach
// the election timeout loses its lease.
type slowTurnLog struct{ throttledLog }

func (l *slowTurnLog) note(log *slog.Logger, t node.Turn, electionTimeout time.Duration) {
	l.warn(log, "a turn of the replica's loop was slow: it read no message meanwhile",
		"took", t.Took.String(), "woken_by", t.Woke.String(), "first_input", t.First.String(),
		"more_inputs", t.Drained, "more_inputs_took", t.Drain.String(), "process", t.Process.String(),
		"launcher", t.Launcher.String(), "entries_applied", t.Applied,
		"election_timeout", electionTimeout.String())
}

// authFailureLog logs the Paxos transport's failed handshakes (a wrong
// cluster key, an ID that is not a member, an address that reaches the
// wrong replica), which were only counted before (found in review, the
// operator's procedures: a replica given the wrong key was cut off with
// no line saying why). A peer redials every few seconds: each side (a
// peer dialed, or a host dialing in) gets a line at most every
// authFailureEvery for each TLS cause (explainTLS), with the count held
// back.
type authFailureLog struct {
	log *slog.Logger
	now func() time.Time
	// dataDir is named with a refusal of another cluster's replica
	// (transport.ErrOtherCluster): one of the two data folders is the
	// wrong one.
	dataDir string

	mu   sync.Mutex
	last map[string]authFailureSeen // by side and TLS cause; bounded by the peers and the hosts that dial in
}

type authFailureSeen struct {
	at     time.Time
	missed int
}

const (
	authFailureEvery = 30 * time.Second
	// authFailureSidesMax bounds the sides remembered: strangers dialing
	// in from many hosts must not grow it.
	authFailureSidesMax = 256
)

func newAuthFailureLog(log *slog.Logger, now func() time.Time) *authFailureLog {
	return &authFailureLog{log: log, now: now, last: map[string]authFailureSeen{}}
}

// connSide names the side of a replica-to-replica connection in a log
// line: dialing peer, or dialed from remote's host.
func connSide(dialing bool, peer paxos.ReplicaID, remote string) string {
	if dialing {
		return "dialing replica " + strconv.FormatUint(uint64(peer), 10)
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return "dialed from " + host
}

// note is the transport's OnAuthFailure: it must not block. A handshake
// the other end closed is left to the other end's log, which says why
// (every refusal is said by the side that refuses), as a peer stopping
// in a rolling restart closes handshakes too; unless a TLS alert came
// with it, which says this replica's certificate was refused.
func (l *authFailureLog) note(f transport.AuthFailure) {
	// A TLS alert is the other end saying it refused this one's
	// certificate: said here too, as the side refused is where the
	// operator who just changed its files looks.
	why := explainTLS(f.Err)
	if f.Closed && why == "" {
		l.log.Debug("a replica-to-replica handshake was closed by the other end", "err", f.Err, "remote", f.Remote)
		return
	}
	side := connSide(f.Dialing, f.Peer, f.Remote)
	// A new cause on one side is said at once (an operator who fixed
	// one file sees what is wrong next), the same one every
	// authFailureEvery.
	key := side + "\x00" + why
	l.mu.Lock()
	now := l.now()
	seen, ok := l.last[key]
	if ok && now.Sub(seen.at) < authFailureEvery {
		seen.missed++
		l.last[key] = seen
		l.mu.Unlock()
		return
	}
	if !ok && len(l.last) >= authFailureSidesMax {
		clear(l.last)
	}
	l.last[key] = authFailureSeen{at: now}
	l.mu.Unlock()
	msg := "a replica-to-replica connection was refused: "
	if why != "" {
		msg += why + ": "
	}
	attrs := []any{"side", side, "remote", f.Remote, "refused_since_last_line", seen.missed}
	if errors.Is(f.Err, transport.ErrOtherCluster) {
		attrs = append(attrs, "data_dir", l.dataDir)
	}
	l.log.Error(msg+f.Err.Error(), attrs...)
}

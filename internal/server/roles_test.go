package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"paxcron/internal/node"
	"paxcron/paxos"
)

func TestRoleLogLinesOnChange(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var r roleLog
	steps := []struct {
		st   node.Status
		want string // "" : no line
	}{
		{node.Status{Role: paxos.Follower, Leader: 2}, "following"},
		{node.Status{Role: paxos.Follower, Leader: 2}, ""},
		{node.Status{Role: paxos.Leader, Leader: 1, Ballot: paxos.Ballot{Round: 3, Replica: 1}}, "leading"},
		{node.Status{Role: paxos.Follower, QuorumLost: 1}, "no quorum answered"},
		{node.Status{Role: paxos.Candidate, QuorumLost: 1}, "no leader known"},
		{node.Status{Role: paxos.Leader, Leader: 1, QuorumLost: 1}, "leading"},
		{node.Status{Role: paxos.Follower, Leader: 3, QuorumLost: 1}, "stopped leading"},
	}
	for i, s := range steps {
		buf.Reset()
		r.note(log, s.st, func() []any { return []any{"inbox_dropped", 0} })
		got := buf.String()
		if s.want == "" && got != "" || s.want != "" && !strings.Contains(got, s.want) {
			t.Errorf("step %d (%+v): logged %q, want a line with %q", i, s.st, got, s.want)
		}
	}
}

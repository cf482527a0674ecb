package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

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

// TestSlowTurnLogLines: a slow turn of the loop warns with where it went,
// at most one line per slowSaveEvery, the next line counting those left
// out.
func TestSlowTurnLogLines(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var l slowTurnLog
	turn := node.Turn{Took: 700 * time.Millisecond, Woke: node.InputWrite, First: 650 * time.Millisecond, Process: 50 * time.Millisecond, Applied: 1024}
	l.note(log, turn, time.Second)
	first := buf.String()
	for _, want := range []string{"level=WARN", "took=700ms", "woken_by=write", "first_input=650ms", "process=50ms", "entries_applied=1024", "election_timeout=1s", "slow_since_last_line=0"} {
		if !strings.Contains(first, want) {
			t.Errorf("line %q lacks %q", first, want)
		}
	}
	buf.Reset()
	l.note(log, turn, time.Second)
	l.note(log, turn, time.Second)
	if buf.Len() != 0 {
		t.Fatalf("a second line within %v: %q", slowSaveEvery, buf.String())
	}
	l.last = l.last.Add(-slowSaveEvery)
	l.note(log, turn, time.Second)
	if got := buf.String(); !strings.Contains(got, "slow_since_last_line=2") {
		t.Fatalf("line %q does not count the 2 turns left out", got)
	}
}

// TestSlowSaveLogLines: a synced write slower than half the election
// timeout warns, through the same throttle; a faster one does not.
func TestSlowSaveLogLines(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var l slowSaveLog
	l.note(log, 3, 400*time.Millisecond, time.Second)
	if buf.Len() != 0 {
		t.Fatalf("a 400 ms write warned (election timeout 1 s): %q", buf.String())
	}
	l.note(log, 3, 600*time.Millisecond, time.Second)
	for _, want := range []string{"level=WARN", "took=600ms", "entries=3", "slow_since_last_line=0"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("line %q lacks %q", buf.String(), want)
		}
	}
}

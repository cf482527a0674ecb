package main

import (
	"context"
	"fmt"
	"time"

	"paxcron/internal/localcluster"
)

// paxcronLog is the replicated log alone: three replicas in this process
// (internal/localcluster, as BenchmarkCommitThroughput runs them), each on
// its own Pebble store on the disk, synced, with in-process channels
// between them. A write proposes a 248-byte command (256 bytes with the
// proposal ID the cluster puts in front) and returns once the leader has
// applied it. Its CPU is this process's: replicas and clients together.
type paxcronLog struct {
	cl      *localcluster.Cluster
	payload []byte
}

func newPaxcronLog() *paxcronLog {
	return &paxcronLog{payload: make([]byte, valueBytes-8)}
}

func (l *paxcronLog) start(ctx context.Context, dir string) error {
	cl, err := localcluster.Start(localcluster.DefaultOptions(dir))
	if err != nil {
		return fmt.Errorf("paxcron-bench: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cl.WaitLeader(ctx); err != nil {
		_ = cl.Close()
		return fmt.Errorf("paxcron-bench: the in-process cluster elected no leader: %w", err)
	}
	l.cl = cl
	return nil
}

func (l *paxcronLog) write(ctx context.Context, _ int, _ uint64) error {
	return l.cl.Propose(ctx, l.payload)
}

func (l *paxcronLog) serverPIDs() []int { return nil }

func (l *paxcronLog) stop() error {
	if l.cl == nil {
		return nil
	}
	err := l.cl.Close()
	l.cl = nil
	return err
}

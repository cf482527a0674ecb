package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/internal/api"
	"paxcron/internal/node"
	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/backup"
	"paxcron/storage/pebblestore"
)

// backups uploads the leader's snapshots to the blob store: after each
// local snapshot the leader takes (followers do not upload: one copy per
// snapshot interval is enough, and the leader's is the newest).
type backups struct {
	store *backup.Store
	wake  chan struct{} // holds a signal while an upload is due

	mu   sync.Mutex
	last *api.BackupInfo
}

// backupCluster names this deployment in every backup's meta.
const backupCluster = "paxcron"

func (s *Server) openBackups() error {
	if s.cfg.Backup == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	st, err := backup.Open(ctx, s.cfg.Backup, backup.Options{Keep: s.cfg.BackupKeep})
	if err != nil {
		return fmt.Errorf("%w: backup.url: %w", ErrConfig, err)
	}
	s.backups = &backups{store: st, wake: make(chan struct{}, 1)}
	if strings.HasPrefix(s.cfg.Backup, "file://") {
		s.log.Info("snapshots are backed up to a local folder: that survives a damaged store, not a lost disk (set backup.url to storage on another machine)", "url", st.URL())
	}
	if list, err := st.List(ctx); err == nil && len(list) > 0 {
		s.backups.record(list[0])
	} else if err != nil {
		s.log.Warn("listing the backups", "url", st.URL(), "err", err)
	}
	return nil
}

func (b *backups) record(info backup.Info) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = &api.BackupInfo{Index: info.Index, TakenAt: info.TakenAt, Key: info.Key, Size: info.Size, SHA256: info.SHA256}
}

func (b *backups) lastInfo() *api.BackupInfo {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil {
		return nil
	}
	c := *b.last
	return &c
}

// backupLoop uploads after each snapshot signalled while this replica
// leads.
func (s *Server) backupLoop() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.backups.wake:
		}
		if s.node.Status().Role != paxos.Leader {
			continue
		}
		snap, err := s.store.Snapshot()
		if err != nil || snap.Meta.Index == 0 {
			continue
		}
		if _, err := s.uploadBackup(s.ctx, snap); err != nil {
			s.log.Error("backing up the snapshot", "index", snap.Meta.Index, "err", err)
		}
	}
}

func (s *Server) uploadBackup(ctx context.Context, snap paxos.Snapshot) (backup.Info, error) {
	meta := backup.Meta{Index: snap.Meta.Index, Cluster: backupCluster, TakenAt: time.Now().UTC()}
	for _, id := range snap.Meta.Membership.Voters {
		meta.Membership = append(meta.Membership, uint64(id))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	info, err := s.backups.store.Upload(ctx, meta, snap.Data)
	if err != nil {
		s.metrics.backupErrors.Inc()
		return backup.Info{}, err
	}
	s.backups.record(info)
	s.metrics.backupTime.Set(float64(info.TakenAt.Unix()))
	s.log.Info("snapshot backed up", "index", info.Index, "bytes", info.Size, "key", info.Key, "url", s.backups.store.URL())
	return info, nil
}

// handleSnapshot serves the replica's state now as a snapshot file
// (`paxcron operator snapshot save`). It holds every job's spec, payloads
// included: it needs a write token.
func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) (any, error) {
	snap, err := s.node.Snapshot(r.Context())
	if err != nil {
		return nil, err
	}
	meta := backup.Meta{Index: snap.Meta.Index, Cluster: backupCluster, TakenAt: time.Now().UTC()}
	for _, id := range snap.Meta.Membership.Voters {
		meta.Membership = append(meta.Membership, uint64(id))
	}
	if meta.Index == 0 {
		return nil, &api.Error{Status: http.StatusConflict, Message: "nothing applied yet: no state to save"}
	}
	file, err := backup.EncodeFile(backup.NewInfo(meta, snap.Data), snap.Data)
	if err != nil {
		return nil, err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Paxcron-Index", strconv.FormatUint(meta.Index, 10))
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="paxcron-%d.snap"`, meta.Index))
	_, _ = w.Write(file)
	return nil, errHandled
}

// handleBackupNow uploads the leader's state now (`paxcron operator
// backup`), so that an operator need not wait for the next snapshot.
func (s *Server) handleBackupNow(w http.ResponseWriter, r *http.Request) (any, error) {
	if s.backups == nil {
		return nil, &api.Error{Status: http.StatusConflict, Message: "no backup target: set backup.url in the server's configuration"}
	}
	return s.onLeader(w, r, func(ctx context.Context) (any, error) {
		snap, err := s.node.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		if snap.Meta.Index == 0 {
			return nil, &api.Error{Status: http.StatusConflict, Message: "nothing applied yet: no state to back up"}
		}
		info, err := s.uploadBackup(ctx, snap)
		if err != nil {
			return nil, &api.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("uploading to %s: %v", s.backups.store.URL(), err)}
		}
		return api.BackupInfo{Index: info.Index, TakenAt: info.TakenAt, Key: info.Key, Size: info.Size, SHA256: info.SHA256}, nil
	})
}

// ErrNotEmpty is returned by RestoreStore into a store that holds state.
var ErrNotEmpty = errors.New("server: the store is not empty")

// RestoreStore writes snap into the empty store of dataDir, as the state
// a replica starts from: the disaster recovery of a cluster that lost
// every disk. Every replica is restored from the same snapshot and
// started without -bootstrap; none remembers a promise, so none can
// contradict one. Its membership must be members.
func RestoreStore(dataDir string, snap paxos.Snapshot, members []paxos.ReplicaID) error {
	if snap.Meta.Index == 0 {
		return errors.New("server: a snapshot at index 0 restores nothing")
	}
	if !sameMembers(snap.Meta.Membership.Voters, members) {
		return fmt.Errorf("server: the snapshot's members are %v, this cluster's %v", snap.Meta.Membership.Voters, members)
	}
	dir := filepath.Join(dataDir, "store")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("server: creating the data folder: %w", err)
	}
	st, err := pebblestore.Open(dir, pebblestore.Options{FS: vfs.Default, Logger: quietPebble{}})
	if err != nil {
		return err
	}
	defer st.Close()
	empty, err := storeIsEmpty(st)
	if err != nil {
		return err
	}
	if !empty {
		return fmt.Errorf("%w: %s holds a replica's state; restore only into empty folders (move the old one aside first)", ErrNotEmpty, dataDir)
	}
	// The state remembers the term of the last leader that took over; a
	// new leader's launcher must take over in a later one. The restored
	// acceptors start promised to that term, so the first ballot is above
	// it (the old cluster is gone: nobody else can hold it).
	m, err := node.RestoreState(snap.Data)
	if err != nil {
		return fmt.Errorf("server: the snapshot does not decode: %w", err)
	}
	term := m.Term()
	hs := paxos.HardState{Promised: paxos.Ballot{Round: term.Round, Replica: paxos.ReplicaID(term.Replica)}}
	return st.Save(storage.Update{Snapshot: &snap, HardState: &hs})
}

func sameMembers(a, b []paxos.ReplicaID) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[paxos.ReplicaID]bool{}
	for _, id := range a {
		seen[id] = true
	}
	for _, id := range b {
		if !seen[id] {
			return false
		}
	}
	return true
}

// quietPebble drops Pebble's informational messages.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)              {}
func (quietPebble) Errorf(format string, args ...any) { pebble.DefaultLogger.Errorf(format, args...) }
func (quietPebble) Fatalf(format string, args ...any) { pebble.DefaultLogger.Fatalf(format, args...) }

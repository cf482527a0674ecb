package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

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
//
// # Backup generations
//
// Backups rank by generation, then index (storage/backup, "Generations"),
// and a snapshot's generation is the round of the last Takeover its state
// records (BackupGeneration). That is replicated state: every replica
// reads the same generation from the snapshot at an index, so the
// replicas of one cluster agree without a word, whichever leads and
// whenever it was restored. Along one history it never decreases, as the
// state refuses a Takeover from a term below the one it holds.
//
// A restore (RestoreStore) promises every restored acceptor to the round
// after the highest of the backup target's generations and the
// snapshot's own. A ballot a quorum accepts is above that promise, so the
// restored cluster's first Takeover, and every backup after it, is of a
// generation above every backup of the lost history. Replicas restored at different
// times may be promised to different rounds; that costs an election at
// most, and the generation is still the replicated state's. Until its
// first Takeover is applied, the restored cluster's snapshots have the
// restored generation and rank below the lost history's newest backups
// (which pruning then keeps a little longer); the leader proposes its
// Takeover before anything else.
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
	return nil
}

// noteTargetsNewest records the newest backup of this replica's cluster
// at the target, for status (the backup time is this replica's own
// uploads'), once the state's cluster ID is read. Another cluster's
// newest is not this one's last backup.
func (s *Server) noteTargetsNewest() {
	if s.backups == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	list, err := s.backups.store.List(ctx)
	if err != nil {
		s.log.Warn("listing the backups", "url", s.backups.store.URL(), "err", err)
		return
	}
	if info, ok := newestOf(list, s.ClusterID().String()); ok {
		s.backups.record(info, nil)
	}
}

// newestOf returns the newest backup in list (newest first) of cluster
// id or of no cluster ID; with id unknown (a replica rebuilding), the
// newest if the backups name one cluster at most, else none.
func newestOf(list []backup.Info, id string) (backup.Info, bool) {
	var named []string
	for _, info := range list {
		if info.ClusterID != "" && !slices.Contains(named, info.ClusterID) {
			named = append(named, info.ClusterID)
		}
	}
	if id == "" && len(named) > 1 {
		return backup.Info{}, false
	}
	for _, info := range list {
		if id == "" || info.ClusterID == "" || info.ClusterID == id {
			return info, true
		}
	}
	return backup.Info{}, false
}

// record makes info the last backup unless the one recorded ranks above
// it (by generation, then index, then the time taken), and then sets
// backupTime to it if that is not nil: the same backup again sets it too
// (an idle cluster's repeated upload after a restart, whose record came
// from listing the target). Uploads end in any order: found in
// review, a routine backup that ended after a newer `operator backup`
// moved the last backup, and the age an alert reads, back. By rank, not
// by index alone, as a restored cluster's backups outrank the lost
// history's at lower indexes. The gauge is set here, under the lock, so
// that it moves with the record and not in the order the callers wake.
func (b *backups) record(info backup.Info, backupTime prometheus.Gauge) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := apiBackupInfo(info)
	if b.last != nil && backupOrder(i, *b.last) < 0 {
		return
	}
	b.last = &i
	if backupTime != nil {
		backupTime.Set(float64(i.TakenAt.Unix()))
	}
}

// backupOrder compares two backups by generation, index, then time taken.
func backupOrder(a, b api.BackupInfo) int {
	return cmp.Or(cmp.Compare(a.Generation, b.Generation), cmp.Compare(a.Index, b.Index), a.TakenAt.Compare(b.TakenAt))
}

func apiBackupInfo(info backup.Info) api.BackupInfo {
	return api.BackupInfo{Generation: info.Generation, Index: info.Index, TakenAt: info.TakenAt, Key: info.Key, Size: info.Size, SHA256: info.SHA256, ClusterID: info.ClusterID}
}

// BackupGeneration is the generation the backup of a snapshot's data
// ranks in: the round of the last Takeover its state records (see
// "Backup generations" above). An error if the state's header does not
// decode.
func BackupGeneration(data []byte) (uint64, error) {
	term, err := node.SnapshotTerm(data)
	if err != nil {
		return 0, fmt.Errorf("server: the snapshot's generation: %w", err)
	}
	return term.Round, nil
}

// backupMeta describes snap for a backup or a snapshot file, taken now:
// its generation, and the cluster ID its state holds (none before the
// first leader named it), both read from the state's header.
func backupMeta(snap paxos.Snapshot) (backup.Meta, error) {
	meta := backup.Meta{Index: snap.Meta.Index, Cluster: backupCluster, TakenAt: time.Now().UTC()}
	for _, id := range snap.Meta.Membership.Voters {
		meta.Membership = append(meta.Membership, uint64(id))
	}
	if meta.Index == 0 {
		return meta, nil
	}
	gen, err := BackupGeneration(snap.Data)
	if err != nil {
		return meta, err
	}
	id, err := node.SnapshotClusterID(snap.Data)
	if err != nil {
		return meta, fmt.Errorf("server: the snapshot's cluster ID: %w", err)
	}
	meta.Generation, meta.ClusterID = gen, id.String()
	return meta, nil
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
		_, err = s.uploadBackup(s.ctx, snap)
		switch {
		case errors.Is(err, backup.ErrSuperseded):
			s.log.Warn("snapshot not backed up: the target keeps newer backups", "index", snap.Meta.Index, "err", err)
		case errors.Is(err, backup.ErrOtherCluster), errors.Is(err, backup.ErrUnnamed):
			// uploadBackup said so.
		case err != nil:
			s.log.Error("backing up the snapshot", "index", snap.Meta.Index, "err", err)
		}
	}
}

func (s *Server) uploadBackup(ctx context.Context, snap paxos.Snapshot) (backup.Info, error) {
	meta, err := backupMeta(snap)
	if err != nil {
		// The replica applied this state: a header it cannot read back
		// is a bug, and an upload at a wrong generation could be pruned
		// at once or outrank newer backups.
		s.metrics.backupErrors.Inc()
		return backup.Info{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	info, err := upload(ctx, s.backups.store, meta, snap.Data)
	// Superseded is no failed backup: newer ones stand (a newer leader's,
	// or an operator's that ended first), and the backups' age says so.
	// Nor is a state not named yet refused by a target of named backups:
	// its leader names it as soon as it has caught up, and the backups
	// after that are checked by the name (a target of another cluster's
	// is then refused, and counted).
	if err != nil && !errors.Is(err, backup.ErrSuperseded) && !errors.Is(err, backup.ErrUnnamed) {
		s.metrics.backupErrors.Inc()
	}
	if errors.Is(err, backup.ErrUnnamed) {
		s.log.Warn("snapshot not backed up: the state has no cluster ID yet, and the backup target holds named backups, which may be another cluster's; the backups after the leader names the state carry its ID",
			"url", s.backups.store.URL(), "index", meta.Index, "err", err)
	}
	if errors.Is(err, backup.ErrOtherCluster) {
		// A configuration mistake that every upload repeats until it is
		// mended, on a routine backup and an operator's alike.
		s.log.Error("snapshot not backed up: the backup target holds another cluster's backups; give each cluster its own backup.url",
			"cluster_id", meta.ClusterID, "url", s.backups.store.URL(), "index", meta.Index, "err", err)
	}
	if info.Key == "" {
		return backup.Info{}, err
	}
	// Complete, even where only pruning failed after it (Upload returns
	// the Info with the error): recorded, so that status and the backup
	// time show it. Found in review: it was not, and an alert on the
	// backups' age fired for a backup that was there.
	s.backups.record(info, s.metrics.backupTime)
	s.log.Info("snapshot backed up", "generation", info.Generation, "index", info.Index, "bytes", info.Size, "key", info.Key, "url", s.backups.store.URL(), "err", err)
	return info, err
}

// upload is backup.Store.Upload; tests replace it to fail after the
// backup is complete, as a failed pruning does.
var upload = func(ctx context.Context, st *backup.Store, meta backup.Meta, data []byte) (backup.Info, error) {
	return st.Upload(ctx, meta, data)
}

// handleSnapshot serves the replica's state now as a snapshot file
// (`paxcron operator snapshot save`). It holds every job's spec, payloads
// included: it needs a write token.
func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) (any, error) {
	snap, err := s.node.Snapshot(r.Context())
	if err != nil {
		return nil, err
	}
	meta, err := backupMeta(snap)
	if meta.Index == 0 {
		return nil, &api.Error{Status: http.StatusConflict, Message: "nothing applied yet: no state to save"}
	}
	if err != nil {
		return nil, err
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
		if errors.Is(err, backup.ErrSuperseded) || errors.Is(err, backup.ErrUnnamed) {
			// Nothing of it is left, and nothing upstream failed; an
			// unnamed state's backup can be asked for again once named.
			return nil, &api.Error{Status: http.StatusConflict, Message: fmt.Sprintf("not backed up to %s: %v", s.backups.store.URL(), err)}
		}
		if err != nil {
			// Outranked or refused as another cluster's target, the
			// upload left nothing (unless it says it did); any other
			// failure may have left the backup stored.
			notDone := (errors.Is(err, backup.ErrOutranked) || errors.Is(err, backup.ErrOtherCluster)) && !errors.Is(err, backup.ErrLeftInTarget)
			return nil, &api.Error{Status: http.StatusBadGateway, NotDone: notDone,
				Message: fmt.Sprintf("uploading to %s: %v", s.backups.store.URL(), err)}
		}
		return apiBackupInfo(info), nil
	})
}

// ErrNotEmpty is returned by RestoreStore into a store that holds state.
var ErrNotEmpty = errors.New("server: the store is not empty")

// RestoreStore writes snap into the empty store of dataDir, as the state
// a replica starts from: the disaster recovery of a cluster that lost
// every disk. Every replica is restored from the same snapshot and
// started without -bootstrap; none remembers a promise, so none can
// contradict one. Its membership must be members.
//
// above is the highest backup generation the restored cluster's backups
// must outrank: the backup target's HighestGeneration (0 if unknown).
// The restored acceptor is promised to a round above it and above the
// snapshot's generation ("Backup generations"); RestoreStore returns the
// round, the lowest generation the restored cluster's backups can have
// once its first leader took over.
func RestoreStore(dataDir string, snap paxos.Snapshot, members []paxos.ReplicaID, above uint64) (uint64, error) {
	if snap.Meta.Index == 0 {
		return 0, errors.New("server: a snapshot at index 0 restores nothing")
	}
	if !sameMembers(snap.Meta.Membership.Voters, members) {
		return 0, fmt.Errorf("server: the snapshot's members are %v, this cluster's %v", snap.Meta.Membership.Voters, members)
	}
	m, err := node.RestoreState(snap.Data)
	if err != nil {
		return 0, fmt.Errorf("server: the snapshot does not decode: %w", err)
	}
	// The index is the manifest's or the file header's, which no checksum
	// covers. Below a slot the state applied, the restored replicas would
	// apply that slot again, which the state refuses by stopping.
	if last := m.LastSlot(); last > snap.Meta.Index {
		return 0, fmt.Errorf("server: the snapshot is described as at log index %d, but its state applied slot %d: it is not the snapshot its description was written for",
			snap.Meta.Index, last)
	}
	// The state remembers the term of the last leader that took over; a
	// new leader's launcher must take over in a later one. The restored
	// acceptors start promised above it, so the first ballot is above it
	// (the old cluster is gone: nobody else can hold it), and above the
	// generations of the backups it must outrank.
	term := m.Term()
	highest := max(term.Round, above)
	if highest >= paxos.MaxRound/2 {
		// Rounds count elections: no real cluster comes near. A promise
		// there would leave the restored cluster few rounds, or (at
		// MaxRound) none its peers accept, so it could never elect.
		return 0, fmt.Errorf("server: generation %d (the snapshot's %d, the backup target's highest %d) is beyond any round a cluster reaches; a stray or damaged object key in the target? `paxcron operator snapshot list` shows them",
			highest, term.Round, above)
	}
	promised := paxos.Ballot{Round: highest + 1}
	if !(paxos.Ballot{Round: term.Round, Replica: paxos.ReplicaID(term.Replica)}).Less(promised) {
		panic(fmt.Sprintf("server: restore promise %v is not above the state's term %v", promised, term))
	}
	dir := filepath.Join(dataDir, "store")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("server: creating the data folder: %w", err)
	}
	st, err := pebblestore.Open(dir, pebblestore.Options{FS: vfs.Default, Logger: quietPebble{}})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	empty, _, err := storeIsEmpty(st)
	if err != nil {
		return 0, err
	}
	if !empty {
		return 0, fmt.Errorf("%w: %s holds a replica's state; restore only into empty folders (move the old one aside first)", ErrNotEmpty, dataDir)
	}
	hs := paxos.HardState{Promised: promised}
	if err := st.Save(storage.Update{Snapshot: &snap, HardState: &hs}); err != nil {
		return 0, err
	}
	return promised.Round, nil
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

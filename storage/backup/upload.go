package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Upload stores data as the backup at meta's generation and index, then
// prunes the store to the newest Keep backups and meta's cluster's first
// backup there (pinnedBy). It returns the backup's Info.
//
// The data object is written first and the manifest last, with a
// write-if-absent: of two uploads at one rank (two leaders, one stale, or
// a retry), one manifest wins. Uploading the same bytes again succeeds
// and returns the stored Info (its Meta, not meta); other bytes at a rank
// that has a backup are ErrConflict, and the backup stays as it was.
//
// When only pruning fails the backup is complete: the Info is returned
// with the error, and the next upload prunes again.
//
// An upload the store's pruning would delete at once, as Keep newer
// backups are kept (a stale leader's late upload, or a backup that took
// longer than newer ones), is ErrSuperseded, with no Info: refused before
// anything is written, or, when the newer ones landed during the upload,
// after its own pruning deleted it.
//
// A store that holds a backup of a later generation than meta's is
// ErrOutranked, and nothing is written or pruned: that backup belongs to
// another history (a second cluster writing here, or the history a
// restore without the store's generations replaced). Uploaded, this one
// would rank below it: Latest would restore that history instead, and
// pruning would delete this history's backups first, so that an upload
// reported as done could be gone at once.
//
// A store that holds a backup of another cluster than meta's (both with a
// ClusterID, different) is ErrOtherCluster, and nothing is written or
// pruned (doc.go, "Clusters"), unless the target belongs to meta's
// cluster: its first backup there landed first. Backups without an ID
// count as meta's cluster's. An upload without an ID into a store that holds a named
// backup is ErrUnnamed, and nothing is written or pruned: it cannot tell
// whether that is its own cluster's. Pruning never deletes another
// cluster's backup, nor counts it among the Keep; for an upload without
// an ID, every named backup is another cluster's. An upload that finds
// after writing its manifest that the target belongs to another cluster
// (the two passed their checks together) removes its own backup, prunes
// nothing, and is ErrOtherCluster (ErrUnnamed).
func (s *Store) Upload(ctx context.Context, meta Meta, data []byte) (Info, error) {
	info, err := s.newInfo(meta, data)
	if err != nil {
		return Info{}, err
	}
	// Before anything else, a repeated upload included: found in review,
	// an idle cluster asked to back up again wrote and pruned below
	// another history's generation, and reported a backup its own
	// pruning had just deleted; and so did an older index of the newest
	// generation below Keep newer ones.
	if err := s.checkTarget(ctx, meta); err != nil {
		return Info{}, err
	}
	prev, err := s.readManifest(ctx, meta.rank())
	switch {
	case err == nil:
		return s.again(ctx, prev, info, data)
	case !errors.Is(err, ErrNotFound):
		return Info{}, err
	}
	if err := s.writeData(ctx, info, data); err != nil {
		return Info{}, err
	}
	created, err := s.commit(ctx, info)
	if err != nil {
		return Info{}, err
	}
	return s.pruneKeeping(ctx, info, meta.ClusterID, "uploaded", created)
}

// checkTarget fails with ErrOtherCluster if the store holds a backup of
// another cluster than meta's and belongs to that one (ErrUnnamed, if it
// holds one of any cluster, for meta of none); then, among the backups of meta's
// cluster, with ErrOutranked if one is of a generation above meta's, and
// with ErrSuperseded if Keep rank above it, which pruning keeps instead
// of this one.
func (s *Store) checkTarget(ctx context.Context, meta Meta) error {
	all, err := s.manifests(ctx)
	if err != nil {
		return err
	}
	manifests, theirs := split(all, meta.ClusterID)
	r := meta.rank()
	if first, ok := owns(all, meta.ClusterID); !ok {
		return s.otherCluster(meta.ClusterID, r, theirs, first)
	}
	if len(manifests) == 0 {
		return nil
	}
	if manifests[0].rank.gen > r.gen {
		return fmt.Errorf("%w: %s holds a backup at %v, above this one's generation %d. It is another history's: "+
			"another cluster, running or gone, backed up to the same place without naming itself (give each its own prefix), or this cluster was restored "+
			"without the target's generations (restore with -backup URL). Uploaded, this backup would rank below it, "+
			"and pruning would delete this cluster's backups first",
			ErrOutranked, s.url, manifests[0].rank, r.gen)
	}
	if len(manifests) >= s.opts.Keep && manifests[s.opts.Keep-1].rank.compare(r) > 0 {
		return s.superseded(r, manifests, "not uploaded")
	}
	return nil
}

// superseded is ErrSuperseded for the backup at r; manifests is the
// listing that showed it below the newest Keep; what says what became of
// it.
func (s *Store) superseded(r rank, manifests []object, what string) error {
	newest := "none left"
	if len(manifests) > 0 {
		newest = manifests[0].rank.String()
	}
	return fmt.Errorf("%w: %s keeps its newest %d backups (keep %d), all above this one's %v (the newest at %s): "+
		"pruning deletes it at once, so it was %s. A stale leader's upload, or one that ended after newer ones; the newer backups stand",
		ErrSuperseded, s.url, s.opts.Keep, s.opts.Keep, r, newest, what)
}

// newInfo validates an upload and describes it.
func (s *Store) newInfo(meta Meta, data []byte) (Info, error) {
	if err := meta.validate(); err != nil {
		return Info{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if int64(len(data)) > s.opts.MaxBackupBytes {
		return Info{}, fmt.Errorf("%w: %v: a snapshot of %d bytes is over MaxBackupBytes (%d)", ErrConfig, meta.rank(), len(data), s.opts.MaxBackupBytes)
	}
	meta.Membership = slices.Clone(meta.Membership)
	meta.TakenAt = meta.TakenAt.UTC()
	sum := sha256Hex(data)
	return Info{Meta: meta, Key: s.dataKey(meta.rank(), sum), Size: int64(len(data)), SHA256: sum}, nil
}

// again answers an upload at a rank that has a backup, prev. The same
// bytes are written again: that repairs a data object lost or damaged
// since, and is safe, as the key names the bytes.
func (s *Store) again(ctx context.Context, prev, info Info, data []byte) (Info, error) {
	if prev.SHA256 != info.SHA256 || prev.Size != info.Size {
		return Info{}, conflict(prev, info)
	}
	if err := s.writeData(ctx, prev, data); err != nil {
		return Info{}, err
	}
	return s.pruneKeeping(ctx, prev, info.ClusterID, "uploaded before", false)
}

func conflict(prev, info Info) error {
	return fmt.Errorf("%w: %v already holds a different snapshot (%s, %d bytes); this one is %d bytes with SHA-256 %s",
		ErrConflict, info.rank(), prev.Key, prev.Size, info.Size, info.SHA256)
}

func (s *Store) writeData(ctx context.Context, info Info, data []byte) error {
	opts := &blob.WriterOptions{ContentType: "application/octet-stream"}
	if err := s.bucket.WriteAll(ctx, info.Key, data, opts); err != nil {
		return fmt.Errorf("backup: writing %s: %w", info.Key, err)
	}
	return s.syncWritten(info.Key)
}

// commit writes info's manifest if there is none: from then on the backup
// exists, and created says this upload made it. It loses to a manifest
// written meanwhile (ErrConflict, or success, not created, if that one
// has the same bytes), and undoes itself if a concurrent prune took the
// data meanwhile (ErrConflict: try again).
func (s *Store) commit(ctx context.Context, info Info) (created bool, err error) {
	key := s.manifestKey(info.rank())
	b, err := json.MarshalIndent(manifest{Version: schemaVersion, Info: info}, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("backup: encoding a manifest: %v", err))
	}
	opts := &blob.WriterOptions{ContentType: "application/json", IfNotExist: true}
	err = s.bucket.WriteAll(ctx, key, b, opts)
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return false, s.lost(ctx, info)
	}
	if err != nil {
		return false, fmt.Errorf("backup: writing manifest %s: %w", key, err)
	}
	if err := s.syncWritten(key); err != nil {
		return false, err
	}
	if err := s.checkCommitted(ctx, info); err != nil {
		return false, err
	}
	return true, nil
}

// lost answers a manifest write that found one written meanwhile.
func (s *Store) lost(ctx context.Context, info Info) error {
	prev, err := s.readManifest(ctx, info.rank())
	if errors.Is(err, ErrNotFound) {
		// It appeared, and a concurrent prune took it again: this rank is
		// older than the backups kept.
		return fmt.Errorf("%w: another upload at %v won, and its backup was pruned since", ErrConflict, info.rank())
	}
	if err != nil {
		return fmt.Errorf("backup: a manifest appeared at %v while uploading: %w", info.rank(), err)
	}
	if prev.SHA256 == info.SHA256 && prev.Size == info.Size {
		return nil
	}
	// The data object is named by its checksum: no manifest points at it.
	if err := s.delete(ctx, info.Key); err != nil {
		return errors.Join(conflict(prev, info), err)
	}
	return conflict(prev, info)
}

// checkCommitted makes sure the data object outlived a concurrent upload's
// prune, which takes data without a manifest older than its newest backup.
func (s *Store) checkCommitted(ctx context.Context, info Info) error {
	ok, err := s.bucket.Exists(ctx, info.Key)
	if err != nil {
		return fmt.Errorf("backup: checking %s: %w", info.Key, err)
	}
	if ok {
		return nil
	}
	key := s.manifestKey(info.rank())
	if err := s.delete(ctx, key); err != nil {
		return fmt.Errorf("backup: %s was pruned during the upload, and its manifest stays: %w", info.Key, err)
	}
	return fmt.Errorf("%w: %s was pruned by a concurrent upload of a newer backup before its manifest was written", ErrConflict, info.Key)
}

// pruneKeeping prunes the backups of cluster after info's backup was
// committed (what says how; created if this upload wrote its manifest)
// and returns info if pruning kept it. Newer backups that landed since
// Upload's check may have pushed it out of the newest Keep: then the
// pruning deletes it, and it is ErrSuperseded, not a backup to report.
//
// Another cluster's backups that landed since the check (which found
// none), where the target is theirs, make it back off instead (backOff):
// that is two clusters' first uploads into one target racing past each
// other's checks. Where the target is this cluster's, its pruning leaves
// theirs and its own first backup alone (pinnedBy).
func (s *Store) pruneKeeping(ctx context.Context, info Info, cluster, what string, created bool) (Info, error) {
	all, err := s.manifests(ctx)
	if err != nil {
		return info, fmt.Errorf("backup: %s %s, but pruning failed: %w", what, info.Key, err)
	}
	return s.pruneListed(ctx, all, info, cluster, what, created)
}

// pruneListed is pruneKeeping from all, the store's manifests as listed
// after info's backup was committed.
func (s *Store) pruneListed(ctx context.Context, all []owned, info Info, cluster, what string, created bool) (Info, error) {
	manifests, theirs := split(all, cluster)
	first, ok := owns(all, cluster)
	if !ok {
		return Info{}, s.backOff(ctx, all, info, cluster, created, theirs, first)
	}
	pinned := pinnedBy(all, cluster, theirs)
	keep := min(len(manifests), s.opts.Keep)
	kept := slices.ContainsFunc(manifests[:keep], func(m object) bool { return m.rank == info.rank() }) || slices.Contains(pinned, info.rank())
	err := s.prune(ctx, manifests, pinned)
	if !kept {
		// Gone: pruned here, or by a concurrent upload's pruning.
		return Info{}, errors.Join(s.superseded(info.rank(), manifests, what+" and then pruned"), err)
	}
	if err != nil {
		return info, fmt.Errorf("backup: %s %s, but pruning failed: %w", what, info.Key, err)
	}
	return info, nil
}

// pinnedBy is what the pruning of cluster's backups keeps besides its
// newest Keep, in a target it owns (all, the listing): the other
// clusters' backups there (theirs), never its to prune nor their data to
// sweep, and its own first backup there, always, whether or not it sees
// another cluster's. Ownership goes to the cluster whose first backup
// landed first (ownersFirst), and another cluster's backup can land
// after any listing with any later time, as the other's first upload
// killed before it could back off: pruned as soon as it saw none, the
// owner's first backup took its claim past the other's, and the target
// changed hands (review). Kept, its claim never moves. A cluster not
// named yet claims no target: it pins none of its own.
func pinnedBy(all []owned, cluster string, theirs []owned) []rank {
	var pinned []rank
	if first, ok := firstOf(all, cluster); ok && cluster != "" {
		pinned = append(pinned, first.rank)
	}
	for _, m := range theirs {
		pinned = append(pinned, m.rank)
	}
	return pinned
}

// prune deletes the manifests of all but the newest Keep backups by rank
// (a backup stops existing with its manifest) and those pinned, then the
// data objects at ranks older than the newest kept backup that no kept or
// pinned backup owns: those of the pruned backups, and leftovers of
// uploads that died before their manifest. Data at a newer rank may be an
// upload under way: kept. manifests is the listing of manifestDir, newest
// first, of one cluster's backups; pinned holds the ranks of the other
// clusters' backups there.
func (s *Store) prune(ctx context.Context, manifests []object, pinned []rank) error {
	if len(manifests) == 0 {
		return nil
	}
	keep := min(len(manifests), s.opts.Keep)
	var pruned []rank
	for _, m := range manifests[keep:] {
		if slices.Contains(pinned, m.rank) {
			continue
		}
		if err := s.delete(ctx, m.key); err != nil {
			return err
		}
		pruned = append(pruned, m.rank)
	}
	kept := make([]rank, keep)
	newest := manifests[0].mod
	for i, m := range manifests[:keep] {
		kept[i] = m.rank
		if m.mod.After(newest) {
			newest = m.mod
		}
	}
	cutoff := newest.Add(-s.opts.OrphanGrace)
	for _, dir := range []string{dataDir, manifestDir} {
		if err := s.sweepTemps(ctx, dir, cutoff); err != nil {
			return err
		}
	}
	return s.sweep(ctx, append(kept, pinned...), pruned, cutoff)
}

// sweep deletes the data objects of the backups just pruned, and those
// ranked below kept[0] at no rank in kept that were written before cutoff:
// leftovers of uploads that died before their manifest. A younger one may
// be an upload under way, its manifest about to be written (deleting it
// would leave a manifest without data): another cluster's first upload,
// racing this one, among them.
func (s *Store) sweep(ctx context.Context, kept, pruned []rank, cutoff time.Time) error {
	data, err := s.list(ctx, dataDir)
	if err != nil {
		return err
	}
	for _, d := range data {
		leftover := d.rank.compare(kept[0]) < 0 && !slices.Contains(kept, d.rank) && d.mod.Before(cutoff)
		if !leftover && !slices.Contains(pruned, d.rank) {
			continue
		}
		if err := s.delete(ctx, d.key); err != nil {
			return err
		}
	}
	return nil
}

// delete deletes key; one already gone is no error.
func (s *Store) delete(ctx context.Context, key string) error {
	err := s.bucket.Delete(ctx, key)
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("backup: deleting %s: %w", key, err)
	}
	return nil
}

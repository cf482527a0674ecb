package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// owned is one of the store's manifests with the cluster its backup is
// of (doc.go, "Clusters").
type owned struct {
	object
	// cluster is the manifest's ClusterID: "" when it names none.
	cluster string
	// corrupt: the manifest does not decode, so its cluster is unknown.
	corrupt bool
}

// manifests lists the store's manifests, newest first, and reads each
// for its cluster. One gone since the listing (pruned meanwhile) is left
// out; one that does not decode is of no known cluster. Any error but
// ErrCorrupt stops it.
func (s *Store) manifests(ctx context.Context) ([]owned, error) {
	read, err := s.readManifests(ctx)
	if err != nil {
		return nil, err
	}
	return ownedOf(read), nil
}

// ownedOf is each manifest read with its cluster.
func ownedOf(read []manifestRead) []owned {
	out := make([]owned, 0, len(read))
	for _, m := range read {
		out = append(out, owned{object: m.object, cluster: m.info.ClusterID, corrupt: m.err != nil})
	}
	return out
}

// foreign reports whether a backup of cluster belongs to another cluster
// than id's: it is named, and not id. A backup without an ID is nobody's
// foreign one, as before IDs: nothing better is known of it. But to an
// upload without an ID every named backup is foreign: such an upload
// cannot tell a named backup of its own history from another cluster's,
// and taking them all for its own, its pruning deleted a named cluster's
// backups (review).
func foreign(cluster, id string) bool { return cluster != "" && cluster != id }

// split parts manifests into cluster id's (its own, and those of no known
// cluster) and the other clusters', each newest first.
func split(manifests []owned, id string) (ours []object, theirs []owned) {
	for _, m := range manifests {
		if foreign(m.cluster, id) {
			theirs = append(theirs, m)
		} else {
			ours = append(ours, m.object)
		}
	}
	return ours, theirs
}

// clusterIDs is the cluster IDs manifests name, each with the rank of its
// newest backup, newest first.
func clusterIDs(manifests []owned) []string {
	var out []string
	for _, id := range clusterIDsOf(manifests) {
		newest := manifests[slices.IndexFunc(manifests, func(m owned) bool { return m.cluster == id })]
		out = append(out, fmt.Sprintf("%s (newest at %v)", id, newest.rank))
	}
	return out
}

// firstOf returns cluster id's backup that landed first, by the store's
// modification times (earliest rank among equal times).
func firstOf(manifests []owned, id string) (owned, bool) {
	var first owned
	found := false
	for _, m := range manifests {
		if m.cluster == id && (!found || !first.mod.Before(m.mod)) {
			first, found = m, true
		}
	}
	return first, found
}

// ownersFirst returns the first backup of the named cluster that a target
// of several clusters' backups belongs to: the cluster whose first backup
// there landed first, by the store's modification times; of two that
// landed at one time (a store that keeps whole seconds), the lower ID.
// A killed upload (doc.go, "Clusters") leaves a second cluster's backups
// beside the first's, and refusing both clusters' uploads left neither
// backed up: every uploader computes the owner from its listing, the
// owner goes on and the others are refused.
//
// The order is the store's clock: no manifest records anything the
// clusters share (ranks are each cluster's own, TakenAt is each leader's
// clock and when the snapshot was taken, not when it landed), and a blob
// store offers no other order across keys. Every cluster's pruning keeps
// its first backup there (pinnedBy), as another cluster's can land after
// any listing: so a claim never moves, and the owner stays the owner.
func ownersFirst(manifests []owned) (owned, bool) {
	var first owned
	found := false
	for _, id := range clusterIDsOf(manifests) {
		m, _ := firstOf(manifests, id)
		if !found || m.mod.Before(first.mod) || m.mod.Equal(first.mod) && m.cluster < first.cluster {
			first, found = m, true
		}
	}
	return first, found
}

// owns reports whether cluster id owns a target whose listing is all: it
// holds no other named cluster's backup, or id's landed first
// (ownersFirst). A state not named yet owns none that holds a named
// backup.
func owns(all []owned, id string) (first owned, ok bool) {
	first, found := ownersFirst(all)
	return first, !found || id != "" && first.cluster == id
}

// clusterIDsOf is the cluster IDs manifests name, in the order of each
// one's newest backup, newest first.
func clusterIDsOf(manifests []owned) []string {
	var ids []string
	for _, m := range manifests {
		if m.cluster != "" && !slices.Contains(ids, m.cluster) {
			ids = append(ids, m.cluster)
		}
	}
	return ids
}

// belongsTo says whom a target of several clusters' backups belongs to,
// for messages; first is the owner's first backup (ownersFirst).
func belongsTo(first owned) string {
	return fmt.Sprintf("The target belongs to cluster %s, whose first backup there (at %v) landed first by the store's clock (of one time, the lower ID wins): "+
		"its uploads go on, pruning only its own, and every other cluster's are refused",
		first.cluster, first.rank)
}

// otherCluster is ErrOtherCluster for an upload of cluster id at r into a
// store that holds theirs and belongs to the cluster of first; ErrUnnamed
// for an upload without an ID.
func (s *Store) otherCluster(id string, r rank, theirs []owned, first owned) error {
	if id == "" {
		return fmt.Errorf("%w: this backup, at %v, is of a state not named yet, and %s holds backups of cluster %s. "+
			"Without an ID the upload cannot tell whether they are this cluster's or another's, and among them it could be taken for their cluster's newest. "+
			"Nothing was written or pruned. A state is unnamed for moments after an upgrade to cluster IDs or a restore of a snapshot taken before it was named, "+
			"until its leader names it; the backups after that name it and are checked by it",
			ErrUnnamed, r, s.url, strings.Join(clusterIDs(theirs), ", cluster "))
	}
	return fmt.Errorf("%w: %s holds backups of cluster %s; this backup is of cluster %s, at %v. %s. "+
		"Two clusters back up to the same place: the newest backup there could be either's, and a restore must name the cluster. "+
		"Nothing was written or pruned. Give each cluster its own backup target (another prefix: s3://bucket/production and s3://bucket/staging), "+
		"and remove any backups of cluster %[4]s left in this one",
		ErrOtherCluster, s.url, strings.Join(clusterIDs(theirs), ", cluster "), id, r, belongsTo(first))
}

// ofCluster returns the manifests a choice of "the newest" takes among,
// newest first. With id named, those of cluster id, and those of no
// known cluster as they do not decode (a restore reports them corrupt
// rather than pass them over); backups without an ID are left out, as
// they may be any cluster's. With id "", all of them, unless they name
// several clusters: then ErrSeveralClusters, naming them, as the newest
// could be another cluster's state.
func (s *Store) ofCluster(manifests []owned, id string) ([]object, error) {
	if id == "" {
		if ids := clusterIDs(manifests); len(ids) > 1 {
			return nil, fmt.Errorf("%w: %s holds the backups of %d clusters: cluster %s. Choose the one to restore by its cluster ID, "+
				"and give each cluster its own backup target", ErrSeveralClusters, s.url, len(ids), strings.Join(ids, ", cluster "))
		}
	} else if !isClusterIDHex(id) {
		return nil, fmt.Errorf("%w: cluster ID %q is not %d lowercase hex digits", ErrConfig, id, clusterIDHexLen)
	}
	var out []object
	for _, m := range manifests {
		if id == "" || m.cluster == id || m.corrupt {
			out = append(out, m.object)
		}
	}
	if len(out) == 0 && id != "" {
		return nil, fmt.Errorf("%w: no backup of cluster %s in %s under %q (it holds: %s)", ErrNotFound, id, s.url, s.opts.Prefix, orElse(strings.Join(clusterIDs(manifests), ", "), "no backup with a cluster ID"))
	}
	return out, nil
}

// backOff answers an upload of cluster id whose backup, info, landed
// beside theirs, another cluster's, in a target it does not own (owns):
// two clusters' first uploads into one target raced past each other's
// checks (a blob store has no conditional write across two keys), and
// the other's landed first. It prunes nothing and never touches theirs,
// nor its own cluster's earlier backups. all is the listing after
// info's manifest; first is the owner's first backup.
//
// It removes the backup it created (manifest first, as pruning does) only
// where the listing shows another cluster's backup that landed strictly
// before it: then every other upload at this rank, which lists after this
// manifest landed, saw that backup too and reported no success. Where the
// store's times cannot tell (the same second), another upload at this
// rank with the same bytes may have counted this backup as its own and
// reported it before the other cluster's landed (review): the backup
// stays, refused like any other backup of a cluster that does not own the
// target, so that no upload reports a backup that is gone.
func (s *Store) backOff(ctx context.Context, all []owned, info Info, id string, created bool, theirs []owned, first owned) error {
	sentinel, this, owner := ErrOtherCluster, "cluster "+id, " "+belongsTo(first)+"."
	if id == "" {
		sentinel, this, owner = ErrUnnamed, "a state not named yet", ""
	}
	undone, left, undoErr := s.undo(ctx, all, info, id, created, theirs)
	if left {
		sentinel = fmt.Errorf("%w (%w)", sentinel, ErrLeftInTarget)
	}
	err := fmt.Errorf("%w: while this backup of %s, at %v, was uploaded to %s, backups of cluster %s landed there: two clusters back up to the same place, "+
		"and their first uploads raced past each other's checks.%s %s The other cluster's backups are left alone. "+
		"Give each cluster its own backup target (another prefix: s3://bucket/production and s3://bucket/staging)",
		sentinel, this, info.rank(), s.url, strings.Join(clusterIDs(theirs), ", cluster "), owner, undone)
	return errors.Join(err, undoErr)
}

// undo removes the backup of info that this upload of cluster id
// created if another cluster's backup in all landed strictly before it
// (backOff says why), and says what became of it. An upload without an ID
// removes it either way: it never owns a target of named backups, and
// left there, it would count as the named cluster's own, outranking its
// uploads or restored as its newest.
func (s *Store) undo(ctx context.Context, all []owned, info Info, id string, created bool, theirs []owned) (what string, left bool, err error) {
	if !created {
		return "This upload had created no backup (one at its rank was there): nothing was removed, and nothing pruned.", false, nil
	}
	i := slices.IndexFunc(all, func(m owned) bool { return m.rank == info.rank() })
	if i < 0 {
		return "This upload's backup is gone already; nothing was pruned.", false, nil
	}
	if id != "" && !slices.ContainsFunc(theirs, func(m owned) bool { return m.mod.Before(all[i].mod) }) {
		return fmt.Sprintf("This upload's backup stays, refused (its manifest %s): the other cluster's landed in the same instant by the store's clock, "+
			"so another upload at its rank may have reported it already. Nothing was pruned. Remove it once this cluster backs up to a target of its own.", all[i].key), true, nil
	}
	if err := s.delete(ctx, all[i].key); err != nil {
		return "This upload could not remove the backup it wrote, which stays, refused like its cluster's next uploads; nothing was pruned.", true, err
	}
	// Without its manifest the data is no backup: one left behind is a
	// leftover that pruning deletes.
	return "This upload removed the backup it wrote and pruned nothing.", false, s.delete(ctx, info.Key)
}

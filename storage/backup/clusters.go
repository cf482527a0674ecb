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
	out := make([]owned, 0, len(read))
	for _, m := range read {
		out = append(out, owned{object: m.object, cluster: m.info.ClusterID, corrupt: m.err != nil})
	}
	return out, nil
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
	var ids, out []string
	for _, m := range manifests {
		if m.cluster != "" && !slices.Contains(ids, m.cluster) {
			ids = append(ids, m.cluster)
			out = append(out, fmt.Sprintf("%s (newest at %v)", m.cluster, m.rank))
		}
	}
	return out
}

// otherCluster is ErrOtherCluster for an upload of cluster id at r into a
// store that holds theirs; ErrUnnamed for an upload without an ID.
func (s *Store) otherCluster(id string, r rank, theirs []owned) error {
	if id == "" {
		return fmt.Errorf("%w: this backup, at %v, is of a state not named yet, and %s holds backups of cluster %s. "+
			"Without an ID the upload cannot tell whether they are this cluster's or another's, and among them it could be taken for their cluster's newest. "+
			"Nothing was written or pruned. A state is unnamed for moments after an upgrade to cluster IDs or a restore of a snapshot taken before it was named, "+
			"until its leader names it; the backups after that name it and are checked by it",
			ErrUnnamed, r, s.url, strings.Join(clusterIDs(theirs), ", cluster "))
	}
	return fmt.Errorf("%w: %s holds backups of cluster %s; this backup is of cluster %s, at %v. "+
		"Two clusters back up to the same place: the newest backup there could be either's, and one's uploads would prune the other's. "+
		"Nothing was written or pruned. Give each cluster its own backup target (another prefix: s3://bucket/production and s3://bucket/staging)",
		ErrOtherCluster, s.url, strings.Join(clusterIDs(theirs), ", cluster "), id, r)
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
// beside theirs, another cluster's, that landed after its check found
// none: two clusters' first uploads into one target raced past each
// other's checks (a blob store has no conditional write across two
// keys). It removes the backup this upload created (manifest first, as
// pruning does), and nothing else: not theirs, and none of its own
// cluster's earlier backups. It prunes nothing.
//
// Both uploads may back off at once, each seeing the other's: then the
// target holds neither, and the next upload of either goes in alone (the
// other's next is refused) unless they race again. At most one keeps its
// backup: the second to commit its manifest sees the first's, which the
// first removes only if it saw the second's.
func (s *Store) backOff(ctx context.Context, info Info, id string, created bool, theirs []owned) error {
	sentinel, this := ErrOtherCluster, "cluster "+id
	if id == "" {
		sentinel, this = ErrUnnamed, "a state not named yet"
	}
	undone := "This upload had created no backup (one at its rank was there): nothing was removed, and nothing pruned."
	var undoErr error
	if created {
		undone = "This upload removed the backup it wrote and pruned nothing."
		if undoErr = s.delete(ctx, s.manifestKey(info.rank())); undoErr != nil {
			undone = "This upload could not remove the backup it wrote, which stays: each cluster's next upload is refused until one is removed."
		} else {
			// Without its manifest the data is no backup: one left behind
			// is a leftover that pruning deletes.
			undoErr = s.delete(ctx, info.Key)
		}
	}
	err := fmt.Errorf("%w: while this backup of %s, at %v, was uploaded to %s, backups of cluster %s landed there: two clusters back up to the same place, "+
		"and their first uploads raced past each other's checks. %s The other cluster's backups are left alone (its upload, seeing this one, backs off the same way). "+
		"Give each cluster its own backup target (another prefix: s3://bucket/production and s3://bucket/staging)",
		sentinel, this, info.rank(), s.url, strings.Join(clusterIDs(theirs), ", cluster "), undone)
	return errors.Join(err, undoErr)
}

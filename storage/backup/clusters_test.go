package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Two clusters' IDs, as paxcron's state writes them.
const (
	clusterA = "0123456789abcdef0123456789abcdef"
	clusterB = "fedcba9876543210fedcba9876543210"
)

func metaOf(id string, gen, i uint64) Meta {
	m := metaAt(gen, i)
	m.ClusterID = id
	return m
}

func uploadOf(t *testing.T, s *Store, id string, gen uint64, indexes ...uint64) []Info {
	t.Helper()
	var infos []Info
	for _, i := range indexes {
		info, err := s.Upload(context.Background(), metaOf(id, gen, i), snap(i))
		if err != nil {
			t.Fatalf("upload of cluster %q at %d/%d: %v", id, gen, i, err)
		}
		infos = append(infos, info)
	}
	return infos
}

// clustersOf renders infos' cluster IDs, "-" for none.
func clustersOf(infos []Info) string {
	var out []string
	for _, info := range infos {
		out = append(out, orElse(info.ClusterID, "-"))
	}
	return strings.Join(out, " ")
}

// Staging and production given one target: the second cluster's upload
// is refused, above or below the first one's ranks, naming both IDs and
// what to do; nothing is written or pruned, and the first cluster goes
// on backing up. (Before IDs, the upload above was taken and pruned the
// first cluster's backups, and the one below was "outranked".)
func TestUploadIntoAnotherClustersTargetIsRefused(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{Keep: 3})
	uploadOf(t, s, clusterA, 2, 10, 20, 30)
	before := keys(t, s)
	for _, m := range []Meta{metaOf(clusterB, 9, 40), metaOf(clusterB, 2, 30), metaOf(clusterB, 1, 5)} {
		info, err := s.Upload(ctx, m, snap(m.Index+1))
		wantErr(t, "an upload of another cluster", err, ErrOtherCluster)
		if info.Key != "" {
			t.Errorf("refused, it returned %+v", info)
		}
		for _, part := range []string{clusterA, clusterB, "own backup target", "Nothing was written or pruned"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("the refusal does not say %q: %v", part, err)
			}
		}
		if after := keys(t, s); !slices.Equal(after, before) {
			t.Fatalf("refused, the upload changed the target:\n%v\nwas\n%v", after, before)
		}
	}
	uploadOf(t, s, clusterA, 2, 40)
	if list, err := s.List(ctx); err != nil || ranks(list) != "2/40 2/30 2/20" || clustersOf(list) != strings.Repeat(clusterA+" ", 2)+clusterA {
		t.Fatalf("List: %s of %s (%v)", ranks(list), clustersOf(list), err)
	}
}

// Backups without an ID (older binaries', or of a state not named yet)
// are a named uploader's, as before IDs: a named cluster backs up over
// them and prunes them. List shows each backup's ID.
func TestUnnamedBackupsCountAsTheUploaders(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{Keep: 3})
	uploadAt(t, s, 1, 10, 20)
	uploadOf(t, s, clusterA, 1, 30)
	uploadOf(t, s, clusterA, 2, 5)
	list, err := s.List(ctx)
	if err != nil || ranks(list) != "2/5 1/30 1/20" || clustersOf(list) != clusterA+" "+clusterA+" -" {
		t.Fatalf("List: %s of %s (%v)", ranks(list), clustersOf(list), err)
	}
	// One named cluster and unnamed backups: the newest is chosen as
	// before.
	if info, _, err := s.Latest(ctx, ""); err != nil || info.rank() != (rank{gen: 2, index: 5}) {
		t.Fatalf("Latest: %+v, %v", info, err)
	}
	// The generation rules hold within one cluster.
	_, err = s.Upload(ctx, metaOf(clusterA, 1, 40), snap(40))
	wantErr(t, "an upload below the cluster's generation", err, ErrOutranked)
}

// An upload without an ID (a state not named yet: after an upgrade to
// IDs, before the leader named it) into a target that holds a named
// cluster's backups is refused, above or below them, saying why; nothing
// is written or pruned. Found in review: counting them as its own, it
// went in above them, and its pruning deleted the named cluster's
// backups; a restore of "the newest" then took it for theirs. Into a
// target of unnamed backups alone it uploads and prunes as before.
func TestUnnamedUploadNeverPrunesANamedClustersBackups(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{Keep: 2})
	uploadAt(t, s, 1, 1, 2, 3)
	if list, err := s.List(ctx); err != nil || ranks(list) != "1/3 1/2" {
		t.Fatalf("unnamed backups among themselves: %s (%v)", ranks(list), err)
	}
	uploadOf(t, s, clusterA, 2, 10, 20)
	before := keys(t, s)
	for _, m := range []Meta{metaAt(9, 30), metaAt(2, 30), metaAt(2, 15), metaAt(1, 5)} {
		info, err := s.Upload(ctx, m, snap(m.Index))
		wantErr(t, fmt.Sprintf("an unnamed upload at %v among cluster A's", m.rank()), err, ErrUnnamed)
		if info.Key != "" {
			t.Errorf("refused, it returned %+v", info)
		}
		for _, part := range []string{clusterA, "not named yet", "Nothing was written or pruned"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("the refusal does not say %q: %v", part, err)
			}
		}
		if after := keys(t, s); !slices.Equal(after, before) {
			t.Fatalf("refused, the upload changed the target:\n%v\nwas\n%v", after, before)
		}
	}
	if list, err := s.List(ctx); err != nil || ranks(list) != "2/20 2/10" || clustersOf(list) != clusterA+" "+clusterA {
		t.Fatalf("List: %s of %s (%v)", ranks(list), clustersOf(list), err)
	}
}

// landUnchecked writes a backup and its manifest as Upload does, without
// Upload's checks or pruning: what another binary, or an upload that
// passed its check before the other cluster's landed, leaves.
func landUnchecked(t *testing.T, s *Store, meta Meta, data []byte) Info {
	t.Helper()
	ctx := context.Background()
	info, err := s.newInfo(meta, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.writeData(ctx, info, data); err != nil {
		t.Fatal(err)
	}
	if err := s.commit(ctx, info); err != nil {
		t.Fatal(err)
	}
	return info
}

// An upload whose check passed, of cluster A, whose pruning finds
// another cluster's backups landed meanwhile: pruning neither counts nor
// deletes them, manifests or data, even with their data older than the
// orphan grace and ranked below A's newest.
func TestPruningKeepsAnotherClustersBackups(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{Keep: 2, OrphanGrace: time.Nanosecond})
	uploadOf(t, s, clusterB, 1, 5, 50)
	theirs := keys(t, s)
	var ours []Info
	for _, i := range []uint64{10, 20, 30} {
		// As Upload does, past its check (which the backups of B, landed
		// since, would now fail).
		info, err := s.pruneKeeping(ctx, landUnchecked(t, s, metaOf(clusterA, 1, i), snap(i)), clusterA, "uploaded")
		if err != nil {
			t.Fatal(err)
		}
		ours = append(ours, info)
	}
	all := keys(t, s)
	for _, k := range theirs {
		if !slices.Contains(all, k) {
			t.Errorf("pruning deleted %s, cluster B's", k)
		}
	}
	list, err := s.List(ctx)
	if err != nil || ranks(list) != "1/50 1/30 1/20 1/5" {
		t.Fatalf("List: %s (%v)", ranks(list), err)
	}
	if slices.Contains(all, ours[0].Key) {
		t.Errorf("A's oldest backup, beyond Keep 2 of A's, was not pruned")
	}
}

// Latest and LatestValid choose "the newest" of one cluster: asked for
// none, a target of two named clusters is refused, naming both; asked for
// one, its newest, even below the other's.
func TestLatestOfSeveralClusters(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{Keep: 5})
	uploadAt(t, s, 1, 1)
	uploadOf(t, s, clusterA, 1, 10, 20)
	// B's backups land as a binary before IDs would write them beside A's.
	for _, i := range []uint64{30, 40} {
		landUnchecked(t, s, metaOf(clusterB, 3, i), snap(i))
	}
	_, _, err := s.Latest(ctx, "")
	wantErr(t, "Latest of no cluster", err, ErrSeveralClusters)
	for _, part := range []string{clusterA, clusterB, "3, index 40", "1, index 20"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the refusal does not say %q: %v", part, err)
		}
	}
	_, _, _, err = s.LatestValid(ctx, "")
	wantErr(t, "LatestValid of no cluster", err, ErrSeveralClusters)
	for id, want := range map[string]rank{clusterA: {1, 20}, clusterB: {3, 40}} {
		info, data, err := s.Latest(ctx, id)
		if err != nil || info.rank() != want || info.ClusterID != id || string(data) != string(snap(want.index)) {
			t.Errorf("Latest of %s: %+v, %v; want %v", id, info, err, want)
		}
		info, _, _, err = s.LatestValid(ctx, id)
		if err != nil || info.rank() != want {
			t.Errorf("LatestValid of %s: %+v, %v; want %v", id, info, err, want)
		}
	}
	_, _, err = s.Latest(ctx, "00000000000000000000000000000001")
	wantErr(t, "Latest of a cluster with no backup", err, ErrNotFound)
	_, _, err = s.Latest(ctx, "ABC")
	wantErr(t, "Latest of a malformed ID", err, ErrConfig)
}

// A cluster ID is 32 lowercase hex digits, not all zero, or none.
func TestClusterIDIsValidated(t *testing.T) {
	s := open(t, "mem://", Options{})
	for _, id := range []string{"0123", strings.ToUpper(clusterA), strings.Repeat("0", 32), clusterA + "0", "g123456789abcdef0123456789abcdef"} {
		_, err := s.Upload(context.Background(), metaOf(id, 1, 7), snap(7))
		if !errors.Is(err, ErrConfig) {
			t.Errorf("an upload of cluster %q: %v, want ErrConfig", id, err)
		}
	}
	if keys(t, s) != nil {
		t.Errorf("refused uploads wrote %v", keys(t, s))
	}
}

// A manifest or a snapshot file's header whose cluster ID is not one is
// corrupt: a damaged ID would make a backup of no cluster or of another.
func TestBadClusterIDIsCorrupt(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{})
	info := uploadOf(t, s, clusterA, 0, 7)[0]
	key := s.manifestKey(at(7))
	for _, bad := range []string{clusterA[:31], strings.ToUpper(clusterA), strings.Repeat("0", 32), clusterA + "00"} {
		rewrite(t, s, key, func(b []byte) []byte { return []byte(strings.Replace(string(b), clusterA, bad, 1)) })
		_, err := s.readManifest(ctx, at(7))
		wantErr(t, "a manifest of cluster "+bad, err, ErrCorrupt)
		file, err := EncodeFile(Info{Meta: metaOf(bad, 0, 7), Size: info.Size, SHA256: info.SHA256}, snap(7))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = DecodeFile(file)
		wantErr(t, "a file of cluster "+bad, err, ErrCorrupt)
		rewrite(t, s, key, func(b []byte) []byte { return []byte(strings.Replace(string(b), bad, clusterA, 1)) })
	}
	if got, err := s.readManifest(ctx, at(7)); err != nil || got.ClusterID != clusterA {
		t.Fatalf("read back: %+v, %v", got, err)
	}
}

package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// on backing up, keeping its newest Keep and its first backup there
// (pinnedBy). (Before IDs, the upload above was taken and pruned the
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
	if list, err := s.List(ctx); err != nil || ranks(list) != "2/40 2/30 2/20 2/10" || clustersOf(list) != strings.Repeat(clusterA+" ", 3)+clusterA {
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
	if _, err := s.commit(ctx, info); err != nil {
		t.Fatal(err)
	}
	return info
}

// An upload of cluster A whose check passed, and which finds after its
// manifest that another cluster's backups landed meanwhile (before its
// own: the target is theirs), backs off: it removes the backup it wrote,
// manifest and data, prunes nothing (the unnamed backup beyond Keep 2,
// which counts as A's, stays), and fails with ErrOtherCluster naming both
// and the owner; B's backups stay, manifests and data, even with their
// data older than the orphan grace and ranked below A's newest. Before,
// it took the target for its own and kept both clusters' backups there.
func TestUploadThatFindsAnotherClustersBackupsBacksOff(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{Keep: 2, OrphanGrace: time.Nanosecond})
	uploadAt(t, s, 1, 10, 20)
	checkedAt := metaOf(clusterA, 1, 30)
	if err := s.checkTarget(ctx, checkedAt); err != nil {
		t.Fatal(err)
	}
	// B's land between A's check and A's manifest.
	for _, i := range []uint64{5, 50} {
		landUnchecked(t, s, metaOf(clusterB, 1, i), snap(i))
	}
	before := keys(t, s)
	info := landUnchecked(t, s, checkedAt, snap(30))
	got, err := s.pruneKeeping(ctx, info, clusterA, "uploaded", true)
	wantErr(t, "an upload that finds B's backups after its manifest", err, ErrOtherCluster)
	if errors.Is(err, ErrLeftInTarget) {
		t.Errorf("an upload that removed its backup says it left it: %v", err)
	}
	if got.Key != "" {
		t.Errorf("backed off, it returned %+v", got)
	}
	for _, part := range []string{clusterA, clusterB, "raced", "belongs to cluster " + clusterB, "removed the backup it wrote", "own backup target"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the refusal does not say %q: %v", part, err)
		}
	}
	if after := keys(t, s); !slices.Equal(after, before) {
		t.Fatalf("backed off, the target is\n%v\nnot as before A's upload:\n%v", after, before)
	}
	list, err := s.List(ctx)
	if err != nil || ranks(list) != "1/50 1/20 1/10 1/5" || clustersOf(list) != clusterB+" - - "+clusterB {
		t.Fatalf("List: %s of %s (%v)", ranks(list), clustersOf(list), err)
	}
}

// sameTarget is a second Store over s's bucket: another cluster's server,
// given the same target.
func sameTarget(s *Store) *Store { return newStore(s.bucket, s.opts, s.url) }

// Two clusters' first uploads into one empty target, each past its check
// before the other's manifest: the first to land keeps its backup and the
// target (ownersFirst), whichever lists the manifests first; the other
// backs off, removing the backup it wrote, which landed after the
// owner's. The next upload of the owner goes in, and the other's is
// refused. Neither deletes the other's backups or its own earlier ones.
// An upload without an ID racing a named one's backs off.
func TestFirstUploadsOfTwoClustersRacing(t *testing.T) {
	ctx := context.Background()
	type racer struct {
		meta    Meta
		info    Info
		created bool
		listed  []owned
	}
	for _, tc := range []struct {
		name string
		a, b Meta
		// bothListFirst: both list the manifests before either backs off.
		bothListFirst bool
		// survivor is the cluster whose backup stays.
		survivor string
	}{
		{"A lists first", metaOf(clusterA, 1, 10), metaOf(clusterB, 4, 7), false, clusterA},
		{"both list at once", metaOf(clusterA, 1, 10), metaOf(clusterB, 4, 7), true, clusterA},
		// At one rank, the second manifest loses (ErrConflict), as before
		// IDs.
		{"at one rank", metaOf(clusterA, 2, 10), metaOf(clusterB, 2, 10), false, clusterA},
		{"unnamed against named", metaAt(5, 10), metaOf(clusterB, 1, 3), false, clusterB},
		{"named against unnamed", metaOf(clusterA, 1, 3), metaAt(5, 10), false, clusterA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, "mem://", Options{Keep: 3, OrphanGrace: time.Nanosecond})
			stores := []*Store{s, sameTarget(s)}
			racers := []*racer{{meta: tc.a}, {meta: tc.b}}
			for i, r := range racers {
				if err := stores[i].checkTarget(ctx, r.meta); err != nil {
					t.Fatalf("the check of %q: %v", r.meta.ClusterID, err)
				}
			}
			for i, r := range racers {
				data := append(snap(r.meta.Index), r.meta.ClusterID...)
				var err error
				if r.info, err = stores[i].newInfo(r.meta, data); err != nil {
					t.Fatal(err)
				}
				if err := stores[i].writeData(ctx, r.info, data); err != nil {
					t.Fatal(err)
				}
				if r.created, err = stores[i].commit(ctx, r.info); err != nil || !r.created {
					if !errors.Is(err, ErrConflict) {
						t.Fatalf("the commit of %q: created %v, %v", r.meta.ClusterID, r.created, err)
					}
					r.info = Info{}
				}
			}
			results := make([]error, len(racers))
			for i, r := range racers {
				if r.info.Key == "" {
					results[i] = ErrConflict
					continue
				}
				var err error
				if r.listed, err = stores[i].manifests(ctx); err != nil {
					t.Fatal(err)
				}
				if !tc.bothListFirst {
					_, results[i] = stores[i].pruneListed(ctx, r.listed, r.info, r.meta.ClusterID, "uploaded", r.created)
				}
			}
			if tc.bothListFirst {
				for i, r := range racers {
					_, results[i] = stores[i].pruneListed(ctx, r.listed, r.info, r.meta.ClusterID, "uploaded", r.created)
				}
			}
			list, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			for i, r := range racers {
				if orElse(r.meta.ClusterID, "-") == orElse(tc.survivor, "-") {
					want = r.meta.rank().String()
					if results[i] != nil {
						t.Errorf("the survivor's upload: %v", results[i])
					}
				} else if !errors.Is(results[i], ErrOtherCluster) && !errors.Is(results[i], ErrUnnamed) && !errors.Is(results[i], ErrConflict) {
					t.Errorf("the upload of %q that lost: %v, want a refusal", r.meta.ClusterID, results[i])
				}
			}
			if len(list) != 1 || list[0].rank().String() != want {
				t.Fatalf("after the race the target holds %s of %s; want %s", ranks(list), clustersOf(list), want)
			}
			// The next uploads: the survivor's goes in, and the other's is
			// refused.
			for _, r := range racers {
				m := r.meta
				m.Index += 100
				_, err := s.Upload(ctx, m, snap(m.Index))
				goesIn := orElse(r.meta.ClusterID, "-") == orElse(tc.survivor, "-")
				if goesIn && err != nil || !goesIn && !errors.Is(err, ErrOtherCluster) && !errors.Is(err, ErrUnnamed) {
					t.Errorf("the next upload of %q: %v", r.meta.ClusterID, err)
				}
			}
			if list, err := s.List(ctx); err != nil || strings.Contains(clustersOf(list), clusterA) && strings.Contains(clustersOf(list), clusterB) {
				t.Fatalf("the target holds %s of %s (%v)", ranks(list), clustersOf(list), err)
			}
		})
	}
}

// What a process killed between its manifest and the listing after it
// leaves: cluster B's first upload passed its check before A's first
// backup landed, and landed after it. Before, both clusters' uploads
// were refused from then on, and neither had backups. The target is A's,
// whose backup landed first: A's uploads go on, many times over Keep,
// pruning only A's own (its first backup stays while B's is there, so
// that A's claim stays the older); B's backup stays, manifest and data,
// though below A's newest and older than the orphan grace; every upload
// of B is refused, naming both and the owner, before and after A's.
func TestOwnerOfATargetOfTwoClustersGoesOn(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{Keep: 2, OrphanGrace: time.Nanosecond})
	if err := s.checkTarget(ctx, metaOf(clusterB, 9, 5)); err != nil {
		t.Fatal(err)
	}
	uploadOf(t, s, clusterA, 1, 10)
	ofB := landUnchecked(t, s, metaOf(clusterB, 9, 5), snap(5))
	refused := func(when string) {
		t.Helper()
		for _, m := range []Meta{metaOf(clusterB, 9, 6), metaOf(clusterB, 20, 1)} {
			_, err := s.Upload(ctx, m, snap(m.Index))
			wantErr(t, "an upload of B "+when, err, ErrOtherCluster)
			for _, part := range []string{clusterA, clusterB, "belongs to cluster " + clusterA, "Nothing was written or pruned"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("the refusal %s does not say %q: %v", when, part, err)
				}
			}
		}
	}
	refused("before A's next")
	uploadOf(t, s, clusterA, 1, 20, 30, 40, 50)
	refused("after A's")
	list, err := s.List(ctx)
	if err != nil || ranks(list) != "9/5 1/50 1/40 1/10" || clustersOf(list) != clusterB+" "+clusterA+" "+clusterA+" "+clusterA {
		t.Fatalf("List: %s of %s (%v)", ranks(list), clustersOf(list), err)
	}
	if ok, err := s.bucket.Exists(ctx, ofB.Key); !ok || err != nil {
		t.Fatalf("B's data %s was swept (%v)", ofB.Key, err)
	}
	if info, _, err := s.Latest(ctx, clusterA); err != nil || info.rank() != (rank{gen: 1, index: 50}) {
		t.Fatalf("Latest of A: %+v, %v", info, err)
	}
	// Scan marks what pruning keeps past Keep, and why: each cluster's
	// first backup, and among them the owner's.
	listed, err := s.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var marks []string
	for _, l := range listed {
		marks = append(marks, fmt.Sprintf("%d/%d:%v,%v", l.Generation, l.Index, l.First, l.Owns))
	}
	if got, want := strings.Join(marks, " "), "9/5:true,false 1/50:false,false 1/40:false,false 1/10:true,true"; got != want {
		t.Fatalf("Scan's first and owner marks: %s, want %s", got, want)
	}
}

// Two uploads of cluster B at one rank with the same bytes (a retry, or
// two leaders), racing cluster A's first upload: the first writes the
// manifest, the second counts that backup as its own and reports it from
// a listing without A's, and then A's lands, before the first lists.
// Found in review: the first backed off and removed the backup the second
// had reported. Now A's, landing after B's, leaves B the owner, and the
// first goes on too; and where the store's clock gives both manifests
// one time (A's ID being the lower, A owns), the first backs off but
// leaves its backup, which the second reported.
func TestSameRankUploadsRacingAForeignFirstUpload(t *testing.T) {
	ctx := context.Background()
	for _, sameInstant := range []bool{false, true} {
		t.Run(fmt.Sprintf("same instant %v", sameInstant), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, "file://"+dir, Options{Keep: 3, OrphanGrace: time.Nanosecond})
			ofA, ofB := metaOf(clusterA, 9, 5), metaOf(clusterB, 1, 10)
			for _, m := range []Meta{ofA, ofB} {
				if err := s.checkTarget(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			first := landUnchecked(t, s, ofB, snap(10))
			second, err := sameTarget(s).Upload(ctx, ofB, snap(10))
			if err != nil {
				t.Fatalf("the second upload at B's rank: %v", err)
			}
			landUnchecked(t, s, ofA, snap(5))
			if sameInstant {
				stampLike(t, dir, s.manifestKey(ofA.rank()), s.manifestKey(ofB.rank()))
			}
			_, err = s.pruneKeeping(ctx, first, clusterB, "uploaded", true)
			if !sameInstant && err != nil || sameInstant && (!errors.Is(err, ErrOtherCluster) || !errors.Is(err, ErrLeftInTarget) || !strings.Contains(err.Error(), "stays")) {
				t.Errorf("the first upload at B's rank: %v", err)
			}
			if got, _, err := s.Fetch(ctx, second.Key); err != nil || !sameInfo(got, second) {
				t.Fatalf("the backup the second upload reported, %s: %+v, %v", second.Key, got, err)
			}
		})
	}
}

// stampLike gives key's file in a fileblob store at dir the modification
// time of like's: two manifests landed in one instant by the store's
// clock (one second, for S3).
func stampLike(t *testing.T, dir, key, like string) {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(like)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(key)), fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// landedAt gives key's file in a fileblob store at dir the modification
// time at: when the store's clock says the object landed.
func landedAt(t *testing.T, dir, key string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(key)), at, at); err != nil {
		t.Fatal(err)
	}
}

// The owner of a target prunes from a listing taken after its manifest;
// another cluster's backup that lands after that listing (a killed first
// upload of that cluster) is not in it. Found in review: the owner pinned
// its first backup only once it saw another cluster's, so its pruning
// deleted it, its claim moved past the other cluster's backup, and the
// target changed hands: the owner's uploads were refused from then on
// and the other cluster's went on. Three ways: the other's manifest
// stamped before the owner's second though visible after it (file://
// writes a temporary file and renames it; a store may stamp a write when
// it starts), stamped in the same second (a store that keeps whole
// seconds; the other's ID is the lower), or landed after it but pruned
// past by another upload of the owner (an operator's, or a second
// leader's) while this one's listing was older. Now a cluster keeps its
// first backup in a target always, seen or not: its claim never moves.
func TestOwnershipNeverMovesToAnIntruder(t *testing.T) {
	ctx := context.Background()
	firstLanded := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, tc := range []struct {
		name            string
		owner, intruder string
		// intruderAfter: when the store stamps the intruder's backup,
		// after the owner's first; the owner's second is stamped at 2s.
		intruderAfter time.Duration
		// anotherUpload: an upload of the owner that sees the intruder's
		// backup goes in whole before this one prunes.
		anotherUpload bool
	}{
		{"stamped before the owner's second", clusterA, clusterB, time.Second, false},
		{"stamped in the owner's second, of the lower ID", clusterB, clusterA, 2 * time.Second, false},
		{"pruned past by the owner's other upload", clusterA, clusterB, 3 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, "file://"+dir, Options{Keep: 1})
			first := landUnchecked(t, s, metaOf(tc.owner, 1, 10), snap(10))
			landedAt(t, dir, s.manifestKey(first.rank()), firstLanded)
			second := landUnchecked(t, s, metaOf(tc.owner, 1, 20), snap(20))
			landedAt(t, dir, s.manifestKey(second.rank()), firstLanded.Add(2*time.Second))
			listed, err := s.manifests(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ofIntruder := landUnchecked(t, sameTarget(s), metaOf(tc.intruder, 9, 5), snap(5))
			landedAt(t, dir, s.manifestKey(ofIntruder.rank()), firstLanded.Add(tc.intruderAfter))
			if tc.anotherUpload {
				uploadOf(t, s, tc.owner, 1, 30)
			}
			if _, err := s.pruneListed(ctx, listed, second, tc.owner, "uploaded", true); err != nil {
				t.Fatalf("the owner's pruning: %v", err)
			}
			if _, err := s.Upload(ctx, metaOf(tc.owner, 1, 40), snap(40)); err != nil {
				t.Fatalf("the owner's next upload: %v", err)
			}
			_, err = s.Upload(ctx, metaOf(tc.intruder, 9, 6), snap(6))
			wantErr(t, "the intruder's next upload", err, ErrOtherCluster)
			if !strings.Contains(err.Error(), "belongs to cluster "+tc.owner) {
				t.Errorf("the refusal does not name the owner: %v", err)
			}
			list, err := s.List(ctx)
			if err != nil || ranks(list) != "9/5 1/40 1/10" {
				t.Fatalf("List: %s of %s (%v); want the intruder's, the owner's newest and its first", ranks(list), clustersOf(list), err)
			}
		})
	}
}

package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
)

func TestSameIndexTwice(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			s := be.open(t, Options{})
			first := upload(t, s, 3)[0]

			later := meta(3)
			later.TakenAt = later.TakenAt.Add(time.Hour)
			again, err := s.Upload(ctx, later, snap(3))
			if err != nil || !sameInfo(again, first) {
				t.Fatalf("the same bytes again: %+v, %v; want the stored %+v", again, err, first)
			}

			_, err = s.Upload(ctx, meta(3), []byte("other bytes"))
			wantErr(t, "other bytes at the same index", err, ErrConflict)
			if !strings.Contains(err.Error(), "index 3") {
				t.Fatalf("the conflict does not name the index: %v", err)
			}
			info, data, err := s.Latest(ctx, "")
			if err != nil || !sameInfo(info, first) || !bytes.Equal(data, snap(3)) {
				t.Fatalf("after the conflict, Latest: %+v, %v", info, err)
			}
			if got := keys(t, s); len(got) != 2 {
				t.Fatalf("objects after the conflict: %v, want backup 3's two", got)
			}

			// The same bytes again repair a lost data object.
			if err := s.bucket.Delete(ctx, first.Key); err != nil {
				t.Fatal(err)
			}
			upload(t, s, 3)
			if _, _, err := s.Latest(ctx, ""); err != nil {
				t.Fatalf("Latest after the repair: %v", err)
			}
		})
	}
}

// Two uploads at one index: both wrote their data, the other's manifest
// landed first.
func TestManifestRaceAtOneIndex(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{})
	mine, err := s.newInfo(meta(4), []byte("mine"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.writeData(ctx, mine, []byte("mine")); err != nil {
		t.Fatal(err)
	}
	theirs, err := s.Upload(ctx, meta(4), []byte("theirs"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.commit(ctx, mine)
	wantErr(t, "the losing manifest", err, ErrConflict)
	if ok, _ := s.bucket.Exists(ctx, mine.Key); ok {
		t.Fatal("the loser's data object was left behind")
	}
	if info, data, err := s.Latest(ctx, ""); err != nil || !sameInfo(info, theirs) || string(data) != "theirs" {
		t.Fatalf("Latest: %+v %q, %v; want the winner", info, data, err)
	}

	// The same bytes racing: the loser succeeds, and the data stays.
	same, _ := s.newInfo(meta(4), []byte("theirs"))
	if created, err := s.commit(ctx, same); err != nil || created {
		t.Fatalf("a losing manifest for the same bytes: created %v, %v; want success, not created", created, err)
	}
	if _, _, err := s.Latest(ctx, ""); err != nil {
		t.Fatal(err)
	}
}

// An upload of an old index whose data a concurrent upload's prune took
// before the manifest was written.
func TestPruneRaceUndoesTheManifest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, "file://"+dir, Options{Keep: 2})
	old, _ := s.newInfo(meta(1), snap(1))
	if err := s.writeData(ctx, old, snap(1)); err != nil {
		t.Fatal(err)
	}
	age(t, dir, old.Key, 2*time.Hour) // an upload slower than the grace
	upload(t, s, 2)
	_, err := s.commit(ctx, old)
	wantErr(t, "commit after the data was pruned", err, ErrConflict)
	if list, err := s.List(ctx); err != nil || indexes(list) != "[2]" {
		t.Fatalf("List: %v (%v): a manifest without its data was left", indexes(list), err)
	}
}

func TestConcurrentUploads(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{Keep: 3})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range uint64(20) {
		for range 2 { // every index twice, with the same bytes
			wg.Go(func() {
				if _, err := s.Upload(ctx, meta(i+1), snap(i+1)); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// Losing to a concurrent prune, or to Keep newer uploads, are the
		// failures allowed.
		if !errors.Is(err, ErrSuperseded) {
			wantErr(t, "a concurrent upload", err, ErrConflict)
		}
	}
	upload(t, s, 21) // prunes what the races left
	list, err := s.List(ctx)
	if err != nil || indexes(list) != "[21 20 19]" {
		t.Fatalf("List: %v (%v)", indexes(list), err)
	}
	for _, info := range list {
		if _, _, err := s.Fetch(ctx, info.Key); err != nil {
			t.Fatal(err)
		}
	}
	// Besides the 3 backups' 6 objects, an upload that rewrote its data
	// while a prune removed its backup may leave that data behind: young,
	// so kept until it is older than OrphanGrace; never at a kept index.
	backups := 0
	for _, key := range keys(t, s) {
		if r, _, ok := s.parseDataKey(key); ok && r.index < 19 {
			continue
		}
		backups++
	}
	if backups != 6 {
		t.Fatalf("objects: %v, want the 3 backups' 6 (and young leftovers)", keys(t, s))
	}
}

func TestFetchUnknownKeys(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{})
	info := upload(t, s, 7)[0]
	for _, key := range []string{
		"",
		"paxcron/snapshots/x.snap",
		s.manifestKey(at(7)),
		strings.Replace(info.Key, "paxcron/", "other/", 1),
		s.dataKey(at(7), sha256Hex([]byte("other"))),
		s.dataKey(at(8), info.SHA256),
		s.dataKey(at(0), info.SHA256),
	} {
		_, _, err := s.Fetch(ctx, key)
		wantErr(t, fmt.Sprintf("Fetch(%q)", key), err, ErrNotFound)
	}
}

func TestPrefixesShareABucket(t *testing.T) {
	ctx := context.Background()
	url := "file://" + t.TempDir()
	a := open(t, url, Options{Keep: 1})
	b := open(t, url, Options{Keep: 1, Prefix: "b/"})
	upload(t, a, 1)
	upload(t, b, 2, 3)
	for _, tc := range []struct {
		s    *Store
		want string
	}{{a, "[1]"}, {b, "[3]"}} {
		if list, err := tc.s.List(ctx); err != nil || indexes(list) != tc.want {
			t.Fatalf("%s: List %v (%v), want %s", tc.s.opts.Prefix, indexes(list), err, tc.want)
		}
	}
}

func TestReadOverTheLimit(t *testing.T) {
	ctx := context.Background()
	url := "file://" + t.TempDir()
	upload(t, open(t, url, Options{}), 1)
	small := open(t, url, Options{MaxBackupBytes: 10})
	_, _, err := small.Latest(ctx, "")
	wantErr(t, "a backup over MaxBackupBytes", err, ErrConfig)
}

func TestBadURLs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ url, want string }{
		{"", `"" is not a URL`},
		{"/var/backups", `"/var/backups" is not a URL`},
		{"not a url", `is not a URL`},
		{"::", `is not a URL`},
		{"ftp://host/x", `scheme "ftp" is not supported: want file://, s3://, gs://, azblob:// or mem://`},
		{`C:\backups`, `scheme "c" is not supported`},
	} {
		_, err := Open(ctx, tc.url, Options{})
		wantErr(t, fmt.Sprintf("Open(%q)", tc.url), err, ErrConfig)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q): %q, want it to say %q", tc.url, err, tc.want)
		}
	}
	// A supported scheme, but no such folder: the driver's error, named.
	_, err := Open(ctx, "file://"+t.TempDir()+"/missing", Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "backup: opening file://") {
		t.Errorf("a missing folder: %v", err)
	}
}

func TestSupportedSchemesHaveDrivers(t *testing.T) {
	for _, scheme := range SupportedSchemes {
		if !blob.DefaultURLMux().ValidBucketScheme(scheme) {
			t.Errorf("no blob driver registered for %s://", scheme)
		}
	}
}

func TestRedact(t *testing.T) {
	u, err := url.Parse("azblob://user:secret@container/dir?sas=token&region=x")
	if err != nil {
		t.Fatal(err)
	}
	if got := redact(u); strings.Contains(got, "secret") || strings.Contains(got, "token") {
		t.Fatalf("redact: %s", got)
	}
}

func TestBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, opts := range []Options{{Keep: -1}, {MaxBackupBytes: -1}} {
		_, err := Open(ctx, "mem://", opts)
		wantErr(t, fmt.Sprintf("Open with %+v", opts), err, ErrConfig)
	}
	s := open(t, "mem://", Options{})
	if s.opts.Keep != DefaultKeep || s.opts.Prefix != DefaultPrefix || s.opts.MaxBackupBytes != DefaultMaxBackupBytes {
		t.Fatalf("defaults: %+v", s.opts)
	}
}

func TestBadUploads(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{MaxBackupBytes: 10})
	edit := func(f func(*Meta)) Meta { m := meta(1); f(&m); return m }
	for _, tc := range []struct {
		name string
		meta Meta
		data []byte
	}{
		{"index 0", edit(func(m *Meta) { m.Index = 0 }), []byte("x")},
		{"no membership", edit(func(m *Meta) { m.Membership = nil }), []byte("x")},
		{"replica 0", edit(func(m *Meta) { m.Membership = []uint64{1, 0} }), []byte("x")},
		{"duplicate replica", edit(func(m *Meta) { m.Membership = []uint64{2, 1, 2} }), []byte("x")},
		{"no time", edit(func(m *Meta) { m.TakenAt = time.Time{} }), []byte("x")},
		{"over the limit", meta(1), make([]byte, 11)},
	} {
		_, err := s.Upload(ctx, tc.meta, tc.data)
		wantErr(t, tc.name, err, ErrConfig)
	}
	if got := keys(t, s); len(got) != 0 {
		t.Fatalf("refused uploads wrote %v", got)
	}
	if _, err := s.Upload(ctx, meta(1), make([]byte, 10)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
}

// Upload keeps no alias of the caller's membership.
func TestUploadCopiesMembership(t *testing.T) {
	s := open(t, "mem://", Options{})
	m := meta(1)
	info, err := s.Upload(context.Background(), m, snap(1))
	if err != nil {
		t.Fatal(err)
	}
	m.Membership[0] = 9
	if info.Membership[0] != 1 {
		t.Fatal("Info aliases the caller's membership")
	}
}

// TestRepeatedUploadDoesNotReportABackupItPrunes: clusters A (keep 2)
// and B (keep 10) share a folder; A, idle at index 10, is asked for a
// backup again after B, of a later generation, backed up twice. Found in
// review: Upload answered success with the Info of a backup its own
// pruning had just deleted.
func TestRepeatedUploadDoesNotReportABackupItPrunes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := open(t, "file://"+dir, Options{Keep: 2})
	b := open(t, "file://"+dir, Options{Keep: 10})
	uploadAt(t, a, 3, 10)
	uploadAt(t, b, 5, 1, 2)
	info, err := a.Upload(ctx, metaAt(3, 10), snap(10))
	if err != nil {
		if !errors.Is(err, ErrOutranked) {
			t.Fatalf("repeated upload: %v, want ErrOutranked or a backup that stays", err)
		}
		return
	}
	if _, _, ferr := a.Fetch(ctx, info.Key); ferr != nil {
		t.Fatalf("Upload reported %s as backed up, but it is gone: %v", info.Key, ferr)
	}
}

// TestRepeatedUploadBelowALaterGenerationIsOutranked: an upload at a
// rank that already has a backup is refused below a later generation,
// as a first one is. Found in review: it skipped the check.
func TestRepeatedUploadBelowALaterGenerationIsOutranked(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{Keep: 3})
	uploadAt(t, s, 3, 10) // this cluster's backup
	uploadAt(t, s, 5, 1)  // another history's, of a later generation
	_, err := s.Upload(ctx, metaAt(3, 10), snap(10))
	if !errors.Is(err, ErrOutranked) {
		t.Fatalf("repeated upload at generation 3 below generation 5: %v, want ErrOutranked", err)
	}
}

// TestUploadBelowTheKeptIsSuperseded: with Keep newer backups in the
// store, an older index of the newest generation (a stale leader's late
// upload, or a routine backup that ended after newer ones) is one that
// pruning deletes at once. Found in review: Upload reported it done, with
// the Info of a backup that was already gone. It is refused, before
// anything is written, and the store keeps what it held.
func TestUploadBelowTheKeptIsSuperseded(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			s := be.open(t, Options{Keep: 2})
			uploadAt(t, s, 3, 20, 30)
			before := keys(t, s)
			info, err := s.Upload(ctx, metaAt(3, 10), snap(10))
			if !errors.Is(err, ErrSuperseded) || info.Key != "" {
				t.Fatalf("upload of index 10 below 2 kept newer ones: %+v, %v; want ErrSuperseded and no Info", info, err)
			}
			if !strings.Contains(err.Error(), "newest at generation 3, index 30") || !strings.Contains(err.Error(), "keep 2") {
				t.Errorf("the refusal names neither the newest backup nor Keep: %v", err)
			}
			if got := keys(t, s); !slices.Equal(got, before) {
				t.Fatalf("objects after the refusal:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
			}
			// Below fewer than Keep newer ones, an older index is kept.
			uploadAt(t, s, 3, 25)
			if list, err := s.List(ctx); err != nil || ranks(list) != "3/30 3/25" {
				t.Fatalf("List: %s (%v)", ranks(list), err)
			}
		})
	}
}

// TestBackupPushedOutWhileUploadingIsSuperseded: an upload whose check
// passed, but which Keep newer backups overtook before its pruning (they
// landed between the check and the manifest), is not reported done
// either: its pruning deleted it.
func TestBackupPushedOutWhileUploadingIsSuperseded(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{Keep: 2})
	old, err := s.newInfo(metaAt(3, 10), snap(10))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.writeData(ctx, old, snap(10)); err != nil {
		t.Fatal(err)
	}
	uploadAt(t, s, 3, 20, 30) // the newer ones land meanwhile
	if _, err := s.commit(ctx, old); err != nil {
		t.Fatal(err)
	}
	info, err := s.pruneKeeping(ctx, old, old.ClusterID, "uploaded", true)
	if !errors.Is(err, ErrSuperseded) || info.Key != "" {
		t.Fatalf("pruning after a late manifest: %+v, %v; want ErrSuperseded and no Info", info, err)
	}
	if list, err := s.List(ctx); err != nil || ranks(list) != "3/30 3/20" {
		t.Fatalf("List: %s (%v)", ranks(list), err)
	}
}

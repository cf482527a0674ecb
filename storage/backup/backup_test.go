package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// backends opens an empty store of each kind the tests run on.
var backends = []struct {
	name string
	open func(t *testing.T, opts Options) *Store
}{
	{"mem", func(t *testing.T, opts Options) *Store { return open(t, "mem://", opts) }},
	{"file", func(t *testing.T, opts Options) *Store { return open(t, "file://"+t.TempDir(), opts) }},
}

func open(t *testing.T, url string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// snap is the snapshot at index i: its length differs by index.
func snap(i uint64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("state at %d;", i)), 100+int(i))
}

// at is the rank of index i in generation 0.
func at(i uint64) rank { return rank{index: i} }

func meta(i uint64) Meta {
	return Meta{Index: i, Membership: []uint64{1, 2, 3}, Cluster: "test", TakenAt: time.Date(2026, 3, 1, 0, 0, int(i), 0, time.UTC)}
}

func upload(t *testing.T, s *Store, indexes ...uint64) []Info {
	t.Helper()
	var infos []Info
	for _, i := range indexes {
		info, err := s.Upload(context.Background(), meta(i), snap(i))
		if err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
		infos = append(infos, info)
	}
	return infos
}

// wantErr fails unless err wraps target and reads "backup: ...".
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: %v, want %v", what, err, target)
	}
	if !strings.HasPrefix(err.Error(), "backup: ") {
		t.Fatalf("%s: %q does not begin with \"backup: \"", what, err)
	}
}

func indexes(infos []Info) string {
	var out []uint64
	for _, info := range infos {
		out = append(out, info.Index)
	}
	return fmt.Sprint(out)
}

func sameInfo(a, b Info) bool {
	return a.rank() == b.rank() && slices.Equal(a.Membership, b.Membership) && a.Cluster == b.Cluster && a.ClusterID == b.ClusterID &&
		a.TakenAt.Equal(b.TakenAt) && a.Key == b.Key && a.Size == b.Size && a.SHA256 == b.SHA256
}

// keys lists every object in the bucket, sorted.
func keys(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	it := s.bucket.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, obj.Key)
	}
}

// rewrite replaces the object at key by f of its bytes.
func rewrite(t *testing.T, s *Store, key string, f func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	b, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.bucket.WriteAll(ctx, key, f(b), nil); err != nil {
		t.Fatal(err)
	}
}

func flipByte(b []byte) []byte { b[len(b)/2] ^= 0x01; return b }

func TestRoundTripAndPrune(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			s := be.open(t, Options{Keep: 3})
			if list, err := s.List(ctx); err != nil || len(list) != 0 {
				t.Fatalf("List of an empty store: %v, %v", list, err)
			}
			_, _, err := s.Latest(ctx, "")
			wantErr(t, "Latest of an empty store", err, ErrNotFound)
			_, _, skipped, err := s.LatestValid(ctx, "")
			wantErr(t, "LatestValid of an empty store", err, ErrNotFound)
			if len(skipped) != 0 {
				t.Fatalf("LatestValid of an empty store skipped %v", skipped)
			}

			uploaded := upload(t, s, 10, 20, 30, 40, 50, 60, 70)
			for _, info := range uploaded {
				i := info.Index
				if info.Size != int64(len(snap(i))) || info.SHA256 != sha256Hex(snap(i)) || !sameInfo(info, Info{Meta: meta(i), Key: s.dataKey(at(i), info.SHA256), Size: info.Size, SHA256: info.SHA256}) {
					t.Fatalf("upload %d: %+v", i, info)
				}
			}
			list, err := s.List(ctx)
			if err != nil || indexes(list) != "[70 60 50]" {
				t.Fatalf("List: %v (%v), want the newest 3, newest first", indexes(list), err)
			}
			for j, info := range list {
				if !sameInfo(info, uploaded[6-j]) {
					t.Fatalf("List[%d] = %+v, uploaded %+v", j, info, uploaded[6-j])
				}
			}
			info, data, err := s.Latest(ctx, "")
			if err != nil || !sameInfo(info, uploaded[6]) || !bytes.Equal(data, snap(70)) {
				t.Fatalf("Latest: %+v, %v", info, err)
			}
			if info, data, err := s.Fetch(ctx, list[2].Key); err != nil || info.Index != 50 || !bytes.Equal(data, snap(50)) {
				t.Fatalf("Fetch %s: %+v, %v", list[2].Key, info, err)
			}
			_, _, err = s.Fetch(ctx, uploaded[0].Key)
			wantErr(t, "Fetch of a pruned backup", err, ErrNotFound)

			var want []string
			for _, info := range list {
				want = append(want, info.Key, s.manifestKey(info.rank()))
			}
			slices.Sort(want)
			if got := keys(t, s); !slices.Equal(got, want) {
				t.Fatalf("objects left after pruning:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func TestDefaultKeep(t *testing.T) {
	s := open(t, "mem://", Options{})
	upload(t, s, 1, 2, 3, 4, 5, 6, 7)
	list, err := s.List(context.Background())
	if err != nil || indexes(list) != "[7 6 5 4 3]" {
		t.Fatalf("List: %v (%v), want the newest %d", indexes(list), err, DefaultKeep)
	}
}

func TestCorruptDataIsDetected(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			s := be.open(t, Options{})
			infos := upload(t, s, 1, 2, 3)

			rewrite(t, s, infos[2].Key, flipByte)
			_, _, err := s.Latest(ctx, "")
			wantErr(t, "Latest over a flipped byte", err, ErrCorrupt)
			if !strings.Contains(err.Error(), infos[2].Key) {
				t.Fatalf("the error does not name the object %s: %v", infos[2].Key, err)
			}
			_, _, err = s.Fetch(ctx, infos[2].Key)
			wantErr(t, "Fetch over a flipped byte", err, ErrCorrupt)
			info, data, skipped, err := s.LatestValid(ctx, "")
			if err != nil || info.Index != 2 || !bytes.Equal(data, snap(2)) {
				t.Fatalf("LatestValid: %+v, %v", info, err)
			}
			if len(skipped) != 1 || skipped[0].Index != 3 || skipped[0].Key != infos[2].Key || !errors.Is(skipped[0].Err, ErrCorrupt) {
				t.Fatalf("LatestValid skipped %+v, want backup 3", skipped)
			}

			rewrite(t, s, infos[1].Key, func(b []byte) []byte { return b[:len(b)-1] })
			info, _, skipped, err = s.LatestValid(ctx, "")
			if err != nil || info.Index != 1 || len(skipped) != 2 || skipped[1].Index != 2 {
				t.Fatalf("LatestValid over a truncated backup: %+v, skipped %+v, %v", info, skipped, err)
			}

			if err := s.bucket.Delete(ctx, infos[0].Key); err != nil {
				t.Fatal(err)
			}
			_, _, skipped, err = s.LatestValid(ctx, "")
			wantErr(t, "LatestValid with no backup that verifies", err, ErrNotFound)
			if len(skipped) != 3 || !errors.Is(skipped[2].Err, ErrCorrupt) {
				t.Fatalf("LatestValid skipped %+v, want all 3", skipped)
			}
			if list, err := s.List(ctx); err != nil || len(list) != 3 {
				t.Fatalf("List reads manifests only: %v, %v", indexes(list), err)
			}
		})
	}
}

// A byte flipped on the disk behind fileblob, as bit rot would.
func TestFlippedByteOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, "file://"+dir, Options{})
	infos := upload(t, s, 1, 2)
	path := filepath.Join(dir, filepath.FromSlash(infos[1].Key))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, flipByte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Latest(ctx, "")
	wantErr(t, "Latest over a flipped byte on disk", err, ErrCorrupt)
	if info, _, skipped, err := s.LatestValid(ctx, ""); err != nil || info.Index != 1 || len(skipped) != 1 {
		t.Fatalf("LatestValid: %+v, skipped %+v, %v", info, skipped, err)
	}
}

func TestCorruptManifestIsDetected(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		edit func(string) string
	}{
		{"truncated", func(m string) string { return m[:len(m)/2] }},
		{"empty", func(string) string { return "" }},
		{"version", func(m string) string { return strings.Replace(m, `"version": 1`, `"version": 2`, 1) }},
		{"index", func(m string) string { return strings.Replace(m, `"index": 2`, `"index": 3`, 1) }},
		{"sha256", func(m string) string { return strings.Replace(m, `"sha256": "`, `"sha256": "X`, 1) }},
		{"size", func(m string) string { return strings.Replace(m, `"size": `, `"size": -`, 1) }},
		{"membership", func(m string) string {
			return strings.Replace(m, `"membership": [`, `"membership": [0,`, 1)
		}},
		{"taken_at", func(m string) string {
			return strings.Replace(m, `"taken_at": "2026-03-01T00:00:02Z"`, `"taken_at": "0001-01-01T00:00:00Z"`, 1)
		}},
		{"key", func(m string) string { return strings.Replace(m, `"key": "paxcron/`, `"key": "other/`, 1) }},
		{"too long", func(m string) string { return m + strings.Repeat(" ", maxManifestBytes) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, "mem://", Options{})
			upload(t, s, 1, 2)
			key := s.manifestKey(at(2))
			rewrite(t, s, key, func(b []byte) []byte {
				edited := tc.edit(string(b))
				if edited == string(b) {
					t.Fatalf("the edit changed nothing in %s", b)
				}
				return []byte(edited)
			})
			_, err := s.List(ctx)
			wantErr(t, "List", err, ErrCorrupt)
			_, _, err = s.Latest(ctx, "")
			wantErr(t, "Latest", err, ErrCorrupt)
			if !strings.Contains(err.Error(), key) {
				t.Fatalf("the error does not name the manifest %s: %v", key, err)
			}
			info, _, skipped, err := s.LatestValid(ctx, "")
			if err != nil || info.Index != 1 || len(skipped) != 1 || skipped[0].Key != key {
				t.Fatalf("LatestValid: %+v, skipped %+v, %v", info, skipped, err)
			}
		})
	}
}

func TestHalfWrittenUploadIsInvisibleAndPruned(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, "file://"+dir, Options{Keep: 2})
	// A data object with no manifest: an upload that died half-way, two
	// hours ago.
	dead := s.dataKey(at(5), sha256Hex(snap(5)))
	if err := s.bucket.WriteAll(ctx, dead, snap(5), nil); err != nil {
		t.Fatal(err)
	}
	age(t, dir, dead, 2*time.Hour)
	// One at an older index written just now is an upload under way
	// (the race a concurrent upload's prune would lose): kept.
	young := s.dataKey(at(4), sha256Hex(snap(4)))
	if err := s.bucket.WriteAll(ctx, young, snap(4), nil); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List sees %v (%v): a backup without a manifest is not one", indexes(list), err)
	}
	_, _, err := s.Latest(ctx, "")
	wantErr(t, "Latest", err, ErrNotFound)
	_, _, err = s.Fetch(ctx, dead)
	wantErr(t, "Fetch", err, ErrNotFound)

	upload(t, s, 6)
	if ok, err := s.bucket.Exists(ctx, dead); ok || err != nil {
		t.Fatalf("the leftover %s, older than the newest backup, was not pruned (%v)", dead, err)
	}
	if ok, err := s.bucket.Exists(ctx, young); !ok || err != nil {
		t.Fatalf("a data object written just now (an upload under way) was pruned (%v)", err)
	}
	// One newer than every backup may be an upload under way: kept.
	inFlight := s.dataKey(at(99), sha256Hex(snap(99)))
	if err := s.bucket.WriteAll(ctx, inFlight, snap(99), nil); err != nil {
		t.Fatal(err)
	}
	upload(t, s, 7)
	if ok, err := s.bucket.Exists(ctx, inFlight); !ok || err != nil {
		t.Fatalf("a newer data object without a manifest (an upload under way) was deleted (%v)", err)
	}
	// Objects outside the layout are not the store's: never deleted.
	foreign := []string{s.opts.Prefix + "snapshots/notes.txt", s.opts.Prefix + "manifests/1.json", "elsewhere/x"}
	for _, key := range foreign {
		if err := s.bucket.WriteAll(ctx, key, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	upload(t, s, 8, 9, 10)
	for _, key := range foreign {
		if ok, err := s.bucket.Exists(ctx, key); !ok || err != nil {
			t.Fatalf("pruning deleted %s, which is not a backup's (%v)", key, err)
		}
	}
	if list, err := s.List(ctx); err != nil || indexes(list) != "[10 9]" {
		t.Fatalf("List: %v (%v)", indexes(list), err)
	}
}

// age sets the modification time of key's file in a fileblob store at
// dir to d ago.
func age(t *testing.T, dir, key string, d time.Duration) {
	t.Helper()
	then := time.Now().Add(-d)
	if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(key)), then, then); err != nil {
		t.Fatal(err)
	}
}

// TestURLPathIsThePrefix: the bucket openers drop a URL's path, so two
// clusters at s3://bucket/prod and s3://bucket/staging once shared one
// prefix and pruned each other's backups. The path is now the prefix
// (s3://bucket/paxcron keeps the default's), except for file://, whose
// path is the folder.
func TestURLPathIsThePrefix(t *testing.T) {
	dir := t.TempDir()
	for url, want := range map[string]string{
		"mem://bucket/prod":       "prod/",
		"mem://bucket/team/cron/": "team/cron/",
		"mem://bucket/paxcron":    DefaultPrefix,
		"mem://bucket":            DefaultPrefix,
		"file://" + dir:           DefaultPrefix,
	} {
		s, err := Open(context.Background(), url, Options{})
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if s.opts.Prefix != want {
			t.Errorf("%s: prefix %q, want %q", url, s.opts.Prefix, want)
		}
		s.Close()
	}
	if s, err := Open(context.Background(), "mem://bucket/prod", Options{Prefix: "set/"}); err != nil || s.opts.Prefix != "set/" {
		t.Fatalf("an explicit prefix: %v", err)
	}
}

// TestOversizedManifestIsSkippedAsCorrupt: a manifest whose size is over
// MaxBackupBytes is corrupt (no upload wrote it). Found in review:
// LatestValid stopped at it with ErrConfig instead of skipping it.
func TestOversizedManifestIsSkippedAsCorrupt(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{})
	upload(t, s, 1, 2)
	rewrite(t, s, s.manifestKey(at(2)), func(b []byte) []byte {
		var m manifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		m.Size = DefaultMaxBackupBytes + 1
		out, _ := json.Marshal(m)
		return out
	})
	info, _, skipped, err := s.LatestValid(ctx, "")
	if err != nil || info.Index != 1 || len(skipped) != 1 {
		t.Fatalf("LatestValid: index %d, skipped %d, %v; want index 1, one skipped", info.Index, len(skipped), err)
	}
}

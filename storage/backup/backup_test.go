package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func openMem(t *testing.T, keep int) *Store {
	t.Helper()
	s, err := Open(context.Background(), "mem://", Options{Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func snap(i uint64) []byte { return bytes.Repeat([]byte(fmt.Sprintf("state at %d;", i)), 100) }

func meta(i uint64) Meta {
	return Meta{Index: i, Membership: []uint64{1, 2, 3}, Cluster: "test", TakenAt: time.Date(2026, 3, 1, 0, 0, int(i), 0, time.UTC)}
}

func TestUploadListFetchPrune(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{"mem://", "file://" + t.TempDir()} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			s, err := Open(ctx, url, Options{Keep: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, _, err := s.Latest(ctx); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Latest of an empty store: %v, want ErrNotFound", err)
			}
			for _, i := range []uint64{10, 20, 30, 40, 50} {
				info, err := s.Upload(ctx, meta(i), snap(i))
				if err != nil {
					t.Fatal(err)
				}
				if info.Index != i || info.Size != int64(len(snap(i))) || len(info.SHA256) != 64 {
					t.Fatalf("upload %d: %+v", i, info)
				}
			}
			list, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, b := range list {
				got = append(got, b.Index)
			}
			if fmt.Sprint(got) != "[50 40 30]" {
				t.Fatalf("kept %v, want the newest 3, newest first", got)
			}
			info, data, err := s.Latest(ctx)
			if err != nil || info.Index != 50 || !bytes.Equal(data, snap(50)) || info.Cluster != "test" || len(info.Membership) != 3 {
				t.Fatalf("Latest: %+v, %v", info, err)
			}
			if _, _, err := s.Fetch(ctx, 20); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a pruned backup: %v, want ErrNotFound", err)
			}
			if _, data, err := s.Fetch(ctx, 30); err != nil || !bytes.Equal(data, snap(30)) {
				t.Fatalf("Fetch 30: %v", err)
			}
		})
	}
}

func TestCorruptionIsDetected(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, "file://"+dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, i := range []uint64{1, 2} {
		if _, err := s.Upload(ctx, meta(i), snap(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Flip one byte of the newest data object, on disk.
	path := filepath.Join(dir, "paxcron", "snapshots", fmt.Sprintf("%020d.snap", 2))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Latest(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Latest over a flipped byte: %v, want ErrCorrupt", err)
	}
	info, data, skipped, err := s.LatestValid(ctx)
	if err != nil || info.Index != 1 || !bytes.Equal(data, snap(1)) || len(skipped) != 1 || !errors.Is(skipped[0], ErrCorrupt) {
		t.Fatalf("LatestValid: %+v, skipped %v, %v", info, skipped, err)
	}
	// A truncated manifest is corrupt too.
	mpath := filepath.Join(dir, "paxcron", "manifests", fmt.Sprintf("%020d.json", 1))
	os.WriteFile(mpath, []byte(`{"version":1`), 0o644)
	if _, _, err := s.Fetch(ctx, 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a broken manifest: %v, want ErrCorrupt", err)
	}
}

func TestHalfWrittenUploadIsInvisibleAndPruned(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, 2)
	// A data object with no manifest: an upload that died half-way.
	if err := s.bucket.WriteAll(ctx, s.dataKey(5), snap(5), nil); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List sees %v (%v): a backup without a manifest is not one", list, err)
	}
	for _, i := range []uint64{6, 7} {
		if _, err := s.Upload(ctx, meta(i), snap(i)); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := s.bucket.Exists(ctx, s.dataKey(5)); ok {
		t.Fatal("the leftover data object of a failed upload was not pruned")
	}
	// One newer than every kept backup may be an upload under way: kept.
	if err := s.bucket.WriteAll(ctx, s.dataKey(99), snap(99), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Upload(ctx, meta(8), snap(8)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.bucket.Exists(ctx, s.dataKey(99)); !ok {
		t.Fatal("a newer data object without a manifest (an upload under way) was deleted")
	}
}

func TestSameIndexTwice(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, 0)
	first, err := s.Upload(ctx, meta(3), snap(3))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Upload(ctx, meta(3), snap(3))
	if err != nil || again.SHA256 != first.SHA256 {
		t.Fatalf("the same bytes again: %+v, %v", again, err)
	}
	if _, err := s.Upload(ctx, meta(3), []byte("other")); !errors.Is(err, ErrConflict) {
		t.Fatalf("other bytes at the same index: %v, want ErrConflict", err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{"", "not a url", "ftp://x", "/plain/path"} {
		if _, err := Open(ctx, url, Options{}); !errors.Is(err, ErrConfig) {
			t.Errorf("Open(%q): %v, want ErrConfig", url, err)
		}
	}
	if _, err := Open(ctx, "mem://", Options{Keep: -1}); !errors.Is(err, ErrConfig) {
		t.Errorf("negative Keep: %v", err)
	}
	s, err := Open(ctx, "mem://", Options{MaxBackupBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Upload(ctx, meta(0), []byte("x")); !errors.Is(err, ErrConfig) {
		t.Errorf("index 0: %v", err)
	}
	if _, err := s.Upload(ctx, meta(1), make([]byte, 11)); !errors.Is(err, ErrConfig) {
		t.Errorf("over the size limit: %v", err)
	}
}

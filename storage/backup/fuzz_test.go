package backup

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzReadManifest puts any bytes in a bucket as the manifest of the
// backup at index 7 (generation 0: the first layout, whose manifests the
// corpus holds), beside that backup's data, and reads it as a restore
// would. No input may panic; a refusal wraps ErrCorrupt (List,
// Latest) or ErrNotFound (LatestValid, which skips it); what is accepted
// describes the data at index 7 with a valid Meta, and written again as a
// manifest reads back the same.
func FuzzReadManifest(f *testing.F) {
	ctx := context.Background()
	s, err := Open(ctx, "mem://", Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	const index = 7
	r := at(index)
	info, err := s.Upload(ctx, meta(index), snap(index))
	if err != nil {
		f.Fatal(err)
	}
	good, err := s.bucket.ReadAll(ctx, s.manifestKey(r))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	compact, _ := json.Marshal(manifest{Version: schemaVersion, Info: info})
	f.Add(compact)
	named := info
	named.ClusterID = "0123456789abcdef0123456789abcdef"
	withID, _ := json.Marshal(manifest{Version: schemaVersion, Info: named})
	f.Add(withID)
	for _, bad := range []func(m *manifest){
		func(m *manifest) { m.Version = 2 },
		func(m *manifest) { m.Index = 8 },
		func(m *manifest) { m.Generation = 3 },
		func(m *manifest) { m.Membership = nil },
		func(m *manifest) { m.Membership = []uint64{1, 1} },
		func(m *manifest) { m.Membership = []uint64{0} },
		func(m *manifest) { m.Key = "../../etc/passwd" },
		func(m *manifest) { m.Size = -1 },
		func(m *manifest) { m.Size = 1 << 62 },
		func(m *manifest) { m.SHA256 = "ABC" },
		func(m *manifest) { m.TakenAt = m.TakenAt.AddDate(-3000, 0, 0) },
		func(m *manifest) { m.ClusterID = "0123456789abcdef" },
		func(m *manifest) { m.ClusterID = "0123456789ABCDEF0123456789ABCDEF" },
		func(m *manifest) { m.ClusterID = "00000000000000000000000000000000" },
	} {
		m := manifest{Version: schemaVersion, Info: info}
		m.Membership = append([]uint64(nil), m.Membership...)
		bad(&m)
		b, _ := json.Marshal(m)
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"index":7,"membership":[1],"taken_at":"2026-03-01T00:00:00Z","key":"x","size":0,"sha256":"","index":7}`))
	f.Add([]byte("null"))
	f.Add([]byte("[]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		key := s.manifestKey(r)
		if err := s.bucket.WriteAll(ctx, key, b, nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.readManifest(ctx, r)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("refused with %v, want ErrCorrupt", err)
			}
			if _, err := s.List(ctx); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("List over a corrupt manifest: %v", err)
			}
			if _, _, skipped, err := s.LatestValid(ctx, ""); !errors.Is(err, ErrNotFound) || len(skipped) != 1 {
				t.Fatalf("LatestValid over a corrupt manifest: %v, skipped %v", err, skipped)
			}
			return
		}
		checkManifestRead(t, s, got, r)
	})
}

func checkManifestRead(t *testing.T, s *Store, got Info, r rank) {
	t.Helper()
	ctx := context.Background()
	if err := got.Meta.validate(); err != nil || got.rank() != r || got.Key != s.dataKey(r, got.SHA256) {
		t.Fatalf("accepted %+v: %v", got, err)
	}
	b, err := json.Marshal(manifest{Version: schemaVersion, Info: got})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.bucket.WriteAll(ctx, s.manifestKey(r), b, nil); err != nil {
		t.Fatal(err)
	}
	again, err := s.readManifest(ctx, r)
	if err != nil || !sameInfo(again, got) {
		t.Fatalf("rewritten, %+v read back as %+v, %v", got, again, err)
	}
	// The data is checked against what the manifest says, whatever it says.
	if _, data, err := s.fetchRank(ctx, r); err == nil {
		if int64(len(data)) != got.Size || sha256Hex(data) != got.SHA256 {
			t.Fatalf("fetched %d bytes that do not match %+v", len(data), got)
		}
	} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrConfig) {
		t.Fatalf("fetching: %v", err)
	}
}

// FuzzObjectKeys: an object key is taken for a backup's data or manifest
// only if it is exactly the key the layout builds for what it parses to
// (so a rank has one key, in one of the two layouts); keys outside the
// prefix never are.
func FuzzObjectKeys(f *testing.F) {
	s := &Store{opts: Options{Prefix: DefaultPrefix}}
	sum := sha256Hex([]byte("x"))
	f.Add(s.dataKey(at(7), sum))
	f.Add(s.manifestKey(at(7)))
	f.Add(s.manifestKey(at(0)))
	f.Add(s.dataKey(at(1<<64-1), sum))
	f.Add(s.dataKey(rank{gen: 3, index: 7}, sum))
	f.Add(s.manifestKey(rank{gen: 3, index: 7}))
	f.Add(s.manifestKey(rank{gen: 1<<64 - 1, index: 1<<64 - 1}))
	f.Add("paxcron/manifests/00000000000000000000-00000000000000000007.json")
	f.Add("paxcron/manifests/00000000000000000003-00000000000000000007-00000000000000000001.json")
	f.Add("paxcron/snapshots/00000000000000000000-00000000000000000007-" + sum + ".snap")
	f.Add("paxcron/manifests/+0000000000000000007.json")
	f.Add("paxcron/manifests/../manifests/00000000000000000007.json")
	f.Add("paxcron/snapshots/00000000000000000007-" + sum + "-" + sum + ".snap")
	f.Add("other/manifests/00000000000000000007.json")
	f.Fuzz(func(t *testing.T, key string) {
		if r, ok := s.parseManifestKey(key); ok {
			if r.index == 0 || s.manifestKey(r) != key {
				t.Fatalf("%q parsed as the manifest at %v, whose key is %q", key, r, s.manifestKey(r))
			}
		}
		if r, sum, ok := s.parseDataKey(key); ok {
			if r.index == 0 || !isSHA256Hex(sum) || s.dataKey(r, sum) != key {
				t.Fatalf("%q parsed as the data at %v, %s", key, r, sum)
			}
		}
	})
}

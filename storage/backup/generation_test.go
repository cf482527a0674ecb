package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func metaAt(gen, i uint64) Meta {
	m := meta(i)
	m.Generation = gen
	return m
}

func uploadAt(t *testing.T, s *Store, gen uint64, indexes ...uint64) []Info {
	t.Helper()
	var infos []Info
	for _, i := range indexes {
		info, err := s.Upload(context.Background(), metaAt(gen, i), snap(i))
		if err != nil {
			t.Fatalf("upload %d at generation %d: %v", i, gen, err)
		}
		infos = append(infos, info)
	}
	return infos
}

// ranks renders infos as "gen/index ...".
func ranks(infos []Info) string {
	var out []string
	for _, info := range infos {
		out = append(out, fmt.Sprintf("%d/%d", info.Generation, info.Index))
	}
	return strings.Join(out, " ")
}

// A history restored from an older snapshot backs up at indexes below
// the lost history's newest backups, in a later generation: its backups
// are the newest, pruning keeps them and deletes the lost history's, and
// Latest is its newest (found in review: ranked by index alone, each of
// its uploads was pruned at once, and Latest was the lost history's).
func TestGenerationsOutrankIndexes(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			s := be.open(t, Options{Keep: 3})
			uploadAt(t, s, 1, 100, 101, 102, 103, 104)
			restored := uploadAt(t, s, 2, 10)
			if list, err := s.List(ctx); err != nil || ranks(list) != "2/10 1/104 1/103" {
				t.Fatalf("List after the first upload of generation 2: %s (%v)", ranks(list), err)
			}
			restored = append(restored, uploadAt(t, s, 2, 11, 12)...)
			list, err := s.List(ctx)
			if err != nil || ranks(list) != "2/12 2/11 2/10" {
				t.Fatalf("List: %s (%v), want generation 2's three", ranks(list), err)
			}
			info, data, err := s.Latest(ctx, "")
			if err != nil || !sameInfo(info, restored[2]) || !bytes.Equal(data, snap(12)) {
				t.Fatalf("Latest: %+v, %v; want %+v", info, err, restored[2])
			}
			// The lost history's data went with its manifests.
			var want []string
			for _, info := range restored {
				want = append(want, info.Key, s.manifestKey(info.rank()))
			}
			slices.Sort(want)
			if got := keys(t, s); !slices.Equal(got, want) {
				t.Fatalf("objects left after pruning:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if gen, err := s.HighestGeneration(ctx); err != nil || gen != 2 {
				t.Fatalf("HighestGeneration: %d, %v", gen, err)
			}
		})
	}
}

// One index in two generations is two backups, not a conflict: two
// histories reached it with different states.
func TestOneIndexInTwoGenerations(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{})
	first := uploadAt(t, s, 1, 7)[0]
	other, err := s.Upload(ctx, metaAt(2, 7), []byte("another history's state at 7"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Key == other.Key {
		t.Fatalf("two generations share the key %s", first.Key)
	}
	for _, info := range []Info{first, other} {
		got, _, err := s.Fetch(ctx, info.Key)
		if err != nil || !sameInfo(got, info) {
			t.Fatalf("Fetch %s: %+v, %v", info.Key, got, err)
		}
	}
	_, err = s.Upload(ctx, metaAt(2, 7), snap(7))
	wantErr(t, "other bytes at a rank that has a backup", err, ErrConflict)
	if !strings.Contains(err.Error(), "generation 2, index 7") {
		t.Fatalf("the conflict does not name the rank: %v", err)
	}
}

// An upload below a later generation in the store is refused, and
// nothing is written or pruned: it belongs to another history, and
// stored it would rank below that history's backups, so that pruning
// deleted it at once (an upload reported done, gone) and Latest restored
// the other history. Found in review: a cluster restored from a file
// without -backup lost every backup it made this way.
func TestUploadBelowALaterGenerationIsRefused(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			s := be.open(t, Options{Keep: 3})
			uploadAt(t, s, 2, 10, 11, 12)
			before := keys(t, s)
			for _, gen := range []uint64{0, 1} {
				_, err := s.Upload(ctx, metaAt(gen, 50), snap(50))
				wantErr(t, fmt.Sprintf("an upload of generation %d", gen), err, ErrOutranked)
				if !strings.Contains(err.Error(), "generation 2, index 12") || !strings.Contains(err.Error(), "own prefix") {
					t.Fatalf("the refusal names neither the backup above nor the way out: %v", err)
				}
			}
			if got := keys(t, s); !slices.Equal(got, before) {
				t.Fatalf("objects after the refused uploads:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
			}
			// Within a generation an older index is a late upload of the
			// same history (a stale leader's): below Keep newer ones,
			// superseded (TestUploadBelowTheKeptIsSuperseded), not outranked.
			_, err := s.Upload(ctx, metaAt(2, 9), snap(9))
			wantErr(t, "an older index of the same generation", err, ErrSuperseded)
			uploadAt(t, s, 3, 13)
			if list, err := s.List(ctx); err != nil || ranks(list) != "3/13 2/12 2/11" {
				t.Fatalf("List: %s (%v)", ranks(list), err)
			}
		})
	}
}

// openFixture copies a testdata folder of objects written by an older
// binary, so that the test may change it.
func openFixture(t *testing.T, name string, opts Options) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name))); err != nil {
		t.Fatal(err)
	}
	return open(t, "file://"+dir, opts), dir
}

// testdata/layout1 holds three backups (indexes 2, 3 and 4) as the binary
// before generations wrote them, fileblob's attribute files included
// (see its README). They are generation 0: listed, fetched and restored
// as before, and below every backup of a later generation.
func TestFirstLayoutIsGenerationZero(t *testing.T) {
	ctx := context.Background()
	s, _ := openFixture(t, "layout1", Options{Keep: 2})
	list, err := s.List(ctx)
	if err != nil || ranks(list) != "0/4 0/3 0/2" {
		t.Fatalf("List of the first layout: %s (%v)", ranks(list), err)
	}
	want := "paxcron/snapshots/00000000000000000004-6934086b9e4a7713f9530afa4a72641b8317becd60a2e796d804549f4706a574.snap"
	info, data, err := s.Latest(ctx, "")
	if err != nil || info.Key != want || info.Size != int64(len(data)) || info.Cluster != "paxcron" {
		t.Fatalf("Latest: %+v, %v", info, err)
	}
	for _, l := range list {
		if _, _, err := s.Fetch(ctx, l.Key); err != nil {
			t.Fatalf("Fetch %s: %v", l.Key, err)
		}
	}
	if valid, _, skipped, err := s.LatestValid(ctx, ""); err != nil || valid.Key != want || len(skipped) != 0 {
		t.Fatalf("LatestValid: %+v, %v, %v", valid, skipped, err)
	}
	if gen, err := s.HighestGeneration(ctx); err != nil || gen != 0 {
		t.Fatalf("HighestGeneration: %d, %v", gen, err)
	}

	// A generation 0 manifest is written as the first layout wrote it.
	fresh := open(t, "mem://", Options{})
	again, err := fresh.Upload(ctx, info.Meta, data)
	if err != nil || again.Key != want {
		t.Fatalf("uploaded again: %+v, %v", again, err)
	}
	old, err := s.bucket.ReadAll(ctx, s.manifestKey(at(4)))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := fresh.bucket.ReadAll(ctx, fresh.manifestKey(at(4))); err != nil || !bytes.Equal(b, old) {
		t.Fatalf("a generation 0 manifest:\n%s\nthe first layout's:\n%s", b, old)
	}

	// A backup of generation 1, at an index below theirs, outranks them;
	// pruning (Keep 2) deletes the oldest, manifest and data.
	upgraded := uploadAt(t, s, 1, 1)[0]
	if list, err := s.List(ctx); err != nil || ranks(list) != "1/1 0/4" {
		t.Fatalf("List after a generation 1 upload: %s (%v)", ranks(list), err)
	}
	if got, _, err := s.Latest(ctx, ""); err != nil || got.Key != upgraded.Key {
		t.Fatalf("Latest: %+v, %v; want %s", got, err, upgraded.Key)
	}
	for _, key := range keys(t, s) {
		if strings.Contains(key, "00000000000000000002") || strings.Contains(key, "00000000000000000003") {
			t.Errorf("%s was pruned, but is still there", key)
		}
	}
}

// The snapshot file of testdata/layout1.snap was saved before
// generations: it reads as generation 0.
func TestFirstLayoutFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "layout1.snap"))
	if err != nil {
		t.Fatal(err)
	}
	info, data, err := DecodeFile(b)
	if err != nil || info.Generation != 0 || info.Index != 4 || int64(len(data)) != info.Size {
		t.Fatalf("DecodeFile: %+v, %v", info, err)
	}
	info.Generation = 5
	again, err := EncodeFile(info, data)
	if err != nil {
		t.Fatal(err)
	}
	if back, _, err := DecodeFile(again); err != nil || back.Generation != 5 {
		t.Fatalf("a file of generation 5 reads back as %+v, %v", back, err)
	}
}

// HighestGeneration reads keys: a data object without a manifest (an
// upload under way) counts, and a damaged manifest hides nothing.
func TestHighestGeneration(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{})
	if gen, err := s.HighestGeneration(ctx); err != nil || gen != 0 {
		t.Fatalf("HighestGeneration of an empty store: %d, %v", gen, err)
	}
	upload(t, s, 9)
	infos := uploadAt(t, s, 3, 5)
	if err := s.bucket.WriteAll(ctx, s.dataKey(rank{gen: 8, index: 2}, sha256Hex(nil)), nil, nil); err != nil {
		t.Fatal(err)
	}
	if gen, err := s.HighestGeneration(ctx); err != nil || gen != 8 {
		t.Fatalf("HighestGeneration with an upload under way: %d, %v; want 8", gen, err)
	}
	if err := s.bucket.Delete(ctx, s.dataKey(rank{gen: 8, index: 2}, sha256Hex(nil))); err != nil {
		t.Fatal(err)
	}
	rewrite(t, s, s.manifestKey(infos[0].rank()), func([]byte) []byte { return []byte("{") })
	if gen, err := s.HighestGeneration(ctx); err != nil || gen != 3 {
		t.Fatalf("HighestGeneration over a damaged manifest: %d, %v; want 3", gen, err)
	}
}

// Scan reports a damaged manifest in its place and goes on; List stops
// at it.
func TestScanReportsDamageInPlace(t *testing.T) {
	ctx := context.Background()
	s := open(t, "mem://", Options{})
	infos := append(upload(t, s, 4), uploadAt(t, s, 2, 1, 3)...)
	bad := s.manifestKey(infos[1].rank())
	rewrite(t, s, bad, func(b []byte) []byte { return b[:len(b)/2] })
	listed, err := s.Scan(ctx)
	if err != nil || len(listed) != 3 {
		t.Fatalf("Scan: %+v, %v", listed, err)
	}
	for i, want := range []struct {
		gen, index uint64
		bad        bool
	}{{2, 3, false}, {2, 1, true}, {0, 4, false}} {
		l := listed[i]
		if l.Generation != want.gen || l.Index != want.index || (l.Err != nil) != want.bad {
			t.Fatalf("Scan[%d] = %+v, want generation %d, index %d, damaged %v", i, l, want.gen, want.index, want.bad)
		}
		if want.bad && (!errors.Is(l.Err, ErrCorrupt) || l.Manifest != bad || l.Info.Key != "") {
			t.Fatalf("Scan[%d] = %+v, want ErrCorrupt naming %s", i, l, bad)
		}
		if !want.bad && l.Info.Key == "" {
			t.Fatalf("Scan[%d] = %+v, without its Info", i, l)
		}
	}
	_, err = s.List(ctx)
	wantErr(t, "List over a damaged manifest", err, ErrCorrupt)
}

// The fixture is the first layout exactly: no stray file, nothing of a
// later one.
func TestFixtureIsTheFirstLayout(t *testing.T) {
	err := fs.WalkDir(os.DirFS("testdata/layout1"), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		key := strings.TrimSuffix(path, ".attrs")
		s := &Store{opts: Options{Prefix: DefaultPrefix}}
		r, ok := s.parseManifestKey(key)
		if !ok {
			r, _, ok = s.parseDataKey(key)
		}
		if !ok || r.gen != 0 {
			return fmt.Errorf("%s is not an object of the first layout", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package backup

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// The object layout (doc.go tells why). Every key is under the store's
// prefix:
//
//	snapshots/<rank>-<sha256>.snap   the snapshot's bytes
//	manifests/<rank>.json            its Info, written last
//
// <rank> is <generation>-<index>, each 20 decimal digits, zero-padded, so
// that keys of one layout sort as backups rank; in generation 0 it is
// <index> alone, the first layout's, which had no generation: backups
// older binaries wrote are generation 0 and read as they always were.
// <sha256> is the data's SHA-256 in lowercase hex, so that a data object
// is never overwritten by other bytes.
const (
	dataDir      = "snapshots/"
	dataExt      = ".snap"
	manifestDir  = "manifests/"
	manifestExt  = ".json"
	rankDigits   = 20 // math.MaxUint64 has 20 digits
	sha256HexLen = 2 * sha256.Size
	// clusterIDHexLen is a cluster ID's length in hex: 128 bits.
	clusterIDHexLen = 32
	schemaVersion   = 1

	// maxManifestBytes bounds a manifest read back: a real one is well
	// under a kilobyte, a membership of thousands of replicas included.
	maxManifestBytes = 1 << 20
)

// manifest is the JSON of a manifest object. The generation was added
// without a new version: it is omitted in generation 0, so a manifest of
// the first layout is one of generation 0, and the version it had.
type manifest struct {
	Version int `json:"version"`
	Info
}

// rank orders backups: by generation, then by log index (doc.go,
// "Generations"). Every backup has a rank of its own: its manifest's key.
type rank struct {
	gen, index uint64
}

func (r rank) compare(o rank) int {
	if c := cmp.Compare(r.gen, o.gen); c != 0 {
		return c
	}
	return cmp.Compare(r.index, o.index)
}

func (r rank) String() string {
	return fmt.Sprintf("generation %d, index %d", r.gen, r.index)
}

// name is the rank as keys write it.
func (r rank) name() string {
	if r.gen == 0 {
		return fmt.Sprintf("%0*d", rankDigits, r.index)
	}
	return fmt.Sprintf("%0*d-%0*d", rankDigits, r.gen, rankDigits, r.index)
}

// parseRank is the inverse of rank.name: the index is > 0, and so is a
// generation that is written.
func parseRank(name string) (rank, bool) {
	gen, index, two := strings.Cut(name, "-")
	if !two {
		n, ok := parseDigits(name)
		return rank{index: n}, ok && n > 0
	}
	g, ok := parseDigits(gen)
	n, ok2 := parseDigits(index)
	return rank{gen: g, index: n}, ok && ok2 && g > 0 && n > 0
}

func parseDigits(digits string) (uint64, bool) {
	if len(digits) != rankDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

func (s *Store) dataKey(r rank, sum string) string {
	return s.opts.Prefix + dataDir + r.name() + "-" + sum + dataExt
}

func (s *Store) manifestKey(r rank) string {
	return s.opts.Prefix + manifestDir + r.name() + manifestExt
}

// parseDataKey is the inverse of dataKey.
func (s *Store) parseDataKey(key string) (r rank, sum string, ok bool) {
	name, ok := s.cutName(key, dataDir, dataExt)
	if !ok {
		return rank{}, "", false
	}
	i := strings.LastIndexByte(name, '-')
	if i < 0 || !isSHA256Hex(name[i+1:]) {
		return rank{}, "", false
	}
	r, ok = parseRank(name[:i])
	return r, name[i+1:], ok
}

// parseManifestKey is the inverse of manifestKey.
func (s *Store) parseManifestKey(key string) (rank, bool) {
	name, ok := s.cutName(key, manifestDir, manifestExt)
	if !ok {
		return rank{}, false
	}
	return parseRank(name)
}

// cutName returns key without the prefix, dir and ext it must have.
func (s *Store) cutName(key, dir, ext string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.opts.Prefix+dir)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, ext)
}

func isSHA256Hex(s string) bool {
	if len(s) != sha256HexLen {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return (r < '0' || r > '9') && (r < 'a' || r > 'f')
	})
}

// isClusterIDHex reports whether s is a cluster ID as Meta carries it:
// 32 lowercase hex digits, not all zero (the zero ID is written as none).
func isClusterIDHex(s string) bool {
	if len(s) != clusterIDHexLen || strings.Trim(s, "0") == "" {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return (r < '0' || r > '9') && (r < 'a' || r > 'f')
	})
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// object is one object of the layout, by its rank.
type object struct {
	rank rank
	key  string
	mod  time.Time // the blob store's modification time
}

// list returns dir's objects (manifestDir or dataDir), newest rank first
// (the two layouts' keys do not sort together: ranks do). Keys outside
// the layout are not ours, and left out.
func (s *Store) list(ctx context.Context, dir string) ([]object, error) {
	var out []object
	it := s.bucket.List(&blob.ListOptions{Prefix: s.opts.Prefix + dir})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("backup: listing %s%s in %s: %w", s.opts.Prefix, dir, s.url, err)
		}
		if o, ok := s.parseObject(dir, obj.Key); ok {
			o.mod = obj.ModTime
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b object) int {
		if c := b.rank.compare(a.rank); c != 0 {
			return c
		}
		return strings.Compare(b.key, a.key) // data objects of one rank
	})
	return out, nil
}

func (s *Store) parseObject(dir, key string) (object, bool) {
	var r rank
	var ok bool
	switch dir {
	case manifestDir:
		r, ok = s.parseManifestKey(key)
	case dataDir:
		r, _, ok = s.parseDataKey(key)
	default:
		panic(fmt.Sprintf("backup: listing unknown folder %q", dir))
	}
	return object{rank: r, key: key}, ok
}

// readManifest reads and checks the manifest at r: ErrNotFound if there
// is none, ErrCorrupt if it does not describe a backup at r.
func (s *Store) readManifest(ctx context.Context, r rank) (Info, error) {
	key := s.manifestKey(r)
	b, err := s.readObject(ctx, key, maxManifestBytes)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return Info{}, fmt.Errorf("%w: no backup at %v (no manifest %s)", ErrNotFound, r, key)
	}
	if err != nil {
		return Info{}, fmt.Errorf("backup: reading manifest %s: %w", key, err)
	}
	if len(b) > maxManifestBytes {
		return Info{}, fmt.Errorf("%w: manifest %s is over %d bytes", ErrCorrupt, key, maxManifestBytes)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Info{}, fmt.Errorf("%w: manifest %s does not decode: %v", ErrCorrupt, key, err)
	}
	if err := s.checkManifest(m, r); err != nil {
		return Info{}, fmt.Errorf("%w: manifest %s: %v", ErrCorrupt, key, err)
	}
	return m.Info, nil
}

func (s *Store) checkManifest(m manifest, r rank) error {
	switch {
	case m.Version != schemaVersion:
		return fmt.Errorf("version %d, want %d", m.Version, schemaVersion)
	case m.rank() != r:
		return fmt.Errorf("describes %v", m.rank())
	case !isSHA256Hex(m.SHA256):
		return fmt.Errorf("SHA-256 %q is not 64 lowercase hex digits", m.SHA256)
	case m.Key != s.dataKey(r, m.SHA256):
		return fmt.Errorf("data key %q, want %q", m.Key, s.dataKey(r, m.SHA256))
	case m.Size < 0:
		return fmt.Errorf("size %d", m.Size)
	}
	return m.Meta.validate()
}

// readData reads info's data object and verifies its size and SHA-256.
func (s *Store) readData(ctx context.Context, info Info) ([]byte, error) {
	if info.Size > s.opts.MaxBackupBytes {
		// Corrupt as well, so that a fallback skips it: no upload with
		// this store's limit wrote it (found in review: one damaged size
		// stopped restore -skip-corrupt and snapshot list).
		return nil, fmt.Errorf("%w: %w: backup %s is %d bytes by its manifest, over MaxBackupBytes (%d): damaged, or written with a larger limit",
			ErrCorrupt, ErrConfig, info.Key, info.Size, s.opts.MaxBackupBytes)
	}
	data, err := s.readObject(ctx, info.Key, info.Size)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%w: the data object %s of the backup at %v is missing", ErrCorrupt, info.Key, info.rank())
	}
	if err != nil {
		return nil, fmt.Errorf("backup: reading %s: %w", info.Key, err)
	}
	if int64(len(data)) != info.Size {
		return nil, fmt.Errorf("%w: data object %s has %s bytes, its manifest says %d", ErrCorrupt, info.Key, sizeOver(len(data), info.Size), info.Size)
	}
	if sum := sha256Hex(data); sum != info.SHA256 {
		return nil, fmt.Errorf("%w: data object %s has SHA-256 %s, its manifest says %s", ErrCorrupt, info.Key, sum, info.SHA256)
	}
	return data, nil
}

// sizeOver renders a length read with a limit of want+1 bytes.
func sizeOver(got int, want int64) string {
	if int64(got) > want {
		return "more than " + strconv.FormatInt(want, 10)
	}
	return strconv.Itoa(got)
}

// readObject reads key, up to limit+1 bytes: one more than the limit
// tells an object that is too long.
func (s *Store) readObject(ctx context.Context, key string, limit int64) ([]byte, error) {
	r, err := s.bucket.NewReader(ctx, key, nil)
	if damaged := s.damagedAttrs(key, err); damaged != nil {
		return nil, damaged
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	// The size is the blob service's word: a negative one would make
	// Grow panic, so it only sizes the buffer when it is sane.
	buf.Grow(int(max(0, min(limit+1, r.Size()))))
	if _, err := buf.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

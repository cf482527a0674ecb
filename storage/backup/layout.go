package backup

import (
	"bytes"
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
//	snapshots/<index>-<sha256>.snap   the snapshot's bytes
//	manifests/<index>.json            its Info, written last
//
// <index> is 20 decimal digits, zero-padded, so that keys sort by index;
// <sha256> is the data's SHA-256 in lowercase hex, so that a data object
// is never overwritten by other bytes.
const (
	dataDir       = "snapshots/"
	dataExt       = ".snap"
	manifestDir   = "manifests/"
	manifestExt   = ".json"
	indexDigits   = 20 // math.MaxUint64 has 20 digits
	sha256HexLen  = 2 * sha256.Size
	schemaVersion = 1

	// maxManifestBytes bounds a manifest read back: a real one is well
	// under a kilobyte, a membership of thousands of replicas included.
	maxManifestBytes = 1 << 20
)

// manifest is the JSON of a manifest object.
type manifest struct {
	Version int `json:"version"`
	Info
}

func (s *Store) dataKey(index uint64, sum string) string {
	return fmt.Sprintf("%s%s%0*d-%s%s", s.opts.Prefix, dataDir, indexDigits, index, sum, dataExt)
}

func (s *Store) manifestKey(index uint64) string {
	return fmt.Sprintf("%s%s%0*d%s", s.opts.Prefix, manifestDir, indexDigits, index, manifestExt)
}

// parseDataKey is the inverse of dataKey.
func (s *Store) parseDataKey(key string) (index uint64, sum string, ok bool) {
	name, ok := s.cutName(key, dataDir, dataExt)
	if !ok {
		return 0, "", false
	}
	digits, sum, ok := strings.Cut(name, "-")
	if !ok || !isSHA256Hex(sum) {
		return 0, "", false
	}
	index, ok = parseIndex(digits)
	return index, sum, ok
}

// parseManifestKey is the inverse of manifestKey.
func (s *Store) parseManifestKey(key string) (uint64, bool) {
	name, ok := s.cutName(key, manifestDir, manifestExt)
	if !ok {
		return 0, false
	}
	return parseIndex(name)
}

// cutName returns key without the prefix, dir and ext it must have.
func (s *Store) cutName(key, dir, ext string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.opts.Prefix+dir)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, ext)
}

func parseIndex(digits string) (uint64, bool) {
	if len(digits) != indexDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil && n > 0
}

func isSHA256Hex(s string) bool {
	if len(s) != sha256HexLen {
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

// object is one object of the layout, by its index.
type object struct {
	index uint64
	key   string
	mod   time.Time // the blob store's modification time
}

// list returns dir's objects (manifestDir or dataDir), newest index
// first. Keys outside the layout are not ours, and left out.
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
	slices.SortFunc(out, func(a, b object) int { return strings.Compare(b.key, a.key) })
	return out, nil
}

func (s *Store) parseObject(dir, key string) (object, bool) {
	var index uint64
	var ok bool
	switch dir {
	case manifestDir:
		index, ok = s.parseManifestKey(key)
	case dataDir:
		index, _, ok = s.parseDataKey(key)
	default:
		panic(fmt.Sprintf("backup: listing unknown folder %q", dir))
	}
	return object{index: index, key: key}, ok
}

// readManifest reads and checks the manifest at index: ErrNotFound if
// there is none, ErrCorrupt if it does not describe a backup at index.
func (s *Store) readManifest(ctx context.Context, index uint64) (Info, error) {
	key := s.manifestKey(index)
	b, err := s.readObject(ctx, key, maxManifestBytes)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return Info{}, fmt.Errorf("%w: no backup at index %d (no manifest %s)", ErrNotFound, index, key)
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
	if err := s.checkManifest(m, index); err != nil {
		return Info{}, fmt.Errorf("%w: manifest %s: %v", ErrCorrupt, key, err)
	}
	return m.Info, nil
}

func (s *Store) checkManifest(m manifest, index uint64) error {
	switch {
	case m.Version != schemaVersion:
		return fmt.Errorf("version %d, want %d", m.Version, schemaVersion)
	case m.Index != index:
		return fmt.Errorf("describes index %d", m.Index)
	case !isSHA256Hex(m.SHA256):
		return fmt.Errorf("SHA-256 %q is not 64 lowercase hex digits", m.SHA256)
	case m.Key != s.dataKey(index, m.SHA256):
		return fmt.Errorf("data key %q, want %q", m.Key, s.dataKey(index, m.SHA256))
	case m.Size < 0:
		return fmt.Errorf("size %d", m.Size)
	}
	return m.Meta.validate()
}

// readData reads info's data object and verifies its size and SHA-256.
func (s *Store) readData(ctx context.Context, info Info) ([]byte, error) {
	if info.Size > s.opts.MaxBackupBytes {
		return nil, fmt.Errorf("%w: backup %s is %d bytes, over MaxBackupBytes (%d)", ErrConfig, info.Key, info.Size, s.opts.MaxBackupBytes)
	}
	data, err := s.readObject(ctx, info.Key, info.Size)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%w: backup %d's data object %s is missing", ErrCorrupt, info.Index, info.Key)
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
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	buf.Grow(int(min(limit+1, r.Size())))
	if _, err := buf.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

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
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Errors every failure wraps one of (or is a blob store's own error).
var (
	// ErrConfig: a bad URL or option.
	ErrConfig = errors.New("backup: invalid configuration")
	// ErrNotFound: no such backup, or none at all.
	ErrNotFound = errors.New("backup: not found")
	// ErrCorrupt: a backup's bytes do not match its manifest.
	ErrCorrupt = errors.New("backup: corrupt")
	// ErrConflict: a different snapshot was uploaded at the same index.
	ErrConflict = errors.New("backup: a different backup exists at this index")
)

// Defaults.
const (
	DefaultKeep           = 5
	DefaultPrefix         = "paxcron/"
	DefaultMaxBackupBytes = 2 << 30
	manifestVersion       = 1
)

// SupportedSchemes are the URL schemes Open accepts.
var SupportedSchemes = []string{"file", "s3", "gs", "azblob", "mem"}

// Options configure Open; zero fields take the defaults.
type Options struct {
	// Keep is how many complete backups are kept, the newest.
	Keep int
	// Prefix is where in the bucket the backups live.
	Prefix string
	// MaxBackupBytes refuses larger snapshots, on upload and read.
	MaxBackupBytes int64
}

// Meta is what a restore needs to know of a snapshot.
type Meta struct {
	// Index is the log slot the snapshot is at (> 0).
	Index uint64 `json:"index"`
	// Membership is the cluster's replica IDs.
	Membership []uint64 `json:"membership"`
	// Cluster names the cluster (free-form, for the operator).
	Cluster string `json:"cluster,omitempty"`
	// TakenAt is when the snapshot was uploaded.
	TakenAt time.Time `json:"taken_at"`
}

// Info describes one complete backup.
type Info struct {
	Meta
	Key    string `json:"key"` // the data object
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

type manifest struct {
	Version int `json:"version"`
	Info
}

// Store is a bucket of backups. Safe for concurrent use.
type Store struct {
	bucket *blob.Bucket
	opts   Options
	url    string
}

// Open opens the bucket at rawURL (file:///path, s3://bucket, gs://bucket,
// azblob://container, mem://).
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q is not a URL: want one of %s:// (e.g. file:///var/backups/paxcron)", ErrConfig, rawURL, strings.Join(SupportedSchemes, "://, "))
	}
	if !slices.Contains(SupportedSchemes, u.Scheme) {
		return nil, fmt.Errorf("%w: scheme %q is not supported: use %s", ErrConfig, u.Scheme, strings.Join(SupportedSchemes, ", "))
	}
	switch {
	case opts.Keep < 0:
		return nil, fmt.Errorf("%w: Keep %d is negative", ErrConfig, opts.Keep)
	case opts.MaxBackupBytes < 0:
		return nil, fmt.Errorf("%w: MaxBackupBytes %d is negative", ErrConfig, opts.MaxBackupBytes)
	}
	if opts.Keep == 0 {
		opts.Keep = DefaultKeep
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.MaxBackupBytes == 0 {
		opts.MaxBackupBytes = DefaultMaxBackupBytes
	}
	b, err := blob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("backup: opening %s: %w", redact(u), err)
	}
	return &Store{bucket: b, opts: opts, url: redact(u)}, nil
}

func redact(u *url.URL) string { return u.Redacted() }

// URL is the store's URL, without credentials.
func (s *Store) URL() string { return s.url }

// Close releases the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

func (s *Store) dataKey(index uint64) string {
	return fmt.Sprintf("%ssnapshots/%020d.snap", s.opts.Prefix, index)
}

func (s *Store) manifestKey(index uint64) string {
	return fmt.Sprintf("%smanifests/%020d.json", s.opts.Prefix, index)
}

// indexOf parses the index from a key made by dataKey or manifestKey.
func (s *Store) indexOf(key, dir, ext string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, s.opts.Prefix+dir)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, ext)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// Upload stores data as the backup at meta.Index, then prunes to Keep. An
// upload of the same bytes at an index that has a backup is a no-op;
// different bytes there are ErrConflict.
func (s *Store) Upload(ctx context.Context, meta Meta, data []byte) (Info, error) {
	if meta.Index == 0 {
		return Info{}, fmt.Errorf("%w: index 0 (a snapshot is at a slot > 0)", ErrConfig)
	}
	if int64(len(data)) > s.opts.MaxBackupBytes {
		return Info{}, fmt.Errorf("%w: a snapshot of %d bytes is over the %d-byte limit", ErrConfig, len(data), s.opts.MaxBackupBytes)
	}
	sum := sha256.Sum256(data)
	info := Info{Meta: meta, Key: s.dataKey(meta.Index), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	if info.TakenAt.IsZero() {
		info.TakenAt = time.Now().UTC()
	}
	if prev, err := s.readManifest(ctx, meta.Index); err == nil {
		if prev.SHA256 == info.SHA256 && prev.Size == info.Size {
			return prev, nil
		}
		return Info{}, fmt.Errorf("%w: index %d holds %s (%d bytes), this snapshot is %s (%d bytes)", ErrConflict, meta.Index, prev.SHA256, prev.Size, info.SHA256, info.Size)
	} else if !errors.Is(err, ErrNotFound) {
		return Info{}, err
	}
	if err := s.bucket.WriteAll(ctx, info.Key, data, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
		return Info{}, fmt.Errorf("backup: writing %s: %w", info.Key, err)
	}
	m, err := json.MarshalIndent(manifest{Version: manifestVersion, Info: info}, "", "  ")
	if err != nil {
		return Info{}, fmt.Errorf("backup: encoding the manifest: %w", err)
	}
	// Last: the backup exists from here on.
	if err := s.bucket.WriteAll(ctx, s.manifestKey(meta.Index), m, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return Info{}, fmt.Errorf("backup: writing the manifest of %d: %w", meta.Index, err)
	}
	if err := s.prune(ctx); err != nil {
		return info, fmt.Errorf("backup: uploaded %d, but pruning failed: %w", meta.Index, err)
	}
	return info, nil
}

func (s *Store) readManifest(ctx context.Context, index uint64) (Info, error) {
	key := s.manifestKey(index)
	b, err := s.bucket.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return Info{}, fmt.Errorf("%w: no backup at index %d", ErrNotFound, index)
	}
	if err != nil {
		return Info{}, fmt.Errorf("backup: reading %s: %w", key, err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil || m.Version != manifestVersion || m.Index != index || m.Key != s.dataKey(index) {
		return Info{}, fmt.Errorf("%w: manifest %s does not describe backup %d (version %d, %v)", ErrCorrupt, key, index, m.Version, err)
	}
	return m.Info, nil
}

// List returns the complete backups, newest first.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	indexes, err := s.indexes(ctx, "manifests/", ".json")
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(indexes))
	for _, i := range indexes {
		info, err := s.readManifest(ctx, i)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// indexes lists the indexes of dir's objects, newest first.
func (s *Store) indexes(ctx context.Context, dir, ext string) ([]uint64, error) {
	var out []uint64
	it := s.bucket.List(&blob.ListOptions{Prefix: s.opts.Prefix + dir})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("backup: listing %s: %w", s.url, err)
		}
		if i, ok := s.indexOf(obj.Key, dir, ext); ok {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out, nil
}

// Fetch reads the backup at index and verifies it.
func (s *Store) Fetch(ctx context.Context, index uint64) (Info, []byte, error) {
	info, err := s.readManifest(ctx, index)
	if err != nil {
		return Info{}, nil, err
	}
	if info.Size > s.opts.MaxBackupBytes {
		return Info{}, nil, fmt.Errorf("%w: backup %d claims %d bytes, over the %d-byte limit", ErrCorrupt, index, info.Size, s.opts.MaxBackupBytes)
	}
	r, err := s.bucket.NewReader(ctx, info.Key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return Info{}, nil, fmt.Errorf("%w: backup %d's data %s is missing", ErrCorrupt, index, info.Key)
	}
	if err != nil {
		return Info{}, nil, fmt.Errorf("backup: reading %s: %w", info.Key, err)
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(r, info.Size+1)); err != nil {
		return Info{}, nil, fmt.Errorf("backup: reading %s: %w", info.Key, err)
	}
	data := buf.Bytes()
	sum := sha256.Sum256(data)
	if int64(len(data)) != info.Size || hex.EncodeToString(sum[:]) != info.SHA256 {
		return Info{}, nil, fmt.Errorf("%w: backup %d (%s): %d bytes with SHA-256 %x, its manifest says %d bytes, %s", ErrCorrupt, index, info.Key, len(data), sum, info.Size, info.SHA256)
	}
	return info, data, nil
}

// Latest reads the newest backup, verified. A corrupt newest backup is
// an error (ErrCorrupt), not a silent fall-back: see LatestValid.
func (s *Store) Latest(ctx context.Context) (Info, []byte, error) {
	indexes, err := s.indexes(ctx, "manifests/", ".json")
	if err != nil {
		return Info{}, nil, err
	}
	if len(indexes) == 0 {
		return Info{}, nil, fmt.Errorf("%w: no backup in %s", ErrNotFound, s.url)
	}
	return s.Fetch(ctx, indexes[0])
}

// LatestValid reads the newest backup that verifies, and returns the
// errors of the newer ones it skipped.
func (s *Store) LatestValid(ctx context.Context) (Info, []byte, []error, error) {
	indexes, err := s.indexes(ctx, "manifests/", ".json")
	if err != nil {
		return Info{}, nil, nil, err
	}
	var skipped []error
	for _, i := range indexes {
		info, data, err := s.Fetch(ctx, i)
		if err == nil {
			return info, data, skipped, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return Info{}, nil, skipped, err
		}
		skipped = append(skipped, err)
	}
	return Info{}, nil, skipped, fmt.Errorf("%w: no backup in %s verifies (%d corrupt)", ErrNotFound, s.url, len(skipped))
}

// prune keeps the newest Keep complete backups, and deletes data objects
// without a manifest that are older than the newest kept backup.
func (s *Store) prune(ctx context.Context) error {
	manifests, err := s.indexes(ctx, "manifests/", ".json")
	if err != nil {
		return err
	}
	for _, i := range manifests[min(len(manifests), s.opts.Keep):] {
		// Manifest first: the backup stops existing before its data goes.
		if err := s.delete(ctx, s.manifestKey(i)); err != nil {
			return err
		}
		if err := s.delete(ctx, s.dataKey(i)); err != nil {
			return err
		}
	}
	if len(manifests) == 0 {
		return nil
	}
	kept := manifests[:min(len(manifests), s.opts.Keep)]
	data, err := s.indexes(ctx, "snapshots/", ".snap")
	if err != nil {
		return err
	}
	for _, i := range data {
		if i < kept[0] && !slices.Contains(kept, i) {
			if err := s.delete(ctx, s.dataKey(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) delete(ctx context.Context, key string) error {
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("backup: deleting %s: %w", key, err)
	}
	return nil
}

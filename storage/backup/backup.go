package backup

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"
)

// The sentinel errors. Every error this package returns begins with
// "backup: " and wraps one of them, or else a blob store's own error (a
// network or permission failure), which it names the object of.
var (
	// ErrConfig: a bad URL, option or argument: a caller's mistake.
	ErrConfig = errors.New("backup: invalid configuration")
	// ErrNotFound: no such backup, or none at all.
	ErrNotFound = errors.New("backup: not found")
	// ErrCorrupt: a backup's bytes or manifest do not check out.
	ErrCorrupt = errors.New("backup: corrupt")
	// ErrConflict: a different snapshot is (or is being) backed up at the
	// same generation and index.
	ErrConflict = errors.New("backup: conflict")
	// ErrOutranked: the store holds a backup of a later generation than
	// the upload's, of another history.
	ErrOutranked = errors.New("backup: outranked by a later generation")
	// ErrSuperseded: the store keeps Keep backups newer than the upload's
	// (of its own generation or an older one), so pruning would delete it
	// at once; nothing of it is left.
	ErrSuperseded = errors.New("backup: superseded by the newer backups kept")
	// ErrOtherCluster: the store holds backups of another cluster than
	// the upload's (both named, by different IDs), and belongs to that
	// one (doc.go, "Clusters"): two clusters back up to one place.
	// Nothing was written or pruned; or, where the other's landed during
	// the upload, the backup it wrote was removed again and nothing
	// pruned.
	ErrOtherCluster = errors.New("backup: the target holds another cluster's backups")
	// ErrUnnamed: the upload names no cluster (a state not named yet),
	// and the store holds backups that name one: they may be another
	// cluster's. Nothing was written or pruned (or, as for
	// ErrOtherCluster, what was written was removed again).
	ErrUnnamed = errors.New("backup: an upload without a cluster ID into a target of named backups")
	// ErrSeveralClusters: the store holds the backups of several named
	// clusters, and the caller named none to choose the newest of.
	ErrSeveralClusters = errors.New("backup: the target holds the backups of several clusters")
	// ErrLeftInTarget is wrapped beside ErrOtherCluster or ErrUnnamed by
	// an upload that backed off (two clusters' uploads raced) but could
	// not take its backup back, or must not (the other's landed in the
	// same instant): the backup is in the target, refused. Without it,
	// nothing of the upload is left.
	ErrLeftInTarget = errors.New("backup: the upload's backup stays in the target, refused")
)

// Defaults of Options.
const (
	DefaultKeep           = 5
	DefaultPrefix         = "paxcron/"
	DefaultMaxBackupBytes = 2 << 30 // 2 GiB
	// DefaultOrphanGrace: an upload's data and manifest are written
	// seconds apart; an hour apart, the manifest is never coming.
	DefaultOrphanGrace = time.Hour
)

// SupportedSchemes are the URL schemes Open accepts (drivers.go registers
// one blob driver for each).
var SupportedSchemes = []string{"file", "s3", "gs", "azblob", "mem"}

// Options configure Open. The zero value takes every default.
type Options struct {
	// Keep is how many complete backups are kept, the newest: 0 means
	// DefaultKeep; negative is an error. Pruning also keeps a cluster's
	// first backup in the target, its claim on it (doc.go, "Clusters").
	Keep int
	// Prefix is the key prefix of every object inside the bucket: ""
	// means the URL's path (s3://bucket/prod: "prod/"; not for file://,
	// whose path is the folder), or DefaultPrefix without one. Stores with different prefixes share a bucket
	// without seeing each other.
	Prefix string
	// MaxBackupBytes is the largest snapshot uploaded or read back (the
	// whole snapshot is held in memory): 0 means DefaultMaxBackupBytes.
	MaxBackupBytes int64
	// OrphanGrace is how much older than the newest manifest a data
	// object without a manifest must be before pruning takes it for the
	// leftover of a failed upload: a younger one may be an upload under
	// way whose manifest is about to be written. 0 means
	// DefaultOrphanGrace. Ages are the blob store's modification times.
	OrphanGrace time.Duration
}

// withDefaults validates o and fills in its zero fields.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Keep < 0:
		return o, fmt.Errorf("%w: Keep %d is negative (0 means the default, %d)", ErrConfig, o.Keep, DefaultKeep)
	case o.MaxBackupBytes < 0:
		return o, fmt.Errorf("%w: MaxBackupBytes %d is negative (0 means the default, %d)", ErrConfig, o.MaxBackupBytes, DefaultMaxBackupBytes)
	case o.OrphanGrace < 0:
		return o, fmt.Errorf("%w: OrphanGrace %v is negative (0 means the default, %v)", ErrConfig, o.OrphanGrace, DefaultOrphanGrace)
	}
	if o.OrphanGrace == 0 {
		o.OrphanGrace = DefaultOrphanGrace
	}
	if o.Keep == 0 {
		o.Keep = DefaultKeep
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.MaxBackupBytes == 0 {
		o.MaxBackupBytes = DefaultMaxBackupBytes
	}
	return o, nil
}

// Meta is what a restore needs to know of a snapshot, besides its bytes.
type Meta struct {
	// Generation ranks backups before Index (doc.go, "Generations"): the
	// caller's promise is that along one history it never decreases, and
	// that a history restored from a backup or a snapshot file starts
	// above every generation in the store. 0 is the generation of the
	// backups older binaries wrote, without one.
	Generation uint64 `json:"generation,omitempty"`
	// Index is the log slot the snapshot is at (> 0).
	Index uint64 `json:"index"`
	// Membership is the IDs of the cluster's replicas at Index: at least
	// one, none zero, no duplicates.
	Membership []uint64 `json:"membership"`
	// Cluster names the cluster (chosen by the caller, for the operator).
	Cluster string `json:"cluster,omitempty"`
	// ClusterID is the ID of the cluster whose state the snapshot is, in
	// 32 lowercase hex digits; "" for a state not named yet, and in
	// backups written before IDs. Backups of two named clusters never mix
	// (doc.go, "Clusters").
	ClusterID string `json:"cluster_id,omitempty"`
	// TakenAt is when the snapshot was taken (not zero: this package
	// reads no clock). Stored in UTC.
	TakenAt time.Time `json:"taken_at"`
}

func (m Meta) rank() rank { return rank{gen: m.Generation, index: m.Index} }

// validate checks m; its errors name the index but no sentinel.
func (m Meta) validate() error {
	switch {
	case m.Index == 0:
		return errors.New("index 0 (a snapshot is at a slot > 0)")
	case len(m.Membership) == 0:
		return fmt.Errorf("index %d: empty membership", m.Index)
	case slices.Contains(m.Membership, 0):
		return fmt.Errorf("index %d: replica ID 0 in membership %v", m.Index, m.Membership)
	case m.TakenAt.IsZero():
		return fmt.Errorf("index %d: TakenAt is zero", m.Index)
	case m.ClusterID != "" && !isClusterIDHex(m.ClusterID):
		return fmt.Errorf("index %d: cluster ID %q is not %d lowercase hex digits, not all zero", m.Index, m.ClusterID, clusterIDHexLen)
	}
	sorted := slices.Sorted(slices.Values(m.Membership))
	if len(slices.Compact(sorted)) != len(m.Membership) {
		return fmt.Errorf("index %d: duplicate replica ID in membership %v", m.Index, m.Membership)
	}
	return nil
}

// Info describes one complete backup.
type Info struct {
	Meta
	// Key is the data object's key in the bucket (the argument of Fetch).
	Key string `json:"key"`
	// Size is the snapshot's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the snapshot's SHA-256, lowercase hex.
	SHA256 string `json:"sha256"`
}

// Skipped is a backup LatestValid passed over, and why.
type Skipped struct {
	Generation uint64
	Index      uint64
	// Key is the object at fault: the data object, or the manifest when
	// that could not be read.
	Key string
	// Err wraps ErrCorrupt and names the object.
	Err error
}

// Store is the backups under one prefix of one bucket. It is safe for
// concurrent use, and by several processes at once: see Upload.
type Store struct {
	bucket *blob.Bucket
	opts   Options
	url    string // for messages: no credentials, no query
	// dir is the folder of a file:// store (folder.go), "" for others.
	dir string
}

// Open opens the bucket at rawURL: file:///path or file://./relative/path
// (the folder must exist; a host or no // is refused, see checkFolderURL),
// s3://bucket?region=..., gs://bucket, azblob://container, or mem:// (a
// new empty bucket in memory, for tests). The store is not contacted:
// credentials and reachability show on first use.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if p := strings.Trim(u.Path, "/"); opts.Prefix == "" && u.Scheme != "file" && p != "" {
		// The bucket's openers take only the host and drop the path:
		// s3://bucket/prod and s3://bucket/staging shared one prefix, and
		// each cluster's pruning deleted the other's backups (found in
		// review). The path is the prefix; s3://bucket/paxcron keeps the
		// default's objects where they were.
		opts.Prefix = p + "/"
	}
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dir := ""
	if u.Scheme == "file" {
		if err := checkFolderPrefix(opts.Prefix); err != nil {
			return nil, err
		}
		if rawURL, dir, err = fileStoreURL(u); err != nil {
			return nil, err
		}
	}
	b, err := blob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("backup: opening %s: %w", redact(u), err)
	}
	s := newStore(b, opts, redact(u))
	s.dir = dir
	return s, nil
}

// newStore wraps an open bucket; opts must have their defaults.
func newStore(b *blob.Bucket, opts Options, url string) *Store {
	if opts.Keep < 1 || opts.Prefix == "" || opts.MaxBackupBytes < 1 {
		panic(fmt.Sprintf("backup: options without their defaults: %+v", opts))
	}
	return &Store{bucket: b, opts: opts, url: url}
}

func parseURL(rawURL string) (*url.URL, error) {
	supported := "file://, s3://, gs://, azblob:// or mem://"
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q is not a URL with a scheme: want %s (e.g. file:///var/backups/paxcron)", ErrConfig, rawURL, supported)
	}
	if !slices.Contains(SupportedSchemes, u.Scheme) {
		return nil, fmt.Errorf("%w: URL scheme %q is not supported: want %s", ErrConfig, u.Scheme, supported)
	}
	if u.Scheme == "file" {
		if err := checkFolderURL(u); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// CheckURL reports what Open would refuse in rawURL without opening it,
// for a configuration checked before it is used.
func CheckURL(rawURL string) error {
	_, err := parseURL(rawURL)
	return err
}

// redact drops the password and the query (which may carry a token).
func redact(u *url.URL) string {
	c := *u
	c.RawQuery, c.ForceQuery = "", false
	return c.Redacted()
}

// URL is the store's URL, without credentials or query.
func (s *Store) URL() string { return s.url }

// Close releases the bucket.
func (s *Store) Close() error {
	if err := s.bucket.Close(); err != nil {
		return fmt.Errorf("backup: closing %s: %w", s.url, err)
	}
	return nil
}

// Listed is one manifest of the store as Scan found it: the backup it
// describes, or why it does not describe one.
type Listed struct {
	// Generation and Index are the manifest's key's.
	Generation uint64
	Index      uint64
	// Manifest is the manifest object's key.
	Manifest string
	// Info is the backup; zero when Err is set.
	Info Info
	// Err, when set, wraps ErrCorrupt: the manifest does not decode or
	// does not describe a backup at its key. The data is not read.
	Err error
	// First is set on the first backup of a named cluster to land in
	// the store: that cluster's pruning keeps it beside its newest Keep,
	// as it holds the cluster's claim on the target (doc.go, "Clusters").
	First bool
	// Owns is set on the First of the cluster the target belongs to, in
	// a store holding several named clusters' backups: its uploads go
	// on, and every other cluster's are refused.
	Owns bool
}

// Scan reads every manifest, newest backup first, and reports each one
// that does not check out in place rather than stopping at it: an
// operator choosing a backup to restore sees the damage and what is
// left. A manifest gone since the listing was pruned meanwhile, and is
// left out. Any error but ErrCorrupt stops it.
func (s *Store) Scan(ctx context.Context) ([]Listed, error) {
	read, err := s.readManifests(ctx)
	if err != nil {
		return nil, err
	}
	all := ownedOf(read)
	ids := clusterIDsOf(all)
	var firsts []rank
	for _, id := range ids {
		first, _ := firstOf(all, id)
		firsts = append(firsts, first.rank)
	}
	owner, _ := ownersFirst(all)
	out := make([]Listed, 0, len(read))
	for _, m := range read {
		first := slices.Contains(firsts, m.rank)
		out = append(out, Listed{Generation: m.rank.gen, Index: m.rank.index, Manifest: m.key, Info: m.info, Err: m.err,
			First: first, Owns: first && len(ids) > 1 && m.rank == owner.rank})
	}
	return out, nil
}

// manifestRead is one manifest as readManifests read it: its object, and
// its Info or the ErrCorrupt it gave.
type manifestRead struct {
	object
	info Info
	err  error
}

// readManifests reads every manifest, newest backup first. One gone
// since the listing (pruned meanwhile) is left out; one that does not
// decode is kept with its error. Any error but ErrCorrupt stops it.
func (s *Store) readManifests(ctx context.Context) ([]manifestRead, error) {
	objects, err := s.list(ctx, manifestDir)
	if err != nil {
		return nil, err
	}
	out := make([]manifestRead, 0, len(objects))
	for _, o := range objects {
		info, err := s.readManifest(ctx, o.rank)
		switch {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil && !errors.Is(err, ErrCorrupt):
			return nil, err
		}
		out = append(out, manifestRead{object: o, info: info, err: err})
	}
	return out, nil
}

// List returns the complete backups, newest first: by generation, then by
// index. A manifest that does not decode is an error (ErrCorrupt) rather
// than a gap in the list (Scan reports it in place).
func (s *Store) List(ctx context.Context) ([]Info, error) {
	listed, err := s.Scan(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(listed))
	for _, l := range listed {
		if l.Err != nil {
			return nil, l.Err
		}
		out = append(out, l.Info)
	}
	return out, nil
}

// HighestGeneration is the highest generation of any object in the store
// (0 when it is empty): a restore starts its history above it (doc.go,
// "Generations"). It reads keys only, so that a damaged manifest cannot
// hide a generation, and counts data objects without a manifest too: one
// may be an upload under way.
func (s *Store) HighestGeneration(ctx context.Context) (uint64, error) {
	var highest uint64
	for _, dir := range []string{manifestDir, dataDir} {
		objects, err := s.list(ctx, dir)
		if err != nil {
			return 0, err
		}
		if len(objects) > 0 {
			highest = max(highest, objects[0].rank.gen)
		}
	}
	return highest, nil
}

// Latest reads the newest backup of cluster and verifies it. A corrupt
// newest backup is its ErrCorrupt, never a silent fall-back to an older
// one: restoring from an older backup loses more, and that is the
// operator's choice (see LatestValid). ErrNotFound when there is no
// backup.
//
// cluster is a cluster ID, or "" for any: then a store that holds the
// backups of several named clusters is ErrSeveralClusters, naming them,
// as the newest could be another cluster's state (doc.go, "Clusters").
// Named, only that cluster's backups are chosen from.
func (s *Store) Latest(ctx context.Context, cluster string) (Info, []byte, error) {
	manifests, err := s.chooseAmong(ctx, cluster)
	if err != nil {
		return Info{}, nil, err
	}
	if len(manifests) == 0 {
		return Info{}, nil, fmt.Errorf("%w: no backup in %s under %q", ErrNotFound, s.url, s.opts.Prefix)
	}
	return s.fetchRank(ctx, manifests[0].rank)
}

// chooseAmong lists the manifests Latest and LatestValid choose from for
// cluster (ofCluster).
func (s *Store) chooseAmong(ctx context.Context, cluster string) ([]object, error) {
	manifests, err := s.manifests(ctx)
	if err != nil {
		return nil, err
	}
	return s.ofCluster(manifests, cluster)
}

// LatestValid reads the newest backup of cluster that verifies, for
// disaster recovery, and returns the newer ones it skipped as corrupt,
// newest first. Any error but ErrCorrupt stops it. ErrNotFound when no
// backup verifies (skipped then lists them all). cluster chooses as in
// Latest.
func (s *Store) LatestValid(ctx context.Context, cluster string) (Info, []byte, []Skipped, error) {
	manifests, err := s.chooseAmong(ctx, cluster)
	if err != nil {
		return Info{}, nil, nil, err
	}
	var skipped []Skipped
	for _, m := range manifests {
		info, data, err := s.fetchRank(ctx, m.rank)
		if err == nil {
			return info, data, skipped, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return Info{}, nil, skipped, err
		}
		key := orElse(info.Key, m.key)
		skipped = append(skipped, Skipped{Generation: m.rank.gen, Index: m.rank.index, Key: key, Err: err})
	}
	return Info{}, nil, skipped, fmt.Errorf("%w: no backup in %s under %q verifies (%d corrupt)", ErrNotFound, s.url, s.opts.Prefix, len(skipped))
}

// orElse returns a, or b if a is empty.
func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Fetch reads the backup whose data object is key (an Info.Key) and
// verifies it.
func (s *Store) Fetch(ctx context.Context, key string) (Info, []byte, error) {
	r, _, ok := s.parseDataKey(key)
	if !ok {
		return Info{}, nil, fmt.Errorf("%w: %q is not a backup's key under %q", ErrNotFound, key, s.opts.Prefix)
	}
	info, err := s.readManifest(ctx, r)
	if err != nil {
		return Info{}, nil, err
	}
	if info.Key != key {
		return Info{}, nil, fmt.Errorf("%w: the backup at %v is %s, not %s", ErrNotFound, r, info.Key, key)
	}
	data, err := s.readData(ctx, info)
	if err != nil {
		return Info{}, nil, err
	}
	return info, data, nil
}

// fetchRank reads and verifies the backup at r. On ErrCorrupt of its
// data, the Info read from the manifest is returned with the error.
func (s *Store) fetchRank(ctx context.Context, r rank) (Info, []byte, error) {
	info, err := s.readManifest(ctx, r)
	if err != nil {
		return Info{}, nil, err
	}
	data, err := s.readData(ctx, info)
	if err != nil {
		return info, nil, err
	}
	return info, data, nil
}

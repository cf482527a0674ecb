// Package backup owns the off-machine copies of a replica's snapshots:
// uploading each to a blob store through gocloud.dev/blob (a local folder,
// S3, GCS or Azure, by URL), keeping the newest few, listing them, and
// reading one back verified against its checksum. The chapter's point:
// snapshots are the state that matters, so a cluster that lost every disk
// is rebuilt from the newest backup, losing only what came after it.
//
// # Layout
//
// Under a prefix (default "paxcron/"), a backup at log index I is two
// objects:
//
//	snapshots/<I, 20 digits>.snap   the snapshot's bytes
//	manifests/<I, 20 digits>.json   its Meta, size and SHA-256
//
// The index is zero-padded so that names sort by index. The data is
// written first and the manifest last: a backup is complete, and visible
// to List, Latest and Fetch, only once its manifest exists, so a reader
// never takes a half-written upload for a backup. Data objects without a
// manifest older than the newest kept backup are leftovers of failed
// uploads and are deleted by the next upload's pruning.
//
// # Checksums
//
// Fetch and Latest read the data back and check its size and SHA-256
// against the manifest: a mismatch is ErrCorrupt, never a restore from
// damaged bytes. Latest returns the newest backup's error rather than
// falling back silently; LatestValid falls back to the newest backup that
// verifies and names the ones it skipped, for an operator who chose to.
package backup

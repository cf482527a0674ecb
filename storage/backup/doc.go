// Package backup owns the off-machine copies of the cron state's
// snapshots: it uploads each to a blob store through gocloud.dev/blob (a
// local folder, S3, GCS or Azure, chosen by URL; memory for tests), keeps
// the newest few, lists them, and reads one back verified against its
// checksum. A cluster that lost every replica's disk is restored from the
// newest backup, losing only what was chosen after it.
//
// It owns nothing else: when to take a snapshot, its encoding and how a
// restore installs one belong to the caller, which hands over the bytes
// and a Meta (index, membership, cluster, time taken).
//
// # Layout
//
// Under a prefix (default "paxcron/"), the backup of the snapshot at log
// index I is two objects:
//
//	snapshots/<I>-<SHA-256 of the data>.snap   the snapshot's bytes
//	manifests/<I>.json                         Meta, key, size, SHA-256
//
// I is written in 20 digits, zero-padded, so that keys sort by index and
// a listing of manifests/ finds the newest backup without reading any
// other. The data object is named by its checksum so that it is never
// overwritten by other bytes, even by two uploads racing at one index.
//
// # Why the manifest is written last
//
// Blob stores have no transactions: an upload can die between any two
// writes, and a reader can list at any moment. So the data is written
// first and the manifest last, with a write-if-absent: a backup exists
// exactly when its manifest does, and the manifest vouches for bytes
// that are already there. A reader therefore never takes a half-written
// upload for a backup, and at each index one manifest wins. Data objects
// without a manifest are invisible; those older than the newest kept
// backup are leftovers and the next upload's pruning deletes them (newer
// ones may be uploads under way). Pruning deletes a backup's manifest
// before its data, for the same reason.
//
// # Checksums
//
// Fetch, Latest and LatestValid read the data back and check its size and
// SHA-256 against the manifest: a mismatch is ErrCorrupt naming the
// object, never a restore from damaged bytes. Latest returns the newest
// backup's error rather than falling back silently, since an older backup
// loses more; LatestValid falls back to the newest backup that verifies
// and lists the ones it skipped, for an operator who chose to.
package backup

// Package backup owns the off-machine copies of the cron state's
// snapshots: it uploads each to a blob store through gocloud.dev/blob (a
// local folder, S3, GCS or Azure, chosen by URL; memory for tests), keeps
// the newest few, lists them, and reads one back verified against its
// checksum. A cluster that lost every replica's disk is restored from the
// newest backup, losing only what was chosen after it.
//
// It owns nothing else: when to take a snapshot, its encoding and how a
// restore installs one belong to the caller, which hands over the bytes
// and a Meta (generation, index, membership, cluster, time taken); so
// does choosing the generation, whose rules are the caller's (below).
//
// # Layout
//
// Under a prefix (default "paxcron/"), the backup of the snapshot at log
// index I in generation G is two objects:
//
//	snapshots/<G>-<I>-<SHA-256 of the data>.snap   the snapshot's bytes
//	manifests/<G>-<I>.json                         Meta, key, size, SHA-256
//
// G and I are written in 20 digits, zero-padded, so that keys sort by
// rank and a listing of manifests/ finds the newest backup without
// reading any other. The data object is named by its checksum so that it
// is never overwritten by other bytes, even by two uploads racing at one
// rank. In generation 0 the keys are the first layout's, which had no
// generation (snapshots/<I>-<SHA-256>.snap, manifests/<I>.json), and so
// are its manifests: the backups older binaries wrote are generation 0,
// listed, fetched and restored as before (testdata/layout1 holds some).
// Older binaries see no key of a later generation (their parser refuses
// it), so they neither list nor delete them.
//
// # Generations
//
// Backups rank by (generation, index), newest first: Latest is the
// newest by rank and pruning keeps the newest Keep by rank. The index
// alone ranks the snapshots of one history, but not across a restore: a
// cluster restored from an older snapshot (a file, or a backup that is not
// the newest) backs up at indexes below its lost history's backups, and
// ranked by index, pruning deleted the restored cluster's backups at once
// and Latest brought back the state of before the disaster.
//
// This package only orders by the generation its caller gives (Meta). The
// caller's promise is that along one history the generation never
// decreases, and that a restore starts a history whose generations are
// all above HighestGeneration (of the store it backs up to) and the
// restored snapshot's. paxcron's server (internal/server, "Backup
// generations") takes the round of the state's last Takeover, which every
// replica reads alike from its replicated state, and the restore makes
// every ballot of the restored cluster, and so every Takeover, higher than
// those. An upload below the store's highest generation breaks that
// promise (another cluster shares the store, or a restore did not read
// it): Upload refuses it with ErrOutranked rather than store a backup
// that pruning would delete first and Latest would pass over.
//
// # Clusters
//
// Each backup names the cluster whose state it holds (Meta.ClusterID, the
// caller's: paxcron's replicated cluster ID), or none: a state not named
// yet, or a backup older binaries wrote. Two clusters given one target
// (staging and production pointed at one bucket prefix) would otherwise
// mix their backups: ranked together, one's generations outrank the
// other's, whose uploads then fail or whose backups the first one's
// pruning deletes, and "the newest" backup can be the other cluster's
// state. So:
//
//   - A target that holds several named clusters' backups belongs to the
//     one whose first backup there landed first, by the store's
//     modification times (of one time, the lower ID). Every uploader
//     computes it from its listing: the owner's uploads go on, and
//     Upload refuses every other cluster's, with ErrOtherCluster naming
//     them and the owner, before writing or pruning anything. A new
//     cluster given a target that holds another's backups is refused the
//     same way. Backups without an ID count as the uploader's: as before
//     IDs, for want of anything better to go by. The store's clock is the
//     only order two clusters share: ranks are each cluster's own, and a
//     manifest's TakenAt is its leader's clock at the snapshot.
//   - An upload without an ID (a state not named yet: moments after an
//     upgrade to IDs or a restore of an unnamed snapshot) takes every
//     named backup for another cluster's: into a target that holds one
//     it is refused, with ErrUnnamed and nothing written or pruned. It
//     cannot tell whether they are its own history's, and written among
//     one cluster's backups it could be restored as that cluster's
//     newest. Refused, it loses little: the leader names the state as
//     soon as it has caught up, and the next backup carries the name.
//   - Pruning counts and deletes only the uploader's backups (and those
//     of no known cluster), and sweeps no data of another cluster's;
//     an unnamed upload prunes unnamed backups alone. A named cluster
//     also keeps its first backup there, always (Keep and one more,
//     once it has Keep newer). Another cluster's backup (a killed first
//     upload of theirs) can land after any listing, and the store may
//     stamp it before backups that listing held (in one second, or when
//     the write began): pruned once it saw none, the owner's first
//     backup moved its claim past theirs, and the target changed hands.
//     Kept, a claim never moves.
//   - The check and the writes are apart, and a blob store has no
//     conditional write across keys: two clusters' first uploads into
//     one target can both pass the check. So after its manifest an upload
//     lists the manifests again, and if the target now belongs to another
//     cluster it backs off: it removes the backup it created (nothing
//     else: not the other's, nor its own cluster's earlier backups),
//     prunes nothing and fails with ErrOtherCluster (ErrUnnamed). The
//     first to land keeps its backup and the target. A named upload
//     removes its backup only if another cluster's landed strictly before
//     it: then every other upload at its rank (a retry, or a second leader
//     with the same bytes, which counts that backup as its own) listed
//     after it and saw the other's too, and reported nothing. Of one
//     instant by the store's clock, such an upload may have reported it:
//     the backup stays, refused, so that no upload reports a backup that
//     is gone. (An unnamed upload removes it either way: left among a
//     named cluster's backups, it would count as theirs.) An upload killed
//     before that listing leaves its backup beside the owner's: refused
//     with its cluster's next uploads, until an operator removes it.
//   - Latest and LatestValid given no cluster refuse a target whose
//     backups name several (ErrSeveralClusters); given one, they choose
//     among its backups alone.
//
// Reading the IDs costs a read of every manifest per upload: a few small
// objects, as the store keeps Keep backups.
//
// # Why the manifest is written last
//
// Blob stores have no transactions: an upload can die between any two
// writes, and a reader can list at any moment. So the data is written
// first and the manifest last, with a write-if-absent: a backup exists
// exactly when its manifest does, and the manifest vouches for bytes
// that are already there. A reader therefore never takes a half-written
// upload for a backup, and at each rank one manifest wins. Data objects
// without a manifest are invisible; those ranked below the newest kept
// backup are leftovers and the next upload's pruning deletes them (newer
// ones may be uploads under way). Pruning deletes a backup's manifest
// before its data, for the same reason.
//
// A file:// store also needs what the driver does not do: temporary
// files beside the objects, a sync of each object before the next step,
// and sweeping temporary files a killed writer left (folder.go).
//
// # Checksums
//
// Fetch, Latest and LatestValid read the data back and check its size and
// SHA-256 against the manifest: a mismatch is ErrCorrupt naming the
// object, never a restore from damaged bytes. Latest returns the newest
// backup's error rather than falling back silently, since an older backup
// loses more; LatestValid falls back to the newest backup that verifies
// and lists the ones it skipped, for an operator who chose to. List stops
// at a manifest that does not decode; Scan reports it in its place, for an
// operator looking at what is left.
package backup

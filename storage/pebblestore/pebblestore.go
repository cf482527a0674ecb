// Package pebblestore owns the production storage.Store: a replica's hard
// state, accepted entries and newest snapshot's header in a Pebble
// database, each value a checksummed storage record (see keys.go for the
// key layout), and the snapshot's image in a file of its own beside it
// (images.go says why and how).
//
// Every Save is one Pebble batch committed with pebble.Sync: one fsync per
// call, and a batch is applied entirely or not at all after a crash. A
// Save that stores a snapshot first writes and syncs its image's file,
// unless StageSnapshot has already done so off the writer's path. Pebble
// makes a committed batch readable before its WAL sync has finished, so
// Save holds the store's write lock until Commit has returned: no read ever
// sees bytes that might not survive a crash.
//
// Damage Pebble reports as corruption (a table's block failing its
// checksum, a log or MANIFEST it cannot replay) is storage.ErrCorrupt, as
// damage to one of our records is, and Pebble only logs it rather than
// ending the process (reportDamage, pebbleError). So is damage inside a
// WAL's synced writes that Pebble would read as the log's torn end,
// found before Pebble replays the log (walcheck.go).
package pebblestore

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/paxos"
	"paxcron/storage"
)

// Options configures Open.
type Options struct {
	// FS is the file system the database lives on: vfs.Default in
	// production, vfs.NewMem() or vfs.NewCrashableMem() in tests. Required.
	FS vfs.FS
	// MemTableBytes is the size of one memtable; 0 leaves Pebble's default
	// (4 MiB). Tests set it small to make flushes and compactions happen.
	MemTableBytes uint64
	// Logger receives Pebble's messages; nil leaves Pebble's default (the
	// standard log package).
	Logger pebble.Logger

	// snapshotChunkBytes overrides snapshotChunkBytes (tests:
	// WithSnapshotChunkBytes).
	snapshotChunkBytes int
	// walWriteThroughBytes, when positive, is how much of a new WAL file
	// is written through instead of a memtable's worth (tests on a
	// memory file system: WithWALWriteThroughBytes).
	walWriteThroughBytes int64
}

// Store is a storage.Store on Pebble. It is safe for concurrent use.
type Store struct {
	db     *pebble.DB
	fs     vfs.FS
	logger pebble.Logger
	// imagesDir holds the snapshot image files (images.go).
	imagesDir string

	mu sync.RWMutex
	// err, once set, is returned by every call: storage.ErrClosed after
	// Close, or the failure of a write, after which the store cannot tell
	// what reached the disk.
	err error
	// Cached from the keys at Open and kept up to date by writes, so that
	// the hot path never scans. Values are not cached: each read decodes
	// and verifies its record.
	hasSnapshot bool
	snapIndex   uint64
	snapFile    uint64 // the image file of the stored snapshot, 0 if none
	// snapFileUnknown: the stored snapshot's header failed its checksum
	// at Open (snapFile is 0; reading the snapshot reports the damage).
	snapFileUnknown bool
	// snapshotSaves counts the snapshots saved since Open, so that a
	// staging can tell whether one was saved while it wrote its image.
	snapshotSaves uint64
	firstSlot     uint64 // paxos.Storage.FirstSlot
	lastSlot      uint64
	// busy counts the snapshot reads and stagings running outside the
	// lock, each on its own view of the database or its own file; Close
	// waits for them.
	busy sync.WaitGroup
	// stageMu guards the images staged ahead of their Save and the
	// number of the next image file; never held with mu's write side
	// waited for.
	stageMu  sync.Mutex
	staged   map[uint64]stagedImage // by snapshot index
	nextFile uint64
	// testHookSnapshotRead, if set, runs in Snapshot once the view is
	// pinned and the lock released.
	testHookSnapshotRead func()
	// testHookImageStaging, if set, runs in StageSnapshot once the image
	// is written, before it is staged.
	testHookImageStaging func()
	// chunkBytes is the size of the snapshot chunks this store writes.
	chunkBytes int
	// Write-side scratch, used under the write lock.
	codec *storage.Codec
	value []byte
	key   []byte
}

var _ storage.Store = (*Store)(nil)

// readCodecs lends codecs to concurrent readers.
var readCodecs = sync.Pool{New: func() any { return storage.NewCodec() }}

// Open opens (creating if needed) the store in dir on opts.FS.
func Open(dir string, opts Options) (*Store, error) {
	if opts.FS == nil {
		return nil, errors.New("storage: pebblestore: Options.FS is required (vfs.Default for a real disk)")
	}
	logger := opts.Logger
	if logger == nil {
		logger = pebble.DefaultLogger
	}
	po := &pebble.Options{
		FS:                 opts.FS,
		MemTableSize:       opts.MemTableBytes,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             logger,
		EventListener:      &pebble.EventListener{DataCorruption: reportDamage(logger)},
	}
	po.EnsureDefaults() // the memtable's size, if Options left it to Pebble
	writeThrough := int64(po.MemTableSize)
	if opts.walWriteThroughBytes > 0 {
		writeThrough = opts.walWriteThroughBytes
	}
	// Each WAL Pebble replays is checked before Pebble reads it
	// (walcheck.go): damage Pebble would read as a torn tail.
	replay := &walReplayCheck{}
	po.FS = prewrittenWALs{FS: replayCheckedWALs{FS: po.FS, check: replay}, bytes: writeThrough}
	rotateWAL := walLacksSyncOffsets(dir, opts.FS)
	db, err := pebble.Open(dir, po)
	replay.opened.Store(true)
	if damage := replay.found(); damage != nil {
		// Pebble's Open failed on it (the WAL did not open): the damage
		// is returned as found, not under Pebble's wrapping of it.
		if err == nil {
			_ = db.Close()
		}
		return nil, damage
	}
	if err != nil {
		return nil, pebbleError(err, "open "+dir)
	}
	if rotateWAL {
		// Flushing even an empty memtable starts a new WAL, written at
		// the format Open has raised the store to.
		if err := db.Flush(); err != nil {
			_ = db.Close()
			return nil, pebbleError(err, "start a WAL with sync offsets in "+dir)
		}
	}
	s := &Store{
		db: db, fs: opts.FS, logger: logger, codec: storage.NewCodec(),
		chunkBytes: snapshotChunkBytes, staged: make(map[uint64]stagedImage),
	}
	if opts.snapshotChunkBytes > 0 {
		s.chunkBytes = opts.snapshotChunkBytes
	}
	err = s.moveLegacySnapshot()
	if err == nil {
		err = s.loadIndexes()
	}
	if err == nil {
		err = s.loadSnapFile()
	}
	if err == nil {
		err = s.openImages(dir)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// walLacksSyncOffsets reports whether the WAL Pebble will write after
// opening dir was made before the store's format reached
// FormatWALSyncChunks: a new store's first WAL is (Open raises its format
// after making it), or one written by an older Pebble. The chunks of a
// WAL written at that format carry the offset synced so far, which is how
// Pebble tells damage inside a log, followed by synced writes, from a torn
// tail; a WAL without them, damaged, is read up to the damage and no
// further, and the store opens without its later writes and without an
// error.
func walLacksSyncOffsets(dir string, fs vfs.FS) bool {
	desc, err := pebble.Peek(dir, fs)
	return err != nil || !desc.Exists || desc.FormatMajorVersion < pebble.FormatWALSyncChunks
}

// reportDamage is Pebble's DataCorruption event: a block of a table that
// fails its checksum, found by a read. Left to Pebble, a store with a
// logger calls its Fatalf, which ends the process before the read
// returns: the caller could not tell its damaged disk from any other
// failure, nor the simulator go on. Logged as an error, the read's own
// error (storage.ErrCorrupt) says it.
func reportDamage(logger pebble.Logger) func(pebble.DataCorruptionInfo) {
	return func(info pebble.DataCorruptionInfo) {
		// Not info's own String: it prints the error's stack traces.
		logger.Errorf("storage: pebblestore: on-disk corruption in %s (keys %s): %v", info.Path, info.Bounds.String(), info.Details)
	}
}

// moveLegacySnapshot moves a snapshot kept under legacySnapshotTag (a
// store written before the snapshot moved in front of the entries) to
// snapshotTag, in one synced batch, so that a crash leaves it in one
// place or the other. The record is moved as it is: its checksum covers
// the value, not the key.
func (s *Store) moveLegacySnapshot() error {
	index, ok, err := s.lastNumber(legacySnapshotTag)
	if err != nil || !ok {
		return err
	}
	if _, found, err := s.lastNumber(snapshotTag); err != nil {
		return err
	} else if found {
		return fmt.Errorf("%w: snapshots under both the old and the new key", storage.ErrCorrupt)
	}
	rec, closer, err := s.db.Get(legacySnapshotKey(index))
	if err != nil {
		return pebbleError(err, fmt.Sprintf("read the snapshot at index %d to move it", index))
	}
	b := s.db.NewBatch()
	defer b.Close()
	err = b.Set(snapshotKey(index), rec, nil)
	_ = closer.Close()
	if err == nil {
		err = b.DeleteRange([]byte{legacySnapshotTag}, tagUpperBound(legacySnapshotTag), nil)
	}
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		return pebbleError(err, fmt.Sprintf("move the snapshot at index %d to its new key", index))
	}
	return nil
}

// loadIndexes reads the snapshot index and last slot from the keys alone.
func (s *Store) loadIndexes() error {
	index, ok, err := s.lastNumber(snapshotTag)
	if err != nil {
		return err
	}
	s.hasSnapshot, s.snapIndex = ok, index
	slot, _, err := s.lastNumber(entryTag)
	if err != nil {
		return err
	}
	s.lastSlot = max(slot, s.snapIndex)
	return s.loadFirstSlot()
}

// loadFirstSlot sets firstSlot from the lowest entry key; it must be
// called again after every write that deletes entries.
func (s *Store) loadFirstSlot() error {
	slot, ok, err := s.edgeNumber(entryTag, false)
	if err != nil {
		return err
	}
	if ok && slot == 0 {
		// No Save writes slot 0 (storage.CheckUpdate), and FirstSlot is
		// at least 1: the key is damage, not an entry.
		return fmt.Errorf("%w: an entry key for slot 0", storage.ErrCorrupt)
	}
	s.firstSlot = storage.FirstSlot(slot, ok, s.snapIndex)
	return nil
}

// lastNumber returns the slot or index in the last key of tag's range.
func (s *Store) lastNumber(tag byte) (n uint64, ok bool, err error) {
	return s.edgeNumber(tag, true)
}

// edgeNumber returns the slot or index in the last (or first) key of
// tag's range.
func (s *Store) edgeNumber(tag byte, last bool) (n uint64, ok bool, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{tag},
		UpperBound: tagUpperBound(tag),
	})
	if err == nil {
		found := it.First()
		if last {
			found = it.Last()
		}
		if found {
			n, err = parseNumberedKey(tag, it.Key())
			ok = err == nil
		}
		err = closeIter(it, err)
	}
	if err != nil {
		edge := "first"
		if last {
			edge = "last"
		}
		return 0, false, pebbleError(err, fmt.Sprintf("read the %s key of the %q range", edge, tag))
	}
	return n, ok, nil
}

// closeIter closes it and returns err joined with the iterator's own
// error: a read that failed partway (a block failing its checksum) ends
// the iteration as if no key were left, and only Close says why.
func closeIter(it *pebble.Iterator, err error) error {
	return errors.Join(err, it.Close())
}

// pebbleError wraps err, met while the store read or wrote what. One
// Pebble marks as corruption (a table's block or a WAL record failing its
// checksum, a table or the MANIFEST malformed) is a damaged disk, as a
// record failing our own checksum is, so it wraps storage.ErrCorrupt:
// callers tell a damaged disk from a failing one by it. Any other
// (an I/O error, a full disk) does not. Pebble's error stays in the
// chain, and an error already wrapping storage.ErrCorrupt names its
// record and is returned as it is.
func pebbleError(err error, what string) error {
	switch {
	case errors.Is(err, storage.ErrCorrupt):
		return err
	case pebble.IsCorruptionError(err):
		return fmt.Errorf("%w: %s: %w", storage.ErrCorrupt, what, err)
	default:
		return fmt.Errorf("storage: pebblestore: %s: %w", what, err)
	}
}

// Close implements storage.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(s.err, storage.ErrClosed) {
		return storage.ErrClosed
	}
	s.err = storage.ErrClosed
	// A snapshot read holds a view of the database without the lock, and
	// a staging writes its file; no new one starts now that err is set.
	s.mu.Unlock()
	s.busy.Wait()
	s.mu.Lock()
	if err := s.db.Close(); err != nil {
		return pebbleError(err, "close")
	}
	return nil
}

// InitialState implements paxos.Storage.
func (s *Store) InitialState() (paxos.HardState, paxos.SnapshotMeta, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.err != nil {
		return paxos.HardState{}, paxos.SnapshotMeta{}, s.err
	}
	c := readCodecs.Get().(*storage.Codec)
	defer readCodecs.Put(c)
	var hs paxos.HardState
	rec, closer, err := s.db.Get(hardStateKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return hs, paxos.SnapshotMeta{}, pebbleError(err, "read hard state")
	default:
		hs, err = c.DecodeHardState(rec)
		_ = closer.Close()
		if err != nil {
			return paxos.HardState{}, paxos.SnapshotMeta{}, err
		}
	}
	if !s.hasSnapshot {
		return hs, paxos.SnapshotMeta{}, nil
	}
	meta, err := readSnapshotMeta(s.db, c, s.snapIndex)
	return hs, meta, err
}

// Snapshot implements paxos.Storage. It holds the store's lock only to
// pin a view of the database: reading and decoding a snapshot of a large
// state takes seconds (a million jobs: 174 MiB), and the replica reads it
// in the background while its writes go on.
func (s *Store) Snapshot() (paxos.Snapshot, error) {
	s.mu.RLock()
	if s.err != nil || !s.hasSnapshot {
		err := s.err
		s.mu.RUnlock()
		return paxos.Snapshot{}, err
	}
	index, file := s.snapIndex, s.snapFile
	img, err := s.imageFileOf()
	if err != nil {
		s.mu.RUnlock()
		return paxos.Snapshot{}, err
	}
	view := s.db.NewSnapshot()
	s.busy.Add(1)
	s.mu.RUnlock()
	defer s.busy.Done()
	defer view.Close()
	if img != nil {
		defer img.Close()
	}
	if s.testHookSnapshotRead != nil {
		s.testHookSnapshotRead()
	}
	c := readCodecs.Get().(*storage.Codec)
	defer readCodecs.Put(c)
	return readSnapshotAt(view, img, file, c, index)
}

// readSnapshotAt reads the snapshot at index from r, its image from img
// if its header names a file (img is file number file).
func readSnapshotAt(r pebble.Reader, img vfs.File, file uint64, c *storage.Codec, index uint64) (paxos.Snapshot, error) {
	h, whole, err := readSnapshotRecord(r, c, index)
	switch {
	case err != nil:
		return paxos.Snapshot{}, err
	case whole != nil:
		return *whole, nil
	}
	var data []byte
	switch {
	case h.Size == 0:
	case h.File == 0:
		data, err = readChunks(r, c, h)
	case h.File != file:
		// The header is not the one read at Open or written by the last
		// Save, which named file.
		return paxos.Snapshot{}, fmt.Errorf("%w: snapshot at index %d: its header names image file %d, the store holds %d",
			storage.ErrCorrupt, index, h.File, file)
	default:
		data, err = readImage(img, c, h)
	}
	if err != nil {
		return paxos.Snapshot{}, err
	}
	return paxos.Snapshot{Meta: h.Meta, Data: data}, nil
}

// readSnapshotRecord reads the record under the key of the snapshot at
// index: a header (its chunks still to read), or, in a store written
// before chunks, the whole snapshot.
func readSnapshotRecord(r pebble.Reader, c *storage.Codec, index uint64) (storage.SnapshotHeader, *paxos.Snapshot, error) {
	rec, closer, err := r.Get(snapshotKey(index))
	if err != nil {
		// The key was there at Open or written since: losing it is
		// corruption, not absence.
		return storage.SnapshotHeader{}, nil, pebbleError(err, fmt.Sprintf("read snapshot at index %d", index))
	}
	defer closer.Close()
	if !storage.IsSnapshotHeader(rec) {
		snap, err := c.DecodeSnapshot(index, rec)
		return storage.SnapshotHeader{}, &snap, err
	}
	h, err := c.DecodeSnapshotHeader(index, rec)
	return h, nil, err
}

// maxChunksPrealloc bounds the image readChunks allocates ahead of its
// chunks. Only a store written before image files holds chunks, and it
// reads them once (its next snapshot is a file), so a larger image
// growing by append as it is read costs little.
const maxChunksPrealloc = 64 << 20

// readChunks reads and joins the image h describes. The image is
// allocated whole once (the runtime clears a large allocation in
// preemptible steps); each chunk is copied into it on its own.
func readChunks(r pebble.Reader, c *storage.Codec, h storage.SnapshotHeader) ([]byte, error) {
	index := h.Meta.Index
	if h.Size == 0 {
		return nil, nil
	}
	it, err := r.NewIter(&pebble.IterOptions{
		LowerBound: appendChunkKey(nil, index, 0),
		UpperBound: chunksUpperBound(index),
	})
	if err != nil {
		return nil, pebbleError(err, fmt.Sprintf("read the chunks of the snapshot at index %d", index))
	}
	// A header whose checksum is valid but whose size is absurd must not
	// allocate it: past maxChunksPrealloc the image grows as chunks are
	// read, and appendChunk refuses more than the header says.
	data := make([]byte, 0, min(h.Size, maxChunksPrealloc))
	var n uint64
	for valid := it.First(); valid && err == nil; valid = it.Next() {
		// The bounds hold the keys to this index's chunks.
		var number uint64
		_, number, err = parseChunkKey(it.Key())
		switch {
		case err != nil:
		case number != n:
			err = fmt.Errorf("%w: snapshot at index %d: chunk %d where chunk %d was due", storage.ErrCorrupt, index, number, n)
		case n >= h.Chunks:
			err = fmt.Errorf("%w: snapshot at index %d: more than the %d chunks of its header", storage.ErrCorrupt, index, h.Chunks)
		default:
			var v []byte
			if v, err = it.ValueAndErr(); err != nil {
				break
			}
			data, err = appendChunk(c, data, h, n, v)
			n++
		}
	}
	if err = closeIter(it, err); err != nil {
		return nil, pebbleError(err, fmt.Sprintf("read the chunks of the snapshot at index %d", index))
	}
	return data, checkWhole(h, n, data)
}

// appendChunk decodes chunk n's record rec of the image h describes and
// appends its data to data, refusing chunks that hold more than the
// header's bytes.
func appendChunk(c *storage.Codec, data []byte, h storage.SnapshotHeader, n uint64, rec []byte) ([]byte, error) {
	data, err := c.AppendSnapshotChunkData(data, h.Meta.Index, n, rec)
	if err == nil && uint64(len(data)) > h.Size {
		err = fmt.Errorf("%w: snapshot at index %d: its chunks hold more than the %d bytes of its header", storage.ErrCorrupt, h.Meta.Index, h.Size)
	}
	return data, err
}

// checkWhole refuses an image read as chunks chunks holding data that is
// not the one h describes.
func checkWhole(h storage.SnapshotHeader, chunks uint64, data []byte) error {
	if chunks != h.Chunks || uint64(len(data)) != h.Size {
		return fmt.Errorf("%w: snapshot at index %d: %d chunks of %d bytes, its header says %d of %d", storage.ErrCorrupt, h.Meta.Index, chunks, len(data), h.Chunks, h.Size)
	}
	return nil
}

// readSnapshotMeta reads the metadata of the snapshot at index: its
// header alone, unless it is a whole snapshot.
func readSnapshotMeta(r pebble.Reader, c *storage.Codec, index uint64) (paxos.SnapshotMeta, error) {
	h, whole, err := readSnapshotRecord(r, c, index)
	if whole != nil {
		return whole.Meta, err
	}
	return h.Meta, err
}

// FirstSlot implements paxos.Storage.
func (s *Store) FirstSlot() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.err != nil {
		return 0, s.err
	}
	return s.firstSlot, nil
}

// LastSlot implements paxos.Storage.
func (s *Store) LastSlot() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.err != nil {
		return 0, s.err
	}
	return s.lastSlot, nil
}

// Entries implements paxos.Storage.
func (s *Store) Entries(lo, hi, maxBytes uint64) ([]paxos.Entry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.err != nil {
		return nil, s.err
	}
	if err := storage.CheckEntriesRange(lo, s.firstSlot); err != nil {
		return nil, err
	}
	if lo >= hi {
		return nil, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: entryKey(lo), UpperBound: entryKey(hi)})
	if err == nil {
		var out []paxos.Entry
		out, err = readEntries(it, maxBytes)
		if err = closeIter(it, err); err == nil {
			return out, nil
		}
	}
	return nil, pebbleError(err, fmt.Sprintf("read entries %d to %d", lo, hi))
}

func readEntries(it *pebble.Iterator, maxBytes uint64) ([]paxos.Entry, error) {
	c := readCodecs.Get().(*storage.Codec)
	defer readCodecs.Put(c)
	budget := storage.SizeBudget{MaxBytes: maxBytes}
	var out []paxos.Entry
	for ok := it.First(); ok; ok = it.Next() {
		slot, err := parseNumberedKey(entryTag, it.Key())
		if err != nil {
			return nil, err
		}
		rec, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		e, err := c.DecodeEntry(slot, rec)
		if err != nil {
			return nil, err
		}
		if !budget.Take(paxos.EntrySize(e)) {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// walCategory is the category Pebble creates its WAL files under.
const walCategory vfs.DiskWriteCategory = "pebble-wal"

// prewrittenWALs is a file system whose new WAL files come written through
// with zeros (bytes of them, a memtable's worth) and synced before Pebble
// writes its first record. A synced append that grows a file, or that
// fills blocks reserved but never written (fallocate), makes fdatasync
// commit the file system's journal as well as the data; an overwrite
// does not. Pebble gets such files by recycling the WAL of a memtable it
// flushed, but a new store has none for its first few memtables, nor a
// reopened one for its first: on ext4, three stores on one disk synced
// 1,165-1,184 job writes a second at one client during their first
// seconds and 1,295-1,303 once their WALs were recycled (BENCHMARKS.md,
// "A new store's WAL"). Pebble reads the zeros after a log's last record
// as the log's end, as it does after a preallocated or recycled tail.
type prewrittenWALs struct {
	vfs.FS
	bytes int64
}

// Create creates name; a WAL comes back opened at its start, after bytes
// of zeros written and synced.
func (fs prewrittenWALs) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || category != walCategory {
		return f, err
	}
	zeros := make([]byte, min(fs.bytes, 256<<10))
	for left := fs.bytes; left > 0 && err == nil; left -= int64(len(zeros)) {
		// vfs.File.Write may modify what it is given (Pebble's memory file
		// system scribbles on it in invariant builds, -race among them):
		// the buffer is zeroed again before each write. Found when the
		// WALs of a -race test held 0xCC-like bytes past their records.
		clear(zeros)
		_, err = f.Write(zeros[:min(left, int64(len(zeros)))])
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("storage: pebblestore: writing through the new WAL %s: %w", name, err)
	}
	return fs.FS.OpenReadWrite(name, category)
}

package pebblestore

// walcheck.go refuses a store whose WAL lost synced writes inside its last
// 32 KiB block, a loss Pebble reads as a torn tail.
//
// Each chunk of a WAL written at FormatWALSyncChunks carries the offset
// its log had been synced through when the chunk was written. Reading a
// log that stops at an invalid or zeroed chunk, Pebble looks for a later
// chunk of the same log claiming a sync beyond the stop: found, the stop
// is damage inside synced data (corruption); not found, it is the torn
// end of writes never synced, which the last log Pebble replays may have.
// But Pebble looks only from the next 32 KiB block on, and in each block
// only at the chunks it reaches by their lengths from the block's start.
// A byte damaged in a log's last block, before synced chunks of that
// block, is read as the log's end: the store opened without those writes
// and without an error, and an acceptor forgot a promise or an accept
// without knowing it.
//
// So before Pebble reads a WAL it replays, the store walks its chunks as
// Pebble's reader does and, if the log stops short of its end, tries
// every offset after the stop, in its block and in every later one, for
// a whole chunk of the same log (its checksum correct) whose synced
// offset is beyond the stop. Synced bytes survive a crash as they were
// written, so such a chunk proves the bytes at the stop were synced and
// have changed since. Found, the log is read again with Pebble's record
// package, and the store is refused only if Pebble's reader too stops
// there and takes the stop for a torn tail (an error Pebble itself
// reports as corruption is left to it). Nothing weaker is proof: the
// chunks of a write never synced may reach the disk in any order, a
// later one kept and an earlier one lost, and they claim only the syncs
// before that write, up to its very start
// (TestTornWALTailOpensWithEverySyncedSave).
//
// What it cannot see. Damage in the last synced write, with no chunk
// written after it, is exactly what a torn tail looks like, and the store
// still opens without that write. And Pebble's writer (v2.1.7) counts in
// the synced offset only the bytes it writes of a block still filling,
// not the rest of a block that fills before it is written: a log's
// claimed offsets fall behind its synced length by those bytes, for good
// (by 64 KiB after one write of 67 KiB; TestWALChunksArePebbles logs the
// gap), and damage in synced bytes that no later claim reaches is not
// provable either, by Pebble or by this check. The other way round,
// bytes of a write's payload made to look like a chunk of the log (its
// number, a checksum, a claim beyond the stop and not past itself) that
// lie after a torn tail read as proof: the store is refused, the safe
// side, and rebuilt from its peers.
//
// The check runs inside Pebble's Open: the file system Pebble is given
// checks each WAL as Pebble opens it to replay, before Pebble reads it.
// Pebble opens for reading every log at or after the MANIFEST's oldest
// unflushed one and no other, so the logs judged are exactly the ones
// replayed: an obsolete log kept for recycling is not
// (TestObsoleteWALIsNotJudged). Its cost: one more
// read of those logs, and after a stop a scan of every offset to the
// file's end (BenchmarkWALSyncProofScan, BenchmarkCheckWAL). Pebble's
// reader is left to the rare log holding a proof: at a chunk failing its
// checksum it tries every bit of the chunk flipped (to report the bit),
// some 0.1-0.3 s for a chunk of 19 KiB, which Pebble's replay pays once
// already.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"

	"paxcron/storage"
)

// The chunk format of Pebble's record package (record.go), as Pebble
// v2.1.7 writes and reads it; TestWALChunksArePebbles pins it to a WAL
// Pebble wrote. A log is a run of 32 KiB blocks, each packed with chunks
// that never cross a block's end; a record is one chunk or a first, zero
// or more middle and a last one. A chunk is a header and a payload:
//
//	checksum (4) | payload length (2) | encoding (1) | log number (4) | synced offset (8)
//
// little-endian, the last two fields only in the formats that have them:
// legacy chunks (encodings 1-4) end their header at the encoding,
// recyclable ones (5-8) at the log number, sync chunks (9-12) at the
// synced offset. The checksum is over the header from the encoding on
// and the payload.
const (
	walBlockBytes            = 32 << 10
	legacyChunkHeaderBytes   = 7
	recycleChunkHeaderBytes  = 11
	syncChunkHeaderBytes     = 19
	firstLegacyEncoding      = 1
	firstRecyclableEncoding  = 5
	firstSyncEncoding        = 9
	lastSyncEncoding         = 12
	encodingsPerFormat       = 4 // full, first, middle, last
	chunkChecksumDelta       = 0xa282ead8
	chunkChecksumRotateRight = 15
)

// chunkCastagnoli is the CRC-32C table of the chunks' checksums.
var chunkCastagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkChecksum is the checksum a chunk stores for b (its header from the
// encoding on, and its payload): CRC-32C, rotated and offset, as LevelDB
// does, so that data holding its own checksum does not look like a chunk.
func chunkChecksum(b []byte) uint32 {
	c := crc32.Checksum(b, chunkCastagnoli)
	return (c>>chunkChecksumRotateRight | c<<(32-chunkChecksumRotateRight)) + chunkChecksumDelta
}

// walChunk is a chunk read at offset at of its block.
type walChunk struct {
	at       int
	encoding byte
	// logNum is the chunk's log number, 0 for a legacy chunk.
	logNum uint32
	// synced is the synced offset of a sync chunk, 0 for another.
	synced       uint64
	headerBytes  int
	payloadBytes int
}

// end is the offset in its block just past the chunk.
func (c walChunk) end() int { return c.at + c.headerBytes + c.payloadBytes }

// isSync reports whether the chunk is in the format carrying a synced
// offset.
func (c walChunk) isSync() bool { return c.encoding >= firstSyncEncoding }

// position is the chunk's place in its record: 0 whole, 1 first, 2
// middle, 3 last.
func (c walChunk) position() int { return int(c.encoding-firstLegacyEncoding) % encodingsPerFormat }

// chunkHeaderBytes is the header length of encoding's format, 0 for an
// encoding that is none.
func chunkHeaderBytes(encoding byte) int {
	switch {
	case encoding < firstLegacyEncoding || encoding > lastSyncEncoding:
		return 0
	case encoding < firstRecyclableEncoding:
		return legacyChunkHeaderBytes
	case encoding < firstSyncEncoding:
		return recycleChunkHeaderBytes
	default:
		return syncChunkHeaderBytes
	}
}

// parseChunk reads the chunk at offset at of block as Pebble's reader
// takes one: whole (header and payload inside the block), of log logNum
// (a legacy chunk has no log number to compare), its checksum correct.
func parseChunk(block []byte, at int, logNum uint32) (walChunk, bool) {
	if at < 0 || at+legacyChunkHeaderBytes > len(block) {
		return walChunk{}, false
	}
	c := walChunk{at: at, encoding: block[at+6]}
	c.headerBytes = chunkHeaderBytes(c.encoding)
	if c.headerBytes == 0 || at+c.headerBytes > len(block) {
		return walChunk{}, false
	}
	if c.headerBytes > legacyChunkHeaderBytes {
		c.logNum = binary.LittleEndian.Uint32(block[at+7:])
		if c.logNum != logNum {
			return walChunk{}, false
		}
	}
	if c.headerBytes == syncChunkHeaderBytes {
		c.synced = binary.LittleEndian.Uint64(block[at+11:])
	}
	c.payloadBytes = int(binary.LittleEndian.Uint16(block[at+4:]))
	if c.end() > len(block) || binary.LittleEndian.Uint32(block[at:]) != chunkChecksum(block[at+6:c.end()]) {
		return walChunk{}, false
	}
	return c, true
}

// isPadding reports whether the rest of a block from at is what Pebble's
// writer leaves there when no chunk header fits: fewer bytes than a
// recyclable header, or zeros too few for a sync chunk's header. Pebble's
// reader steps over them to the next block.
func isPadding(block []byte, at int) bool {
	rest := block[at:]
	switch {
	case len(rest) < legacyChunkHeaderBytes:
		return true
	case len(rest) >= syncChunkHeaderBytes:
		return false
	case len(rest) < recycleChunkHeaderBytes:
		return allZero(rest[:legacyChunkHeaderBytes])
	default:
		return allZero(rest)
	}
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// walFile is a WAL being checked: its file, size and log number.
type walFile struct {
	f      io.ReaderAt
	path   string
	size   int64
	logNum uint32
	// block holds one block of the file, read by readBlock.
	block [walBlockBytes]byte
}

// readBlock reads block n of the file (shorter at the file's end) into
// w.block and returns it.
func (w *walFile) readBlock(n int64) ([]byte, error) {
	off := n * walBlockBytes
	if off >= w.size {
		return nil, nil
	}
	b := w.block[:min(walBlockBytes, w.size-off)]
	if _, err := w.f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("storage: pebblestore: reading WAL %s at offset %d: %w", w.path, off, err)
	}
	return b, nil
}

// lastRecordStart reads the log's records with Pebble's record package
// until it stops. It returns the offset of the record it stopped in, and
// whether that stop is one Pebble's replay of the log's last WAL accepts
// as a torn tail: an invalid or zeroed chunk with no proof of damage
// after it in the blocks Pebble looks at, or a file ending inside a
// record. A clean end (the writer's end-of-log chunk, or the file's end
// between records) is no stop to look into, nor is an error Pebble
// itself reports as corruption.
func (w *walFile) lastRecordStart() (start int64, torn bool, err error) {
	r := newRecordReader(record.NewReader, io.NewSectionReader(w.f, 0, w.size), w.logNum)
	for {
		start = r.Offset()
		var rec io.Reader
		rec, err = r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rec)
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, record.ErrInvalidChunk), errors.Is(err, record.ErrZeroedChunk):
			return start, false, nil
		case errors.Is(err, record.ErrUnexpectedEOF):
			return start, true, nil
		default:
			return 0, false, fmt.Errorf("storage: pebblestore: reading WAL %s: %w", w.path, err)
		}
	}
}

// firstInvalidChunk walks the log's chunks from offset start (0, or the
// start of the record Pebble's reader stopped in) as Pebble's reader
// does, and returns the offset of the first chunk it cannot read: where
// the log stops. The writer's end-of-log chunk, which holds the next
// log's number, is one: a clean end, after which no chunk of the log
// claims a sync. ok is false if the file ends first.
func (w *walFile) firstInvalidChunk(start int64) (stop int64, ok bool, err error) {
	n, at := start/walBlockBytes, int(start%walBlockBytes)
	for {
		block, err := w.readBlock(n)
		if err != nil || len(block) == 0 {
			return 0, false, err
		}
		for at < len(block) && !isPadding(block, at) {
			c, valid := parseChunk(block, at, w.logNum)
			if !valid {
				return n*walBlockBytes + int64(at), true, nil
			}
			at = c.end()
		}
		if len(block) < walBlockBytes {
			return 0, false, nil
		}
		n, at = n+1, 0
	}
}

// syncProof is a chunk proving damage: written after a sync through an
// offset beyond where the log stops.
type syncProof struct {
	at, synced int64
}

// findSyncProof looks at every offset after stop, to the file's end, for
// a sync chunk of the log whose synced offset is beyond stop. The stopped
// chunk's own header may be what was damaged, so the chunks after it
// cannot be found by their lengths: every offset is tried, the cheap
// rejections first (the encoding, the log number, the claimed offsets)
// and the checksum last, at a cost linear in the bytes scanned for the
// data a log holds (BenchmarkWALSyncProofScan). A chunk claims no sync
// past its own offset: one that does is not a chunk Pebble wrote.
func (w *walFile) findSyncProof(stop int64) (syncProof, bool, error) {
	for n := stop / walBlockBytes; n*walBlockBytes < w.size; n++ {
		block, err := w.readBlock(n)
		if err != nil {
			return syncProof{}, false, err
		}
		from := 0
		if n == stop/walBlockBytes {
			from = int(stop%walBlockBytes) + 1
		}
		if at, synced, ok := scanBlockForProof(block, from, n*walBlockBytes, stop, w.logNum); ok {
			return syncProof{at: n*walBlockBytes + int64(at), synced: synced}, true, nil
		}
	}
	return syncProof{}, false, nil
}

// scanBlockForProof tries every offset of block from from on (the block
// at offset base of its log) for a sync chunk of log logNum written after
// a sync beyond stop, and returns the first one's offset in the block and
// its synced offset.
func scanBlockForProof(block []byte, from int, base, stop int64, logNum uint32) (at int, synced int64, ok bool) {
	for at = from; at+syncChunkHeaderBytes <= len(block); at++ {
		if e := block[at+6]; e < firstSyncEncoding || e > lastSyncEncoding {
			continue
		}
		if binary.LittleEndian.Uint32(block[at+7:]) != logNum {
			continue
		}
		s := binary.LittleEndian.Uint64(block[at+11:])
		if s <= uint64(stop) || s > uint64(base+int64(at)) {
			continue
		}
		if _, valid := parseChunk(block, at, logNum); valid {
			return at, int64(s), true
		}
	}
	return 0, 0, false
}

// checkWAL checks the WAL f (at path, log number logNum) for synced
// writes lost where Pebble would see a torn tail, and returns an error
// wrapping storage.ErrCorrupt, naming the file and offsets, if it finds
// some. Our own walk finds where the log stops and the scan after it a
// proof; only then is the log read with Pebble's reader, which costs
// more (it tries every bit of a chunk failing its checksum flipped), to
// refuse only a stop Pebble's replay would take for a torn tail, judged
// where Pebble's reader stops.
func checkWAL(f vfs.File, path string, logNum uint32) error {
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("storage: pebblestore: checking WAL %s: %w", path, err)
	}
	w := &walFile{f: f, path: path, size: info.Size(), logNum: logNum}
	stop, ok, err := w.firstInvalidChunk(0)
	if err != nil || !ok {
		return err
	}
	if _, found, err := w.findSyncProof(stop); err != nil || !found {
		return err
	}
	start, torn, err := w.lastRecordStart()
	if err != nil || !torn {
		return err
	}
	if stop, ok, err = w.firstInvalidChunk(start); err != nil || !ok {
		return err
	}
	proof, found, err := w.findSyncProof(stop)
	if err != nil || !found {
		return err
	}
	return fmt.Errorf("%w: WAL %s: its records stop at an unreadable chunk at offset %d, yet the chunk at offset %d was written "+
		"after the log was synced through offset %d: synced writes were lost (damage, not a torn tail)",
		storage.ErrCorrupt, path, stop, proof.at, proof.synced)
}

// walReplayCheck is the state one Open shares with its file system: each
// WAL Pebble opens to replay is checked (checkWAL) before Pebble reads it,
// and the first damage found is kept for Open to return as it is.
type walReplayCheck struct {
	// opened is set once Pebble's Open has returned: any WAL read after
	// it (none is, by this store) is not a replay.
	opened atomic.Bool
	mu     sync.Mutex
	damage error
}

func (c *walReplayCheck) found() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.damage
}

// replayCheckedWALs is a file system whose WALs opened for reading are
// checked first (checkWAL): Pebble opens a WAL for reading only to replay
// it, so the logs checked are exactly the ones Pebble replays.
type replayCheckedWALs struct {
	vfs.FS
	check *walReplayCheck
}

// Open opens name; a WAL that fails its check is not opened, and Pebble's
// Open fails.
func (fs replayCheckedWALs) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil || fs.check.opened.Load() {
		return f, err
	}
	num, _, isLog := wal.ParseLogFilename(fs.PathBase(name))
	if !isLog {
		return f, nil
	}
	if err := checkWAL(f, name, uint32(num)); err != nil {
		_ = f.Close()
		if errors.Is(err, storage.ErrCorrupt) {
			fs.check.mu.Lock()
			if fs.check.damage == nil {
				fs.check.damage = err
			}
			fs.check.mu.Unlock()
		}
		return nil, err
	}
	return f, nil
}

// newRecordReader calls newReader (record.NewReader) with logNum as the
// log's number. Its parameter's type (a file number) is in an internal
// package of Pebble's, which this one cannot name, but can infer; the
// reader compares the number's low 32 bits, which the chunks hold.
func newRecordReader[N ~uint64](newReader func(io.Reader, N) *record.Reader, r io.Reader, logNum uint32) *record.Reader {
	return newReader(r, N(logNum))
}

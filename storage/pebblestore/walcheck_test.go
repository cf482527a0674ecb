package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"

	"paxcron/storage"
)

// liveWAL returns the path and log number of the highest-numbered WAL in
// dir: the one a store writes to, and the last Pebble replays.
func liveWAL(t testing.TB, fs vfs.FS, dir string) (string, uint32) {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var path string
	var num wal.NumWAL
	for _, name := range names {
		if n, _, ok := wal.ParseLogFilename(name); ok && (path == "" || n > num) {
			path, num = fs.PathJoin(dir, name), n
		}
	}
	if path == "" {
		t.Fatalf("no WAL among %v", names)
	}
	return path, uint32(num)
}

// loggedChunk is a chunk of a log, at offset at of the file.
type loggedChunk struct {
	walChunk
	at int64
}

// walkChunks reads b, a WAL of log logNum, chunk by chunk from its start
// as Pebble's reader does, and returns its chunks and the offset where
// they stop (len(b) if they end with the file).
func walkChunks(b []byte, logNum uint32) ([]loggedChunk, int64) {
	var chunks []loggedChunk
	for n := 0; n*walBlockBytes < len(b); n++ {
		block := b[n*walBlockBytes : min((n+1)*walBlockBytes, len(b))]
		for at := 0; at < len(block) && !isPadding(block, at); {
			c, ok := parseChunk(block, at, logNum)
			if !ok {
				return chunks, int64(n*walBlockBytes + at)
			}
			chunks = append(chunks, loggedChunk{c, int64(n*walBlockBytes) + int64(c.at)})
			at = c.end()
		}
	}
	return chunks, int64(len(b))
}

// records joins chunks into the records they make, refusing a chunk out
// of its place.
func records(b []byte, chunks []loggedChunk) ([][]byte, error) {
	var recs [][]byte
	var open []byte // the record whose first chunk has been read
	for _, c := range chunks {
		payload := b[c.at+int64(c.headerBytes) : c.at+int64(c.headerBytes+c.payloadBytes)]
		switch pos := c.position(); {
		case pos == 0 && open == nil:
			recs = append(recs, bytes.Clone(payload))
		case pos == 1 && open == nil:
			open = bytes.Clone(payload)
		case pos == 2 && open != nil:
			open = append(open, payload...)
		case pos == 3 && open != nil:
			recs = append(recs, append(open, payload...))
			open = nil
		default:
			return nil, fmt.Errorf("chunk at %d in position %d, a record open: %t", c.at, pos, open != nil)
		}
	}
	if open != nil {
		return nil, errors.New("the last record has no last chunk")
	}
	return recs, nil
}

// pebbleRecords reads b's records with Pebble's own reader, to its stop.
func pebbleRecords(b []byte, logNum uint32) ([][]byte, error) {
	r := newRecordReader(record.NewReader, bytes.NewReader(b), logNum)
	var recs [][]byte
	for {
		rec, err := r.Next()
		if err == nil {
			var got []byte
			got, err = io.ReadAll(rec)
			recs = append(recs, got)
		}
		switch {
		case errors.Is(err, record.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return recs, nil
		case err != nil:
			return nil, err
		}
	}
}

// saveMixed saves n updates of one to 240 entries of 256 bytes: writes
// of one chunk, and of several across blocks.
func saveMixed(t testing.TB, s *Store, n int) {
	t.Helper()
	slot := uint64(1)
	for i := range n {
		count := uint64(1 + (i*37)%5)
		if i%9 == 4 {
			count = 240 // about 72 KiB: a first, a middle and a last chunk
		}
		saveEntries(t, s, slot, slot+count-1)
		slot += count
	}
}

// TestWALChunksArePebbles pins what walcheck.go assumes of Pebble's WAL
// format to a WAL Pebble wrote: read chunk by chunk with our parser,
// every chunk of it is a sync chunk of the file's log, claiming no sync
// past itself nor fewer bytes than the chunk before; they join into
// exactly the records Pebble's reader returns; and they stop where
// Pebble's do. A Pebble that changes the format fails here, not on a
// customer's disk.
func TestWALChunksArePebbles(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs)
	defer s.Close()
	saveMixed(t, s, 120)
	path, logNum := liveWAL(t, fs, "store")
	b := readAll(t, fs, path)

	chunks, stop := walkChunks(b, logNum)
	if len(chunks) < 50 || stop < 3*walBlockBytes {
		t.Fatalf("%d chunks stopping at %d; want a log of several blocks", len(chunks), stop)
	}
	var positions [encodingsPerFormat]int
	var synced uint64
	for _, c := range chunks {
		positions[c.position()]++
		if !c.isSync() || c.logNum != logNum {
			t.Fatalf("chunk at %d: encoding %d, log %d; want a sync chunk of log %d", c.at, c.encoding, c.logNum, logNum)
		}
		if c.synced < synced || c.synced > uint64(c.at) {
			t.Fatalf("chunk at %d claims a sync through %d, after one through %d", c.at, c.synced, synced)
		}
		synced = c.synced
	}
	if positions[1] == 0 || positions[2] == 0 || positions[3] == 0 {
		t.Fatalf("chunks by position (whole, first, middle, last): %v; want some of each", positions)
	}
	if !allZero(b[stop:]) {
		t.Fatalf("the chunks stop at %d of %d, before bytes other than zeros", stop, len(b))
	}
	ours, err := records(b, chunks)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := pebbleRecords(b, logNum)
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) != len(theirs) {
		t.Fatalf("%d records from our chunks, %d from Pebble's reader", len(ours), len(theirs))
	}
	for i := range ours {
		if !bytes.Equal(ours[i], theirs[i]) {
			t.Fatalf("record %d differs between our chunks and Pebble's reader", i)
		}
	}
	w := &walFile{f: bytes.NewReader(b), path: path, size: int64(len(b)), logNum: logNum}
	start, torn, err := w.lastRecordStart()
	if err != nil || !torn || start != stop {
		t.Fatalf("Pebble's reader stops at the record at %d (torn %t, %v); our chunks stop at %d", start, torn, err, stop)
	}
	if at, ok, err := w.firstInvalidChunk(start); err != nil || !ok || at != stop {
		t.Fatalf("firstInvalidChunk(%d) = %d, %t, %v; want %d", start, at, ok, err, stop)
	}
	// Pebble's writer counts in its synced offset only the bytes of each
	// block written before the block filled: the offsets claimed fall
	// behind the log's length. Logged, to keep an eye on it.
	last := chunks[len(chunks)-1]
	t.Logf("%d chunks, %d records, %d bytes; the last chunk (at %d) claims a sync through %d", len(chunks), len(ours), stop, last.at, last.synced)
}

// damageTarget returns a chunk in the log's last block followed in that
// block by a chunk claiming a sync beyond its start (the middle one of
// those): damage to it is provable, and Pebble does not look there.
func damageTarget(t *testing.T, chunks []loggedChunk) loggedChunk {
	t.Helper()
	provable := provableInLastBlock(chunks)
	if len(provable) == 0 {
		t.Fatalf("no chunk in the log's last block is followed there by a chunk claiming its sync")
	}
	return provable[len(provable)/2]
}

// provableInLastBlock returns the chunks of the log's last block followed
// in that block by a chunk claiming a sync beyond their start.
func provableInLastBlock(chunks []loggedChunk) []loggedChunk {
	if len(chunks) == 0 {
		return nil
	}
	lastBlock := chunks[len(chunks)-1].at / walBlockBytes
	var provable []loggedChunk
	for i, c := range chunks {
		if c.at/walBlockBytes != lastBlock {
			continue
		}
		for _, later := range chunks[i+1:] {
			if later.synced > uint64(c.at) {
				provable = append(provable, c)
				break
			}
		}
	}
	return provable
}

// TestWALDamageInLastBlockIsCorruption: a WAL damaged inside its last
// 32 KiB block, in a write synced and acknowledged, with synced writes
// after it in that block, is a damaged disk. Pebble looks for chunks
// proving so only from the next block on, so the store opened without
// every write after the damage, and no error. Three kinds of damage: a
// byte of a chunk's payload; its length, so that its end cannot be found
// from it; and the whole chunk zeroed, as a lost sector reads.
func TestWALDamageInLastBlockIsCorruption(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(b []byte, c loggedChunk)
	}{
		{"payload byte", func(b []byte, c loggedChunk) { b[c.at+int64(c.headerBytes+c.payloadBytes/2)] ^= 0x40 }},
		{"length", func(b []byte, c loggedChunk) { b[c.at+5] ^= 0x7f }},
		{"zeroed chunk", func(b []byte, c loggedChunk) { clear(b[c.at : c.at+int64(c.headerBytes+c.payloadBytes)]) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			const writes = 400 // about 120 KiB of log: four blocks
			closedMemWithSlots(t, fs, writes)
			path, logNum := liveWAL(t, fs, "store")
			b := readAll(t, fs, path)
			chunks, _ := walkChunks(b, logNum)
			target := damageTarget(t, chunks)
			c.damage(b, target)
			rewrite(t, fs, path, b)

			for range 2 { // refused again: the refusal changed nothing on disk
				s, err := Open("store", Options{FS: fs, Logger: fatalIsFailure{t}})
				if err == nil {
					last, _ := s.LastSlot()
					s.Close()
					t.Fatalf("a store whose WAL was damaged at %d, before synced writes, opened with its last slot %d of %d, no error",
						target.at, last, writes)
				}
				want := fmt.Sprintf("%s: its records stop at an unreadable chunk at offset %d", path, target.at)
				if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), want) {
					t.Fatalf("opening a store whose WAL is damaged: %v; want ErrCorrupt saying %q", err, want)
				}
			}
		})
	}
}

// TestWALDamageInLastSyncedWriteReadsAsTornTail pins what the check
// cannot see: damage in the last synced write, with nothing written
// after it, looks exactly like a write torn by a crash, and the store
// opens without it. (Nor can it see damage to synced bytes that the
// offsets claimed by later chunks fall behind of: TestWALChunksArePebbles.)
func TestWALDamageInLastSyncedWriteReadsAsTornTail(t *testing.T) {
	fs := vfs.NewMem()
	const writes = 40
	closedMemWithSlots(t, fs, writes)
	path, logNum := liveWAL(t, fs, "store")
	b := readAll(t, fs, path)
	chunks, _ := walkChunks(b, logNum)
	last := chunks[len(chunks)-1]
	b[last.at+int64(last.headerBytes+1)] ^= 0x01
	rewrite(t, fs, path, b)

	s, err := Open("store", Options{FS: fs, Logger: fatalIsFailure{t}})
	if err != nil {
		t.Fatalf("Open: %v; want the damage read as a torn tail", err)
	}
	defer s.Close()
	if got, err := s.LastSlot(); err != nil || got != writes-1 {
		t.Fatalf("LastSlot = %d, %v; want %d, the last write lost", got, err, writes-1)
	}
}

// staleBlock returns a full block from the middle of a WAL a store wrote:
// what a recycled log holds past its own writes, chunks of another log
// (logNum is that log's number).
func staleBlock(tb testing.TB) ([]byte, uint32) {
	tb.Helper()
	fs := vfs.NewMem()
	s, err := Open("store", Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	for slot := uint64(1); slot <= 300; slot++ {
		saveEntries(tb, s, slot, slot)
	}
	path, logNum := liveWAL(tb, fs, "store")
	b := readAll(tb, fs, path)
	return b[walBlockBytes : 2*walBlockBytes], logNum
}

// BenchmarkWALSyncProofScan measures the scan for a chunk proving damage
// over the worst block a real log holds after its stop: 32 KiB of a
// recycled log's stale chunks, each a sync chunk (the cheapest rejection
// passes) of another log. Also over a block crafted so that every 19
// bytes a header passes every check but the checksum, over as long a
// payload as the block allows: the bound for data made to look like
// chunks.
func BenchmarkWALSyncProofScan(b *testing.B) {
	stale, staleLog := staleBlock(b)
	crafted := make([]byte, walBlockBytes)
	const craftedLog = 7
	for at := 0; at+syncChunkHeaderBytes <= len(crafted); at += syncChunkHeaderBytes {
		binary.LittleEndian.PutUint16(crafted[at+4:], uint16(len(crafted)-at-syncChunkHeaderBytes))
		crafted[at+6] = firstSyncEncoding
		binary.LittleEndian.PutUint32(crafted[at+7:], craftedLog)
		binary.LittleEndian.PutUint64(crafted[at+11:], 1) // beyond the stop at 0, not past itself
	}
	for _, c := range []struct {
		name   string
		block  []byte
		logNum uint32
	}{
		{"stale recycled block", stale, staleLog + 1},
		{"crafted headers", crafted, craftedLog},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(walBlockBytes)
			for b.Loop() {
				if _, _, ok := scanBlockForProof(c.block, 1, 0, 0, c.logNum); ok {
					b.Fatal("found a proof in a block holding none")
				}
			}
		})
	}
}

// FuzzScanBlockForProof: any block, read as a WAL's, neither panics the
// parser nor the scan, and a proof the scan returns is a whole chunk of
// the log, after the stop, claiming a sync beyond the stop and not past
// itself.
func FuzzScanBlockForProof(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0}, 64), uint32(5), uint16(0))
	chunk := make([]byte, syncChunkHeaderBytes+4)
	chunk[6] = firstSyncEncoding
	binary.LittleEndian.PutUint32(chunk[7:], 5)
	binary.LittleEndian.PutUint64(chunk[11:], 3)
	binary.LittleEndian.PutUint16(chunk[4:], 4)
	copy(chunk[syncChunkHeaderBytes:], "save")
	binary.LittleEndian.PutUint32(chunk, chunkChecksum(chunk[6:]))
	f.Add(append(bytes.Repeat([]byte{1}, 8), chunk...), uint32(5), uint16(2))
	f.Fuzz(func(t *testing.T, block []byte, logNum uint32, stop uint16) {
		if len(block) > walBlockBytes {
			block = block[:walBlockBytes]
		}
		for at := range block {
			if c, ok := parseChunk(block, at, logNum); ok && (c.end() > len(block) || (c.headerBytes > legacyChunkHeaderBytes && c.logNum != logNum)) {
				t.Fatalf("chunk at %d: %+v, in a block of %d", at, c, len(block))
			}
		}
		at, synced, ok := scanBlockForProof(block, int(stop)+1, 0, int64(stop), logNum)
		if !ok {
			return
		}
		c, valid := parseChunk(block, at, logNum)
		if !valid || !c.isSync() || at <= int(stop) || synced <= int64(stop) || synced > int64(at) || uint64(synced) != c.synced {
			t.Fatalf("proof at %d (synced %d) after a stop at %d: chunk %+v, valid %t", at, synced, stop, c, valid)
		}
	})
}

// BenchmarkCheckWAL measures the whole check of a store's WAL at Open
// after a crash, at Pebble's default memtable (a WAL written through for
// 4 MiB): 300 saves and one of 60 KiB, then the log's end torn. "zeros
// after" stops at the zeros where the last chunk was never written;
// "torn N KiB chunk" ends in that chunk failing its checksum (where
// Pebble's reader, which the check leaves to a log holding a proof,
// would try every bit of it flipped).
func BenchmarkCheckWAL(b *testing.B) {
	fs := vfs.NewMem()
	s, err := Open("store", Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	for slot := uint64(1); slot <= 300; slot++ {
		saveEntries(b, s, slot, slot)
	}
	saveEntries(b, s, 301, 500) // about 60 KiB: its last chunk fills a block
	path, logNum := liveWAL(b, fs, "store")
	whole := readAll(b, fs, path)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	chunks, stop := walkChunks(whole, logNum)
	last := chunks[len(chunks)-1]
	if last.position() != 3 || last.payloadBytes < 16<<10 {
		b.Fatalf("the last chunk: position %d, %d bytes; want the last of a record, and long", last.position(), last.payloadBytes)
	}
	zerosAfter := bytes.Clone(whole)
	clear(zerosAfter[last.at:stop]) // the write's last chunk never written
	tornChunk := bytes.Clone(whole)
	tornChunk[last.at+int64(last.headerBytes+last.payloadBytes/2)] ^= 1
	for _, c := range []struct {
		name string
		wal  []byte
	}{{"zeros after", zerosAfter}, {fmt.Sprintf("torn %d KiB chunk", last.payloadBytes>>10), tornChunk}} {
		b.Run(c.name, func(b *testing.B) {
			mem := vfs.NewMem()
			f, err := mem.Create("000009.log", vfs.WriteCategoryUnspecified)
			if err == nil {
				_, err = f.Write(c.wal)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(c.wal)))
			for b.Loop() {
				if err := checkWAL(f, path, logNum); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestObsoleteWALIsNotJudged: a WAL older than the MANIFEST's oldest
// unflushed log (its memtable flushed, the file kept for recycling) is
// not replayed, so damage in it, however provable, loses nothing and
// must not refuse the store. Only the logs Pebble opens to replay are
// checked; a check of every WAL in the folder refuses this one.
func TestObsoleteWALIsNotJudged(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open("store", Options{FS: mem, MemTableBytes: 64 << 10, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Which logs Pebble keeps for recycling, and where their chunks end,
	// varies from run to run (a CI run once found none that would do):
	// rounds of 600 writes (about 180 KiB, memtables of 64 KiB flushed,
	// their logs recycled) until an obsolete log has a chunk to prove.
	const rounds, perRound = 8, 600
	var (
		writes  uint64
		damaged string
		names   []string
		live    string
		img     *vfs.MemFS
	)
	for round := 0; round < rounds && damaged == ""; round++ {
		for range perRound {
			writes++
			saveEntries(t, s, writes, writes)
		}
		if err := s.db.Flush(); err != nil { // every log but a new one obsolete
			t.Fatal(err)
		}
		live, _ = liveWAL(t, mem, "store")
		img = mem.CrashClone(vfs.CrashCloneCfg{})
		names, err = img.List("store")
		if err != nil {
			t.Fatal(err)
		}
		damaged = damageAnObsoleteWAL(t, img, names, live)
	}
	if damaged == "" {
		t.Fatalf("no obsolete WAL with a provable chunk in its last block among %v (live: %s) after %d rounds", names, live, rounds)
	}

	again, err := Open("store", Options{FS: img, MemTableBytes: 64 << 10, Logger: quietLogger{}})
	if err != nil {
		t.Fatalf("a store whose obsolete WAL %s is damaged refused: %v", damaged, err)
	}
	defer again.Close()
	if last, err := again.LastSlot(); err != nil || last != writes {
		t.Fatalf("LastSlot = %d, %v; want %d", last, err, writes)
	}
}

// damageAnObsoleteWAL flips a byte before a provable chunk in the last
// block of a log other than live, and returns its path ("": none has one).
func damageAnObsoleteWAL(t *testing.T, img *vfs.MemFS, names []string, live string) string {
	t.Helper()
	for _, name := range names {
		num, _, ok := wal.ParseLogFilename(name)
		path := img.PathJoin("store", name)
		if !ok || path == live {
			continue
		}
		b := readAll(t, img, path)
		chunks, _ := walkChunks(b, uint32(num))
		if provable := provableInLastBlock(chunks); len(provable) > 0 {
			c := provable[0]
			b[c.at+int64(c.headerBytes)] ^= 0x10
			rewrite(t, img, path, b)
			return path
		}
	}
	return ""
}

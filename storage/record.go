package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"paxcron/paxos"
)

// Record layout, the same for every kind of record and for both stores:
//
//	byte 0         format version (recordVersion)
//	byte 1         record kind (kindHardState, kindEntry, kindSnapshot,
//	               kindSnapshotHeader, kindSnapshotFileHeader or
//	               kindSnapshotChunk)
//	bytes 2..n-4   the value, msgpack-encoded as an array of its fields
//	               (wireHardState, wireEntry, wireSnapshot,
//	               wireSnapshotHeader, wireSnapshotFileHeader,
//	               wireSnapshotChunk)
//	last 4 bytes   CRC-32C (Castagnoli) of bytes [0, n-4), little-endian
//
// The checksum covers the version and kind so that a flipped header byte is
// caught like any other. CRC-32C detects every error burst of up to 32 bits,
// so any single flipped byte is always detected. The kind byte and the
// slot or index repeated inside the value let a reader notice a record
// stored under the wrong key.
const (
	recordVersion byte = 1

	kindHardState byte = 1
	kindEntry     byte = 2
	kindSnapshot  byte = 3
	// A store may keep a large snapshot as a header and its image in
	// chunks, each its own record, so that no step of writing or reading
	// it copies or checksums the whole image at once: such a step cannot
	// be preempted, and while it runs the Go runtime cannot stop the
	// world for a collection (a 174 MiB image held a collection of the
	// scale benchmark's process for 885 ms; see pebblestore).
	kindSnapshotHeader byte = 4
	kindSnapshotChunk  byte = 5
	// A header whose chunks are in a file of the store's own rather than
	// beside it (SnapshotHeader.File): the image is written there ahead
	// of the header, off the path of the log's appends (pebblestore).
	kindSnapshotFileHeader byte = 6

	headerBytes   = 2
	checksumBytes = 4
	// RecordOverheadBytes is what framing adds to a value's msgpack bytes.
	RecordOverheadBytes = headerBytes + checksumBytes
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// msgpackHandle is shared: a configured handle is safe for concurrent use.
var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	// Arrays instead of maps: field names would double the size of small
	// records, and the version byte already fixes the field order.
	h.StructToArray = true
	return h
}()

type wireHardState struct {
	PromisedRound   uint64
	PromisedReplica uint64
	Chosen          uint64
	Rebuilding      bool
}

type wireEntry struct {
	Slot          uint64
	BallotRound   uint64
	BallotReplica uint64
	Kind          uint8
	Data          []byte
}

type wireSnapshot struct {
	Index  uint64
	Voters []uint64
	Data   []byte
}

// wireSnapshotHeader describes a snapshot kept in chunks: its image is
// Size bytes in Chunks chunk records, numbered from 0.
type wireSnapshotHeader struct {
	Index  uint64
	Voters []uint64
	Size   uint64
	Chunks uint64
}

// wireSnapshotFileHeader is wireSnapshotHeader for chunks kept in the
// store's image file number File.
type wireSnapshotFileHeader struct {
	Index  uint64
	Voters []uint64
	Size   uint64
	Chunks uint64
	File   uint64
}

type wireSnapshotChunk struct {
	Index  uint64
	Number uint64
	Data   []byte
}

// SnapshotHeader is a decoded snapshot header: the snapshot's metadata and
// where its image is.
type SnapshotHeader struct {
	Meta   paxos.SnapshotMeta
	Size   uint64 // bytes of the image
	Chunks uint64 // chunk records holding it, numbered 0..Chunks-1
	// File, when not 0, numbers the file of the store's own that holds
	// the chunks; 0 says they are kept beside the header.
	File uint64
}

// MaxSnapshotChunkBytes bounds a chunk's data on read; writers use smaller
// chunks (pebblestore: 1 MiB).
const MaxSnapshotChunkBytes = 16 << 20

// Codec encodes and decodes records. It keeps its msgpack encoder, decoder
// and scratch buffer between calls so that the hot path does not allocate
// them per record. A Codec is not safe for concurrent use.
type Codec struct {
	enc     *codec.Encoder
	dec     *codec.Decoder
	payload []byte
	chunk   []byte // scratch for a decoded chunk's data
}

// maxKeptScratchBytes bounds the scratch buffer a Codec keeps after
// encoding a large record (a snapshot), so one snapshot does not pin its
// size in memory for the life of the store.
const maxKeptScratchBytes = 1 << 20

// NewCodec returns a ready Codec.
func NewCodec() *Codec {
	return &Codec{
		enc: codec.NewEncoderBytes(new([]byte), msgpackHandle),
		dec: codec.NewDecoderBytes([]byte{}, msgpackHandle),
	}
}

// AppendHardState appends the record of hs to dst.
func (c *Codec) AppendHardState(dst []byte, hs paxos.HardState) []byte {
	w := wireHardState{
		PromisedRound:   hs.Promised.Round,
		PromisedReplica: uint64(hs.Promised.Replica),
		Chosen:          hs.Chosen,
		Rebuilding:      hs.Rebuilding,
	}
	return c.appendRecord(dst, kindHardState, &w)
}

// AppendEntry appends the record of e to dst.
func (c *Codec) AppendEntry(dst []byte, e paxos.Entry) []byte {
	w := wireEntry{
		Slot:          e.Slot,
		BallotRound:   e.Ballot.Round,
		BallotReplica: uint64(e.Ballot.Replica),
		Kind:          uint8(e.Kind),
		Data:          e.Data,
	}
	return c.appendRecord(dst, kindEntry, &w)
}

// AppendSnapshot appends the record of s to dst.
func (c *Codec) AppendSnapshot(dst []byte, s paxos.Snapshot) []byte {
	w := wireSnapshot{Index: s.Meta.Index, Data: s.Data, Voters: votersOut(s.Meta.Membership.Voters)}
	return c.appendRecord(dst, kindSnapshot, &w)
}

// AppendSnapshotHeader appends the header record of a snapshot with meta
// whose image of size bytes is kept in chunks chunk records, in file
// h.File if it is not 0.
func (c *Codec) AppendSnapshotHeader(dst []byte, h SnapshotHeader) []byte {
	voters := votersOut(h.Meta.Membership.Voters)
	if h.File != 0 {
		w := wireSnapshotFileHeader{Index: h.Meta.Index, Size: h.Size, Chunks: h.Chunks, Voters: voters, File: h.File}
		return c.appendRecord(dst, kindSnapshotFileHeader, &w)
	}
	w := wireSnapshotHeader{Index: h.Meta.Index, Size: h.Size, Chunks: h.Chunks, Voters: voters}
	return c.appendRecord(dst, kindSnapshotHeader, &w)
}

// AppendSnapshotChunk appends the record of chunk number of the image of
// the snapshot at index.
func (c *Codec) AppendSnapshotChunk(dst []byte, index, number uint64, data []byte) []byte {
	return c.appendRecord(dst, kindSnapshotChunk, &wireSnapshotChunk{Index: index, Number: number, Data: data})
}

// IsSnapshotHeader tells a snapshot header record from a whole snapshot
// record (kindSnapshot), both kept under a snapshot's key. It looks at the
// kind byte only; decoding verifies the rest.
func IsSnapshotHeader(rec []byte) bool {
	return len(rec) >= RecordOverheadBytes && (rec[1] == kindSnapshotHeader || rec[1] == kindSnapshotFileHeader)
}

// DecodeSnapshotHeader decodes and verifies the snapshot header record
// stored for index, of either kind.
func (c *Codec) DecodeSnapshotHeader(index uint64, rec []byte) (SnapshotHeader, error) {
	var w wireSnapshotFileHeader
	var err error
	if len(rec) >= RecordOverheadBytes && rec[1] == kindSnapshotFileHeader {
		err = c.decode(rec, kindSnapshotFileHeader, index, &w)
		if err == nil && w.File == 0 {
			return SnapshotHeader{}, corrupt(kindSnapshotFileHeader, index, "names image file 0")
		}
	} else {
		var inline wireSnapshotHeader
		err = c.decode(rec, kindSnapshotHeader, index, &inline)
		w = wireSnapshotFileHeader{Index: inline.Index, Voters: inline.Voters, Size: inline.Size, Chunks: inline.Chunks}
	}
	if err != nil {
		return SnapshotHeader{}, err
	}
	switch {
	case w.Index != index:
		return SnapshotHeader{}, corrupt(kindSnapshotHeader, index, "holds index %d", w.Index)
	case w.Chunks > w.Size:
		return SnapshotHeader{}, corrupt(kindSnapshotHeader, index, "%d chunks for %d bytes", w.Chunks, w.Size)
	case w.Chunks > math.MaxUint64/MaxSnapshotChunkBytes || w.Size > w.Chunks*MaxSnapshotChunkBytes:
		return SnapshotHeader{}, corrupt(kindSnapshotHeader, index, "%d bytes in %d chunks of at most %d", w.Size, w.Chunks, MaxSnapshotChunkBytes)
	}
	return SnapshotHeader{Meta: paxos.SnapshotMeta{Index: w.Index, Membership: paxos.Membership{Voters: votersIn(w.Voters)}}, Size: w.Size, Chunks: w.Chunks, File: w.File}, nil
}

// AppendSnapshotChunkData decodes and verifies the record of chunk number
// of the image of the snapshot at index and appends its data to dst. A
// chunk is never empty, nor larger than MaxSnapshotChunkBytes.
func (c *Codec) AppendSnapshotChunkData(dst []byte, index, number uint64, rec []byte) ([]byte, error) {
	w := wireSnapshotChunk{Data: c.chunk[:0]}
	err := c.decode(rec, kindSnapshotChunk, index, &w)
	if cap(w.Data) <= MaxSnapshotChunkBytes {
		c.chunk = w.Data[:0]
	}
	switch {
	case err != nil:
		return dst, err
	case w.Index != index:
		return dst, corrupt(kindSnapshotChunk, index, "chunk %d holds index %d", number, w.Index)
	case w.Number != number:
		return dst, corrupt(kindSnapshotChunk, index, "chunk %d holds chunk %d", number, w.Number)
	case len(w.Data) == 0 || len(w.Data) > MaxSnapshotChunkBytes:
		return dst, corrupt(kindSnapshotChunk, index, "chunk %d holds %d bytes; want 1-%d", number, len(w.Data), MaxSnapshotChunkBytes)
	}
	return append(dst, w.Data...), nil
}

func votersOut(voters []paxos.ReplicaID) []uint64 {
	if len(voters) == 0 {
		return nil
	}
	out := make([]uint64, len(voters))
	for i, v := range voters {
		out[i] = uint64(v)
	}
	return out
}

func votersIn(voters []uint64) []paxos.ReplicaID {
	if len(voters) == 0 {
		return nil
	}
	out := make([]paxos.ReplicaID, len(voters))
	for i, v := range voters {
		out[i] = paxos.ReplicaID(v)
	}
	return out
}

func (c *Codec) appendRecord(dst []byte, kind byte, v any) []byte {
	c.payload = c.payload[:0]
	c.enc.ResetBytes(&c.payload)
	if err := c.enc.Encode(v); err != nil {
		// The wire types hold only integers and byte slices: failing to
		// encode them is a bug, not an operating condition.
		panic(fmt.Sprintf("storage: encoding %T: %v", v, err))
	}
	start := len(dst)
	dst = append(dst, recordVersion, kind)
	dst = append(dst, c.payload...)
	if cap(c.payload) > maxKeptScratchBytes {
		c.payload = nil
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodeHardState decodes and verifies a hard state record.
func (c *Codec) DecodeHardState(rec []byte) (paxos.HardState, error) {
	var w wireHardState
	if err := c.decode(rec, kindHardState, 0, &w); err != nil {
		return paxos.HardState{}, err
	}
	return paxos.HardState{
		Promised:   paxos.Ballot{Round: w.PromisedRound, Replica: paxos.ReplicaID(w.PromisedReplica)},
		Chosen:     w.Chosen,
		Rebuilding: w.Rebuilding,
	}, nil
}

// DecodeEntry decodes and verifies the record stored for slot. The entry
// it returns shares no memory with rec.
func (c *Codec) DecodeEntry(slot uint64, rec []byte) (paxos.Entry, error) {
	var w wireEntry
	if err := c.decode(rec, kindEntry, slot, &w); err != nil {
		return paxos.Entry{}, err
	}
	e := paxos.Entry{
		Slot:   w.Slot,
		Ballot: paxos.Ballot{Round: w.BallotRound, Replica: paxos.ReplicaID(w.BallotReplica)},
		Kind:   paxos.EntryKind(w.Kind),
		Data:   nilIfEmpty(w.Data),
	}
	switch {
	case e.Slot != slot:
		return paxos.Entry{}, corrupt(kindEntry, slot, "holds slot %d", e.Slot)
	case e.Kind != paxos.EntryNoop && e.Kind != paxos.EntryCommand:
		return paxos.Entry{}, corrupt(kindEntry, slot, "unknown entry kind %d", w.Kind)
	}
	return e, nil
}

// DecodeSnapshot decodes and verifies the snapshot record stored for index.
// The snapshot it returns shares no memory with rec.
func (c *Codec) DecodeSnapshot(index uint64, rec []byte) (paxos.Snapshot, error) {
	// The image cannot be longer than its record. Given room for it,
	// msgpack decodes it with one copy; given none, it grows the slice
	// 256 KiB at a time, copying everything so far at each step: quadratic,
	// about 65 GB of copying (50 s at start-up) for the 180 MB snapshot of
	// a million jobs (internal/scalebench).
	w := wireSnapshot{Data: make([]byte, 0, len(rec))}
	if err := c.decode(rec, kindSnapshot, index, &w); err != nil {
		return paxos.Snapshot{}, err
	}
	if w.Index != index {
		return paxos.Snapshot{}, corrupt(kindSnapshot, index, "holds index %d", w.Index)
	}
	return paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: w.Index, Membership: paxos.Membership{Voters: votersIn(w.Voters)}}, Data: nilIfEmpty(w.Data)}, nil
}

// decode checks the frame of rec (checksum, version, kind) and decodes its
// value into v. id is the slot or index the record was stored under.
func (c *Codec) decode(rec []byte, kind byte, id uint64, v any) error {
	if len(rec) < RecordOverheadBytes {
		return corrupt(kind, id, "%d bytes is shorter than the %d-byte frame", len(rec), RecordOverheadBytes)
	}
	body := rec[:len(rec)-checksumBytes]
	stored := binary.LittleEndian.Uint32(rec[len(body):])
	if computed := crc32.Checksum(body, castagnoli); computed != stored {
		return corrupt(kind, id, "checksum mismatch (stored %#08x, computed %#08x)", stored, computed)
	}
	switch {
	case body[0] != recordVersion:
		return corrupt(kind, id, "unknown format version %d", body[0])
	case body[1] != kind:
		return corrupt(kind, id, "holds a record of kind %d", body[1])
	}
	payload := body[headerBytes:]
	c.dec.ResetBytes(payload)
	if err := c.dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: msgpack: %w", ErrCorrupt, recordName(kind, id), err)
	}
	if n := c.dec.NumBytesRead(); n != len(payload) {
		return corrupt(kind, id, "%d trailing bytes after the value", len(payload)-n)
	}
	return nil
}

func corrupt(kind byte, id uint64, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, recordName(kind, id), fmt.Sprintf(format, args...))
}

func recordName(kind byte, id uint64) string {
	switch kind {
	case kindHardState:
		return "hard state"
	case kindEntry:
		return fmt.Sprintf("entry at slot %d", id)
	case kindSnapshot:
		return fmt.Sprintf("snapshot at index %d", id)
	case kindSnapshotHeader, kindSnapshotFileHeader:
		return fmt.Sprintf("snapshot header at index %d", id)
	case kindSnapshotChunk:
		return fmt.Sprintf("snapshot chunk at index %d", id)
	}
	return fmt.Sprintf("record of kind %d", kind)
}

// nilIfEmpty makes decoded byte slices canonical: msgpack distinguishes
// nil from empty, the paxos types do not.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

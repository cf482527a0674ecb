package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"paxcron/paxos"
)

// Record layout, the same for every kind of record and for both stores:
//
//	byte 0         format version (recordVersion)
//	byte 1         record kind (kindHardState, kindEntry or kindSnapshot)
//	bytes 2..n-4   the value, msgpack-encoded as an array of its fields
//	               (wireHardState, wireEntry, wireSnapshot)
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

// Codec encodes and decodes records. It keeps its msgpack encoder, decoder
// and scratch buffer between calls so that the hot path does not allocate
// them per record. A Codec is not safe for concurrent use.
type Codec struct {
	enc     *codec.Encoder
	dec     *codec.Decoder
	payload []byte
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
	w := wireSnapshot{Index: s.Meta.Index, Data: s.Data}
	if len(s.Meta.Membership.Voters) > 0 {
		w.Voters = make([]uint64, len(s.Meta.Membership.Voters))
		for i, v := range s.Meta.Membership.Voters {
			w.Voters[i] = uint64(v)
		}
	}
	return c.appendRecord(dst, kindSnapshot, &w)
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
	s := paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: w.Index}, Data: nilIfEmpty(w.Data)}
	if len(w.Voters) > 0 {
		s.Meta.Membership.Voters = make([]paxos.ReplicaID, len(w.Voters))
		for i, v := range w.Voters {
			s.Meta.Membership.Voters[i] = paxos.ReplicaID(v)
		}
	}
	return s, nil
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

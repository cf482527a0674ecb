package storage_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"paxcron/paxos"
	"paxcron/storage"
)

var (
	hardStates = []paxos.HardState{
		{},
		{Promised: paxos.Ballot{Round: 3, Replica: 2}, Chosen: 17},
		{Promised: paxos.Ballot{Round: ^uint64(0), Replica: paxos.ReplicaID(^uint64(0))}, Chosen: ^uint64(0)},
	}
	entries = []paxos.Entry{
		{Slot: 1, Ballot: paxos.Ballot{Round: 1, Replica: 1}, Kind: paxos.EntryNoop},
		{Slot: 42, Ballot: paxos.Ballot{Round: 7, Replica: 3}, Kind: paxos.EntryCommand, Data: []byte("launch nightly-report/1700000000")},
		{Slot: ^uint64(0), Kind: paxos.EntryCommand, Data: bytes.Repeat([]byte{0xc1}, 70000)},
	}
	snapshots = []paxos.Snapshot{
		{},
		{Meta: paxos.SnapshotMeta{Index: 9, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}}, Data: []byte("image")},
		{Meta: paxos.SnapshotMeta{Index: 1 << 40}, Data: bytes.Repeat([]byte{0}, 1<<17)},
	}
)

// record is one encoded record and a decoder for it.
type record struct {
	name   string
	kind   byte   // 0 hard state, 1 entry, 2 snapshot, 3 snapshot header, 4 chunk (as FuzzDecodeRecord counts)
	id     uint64 // slot or index
	rec    []byte
	decode func(c *storage.Codec, rec []byte) (any, error)
	want   any
}

func allRecords() []record {
	c := storage.NewCodec()
	var out []record
	for _, hs := range hardStates {
		out = append(out, record{"hard state", 0, 0, c.AppendHardState(nil, hs),
			func(c *storage.Codec, rec []byte) (any, error) { return c.DecodeHardState(rec) }, hs})
	}
	for _, e := range entries {
		out = append(out, record{"entry", 1, e.Slot, c.AppendEntry(nil, e),
			func(c *storage.Codec, rec []byte) (any, error) { return c.DecodeEntry(e.Slot, rec) }, e})
	}
	for _, s := range snapshots {
		out = append(out, record{"snapshot", 2, s.Meta.Index, c.AppendSnapshot(nil, s),
			func(c *storage.Codec, rec []byte) (any, error) { return c.DecodeSnapshot(s.Meta.Index, rec) }, s})
	}
	for _, h := range snapshotHeaders {
		out = append(out, record{"snapshot header", 3, h.Meta.Index, c.AppendSnapshotHeader(nil, h),
			func(c *storage.Codec, rec []byte) (any, error) { return c.DecodeSnapshotHeader(h.Meta.Index, rec) }, h})
	}
	for _, ch := range snapshotChunks {
		out = append(out, record{"snapshot chunk", 4, ch.index, c.AppendSnapshotChunk(nil, ch.index, chunkNumber(ch.index), ch.data),
			func(c *storage.Codec, rec []byte) (any, error) {
				return c.AppendSnapshotChunkData(nil, ch.index, chunkNumber(ch.index), rec)
			}, ch.data})
	}
	return out
}

var (
	snapshotHeaders = []storage.SnapshotHeader{
		{Meta: paxos.SnapshotMeta{Index: 9, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}}, Size: 5, Chunks: 1},
		{Meta: paxos.SnapshotMeta{Index: 1 << 40}, Size: 174 << 20, Chunks: 174},
		{Meta: paxos.SnapshotMeta{Index: 12, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}}, Size: 3 << 20, Chunks: 3, File: 7},
		{Meta: paxos.SnapshotMeta{Index: 3}},
	}
	snapshotChunks = []struct {
		index uint64
		data  []byte
	}{
		{9, []byte("image")},
		{1<<40 + 2, bytes.Repeat([]byte{0}, 1<<17)},
	}
)

// chunkNumber is the chunk number the record tests and the fuzz target
// give the chunk of the snapshot at index.
func chunkNumber(index uint64) uint64 { return index % 4 }

func TestRecordRoundTrip(t *testing.T) {
	c := storage.NewCodec()
	for _, r := range allRecords() {
		got, err := r.decode(c, r.rec)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if !reflect.DeepEqual(got, r.want) {
			t.Fatalf("%s: decoded %+v, want %+v", r.name, got, r.want)
		}
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	c := storage.NewCodec()
	rec := c.AppendEntry([]byte("prefix"), entries[1])
	if !bytes.HasPrefix(rec, []byte("prefix")) {
		t.Fatalf("AppendEntry overwrote dst")
	}
	if _, err := c.DecodeEntry(42, rec[len("prefix"):]); err != nil {
		t.Fatal(err)
	}
}

// TestEveryFlippedByteIsCaught flips each byte of small records with
// several masks: CRC-32C must catch every single-byte error.
func TestEveryFlippedByteIsCaught(t *testing.T) {
	c := storage.NewCodec()
	for _, r := range allRecords() {
		if len(r.rec) > 4096 {
			continue
		}
		for i := range r.rec {
			for _, mask := range []byte{0x01, 0x80, 0xff, 0x5a} {
				bad := bytes.Clone(r.rec)
				bad[i] ^= mask
				if _, err := r.decode(c, bad); !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("%s: byte %d ^ %#x: %v, want ErrCorrupt", r.name, i, mask, err)
				}
			}
		}
	}
}

// reseal recomputes a record's checksum, to build records that pass it and
// must fail validation instead.
func reseal(rec []byte) []byte {
	if len(rec) < storage.RecordOverheadBytes {
		return rec
	}
	body := bytes.Clone(rec[:len(rec)-4])
	return binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
}

func TestRecordValidation(t *testing.T) {
	c := storage.NewCodec()
	entry := c.AppendEntry(nil, entries[1]) // slot 42
	snap := c.AppendSnapshot(nil, snapshots[1])
	withByte := func(rec []byte, i int, b byte) []byte {
		rec = bytes.Clone(rec)
		rec[i] = b
		return reseal(rec)
	}
	trailing := reseal(append(append(bytes.Clone(entry[:len(entry)-4]), 0xc0), 0, 0, 0, 0))
	decodeEntry := func(slot uint64) func([]byte) error {
		return func(rec []byte) error { _, err := c.DecodeEntry(slot, rec); return err }
	}
	tests := []struct {
		name     string
		rec      []byte
		decode   func([]byte) error
		wantName string
		wantText string
	}{
		{"entry under another slot", entry, decodeEntry(43), "entry at slot 43", "holds slot 42"},
		{"snapshot under another index", snap,
			func(rec []byte) error { _, err := c.DecodeSnapshot(8, rec); return err }, "snapshot at index 8", "holds index 9"},
		{"entry read as a snapshot", entry,
			func(rec []byte) error { _, err := c.DecodeSnapshot(42, rec); return err }, "snapshot at index 42", "kind 2"},
		{"snapshot read as a hard state", snap,
			func(rec []byte) error { _, err := c.DecodeHardState(rec); return err }, "hard state", "kind 3"},
		{"unknown version", withByte(entry, 0, 2), decodeEntry(42), "entry at slot 42", "version 2"},
		{"trailing bytes", trailing, decodeEntry(42), "entry at slot 42", "trailing"},
		{"too short", entry[:5], decodeEntry(42), "entry at slot 42", "shorter"},
		{"empty", nil, decodeEntry(42), "entry at slot 42", "shorter"},
		{"truncated value", reseal(append(bytes.Clone(entry[:10]), 0, 0, 0, 0)), decodeEntry(42), "entry at slot 42", "msgpack"},
		{"unknown entry kind", c.AppendEntry(nil, paxos.Entry{Slot: 5, Kind: 9}), decodeEntry(5), "entry at slot 5", "kind 9"},
		{"header under another index", c.AppendSnapshotHeader(nil, snapshotHeaders[0]),
			func(rec []byte) error { _, err := c.DecodeSnapshotHeader(8, rec); return err }, "snapshot header at index 8", "holds index 9"},
		{"file header naming file 0", fileHeaderOfFile0(c),
			func(rec []byte) error { _, err := c.DecodeSnapshotHeader(4, rec); return err }, "snapshot header at index 4", "names image file 0"},
		{"header of more chunks than bytes", c.AppendSnapshotHeader(nil, storage.SnapshotHeader{Meta: paxos.SnapshotMeta{Index: 4}, Size: 2, Chunks: 3}),
			func(rec []byte) error { _, err := c.DecodeSnapshotHeader(4, rec); return err }, "snapshot header at index 4", "3 chunks for 2 bytes"},
		{"header of chunks too large", c.AppendSnapshotHeader(nil, storage.SnapshotHeader{Meta: paxos.SnapshotMeta{Index: 4}, Size: 64 << 20, Chunks: 2}),
			func(rec []byte) error { _, err := c.DecodeSnapshotHeader(4, rec); return err }, "snapshot header at index 4", "in 2 chunks of at most"},
		{"header of more chunks than can be counted", c.AppendSnapshotHeader(nil, storage.SnapshotHeader{Meta: paxos.SnapshotMeta{Index: 4}, Size: 1 << 62, Chunks: 1<<40 + 1<<39}),
			func(rec []byte) error { _, err := c.DecodeSnapshotHeader(4, rec); return err }, "snapshot header at index 4", "in 1649267441664 chunks of at most"},
		{"chunk under another number", c.AppendSnapshotChunk(nil, 4, 1, []byte("x")),
			func(rec []byte) error { _, err := c.AppendSnapshotChunkData(nil, 4, 2, rec); return err }, "snapshot chunk at index 4", "chunk 2 holds chunk 1"},
		{"chunk under another index", c.AppendSnapshotChunk(nil, 4, 1, []byte("x")),
			func(rec []byte) error { _, err := c.AppendSnapshotChunkData(nil, 5, 1, rec); return err }, "snapshot chunk at index 5", "holds index 4"},
		{"empty chunk", c.AppendSnapshotChunk(nil, 4, 1, nil),
			func(rec []byte) error { _, err := c.AppendSnapshotChunkData(nil, 4, 1, rec); return err }, "snapshot chunk at index 4", "holds 0 bytes"},
		{"whole snapshot read as a header", snap,
			func(rec []byte) error { _, err := c.DecodeSnapshotHeader(9, rec); return err }, "snapshot header at index 9", "kind 3"},
	}
	for _, tt := range tests {
		err := tt.decode(tt.rec)
		if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), tt.wantName) || !strings.Contains(err.Error(), tt.wantText) {
			t.Errorf("%s: %v; want ErrCorrupt naming %q and saying %q", tt.name, err, tt.wantName, tt.wantText)
		}
	}
}

func TestDecodeDoesNotAlias(t *testing.T) {
	c := storage.NewCodec()
	rec := c.AppendEntry(nil, entries[1])
	e, err := c.DecodeEntry(42, rec)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rec {
		rec[i] = 0
	}
	if !reflect.DeepEqual(e, entries[1]) {
		t.Fatalf("decoded entry changed with its record: %+v", e)
	}
}

// fileHeaderOfFile0 is a file header record naming file 0, which no
// encoder writes (a header of file 0 is the other kind): the file number
// is the value's last field, a one-byte msgpack integer.
func fileHeaderOfFile0(c *storage.Codec) []byte {
	rec := c.AppendSnapshotHeader(nil, storage.SnapshotHeader{Meta: paxos.SnapshotMeta{Index: 4}, Size: 2, Chunks: 1, File: 1})
	rec[len(rec)-5] = 0
	return reseal(rec)
}

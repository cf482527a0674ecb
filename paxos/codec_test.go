package paxos

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// codecMessages is one or more messages of every type, with every field
// the type uses set, edge values (zero, math.MaxUint64) and both forms of
// empty slices. They all encode and decode to their normalised form.
func codecMessages() []struct {
	name string
	m    Message
} {
	b := Ballot{Round: 7, Replica: 2}
	hi := Ballot{Round: 9, Replica: 3}
	es := []Entry{
		{Slot: 10, Ballot: b, Kind: EntryNoop},
		{Slot: 11, Ballot: b, Kind: EntryCommand, Data: []byte("launch job-1")},
		{Slot: 12, Ballot: b, Kind: EntryCommand, Data: []byte{}},
		{Slot: 13, Ballot: b, Kind: EntryCommand, Data: []byte{0, 0xc0, 0xff}},
	}
	const top = math.MaxUint64
	return []struct {
		name string
		m    Message
	}{
		{"prevote", Message{Type: MsgPreVote, From: 2, To: 1, Ballot: b, Start: 10, Chosen: 9}},
		{"prevote-reply-reject", Message{Type: MsgPreVoteReply, From: 1, To: 2, Ballot: b, Reject: true, Promised: hi, Chosen: 9}},
		{"prepare", Message{Type: MsgPrepare, From: 2, To: 3, Ballot: b, Start: 10, Chosen: 9}},
		{"promise", Message{Type: MsgPromise, From: 3, To: 2, Ballot: b, Chosen: 9, Entries: es}},
		{"promise-empty-entries", Message{Type: MsgPromise, From: 3, To: 2, Ballot: b, Entries: []Entry{}}},
		{"promise-reject", Message{Type: MsgPromise, From: 3, To: 2, Ballot: b, Reject: true, Promised: hi}},
		{"accept", Message{Type: MsgAccept, From: 2, To: 1, Ballot: b, Start: 10, Commit: 9, Entries: es}},
		{"accept-empty", Message{Type: MsgAccept, From: 2, To: 1, Ballot: b, Start: 14, Commit: 13}},
		{"accepted", Message{Type: MsgAccepted, From: 1, To: 2, Ballot: b, Through: 13, Chosen: 9, Last: 13}},
		{"heartbeat", Message{Type: MsgHeartbeat, From: 2, To: 1, Ballot: b, Start: 10, Commit: 13, Round: 500}},
		{"step-down", Message{Type: MsgStepDown, From: 2, To: 1, Ballot: b}},
		{"heartbeat-reply-rebuilding", Message{Type: MsgHeartbeatReply, From: 1, To: 2, Ballot: b, Through: 13, Chosen: 13, Round: 500, Reject: true}},
		{"nack", Message{Type: MsgNack, From: 1, To: 2, Ballot: b, Promised: hi}},
		{"chosen", Message{Type: MsgChosen, From: 2, To: 1, Ballot: b, Commit: 13, Entries: es[1:3]}},
		{"snapshot", Message{Type: MsgSnapshot, From: 2, To: 1, Ballot: b, Commit: 13, Round: 0xdeadbeef, Start: 4096, Last: 8192, Snapshot: &Snapshot{
			Meta: SnapshotMeta{Index: 13, Membership: Membership{Voters: []ReplicaID{1, 2, 3}}},
			Data: []byte("state machine image"),
		}}},
		{"snapshot-last-chunk", Message{Type: MsgSnapshot, From: 2, To: 1, Round: 1, Start: 5, Last: 8, Snapshot: &Snapshot{
			Meta: SnapshotMeta{Index: 13, Membership: Membership{Voters: []ReplicaID{1, 2, 3}}},
			Data: []byte("end"),
		}}},
		{"snapshot-empty", Message{Type: MsgSnapshot, From: 2, To: 1, Ballot: b, Snapshot: &Snapshot{
			Meta: SnapshotMeta{Membership: Membership{Voters: []ReplicaID{}}}, Data: []byte{},
		}}},
		{"snapshot-ack", Message{Type: MsgSnapshotAck, From: 1, To: 2, Ballot: b, Round: 0xdeadbeef, Start: 4115, Last: 8192, Chosen: 9}},
		{"snapshot-ack-reject", Message{Type: MsgSnapshotAck, From: 1, To: 2, Round: 7, Last: 8192, Reject: true}},
		{"max-values", Message{
			Type: MsgAccept, From: top, To: top, Ballot: Ballot{top, top}, Promised: Ballot{top, top},
			Start: top, Commit: top, Through: top, Chosen: top, Last: top, Round: top, Reject: true,
			Entries: []Entry{{Slot: top, Ballot: Ballot{top, top}, Kind: EntryCommand, Data: bytes.Repeat([]byte{0xab}, 70000)}},
		}},
		{"accept-64x256", benchAccept()},
	}
}

// benchAccept is an Accept of 64 entries of 256 bytes.
func benchAccept() Message {
	m := Message{Type: MsgAccept, From: 1, To: 2, Ballot: Ballot{Round: 3, Replica: 1}, Start: 1000, Commit: 999}
	for i := range 64 {
		data := bytes.Repeat([]byte{byte(i)}, 256)
		m.Entries = append(m.Entries, Entry{Slot: 1000 + uint64(i), Ballot: m.Ballot, Kind: EntryCommand, Data: data})
	}
	return m
}

// normalised is m in the canonical form decoding yields: empty slices nil.
func normalised(m Message) Message {
	if len(m.Entries) == 0 {
		m.Entries = nil
	} else {
		es := make([]Entry, len(m.Entries))
		for i, e := range m.Entries {
			e.Data = nilIfEmpty(e.Data)
			es[i] = e
		}
		m.Entries = es
	}
	if m.Snapshot != nil {
		s := *m.Snapshot
		s.Data = nilIfEmpty(s.Data)
		if len(s.Meta.Membership.Voters) == 0 {
			s.Meta.Membership.Voters = nil
		}
		m.Snapshot = &s
	}
	return m
}

func mustAppend(t testing.TB, dst []byte, m Message) []byte {
	t.Helper()
	out, err := AppendMessage(dst, m)
	if err != nil {
		t.Fatalf("AppendMessage(%s): %v", m, err)
	}
	return out
}

func TestCodecRoundTrip(t *testing.T) {
	for _, tc := range codecMessages() {
		t.Run(tc.name, func(t *testing.T) {
			frame := mustAppend(t, nil, tc.m)
			got, err := DecodeMessage(frame)
			if err != nil {
				t.Fatalf("DecodeMessage: %v", err)
			}
			want := normalised(tc.m)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded\n%#v\nwant\n%#v", got, want)
			}
			// go-msgpack, which defines the encoding, reads the frame alike.
			viaLib, err := decodeWithMsgpack(frame)
			if err != nil || !reflect.DeepEqual(viaLib, want) {
				t.Fatalf("go-msgpack decoded\n%#v, %v\nwant\n%#v", viaLib, err, want)
			}
			// Appending keeps what dst held and writes the same bytes.
			prefix := []byte("prefix")
			appended := mustAppend(t, prefix, tc.m)
			if !bytes.Equal(appended[:len(prefix)], prefix) || !bytes.Equal(appended[len(prefix):], frame) {
				t.Fatalf("AppendMessage after a prefix wrote %x, want %x", appended[len(prefix):], frame)
			}
			// Encoding is deterministic and canonical.
			if again := mustAppend(t, nil, got); !bytes.Equal(again, frame) {
				t.Fatalf("re-encoding the decoded message gave %x, want %x", again, frame)
			}
		})
	}
}

// TestCodecNilEqualsEmpty checks the canonical form: nil and empty slices
// encode to the same bytes and decode to nil.
func TestCodecNilEqualsEmpty(t *testing.T) {
	pairs := []struct {
		name string
		a, b Message
	}{
		{"entries",
			Message{Type: MsgAccept, From: 1, To: 2, Start: 1},
			Message{Type: MsgAccept, From: 1, To: 2, Start: 1, Entries: []Entry{}}},
		{"entry data",
			Message{Type: MsgChosen, From: 1, To: 2, Entries: []Entry{{Slot: 1, Kind: EntryCommand}}},
			Message{Type: MsgChosen, From: 1, To: 2, Entries: []Entry{{Slot: 1, Kind: EntryCommand, Data: []byte{}}}}},
		{"snapshot",
			Message{Type: MsgSnapshot, From: 1, To: 2, Snapshot: &Snapshot{}},
			Message{Type: MsgSnapshot, From: 1, To: 2, Snapshot: &Snapshot{Data: []byte{}, Meta: SnapshotMeta{Membership: Membership{Voters: []ReplicaID{}}}}}},
	}
	for _, p := range pairs {
		fa, fb := mustAppend(t, nil, p.a), mustAppend(t, nil, p.b)
		if !bytes.Equal(fa, fb) {
			t.Errorf("%s: nil encodes to %x, empty to %x", p.name, fa, fb)
		}
		got, err := DecodeMessage(fb)
		if err != nil || !reflect.DeepEqual(got, p.a) {
			t.Errorf("%s: decoded %#v, %v; want %#v", p.name, got, err, p.a)
		}
	}
}

// TestDecodeMessageSharesNoMemory checks that a decoded message survives
// the reuse of its frame, and that its data slices do not overlap.
func TestDecodeMessageSharesNoMemory(t *testing.T) {
	for _, tc := range codecMessages() {
		frame := mustAppend(t, nil, tc.m)
		got, err := DecodeMessage(frame)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		clear(frame)
		for i := range got.Entries {
			// Appending to one entry's data must not overwrite the next's.
			_ = append(got.Entries[i].Data, 0xee)
		}
		if want := normalised(tc.m); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: after clearing the frame and appending to data: %#v, want %#v", tc.name, got, want)
		}
	}
}

func TestAppendMessageRejects(t *testing.T) {
	tests := map[string]struct {
		m    Message
		want error
		msg  string
	}{
		"type 0":  {Message{From: 1, To: 2}, ErrInvalidMessage, "unknown message type"},
		"type 14": {Message{Type: MsgStepDown + 1, From: 1, To: 2}, ErrInvalidMessage, "unknown message type"},
		"chunk beyond its snapshot": {Message{Type: MsgSnapshot, From: 1, To: 2, Start: 6, Last: 8, Snapshot: &Snapshot{Data: []byte("abc")}},
			ErrInvalidMessage, "chunk of 3 bytes at offset 6 lies beyond the snapshot's 8 bytes"},
		"chunk offset overflows": {Message{Type: MsgSnapshot, From: 1, To: 2, Start: math.MaxUint64, Last: math.MaxUint64, Snapshot: &Snapshot{Data: []byte("abc")}},
			ErrInvalidMessage, "lies beyond"},
		"ack beyond its snapshot": {Message{Type: MsgSnapshotAck, From: 1, To: 2, Start: 9, Last: 8}, ErrInvalidMessage, "acknowledges 9 bytes of a 8-byte snapshot"},
		"zero sender":             {Message{Type: MsgNack, To: 2}, ErrInvalidMessage, "sender is zero"},
		"zero receiver":           {Message{Type: MsgNack, From: 1}, ErrInvalidMessage, "receiver is zero"},
		"entries on accepted":     {Message{Type: MsgAccepted, From: 1, To: 2, Entries: []Entry{{Slot: 1, Kind: EntryNoop}}}, ErrInvalidMessage, "carries 1 entries"},
		"entry kind 0":            {Message{Type: MsgAccept, From: 1, To: 2, Entries: []Entry{{Slot: 1}}}, ErrInvalidMessage, "unknown kind 0"},
		"snapshot on accept":      {Message{Type: MsgAccept, From: 1, To: 2, Snapshot: &Snapshot{}}, ErrInvalidMessage, "carries a snapshot"},
		"snapshot missing":        {Message{Type: MsgSnapshot, From: 1, To: 2}, ErrInvalidMessage, "no snapshot"},
		"zero voter": {Message{Type: MsgSnapshot, From: 1, To: 2, Snapshot: &Snapshot{
			Meta: SnapshotMeta{Membership: Membership{Voters: []ReplicaID{1, 0}}},
		}}, ErrInvalidMessage, "zero voter"},
	}
	big := make([]byte, MaxMessageBytes+1)
	tests["data over the limit"] = struct {
		m    Message
		want error
		msg  string
	}{Message{Type: MsgSnapshot, From: 1, To: 2, Last: uint64(len(big)), Snapshot: &Snapshot{Data: big}}, ErrMessageTooLarge, "carries 67108865 bytes of data"}
	// Data that fits but whose frame does not.
	tests["frame over the limit"] = struct {
		m    Message
		want error
		msg  string
	}{Message{Type: MsgSnapshot, From: 1, To: 2, Last: MaxMessageBytes - 4, Snapshot: &Snapshot{Data: big[:MaxMessageBytes-4]}}, ErrMessageTooLarge, "encodes to"}
	for name, tc := range tests {
		dst := []byte("kept")
		out, err := AppendMessage(dst, tc.m)
		if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.msg) {
			t.Errorf("%s: AppendMessage error %v, want %v containing %q", name, err, tc.want, tc.msg)
		}
		if string(out) != "kept" {
			t.Errorf("%s: AppendMessage changed dst to %q", name, out)
		}
	}
}

// wireFields is the wireMessage of m as the list of its fields, for tests
// to corrupt one at a time and encode with encodeList.
func wireFields(m Message) []any {
	st := &encoderState{}
	st.setWire(&m)
	v := reflect.ValueOf(st.w)
	fields := make([]any, v.NumField())
	for i := range fields {
		fields[i] = v.Field(i).Interface()
	}
	return fields
}

// encodeList encodes v (typically a []any) with go-msgpack, after the
// version byte, bypassing AppendMessage's checks.
func encodeList(t testing.TB, v any) []byte {
	t.Helper()
	out := []byte{}
	if err := codec.NewEncoderBytes(&out, wireHandle).Encode(v); err != nil {
		t.Fatalf("encoding %#v: %v", v, err)
	}
	return append([]byte{wireVersion}, out...)
}

// corrupt returns the frame of m's wire fields after change.
func corrupt(t testing.TB, m Message, change func(f []any)) []byte {
	f := wireFields(m)
	change(f)
	return encodeList(t, f)
}

// Indices of wireMessage fields used by the rejection tests.
const (
	fType     = 0
	fFrom     = 1
	fTo       = 2
	fStart    = 7
	fReject   = 13
	fEntries  = 14
	fSnapshot = 15
)

type invalidFrame struct {
	name  string
	frame []byte
	msg   string // part of the error message
}

// invalidFrames are frames that DecodeMessage must reject, with a part of
// the error message that says why.
func invalidFrames(t testing.TB) []invalidFrame {
	hb := Message{Type: MsgHeartbeat, From: 2, To: 1, Ballot: Ballot{Round: 1, Replica: 2}, Start: 1, Round: 1}
	acc := Message{Type: MsgAccept, From: 2, To: 1, Ballot: Ballot{Round: 1, Replica: 2}, Start: 1,
		Entries: []Entry{{Slot: 1, Ballot: Ballot{Round: 1, Replica: 2}, Kind: EntryCommand, Data: []byte("x")}}}
	snap := Message{Type: MsgSnapshot, From: 2, To: 1, Snapshot: &Snapshot{Meta: SnapshotMeta{Index: 5}}}
	valid := mustAppend(t, nil, hb)
	// hb's frame ends with nil entries and nil snapshot: tails replace them.
	withTail := func(tail ...byte) []byte {
		return append(append([]byte{}, valid[:len(valid)-2]...), tail...)
	}
	entry := func(kind any, data any) []any { return []any{uint64(1), uint64(1), uint64(2), kind, data} }
	// padding is an entry large enough that the entries before it pass
	// the count check.
	padding := entry(uint64(EntryCommand), make([]byte, 32))
	setEntries := func(es ...any) func(f []any) {
		return func(f []any) { f[fEntries] = es }
	}
	return []invalidFrame{
		{"empty", nil, "empty frame"},
		{"version-0", append([]byte{0}, valid[1:]...), "unknown format version 0"},
		{"version-1", append([]byte{1}, valid[1:]...), "unknown format version 1"},
		{"version-3", append([]byte{3}, valid[1:]...), "unknown format version 3"},
		{"version-only", []byte{wireVersion}, "frame ends early"},
		{"not-an-array", encodeList(t, map[string]uint64{"Type": 7}), "want an array"},
		{"nil-message", []byte{wireVersion, mpNil}, "nil, want an array of 16 fields"},
		{"15-fields", encodeList(t, wireFields(hb)[:15]), "array of 15 fields, want 16"},
		{"17-fields", encodeList(t, append(wireFields(hb), uint64(0))), "array of 17 fields, want 16"},
		{"trailing-byte", append(append([]byte{}, valid...), 0), "1 trailing bytes"},
		{"two-messages", append(append([]byte{}, valid...), valid[1:]...), "trailing bytes"},
		{"type-0", corrupt(t, hb, func(f []any) { f[fType] = uint64(0) }), "unknown message type"},
		{"type-14", corrupt(t, hb, func(f []any) { f[fType] = uint64(14) }), "unknown message type"},
		{"type-256", corrupt(t, hb, func(f []any) { f[fType] = uint64(256 + uint64(MsgHeartbeat)) }), "unknown message type 263"},
		{"zero-from", corrupt(t, hb, func(f []any) { f[fFrom] = uint64(0) }), "sender is zero"},
		{"zero-to", corrupt(t, hb, func(f []any) { f[fTo] = uint64(0) }), "receiver is zero"},
		{"negative-int", corrupt(t, hb, func(f []any) { f[fFrom] = int64(-1) }), "from: msgpack type byte 0xff, want an unsigned integer"},
		{"float", corrupt(t, hb, func(f []any) { f[fFrom] = 1.0 }), "want an unsigned integer"},
		{"string-for-uint", corrupt(t, hb, func(f []any) { f[fFrom] = "1" }), "want an unsigned integer"},
		{"int-for-bool", corrupt(t, hb, func(f []any) { f[fReject] = uint64(1) }), "want a bool"},
		{"nil-for-uint", corrupt(t, hb, func(f []any) { f[fTo] = nil }), "want an unsigned integer"},
		{"entries-on-heartbeat", corrupt(t, hb, setEntries(entry(uint64(EntryNoop), nil))), "carries 1 entries"},
		{"entry-kind-0", corrupt(t, acc, setEntries(entry(uint64(0), nil))), "unknown kind 0"},
		{"entry-kind-3", corrupt(t, acc, setEntries(entry(uint64(3), nil))), "unknown kind 3"},
		{"entry-kind-258", corrupt(t, acc, setEntries(entry(uint64(258), nil))), "unknown kind 258"},
		{"entry-4-fields", corrupt(t, acc, setEntries(entry(uint64(2), nil)[:4])), "entry: array of 4 fields, want 5"},
		{"entry-6-fields", corrupt(t, acc, setEntries(append(entry(uint64(2), nil), uint64(0)))), "entry: array of 6 fields, want 5"},
		{"entry-nil", corrupt(t, acc, setEntries(nil, padding)), "entry: nil"},
		{"entry-string-data", corrupt(t, acc, setEntries(entry(uint64(2), "data"))), "entry data: msgpack type byte 0xa4, want bin or nil"},
		{"entries-map", corrupt(t, acc, func(f []any) { f[fEntries] = map[uint64]uint64{1: 1} }), "entries: msgpack type byte 0x81, want an array"},
		{"entries-nested", corrupt(t, acc, setEntries([]any{[]any{[]any{}}}, padding)), "entry: array of 1 fields, want 5"},
		{"snapshot-on-heartbeat", corrupt(t, hb, func(f []any) { f[fSnapshot] = []any{uint64(1), nil, nil} }), "carries a snapshot"},
		{"snapshot-missing", corrupt(t, snap, func(f []any) { f[fSnapshot] = nil }), "no snapshot"},
		{"chunk-beyond-total", corrupt(t, snap, func(f []any) { f[fSnapshot] = []any{uint64(5), nil, []byte("abc")} }), "chunk of 3 bytes at offset 0 lies beyond the snapshot's 0 bytes"},
		{"ack-beyond-total", corrupt(t, Message{Type: MsgSnapshotAck, From: 2, To: 1, Round: 1}, func(f []any) { f[fStart] = uint64(1) }), "acknowledges 1 bytes of a 0-byte snapshot"},
		{"snapshot-2-fields", corrupt(t, snap, func(f []any) { f[fSnapshot] = []any{uint64(1), nil} }), "snapshot: array of 2 fields, want 3"},
		{"snapshot-zero-voter", corrupt(t, snap, func(f []any) { f[fSnapshot] = []any{uint64(1), []any{uint64(1), uint64(0)}, nil} }), "zero voter"},
		{"snapshot-voter-bin", corrupt(t, snap, func(f []any) { f[fSnapshot] = []any{uint64(1), []byte{1}, nil} }), "snapshot voters: msgpack type byte 0xc4, want an array"},
		// Counts and lengths beyond the bytes present.
		{"entries-count-huge", withTail(mpArray32, 0xff, 0xff, 0xff, 0xff, mpNil), "entries: 4294967295 elements need at least 6 bytes each, 1 bytes left"},
		{"entries-count-short", withTail(mpArray16, 0x00, 0x02, 0x95, 1, 1, 2, 2, mpNil, mpNil), "entries: 2 elements need at least 6 bytes each"},
		{"entry-bin-huge", withTail(0x91, 0x95, 1, 1, 2, 2, mpBin32, 0xff, 0xff, 0xff, 0xff, mpNil), "entry data: bin of 4294967295 bytes, 1 bytes left"},
		{"entry-bin-short", withTail(0x91, 0x95, 1, 1, 2, 2, mpBin8, 3, 'a', 'b'), "entry data: bin of 3 bytes, 2 bytes left"},
		{"voters-count-huge", withTail(mpNil, 0x93, 5, mpArray32, 0x7f, 0xff, 0xff, 0xff, 1, mpNil), "snapshot voters: 2147483647 elements"},
		{"snapshot-bin-huge", withTail(mpNil, 0x93, 5, mpNil, mpBin32, 0x7f, 0xff, 0xff, 0xff), "snapshot data: bin of 2147483647 bytes, 0 bytes left"},
		{"uint64-short", withTail(mpNil, 0x93, mpUint64, 1, 2, 3), "snapshot index: frame ends early"},
		{"array16-short", []byte{wireVersion, mpArray16, 0}, "message: frame ends early"},
	}
}

func TestDecodeMessageRejects(t *testing.T) {
	for _, tc := range invalidFrames(t) {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeMessage(tc.frame)
			if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("DecodeMessage(%x) = %s, %v; want an ErrDecode containing %q", tc.frame, m, err, tc.msg)
			}
			if !reflect.DeepEqual(m, Message{}) {
				t.Fatalf("DecodeMessage returned %#v with its error", m)
			}
		})
	}
	t.Run("over-the-limit", func(t *testing.T) {
		_, err := DecodeMessage(make([]byte, MaxMessageBytes+1))
		if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "over MaxMessageBytes") {
			t.Fatalf("DecodeMessage of %d bytes: %v", MaxMessageBytes+1, err)
		}
	})
}

// TestDecodeMessageRejectsEveryPrefix cuts every valid frame short at
// every byte.
func TestDecodeMessageRejectsEveryPrefix(t *testing.T) {
	for _, tc := range codecMessages() {
		frame := mustAppend(t, nil, tc.m)
		if len(frame) > 4096 {
			continue
		}
		for n := range len(frame) {
			if _, err := DecodeMessage(frame[:n]); !errors.Is(err, ErrDecode) {
				t.Fatalf("%s: %d-byte prefix of a %d-byte frame: error %v", tc.name, n, len(frame), err)
			}
		}
	}
}

// allocatedBytes is how many bytes f allocates on the heap: the least
// over a few runs, as the runtime counts every goroutine's allocations.
func allocatedBytes(f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// TestDecodeMessageAllocationIsBounded checks that a frame cannot make
// the decoder allocate much more than its own size: declared counts and
// lengths are checked against the bytes present first.
func TestDecodeMessageAllocationIsBounded(t *testing.T) {
	for _, tc := range invalidFrames(t) {
		if !strings.Contains(tc.name, "huge") {
			continue
		}
		frame := tc.frame
		if n := allocatedBytes(func() { DecodeMessage(frame) }); n > 4096 {
			t.Errorf("%s: a %d-byte frame made DecodeMessage allocate %d bytes", tc.name, len(frame), n)
		}
	}
	// The worst case of a valid frame: many entries of the smallest size,
	// each decoded into a 56-byte Entry.
	const entries = 100000
	frame := corrupt(t, Message{Type: MsgAccept, From: 1, To: 2}, func(f []any) {
		es := make([]any, entries)
		for i := range es {
			es[i] = []any{uint64(0), uint64(0), uint64(0), uint64(EntryNoop), nil}
		}
		f[fEntries] = es
	})
	var err error
	n := allocatedBytes(func() { _, err = DecodeMessage(frame) })
	if err != nil {
		t.Fatal(err)
	}
	if limit := uint64(10 * len(frame)); n > limit {
		t.Errorf("a %d-byte frame of %d minimal entries made DecodeMessage allocate %d bytes, over %d", len(frame), entries, n, limit)
	}
	t.Logf("%d-byte frame of %d minimal entries: %d bytes allocated (%.1fx)", len(frame), entries, n, float64(n)/float64(len(frame)))
}

func TestWireFieldCounts(t *testing.T) {
	for _, c := range []struct {
		v    any
		want int
	}{{wireMessage{}, wireMessageFields}, {wireEntry{}, wireEntryFields}, {wireSnapshot{}, wireSnapshotFields}} {
		if n := reflect.TypeOf(c.v).NumField(); n != c.want {
			t.Errorf("%T has %d fields, the reader expects %d", c.v, n, c.want)
		}
	}
}

// decodeWithMsgpack decodes frame with go-msgpack's decoder: the
// reference reading of the encoding, for differential checks. It trusts
// declared lengths, so only use it on frames DecodeMessage accepted.
func decodeWithMsgpack(frame []byte) (Message, error) {
	if len(frame) == 0 || frame[0] != wireVersion {
		return Message{}, fmt.Errorf("bad version")
	}
	var w wireMessage
	dec := codec.NewDecoderBytes(frame[1:], wireHandle)
	if err := dec.Decode(&w); err != nil {
		return Message{}, err
	}
	if n := dec.NumBytesRead(); n != len(frame)-1 {
		return Message{}, fmt.Errorf("go-msgpack read %d of %d bytes", n, len(frame)-1)
	}
	m := Message{
		Type: MessageType(w.Type), From: ReplicaID(w.From), To: ReplicaID(w.To),
		Ballot:   Ballot{Round: w.BallotRound, Replica: ReplicaID(w.BallotReplica)},
		Promised: Ballot{Round: w.PromisedRound, Replica: ReplicaID(w.PromisedReplica)},
		Start:    w.Start, Commit: w.Commit, Through: w.Through, Chosen: w.Chosen, Last: w.Last, Round: w.Round,
		Reject: w.Reject,
	}
	for _, e := range w.Entries {
		m.Entries = append(m.Entries, Entry{
			Slot: e.Slot, Ballot: Ballot{Round: e.BallotRound, Replica: ReplicaID(e.BallotReplica)},
			Kind: EntryKind(e.Kind), Data: e.Data,
		})
	}
	if s := w.Snapshot; s != nil {
		m.Snapshot = &Snapshot{Meta: SnapshotMeta{Index: s.Index}, Data: s.Data}
		for _, v := range s.Voters {
			m.Snapshot.Meta.Membership.Voters = append(m.Snapshot.Meta.Membership.Voters, ReplicaID(v))
		}
	}
	return normalised(m), nil
}

func BenchmarkAppendMessage(b *testing.B) {
	m := benchAccept()
	frame := mustAppend(b, nil, m)
	buf := make([]byte, 0, len(frame))
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendMessage(buf[:0], m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeMessage(b *testing.B) {
	frame := mustAppend(b, nil, benchAccept())
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMessage(frame); err != nil {
			b.Fatal(err)
		}
	}
}

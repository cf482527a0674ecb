package paxos

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Wire format of one message (a frame), as AppendMessage writes it:
//
//	byte 0    format version (wireVersion)
//	bytes 1.. wireMessage, msgpack-encoded by go-msgpack as an array of its
//	          16 fields in declaration order (StructToArray); an entry is
//	          an array of the 5 fields of wireEntry, the snapshot an array of
//	          the 3 fields of wireSnapshot or nil
//
// Ballots travel as two integers (round, replica). Integers are msgpack
// unsigned integers, Reject a msgpack bool, data msgpack bin.
//
// Versions: 2 (this one) streams snapshots in chunks: MsgSnapshot carries
// one chunk (Start is its byte offset, Last the snapshot's length, Round
// the transfer's id) and MsgSnapshotAck (type 12) is new. Version 1 sent a
// whole snapshot in one MsgSnapshot, with the same layout: a version-1
// replica would install a chunk as a whole snapshot, so each version
// refuses the other's frames (ErrDecode). Replicas of a cluster are
// upgraded together; nothing older than version 2 was ever deployed.
// MsgStepDown (type 13) came later within version 2: it is only a hint, so
// a replica that does not know it drops it (ErrDecode) and no more.
//
// Framing: a frame carries no length of its own and DecodeMessage takes
// exactly one whole frame (trailing bytes are an error), so the transport
// must length-prefix frames, and should refuse a prefix above
// MaxMessageBytes before reading the frame. There is no checksum: the
// transport's TCP (and TLS) protect the bytes in flight.
//
// Canonical form: empty and nil slices (Entries, Entry.Data, Snapshot.Data,
// Snapshot.Meta.Membership.Voters) are encoded alike, as msgpack nil, and
// always decode as nil. The core only takes their length and compares data
// as strings, so it cannot tell nil from empty; a single form lets a
// decoded message compare equal (reflect.DeepEqual) to the normalised
// original, and makes encoding deterministic.
//
// Decoding does not use go-msgpack's decoder. It trusts the lengths a
// frame declares: a 5-byte array or bin header makes it allocate 256 KiB,
// and a 64 MiB bin costs it gigabytes of copying as it grows the slice in
// 256 KiB steps. DecodeMessage instead reads the exact subset of msgpack
// that go-msgpack writes for these types (fixint and uint 8-64, nil,
// bool, bin 8-32, fixarray and array 16/32), checks every count and length
// against the bytes left before allocating, and copies the data of all
// entries (or the snapshot) into one allocation. The tests check that
// go-msgpack's own decoder reads every frame DecodeMessage accepts to the
// same message.
const (
	// MaxMessageBytes bounds an encoded message (a frame). It bounds what
	// a peer can make a replica allocate per message; a snapshot or batch
	// that would not fit cannot be sent.
	MaxMessageBytes = 64 << 20

	wireVersion byte = 2

	// Field counts of the wire structs: the number of elements of their
	// msgpack arrays.
	wireMessageFields  = 16
	wireEntryFields    = 5
	wireSnapshotFields = 3
	// minWireEntryBytes is the smallest encoded entry: an array header and
	// five one-byte values (fixints and nil data).
	minWireEntryBytes = 1 + wireEntryFields
)

var (
	// ErrDecode is wrapped by every error DecodeMessage returns: the bytes
	// are not a well-formed message.
	ErrDecode = errors.New("paxos: decoding message")
	// ErrMessageTooLarge is returned by AppendMessage for a message whose
	// encoding would exceed MaxMessageBytes.
	ErrMessageTooLarge = errors.New("paxos: message too large")
)

// wireMessage is Message as it travels. The field order is the format:
// changing it, or any field, needs a new wireVersion.
type wireMessage struct {
	Type            uint64
	From            uint64
	To              uint64
	BallotRound     uint64
	BallotReplica   uint64
	PromisedRound   uint64
	PromisedReplica uint64
	Start           uint64
	Commit          uint64
	Through         uint64
	Chosen          uint64
	Last            uint64
	Round           uint64
	Reject          bool
	Entries         []wireEntry
	Snapshot        *wireSnapshot
}

type wireEntry struct {
	Slot          uint64
	BallotRound   uint64
	BallotReplica uint64
	Kind          uint64
	Data          []byte
}

type wireSnapshot struct {
	Index  uint64
	Voters []uint64
	Data   []byte
}

// wireHandle is configured like the storage records' handle: structs as
// arrays, byte slices as msgpack bin. A configured handle is safe for
// concurrent use.
var wireHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.StructToArray = true
	return h
}()

// AppendMessage appends the encoding of m to dst. It refuses, wrapping
// ErrInvalidMessage, a message that DecodeMessage would reject (see
// checkWellFormed), and, wrapping ErrMessageTooLarge, one whose encoding
// exceeds MaxMessageBytes; dst is then returned unchanged.
func AppendMessage(dst []byte, m Message) ([]byte, error) {
	if err := checkWellFormed(&m); err != nil {
		return dst, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	if n := dataBytes(&m); n > MaxMessageBytes {
		return dst, fmt.Errorf("%w: %s carries %d bytes of data, over MaxMessageBytes (%d)", ErrMessageTooLarge, describeHeader(&m), n, MaxMessageBytes)
	}
	st := encoders.Get().(*encoderState)
	defer st.release()
	payload := st.encode(&m)
	if n := 1 + len(payload); n > MaxMessageBytes {
		return dst, fmt.Errorf("%w: %s encodes to %d bytes, over MaxMessageBytes (%d)", ErrMessageTooLarge, describeHeader(&m), n, MaxMessageBytes)
	}
	dst = append(dst, wireVersion)
	return append(dst, payload...), nil
}

// DecodeMessage decodes one frame written by AppendMessage. It rejects,
// wrapping ErrDecode, anything that is not exactly one well-formed
// message: an unknown version, bytes that do not follow the wire layout,
// counts or lengths beyond the bytes present, trailing bytes, and messages
// that fail checkWellFormed. Every count and length is checked against
// the bytes left before anything is allocated, so a frame makes it
// allocate at most about 10*len(b) bytes (a frame of entries without data,
// each 6 bytes on the wire and 56 in memory), and little more than len(b)
// for entries or a snapshot with data.
//
// The message shares no memory with b. The data of all its entries (or
// its snapshot) share one allocation. Protocol checks (slot order,
// ballots, membership) are left to Node.Step.
func DecodeMessage(b []byte) (Message, error) {
	switch {
	case len(b) > MaxMessageBytes:
		return Message{}, fmt.Errorf("%w: %d bytes, over MaxMessageBytes (%d)", ErrDecode, len(b), MaxMessageBytes)
	case len(b) == 0:
		return Message{}, fmt.Errorf("%w: empty frame", ErrDecode)
	case b[0] != wireVersion:
		return Message{}, fmt.Errorf("%w: unknown format version %d", ErrDecode, b[0])
	}
	r := wireReader{b: b, off: 1}
	m := r.message()
	if r.err == nil && r.off != len(b) {
		r.failAt(r.off, "%d trailing bytes after the message", len(b)-r.off)
	}
	if r.err != nil {
		return Message{}, r.err
	}
	if err := checkWellFormed(&m); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	detachData(&m)
	return m, nil
}

// checkWellFormed reports what makes m unfit for the wire: what any
// receiver would reject whatever its state. Both ends check it, so that
// every message AppendMessage encodes decodes.
func checkWellFormed(m *Message) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", describeHeader(m), fmt.Sprintf(format, args...))
	}
	switch {
	case !m.Type.Valid():
		return bad("unknown message type")
	case m.From == None:
		return bad("sender is zero")
	case m.To == None:
		return bad("receiver is zero")
	case len(m.Entries) > 0 && !carriesEntries(m.Type):
		return bad("carries %d entries; only Promise, Accept and Chosen do", len(m.Entries))
	case m.Type == MsgSnapshot && m.Snapshot == nil:
		return bad("no snapshot")
	case m.Type != MsgSnapshot && m.Snapshot != nil:
		return bad("carries a snapshot; only Snapshot does")
	case m.Type == MsgSnapshot && !chunkFits(m.Start, uint64(len(m.Snapshot.Data)), m.Last):
		return bad("chunk of %d bytes at offset %d lies beyond the snapshot's %d bytes", len(m.Snapshot.Data), m.Start, m.Last)
	case m.Type == MsgSnapshotAck && m.Start > m.Last:
		return bad("acknowledges %d bytes of a %d-byte snapshot", m.Start, m.Last)
	}
	for _, e := range m.Entries {
		if e.Kind != EntryNoop && e.Kind != EntryCommand {
			return bad("entry for slot %d has unknown kind %d", e.Slot, uint8(e.Kind))
		}
	}
	if m.Snapshot != nil && slices.Contains(m.Snapshot.Meta.Membership.Voters, None) {
		return bad("snapshot membership has a zero voter")
	}
	return nil
}

// carriesEntries reports whether messages of type t may carry entries.
func carriesEntries(t MessageType) bool {
	return t == MsgPromise || t == MsgAccept || t == MsgChosen
}

func describeHeader(m *Message) string { return fmt.Sprintf("%s %d->%d", m.Type, m.From, m.To) }

// dataBytes is the length of the data m carries, a lower bound of its
// encoding's size.
func dataBytes(m *Message) int {
	n := 0
	for _, e := range m.Entries {
		n += len(e.Data)
	}
	if m.Snapshot != nil {
		n += len(m.Snapshot.Data)
	}
	return n
}

// encoderState is a go-msgpack encoder with its scratch space, pooled so
// that encoding does not allocate them per message. Which state a call
// gets cannot change the bytes it writes.
type encoderState struct {
	enc     *codec.Encoder
	out     []byte
	w       wireMessage
	entries []wireEntry
	snap    wireSnapshot
	voters  []uint64
}

var encoders = sync.Pool{New: func() any {
	st := &encoderState{}
	st.enc = codec.NewEncoderBytes(&st.out, wireHandle)
	return st
}}

// maxKeptScratchBytes and maxKeptScratchEntries bound the scratch space a
// pooled encoder keeps, so that one snapshot or huge batch does not pin
// its size in memory.
const (
	maxKeptScratchBytes   = 1 << 20
	maxKeptScratchEntries = 4096
)

// encode returns the msgpack encoding of m, valid until release.
func (st *encoderState) encode(m *Message) []byte {
	st.setWire(m)
	st.out = st.out[:0]
	st.enc.ResetBytes(&st.out)
	if err := st.enc.Encode(&st.w); err != nil {
		// The wire types hold only integers, a bool and byte slices:
		// failing to encode them is a bug, not an operating condition.
		panic(fmt.Sprintf("paxos: encoding %s: %v", describeHeader(m), err))
	}
	return st.out
}

// setWire sets st.w to the wire form of m, in canonical form (empty
// slices nil), using st's scratch slices.
func (st *encoderState) setWire(m *Message) {
	st.w = wireMessage{
		Type:            uint64(m.Type),
		From:            uint64(m.From),
		To:              uint64(m.To),
		BallotRound:     m.Ballot.Round,
		BallotReplica:   uint64(m.Ballot.Replica),
		PromisedRound:   m.Promised.Round,
		PromisedReplica: uint64(m.Promised.Replica),
		Start:           m.Start,
		Commit:          m.Commit,
		Through:         m.Through,
		Chosen:          m.Chosen,
		Last:            m.Last,
		Round:           m.Round,
		Reject:          m.Reject,
	}
	if len(m.Entries) > 0 {
		for _, e := range m.Entries {
			st.entries = append(st.entries, wireEntry{
				Slot:          e.Slot,
				BallotRound:   e.Ballot.Round,
				BallotReplica: uint64(e.Ballot.Replica),
				Kind:          uint64(e.Kind),
				Data:          nilIfEmpty(e.Data),
			})
		}
		st.w.Entries = st.entries
	}
	if s := m.Snapshot; s != nil {
		st.snap = wireSnapshot{Index: s.Meta.Index, Data: nilIfEmpty(s.Data)}
		if len(s.Meta.Membership.Voters) > 0 {
			for _, v := range s.Meta.Membership.Voters {
				st.voters = append(st.voters, uint64(v))
			}
			st.snap.Voters = st.voters
		}
		st.w.Snapshot = &st.snap
	}
}

// release drops the references to the caller's data and returns st to the
// pool, unless its scratch space grew too large to keep.
func (st *encoderState) release() {
	clear(st.entries)
	st.entries, st.voters = st.entries[:0], st.voters[:0]
	st.w, st.snap = wireMessage{}, wireSnapshot{}
	if cap(st.out) <= maxKeptScratchBytes && cap(st.entries) <= maxKeptScratchEntries && cap(st.voters) <= maxKeptScratchEntries {
		encoders.Put(st)
	}
}

// wireReader reads a frame's msgpack value. The first error sticks: later
// reads return zero values, so that callers check r.err once.
type wireReader struct {
	b   []byte
	off int
	err error
}

// msgpack type bytes of the subset the wire format uses.
const (
	mpPosFixIntMax = 0x7f
	mpFixArrayMin  = 0x90
	mpFixArrayMax  = 0x9f
	mpNil          = 0xc0
	mpFalse        = 0xc2
	mpTrue         = 0xc3
	mpBin8         = 0xc4 // bin 16 and bin 32 follow
	mpBin32        = 0xc6
	mpUint8        = 0xcc // uint 16, 32 and 64 follow
	mpUint64       = 0xcf
	mpArray16      = 0xdc
	mpArray32      = 0xdd
)

func (r *wireReader) failAt(at int, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: byte %d: %s", ErrDecode, at, fmt.Sprintf(format, args...))
	}
}

func (r *wireReader) left() int { return len(r.b) - r.off }

// message reads the wireMessage array.
func (r *wireReader) message() Message {
	if !r.fields("message", wireMessageFields) {
		return Message{}
	}
	var m Message
	at := r.off
	if t := r.uint("type"); t > math.MaxUint8 {
		r.failAt(at, "type: unknown message type %d", t)
	} else {
		m.Type = MessageType(t)
	}
	m.From = ReplicaID(r.uint("from"))
	m.To = ReplicaID(r.uint("to"))
	m.Ballot = r.ballot("ballot")
	m.Promised = r.ballot("promised")
	m.Start = r.uint("start")
	m.Commit = r.uint("commit")
	m.Through = r.uint("through")
	m.Chosen = r.uint("chosen")
	m.Last = r.uint("last")
	m.Round = r.uint("round")
	m.Reject = r.bool("reject")
	m.Entries = r.entries()
	m.Snapshot = r.snapshot()
	return m
}

func (r *wireReader) ballot(what string) Ballot {
	return Ballot{Round: r.uint(what), Replica: ReplicaID(r.uint(what))}
}

// entries reads the entries array; nil and empty arrays yield nil.
func (r *wireReader) entries() []Entry {
	n, ok := r.count("entries", minWireEntryBytes)
	if !ok || n == 0 {
		return nil
	}
	es := make([]Entry, n)
	for i := range es {
		if !r.fields("entry", wireEntryFields) {
			return nil
		}
		es[i].Slot = r.uint("entry slot")
		es[i].Ballot = r.ballot("entry ballot")
		at := r.off
		if k := r.uint("entry kind"); k > math.MaxUint8 {
			r.failAt(at, "entry kind: unknown kind %d", k)
		} else {
			es[i].Kind = EntryKind(k)
		}
		es[i].Data = r.bytes("entry data")
		if r.err != nil {
			return nil
		}
	}
	return es
}

// snapshot reads the snapshot array or nil.
func (r *wireReader) snapshot() *Snapshot {
	at := r.off
	n, present := r.arrayHeader("snapshot")
	if !present || r.err != nil {
		return nil
	}
	if n != wireSnapshotFields {
		r.failAt(at, "snapshot: array of %d fields, want %d", n, wireSnapshotFields)
		return nil
	}
	s := &Snapshot{Meta: SnapshotMeta{Index: r.uint("snapshot index")}}
	if n, ok := r.count("snapshot voters", 1); ok && n > 0 {
		s.Meta.Membership.Voters = make([]ReplicaID, n)
		for i := range s.Meta.Membership.Voters {
			s.Meta.Membership.Voters[i] = ReplicaID(r.uint("snapshot voter"))
		}
	}
	s.Data = r.bytes("snapshot data")
	return s
}

// fields reads the header of a struct's array, which must have want
// elements.
func (r *wireReader) fields(what string, want uint64) bool {
	at := r.off
	n, present := r.arrayHeader(what)
	if r.err == nil && (!present || n != want) {
		if !present {
			r.failAt(at, "%s: nil, want an array of %d fields", what, want)
		} else {
			r.failAt(at, "%s: array of %d fields, want %d", what, n, want)
		}
	}
	return r.err == nil
}

// count reads the header of an array (or nil) whose elements take at
// least minBytes each, and checks that the bytes left can hold them.
func (r *wireReader) count(what string, minBytes int) (int, bool) {
	at := r.off
	n, _ := r.arrayHeader(what)
	if r.err != nil {
		return 0, false
	}
	if n > uint64(r.left()/minBytes) {
		r.failAt(at, "%s: %d elements need at least %d bytes each, %d bytes left", what, n, minBytes, r.left())
		return 0, false
	}
	return int(n), true
}

// arrayHeader reads an array header, or nil (present false).
func (r *wireReader) arrayHeader(what string) (n uint64, present bool) {
	at := r.off
	c := r.typeByte(what)
	switch {
	case r.err != nil:
		return 0, false
	case c == mpNil:
		return 0, false
	case c >= mpFixArrayMin && c <= mpFixArrayMax:
		return uint64(c - mpFixArrayMin), true
	case c == mpArray16:
		return r.bigEndian(2, what), true
	case c == mpArray32:
		return r.bigEndian(4, what), true
	}
	r.failAt(at, "%s: msgpack type byte %#02x, want an array", what, c)
	return 0, false
}

// uint reads an unsigned integer of any msgpack width.
func (r *wireReader) uint(what string) uint64 {
	at := r.off
	c := r.typeByte(what)
	switch {
	case r.err != nil:
		return 0
	case c <= mpPosFixIntMax:
		return uint64(c)
	case c >= mpUint8 && c <= mpUint64:
		return r.bigEndian(1<<(c-mpUint8), what)
	}
	r.failAt(at, "%s: msgpack type byte %#02x, want an unsigned integer", what, c)
	return 0
}

func (r *wireReader) bool(what string) bool {
	at := r.off
	c := r.typeByte(what)
	switch {
	case r.err != nil:
		return false
	case c == mpFalse || c == mpTrue:
		return c == mpTrue
	}
	r.failAt(at, "%s: msgpack type byte %#02x, want a bool", what, c)
	return false
}

// bytes reads a bin (or nil) and returns it, still pointing into the
// frame; nil and empty bins yield nil.
func (r *wireReader) bytes(what string) []byte {
	at := r.off
	c := r.typeByte(what)
	switch {
	case r.err != nil || c == mpNil:
		return nil
	case c >= mpBin8 && c <= mpBin32:
		n := r.bigEndian(1<<(c-mpBin8), what)
		if r.err == nil && n > uint64(r.left()) {
			r.failAt(at, "%s: bin of %d bytes, %d bytes left", what, n, r.left())
		}
		if r.err != nil || n == 0 {
			return nil
		}
		p := r.b[r.off : r.off+int(n) : r.off+int(n)]
		r.off += int(n)
		return p
	}
	r.failAt(at, "%s: msgpack type byte %#02x, want bin or nil", what, c)
	return nil
}

func (r *wireReader) typeByte(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.left() == 0 {
		r.failAt(r.off, "%s: frame ends early", what)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// bigEndian reads an unsigned integer of width bytes.
func (r *wireReader) bigEndian(width int, what string) uint64 {
	if r.err != nil {
		return 0
	}
	if r.left() < width {
		r.failAt(r.off, "%s: frame ends early", what)
		return 0
	}
	var v uint64
	for _, c := range r.b[r.off : r.off+width] {
		v = v<<8 | uint64(c)
	}
	r.off += width
	return v
}

// detachData copies the data of m, which points into the frame, into one
// allocation of its own. Each slice is capped at its length, so appending
// to one cannot overwrite the next.
func detachData(m *Message) {
	n := dataBytes(m)
	if n == 0 {
		return
	}
	arena := make([]byte, 0, n)
	detach := func(p []byte) []byte {
		if len(p) == 0 {
			return nil
		}
		start := len(arena)
		arena = append(arena, p...)
		return arena[start:len(arena):len(arena)]
	}
	for i := range m.Entries {
		m.Entries[i].Data = detach(m.Entries[i].Data)
	}
	if m.Snapshot != nil {
		m.Snapshot.Data = detach(m.Snapshot.Data)
	}
}

// nilIfEmpty gives byte slices their canonical form: the core treats nil
// and empty alike.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

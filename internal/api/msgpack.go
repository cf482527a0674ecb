package api

import (
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"paxcron/internal/mpack"
)

// MsgpackContentType is the other encoding POST /v1/jobs takes its body
// in: a PutJobs as a msgpack map, its fields named as in JSON (and
// []byte a msgpack bin, not base64). paxcron's Client sends job writes
// so: decoding one costs the server half what the JSON costs
// (BenchmarkDecodePutJobs; encoding/json decoding job writes was an
// eighth of a leader's CPU with 512 writers). Every other body, and every
// answer, is JSON.
const MsgpackContentType = "application/msgpack"

// bodyHandle is the handle of msgpack bodies. Bodies come from the
// network: a field the type does not have is refused, as JSON's are, and
// nesting is bounded. Preallocation keeps go-msgpack's default bound
// (MaxInitLen 0: what a length prefix claims is allocated only up to
// 256 KiB of small items), not a smaller one: go-msgpack reads a byte
// string in steps of that bound, copying all it read at each step, so at
// 64 a 1 MiB payload took 1.9 s and 8.7 GB of allocations to decode
// (quadratic: a 4 MiB body, about half a minute of a leader's CPU;
// BenchmarkDecodePutJobs in internal/server).
var bodyHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	h.MaxInitLen = 0
	h.MaxDepth = 8
	return h
}()

var bodyCodecs = mpack.New(bodyHandle)

// EncodeMsgpack returns v as a msgpack body.
func EncodeMsgpack(v any) ([]byte, error) {
	b, err := bodyCodecs.Append(nil, v)
	if err != nil {
		return nil, fmt.Errorf("api: encoding a msgpack body: %w", err)
	}
	return b, nil
}

// DecodeMsgpack decodes a msgpack body into v: one value, which must be
// the whole body, naming no key twice in one map at any depth
// (ErrDuplicateKey).
func DecodeMsgpack(body []byte, v any) error {
	if len(body) == 0 {
		return errors.New("an empty body")
	}
	n, err := bodyCodecs.Decode(body, v)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("cut short: %w", err)
	case err != nil:
		return err
	case n != len(body):
		return fmt.Errorf("%d bytes after the msgpack value", len(body)-n)
	}
	return duplicateMsgpackKey(body)
}

// duplicateMsgpackKey names the first key a map in body sets twice:
// go-msgpack, as encoding/json, keeps the last value of a key named
// twice, in a struct as in a map. It walks the bytes without decoding
// them; body decoded already, so it is one whole value within the
// handle's depth bound. Keys are compared by their text when they are
// strings or byte strings (go-msgpack takes either for a string key, and
// matches a struct's fields exactly, case included), by their encoding
// otherwise.
func duplicateMsgpackKey(body []byte) error {
	w := msgpackWalk{b: body}
	return w.value(0)
}

type msgpackWalk struct {
	b    []byte
	at   int
	path keyPath
}

// maxWalkDepth bounds the walk's recursion whatever the handle's bound.
const maxWalkDepth = 64

var errMsgpackShort = errors.New("api: a msgpack value cut short")

// msgpackFixed is, by head byte, the size of the value past it when it
// is fixed (numbers, fixext); msgpackLengthWidth the width of the
// length that follows it (str, bin, ext, array, map).
var msgpackFixed, msgpackLengthWidth = func() (fixed, width [256]byte) {
	for c, n := range map[byte]byte{0xca: 4, 0xcb: 8, 0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd0: 1, 0xd1: 2, 0xd2: 4,
		0xd3: 8, 0xd4: 2, 0xd5: 3, 0xd6: 5, 0xd7: 9, 0xd8: 17} {
		fixed[c] = n
	}
	for c, n := range map[byte]byte{0xc4: 1, 0xc5: 2, 0xc6: 4, 0xd9: 1, 0xda: 2, 0xdb: 4, 0xc7: 1, 0xc8: 2, 0xc9: 4,
		0xdc: 2, 0xdd: 4, 0xde: 2, 0xdf: 4} {
		width[c] = n
	}
	return fixed, width
}()

// take consumes n bytes.
func (w *msgpackWalk) take(n uint64) ([]byte, error) {
	if n > uint64(len(w.b)-w.at) {
		return nil, errMsgpackShort
	}
	p := w.b[w.at : w.at+int(n)]
	w.at += int(n)
	return p, nil
}

// size reads an n-byte big-endian length.
func (w *msgpackWalk) size(n int) (uint64, error) {
	p, err := w.take(uint64(n))
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

// value skips one value, walking into arrays and maps.
func (w *msgpackWalk) value(depth int) error {
	if depth > maxWalkDepth {
		return fmt.Errorf("api: msgpack nested more than %d deep", maxWalkDepth)
	}
	head, err := w.take(1)
	if err != nil {
		return err
	}
	c := head[0]
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		return nil // fixint, nil, bool
	case c&0xf0 == 0x80:
		return w.object(uint64(c&0x0f), depth)
	case c&0xf0 == 0x90:
		return w.array(uint64(c&0x0f), depth)
	case c&0xe0 == 0xa0:
		_, err := w.take(uint64(c & 0x1f))
		return err
	}
	if n := msgpackFixed[c]; n > 0 {
		_, err := w.take(uint64(n))
		return err
	}
	width := msgpackLengthWidth[c]
	if width == 0 {
		return fmt.Errorf("api: msgpack byte 0x%02x is no value's head", c)
	}
	n, err := w.size(int(width))
	if err != nil {
		return err
	}
	switch c {
	case 0xdc, 0xdd:
		return w.array(n, depth)
	case 0xde, 0xdf:
		return w.object(n, depth)
	case 0xc7, 0xc8, 0xc9:
		n++ // the extension's type byte
	}
	_, err = w.take(n)
	return err
}

func (w *msgpackWalk) array(n uint64, depth int) error {
	for i := uint64(0); i < n; i++ {
		w.path = append(w.path, pathSegment{index: int(i)})
		if err := w.value(depth + 1); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
	return nil
}

func (w *msgpackWalk) object(n uint64, depth int) error {
	var seen keysSeen
	for i := uint64(0); i < n; i++ {
		start := w.at
		if err := w.value(depth + 1); err != nil {
			return err
		}
		raw := w.b[start:w.at]
		w.path = append(w.path, pathSegment{key: raw, msgpack: true, index: -1})
		k := seenKey{kind: 'r', id: raw}
		if text, ok := msgpackText(raw); ok {
			// go-msgpack takes a str or a bin for a string key.
			k = seenKey{kind: 't', id: text}
		}
		if _, dup := seen.add(k); dup {
			return fmt.Errorf("%w: %s is set twice; the second value would replace the first without a word",
				ErrDuplicateKey, w.path)
		}
		if err := w.value(depth + 1); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
	return nil
}

// msgpackText is the text of raw, one encoded str or bin value.
func msgpackText(raw []byte) ([]byte, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	c := raw[0]
	switch {
	case c&0xe0 == 0xa0:
		return raw[1:], true
	case c == 0xc4 || c == 0xd9:
		return raw[2:], true
	case c == 0xc5 || c == 0xda:
		return raw[3:], true
	case c == 0xc6 || c == 0xdb:
		return raw[5:], true
	}
	return nil, false
}

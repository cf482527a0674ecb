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
// the whole body.
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
	return nil
}

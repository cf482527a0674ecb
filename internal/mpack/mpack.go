// Package mpack keeps msgpack encoders and decoders for reuse. A new
// encoder allocates itself and a 1 KiB buffer, a decoder itself and its
// scratch space: on the paths every API call and every command take, that
// was about a sixth of the bytes a leader allocated (BenchmarkAPI's
// allocation profile), all of it work for the garbage collector.
package mpack

import (
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Pool holds encoders and decoders of one handle. Safe for concurrent
// use.
type Pool struct {
	h   codec.Handle
	enc sync.Pool // *encoder
	dec sync.Pool // *codec.Decoder
}

// New returns a Pool for h, which must not change from then on.
func New(h codec.Handle) *Pool { return &Pool{h: h} }

type encoder struct {
	e   *codec.Encoder
	buf []byte
}

// maxKeptBuffer: an encoder whose buffer grew past it (a snapshot, a
// large body) is not kept.
const maxKeptBuffer = 64 << 10

// Append appends v's msgpack to dst.
func (p *Pool) Append(dst []byte, v any) ([]byte, error) {
	e, _ := p.enc.Get().(*encoder)
	if e == nil {
		e = &encoder{buf: make([]byte, 0, 512)}
		e.e = codec.NewEncoderBytes(&e.buf, p.h)
	} else {
		e.buf = e.buf[:0]
		e.e.ResetBytes(&e.buf)
	}
	err := e.e.Encode(v)
	if err == nil {
		dst = append(dst, e.buf...)
	}
	if cap(e.buf) <= maxKeptBuffer {
		p.enc.Put(e)
	}
	return dst, err
}

// empty resets a decoder off its last input, so that the pool keeps no
// caller's bytes alive.
var empty = []byte{}

// Decode decodes the msgpack at b's start into v and returns the bytes it
// read.
func (p *Pool) Decode(b []byte, v any) (int, error) {
	d, _ := p.dec.Get().(*codec.Decoder)
	if d == nil {
		d = codec.NewDecoderBytes(b, p.h)
	} else {
		d.ResetBytes(b)
	}
	err := d.Decode(v)
	n := d.NumBytesRead()
	d.ResetBytes(empty)
	p.dec.Put(d)
	return n, err
}

package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"paxcron/paxos"
)

const (
	frameHeaderBytes = 4
	// keepBufBytesMax is the largest read buffer kept between frames; a
	// larger one (a snapshot chunk) is released after its frame.
	keepBufBytesMax = 1 << 20
)

// errOversized is returned by readFrame for a length prefix above
// paxos.MaxMessageBytes.
var errOversized = errors.New("transport: frame over paxos.MaxMessageBytes")

// encodeFrame returns m as one frame: length prefix and AppendMessage's
// bytes.
func encodeFrame(m paxos.Message) ([]byte, error) {
	f, err := paxos.AppendMessage(make([]byte, frameHeaderBytes, 256), m)
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(f, uint32(len(f)-frameHeaderBytes))
	return f, nil
}

// frameReader reads frames from r, reusing its buffer for small ones.
type frameReader struct {
	r   io.Reader
	hdr [frameHeaderBytes]byte
	buf []byte
}

// next returns the next frame's payload, valid until the following call.
// It refuses a length above paxos.MaxMessageBytes before reading the
// payload.
func (fr *frameReader) next() ([]byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[:])
	if n > paxos.MaxMessageBytes {
		return nil, fmt.Errorf("%w: %d bytes", errOversized, n)
	}
	if cap(fr.buf) > keepBufBytesMax {
		fr.buf = nil
	}
	if uint32(cap(fr.buf)) < n {
		fr.buf = make([]byte, n)
	}
	fr.buf = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
		return nil, err
	}
	return fr.buf, nil
}

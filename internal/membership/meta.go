package membership

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/memberlist"
)

// PeerInfo is a replica as membership carries it: its identity and where
// it listens. It travels as the replica's memberlist node meta.
type PeerInfo struct {
	// ID is the replica's Paxos replica ID; never zero.
	ID uint64
	// PaxosAddr is the host:port of its Paxos transport.
	PaxosAddr string
	// APIAddr is the host:port of its HTTP API.
	APIAddr string
}

// Node meta layout, version 1 (every integer an unsigned varint, minimal):
//
//	[version = 1] [ID] [len(PaxosAddr)] [PaxosAddr] [len(APIAddr)] [APIAddr]
//
// Nothing may follow. A decoder accepts exactly the bytes the encoder
// writes (decode then encode gives the input back), so two replicas
// never disagree on what a meta says. A new layout takes a new version;
// a replica ignores a node whose version it does not know.
const metaVersion1 = 1

// AddrBytesMax bounds each address in the meta: the longest DNS name (253
// bytes) and a port. Two such addresses do not fit memberlist's
// MetaMaxSize (512 bytes) together: encodePeerInfo checks the whole.
const AddrBytesMax = 253 + len(":65535")

// ErrMeta wraps every reason a node meta is refused.
var ErrMeta = errors.New("membership: bad node meta")

// encodePeerInfo returns p's node meta, or why p cannot be carried.
func encodePeerInfo(p PeerInfo) ([]byte, error) {
	b, err := appendPeerInfo(nil, p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMeta, err)
	}
	return b, nil
}

// appendPeerInfo appends p's node meta to b; its errors are unprefixed.
func appendPeerInfo(b []byte, p PeerInfo) ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	start := len(b)
	b = append(b, metaVersion1)
	b = binary.AppendUvarint(b, p.ID)
	b = appendString(b, p.PaxosAddr)
	b = appendString(b, p.APIAddr)
	if n := len(b) - start; n > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("replica %d's meta is %d bytes, over memberlist's %d", p.ID, n, memberlist.MetaMaxSize)
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodePeerInfo reads a node meta written by encodePeerInfo.
func decodePeerInfo(b []byte) (PeerInfo, error) {
	if len(b) > memberlist.MetaMaxSize {
		return PeerInfo{}, fmt.Errorf("%w: %d bytes, over memberlist's %d", ErrMeta, len(b), memberlist.MetaMaxSize)
	}
	if len(b) == 0 {
		return PeerInfo{}, fmt.Errorf("%w: empty", ErrMeta)
	}
	if b[0] != metaVersion1 {
		return PeerInfo{}, fmt.Errorf("%w: version %d, want %d", ErrMeta, b[0], metaVersion1)
	}
	r := metaReader{rest: b[1:]}
	p := PeerInfo{ID: r.uvarint(), PaxosAddr: r.string(), APIAddr: r.string()}
	if r.err != nil {
		return PeerInfo{}, r.err
	}
	if len(r.rest) != 0 {
		return PeerInfo{}, fmt.Errorf("%w: %d bytes after the addresses", ErrMeta, len(r.rest))
	}
	if err := p.validate(); err != nil {
		return PeerInfo{}, fmt.Errorf("%w: %v", ErrMeta, err)
	}
	// Overlong varints decode to the same numbers: refuse any input that
	// is not exactly what the encoder writes.
	if again, _ := encodePeerInfo(p); !bytes.Equal(again, b) {
		return PeerInfo{}, fmt.Errorf("%w: not in canonical form", ErrMeta)
	}
	return p, nil
}

// metaReader consumes a meta; the first error sticks.
type metaReader struct {
	rest []byte
	err  error
}

func (r *metaReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.rest)
	if n <= 0 {
		r.err = fmt.Errorf("%w: a varint is cut short or overflows", ErrMeta)
		return 0
	}
	r.rest = r.rest[n:]
	return v
}

func (r *metaReader) string() string {
	l := r.uvarint()
	if r.err != nil {
		return ""
	}
	if l > uint64(AddrBytesMax) || l > uint64(len(r.rest)) {
		r.err = fmt.Errorf("%w: an address of %d bytes (at most %d, %d left)", ErrMeta, l, AddrBytesMax, len(r.rest))
		return ""
	}
	s := string(r.rest[:l])
	r.rest = r.rest[l:]
	return s
}

// validate says whether p can be carried and reached.
func (p PeerInfo) validate() error {
	if p.ID == 0 {
		return errors.New("replica ID is zero")
	}
	if err := checkReachableAddr(p.PaxosAddr); err != nil {
		return fmt.Errorf("replica %d's PaxosAddr: %v", p.ID, err)
	}
	if err := checkReachableAddr(p.APIAddr); err != nil {
		return fmt.Errorf("replica %d's APIAddr: %v", p.ID, err)
	}
	return nil
}

// checkReachableAddr accepts a host:port that another machine can dial: a
// host and a port from 1 to 65535, at most AddrBytesMax bytes.
func checkReachableAddr(addr string) error {
	if len(addr) > AddrBytesMax {
		return fmt.Errorf("%d bytes, at most %d", len(addr), AddrBytesMax)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%q: port must be 1-65535", addr)
	}
	return nil
}

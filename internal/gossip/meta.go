package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/hashicorp/memberlist"
)

// metaVersion opens a replica's node meta. The layout: the version, the
// replica ID (uvarint), its cluster ID (16 bytes, zero while unknown),
// then the Paxos and the API address, each a uvarint length and its
// bytes. Nothing may follow. Version 1, before the cluster ID, is read
// too (a replica of the version before, during an upgrade), as knowing
// none.
const (
	metaVersion   = 2
	metaVersionV1 = 1
)

// maxAddrBytes bounds an address in the meta (a host name may be long;
// memberlist bounds the whole at MetaMaxSize, 512 bytes).
const maxAddrBytes = 253 + len(":65535")

func encodeMeta(p Peer) ([]byte, error) {
	for what, a := range map[string]string{"Paxos": p.PaxosAddr, "API": p.APIAddr} {
		if _, _, err := net.SplitHostPort(a); err != nil || len(a) > maxAddrBytes {
			return nil, fmt.Errorf("replica %d's %s address %q is not a host:port of at most %d bytes", p.ID, what, a, maxAddrBytes)
		}
	}
	b := []byte{metaVersion}
	b = binary.AppendUvarint(b, p.ID)
	b = append(b, p.ClusterID[:]...)
	for _, a := range []string{p.PaxosAddr, p.APIAddr} {
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("replica %d's meta is %d bytes, over memberlist's %d", p.ID, len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

var errMeta = errors.New("gossip: bad node meta")

func decodeMeta(b []byte) (Peer, error) {
	if len(b) == 0 || b[0] != metaVersion && b[0] != metaVersionV1 {
		return Peer{}, fmt.Errorf("%w: not version %d (nor %d)", errMeta, metaVersion, metaVersionV1)
	}
	version := b[0]
	b = b[1:]
	id, n := binary.Uvarint(b)
	if n <= 0 || id == 0 {
		return Peer{}, fmt.Errorf("%w: no replica ID", errMeta)
	}
	b = b[n:]
	var cluster [ClusterIDBytes]byte
	if version == metaVersion {
		if len(b) < ClusterIDBytes {
			return Peer{}, fmt.Errorf("%w: the cluster ID is cut short", errMeta)
		}
		copy(cluster[:], b)
		b = b[ClusterIDBytes:]
	}
	var addrs [2]string
	for i := range addrs {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(maxAddrBytes) || uint64(len(b)-n) < l {
			return Peer{}, fmt.Errorf("%w: address %d is cut short or too long", errMeta, i)
		}
		addrs[i] = string(b[n : n+int(l)])
		b = b[n+int(l):]
		if _, _, err := net.SplitHostPort(addrs[i]); err != nil {
			return Peer{}, fmt.Errorf("%w: %q is not host:port", errMeta, addrs[i])
		}
	}
	if len(b) != 0 {
		return Peer{}, fmt.Errorf("%w: %d bytes after the addresses", errMeta, len(b))
	}
	return Peer{ID: id, ClusterID: cluster, PaxosAddr: addrs[0], APIAddr: addrs[1]}, nil
}

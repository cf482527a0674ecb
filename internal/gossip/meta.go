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
// the Paxos and the API address, each a uvarint length and its bytes,
// then its shared settings' fingerprints: a count (at most
// MaxSettingCode) and that many codes (ascending, 1 to MaxSettingCode),
// each followed by its FingerprintBytes. Nothing may follow. Versions 1
// (before the cluster ID) and 2 (before the settings) are read too (a
// replica of a version before, during an upgrade): as knowing no cluster
// ID, and publishing no settings, which are then not compared. A
// replica of version 2 or 1 refuses this version's meta (it knows no
// later one), so until it is upgraded it keeps the addresses it learned
// before and takes no new ones from an upgraded replica.
const (
	metaVersion   = 3
	metaVersionV2 = 2
	metaVersionV1 = 1
)

// maxAddrBytes bounds an address in the meta (a host name may be long;
// memberlist bounds the whole at MetaMaxSize, 512 bytes, which encodeMeta
// checks: two addresses of this length and every setting do not fit).
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
	b = append(b, byte(p.settings.count()))
	for code := uint8(1); code <= MaxSettingCode; code++ {
		if sum, ok := p.settings.get(code); ok {
			b = append(b, code)
			b = append(b, sum[:]...)
		}
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("replica %d's meta is %d bytes, over memberlist's %d: shorten its advertised addresses (%d and %d bytes)",
			p.ID, len(b), memberlist.MetaMaxSize, len(p.PaxosAddr), len(p.APIAddr))
	}
	return b, nil
}

var errMeta = errors.New("gossip: bad node meta")

func decodeMeta(b []byte) (Peer, error) {
	if len(b) == 0 || b[0] != metaVersion && b[0] != metaVersionV2 && b[0] != metaVersionV1 {
		return Peer{}, fmt.Errorf("%w: not version %d (nor %d, %d)", errMeta, metaVersion, metaVersionV2, metaVersionV1)
	}
	version := b[0]
	b = b[1:]
	id, n := binary.Uvarint(b)
	if n <= 0 || id == 0 {
		return Peer{}, fmt.Errorf("%w: no replica ID", errMeta)
	}
	b = b[n:]
	var cluster [ClusterIDBytes]byte
	if version >= metaVersionV2 {
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
	var settings settingSums
	if version >= metaVersion {
		var err error
		if settings, b, err = decodeSettings(b); err != nil {
			return Peer{}, err
		}
	}
	if len(b) != 0 {
		return Peer{}, fmt.Errorf("%w: %d bytes after the end", errMeta, len(b))
	}
	return Peer{ID: id, ClusterID: cluster, PaxosAddr: addrs[0], APIAddr: addrs[1], settings: settings}, nil
}

// decodeSettings reads the settings' fingerprints off the front of b.
func decodeSettings(b []byte) (settingSums, []byte, error) {
	var s settingSums
	if len(b) == 0 || b[0] > MaxSettingCode {
		return s, nil, fmt.Errorf("%w: no count of settings, or one over %d", errMeta, MaxSettingCode)
	}
	count := int(b[0])
	b = b[1:]
	last := uint8(0)
	for i := range count {
		if len(b) < 1+FingerprintBytes {
			return s, nil, fmt.Errorf("%w: setting %d of %d is cut short", errMeta, i+1, count)
		}
		code := b[0]
		if code <= last || code > MaxSettingCode {
			return s, nil, fmt.Errorf("%w: setting code %d after %d (ascending, 1 to %d)", errMeta, code, last, MaxSettingCode)
		}
		last = code
		s.set(code, Fingerprint(b[1:1+FingerprintBytes]))
		b = b[1+FingerprintBytes:]
	}
	return s, b, nil
}

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
// each followed by its FingerprintBytes. Nothing may follow in version
// 3 (replicas of version 3 before the rule below refuse anything after
// the settings). Versions 1 (before the cluster ID) and 2 (before the
// settings) are read too (a replica of a version before, during an
// upgrade): as knowing no cluster ID, and publishing no settings, which
// are then not compared. A replica of version 2 or 1 refuses this
// version's meta (it knows no later one), so until it is upgraded it
// keeps the addresses it learned before and takes no new ones from an
// upgraded replica.
//
// A later version (4 to 255) is read, so that adding to the meta does
// not break a rolling upgrade again: it must keep version 3's layout as
// its prefix, and may only append items, each a tag (uvarint, ascending,
// from 1), a length (uvarint) and that many bytes. This version reads
// the prefix as version 3 and skips every item (it knows no tag), so a
// new field, or a setting with a code over MaxSettingCode, goes in an
// item of its own under a new version number. The items must still be
// whole, tags ascending, and the meta within memberlist's MetaMaxSize:
// a meta cut short is refused, not read as a later one. A change that
// cannot be made so (a field of version 3 removed or read otherwise)
// breaks a rolling upgrade, and its version must say so here.
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
	if len(b) > memberlist.MetaMaxSize {
		return Peer{}, fmt.Errorf("%w: %d bytes, over memberlist's %d", errMeta, len(b), memberlist.MetaMaxSize)
	}
	if len(b) == 0 || b[0] == 0 {
		return Peer{}, fmt.Errorf("%w: no version", errMeta)
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
	addrs, b, err := decodeAddrs(b)
	if err != nil {
		return Peer{}, err
	}
	var settings settingSums
	if version >= metaVersion {
		if settings, b, err = decodeSettings(b); err != nil {
			return Peer{}, err
		}
	}
	if version > metaVersion {
		if b, err = skipItems(b); err != nil {
			return Peer{}, err
		}
	}
	if len(b) != 0 {
		return Peer{}, fmt.Errorf("%w: %d bytes after the end of version %d", errMeta, len(b), version)
	}
	return Peer{ID: id, ClusterID: cluster, PaxosAddr: addrs[0], APIAddr: addrs[1], settings: settings}, nil
}

// decodeAddrs reads the Paxos and the API address off the front of b.
func decodeAddrs(b []byte) ([2]string, []byte, error) {
	var addrs [2]string
	for i := range addrs {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(maxAddrBytes) || uint64(len(b)-n) < l {
			return addrs, nil, fmt.Errorf("%w: address %d is cut short or too long", errMeta, i)
		}
		addrs[i] = string(b[n : n+int(l)])
		b = b[n+int(l):]
		if _, _, err := net.SplitHostPort(addrs[i]); err != nil {
			return addrs, nil, fmt.Errorf("%w: %q is not host:port", errMeta, addrs[i])
		}
	}
	return addrs, b, nil
}

// skipItems reads the items a later version appends to version 3's
// layout and skips them all: this version knows no tag. It returns what
// follows the last whole item, which is nothing in a meta whole.
func skipItems(b []byte) ([]byte, error) {
	last := uint64(0)
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 || tag <= last {
			return nil, fmt.Errorf("%w: an item's tag is cut short, 0 or not above the one before (%d)", errMeta, last)
		}
		b = b[n:]
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return nil, fmt.Errorf("%w: item %d is cut short", errMeta, tag)
		}
		b = b[n+int(l):]
		last = tag
	}
	return b, nil
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

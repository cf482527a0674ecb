package membership

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestPeerInfoRoundTrip(t *testing.T) {
	long := strings.Repeat("h", AddrBytesMax-len(":65535")) + ":65535"
	for _, p := range []PeerInfo{
		{ID: 1, PaxosAddr: "127.0.0.1:7001", APIAddr: "127.0.0.1:8001"},
		{ID: math.MaxUint64, PaxosAddr: "[::1]:1", APIAddr: "replica-3.example:65535"},
		{ID: 300, PaxosAddr: long, APIAddr: "h:1"},
	} {
		b, err := encodePeerInfo(p)
		if err != nil {
			t.Fatalf("encode(%+v): %v", p, err)
		}
		got, err := decodePeerInfo(b)
		if err != nil || got != p {
			t.Errorf("decode(encode(%+v)) = %+v, %v", p, got, err)
		}
	}
}

func TestPeerInfoLayout(t *testing.T) {
	b, err := encodePeerInfo(PeerInfo{ID: 300, PaxosAddr: "a:1", APIAddr: "b:22"})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{1, 0xac, 0x02, 3, 'a', ':', '1', 4, 'b', ':', '2', '2'}
	if !bytes.Equal(b, want) {
		t.Errorf("encode = %v, want %v", b, want)
	}
}

func TestEncodePeerInfoRefuses(t *testing.T) {
	tooLong := strings.Repeat("h", AddrBytesMax-len(":1")+1) + ":1"
	longest := strings.Repeat("h", AddrBytesMax-len(":1")) + ":1"
	for _, tc := range []struct {
		name string
		p    PeerInfo
	}{
		{"zero ID", PeerInfo{ID: 0, PaxosAddr: "a:1", APIAddr: "a:2"}},
		{"no PaxosAddr", PeerInfo{ID: 1, APIAddr: "a:2"}},
		{"no APIAddr", PeerInfo{ID: 1, PaxosAddr: "a:1"}},
		{"no port", PeerInfo{ID: 1, PaxosAddr: "a", APIAddr: "a:2"}},
		{"port 0", PeerInfo{ID: 1, PaxosAddr: "a:0", APIAddr: "a:2"}},
		{"port too big", PeerInfo{ID: 1, PaxosAddr: "a:65536", APIAddr: "a:2"}},
		{"named port", PeerInfo{ID: 1, PaxosAddr: "a:http", APIAddr: "a:2"}},
		{"no host", PeerInfo{ID: 1, PaxosAddr: ":1", APIAddr: "a:2"}},
		{"address too long", PeerInfo{ID: 1, PaxosAddr: tooLong, APIAddr: "a:2"}},
		// Each address fits, the two do not: over memberlist's 512 bytes.
		{"meta too long", PeerInfo{ID: 1, PaxosAddr: longest, APIAddr: longest}},
	} {
		if b, err := encodePeerInfo(tc.p); !errors.Is(err, ErrMeta) {
			t.Errorf("%s: encode(%+v) = %d bytes, %v; want ErrMeta", tc.name, tc.p, len(b), err)
		}
	}
}

func TestDecodePeerInfoRefuses(t *testing.T) {
	good, err := encodePeerInfo(PeerInfo{ID: 5, PaxosAddr: "a:1", APIAddr: "b:2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"version 0", append([]byte{0}, good[1:]...)},
		{"version 2", append([]byte{2}, good[1:]...)},
		{"no ID", []byte{1}},
		{"ID zero", []byte{1, 0, 3, 'a', ':', '1', 3, 'b', ':', '2'}},
		{"overlong ID", []byte{1, 0x85, 0x00, 3, 'a', ':', '1', 3, 'b', ':', '2'}},
		{"cut in an address", good[:len(good)-1]},
		{"no API address", good[:6]},
		{"a byte after", append(bytes.Clone(good), 0)},
		{"length past the end", []byte{1, 5, 9, 'a', ':', '1'}},
		{"address not host:port", []byte{1, 5, 1, 'a', 3, 'b', ':', '2'}},
		{"over MetaMaxSize", append(bytes.Clone(good), make([]byte, memberlist.MetaMaxSize)...)},
	} {
		if p, err := decodePeerInfo(tc.b); !errors.Is(err, ErrMeta) {
			t.Errorf("%s: decode(%v) = %+v, %v; want ErrMeta", tc.name, tc.b, p, err)
		}
	}
}

// FuzzDecodePeerInfo: any bytes are refused or decode to a PeerInfo that
// encodes back to exactly those bytes; the decoder never panics.
func FuzzDecodePeerInfo(f *testing.F) {
	for _, p := range []PeerInfo{
		{ID: 1, PaxosAddr: "127.0.0.1:7001", APIAddr: "127.0.0.1:8001"},
		{ID: 1 << 40, PaxosAddr: "[::1]:7002", APIAddr: "replica.example:8002"},
	} {
		b, err := encodePeerInfo(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0x85, 0x00, 3, 'a', ':', '1', 3, 'b', ':', '2'})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePeerInfo(b)
		if err != nil {
			if !errors.Is(err, ErrMeta) {
				t.Fatalf("decode error %v does not wrap ErrMeta", err)
			}
			return
		}
		again, err := encodePeerInfo(p)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decode(%q) = %+v, which encodes to %q, %v", b, p, again, err)
		}
		if p.ID == 0 || len(b) > memberlist.MetaMaxSize {
			t.Fatalf("decode(%q) = %+v accepted", b, p)
		}
	})
}

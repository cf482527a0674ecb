package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"paxcron/paxos"
)

// FuzzFrameReader reads any byte stream as an authenticated peer's frames.
// No input may panic; a length prefix above paxos.MaxMessageBytes is
// refused with errOversized before a byte of its payload is read or a
// buffer for it allocated; the buffer never grows beyond the largest
// length claimed within the limit; every frame returned is exactly the
// bytes the stream held after its prefix; and a payload that decodes
// re-frames (encodeFrame) to the same prefix and payload.
func FuzzFrameReader(f *testing.F) {
	hb := paxos.Message{Type: paxos.MsgHeartbeat, From: 1, To: 2, Ballot: paxos.Ballot{Round: 3, Replica: 1}, Round: 7}
	acc := paxos.Message{Type: paxos.MsgAccept, From: 1, To: 2, Ballot: paxos.Ballot{Round: 3, Replica: 1}, Start: 5,
		Entries: []paxos.Entry{{Slot: 5, Ballot: paxos.Ballot{Round: 3, Replica: 1}, Kind: paxos.EntryCommand, Data: []byte("cmd")}}}
	var two []byte
	for _, m := range []paxos.Message{hb, acc} {
		fr, err := encodeFrame(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(fr)
		two = append(two, fr...)
	}
	f.Add(two)
	f.Add([]byte{0, 0, 0, 0})
	f.Add(binary.BigEndian.AppendUint32(nil, paxos.MaxMessageBytes+1))
	f.Add(binary.BigEndian.AppendUint32(nil, 0xffffffff))
	f.Add(append(binary.BigEndian.AppendUint32(nil, 100), "cut short"...))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		fr := frameReader{r: r}
		claimedMax := 0
		for {
			start := len(stream) - r.Len()
			var claimed uint32
			if start+frameHeaderBytes <= len(stream) {
				claimed = binary.BigEndian.Uint32(stream[start:])
			}
			b, err := fr.next()
			if claimed <= paxos.MaxMessageBytes {
				claimedMax = max(claimedMax, int(claimed))
			}
			if cap(fr.buf) > claimedMax {
				t.Fatalf("buffer of %d bytes after claims of at most %d", cap(fr.buf), claimedMax)
			}
			if err != nil {
				checkFrameError(t, err, stream[start:], r.Len())
				return
			}
			if uint32(len(b)) != claimed || !bytes.Equal(b, stream[start+frameHeaderBytes:start+frameHeaderBytes+len(b)]) {
				t.Fatalf("frame of %d bytes where the prefix claimed %d, or not the stream's bytes", len(b), claimed)
			}
			checkReframe(t, b)
		}
	})
}

// checkFrameError checks why next failed on rest, the stream from the
// frame's start; left is what it did not consume.
func checkFrameError(t *testing.T, err error, rest []byte, left int) {
	t.Helper()
	switch {
	case len(rest) == 0:
		if err != io.EOF {
			t.Fatalf("at the end of the stream: %v, want io.EOF", err)
		}
	case len(rest) < frameHeaderBytes:
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("a cut prefix: %v", err)
		}
	case binary.BigEndian.Uint32(rest) > paxos.MaxMessageBytes:
		if !errors.Is(err, errOversized) {
			t.Fatalf("claimed %d bytes: %v, want errOversized", binary.BigEndian.Uint32(rest), err)
		}
		if left != len(rest)-frameHeaderBytes {
			t.Fatalf("read %d bytes of an oversized frame's payload", len(rest)-frameHeaderBytes-left)
		}
	default:
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			t.Fatalf("a cut payload: %v", err)
		}
	}
}

// checkReframe: a payload that decodes is framed again to a prefix of its
// length and the canonical encoding, which decodes to the same message.
func checkReframe(t *testing.T, payload []byte) {
	t.Helper()
	m, err := paxos.DecodeMessage(payload)
	if err != nil {
		return
	}
	again, err := encodeFrame(m)
	if err != nil {
		t.Fatalf("a decoded %s does not frame: %v", m, err)
	}
	if n := binary.BigEndian.Uint32(again); int(n) != len(again)-frameHeaderBytes {
		t.Fatalf("encodeFrame's prefix %d for a payload of %d bytes", n, len(again)-frameHeaderBytes)
	}
	fr := frameReader{r: bytes.NewReader(again)}
	b, err := fr.next()
	if err != nil {
		t.Fatalf("reading back an encoded frame: %v", err)
	}
	if m2, err := paxos.DecodeMessage(b); err != nil || !reflect.DeepEqual(m, m2) {
		t.Fatalf("re-framed %s read back as %v, %v", m, m2, err)
	}
}

// FuzzAcceptHandshake plays a stranger's side of the handshake: hello and
// proof are whatever bytes it sends. Without the cluster key no input may
// be accepted (the acceptor's nonce is fresh, so no recorded proof
// fits); every refusal is an authentication failure; and the acceptor
// answers a hello only if it is well formed, for it, and from a member.
func FuzzAcceptHandshake(f *testing.F) {
	const self, member = 2, 1
	good := (&hello{from: member, to: self}).encode()
	f.Add(good)
	f.Add(append(good, make([]byte, macBytes)...))
	f.Add(append((&hello{from: 9, to: self}).encode(), make([]byte, macBytes)...))
	f.Add(append((&hello{from: self, to: self}).encode(), make([]byte, macBytes)...))
	f.Add(append((&hello{from: member, to: 3}).encode(), make([]byte, macBytes)...))
	f.Add(append((&hello{from: member, to: self, cluster: otherCluster}).encode(), make([]byte, macBytes)...))
	f.Add([]byte("PXT\x03"))
	f.Add([]byte("PXT\x02"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		rw := &scriptedConn{in: bytes.NewReader(in)}
		isMember := func(id paxos.ReplicaID) bool { return id == 1 || id == 2 || id == 3 }
		from, _, err := acceptHandshake(rw, testKey, []paxos.ReplicaID{1, 2, 3}, nil, testCluster, self, isMember)
		if err == nil {
			t.Fatalf("a stranger's bytes were accepted as replica %d", from)
		}
		if from != paxos.None || !isAuthErr(err) {
			t.Fatalf("refused with %v (from %d), want an authentication failure from nobody", err, from)
		}
		h, herr := decodeHello(in[:min(len(in), helloBytes)])
		answered := herr == nil && h.to == self && h.from != self && isMember(h.from)
		if want := 0; answered {
			want = challengeBytes
			if rw.out.Len() != want {
				t.Fatalf("answered a valid hello with %d bytes, want %d", rw.out.Len(), want)
			}
		} else if rw.out.Len() != want {
			t.Fatalf("answered a hello it refuses (%v) with %d bytes", herr, rw.out.Len())
		}
	})
}

// FuzzDecodeHello: a hello decodes only from exactly helloBytes bytes
// with the magic, and re-encodes to them.
func FuzzDecodeHello(f *testing.F) {
	f.Add((&hello{from: 1, to: 2, nonce: [nonceBytes]byte{1, 2, 3}}).encode())
	f.Add((&hello{from: 1, to: 2, cluster: testCluster, nonce: [nonceBytes]byte{1, 2, 3}}).encode())
	f.Add([]byte(helloMagic))
	f.Add(append([]byte("PXT\x00"), make([]byte, helloBytes-len(helloMagic))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHello(b)
		if err != nil {
			if !isAuthErr(err) {
				t.Fatalf("refused with %v, not an authentication failure", err)
			}
			if len(b) == helloBytes && bytes.HasPrefix(b, []byte(helloMagic)) {
				t.Fatalf("refused a well-formed hello: %v", err)
			}
			return
		}
		if again := h.encode(); !bytes.Equal(again, b) {
			t.Fatalf("decoded %x, re-encoded %x", b, again)
		}
	})
}

// scriptedConn reads a script and records what is written.
type scriptedConn struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (c *scriptedConn) Read(b []byte) (int, error)  { return c.in.Read(b) }
func (c *scriptedConn) Write(b []byte) (int, error) { return c.out.Write(b) }

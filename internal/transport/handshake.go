package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"paxcron/paxos"
)

// Handshake layout (see the package comment):
//
//	hello     dialer → acceptor  magic(4) | from(8) | to(8) | nonce(32)
//	challenge acceptor → dialer  nonce(32) | mac("accept")(32)
//	proof     dialer → acceptor  mac("dial")(32)
const (
	helloMagic = "PXT\x01"
	nonceBytes = 32
	macBytes   = sha256.Size
	helloBytes = len(helloMagic) + 8 + 8 + nonceBytes
)

// errAuth is wrapped by every handshake failure that is the peer's fault
// (wrong key, unknown or unexpected ID, bad magic).
var errAuth = errors.New("transport: authentication failed")

type hello struct {
	from, to paxos.ReplicaID
	nonce    [nonceBytes]byte
}

func (h *hello) encode() []byte {
	b := make([]byte, 0, helloBytes)
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint64(b, uint64(h.from))
	b = binary.BigEndian.AppendUint64(b, uint64(h.to))
	return append(b, h.nonce[:]...)
}

func decodeHello(b []byte) (hello, error) {
	var h hello
	if len(b) != helloBytes || string(b[:len(helloMagic)]) != helloMagic {
		return h, fmt.Errorf("%w: not a transport hello", errAuth)
	}
	b = b[len(helloMagic):]
	h.from = paxos.ReplicaID(binary.BigEndian.Uint64(b))
	h.to = paxos.ReplicaID(binary.BigEndian.Uint64(b[8:]))
	copy(h.nonce[:], b[16:])
	return h, nil
}

// handshakeMAC binds the key, the role that computed it, both IDs and
// both nonces.
func handshakeMAC(key []byte, role string, h *hello, acceptorNonce []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("paxcron transport v1 " + role))
	m.Write(h.encode())
	m.Write(acceptorNonce)
	return m.Sum(nil)
}

func newNonce() [nonceBytes]byte {
	var n [nonceBytes]byte
	if _, err := rand.Read(n[:]); err != nil {
		panic(fmt.Sprintf("transport: crypto/rand failed: %v", err))
	}
	return n
}

// dialHandshake runs the dialer's side on rw: from reaches to.
func dialHandshake(rw io.ReadWriter, key []byte, from, to paxos.ReplicaID) error {
	h := hello{from: from, to: to, nonce: newNonce()}
	if _, err := rw.Write(h.encode()); err != nil {
		return err
	}
	var ch [nonceBytes + macBytes]byte
	if _, err := io.ReadFull(rw, ch[:]); err != nil {
		return fmt.Errorf("%w: reading challenge (the peer closed: wrong key, or not replica %d?): %w", errAuth, to, err)
	}
	if !hmac.Equal(ch[nonceBytes:], handshakeMAC(key, "accept", &h, ch[:nonceBytes])) {
		return fmt.Errorf("%w: replica %d's proof does not match the cluster key", errAuth, to)
	}
	_, err := rw.Write(handshakeMAC(key, "dial", &h, ch[:nonceBytes]))
	return err
}

// acceptHandshake runs the acceptor's side on rw for replica self and
// returns the authenticated peer. isMember says whether an ID may connect.
func acceptHandshake(rw io.ReadWriter, key []byte, self paxos.ReplicaID, isMember func(paxos.ReplicaID) bool) (paxos.ReplicaID, error) {
	var hb [helloBytes]byte
	if _, err := io.ReadFull(rw, hb[:]); err != nil {
		return paxos.None, fmt.Errorf("%w: reading hello: %w", errAuth, err)
	}
	h, err := decodeHello(hb[:])
	if err != nil {
		return paxos.None, err
	}
	if h.to != self {
		return paxos.None, fmt.Errorf("%w: hello for replica %d reached replica %d", errAuth, h.to, self)
	}
	if h.from == self || !isMember(h.from) {
		return paxos.None, fmt.Errorf("%w: replica %d is not a peer", errAuth, h.from)
	}
	nonce := newNonce()
	if _, err := rw.Write(append(nonce[:], handshakeMAC(key, "accept", &h, nonce[:])...)); err != nil {
		return paxos.None, err
	}
	var proof [macBytes]byte
	if _, err := io.ReadFull(rw, proof[:]); err != nil {
		return paxos.None, fmt.Errorf("%w: reading proof from replica %d: %w", errAuth, h.from, err)
	}
	if !hmac.Equal(proof[:], handshakeMAC(key, "dial", &h, nonce[:])) {
		return paxos.None, fmt.Errorf("%w: replica %d's proof does not match the cluster key", errAuth, h.from)
	}
	return h.from, nil
}

func isAuthErr(err error) bool { return errors.Is(err, errAuth) }

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
//	hello     dialer → acceptor  magic(4) | from(8) | to(8) | incarnation(8) | nonce(32)
//	challenge acceptor → dialer  nonce(32) | mac("accept")(32)
//	proof     dialer → acceptor  mac("dial")(32)
//
// Version 2 (the magic's last byte) binds the members to both MACs;
// version 1 did not, and its replicas cannot connect to these (see
// legacyMagic).
const (
	helloMagic = "PXT\x02"
	// legacyMagic opens version 1's hello: refused, and named as such.
	legacyMagic = "PXT\x01"
	nonceBytes  = 32
	macBytes    = sha256.Size
	helloBytes  = len(helloMagic) + 8 + 8 + 8 + nonceBytes
)

// errAuth is wrapped by every handshake failure that is the peer's fault
// (wrong key, unknown or unexpected ID, bad magic).
var errAuth = errors.New("transport: authentication failed")

// errClosedMidHandshake is wrapped, beside errAuth, when the other end
// closed the connection during the handshake: it refused us (it then
// says why on its side), or it was stopping.
var errClosedMidHandshake = errors.New("the other end closed the connection during the handshake")

type hello struct {
	from, to paxos.ReplicaID
	// incarnation is drawn at random when the dialer's transport starts:
	// a restarted replica has a new one, and two processes running as one
	// replica have two (see Transport.admit).
	incarnation uint64
	nonce       [nonceBytes]byte
}

func (h *hello) encode() []byte {
	b := make([]byte, 0, helloBytes)
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint64(b, uint64(h.from))
	b = binary.BigEndian.AppendUint64(b, uint64(h.to))
	b = binary.BigEndian.AppendUint64(b, h.incarnation)
	return append(b, h.nonce[:]...)
}

func decodeHello(b []byte) (hello, error) {
	var h hello
	if len(b) >= len(legacyMagic) && string(b[:len(legacyMagic)]) == legacyMagic {
		return h, fmt.Errorf("%w: a replica of an earlier paxcron version dialed in (transport version 1, whose handshake does not bind the members): "+
			"replicas of that version and this one do not connect; finish upgrading every replica", errAuth)
	}
	if len(b) != helloBytes || string(b[:len(helloMagic)]) != helloMagic {
		return h, fmt.Errorf("%w: not a transport hello", errAuth)
	}
	b = b[len(helloMagic):]
	h.from = paxos.ReplicaID(binary.BigEndian.Uint64(b))
	h.to = paxos.ReplicaID(binary.BigEndian.Uint64(b[8:]))
	h.incarnation = binary.BigEndian.Uint64(b[16:])
	copy(h.nonce[:], b[24:])
	return h, nil
}

// handshakeMAC binds the key, the role that computed it, both IDs, both
// nonces and the cluster's members (sorted), so that replicas whose
// cluster.members differ refuse each other: quorums of different member
// lists need not intersect (found in review, the operator's procedures:
// a replica given [1 2 3] in a cluster of five counted two votes a
// quorum, and joined in).
//
// agreed (Config.Agreed) is bound after them: settings every replica must
// share beside the members.
func handshakeMAC(key []byte, role string, h *hello, acceptorNonce []byte, members []paxos.ReplicaID, agreed []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("paxcron transport v2 " + role))
	m.Write(h.encode())
	m.Write(acceptorNonce)
	var b []byte
	b = binary.BigEndian.AppendUint64(b, uint64(len(members)))
	for _, id := range members {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
	}
	m.Write(b)
	m.Write(agreed)
	return m.Sum(nil)
}

func newNonce() [nonceBytes]byte {
	var n [nonceBytes]byte
	if _, err := rand.Read(n[:]); err != nil {
		panic(fmt.Sprintf("transport: crypto/rand failed: %v", err))
	}
	return n
}

// dialHandshake runs the dialer's side on rw: from reaches to. keys are
// the cluster keys this replica accepts, the one it sends with first: the
// acceptor proves itself with its own first key, which must be one of
// them, and the dialer answers with the same key (so that during a key
// rotation replicas whose first keys differ still connect, as long as
// each holds the other's first key).
func dialHandshake(rw io.ReadWriter, keys [][]byte, members []paxos.ReplicaID, agreed []byte, from, to paxos.ReplicaID, incarnation uint64) error {
	h := hello{from: from, to: to, incarnation: incarnation, nonce: newNonce()}
	if _, err := rw.Write(h.encode()); err != nil {
		return err
	}
	var ch [nonceBytes + macBytes]byte
	if _, err := io.ReadFull(rw, ch[:]); err != nil {
		return fmt.Errorf("%w: %w: replica %d refused this replica's hello (is it replica %d, and does it count this one a member?), or was stopping: %w",
			errAuth, errClosedMidHandshake, to, to, err)
	}
	for _, key := range keys {
		if hmac.Equal(ch[nonceBytes:], handshakeMAC(key, "accept", &h, ch[:nonceBytes], members, agreed)) {
			_, err := rw.Write(handshakeMAC(key, "dial", &h, ch[:nonceBytes], members, agreed))
			return err
		}
	}
	return fmt.Errorf("%w: replica %d proved itself under a cluster key this replica does not hold (it holds %d: cluster.key_file and cluster.accept_key_files), "+
		"or for other members than this replica's %v, or other shared settings: the key files or cluster.members differ, "+
		"or the replicas run versions whose timing differs", errAuth, to, len(keys), members)
}

// acceptHandshake runs the acceptor's side on rw for replica self and
// returns the authenticated peer and its incarnation. isMember says
// whether an ID may connect.
// members are the cluster's, sorted.
func acceptHandshake(rw io.ReadWriter, key []byte, members []paxos.ReplicaID, agreed []byte, self paxos.ReplicaID, isMember func(paxos.ReplicaID) bool) (paxos.ReplicaID, uint64, error) {
	var hb [helloBytes]byte
	// The magic first: version 1's hello is shorter, and its dialer
	// would wait for an answer while this side waited for the rest.
	if _, err := io.ReadFull(rw, hb[:len(helloMagic)]); err != nil {
		return paxos.None, 0, fmt.Errorf("%w: reading hello: %w", errAuth, err)
	}
	if string(hb[:len(legacyMagic)]) == legacyMagic {
		_, err := decodeHello(hb[:len(legacyMagic)])
		return paxos.None, 0, err
	}
	if _, err := io.ReadFull(rw, hb[len(helloMagic):]); err != nil {
		return paxos.None, 0, fmt.Errorf("%w: reading hello: %w", errAuth, err)
	}
	h, err := decodeHello(hb[:])
	if err != nil {
		return paxos.None, 0, err
	}
	if h.to != self {
		return paxos.None, 0, fmt.Errorf("%w: replica %d dialed replica %d but reached replica %d: its address for replica %d points here", errAuth, h.from, h.to, self, h.to)
	}
	if h.from == self {
		return paxos.None, 0, fmt.Errorf("%w: a replica that calls itself replica %d, as this one does, dialed in: two replicas hold the same replica_id, or a peer address points here", errAuth, self)
	}
	if !isMember(h.from) {
		return paxos.None, 0, fmt.Errorf("%w: replica %d is not a member here (are the cluster.members lists the same on every replica?)", errAuth, h.from)
	}
	nonce := newNonce()
	if _, err := rw.Write(append(nonce[:], handshakeMAC(key, "accept", &h, nonce[:], members, agreed)...)); err != nil {
		return paxos.None, 0, err
	}
	var proof [macBytes]byte
	if _, err := io.ReadFull(rw, proof[:]); err != nil {
		return paxos.None, 0, fmt.Errorf("%w: %w: replica %d does not hold this replica's first cluster key, or counts other members than %v, or other shared settings, or was stopping: %w",
			errAuth, errClosedMidHandshake, h.from, members, err)
	}
	if !hmac.Equal(proof[:], handshakeMAC(key, "dial", &h, nonce[:], members, agreed)) {
		return paxos.None, 0, fmt.Errorf("%w: replica %d's proof does not match this replica's first cluster key (cluster.key_file), members %v and shared settings: "+
			"the key files or cluster.members differ, or the replicas run versions whose timing differs", errAuth, h.from, members)
	}
	return h.from, h.incarnation, nil
}

func isAuthErr(err error) bool { return errors.Is(err, errAuth) }

package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"paxcron/paxos"
)

// Handshake layout (see the package comment):
//
//	hello     dialer → acceptor  magic(4) | from(8) | to(8) | incarnation(8) | cluster(16) | nonce(32)
//	challenge acceptor → dialer  nonce(32) | cluster(16) | mac("accept")(32)
//	proof     dialer → acceptor  mac("dial")(32)
//
// Version 3 (the magic's last byte) carries each side's cluster ID and
// binds both to both MACs; version 2 bound the members but no cluster
// ID, version 1 not even the members. Replicas of either and these do
// not connect (see legacyMagics).
const (
	helloMagic     = "PXT\x03"
	nonceBytes     = 32
	macBytes       = sha256.Size
	helloBytes     = len(helloMagic) + 8 + 8 + 8 + ClusterIDBytes + nonceBytes
	challengeBytes = nonceBytes + ClusterIDBytes + macBytes
)

// ClusterIDBytes is the length of a cluster ID (cron/state.ClusterID).
const ClusterIDBytes = 16

// HelloBytes is the length of a hello, the first thing a dialer sends:
// what a probe of a replica's port from outside must send whole to be
// refused for what it says rather than cut off at the handshake timeout.
const HelloBytes = helloBytes

// ClusterID is a cluster's ID as the handshake carries it; zero: not
// known yet (a new replica, or one rebuilding from its peers).
type ClusterID [ClusterIDBytes]byte

func (id ClusterID) String() string {
	if id == (ClusterID{}) {
		return "(none yet)"
	}
	return hex.EncodeToString(id[:])
}

// legacyMagics open the hellos of earlier versions: refused, and named.
var legacyMagics = map[string]string{
	"PXT\x01": "transport version 1, whose handshake binds neither the members nor the cluster ID",
	"PXT\x02": "transport version 2, whose handshake does not bind the cluster ID",
}

// errAuth is wrapped by every handshake failure that is the peer's fault
// (wrong key, unknown or unexpected ID, bad magic).
var errAuth = errors.New("transport: authentication failed")

// ErrOtherCluster is wrapped, beside the authentication failure, by a
// handshake refused because the two replicas hold different cluster IDs:
// one of them holds another cluster's state.
var ErrOtherCluster = errors.New("transport: a replica of another cluster")

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
	// cluster is the dialer's cluster ID, zero if it knows none yet.
	cluster ClusterID
	nonce   [nonceBytes]byte
}

func (h *hello) encode() []byte {
	b := make([]byte, 0, helloBytes)
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint64(b, uint64(h.from))
	b = binary.BigEndian.AppendUint64(b, uint64(h.to))
	b = binary.BigEndian.AppendUint64(b, h.incarnation)
	b = append(b, h.cluster[:]...)
	return append(b, h.nonce[:]...)
}

// legacyHello names the earlier version whose magic b opens with, if
// any.
func legacyHello(b []byte) error {
	if len(b) < len(helloMagic) {
		return nil
	}
	if what, ok := legacyMagics[string(b[:len(helloMagic)])]; ok {
		return fmt.Errorf("%w: a replica of an earlier paxcron version dialed in (%s): "+
			"replicas of that version and this one do not connect; finish upgrading every replica", errAuth, what)
	}
	return nil
}

func decodeHello(b []byte) (hello, error) {
	var h hello
	if err := legacyHello(b); err != nil {
		return h, err
	}
	if len(b) != helloBytes || string(b[:len(helloMagic)]) != helloMagic {
		return h, fmt.Errorf("%w: not a transport hello", errAuth)
	}
	b = b[len(helloMagic):]
	h.from = paxos.ReplicaID(binary.BigEndian.Uint64(b))
	h.to = paxos.ReplicaID(binary.BigEndian.Uint64(b[8:]))
	h.incarnation = binary.BigEndian.Uint64(b[16:])
	copy(h.cluster[:], b[24:])
	copy(h.nonce[:], b[24+ClusterIDBytes:])
	return h, nil
}

// handshakeMAC binds the key, the role that computed it, both IDs, both
// nonces, both cluster IDs (the dialer's in the hello) and the cluster's
// members (sorted), so that replicas whose cluster.members differ refuse
// each other: quorums of different member lists need not intersect
// (found in review, the operator's procedures: a replica given [1 2 3]
// in a cluster of five counted two votes a quorum, and joined in).
//
// agreed (Config.Agreed) is bound after them: settings every replica must
// share beside the members.
func handshakeMAC(key []byte, role string, h *hello, acceptorNonce []byte, acceptorCluster ClusterID, members []paxos.ReplicaID, agreed []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("paxcron transport v3 " + role))
	m.Write(h.encode())
	m.Write(acceptorNonce)
	m.Write(acceptorCluster[:])
	var b []byte
	b = binary.BigEndian.AppendUint64(b, uint64(len(members)))
	for _, id := range members {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
	}
	m.Write(b)
	m.Write(agreed)
	return m.Sum(nil)
}

// checkCluster refuses a peer whose cluster ID differs from this
// replica's, both known, once the peer is authenticated (its ID is then
// its own: the MACs cover both). peer is the other replica's ID.
func checkCluster(self, peer paxos.ReplicaID, ours, theirs ClusterID) error {
	if ours == (ClusterID{}) || theirs == (ClusterID{}) || ours == theirs {
		return nil
	}
	return fmt.Errorf("%w: %w: replica %d holds the state of cluster %s, this replica (%d) that of cluster %s: "+
		"they share the cluster key and member IDs but not a log, and must never vote together. "+
		"One of them was started on a data folder (data_dir) copied or restored from another cluster, or a peer address points at another cluster's replica: "+
		"if every peer refuses this replica, its own data folder is the one to check; move the wrong folder aside and start that replica empty, without -bootstrap, to rejoin its cluster",
		errAuth, ErrOtherCluster, peer, theirs, self, ours)
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
// each holds the other's first key). cluster is this replica's cluster
// ID (zero: not known yet); a peer that proves another, both known, is
// answered (so that it refuses this replica too, naming both) and
// refused.
func dialHandshake(rw io.ReadWriter, keys [][]byte, members []paxos.ReplicaID, agreed []byte, cluster ClusterID, from, to paxos.ReplicaID, incarnation uint64) error {
	h := hello{from: from, to: to, incarnation: incarnation, cluster: cluster, nonce: newNonce()}
	if _, err := rw.Write(h.encode()); err != nil {
		return err
	}
	var ch [challengeBytes]byte
	if _, err := io.ReadFull(rw, ch[:]); err != nil {
		return fmt.Errorf("%w: %w: replica %d refused this replica's hello (is it replica %d, and does it count this one a member?), or was stopping: %w",
			errAuth, errClosedMidHandshake, to, to, err)
	}
	nonce, mac := ch[:nonceBytes], ch[nonceBytes+ClusterIDBytes:]
	theirs := ClusterID(ch[nonceBytes : nonceBytes+ClusterIDBytes])
	for _, key := range keys {
		if hmac.Equal(mac, handshakeMAC(key, "accept", &h, nonce, theirs, members, agreed)) {
			if _, err := rw.Write(handshakeMAC(key, "dial", &h, nonce, theirs, members, agreed)); err != nil {
				return err
			}
			return checkCluster(from, to, cluster, theirs)
		}
	}
	return fmt.Errorf("%w: replica %d proved itself under a cluster key this replica does not hold (it holds %d: cluster.key_file and cluster.accept_key_files), "+
		"or for other members than this replica's %v, or other shared settings: the key files or cluster.members differ, "+
		"or the replicas run versions whose timing differs", errAuth, to, len(keys), members)
}

// helloUnread is the error of a hello that could not be read whole: the
// other end closing before it was (a replica stopping, its dial cut
// short) refused nothing and is errClosedMidHandshake; a read that timed
// out is a refusal, since a dialer that never says hello is no replica.
func helloUnread(err error) error {
	if closedByPeer(err) {
		return fmt.Errorf("%w: %w: reading hello: %w", errAuth, errClosedMidHandshake, err)
	}
	return fmt.Errorf("%w: reading hello: %w", errAuth, err)
}

// acceptHandshake runs the acceptor's side on rw for replica self and
// returns the authenticated peer and its incarnation. isMember says
// whether an ID may connect. members are the cluster's, sorted; cluster
// is this replica's cluster ID (zero: not known yet): a peer that proves
// another, both known, is refused.
func acceptHandshake(rw io.ReadWriter, key []byte, members []paxos.ReplicaID, agreed []byte, cluster ClusterID, self paxos.ReplicaID, isMember func(paxos.ReplicaID) bool) (paxos.ReplicaID, uint64, error) {
	var hb [helloBytes]byte
	// The magic first: an earlier version's hello is shorter, and its
	// dialer would wait for an answer while this side waited for the rest.
	if _, err := io.ReadFull(rw, hb[:len(helloMagic)]); err != nil {
		return paxos.None, 0, helloUnread(err)
	}
	if err := legacyHello(hb[:len(helloMagic)]); err != nil {
		return paxos.None, 0, err
	}
	if _, err := io.ReadFull(rw, hb[len(helloMagic):]); err != nil {
		return paxos.None, 0, helloUnread(err)
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
	ch := append(append(nonce[:], cluster[:]...), handshakeMAC(key, "accept", &h, nonce[:], cluster, members, agreed)...)
	if _, err := rw.Write(ch); err != nil {
		return paxos.None, 0, err
	}
	var proof [macBytes]byte
	if _, err := io.ReadFull(rw, proof[:]); err != nil {
		return paxos.None, 0, fmt.Errorf("%w: %w: replica %d does not hold this replica's first cluster key, or counts other members than %v, or other shared settings, or was stopping: %w",
			errAuth, errClosedMidHandshake, h.from, members, err)
	}
	if !hmac.Equal(proof[:], handshakeMAC(key, "dial", &h, nonce[:], cluster, members, agreed)) {
		return paxos.None, 0, fmt.Errorf("%w: replica %d's proof does not match this replica's first cluster key (cluster.key_file), members %v and shared settings: "+
			"the key files or cluster.members differ, or the replicas run versions whose timing differs", errAuth, h.from, members)
	}
	if err := checkCluster(self, h.from, cluster, h.cluster); err != nil {
		return paxos.None, 0, err
	}
	return h.from, h.incarnation, nil
}

func isAuthErr(err error) bool { return errors.Is(err, errAuth) }

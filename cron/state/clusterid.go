package state

import (
	"encoding/hex"
	"fmt"
)

// ClusterIDBytes is the length of a ClusterID: 128 random bits, so that
// two clusters never draw the same one.
const ClusterIDBytes = 16

// ClusterID names one cluster for its whole life: the first leader of a
// cluster draws it and proposes it (SetClusterID), and every replica holds
// it in its state from the slot it is applied at, so it travels with
// snapshots and backups and a replica rebuilding from its peers learns it
// by catching up. Replicas refuse a peer whose state carries another one
// (internal/transport): its promises and accepted values belong to
// another cluster's log. The zero ClusterID is "not named yet".
type ClusterID [ClusterIDBytes]byte

// IsZero reports whether id is the zero ID: not named yet.
func (id ClusterID) IsZero() bool { return id == ClusterID{} }

// String is the ID in lowercase hex, "" for the zero ID.
func (id ClusterID) String() string {
	if id.IsZero() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// MarshalText writes String's form, so that JSON carries the ID as a hex
// string ("" when unset).
func (id ClusterID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (id *ClusterID) UnmarshalText(b []byte) error {
	v, err := ParseClusterID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ParseClusterID reads the hex form String writes; "" is the zero ID.
func ParseClusterID(s string) (ClusterID, error) {
	var id ClusterID
	if s == "" {
		return id, nil
	}
	if len(s) != 2*ClusterIDBytes {
		return id, fmt.Errorf("state: cluster ID %q: want %d hex digits", s, 2*ClusterIDBytes)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return ClusterID{}, fmt.Errorf("state: cluster ID %q: %w", s, err)
	}
	return id, nil
}

// clusterIDFromWire reads an ID as commands and snapshots carry it: no
// bytes for the zero ID, else exactly ClusterIDBytes, not all zero (one
// ID, one encoding).
func clusterIDFromWire(b []byte) (ClusterID, error) {
	var id ClusterID
	switch {
	case len(b) == 0:
		return id, nil
	case len(b) != ClusterIDBytes:
		return id, fmt.Errorf("cluster ID of %d bytes, want %d", len(b), ClusterIDBytes)
	}
	copy(id[:], b)
	if id.IsZero() {
		return id, fmt.Errorf("the zero cluster ID written as %d zero bytes, not as none", ClusterIDBytes)
	}
	return id, nil
}

// clusterIDToWire is the inverse of clusterIDFromWire.
func clusterIDToWire(id ClusterID) []byte {
	if id.IsZero() {
		return nil
	}
	return id[:]
}

// SetClusterID names the cluster: applied while the state holds no ID, it
// sets ID; once one is set, another is refused as stale (ErrStale: two
// leaders drew one each, and the first applied names the cluster on
// every replica) and the same one again is a duplicate (ErrDuplicate: a
// proposal repeated after a timeout). A leader that has caught up and
// finds no ID proposes one it drew (cron/launcher).
type SetClusterID struct {
	ID ClusterID
}

// Kind implements Command.
func (SetClusterID) Kind() Kind { return KindSetClusterID }

// Validate implements Command.
func (c SetClusterID) Validate() error {
	if c.ID.IsZero() {
		return invalid("the zero cluster ID")
	}
	return nil
}

// ClusterID returns the cluster's ID, zero until a SetClusterID is
// applied.
func (m *Machine) ClusterID() ClusterID { return m.clusterID }

func (m *Machine) setClusterID(c SetClusterID) error {
	switch {
	case m.clusterID.IsZero():
		m.clusterID = c.ID
		return nil
	case m.clusterID == c.ID:
		return fmt.Errorf("%w: the cluster ID is %s already", ErrDuplicate, c.ID)
	}
	return fmt.Errorf("%w: the cluster is named %s already; %s, drawn by another leader, is ignored", ErrStale, m.clusterID, c.ID)
}

// SnapshotWithClusterID re-encodes a snapshot with its cluster ID
// replaced by id (zero: not named): the same state, of another cluster.
// For a restore as a new cluster, whose replicas are all restored with
// one fresh ID (a copy of production restored as staging is not taken
// for production, from its first start). Through the codec, so that what
// it returns is checked like any snapshot. Never for a running replica's
// state: it changes the state outside the log.
func SnapshotWithClusterID(data []byte, id ClusterID) ([]byte, error) {
	m, err := DecodeSnapshot(data)
	if err != nil {
		return nil, err
	}
	m.clusterID = id
	return m.Snapshot()
}

package sim

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// hashMachine is the small state machine the simulator replicates until the
// cron layer arrives: a count of applied commands and a running hash over
// (slot, command). Two replicas that applied the same prefix hold the same
// hash, so comparing hashes per slot checks that snapshot + log tail rebuild
// exactly the state the full log builds.
type hashMachine struct {
	applied uint64
	hash    uint64
}

func (m *hashMachine) Apply(slot uint64, cmd []byte) {
	h := fnv.New64a()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], m.hash)
	binary.BigEndian.PutUint64(b[8:], slot)
	h.Write(b[:])
	h.Write(cmd)
	m.hash = h.Sum64()
	m.applied++
}

func (m *hashMachine) Snapshot() ([]byte, error) {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b[:8], m.applied)
	binary.BigEndian.PutUint64(b[8:], m.hash)
	return b, nil
}

func (m *hashMachine) Restore(data []byte) error {
	if len(data) != 16 {
		return fmt.Errorf("sim: snapshot of %d bytes, want 16", len(data))
	}
	m.applied = binary.BigEndian.Uint64(data[:8])
	m.hash = binary.BigEndian.Uint64(data[8:])
	return nil
}

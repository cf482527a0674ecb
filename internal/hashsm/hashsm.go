// Package hashsm owns the small state machine that the simulator and the
// in-process benchmark cluster replicate until the cron state machine
// arrives: a count of applied commands and a running CRC over (slot,
// command). Two replicas that applied the same sequence hold the same pair,
// so comparing pairs checks agreement, and a snapshot plus the log after it
// must rebuild the pair the full log builds.
package hashsm

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"
)

// Machine implements cron/replica's StateMachine.
type Machine struct {
	commands uint64
	hash     uint64
}

// crcTable is CRC-64/ECMA, chosen for speed (table-driven, 8 bytes at a
// time): benchmarks apply every command on three replicas, and a
// byte-at-a-time hash such as FNV showed up in their profiles.
var crcTable = crc64.MakeTable(crc64.ECMA)

// Apply folds the command chosen at slot into the state.
func (m *Machine) Apply(slot uint64, cmd []byte) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], slot)
	m.hash = crc64.Update(crc64.Update(m.hash, crcTable, b[:]), crcTable, cmd)
	m.commands++
}

// Commands is how many commands were applied.
func (m *Machine) Commands() uint64 { return m.commands }

// Hash is the running CRC over every applied (slot, command).
func (m *Machine) Hash() uint64 { return m.hash }

// Snapshot encodes the state in 16 bytes.
func (m *Machine) Snapshot() ([]byte, error) {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b[:8], m.commands)
	binary.BigEndian.PutUint64(b[8:], m.hash)
	return b, nil
}

// Restore replaces the state with a decoded snapshot.
func (m *Machine) Restore(data []byte) error {
	install, err := m.DecodeSnapshot(data)
	if err != nil {
		return err
	}
	install()
	return nil
}

// DecodeSnapshot implements replica.Decoder: it decodes data, and install
// replaces the state with it.
func (m *Machine) DecodeSnapshot(data []byte) (install func(), err error) {
	if len(data) != 16 {
		return nil, fmt.Errorf("hashsm: snapshot of %d bytes, want 16", len(data))
	}
	commands, hash := binary.BigEndian.Uint64(data[:8]), binary.BigEndian.Uint64(data[8:])
	return func() { m.commands, m.hash = commands, hash }, nil
}

package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// fileMagic opens a snapshot file (`paxcron operator snapshot save`).
const fileMagic = "paxcron-snapshot 1\n"

// NewInfo describes data as a snapshot of meta: its size and checksum
// (meta.TakenAt is the caller's: this package reads no clock).
func NewInfo(meta Meta, data []byte) Info {
	sum := sha256.Sum256(data)
	return Info{Meta: meta, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
}

// EncodeFile is a snapshot as one self-describing file: a magic line, the
// Info as one line of JSON, then the data.
func EncodeFile(info Info, data []byte) ([]byte, error) {
	head, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("backup: encoding the snapshot's header: %w", err)
	}
	out := make([]byte, 0, len(fileMagic)+len(head)+1+len(data))
	out = append(out, fileMagic...)
	out = append(out, head...)
	out = append(out, '\n')
	return append(out, data...), nil
}

// DecodeFile reads a snapshot file and verifies its data against the
// header's size and SHA-256.
func DecodeFile(b []byte) (Info, []byte, error) {
	rest, ok := bytes.CutPrefix(b, []byte(fileMagic))
	if !ok {
		return Info{}, nil, fmt.Errorf("%w: not a paxcron snapshot file (it does not start with %q)", ErrCorrupt, fileMagic[:len(fileMagic)-1])
	}
	head, data, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok {
		return Info{}, nil, fmt.Errorf("%w: the snapshot file's header is cut short", ErrCorrupt)
	}
	var info Info
	if err := json.Unmarshal(head, &info); err != nil {
		return Info{}, nil, fmt.Errorf("%w: the snapshot file's header: %v", ErrCorrupt, err)
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != info.Size || hex.EncodeToString(sum[:]) != info.SHA256 {
		return Info{}, nil, fmt.Errorf("%w: the snapshot file holds %d bytes with SHA-256 %x; its header says %d bytes, %s", ErrCorrupt, len(data), sum, info.Size, info.SHA256)
	}
	// The header is checked as a manifest is (checkManifest): a restore
	// takes its index and membership as they are.
	if err := info.Meta.validate(); err != nil {
		return Info{}, nil, fmt.Errorf("%w: the snapshot file's header: %v", ErrCorrupt, err)
	}
	return info, data, nil
}

package storage_test

import (
	"bytes"
	"runtime"
	"testing"

	"paxcron/paxos"
	"paxcron/storage"
)

// TestDecodeLargeSnapshotCopiesOnce decodes a snapshot record of 32 MiB and
// checks that it allocated about one copy of the image: msgpack, left to
// grow the image 256 KiB at a time, allocated the image over and over (a
// quadratic 2 GB here, 65 GB for a million jobs' 180 MB snapshot).
func TestDecodeLargeSnapshotCopiesOnce(t *testing.T) {
	const size = 32 << 20
	snap := paxos.Snapshot{
		Meta: paxos.SnapshotMeta{Index: 7, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}},
		Data: bytes.Repeat([]byte("paxcron!"), size/8),
	}
	c := storage.NewCodec()
	rec := c.AppendSnapshot(nil, snap)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := c.DecodeSnapshot(7, rec)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, snap.Data) || got.Meta.Index != 7 || len(got.Meta.Membership.Voters) != 3 {
		t.Fatalf("decoded %d bytes at %d, members %v: not what was encoded", len(got.Data), got.Meta.Index, got.Meta.Membership.Voters)
	}
	// Other tests of the package may allocate meanwhile; 3 images leave
	// them room, far below the quadratic growth.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*size {
		t.Errorf("decoding a %d-byte snapshot allocated %d bytes, want about one copy", size, alloc)
	}
	// The image must not alias the record (a store's read buffer).
	for i := range rec {
		rec[i] = 0
	}
	if !bytes.Equal(got.Data, snap.Data) {
		t.Error("the decoded image changed with the record it came from")
	}
}

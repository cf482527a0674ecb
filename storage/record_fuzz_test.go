package storage_test

import (
	"errors"
	"reflect"
	"testing"

	"paxcron/paxos"
	"paxcron/storage"
)

// FuzzDecodeRecord feeds arbitrary bytes to the decoder of each record
// kind. With resealed set the checksum is recomputed first, so that the
// msgpack decoder and the validation, not just the checksum, see the
// input. No input may panic; a failure must wrap ErrCorrupt; a success must
// re-encode to a record that decodes to the same value.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range allRecords() {
		if len(r.rec) < 1024 {
			f.Add(r.kind, r.id, false, r.rec)
			f.Add(r.kind, r.id, true, r.rec[:len(r.rec)-1])
		}
	}
	f.Fuzz(func(t *testing.T, kind byte, id uint64, resealed bool, rec []byte) {
		if resealed {
			rec = reseal(rec)
		}
		c := storage.NewCodec()
		switch kind % 5 {
		case 0:
			checkRoundTrip(t, rec, c.DecodeHardState,
				func(hs paxos.HardState) []byte { return c.AppendHardState(nil, hs) })
		case 1:
			checkRoundTrip(t, rec, func(rec []byte) (paxos.Entry, error) { return c.DecodeEntry(id, rec) },
				func(e paxos.Entry) []byte { return c.AppendEntry(nil, e) })
		case 2:
			checkRoundTrip(t, rec, func(rec []byte) (paxos.Snapshot, error) { return c.DecodeSnapshot(id, rec) },
				func(s paxos.Snapshot) []byte { return c.AppendSnapshot(nil, s) })
		case 3:
			checkRoundTrip(t, rec, func(rec []byte) (storage.SnapshotHeader, error) { return c.DecodeSnapshotHeader(id, rec) },
				func(h storage.SnapshotHeader) []byte { return c.AppendSnapshotHeader(nil, h) })
		case 4:
			n := chunkNumber(id)
			checkRoundTrip(t, rec, func(rec []byte) ([]byte, error) { return c.AppendSnapshotChunkData(nil, id, n, rec) },
				func(data []byte) []byte { return c.AppendSnapshotChunk(nil, id, n, data) })
		}
	})
}

func checkRoundTrip[T any](t *testing.T, rec []byte, decode func([]byte) (T, error), encode func(T) []byte) {
	v, err := decode(rec)
	if err != nil {
		if !errors.Is(err, storage.ErrCorrupt) {
			t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
		}
		return
	}
	again, err := decode(encode(v))
	if err != nil || !reflect.DeepEqual(v, again) {
		t.Fatalf("re-encoding %+v gave %+v, %v", v, again, err)
	}
}

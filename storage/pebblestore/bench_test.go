package pebblestore_test

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/pebblestore"
)

const benchDataBytes = 256

var benchBatchEntries = []int{1, 16, 128}

// BenchmarkSave measures Save of one batch of entries on the real disk
// under b.TempDir: one synced Pebble batch per op. Compare with
// BenchmarkRawPebbleSyncedBatch, which writes the same bytes with raw
// Pebble, to see what the store adds to the fsync.
func BenchmarkSave(b *testing.B) {
	for _, n := range benchBatchEntries {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			s, err := pebblestore.Open(b.TempDir(), pebblestore.Options{FS: vfs.Default, Logger: quietLogger{}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			es := make([]paxos.Entry, n)
			data := make([]byte, benchDataBytes)
			var slot uint64
			b.SetBytes(int64(n * benchDataBytes))
			b.ReportAllocs()
			for b.Loop() {
				for i := range es {
					slot++
					es[i] = paxos.Entry{Slot: slot, Ballot: paxos.Ballot{Round: 1, Replica: 1}, Kind: paxos.EntryCommand, Data: data}
				}
				if err := s.Save(storage.Update{Entries: es}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawPebbleSyncedBatch writes, per op, one raw Pebble batch
// committed with pebble.Sync holding n keys and values of exactly the sizes
// Save writes for n entries of 256-byte data.
func BenchmarkRawPebbleSyncedBatch(b *testing.B) {
	recordBytes := len(storage.NewCodec().AppendEntry(nil, paxos.Entry{
		Slot: 1, Ballot: paxos.Ballot{Round: 1, Replica: 1}, Kind: paxos.EntryCommand, Data: make([]byte, benchDataBytes),
	}))
	for _, n := range benchBatchEntries {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			db, err := pebble.Open(b.TempDir(), &pebble.Options{
				FS: vfs.Default, FormatMajorVersion: pebble.FormatNewest, Logger: quietLogger{},
			})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			key := make([]byte, 9)
			value := make([]byte, recordBytes)
			var slot uint64
			b.SetBytes(int64(n * benchDataBytes))
			b.ReportAllocs()
			for b.Loop() {
				batch := db.NewBatch()
				for range n {
					slot++
					key = append(key[:0], 'e', byte(slot>>56), byte(slot>>48), byte(slot>>40), byte(slot>>32),
						byte(slot>>24), byte(slot>>16), byte(slot>>8), byte(slot))
					if err := batch.Set(key, value, nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := batch.Commit(pebble.Sync); err != nil {
					b.Fatal(err)
				}
				_ = batch.Close()
			}
		})
	}
}

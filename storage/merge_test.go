package storage_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/memstore"
	"paxcron/storage/storetest"
)

// Saving a merged update leaves the store as saving each would have, with
// snapshots that keep a tail or not, and entries below earlier snapshots.
func TestMergeEqualsSequentialSaves(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		var us []storage.Update
		var snapAt uint64
		for i := range 1 + r.IntN(6) {
			u := storage.Update{}
			for range r.IntN(5) {
				slot := snapAt + 1 + uint64(r.IntN(20))
				if r.IntN(5) == 0 {
					slot = 1 + uint64(r.IntN(int(snapAt)+1))
				}
				u.Entries = append(u.Entries, paxos.Entry{Slot: slot, Ballot: paxos.Ballot{Round: uint64(i + 1), Replica: 1}, Kind: paxos.EntryCommand, Data: fmt.Appendf(nil, "%d-%d", i, slot)})
			}
			if r.IntN(3) == 0 {
				u.HardState = &paxos.HardState{Promised: paxos.Ballot{Round: uint64(i + 1), Replica: 2}, Chosen: uint64(i)}
			}
			if r.IntN(4) == 0 {
				snapAt += uint64(1 + r.IntN(10))
				u.Snapshot = &paxos.Snapshot{Meta: paxos.SnapshotMeta{Index: snapAt}, Data: fmt.Appendf(nil, "snap-%d", snapAt)}
				if r.IntN(2) == 0 {
					u.TailSlots = uint64(r.IntN(int(snapAt) + 2))
				}
			}
			us = append(us, u)
		}
		one, each := memstore.New(), memstore.New()
		if err := one.Save(storage.Merge(us)); err != nil {
			t.Fatalf("seed %d: merged save: %v", seed, err)
		}
		for _, u := range us {
			if err := each.Save(u); err != nil {
				t.Fatalf("seed %d: save: %v", seed, err)
			}
		}
		a, errA := storetest.ReadState(one)
		b, errB := storetest.ReadState(each)
		if errA != nil || errB != nil {
			t.Fatalf("seed %d: %v %v", seed, errA, errB)
		}
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("seed %d: merged\n%v\nsequential\n%v", seed, a, b)
		}
	}
}

package hashsm

import "testing"

func TestSnapshotRestoreRebuildsState(t *testing.T) {
	var full, part Machine
	for i, c := range []string{"a", "b", "c", "d"} {
		full.Apply(uint64(i+1), []byte(c))
		if i < 2 {
			part.Apply(uint64(i+1), []byte(c))
		}
	}
	snap, _ := part.Snapshot()
	var restored Machine
	if err := restored.Restore(snap); err != nil {
		t.Fatal(err)
	}
	restored.Apply(3, []byte("c"))
	restored.Apply(4, []byte("d"))
	if restored != full {
		t.Fatalf("snapshot + tail %+v differs from the full log %+v", restored, full)
	}
	var other Machine
	other.Apply(1, []byte("b"))
	if other.Hash() == full.Hash() {
		t.Fatal("different commands, same hash")
	}
	if err := restored.Restore([]byte("short")); err == nil {
		t.Fatal("short snapshot accepted")
	}
}

package state

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzDecodeCommand checks that Decode never panics on any bytes, that
// whatever it accepts re-encodes and decodes to the same command, and that
// applying it (or failing to) never panics either.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range sampleCommands() {
		b, err := Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m := New()
		_ = m.ApplyCommand(1, put("nightly", "0 * * * *", 0, t0))
		m.Apply(2, b)
		c, err := Decode(b)
		if err != nil {
			if c != nil {
				t.Fatalf("Decode returned a command and an error: %v", err)
			}
			return
		}
		again, err := Encode(c)
		if err != nil {
			t.Fatalf("a decoded command does not encode: %v", err)
		}
		c2, err := Decode(again)
		if err != nil || !reflect.DeepEqual(c2, c) {
			t.Fatalf("re-decoding: %v\n got %#v\nwant %#v", err, c2, c)
		}
		if b3, _ := Encode(c2); !bytes.Equal(b3, again) {
			t.Fatal("encoding is not stable")
		}
	})
}

// FuzzRestore checks that Restore never panics on any bytes (a snapshot
// comes from a peer or a backup), that a state it accepts snapshots to
// bytes that restore to the same snapshot again, and that SnapshotTerm
// (which reads the header alone) never panics and reads the restored
// state's term from what Restore accepts.
func FuzzRestore(f *testing.F) {
	m := New()
	for i, c := range sampleCommands() {
		_ = m.ApplyCommand(uint64(i+1), c)
	}
	good, err := m.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	empty, _ := New().Snapshot()
	f.Add(good)
	f.Add(empty)
	f.Add(good[:len(good)/2])
	f.Add([]byte{snapshotVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		term, termErr := SnapshotTerm(b)
		r := New()
		if err := r.Restore(b); err != nil {
			return
		}
		if termErr != nil || term != r.Term() {
			t.Fatalf("SnapshotTerm: %v, %v; the restored state's term is %v", term, termErr, r.Term())
		}
		s1, err := r.Snapshot()
		if err != nil {
			t.Fatalf("a restored state does not snapshot: %v", err)
		}
		r2 := New()
		if err := r2.Restore(s1); err != nil {
			t.Fatalf("a snapshot of a restored state does not restore: %v", err)
		}
		if s2, _ := r2.Snapshot(); !bytes.Equal(s1, s2) {
			t.Fatal("snapshot, restore, snapshot changed the bytes")
		}
	})
}

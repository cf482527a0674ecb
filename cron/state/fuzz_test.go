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

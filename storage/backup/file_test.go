package backup

import (
	"bytes"
	"errors"
	"testing"
)

func TestFileRoundTripAndDamage(t *testing.T) {
	data := snap(7)
	info := NewInfo(meta(7), data)
	b, err := EncodeFile(info, data)
	if err != nil {
		t.Fatal(err)
	}
	got, gotData, err := DecodeFile(b)
	if err != nil || got.Index != 7 || got.SHA256 != info.SHA256 || !bytes.Equal(gotData, data) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	flipped := bytes.Clone(b)
	flipped[len(flipped)-3] ^= 0x40
	for name, bad := range map[string][]byte{
		"flipped":   flipped,
		"truncated": b[:len(b)-1],
		"no magic":  b[1:],
		"no header": []byte(fileMagic),
		"empty":     nil,
	} {
		if _, _, err := DecodeFile(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzDecodeFile: a snapshot file (`snapshot restore -file`, `snapshot
// inspect`) is refused with ErrCorrupt, or its header describes its data
// with a valid Meta and re-encodes to a file that decodes the same.
func FuzzDecodeFile(f *testing.F) {
	data := snap(3)
	good, _ := EncodeFile(NewInfo(meta(3), data), data)
	f.Add(good)
	f.Add([]byte(fileMagic + "{}\n"))
	f.Add([]byte(fileMagic + `{"index":1,"size":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, d, err := DecodeFile(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("refused with %v, want ErrCorrupt", err)
			}
			return
		}
		// A file is checked as a manifest is: what restores from it has
		// a valid index, membership and time.
		if err := info.Meta.validate(); err != nil {
			t.Fatalf("accepted a file whose header is invalid: %v", err)
		}
		// Whatever decodes re-encodes to a file that decodes the same.
		again, err := EncodeFile(info, d)
		if err != nil {
			t.Fatal(err)
		}
		info2, d2, err := DecodeFile(again)
		if err != nil || !bytes.Equal(d, d2) || info2.SHA256 != info.SHA256 {
			t.Fatalf("re-encoding: %v", err)
		}
	})
}

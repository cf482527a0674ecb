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

func FuzzDecodeFile(f *testing.F) {
	data := snap(3)
	good, _ := EncodeFile(NewInfo(meta(3), data), data)
	f.Add(good)
	f.Add([]byte(fileMagic + "{}\n"))
	f.Add([]byte(fileMagic + `{"index":1,"size":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, d, err := DecodeFile(b)
		if err != nil {
			return
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

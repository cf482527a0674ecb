package mpack

import (
	"reflect"
	"sync"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

type rec struct {
	A uint64
	B string
	C []byte
	D map[string]string
}

func handle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.StructToArray = true
	h.MaxInitLen = 64
	return h
}

// Encoders and decoders taken again from the pool give what fresh ones
// give, concurrently, and Append keeps what dst held.
func TestPoolMatchesFreshCodecs(t *testing.T) {
	h := handle()
	p := New(h)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				v := rec{A: uint64(g*1000 + i), B: "name", C: make([]byte, i*37), D: map[string]string{"k": string(rune('a' + i%26))}}
				var fresh []byte
				if err := codec.NewEncoderBytes(&fresh, h).Encode(&v); err != nil {
					t.Error(err)
					return
				}
				got, err := p.Append([]byte("head"), &v)
				if err != nil || string(got[:4]) != "head" || string(got[4:]) != string(fresh) {
					t.Errorf("Append: %v; not head and the fresh encoding", err)
					return
				}
				var back rec
				n, err := p.Decode(append(got[4:], 0xc0), &back)
				if err != nil || n != len(fresh) || !reflect.DeepEqual(back, v) {
					t.Errorf("Decode: %d of %d bytes, %v; %+v", n, len(fresh), err, back.A)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A decoding error leaves the pooled decoder fit for the next input.
func TestPoolAfterAnError(t *testing.T) {
	p := New(handle())
	var v rec
	if _, err := p.Decode([]byte{0xc1}, &v); err == nil {
		t.Fatal("0xc1 decoded")
	}
	b, _ := p.Append(nil, &rec{A: 7, B: "x"})
	if _, err := p.Decode(b, &v); err != nil || v.A != 7 || v.B != "x" {
		t.Fatalf("%+v, %v", v, err)
	}
}

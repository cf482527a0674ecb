package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeJSONComparesKeysAsDecoded: two keys written differently
// that encoding/json decodes to one (an escape, bytes that are not
// UTF-8, both U+FFFD) are the same key; keys that differ only in case
// are two keys in a map.
func TestDecodeJSONComparesKeysAsDecoded(t *testing.T) {
	for _, tc := range []struct {
		body, says string
	}{
		{`{"a":1,"\u0061":2}`, "a is set twice"},
		{"{\"x\":{\"a\xff\":1,\"a\xfe\":2}}", "x[\"a\ufffd\"] is set twice"},
		{`[{"k":1},{"k":1,"K":2,"k":3}]`, "[1].k is set twice"},
		{`{"a":{"b":[1,{"c":true}]},"b":{"a":null},"c":"a"}`, ""},
		{`{"":1,"":2}`, `[""] is set twice`},
	} {
		var v any
		err := DecodeJSON([]byte(tc.body), &v)
		if tc.says == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
			continue
		}
		if !errors.Is(err, ErrDuplicateKey) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want a duplicate key saying %q", tc.body, err, tc.says)
		}
	}
}

// FuzzDuplicateJSONKey holds DecodeJSON's walk over a body's bytes to a
// dumb oracle, a walk over json.Decoder's tokens (the first way it was
// written, slower than the decode itself): on any body that
// decodes, both find the same first key named twice, at the same path,
// or both find none.
func FuzzDuplicateJSONKey(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":{"c":[1,2,{"d":"e","d":"f"}]}}`,
		`{"a":1,"\u0061":2}`,
		`{"a\"b":1,"a\"b":2}`,
		`[{"k":1},{"K":1}]`,
		` { "x" : [ ] , "y" : { } , "z" : -1.5e3 } `,
		`"just a string"`,
		`{"a":{"a":{"a":1}},"a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		err := DecodeJSON(body, &v)
		if err != nil && !errors.Is(err, ErrDuplicateKey) {
			return
		}
		want, dup, oerr := tokenWalkDuplicate(body)
		if oerr != nil {
			t.Fatalf("%q decoded, but the token walk failed: %v", body, oerr)
		}
		switch {
		case dup != (err != nil):
			t.Fatalf("%q: DecodeJSON says %v; the token walk finds a duplicate: %v (%s)", body, err, dup, want)
		case dup && !strings.Contains(err.Error(), " "+want+" is set twice"):
			t.Fatalf("%q: DecodeJSON says %v; the token walk finds %s", body, err, want)
		}
	})
}

// tokenWalkDuplicate is the oracle: the path of the first key an object
// in body names twice, compared as json.Decoder decodes it.
func tokenWalkDuplicate(body []byte) (string, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var path keyPath
	var walk func() (bool, error)
	walk = func() (bool, error) {
		tok, err := dec.Token()
		if err != nil {
			return false, err
		}
		switch tok {
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				path = append(path, pathSegment{index: i})
				if dup, err := walk(); dup || err != nil {
					return dup, err
				}
				path = path[:len(path)-1]
			}
			_, err = dec.Token()
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return false, err
				}
				key := tok.(string)
				path = append(path, pathSegment{key: []byte(key), index: -1})
				if seen[key] {
					return true, nil
				}
				seen[key] = true
				if dup, err := walk(); dup || err != nil {
					return dup, err
				}
				path = path[:len(path)-1]
			}
			_, err = dec.Token()
		}
		return false, err
	}
	dup, err := walk()
	return path.String(), dup, err
}

// BenchmarkDuplicateKeyWalk measures the duplicate-key walks alone, on
// a job write of 14,000 jobs with meta just under MaxBodyBytes (the
// most keys a body holds), beside the decode they follow and the token
// walk first written (the oracle):
//
//	go test -run '^$' -bench BenchmarkDuplicateKeyWalk -benchmem ./internal/api
func BenchmarkDuplicateKeyWalk(b *testing.B) {
	req := PutJobs{SkipNomadCheck: true}
	for i := range 14_000 {
		req.Jobs = append(req.Jobs, PutJob{Name: fmt.Sprintf("b001-%09d", i), Spec: Spec{Schedule: "0 ? * * *",
			TimeZone: "Europe/Berlin", Concurrency: "forbid", NomadJob: "bench", Namespace: "ops",
			Meta: map[string]string{"owner": "team-a", "kind": "nightly", "shard": fmt.Sprint(i % 16)}}})
	}
	asJSON, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	asMsgpack, err := EncodeMsgpack(req)
	if err != nil {
		b.Fatal(err)
	}
	if len(asJSON) > MaxBodyBytes {
		b.Fatalf("%d bytes, over the limit", len(asJSON))
	}
	for _, bc := range []struct {
		name string
		body []byte
		run  func([]byte) error
	}{
		{"json/decode", asJSON, func(body []byte) error {
			var out PutJobs
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			return dec.Decode(&out)
		}},
		{"json/walk", asJSON, func(body []byte) error { return duplicateJSONKey(body, reflect.TypeFor[*PutJobs]()) }},
		{"json/token-walk", asJSON, func(body []byte) error { _, _, err := tokenWalkDuplicate(body); return err }},
		{"msgpack/decode", asMsgpack, func(body []byte) error { var out PutJobs; _, err := bodyCodecs.Decode(body, &out); return err }},
		{"msgpack/walk", asMsgpack, duplicateMsgpackKey},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.run(bc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// ErrDuplicateKey is the error of a body that names one key twice in an
// object or map: encoding/json and go-msgpack keep the last value
// without a word, where cron files refuse it (found in review).
var ErrDuplicateKey = errors.New("duplicate key")

// DecodeJSON decodes a JSON body into v: exactly one value (white space
// around it), no field v's type lacks, and no key named twice in one
// object at any depth. An empty body is io.EOF, for the caller to take
// or refuse.
func DecodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return err
	default:
		return errors.New("more than one JSON value")
	}
	// Only a body that decoded is walked: it is valid JSON within
	// encoding/json's bounds, and of v's shape.
	return duplicateJSONKey(body, reflect.TypeOf(v))
}

// duplicateJSONKey walks body beside t, the type it decoded into, and
// names the first key an object sets twice. In a map keys are compared
// as encoding/json decodes them; in a struct by the field they set,
// which encoding/json matches without regard to case ("schedule" and
// "Schedule" set the same field).
//
// It reads the bytes itself rather than json.Decoder's tokens: body
// decoded already, so it is one valid JSON value, and on a 2.8 MB body
// of 14,000 jobs a token walk (FuzzDuplicateJSONKey keeps one as the
// oracle) took 2.4 times the decode's time with 2.1 million
// allocations, this one a fifth of it with 4 (BenchmarkDuplicateKeyWalk).
func duplicateJSONKey(body []byte, t reflect.Type) error {
	w := jsonWalk{b: body}
	return w.value(t)
}

type jsonWalk struct {
	b    []byte
	at   int
	path keyPath
}

func (w *jsonWalk) space() {
	for w.at < len(w.b) {
		switch w.b[w.at] {
		case ' ', '\t', '\n', '\r':
			w.at++
		default:
			return
		}
	}
}

// peek is the next byte past white space, 0 at the end.
func (w *jsonWalk) peek() byte {
	w.space()
	if w.at == len(w.b) {
		return 0
	}
	return w.b[w.at]
}

func (w *jsonWalk) value(t reflect.Type) error {
	switch w.peek() {
	case '{':
		return w.object(container(t))
	case '[':
		return w.array(container(t))
	case '"':
		_, _, err := w.str()
		return err
	case 0:
		return errJSONShort
	}
	// A number, true, false or null: up to the next delimiter.
	for w.at < len(w.b) {
		switch w.b[w.at] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return nil
		}
		w.at++
	}
	return nil
}

// container is the type an object or array decodes into, nil for one
// whose keys are compared as written (a type that decodes itself, an
// interface).
func container(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)) {
		return nil
	}
	return t
}

var errJSONShort = errors.New("api: a JSON value cut short")

// str reads a string: its bytes between the quotes, and whether any is
// escaped.
func (w *jsonWalk) str() (text []byte, escaped bool, err error) {
	start := w.at + 1
	for i := start; ; {
		q := bytes.IndexByte(w.b[i:], '"')
		if q < 0 {
			return nil, false, errJSONShort
		}
		bs := bytes.IndexByte(w.b[i:i+q], '\\')
		if bs < 0 {
			w.at = i + q + 1
			return w.b[start : i+q], escaped, nil
		}
		escaped = true
		i += bs + 2 // past the escaped byte, which may be a quote
	}
}

func (w *jsonWalk) array(t reflect.Type) error {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	w.at++ // [
	if w.peek() == ']' {
		w.at++
		return nil
	}
	for i := 0; ; i++ {
		w.path = append(w.path, pathSegment{index: i})
		if err := w.value(elem); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
		switch w.peek() {
		case ',':
			w.at++
		case ']':
			w.at++
			return nil
		default:
			return errJSONShort
		}
	}
}

func (w *jsonWalk) object(t reflect.Type) error {
	var fields []jsonField
	var elem reflect.Type
	switch {
	case t != nil && t.Kind() == reflect.Struct:
		fields = fieldsOf(t)
	case t != nil && t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	w.at++ // {
	if w.peek() == '}' {
		w.at++
		return nil
	}
	var seen keysSeen
	for {
		if w.peek() != '"' {
			return errJSONShort
		}
		written, err := w.key()
		if err != nil {
			return err
		}
		key, valueType := written, elem
		if fields != nil {
			// A struct's keys are compared by the field they set.
			if f, ok := matchField(fields, written); ok {
				key, valueType = f.name, f.typ
			}
		}
		w.path = append(w.path, pathSegment{key: key, index: -1})
		if first, dup := seen.add(seenKey{id: key, written: written}); dup {
			return w.duplicate(first.written, written)
		}
		if w.peek() != ':' {
			return errJSONShort
		}
		w.at++
		if err := w.value(valueType); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
		switch w.peek() {
		case ',':
			w.at++
		case '}':
			w.at++
			return nil
		default:
			return errJSONShort
		}
	}
}

// key reads an object's key as encoding/json decodes it: a slice of the
// body, unless it is escaped or not UTF-8 (decoded, U+FFFD in place of
// bytes that are not UTF-8: "a\xff" and "a\xfe" are one key).
func (w *jsonWalk) key() ([]byte, error) {
	start := w.at
	text, escaped, err := w.str()
	if err != nil || !escaped && utf8.Valid(text) {
		return text, err
	}
	var s string
	if err := json.Unmarshal(w.b[start:w.at], &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

func (w *jsonWalk) duplicate(first, second []byte) error {
	if !bytes.Equal(first, second) {
		return fmt.Errorf("%w: %s is set twice (as %q and as %q, the same field); the second value would replace the first without a word", ErrDuplicateKey, w.path, first, second)
	}
	return fmt.Errorf("%w: %s is set twice; the second value would replace the first without a word", ErrDuplicateKey, w.path)
}

// keysSeen are an object's or a map's keys so far: an array while they
// are few (a struct's; on the walk's stack), a set past that (a big
// map's).
type keysSeen struct {
	few [8]seenKey
	n   int
	set map[string][]byte // kind and id -> written
}

// seenKey is a key: its identity (kind, then id: a JSON key as decoded
// or the field it sets; a msgpack key's text, or its encoding when it is
// not text), and how it was written.
type seenKey struct {
	kind        byte
	id, written []byte
}

func (k seenKey) setID() string { return string(append([]byte{k.kind}, k.id...)) }

// add records k, or returns the first key of its identity.
func (s *keysSeen) add(k seenKey) (seenKey, bool) {
	if s.set != nil {
		if first, dup := s.set[k.setID()]; dup {
			return seenKey{kind: k.kind, id: k.id, written: first}, true
		}
		s.set[k.setID()] = k.written
		return seenKey{}, false
	}
	for _, seen := range s.few[:s.n] {
		if seen.kind == k.kind && bytes.Equal(seen.id, k.id) {
			return seen, true
		}
	}
	if s.n < len(s.few) {
		s.few[s.n] = k
		s.n++
		return seenKey{}, false
	}
	s.set = make(map[string][]byte, 2*len(s.few))
	for _, seen := range append(s.few[:], k) {
		s.set[seen.setID()] = seen.written
	}
	return seenKey{}, false
}

// keyPath is the path to the value being walked, as
// jobs[0].spec.meta.owner: segments, slices of the body written out only
// for an error (a string per key walked was most of a walk's
// allocations).
type keyPath []pathSegment

// pathSegment is an index when index is not negative, else a key: its
// text, or when msgpack is set, its msgpack encoding.
type pathSegment struct {
	key     []byte
	msgpack bool
	index   int
}

func (p keyPath) String() string {
	var b strings.Builder
	for i, s := range p {
		switch text, ok := msgpackText(s.key); {
		case s.index >= 0:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case !s.msgpack:
			b.WriteString(pathKey(string(s.key), i == 0))
		case ok:
			b.WriteString(pathKey(string(text), i == 0))
		default:
			fmt.Fprintf(&b, "[msgpack %x]", s.key)
		}
	}
	return b.String()
}

// pathKey is key as a segment of a path: .key, or ["key"] when it is
// not a plain name (first: no dot before it).
func pathKey(key string, first bool) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return "[" + strconv.Quote(key) + "]"
	case first:
		return key
	}
	return "." + key
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// jsonField is a struct field as encoding/json names it.
type jsonField struct {
	name []byte
	typ  reflect.Type
}

var fieldCache sync.Map // reflect.Type -> []jsonField

// fieldsOf lists t's fields by their JSON names (embedded structs'
// fields are not promoted: the API's bodies have none, and keys of a
// type that had would be compared as written).
func fieldsOf(t reflect.Type) []jsonField {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]jsonField)
	}
	fields := []jsonField{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fields = append(fields, jsonField{name: []byte(name), typ: sf.Type})
	}
	fieldCache.Store(t, fields)
	return fields
}

// matchField is the field key sets, as encoding/json picks it: the
// exact name first, else one equal under Unicode case folding.
func matchField(fields []jsonField, key []byte) (jsonField, bool) {
	for _, f := range fields {
		if bytes.Equal(f.name, key) {
			return f, true
		}
	}
	for _, f := range fields {
		if bytes.EqualFold(f.name, key) {
			return f, true
		}
	}
	return jsonField{}, false
}

package paxos

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var rewriteCodecCorpus = flag.Bool("rewrite-codec-corpus", false,
	"rewrite the valid-* and invalid-* seeds of testdata/fuzz/FuzzDecodeMessage from the codec test tables")

const (
	codecCorpusDir = "testdata/fuzz/FuzzDecodeMessage"
	maxSeedBytes   = 1024
)

// FuzzDecodeMessage feeds arbitrary bytes to DecodeMessage. No input may
// panic; a failure must wrap ErrDecode; a success must agree with
// go-msgpack's reading of the frame and survive a round trip (see
// checkDecodeFrame). The committed corpus in testdata/fuzz holds valid-*
// frames of every message type and invalid-* frames; run with
//
//	go test -run '^$' -fuzz FuzzDecodeMessage -fuzztime 60s ./paxos
func FuzzDecodeMessage(f *testing.F) {
	for _, tc := range codecMessages() {
		// Only small seeds: the fuzzer mutates them best, and minimising
		// an interesting input grown from a large one stalls it for up to
		// -fuzzminimizetime (60 s).
		if frame := mustAppend(f, nil, tc.m); len(frame) <= maxSeedBytes {
			f.Add(frame)
		}
	}
	f.Fuzz(checkDecodeFrame)
}

// checkDecodeFrame is the property FuzzDecodeMessage checks for frame.
func checkDecodeFrame(t *testing.T, frame []byte) {
	m, err := DecodeMessage(frame)
	if err != nil {
		if !errors.Is(err, ErrDecode) {
			t.Fatalf("DecodeMessage error %v does not wrap ErrDecode", err)
		}
		return
	}
	// The reference decoder reads an accepted frame to the same message.
	viaLib, err := decodeWithMsgpack(frame)
	if err != nil || !reflect.DeepEqual(viaLib, m) {
		t.Fatalf("DecodeMessage read\n%#v\nbut go-msgpack read\n%#v, %v", m, viaLib, err)
	}
	// What decodes re-encodes (AppendMessage checks what DecodeMessage
	// does), to a frame that decodes to the same message and is a fixed
	// point of the encoding.
	again, err := AppendMessage(nil, m)
	if err != nil {
		t.Fatalf("re-encoding decoded %s: %v", m, err)
	}
	m2, err := DecodeMessage(again)
	if err != nil || !reflect.DeepEqual(m, m2) {
		t.Fatalf("round trip of\n%#v\ngave\n%#v, %v", m, m2, err)
	}
	if third := mustAppend(t, nil, m2); !bytes.Equal(third, again) {
		t.Fatalf("encoding is not stable: %x then %x", again, third)
	}
}

// TestDecodeMessageCorpus checks the committed seeds: valid-* decode and
// re-encode to the same bytes, invalid-* are rejected, and every seed
// (including regressions the fuzzer found) passes checkDecodeFrame. With
// -rewrite-codec-corpus it first rewrites the valid-* and invalid-* seeds
// from codecMessages and invalidFrames.
func TestDecodeMessageCorpus(t *testing.T) {
	if *rewriteCodecCorpus {
		writeCodecCorpus(t)
	}
	paths, err := filepath.Glob(filepath.Join(codecCorpusDir, "*"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no seeds in %s (%v)", codecCorpusDir, err)
	}
	var valid, invalid int
	for _, path := range paths {
		name := filepath.Base(path)
		frame := readCorpusFile(t, path)
		t.Run(name, func(t *testing.T) {
			checkDecodeFrame(t, frame)
			m, err := DecodeMessage(frame)
			switch {
			case strings.HasPrefix(name, "valid-"):
				valid++
				if err != nil {
					t.Fatalf("valid seed rejected: %v", err)
				}
				if again := mustAppend(t, nil, m); !bytes.Equal(again, frame) {
					t.Fatalf("valid seed is not canonical: re-encodes to %x", again)
				}
			case strings.HasPrefix(name, "invalid-"):
				invalid++
				if err == nil {
					t.Fatalf("invalid seed accepted")
				}
			}
		})
	}
	if valid < 12 || invalid < 4 {
		t.Errorf("corpus has %d valid and %d invalid seeds, want at least 12 and 4", valid, invalid)
	}
}

// invalidSeeds names the invalidFrames committed as seeds: one per kind
// of mistake.
var invalidSeeds = []string{
	"version-1", "15-fields", "trailing-byte", "type-14", "zero-from", "entry-kind-3",
	"entry-string-data", "entries-on-heartbeat", "snapshot-on-heartbeat", "entries-count-huge",
	"entry-bin-huge", "snapshot-bin-huge", "chunk-beyond-total", "ack-beyond-total",
}

func writeCodecCorpus(t *testing.T) {
	if err := os.MkdirAll(codecCorpusDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range codecMessages() {
		frame := mustAppend(t, nil, tc.m)
		if len(frame) > maxSeedBytes {
			continue
		}
		writeCorpusFile(t, "valid-"+tc.name, frame)
	}
	frames := map[string][]byte{}
	for _, f := range invalidFrames(t) {
		frames[f.name] = f.frame
	}
	for _, name := range invalidSeeds {
		frame, ok := frames[name]
		if !ok {
			t.Fatalf("invalidSeeds names %q, which invalidFrames lacks", name)
		}
		writeCorpusFile(t, "invalid-"+name, frame)
	}
}

// corpusHeader and the []byte(...) line are the file format of go test
// -fuzz for a target that takes one []byte.
const corpusHeader = "go test fuzz v1\n"

func writeCorpusFile(t *testing.T, name string, frame []byte) {
	data := fmt.Sprintf("%s[]byte(%q)\n", corpusHeader, frame)
	if err := os.WriteFile(filepath.Join(codecCorpusDir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readCorpusFile(t *testing.T, path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rest, ok := strings.CutPrefix(string(data), corpusHeader)
	rest = strings.TrimSpace(rest)
	if ok {
		rest, ok = strings.CutPrefix(rest, "[]byte(")
	}
	if ok {
		rest, ok = strings.CutSuffix(rest, ")")
	}
	if !ok {
		t.Fatalf("%s: not a go fuzz corpus file of one []byte", path)
	}
	s, err := strconv.Unquote(rest)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

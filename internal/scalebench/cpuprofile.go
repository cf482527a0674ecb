package scalebench

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// LabelCPU is a CPU profile's time split by the value of one pprof label.
type LabelCPU struct {
	// ByValue is the CPU time of the samples that carry the label, by its
	// value.
	ByValue map[string]time.Duration
	// Unlabelled is the CPU time of the samples without it: the runtime's
	// own goroutines (the GC's background workers), Pebble's flushes and
	// compactions, timers, the harness.
	Unlabelled time.Duration
}

// Total is the CPU time of every sample.
func (c LabelCPU) Total() time.Duration {
	t := c.Unlabelled
	for _, d := range c.ByValue {
		t += d
	}
	return t
}

// maxProfileBytes bounds what ParseLabelCPU decompresses: a window's
// profile of a few seconds is tens of kilobytes.
const maxProfileBytes = 256 << 20

// ParseLabelCPU sums the CPU time of a profile written by
// runtime/pprof.StartCPUProfile (a gzipped profile.proto) by the value of
// the string label key. The module has no pprof parser (github.com/google/pprof
// is not a dependency), and a profile needs only its samples, their labels and
// the string table, so this reads the protobuf wire format directly:
//
//	Profile: 1 sample_type (ValueType), 2 sample (Sample), 6 string_table
//	Sample:  2 value (int64, packed or not), 3 label (Label)
//	Label:   1 key, 2 str (string table indexes)
//	ValueType: 1 type (string table index)
//
// The value summed is the sample type named "cpu" (nanoseconds).
func ParseLabelCPU(gz []byte, key string) (LabelCPU, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return LabelCPU{}, fmt.Errorf("scalebench: profile: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxProfileBytes+1))
	if err != nil {
		return LabelCPU{}, fmt.Errorf("scalebench: profile: %w", err)
	}
	if len(raw) > maxProfileBytes {
		return LabelCPU{}, fmt.Errorf("scalebench: profile larger than %d bytes", maxProfileBytes)
	}
	return parseProfile(raw, key)
}

type rawSample struct {
	values []int64
	labels [][2]int64 // key, str
}

func parseProfile(raw []byte, key string) (LabelCPU, error) {
	var types []int64 // string index of each sample type
	var samples []rawSample
	var strs []string
	err := eachField(raw, func(num int, wire int, v uint64, b []byte) error {
		switch {
		case num == 1 && wire == wireBytes:
			return eachField(b, func(n, w int, v uint64, _ []byte) error {
				if n == 1 && w == wireVarint {
					types = append(types, int64(v))
				}
				return nil
			})
		case num == 2 && wire == wireBytes:
			s, err := parseSample(b)
			samples = append(samples, s)
			return err
		case num == 6 && wire == wireBytes:
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return LabelCPU{}, err
	}
	str := func(i int64) (string, error) {
		if i < 0 || i >= int64(len(strs)) {
			return "", fmt.Errorf("scalebench: profile: string index %d of %d", i, len(strs))
		}
		return strs[i], nil
	}
	cpu := -1
	for i, t := range types {
		if s, err := str(t); err != nil {
			return LabelCPU{}, err
		} else if s == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return LabelCPU{}, errors.New("scalebench: profile has no \"cpu\" sample type")
	}
	out := LabelCPU{ByValue: map[string]time.Duration{}}
	for _, s := range samples {
		if cpu >= len(s.values) {
			return LabelCPU{}, fmt.Errorf("scalebench: profile: a sample with %d values, want %d", len(s.values), len(types))
		}
		d := time.Duration(s.values[cpu])
		value, labelled := "", false
		for _, l := range s.labels {
			k, err := str(l[0])
			if err != nil {
				return LabelCPU{}, err
			}
			if k == key {
				if value, err = str(l[1]); err != nil {
					return LabelCPU{}, err
				}
				labelled = true
			}
		}
		if labelled {
			out.ByValue[value] += d
		} else {
			out.Unlabelled += d
		}
	}
	return out, nil
}

func parseSample(b []byte) (rawSample, error) {
	var s rawSample
	err := eachField(b, func(num, wire int, v uint64, b []byte) error {
		switch {
		case num == 2 && wire == wireVarint:
			s.values = append(s.values, int64(v))
		case num == 2 && wire == wireBytes: // packed
			for len(b) > 0 {
				x, n := binary.Uvarint(b)
				if n <= 0 {
					return errors.New("scalebench: profile: bad packed value")
				}
				s.values = append(s.values, int64(x))
				b = b[n:]
			}
		case num == 3 && wire == wireBytes:
			var l [2]int64
			err := eachField(b, func(n, w int, v uint64, _ []byte) error {
				if w == wireVarint && (n == 1 || n == 2) {
					l[n-1] = int64(v)
				}
				return nil
			})
			if err != nil {
				return err
			}
			s.labels = append(s.labels, l)
		}
		return nil
	})
	return s, err
}

// Protobuf wire types used by profile.proto.
const (
	wireVarint = 0
	wireI64    = 1
	wireBytes  = 2
	wireI32    = 5
)

// eachField calls fn with every field of a protobuf message: its number,
// wire type, and the varint value or the bytes (length-delimited fields).
func eachField(b []byte, fn func(num, wire int, v uint64, b []byte) error) error {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("scalebench: profile: bad field tag")
		}
		b = b[n:]
		num, wire := int(tag>>3), int(tag&7)
		var v uint64
		var body []byte
		switch wire {
		case wireVarint:
			if v, n = binary.Uvarint(b); n <= 0 {
				return errors.New("scalebench: profile: bad varint")
			}
			b = b[n:]
		case wireBytes:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errors.New("scalebench: profile: bad length")
			}
			body, b = b[n:n+int(l)], b[n+int(l):]
		case wireI64, wireI32:
			size := 8
			if wire == wireI32 {
				size = 4
			}
			if len(b) < size {
				return errors.New("scalebench: profile: truncated fixed field")
			}
			b = b[size:]
		default:
			return fmt.Errorf("scalebench: profile: wire type %d", wire)
		}
		if err := fn(num, wire, v, body); err != nil {
			return err
		}
	}
	return nil
}

package state

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func randString(r *rand.Rand) string {
	lengths := []int{0, 1, 31, 32, 255, 256, 70000}
	n := lengths[r.IntN(len(lengths))]
	if r.IntN(3) > 0 {
		n = r.IntN(40)
	}
	return strings.Repeat(string(rune('a'+r.IntN(26))), n)
}

func randInt(r *rand.Rand) int64 {
	edges := []int64{0, 1, 127, 128, 255, 256, 32767, 32768, 65535, 65536, math.MaxInt32, math.MaxInt32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64, zeroUnix}
	if r.IntN(2) == 0 {
		return edges[r.IntN(len(edges))]
	}
	return r.Int64() >> r.IntN(64)
}

func randUint(r *rand.Rand) uint64 {
	edges := []uint64{0, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	if r.IntN(2) == 0 {
		return edges[r.IntN(len(edges))]
	}
	return r.Uint64() >> r.IntN(64)
}

func randTime(r *rand.Rand) wireTime { return wireTime{Sec: randInt(r), Nsec: randInt(r)} }

func randLaunches(r *rand.Rand) []wireLaunch {
	n := r.IntN(4)
	if n == 0 {
		return nil
	}
	out := make([]wireLaunch, n)
	for i := range out {
		out[i] = wireLaunch{
			ScheduledAt: randTime(r), SpecVersion: randUint(r), StartedAt: randTime(r), StartedSlot: randUint(r), FinishedSlot: randUint(r),
			Outcome: wireOutcome{Kind: randString(r), ChildID: randString(r), Reason: randString(r)},
			Target:  Target{NomadJob: randString(r), Namespace: randString(r), Region: randString(r)},
			Kind:    uint8(r.IntN(256)), Force: r.IntN(2) == 0, Content: randUint(r), Payload: randBytes(r), AtLeastOnce: r.IntN(2) == 0, Shared: r.IntN(2) == 0,
		}
		for range r.IntN(3) {
			out[i].Meta = append(out[i].Meta, wireKV{Key: randString(r), Value: randString(r)})
		}
	}
	return out
}

func randBytes(r *rand.Rand) []byte {
	if s := randString(r); s != "" {
		return []byte(s)
	}
	return nil
}

// randWireJob is any wireJob, canonical (empty lists and bytes are nil),
// with every integer form and string length the encoding distinguishes.
func randWireJob(r *rand.Rand) wireJob {
	w := wireJob{
		Name: randString(r), Version: randUint(r), CreatedVersion: randUint(r), Paused: r.IntN(2) == 0,
		CreatedAt: randTime(r), UpdatedAt: randTime(r), LastStartedAt: randTime(r), NextAt: randTime(r), LastTriggered: randTime(r),
		Open: randLaunches(r), History: string(randBytes(r)),
		Counters: Counters{randUint(r), randUint(r), randUint(r), randUint(r), randUint(r), randUint(r)},
		Spec: wireSpec{Schedule: randString(r), TimeZone: randString(r), Concurrency: randString(r), CatchupWindow: randInt(r),
			NomadJob: randString(r), Namespace: randString(r), Region: randString(r), AtLeastOnce: r.IntN(2) == 0},
	}
	if p := randString(r); p != "" {
		w.Spec.Payload = []byte(p)
	}
	for range r.IntN(3) {
		w.Spec.Meta = append(w.Spec.Meta, wireKV{Key: randString(r), Value: randString(r)})
	}
	return w
}

// TestJobCodecMatchesLibrary: appendJob writes what go-msgpack writes, and
// readJob reads it back.
func TestJobCodecMatchesLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 3000 {
		w := randWireJob(r)
		want, err := appendValue(nil, &w)
		if err != nil {
			t.Fatal(err)
		}
		got := appendJob(nil, &w)
		if !bytes.Equal(got, want) {
			t.Fatalf("job %d: appendJob differs from go-msgpack at byte %d\n got % x\nwant % x", i, firstDiff(got, want), got[:min(len(got), 64)], want[:min(len(want), 64)])
		}
		var back wireJob
		w.version = snapshotVersion                                                 // readJob notes it
		n, err := readJob(append(got, 0xc0), &back, newInterner(), snapshotVersion) // a trailing byte must not be read
		if err != nil || n != len(got) || !reflect.DeepEqual(back, w) {
			t.Fatalf("job %d: readJob: %v, %d of %d bytes\n got %+v\nwant %+v", i, err, n, len(got), back, w)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// FuzzReadJob: readJob never panics, and what it reads encodes and reads
// back the same.
func FuzzReadJob(f *testing.F) {
	m := applyAll(New(), genCommands(f, 3, 200))
	var sc wireScratch
	for _, name := range m.sortedNames() {
		var w wireJob
		jobToWireInto(&w, m.jobs[name], &sc)
		f.Add(appendJob(nil, &w))
	}
	f.Add([]byte{0x9d})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var w wireJob
		n, err := readJob(b, &w, nil, snapshotVersion)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("read %d of %d bytes", n, len(b))
		}
		again := appendJob(nil, &w)
		var w2 wireJob
		if _, err := readJob(again, &w2, newInterner(), snapshotVersion); err != nil || !reflect.DeepEqual(w2, w) {
			t.Fatalf("re-read: %v", err)
		}
	})
}

package scheduler

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// benchEntries returns n jobs named job-000000... with NextAt drawn from a
// seeded source over one day (whole seconds).
func benchEntries(n int) []Entry {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]Entry, n)
	for i := range out {
		out[i] = Entry{Name: fmt.Sprintf("job-%06d", i), NextAt: t0.Add(time.Duration(r.IntN(86400)) * time.Second)}
	}
	return out
}

// heapBytes returns the live heap after a collection.
func heapBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkBuild1M builds the heap for 1,000,000 jobs; B/job is the memory
// the heap keeps per job (array and index; the names belong to the caller).
func BenchmarkBuild1M(b *testing.B) {
	const n = 1_000_000
	entries := benchEntries(n)
	var bytesPerJob float64
	for b.Loop() {
		b.StopTimer()
		var h Heap
		before := heapBytes()
		b.StartTimer()
		h.Build(entries)
		b.StopTimer()
		bytesPerJob = float64(heapBytes()-before) / n
		runtime.KeepAlive(&h)
		b.StartTimer()
	}
	b.ReportMetric(bytesPerJob, "B/job")
}

// BenchmarkPopDueHerd pops 100,000 jobs due in the same second in batches
// of 1,000 (the midnight herd).
func BenchmarkPopDueHerd(b *testing.B) {
	const n, batch = 100_000, 1_000
	entries := benchEntries(n)
	for i := range entries {
		entries[i].NextAt = t0
	}
	for b.Loop() {
		b.StopTimer()
		var h Heap
		h.Build(entries)
		b.StartTimer()
		popped := 0
		for h.Len() > 0 {
			popped += len(h.PopDue(t0, batch))
		}
		if popped != n {
			b.Fatalf("popped %d, want %d", popped, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
}

// BenchmarkSet moves random jobs of a 1M heap to random times of the day.
func BenchmarkSet(b *testing.B) {
	const n = 1_000_000
	entries := benchEntries(n)
	var h Heap
	h.Build(entries)
	r := rand.New(rand.NewPCG(3, 4))
	b.ResetTimer()
	for b.Loop() {
		h.Set(entries[r.IntN(n)].Name, t0.Add(time.Duration(r.IntN(86400))*time.Second))
	}
}

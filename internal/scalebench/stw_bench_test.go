package scalebench

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkStopTheWorldBehindABigCopy measures how long the collector's
// stop-the-world waits for a goroutine that allocates a snapshot-sized
// slice and copies an image into it in one call, which the runtime cannot
// preempt: the mechanism suspected behind the 470-671 ms pauses of the
// scale run (BENCHMARKS.md). One goroutine copies while the benchmark
// forces a collection every 50 ms; it reports the mean allocate-and-copy
// and the longest stop-the-world, and how much of it was spent stopping.
//
//	go test -run '^$' -bench StopTheWorldBehindABigCopy -benchtime 20x ./internal/scalebench
func BenchmarkStopTheWorldBehindABigCopy(b *testing.B) {
	const imageBytes = 174 << 20 // a million jobs' snapshot
	src := make([]byte, imageBytes)
	for i := range src {
		src[i] = byte(i)
	}
	before := readGCNow()
	done, copied := make(chan struct{}), make(chan time.Duration, 1)
	go func() {
		var took time.Duration
		copies := 0
		defer func() { copied <- took / time.Duration(max(copies, 1)) }()
		for {
			select {
			case <-done:
				return
			default:
			}
			began := time.Now()
			dst := make([]byte, len(src))
			copy(dst, src)
			took += time.Since(began)
			copies++
			runtime.KeepAlive(dst)
		}
	}()
	b.ResetTimer()
	for range b.N {
		time.Sleep(50 * time.Millisecond)
		runtime.GC()
	}
	b.StopTimer()
	close(done)
	b.ReportMetric(float64(<-copied)/float64(time.Millisecond), "copy-ms")
	after := readGCNow()
	b.ReportMetric(float64(longestSince(before.total, after.total))/float64(time.Millisecond), "longest-stw-ms")
	b.ReportMetric(float64(longestSince(before.stopping, after.stopping))/float64(time.Millisecond), "of-which-stopping-ms")
}

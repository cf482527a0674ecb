package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// writeFunc makes one durable write for client (0..clients-1), its seq-th
// (from 0), and returns once the system acknowledged it.
type writeFunc func(ctx context.Context, client int, seq uint64) error

// loadResult is one closed-loop run's measured window.
type loadResult struct {
	// Writes is the number acknowledged inside the window.
	Writes int
	// Errors is the number of failed writes inside the window; FirstErr
	// is the first of them.
	Errors   int
	FirstErr error
	// Window is the measured wall time.
	Window time.Duration
	// Latencies are the latencies of the writes counted, sorted.
	Latencies []time.Duration
	// CPU is what was used during the window.
	CPU cpuDelta
}

// loadSpec says how to run the load.
type loadSpec struct {
	Clients        int
	Warmup, Window time.Duration
	// Sample reads the CPU counters; it is called at the window's start
	// and end.
	Sample func() (cpuSample, error)
	NCPU   int
}

// errorPause keeps a client that keeps failing (no leader for a moment)
// from spinning.
const errorPause = 10 * time.Millisecond

// runLoad runs spec.Clients clients, each writing in a closed loop (the
// next write starts when the last is acknowledged), for Warmup and then
// Window, and counts the writes acknowledged within the window.
func runLoad(ctx context.Context, spec loadSpec, write writeFunc) (loadResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		stop        atomic.Bool
		windowStart atomic.Int64 // unix nanos; 0 until the window opens
		windowEnd   atomic.Int64 // unix nanos; 0 until it closes
		wg          sync.WaitGroup
		mu          sync.Mutex
		firstErr    error
	)
	lat := make([][]time.Duration, spec.Clients)
	errs := make([]int, spec.Clients)
	inWindow := func(t time.Time) bool {
		s, e := windowStart.Load(), windowEnd.Load()
		n := t.UnixNano()
		return s != 0 && n >= s && (e == 0 || n <= e)
	}
	for c := range spec.Clients {
		wg.Go(func() {
			for seq := uint64(0); !stop.Load(); seq++ {
				began := time.Now()
				err := write(ctx, c, seq)
				done := time.Now()
				if stop.Load() && ctx.Err() != nil {
					return
				}
				if err != nil {
					if inWindow(done) {
						errs[c]++
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
					time.Sleep(errorPause)
					continue
				}
				if inWindow(done) {
					lat[c] = append(lat[c], done.Sub(began))
				}
			}
		})
	}
	var res loadResult
	err := func() error {
		if err := sleepCtx(ctx, spec.Warmup); err != nil {
			return err
		}
		a, err := spec.Sample()
		if err != nil {
			return err
		}
		began := time.Now()
		windowStart.Store(began.UnixNano())
		if err := sleepCtx(ctx, spec.Window); err != nil {
			return err
		}
		ended := time.Now()
		windowEnd.Store(ended.UnixNano())
		b, err := spec.Sample()
		if err != nil {
			return err
		}
		res.Window = ended.Sub(began)
		res.CPU = deltaOf(a, b, spec.NCPU)
		return nil
	}()
	stop.Store(true)
	// Writes still in flight are not waited for long: their outcome does
	// not count, and a system that hangs must not hang the harness.
	time.AfterFunc(5*time.Second, cancel)
	wg.Wait()
	if err != nil {
		return res, err
	}
	res.Latencies = slices.Concat(lat...)
	slices.Sort(res.Latencies)
	res.Writes = len(res.Latencies)
	for _, n := range errs {
		res.Errors += n
	}
	res.FirstErr = firstErr
	return res, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

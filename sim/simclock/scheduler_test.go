package simclock

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestSchedulerOrdersByTimeThenInsertion(t *testing.T) {
	s := NewScheduler()
	var got []string
	rec := func(name string) func() { return func() { got = append(got, name) } }
	s.At(20, rec("c"))
	s.At(10, rec("a"))
	s.At(20, rec("d"))
	s.At(10, rec("b"))
	s.At(5, func() {
		got = append(got, "first")
		s.At(10, rec("b2")) // same instant as a, b but scheduled later
		s.After(0, rec("now"))
	})
	for s.Step() {
	}
	want := []string{"first", "now", "a", "b", "b2", "c", "d"}
	if !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	if s.Now() != 20 || s.Steps() != 7 {
		t.Fatalf("Now = %v, Steps = %d; want 20ns, 7", s.Now(), s.Steps())
	}
}

func TestSchedulerCancel(t *testing.T) {
	s := NewScheduler()
	ran := 0
	a := s.At(1, func() { ran++ })
	b := s.At(2, func() { ran += 10 })
	if when, ok := b.When(); !ok || when != 2 {
		t.Fatalf("When = %v, %v", when, ok)
	}
	if !b.Cancel() {
		t.Fatal("Cancel of a pending event returned false")
	}
	if b.Cancel() || b.Pending() {
		t.Fatal("second Cancel should be a no-op")
	}
	s.RunUntil(10)
	if ran != 1 {
		t.Fatalf("ran = %d, want 1 (only a)", ran)
	}
	if a.Cancel() {
		t.Fatal("Cancel after the event ran returned true")
	}
	// a's slot is reused; the stale handle must not cancel the new event.
	c := s.At(11, func() { ran += 100 })
	if a.Cancel() || b.Cancel() {
		t.Fatal("stale handle cancelled a recycled slot")
	}
	if !c.Pending() {
		t.Fatal("new event not pending")
	}
	s.RunUntil(20)
	if ran != 101 {
		t.Fatalf("ran = %d, want 101", ran)
	}
	var zero Timer
	if zero.Cancel() || zero.Pending() {
		t.Fatal("zero Timer is not inert")
	}
}

func TestSchedulerRunUntil(t *testing.T) {
	s := NewScheduler()
	var at []time.Duration
	var tick func()
	tick = func() {
		at = append(at, s.Now())
		s.After(3, tick)
	}
	s.At(0, tick)
	if n := s.RunUntil(10); n != 4 {
		t.Fatalf("RunUntil ran %d events, want 4 (0,3,6,9)", n)
	}
	if s.Now() != 10 {
		t.Fatalf("Now = %v, want 10ns", s.Now())
	}
	if next, ok := s.Next(); !ok || next != 12 {
		t.Fatalf("Next = %v, %v; want 12ns", next, ok)
	}
	if !slices.Equal(at, []time.Duration{0, 3, 6, 9}) {
		t.Fatalf("ticks at %v", at)
	}
}

func TestSchedulerPanicsOnThePast(t *testing.T) {
	s := NewScheduler()
	s.RunUntil(100)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"At", func() { s.At(99, func() {}) }},
		{"After", func() { s.After(-1, func() {}) }},
		{"RunUntil", func() { s.RunUntil(50) }},
		{"nil func", func() { s.At(200, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.f()
		})
	}
}

// TestSchedulerAgainstOracle drives random schedules and cancellations and
// compares the run order with a sort of the surviving events.
func TestSchedulerAgainstOracle(t *testing.T) {
	type ev struct {
		at  time.Duration
		seq int
	}
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		s := NewScheduler()
		var want, got []ev
		var timers []Timer
		var evs []ev
		for i := range 500 {
			e := ev{at: time.Duration(r.IntN(100)), seq: i}
			evs = append(evs, e)
			timers = append(timers, s.At(e.at, func() { got = append(got, e) }))
		}
		cancelled := make([]bool, len(evs))
		for range 150 {
			i := r.IntN(len(evs))
			if timers[i].Cancel() == cancelled[i] {
				t.Fatalf("seed %d: Cancel(%d) disagrees with oracle", seed, i)
			}
			cancelled[i] = true
		}
		for i, e := range evs {
			if !cancelled[i] {
				want = append(want, e)
			}
		}
		slices.SortFunc(want, func(a, b ev) int {
			return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq))
		})
		if s.Len() != len(want) {
			t.Fatalf("seed %d: Len = %d, want %d", seed, s.Len(), len(want))
		}
		for s.Step() {
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: run order differs from oracle", seed)
		}
	}
}

// BenchmarkSchedulerSteady keeps about pending events queued; each event
// schedules one more at a random delay, as a simulated cluster does.
func BenchmarkSchedulerSteady(b *testing.B) {
	for _, pending := range []int{100, 10_000} {
		b.Run("pending="+strconv.Itoa(pending), func(b *testing.B) {
			s := NewScheduler()
			r := rand.New(rand.NewPCG(1, 2))
			var fn func()
			fn = func() { s.After(time.Duration(1+r.IntN(1000))*time.Microsecond, fn) }
			for range pending {
				s.After(time.Duration(r.IntN(1000))*time.Microsecond, fn)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s.Step()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

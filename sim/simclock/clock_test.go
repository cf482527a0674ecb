package simclock

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestClockDriftDrawnWithinBound(t *testing.T) {
	const maxPPM = 10_000
	r := rand.New(rand.NewPCG(7, 7))
	var sawFast, sawSlow bool
	for range 1000 {
		c := NewClock(0, maxPPM, r)
		if d := c.DriftPPM(); d < -maxPPM || d > maxPPM {
			t.Fatalf("drift %d outside ±%d", d, maxPPM)
		}
		sawFast = sawFast || c.DriftPPM() > maxPPM/2
		sawSlow = sawSlow || c.DriftPPM() < -maxPPM/2
		if !c.WithinBound() {
			t.Fatal("drawn drift reported out of bound")
		}
		// The reading after an hour stays within the bound of true time.
		hour := time.Hour
		got := c.Mono(hour)
		slack := hour / ppmScale * maxPPM
		if got < hour-slack || got > hour+slack {
			t.Fatalf("drift %d: Mono(1h) = %v, outside 1h±%v", c.DriftPPM(), got, slack)
		}
	}
	if !sawFast || !sawSlow {
		t.Fatal("drift draws do not cover both signs of the range")
	}
}

func TestClockRateAndWall(t *testing.T) {
	c := NewClockWithDrift(5*time.Second, 20_000, 10_000) // created at 5s, 1% fast
	if got := c.Mono(5 * time.Second); got != 0 {
		t.Fatalf("Mono at creation = %v, want 0", got)
	}
	if got := c.Mono(6 * time.Second); got != 1010*time.Millisecond {
		t.Fatalf("Mono after 1s = %v, want 1.01s", got)
	}
	if got := c.Wall(6 * time.Second); got != 6010*time.Millisecond {
		t.Fatalf("Wall after 1s = %v, want 6.01s", got)
	}
	c.Jump(-2 * time.Second)
	if got := c.Wall(6 * time.Second); got != 4010*time.Millisecond {
		t.Fatalf("Wall after a -2s jump = %v, want 4.01s", got)
	}
	if got := c.Mono(6 * time.Second); got != 1010*time.Millisecond {
		t.Fatalf("Mono moved with a wall jump: %v", got)
	}
	c.Jump(time.Hour)
	if got := c.Wall(6 * time.Second); got != time.Hour+4010*time.Millisecond || c.Jumps() != 2 {
		t.Fatalf("Wall after +1h jump = %v (jumps %d)", got, c.Jumps())
	}
}

func TestClockSetDriftIsContinuous(t *testing.T) {
	c := NewClockWithDrift(0, 10_000, 10_000)
	before := c.Mono(time.Second)
	c.SetDriftPPM(time.Second, -10_000)
	if got := c.Mono(time.Second); got != before {
		t.Fatalf("reading jumped on drift change: %v -> %v", before, got)
	}
	if got := c.Mono(2 * time.Second); got != before+990*time.Millisecond {
		t.Fatalf("Mono(2s) = %v, want %v", got, before+990*time.Millisecond)
	}
	if !c.WithinBound() {
		t.Fatal("in-bound change reported out of bound")
	}
	c.SetDriftPPM(2*time.Second, 50_000)
	if c.WithinBound() {
		t.Fatal("drift beyond MaxDriftPPM not reported")
	}
	c.SetDriftPPM(3*time.Second, 0)
	if c.WithinBound() {
		t.Fatal("WithinBound must stay false once exceeded")
	}
}

func TestClockTrueAtMonoIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		now := time.Duration(r.Int64N(int64(10 * time.Hour)))
		c := NewClockWithDrift(0, 100_000, r.IntN(200_001)-100_000)
		c.SetDriftPPM(now, r.IntN(200_001)-100_000)
		m := c.Mono(now) + time.Duration(r.Int64N(int64(time.Hour)))
		at := c.TrueAtMono(m)
		if c.Mono(at) < m || (at > now && c.Mono(at-1) >= m) {
			t.Fatalf("drift %d: TrueAtMono(%v) = %v but Mono there = %v, Mono just before = %v",
				c.DriftPPM(), m, at, c.Mono(at), c.Mono(at-1))
		}
	}
}

func TestClockNextTickAndTrueAfter(t *testing.T) {
	const tick = 50 * time.Millisecond
	c := NewClockWithDrift(0, 10_000, -10_000) // 1% slow: a local tick takes longer
	now := time.Duration(0)
	for k := int64(1); k <= 100; k++ {
		at, got := c.NextTick(now, tick)
		if got != k {
			t.Fatalf("tick number %d, want %d", got, k)
		}
		if c.Mono(at) != time.Duration(k)*tick {
			t.Fatalf("tick %d at true %v reads %v", k, at, c.Mono(at))
		}
		now = at
	}
	// 100 local ticks of 50ms are 5s local, 5s/0.99 true.
	if want := c.TrueAtMono(5 * time.Second); now != want || now <= 5*time.Second {
		t.Fatalf("100 ticks ended at %v, want %v (> 5s)", now, want)
	}
	if got := c.TrueAfter(now, time.Second); c.Mono(got)-c.Mono(now) != time.Second {
		t.Fatalf("TrueAfter(1s) elapsed %v locally", c.Mono(got)-c.Mono(now))
	}
}

func TestClockLongRunDoesNotOverflow(t *testing.T) {
	c := NewClockWithDrift(0, 100_000, 100_000)
	week := 7 * 24 * time.Hour
	if got, want := c.Mono(week), week+week/10; got != want {
		t.Fatalf("Mono(1 week) = %v, want %v", got, want)
	}
	if got := c.TrueAtMono(week + week/10); got != week {
		t.Fatalf("TrueAtMono = %v, want %v", got, week)
	}
}

func TestClockPanicsOnProgrammerErrors(t *testing.T) {
	c := NewClockWithDrift(time.Second, 1000, 0)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"Mono before anchor", func() { c.Mono(0) }},
		{"reversing drift", func() { c.SetDriftPPM(time.Second, -1_000_000) }},
		{"negative TrueAfter", func() { c.TrueAfter(time.Second, -1) }},
		{"zero tick interval", func() { c.NextTick(time.Second, 0) }},
		{"bound out of range", func() { NewClockWithDrift(0, -1, 0) }},
		{"TrueAtMono into past", func() { c.SetDriftPPM(2*time.Second, 0); c.TrueAtMono(time.Millisecond) }},
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

package chaos

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// A seed replays its schedule; another seed draws another one.
func TestScheduleIsSeeded(t *testing.T) {
	a, b := NewSchedule(7, 3*time.Minute), NewSchedule(7, 3*time.Minute)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed drew two schedules")
	}
	if reflect.DeepEqual(a.Faults, NewSchedule(8, 3*time.Minute).Faults) {
		t.Fatal("seeds 7 and 8 drew the same schedule")
	}
}

// Faults start after the warm-up, heal before the quiet tail, each
// after the previous one's window closed, and a six-minute run (CI's)
// holds every kind for most seeds.
func TestScheduleBounds(t *testing.T) {
	complete := 0
	for seed := uint64(1); seed <= 200; seed++ {
		for _, d := range []time.Duration{MinDuration, 6 * time.Minute, 30 * time.Minute} {
			s := NewSchedule(seed, d)
			if len(s.Faults) == 0 {
				t.Fatalf("seed %d, %v: no fault", seed, d)
			}
			prevEnd := time.Duration(0)
			for _, f := range s.Faults {
				if f.At < Warmup(d) || f.At+f.Down > d-QuietTail(d) || f.At < prevEnd || f.Down <= 0 {
					t.Fatalf("seed %d, %v: %s out of bounds (previous ended at %v)", seed, d, f, prevEnd)
				}
				if f.Kind == PauseLeader && f.Down <= time.Second {
					t.Fatalf("seed %d: a pause of %v is within the 1 s lease", seed, f.Down)
				}
				if f.Kind == ClockJump && (f.Offset.Abs() < 10*time.Second || f.Offset.Abs() > 40*time.Second) {
					t.Fatalf("seed %d: clock jump of %v", seed, f.Offset)
				}
				prevEnd = f.At + f.Down + f.recovery(f.Down)
			}
			if d == 6*time.Minute && len(s.Missing()) == 0 {
				complete++
			}
			if d == 30*time.Minute && len(s.Missing()) > 0 {
				t.Fatalf("seed %d: 30 minutes lack %v", seed, s.Missing())
			}
		}
	}
	t.Logf("%d of 200 six-minute schedules hold every kind", complete)
	if complete < 150 {
		t.Fatalf("only %d of 200 six-minute schedules hold every kind", complete)
	}
}

func TestSchedulePrint(t *testing.T) {
	var b strings.Builder
	NewSchedule(42, 3*time.Minute).Print(&b)
	if !strings.Contains(b.String(), "seed 42") || !strings.Contains(b.String(), " 1. ") {
		t.Fatalf("printed:\n%s", b.String())
	}
}

func TestWindowEnd(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		f    Fault
		want time.Duration
	}{
		{Fault{Kind: KillLeader}, 10*time.Second + RecoveryBase},
		{Fault{Kind: NomadRestart}, 20*time.Second + RecoveryBase},
		{Fault{Kind: ClockJump, Offset: -30 * time.Second}, 40*time.Second + RecoveryBase},
	} {
		if got := tc.f.WindowEnd(t0, t0.Add(10*time.Second)).Sub(t0); got != tc.want {
			t.Errorf("%s: window ends %v after the start, want %v", tc.f.Kind, got, tc.want)
		}
	}
}

// The planned windows leave a good share of a run outside them, where
// the checker judges lateness. A slot due up to the lateness bound (5 s
// by default) before a fault counts as inside its window.
func TestScheduleLeavesHealthyTime(t *testing.T) {
	const lead = 5 * time.Second
	for d, want := range map[time.Duration]float64{6 * time.Minute: 0.15, 30 * time.Minute: 0.45} {
		least := 1.0
		for seed := uint64(1); seed <= 200; seed++ {
			s := NewSchedule(seed, d)
			covered := time.Duration(0)
			for _, f := range s.Faults {
				end := min(f.At+f.Down+f.recovery(f.Down), d)
				covered += end - f.At + lead
			}
			least = min(least, 1-float64(covered)/float64(d))
		}
		t.Logf("%v: at least %.0f%% of the run outside the planned windows", d, 100*least)
		if least < want {
			t.Errorf("%v: as little as %.0f%% of a run outside the planned windows", d, 100*least)
		}
	}
}

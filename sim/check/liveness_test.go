package check

import (
	"testing"
	"time"
)

func TestLiveness(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name    string
		run     func(l *Liveness)
		checkAt time.Duration
		parts   []string // nil: must pass
	}{
		{"never healed owes nothing", func(l *Liveness) {}, time.Hour, nil},
		{"leader and commit in time", func(l *Liveness) {
			l.Healed(10 * s)
			l.LeaderElected(11*s, 2)
			l.Committed(12 * s)
		}, time.Hour, nil},
		{"still within the bound", func(l *Liveness) { l.Healed(10 * s) }, 15 * s, nil},
		{"no leader", func(l *Liveness) { l.Healed(10 * s) }, 15*s + 1, []string{"healed at 10s", "no leader", "bound 5s"}},
		{"leader but no commit", func(l *Liveness) {
			l.Healed(10 * s)
			l.LeaderElected(12*s, 3)
		}, 16 * s, []string{"leader 3 elected at 12s", "nothing committed by 16s"}},
		{"leader from before the heal does not count", func(l *Liveness) {
			l.LeaderElected(9*s, 1)
			l.Committed(9 * s)
			l.Healed(10 * s)
		}, 16 * s, []string{"no leader"}},
		{"a new fault calls the clock off", func(l *Liveness) {
			l.Healed(10 * s)
			l.Faulted(11 * s)
		}, time.Hour, nil},
		{"healing again does not extend the deadline", func(l *Liveness) {
			l.Healed(10 * s)
			l.Healed(14 * s)
		}, 16 * s, []string{"healed at 10s"}},
		{"fault, heal again: fresh deadline", func(l *Liveness) {
			l.Healed(10 * s)
			l.Faulted(11 * s)
			l.Healed(20 * s)
		}, 24 * s, nil},
		{"leader too late", func(l *Liveness) {
			l.Healed(10 * s)
			l.LeaderElected(20*s, 1)
			l.Committed(20 * s)
		}, 20 * s, []string{"leader 1 elected only at 20s"}},
		{"commit too late", func(l *Liveness) {
			l.Healed(10 * s)
			l.LeaderElected(11*s, 1)
			l.Committed(16 * s)
		}, 16 * s, []string{"first commit only at 16s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLiveness(5 * s)
			tc.run(l)
			err := l.Check(tc.checkAt)
			if tc.parts == nil {
				wantOK(t, err)
				return
			}
			wantViolation(t, err, InvLiveness, tc.parts...)
		})
	}
}

func TestLivenessSatisfied(t *testing.T) {
	l := NewLiveness(time.Second)
	if !l.Satisfied() {
		t.Fatal("nothing pending, yet unsatisfied")
	}
	l.Healed(0)
	l.LeaderElected(1, 1)
	if l.Satisfied() {
		t.Fatal("satisfied without a commit")
	}
	l.Committed(2)
	if !l.Satisfied() || l.Bound() != time.Second {
		t.Fatal("not satisfied after leader and commit")
	}
}

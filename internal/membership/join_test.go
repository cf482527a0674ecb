package membership

import (
	"errors"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSeeds answers joins as told and records when each seed was tried.
type fakeSeeds struct {
	start   time.Time
	tries   []time.Duration   // since start, one per seed tried
	answers func(try int) int // how many answered the try-th call
	rounds  []int
}

func (f *fakeSeeds) join(seeds []string) (int, error) {
	if len(seeds) != 1 {
		panic("the joiner tries one seed at a time")
	}
	f.tries = append(f.tries, time.Since(f.start))
	if n := f.answers(len(f.tries) - 1); n > 0 {
		return n, nil
	}
	return 0, errors.New("connection refused")
}

func (f *fakeSeeds) joiner(seeds []string, stop chan struct{}) joiner {
	return joiner{
		seeds:     seeds,
		join:      f.join,
		initial:   100 * time.Millisecond,
		max:       time.Second,
		log:       slog.New(slog.DiscardHandler),
		attempted: func(n int) { f.rounds = append(f.rounds, n) },
		stop:      stop,
	}
}

func TestJoinBacksOffUntilASeedAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSeeds{start: time.Now(), answers: func(try int) int {
			if try == 6 {
				return 1
			}
			return 0
		}}
		f.joiner([]string{"a:1"}, make(chan struct{})).run()
		ms := time.Millisecond
		want := []time.Duration{0, 100 * ms, 300 * ms, 700 * ms, 1500 * ms, 2500 * ms, 3500 * ms}
		if !slices.Equal(f.tries, want) {
			t.Errorf("tries at %v, want %v", f.tries, want)
		}
		if want := []int{0, 0, 0, 0, 0, 0, 1}; !slices.Equal(f.rounds, want) {
			t.Errorf("rounds %v, want %v", f.rounds, want)
		}
	})
}

func TestJoinTriesEverySeedOfARound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Only the third seed answers, the first time it is asked.
		f := &fakeSeeds{start: time.Now(), answers: func(try int) int {
			if try == 2 {
				return 1
			}
			return 0
		}}
		f.joiner([]string{"a:1", "b:1", "c:1"}, make(chan struct{})).run()
		if len(f.tries) != 3 || !slices.Equal(f.rounds, []int{1}) {
			t.Errorf("tries %v, rounds %v; want one round of three", f.tries, f.rounds)
		}
	})
}

func TestJoinStopsOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSeeds{start: time.Now(), answers: func(int) int { return 0 }}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.joiner([]string{"a:1"}, stop).run()
		}()
		<-time.After(time.Hour) // the bubble's fake time: an hour of retries, capped at 1 s apart
		synctest.Wait()
		tries := len(f.tries)
		if tries < 3600-10 || tries > 3600+10 {
			t.Errorf("%d tries in an hour, want about 3600", tries)
		}
		close(stop)
		<-done
		if len(f.tries) != tries {
			t.Errorf("tried again after stop")
		}
	})
}

func TestJoinWithoutSeedsReturnsAtOnce(t *testing.T) {
	f := &fakeSeeds{answers: func(int) int { panic("no seed to try") }}
	f.joiner(nil, make(chan struct{})).run()
	if len(f.rounds) != 0 {
		t.Errorf("rounds %v", f.rounds)
	}
}

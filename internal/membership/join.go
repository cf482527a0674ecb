package membership

import (
	"context"
	"log/slog"
	"time"
)

// joinFunc contacts seeds and says how many answered (memberlist.Join).
type joinFunc func(seeds []string) (int, error)

// joiner retries joining the seeds until one answers or stop closes.
type joiner struct {
	seeds   []string
	join    joinFunc
	initial time.Duration // the wait after the first failed round
	max     time.Duration // the cap of the doubling waits
	log     *slog.Logger
	// attempted is told each round's outcome (for Stats).
	attempted func(reached int)
	stop      <-chan struct{}
}

// run joins, then returns; or returns when stop closes. A round tries
// every seed, one at a time so that stop is heard between them (each
// may take memberlist's TCPTimeout). Rounds start at once, then after
// initial, 2×initial, ... up to max: a seed that is starting is found
// soon, and one that is gone costs little.
func (j joiner) run() {
	if len(j.seeds) == 0 {
		return
	}
	wait := j.initial
	for failures := 0; ; failures++ {
		reached, err := j.round()
		if j.stopped() {
			return
		}
		j.attempted(reached)
		if reached > 0 {
			j.log.Info("membership: joined", "seeds", j.seeds, "reached", reached, "failed_rounds", failures)
			return
		}
		// The first replica up has nobody to join yet: only a long wait
		// is worth a warning.
		level := slog.LevelDebug
		if wait == j.max {
			level = slog.LevelWarn
		}
		j.log.Log(context.Background(), level, "membership: no seed answered; retrying", "seeds", j.seeds, "in", wait, "err", err)
		timer := time.NewTimer(wait)
		select {
		case <-j.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
		wait = min(2*wait, j.max)
	}
}

// round tries each seed; it returns how many answered and the last
// error.
func (j joiner) round() (int, error) {
	reached := 0
	var lastErr error
	for _, seed := range j.seeds {
		if j.stopped() {
			break
		}
		n, err := j.join([]string{seed})
		reached += n
		if err != nil {
			lastErr = err
		}
	}
	return reached, lastErr
}

func (j joiner) stopped() bool {
	select {
	case <-j.stop:
		return true
	default:
		return false
	}
}

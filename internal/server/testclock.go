package server

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// TestClockPoll is how often the server re-reads Config.TestClockOffsetFile.
const TestClockPoll = 250 * time.Millisecond

// MaxTestClockOffset bounds the offset a test may set, so that a file
// with a typo cannot send the launcher years away.
const MaxTestClockOffset = 24 * time.Hour

// testClock is the launcher's wall clock when Config.TestClockOffsetFile
// is set: the real clock plus an offset that the fault tests change while
// the replica runs (a clock jump). The lease is still counted in real
// ticks and converted to this clock on every step, so a jump moves the
// lease's end with it; what it shifts is when slots come due, the launch
// records' times and the catch-up windows: what a replica with a wrong
// clock would get wrong.
type testClock struct {
	path   string
	offset atomic.Int64 // nanoseconds
}

// now is the shifted clock.
func (c *testClock) now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}

// readTestClockOffset reads the offset a file holds: a Go duration
// ("30s", "-1m"), or nothing (a missing or empty file) for none.
func readTestClockOffset(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("server: test clock offset: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("server: test clock offset in %s: %w", path, err)
	}
	if d > MaxTestClockOffset || d < -MaxTestClockOffset {
		return 0, fmt.Errorf("server: test clock offset %v in %s: beyond ±%v", d, path, MaxTestClockOffset)
	}
	return d, nil
}

// startTestClock reads the offset once (a bad file is a configuration
// error: the server does not start) and returns the clock.
func startTestClock(path string) (*testClock, error) {
	d, err := readTestClockOffset(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c := &testClock{path: path}
	c.offset.Store(int64(d))
	return c, nil
}

// watchTestClock re-reads the offset file until the server stops, and
// logs every jump; a file it cannot read leaves the offset as it was.
func (s *Server) watchTestClock() {
	c := s.testClock
	t := time.NewTicker(TestClockPoll)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		d, err := readTestClockOffset(c.path)
		if err != nil {
			s.log.Error("test clock: keeping the offset", "err", err)
			continue
		}
		if old := time.Duration(c.offset.Swap(int64(d))); old != d {
			s.log.Warn("test clock jumped (fault testing)", "from", old.String(), "to", d.String())
		}
	}
}

package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"paxcron/internal/api"
)

func TestReadTestClockOffset(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string // "-": no file
		want    time.Duration
		bad     bool
	}{
		{"-", 0, false},
		{"", 0, false},
		{"30s\n", 30 * time.Second, false},
		{" -1m ", -time.Minute, false},
		{"thirty", 0, true},
		{"30", 0, true},
		{"25h", 0, true},
		{"-25h", 0, true},
	} {
		path := filepath.Join(dir, "offset")
		os.Remove(path)
		if tc.content != "-" {
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := readTestClockOffset(path)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("offset file %q: got %v, %v; want %v, error %v", tc.content, got, err, tc.want, tc.bad)
		}
	}
}

// A replica whose offset file does not hold a duration does not start.
func TestTestClockBadFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offset")
	if err := os.WriteFile(path, []byte("soon"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, 1, t.TempDir(), newFakeNomad())
	cfg.TestClockOffsetFile = path
	if _, err := New(cfg, true); !errors.Is(err, ErrConfig) {
		t.Fatalf("New with a bad offset file: %v, want ErrConfig", err)
	}
}

// Writing an offset into the file while the replicas run makes their
// launcher's clock jump: a job due every second then launches slots that
// lie that far ahead of the real clock.
func TestTestClockJumpsAtRuntime(t *testing.T) {
	dir := t.TempDir()
	offsetFile := filepath.Join(dir, "offset")
	c := startClusterWith(t, func(cfg *Config) { cfg.TestClockOffsetFile = offsetFile })
	leader := c.leader()
	if _, err := c.client(leader, writeToken).PutJobs(context.Background(), everySecond("jump")); err != nil {
		t.Fatal(err)
	}
	// ahead is the latest scheduled time launched, less the real time.
	ahead := func() time.Duration {
		var latest int64
		for id := range c.nomad.Children() {
			if n, err := strconv.ParseInt(strings.TrimPrefix(id, "jump-"), 10, 64); err == nil && n > latest {
				latest = n
			}
		}
		return time.Until(time.Unix(latest, 0))
	}
	c.waitChildren(2)
	if a := ahead(); a > 2*time.Second {
		t.Fatalf("without an offset a slot %v ahead of the clock was launched", a)
	}
	if err := os.WriteFile(offsetFile, []byte("30s"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a slot 25 s ahead of the real clock launched", func() bool { return ahead() > 25*time.Second })
	// Each replica polls the file on its own (every TestClockPoll): the
	// followers may read it after the leader acted on it.
	for _, s := range c.servers {
		eventually(t, fmt.Sprintf("replica %d reading the 30 s offset", s.cfg.ID), func() bool {
			return time.Duration(s.testClock.offset.Load()) == 30*time.Second
		})
	}
}

// A leader's lease is on its launcher's clock; the check that it may
// answer a linearizable read must read the same clock. On the real one,
// a replica whose launcher's clock ran an hour behind refused every read
// (its lease had "ended" an hour ago), and one running ahead would have
// answered reads after its lease had ended.
func TestLinearizableReadsUseTheLeasesClock(t *testing.T) {
	offsetFile := filepath.Join(t.TempDir(), "offset")
	if err := os.WriteFile(offsetFile, []byte("-1h"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startClusterWith(t, func(cfg *Config) { cfg.TestClockOffsetFile = offsetFile })
	leader := c.leader()
	if _, err := c.client(leader, writeToken).PutJobs(context.Background(), everySecond("behind")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.client(leader, writeToken).Job(ctx, "behind", 0, api.ReadOptions{}); err != nil {
		t.Fatalf("a linearizable read from the leader, its launcher's clock an hour behind: %v", err)
	}
}

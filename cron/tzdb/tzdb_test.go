package tzdb

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"testing"
	"time"
)

// TestLoad: zones come from the embedded database, whatever the host's
// environment says, with their rules (summer time in Berlin and Lord
// Howe's half hour); names that are no zone, the host's own among them,
// are refused.
func TestLoad(t *testing.T) {
	t.Setenv("ZONEINFO", "/nonexistent/zoneinfo.zip") // time.LoadLocation would read it
	for _, tc := range []struct {
		zone   string
		at     time.Time
		offset int
	}{
		{"UTC", time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC), 0},
		{"Europe/Berlin", time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC), 3600},
		{"Europe/Berlin", time.Date(2026, 7, 15, 12, 0, 0, 0, time.UTC), 7200},
		{"Australia/Lord_Howe", time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC), 11 * 3600},
		{"Australia/Lord_Howe", time.Date(2026, 7, 15, 12, 0, 0, 0, time.UTC), 10*3600 + 1800},
		{"Asia/Kolkata", time.Date(2026, 7, 15, 12, 0, 0, 0, time.UTC), 5*3600 + 1800},
	} {
		loc, err := Load(tc.zone)
		if err != nil {
			t.Fatalf("%s: %v", tc.zone, err)
		}
		if _, off := tc.at.In(loc).Zone(); off != tc.offset {
			t.Errorf("%s at %s: offset %d s, want %d", tc.zone, tc.at.Format(time.DateOnly), off, tc.offset)
		}
		if loc.String() != tc.zone {
			t.Errorf("%s is named %q", tc.zone, loc)
		}
	}
	for _, bad := range []string{"", "Local", "Mars/Olympus", "../../etc/passwd", "/usr/share/zoneinfo/UTC", "europe/berlin"} {
		if loc, err := Load(bad); err == nil {
			t.Errorf("%q loaded as %v, want an error", bad, loc)
		}
	}
}

// TestTheDatabaseIsPinned: the embedded file is the one Release names;
// replacing it changes launch times, which every replica must see at
// once (one binary version), so it is a change to make on purpose.
func TestTheDatabaseIsPinned(t *testing.T) {
	sum := sha256.Sum256(zoneinfo)
	if got := hex.EncodeToString(sum[:]); got != pinnedSHA256 {
		t.Fatalf("the embedded zone database's SHA-256 is %s, not %s's (%s): update Release and pinnedSHA256 with it", got, Release, pinnedSHA256)
	}
}

// pinnedSHA256 is the SHA-256 of Go 1.26's lib/time/zoneinfo.zip, tzdata
// 2025c.
const pinnedSHA256 = "8f55634d05f8bca1f7bc7c69c5933428c69357e0bdf565e5ba224e3f88ff12e8"

// TestLastListed: the last transition a zone's file lists, read from the
// file itself: past it ZoneBounds can report a start before it, which
// cron/schedule corrects with it.
func TestLastListed(t *testing.T) {
	for _, tc := range []struct {
		zone string
		want time.Time
	}{
		{"America/Metlakatla", time.Date(2019, 1, 20, 10, 0, 0, 0, time.UTC)},
		{"America/Ciudad_Juarez", time.Date(2022, 11, 30, 6, 0, 0, 0, time.UTC)},
		{"America/Indiana/Winamac", time.Date(2007, 3, 11, 8, 0, 0, 0, time.UTC)},
	} {
		loc, last, err := LoadWithLastListed(tc.zone)
		if err != nil || loc.String() != tc.zone {
			t.Fatalf("%s: %v, %v", tc.zone, loc, err)
		}
		if got := time.Unix(last, 0).UTC(); !got.Equal(tc.want) {
			t.Errorf("%s: last listed transition %s, want %s", tc.zone, got.Format(time.RFC3339), tc.want.Format(time.RFC3339))
		}
		// The offset changes there, as the time package reads the file.
		before, after := time.Unix(last-1, 0).In(loc), time.Unix(last, 0).In(loc)
		_, b := before.Zone()
		if _, a := after.Zone(); a == b {
			t.Errorf("%s: no change of offset at %s", tc.zone, after)
		}
	}
	for _, zone := range []string{"UTC", "Etc/GMT+5"} {
		if _, last, err := LoadWithLastListed(zone); err != nil || last != math.MinInt64 {
			t.Errorf("%s: last listed %d, %v; want none", zone, last, err)
		}
	}
	if _, err := lastListed([]byte("TZif2 short")); err == nil {
		t.Error("truncated data read")
	}
}

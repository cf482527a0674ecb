// Package tzdb owns the time-zone database every replica reads: the IANA
// database embedded in the binary, never the host's. The schedule language
// (cron/schedule) and the simulator's independent oracle (sim/check) both
// load zones from it, so that launch times are a function of the binary
// alone.
package tzdb

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// zoneinfo is the IANA time-zone database, release 2025c, as Go 1.26
// ships it ($GOROOT/lib/time/zoneinfo.zip; public domain). A job's launch
// times depend on its zone's rules, and every replica applies a PutJob and
// a LaunchStarted by them: replicas reading each host's own database (or
// none, in an image built FROM scratch) could refuse a zone one accepts, or
// compute another next launch, and diverge. Zones come from this copy
// alone, so they are a function of the binary. A new release of the
// database changes launch times as a change of code does: every replica
// runs one version of paxcron (see DESIGN.md, "The same zone database
// everywhere").
//
//go:embed zoneinfo.zip
var zoneinfo []byte

// Release is the release of the embedded database.
const Release = "2025c"

var zoneFiles = sync.OnceValues(func() (map[string]*zip.File, error) {
	r, err := zip.NewReader(bytes.NewReader(zoneinfo), int64(len(zoneinfo)))
	if err != nil {
		return nil, fmt.Errorf("tzdb: the embedded zone database: %w", err)
	}
	files := make(map[string]*zip.File, len(r.File))
	for _, f := range r.File {
		files[f.Name] = f
	}
	return files, nil
})

var errUnknownZone = errors.New("unknown time zone")

// Load loads the named zone from the embedded database: an IANA name
// such as "Europe/Berlin", or "UTC". The host's own database is never read.
func Load(name string) (*time.Location, error) {
	loc, _, err := LoadWithLastListed(name)
	return loc, err
}

// LoadWithLastListed is Load, and also returns the last transition the
// zone's file lists, in Unix seconds (math.MinInt64 if it lists none).
// After it the time package applies the zone's rule (the TZ string that
// ends the file), and Time.ZoneBounds then reports the start of the
// rule's period, which can lie before that last listed transition
// (America/Metlakatla on 2019-01-20): a caller that needs the true start
// takes the later of the two.
func LoadWithLastListed(name string) (*time.Location, int64, error) {
	if name == "UTC" {
		return time.UTC, math.MinInt64, nil
	}
	files, err := zoneFiles()
	if err != nil {
		return nil, 0, err
	}
	f, ok := files[name]
	if !ok {
		return nil, 0, fmt.Errorf("%w %s", errUnknownZone, name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, 0, fmt.Errorf("tzdb: zone %s: %w", name, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return nil, 0, fmt.Errorf("tzdb: zone %s: %w", name, err)
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, 0, err
	}
	last, err := lastListed(data)
	if err != nil {
		return nil, 0, fmt.Errorf("tzdb: zone %s: %w", name, err)
	}
	return loc, last, nil
}

// lastListed returns the last transition time of TZif data (RFC 8536),
// from the 64-bit block of a version 2 or later file as the time package
// reads it, or math.MinInt64 if there is none.
func lastListed(data []byte) (int64, error) {
	const headerLen = 44
	malformed := errors.New("malformed TZif data")
	header := func(at int) (version byte, counts [6]int, ok bool) {
		if len(data) < at+headerLen || string(data[at:at+4]) != "TZif" {
			return 0, counts, false
		}
		for i := range counts { // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
			counts[i] = int(binary.BigEndian.Uint32(data[at+20+4*i:]))
		}
		return data[at+4], counts, true
	}
	version, c, ok := header(0)
	if !ok {
		return 0, malformed
	}
	at, width := headerLen, 4
	if version >= '2' {
		at += c[3]*4 + c[3] + c[4]*6 + c[5] + c[2]*8 + c[1] + c[0] // skip the 32-bit block
		if _, c, ok = header(at); !ok {
			return 0, malformed
		}
		at, width = at+headerLen, 8
	}
	n := c[3]
	if n == 0 {
		return math.MinInt64, nil
	}
	end := at + n*width
	if end > len(data) {
		return 0, malformed
	}
	if width == 4 {
		return int64(int32(binary.BigEndian.Uint32(data[end-4:]))), nil
	}
	return int64(binary.BigEndian.Uint64(data[end-8:])), nil
}

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
	"errors"
	"fmt"
	"io"
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
	if name == "UTC" {
		return time.UTC, nil
	}
	files, err := zoneFiles()
	if err != nil {
		return nil, err
	}
	f, ok := files[name]
	if !ok {
		return nil, fmt.Errorf("%w %s", errUnknownZone, name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("tzdb: zone %s: %w", name, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("tzdb: zone %s: %w", name, err)
	}
	return time.LoadLocationFromTZData(name, data)
}

package check

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"paxcron/cron/tzdb"
)

// Oracle is the checker's own reading of a schedule, written from the
// rules in cron/schedule's documentation and sharing no code with that
// package, so that a wrong launch time there (a daylight-saving rule, a
// step, a hashed value) is a violation here rather than the checker's
// agreement. It is slow on purpose: it walks instant by instant, one
// second at a time, over the short spans a simulated run covers.
//
// It reads the expressions the simulator gives jobs, no more: five or
// six fields of numbers, ranges, lists, steps, * and a plain ? (the
// hash); day-of-week only *; and @every with a whole number of seconds.
// Anything else is an error, so that a new simulated schedule cannot
// pass unchecked.
type Oracle struct {
	every time.Duration // @every; zero for fields
	// second, minute, hour, dom, month are the values each field allows.
	second, minute, hour, dom, month [61]bool
	// cadence: the hour field is one term through 0-23 at its step that
	// yields two hours or more, so the schedule keeps its cadence through
	// daylight-saving changes.
	cadence bool
	loc     *time.Location
}

// NewOracle reads expr for job name in zone (empty: UTC).
func NewOracle(expr, name, zone string) (*Oracle, error) {
	o := &Oracle{loc: time.UTC}
	if zone != "" {
		// The zone's rules are data, not the code under test: the
		// replicas' own database (cron/tzdb), the same on every machine,
		// so that a seed's run does not depend on the host's.
		loc, err := tzdb.Load(zone)
		if err != nil {
			return nil, fmt.Errorf("oracle: zone %q: %w", zone, err)
		}
		o.loc = loc
	}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || every < time.Second || every%time.Second != 0 {
			return nil, fmt.Errorf("oracle: %q: want a whole number of seconds", expr)
		}
		o.every = every
		return o, nil
	}
	f := strings.Fields(expr)
	switch len(f) {
	case 5:
		f = append([]string{"0"}, f...)
	case 6:
	default:
		return nil, fmt.Errorf("oracle: %q: want five or six fields", expr)
	}
	if f[5] != "*" {
		return nil, fmt.Errorf("oracle: %q: day-of-week %q: the oracle reads only *", expr, f[5])
	}
	fields := []struct {
		name   string
		text   string
		lo, hi int
		set    *[61]bool
	}{
		{"second", f[0], 0, 59, &o.second}, {"minute", f[1], 0, 59, &o.minute}, {"hour", f[2], 0, 23, &o.hour},
		{"day-of-month", f[3], 1, 31, &o.dom}, {"month", f[4], 1, 12, &o.month},
	}
	for _, fd := range fields {
		if err := oracleField(fd.text, name, fd.name, fd.lo, fd.hi, fd.set); err != nil {
			return nil, fmt.Errorf("oracle: %q: %s: %w", expr, fd.name, err)
		}
	}
	hours := 0
	for _, on := range o.hour[:24] {
		if on {
			hours++
		}
	}
	o.cadence = hours > 1 && hourCadence(f[2])
	return o, nil
}

// hourCadence reads the documented rule: one hour term that runs to 23
// and starts below its step (*, 0-23, */n, 0-23/n, 1-23/2, 1/2; a hashed
// step, ?/n, is refused above). NewOracle also asks for two hours or
// more: a term that yields one hour (1/24, 2-23/22) is a fixed hour.
func hourCadence(text string) bool {
	if strings.Contains(text, ",") {
		return false
	}
	rng, stepText, stepped := strings.Cut(text, "/")
	step := 1
	if stepped {
		step, _ = strconv.Atoi(stepText) // checked by oracleField
	}
	if rng == "*" {
		return true
	}
	a, b, isRange := strings.Cut(rng, "-")
	from, _ := strconv.Atoi(a)
	to := 23
	if isRange {
		to, _ = strconv.Atoi(b)
	} else if !stepped {
		to = from
	}
	return from < step && to == 23
}

// oracleField marks in set the values text allows.
func oracleField(text, job, field string, lo, hi int, set *[61]bool) error {
	if text == "?" {
		if field == "day-of-month" {
			hi = 28
		}
		h := fnv.New64a()
		h.Write([]byte(job))
		h.Write([]byte{0})
		h.Write([]byte(field))
		set[lo+int(h.Sum64()%uint64(hi-lo+1))] = true
		return nil
	}
	for term := range strings.SplitSeq(text, ",") {
		rng, stepText, stepped := strings.Cut(term, "/")
		step := 1
		if stepped {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return fmt.Errorf("step %q", stepText)
			}
			step = n
		}
		from, to := lo, hi
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			x, err1 := strconv.Atoi(a)
			y, err2 := strconv.Atoi(b)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("range %q", rng)
			}
			from, to = x, y
		default:
			x, err := strconv.Atoi(rng)
			if err != nil {
				return fmt.Errorf("term %q", term)
			}
			from, to = x, x
			if stepped {
				to = hi
			}
		}
		if from < lo || to > hi || from > to {
			return fmt.Errorf("%q out of %d-%d", term, lo, hi)
		}
		for v := from; v <= to; v += step {
			set[v] = true
		}
	}
	return nil
}

// errNoLaunch says the oracle found no launch in the span asked.
var errNoLaunch = errors.New("no launch")

// MaxOracleSpan bounds the span Next walks, second by second: a simulated
// run is minutes long, so a longer span is itself a sign of a launch far
// from its time.
const MaxOracleSpan = 24 * time.Hour

// Next is the first launch after from and no later than limit, by the
// documented rules; errNoLaunch if there is none, and an error if limit
// is more than MaxOracleSpan after from.
func (o *Oracle) Next(from, limit time.Time) (time.Time, error) {
	if limit.Sub(from) > MaxOracleSpan {
		return time.Time{}, fmt.Errorf("oracle: a span of %v from %s: the oracle walks at most %v", limit.Sub(from), from.UTC().Format(time.RFC3339), MaxOracleSpan)
	}
	t := from.Truncate(time.Second).Add(time.Second)
	if o.every > 0 {
		s := o.every.Nanoseconds() / 1e9
		u := t.Unix()
		if r := u % s; r != 0 {
			u += s - r
		}
		if at := time.Unix(u, 0); !at.After(limit) {
			return at, nil
		}
		return time.Time{}, errNoLaunch
	}
	for ; !t.After(limit); t = t.Add(time.Second) {
		if o.launchesAt(t) {
			return t.In(o.loc), nil
		}
	}
	return time.Time{}, errNoLaunch
}

// launchesAt applies the daylight-saving rules to the instant t.
func (o *Oracle) launchesAt(t time.Time) bool {
	wall, before := t.In(o.loc), t.Add(-time.Second).In(o.loc)
	_, off := wall.Zone()
	_, offBefore := before.Zone()
	if o.cadence {
		return o.matches(wall)
	}
	if off > offBefore {
		// A fixed-hours schedule launches once at the jump forward if a
		// wall time it matches was jumped over, or is the jump's own.
		for w := civil(before).Add(time.Second); !w.After(civil(wall)); w = w.Add(time.Second) {
			if o.matches(w) {
				return true
			}
		}
		return false
	}
	// In a fall-back overlap only the first occurrence launches.
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if civil(t.Add(-back).In(o.loc)).Equal(civil(wall)) {
			return false
		}
	}
	return o.matches(wall)
}

// matches reads the fields against a wall clock.
func (o *Oracle) matches(wall time.Time) bool {
	return o.second[wall.Second()] && o.minute[wall.Minute()] && o.hour[wall.Hour()] &&
		o.dom[wall.Day()] && o.month[int(wall.Month())]
}

// civil is t's wall clock as a UTC time, for comparing wall clocks.
func civil(t time.Time) time.Time {
	y, mo, d := t.Date()
	return time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

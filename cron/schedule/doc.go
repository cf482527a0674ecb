// Package schedule owns paxcron's schedule language: it parses a cron
// expression for one job into a Schedule, and computes the job's launch
// times from it. It is pure: no clock, no goroutines, no randomness, no
// global state; the same expression, job name and zone give the same
// launch times on every replica and every version.
//
// # Expressions
//
// Five fields, or six with a leading seconds field:
//
//	[second] minute hour day-of-month month day-of-week
//	 0-59    0-59   0-23 1-31         1-12  0-7 (0 and 7 are Sunday)
//
// Each field is a comma-separated list of terms:
//
//	term         meaning
//	5            one value; months JAN-DEC and weekdays SUN-SAT by name, any case
//	1-5          a range, start <= end
//	*            every value (for day-of-week, 0-6)
//	*/15         a step over every value; also 1-30/5 over a range, and
//	             10/20 from a value to the end of the field's range
//	? or H       one value chosen by hashing the job's name (see below)
//	?(0-7)       the same, chosen within a range
//	?/15         a step whose start is chosen by the hash: */15 shifted by
//	             hash mod 15; also ?(lo-hi)/step
//
// Day-of-month also takes L (the last day of the month), LW (the last
// weekday, Monday to Friday, of the month) and nW (the weekday nearest to
// day n, within the same month: a Saturday moves to the Friday before
// unless that leaves the month, a Sunday to the Monday after unless that
// leaves the month; the month has no launch if it has no day n). nW and LW
// must be the only term of their field. Day-of-week also takes dL (the last
// weekday d of the month, e.g. 5L or FRIL) and d#k (the k-th weekday d of
// the month, k in 1-5, e.g. MON#1).
//
// When both day-of-month and day-of-week are restricted (neither field's
// text starts with '*'), a day matches if either matches, as in Vixie cron;
// otherwise both must match. A field whose text starts with '*' (so also
// */2) counts as unrestricted for this rule.
//
// Macros: @yearly (@annually) = "0 0 1 1 *", @monthly = "0 0 1 * *",
// @weekly = "0 0 * * 0", @daily (@midnight) = "0 0 * * *", @hourly =
// "0 * * * *", and @every <duration> (a Go duration, a whole number of
// seconds, at least 1s): a fixed cadence in absolute time, at the instants
// that are whole multiples of the duration since the Unix epoch, so every
// replica computes the same instants whatever the zone.
//
// Expressions whose day-of-month can never occur in the chosen months
// (0 0 30 2 *) are rejected by Parse. Others that never fire in practice
// (the fifth Monday of February) parse, and Next reports no launch: it
// searches at most SearchYears years ahead and always terminates.
//
// Errors are *ParseError values naming the field and what is wrong, e.g.
// "schedule: hour: 25 is out of range 0-23".
//
// # The hash behind ? and H (stable contract)
//
// For a field f of job j, the hash is FNV-1a 64 (hash/fnv) over the bytes
// of j, one zero byte, and the field's name ("second", "minute", "hour",
// "day-of-month", "month", "day-of-week"); hashing the field name too keeps
// the minute and the hour of one job uncorrelated. A plain ? takes
// lo + hash mod (hi-lo+1) over the field's range, except that day-of-month
// uses 1-28 so that the day exists in every month; ?(lo-hi) uses lo-hi;
// ?/n and ?(lo-hi)/n start at lo + hash mod n. This mapping is part of the
// package's contract: changing it would move every hashed job at once, and
// a golden test pins it. The resolved expression, with each hashed term
// replaced by what it chose (0 ? * * * for job "nightly" becomes, say,
// 0 17 * * *), is what String returns and what is shown wherever a schedule
// is shown.
//
// # Time zones and daylight saving time
//
// Each schedule has an IANA time zone (UTC by default) and its fields match
// the wall clock in that zone. Zones are read from the database embedded in
// the binary (cron/tzdb), never the host's, so that every replica computes
// the same launch times. Where the wall clock jumps, the rules are:
//
//   - Fixed hours. If the hour field is anything but a cadence (below), a
//     matching wall time that does not exist because the clock jumped
//     forward over it (a spring-forward gap) launches once, at the first
//     instant after the gap (the instant of the jump; its wall clock reads
//     the end of the gap, e.g. 03:00 for a 02:00-03:00 gap). Several
//     matching wall times in one gap launch once, together, and so does a
//     matching wall time at the end of the gap. A matching wall time that
//     occurs twice because the clock went back (a fall-back overlap)
//     launches once, at its first occurrence. A daily job therefore
//     launches exactly once on every local day.
//   - Cadences. If the hour field is a single term running through the
//     whole range 0-23 at its step, starting within one step of 0 (*,
//     0-23, */n, 0-23/n, and m-23/n or m/n with m < n, as 1-23/2; a
//     hashed ?/n resolves to one of these) and matches two hours or more,
//     the schedule keeps its cadence in absolute time: it launches at
//     every instant whose wall clock matches, so a wall time inside a gap
//     is skipped and a wall time in an overlap launches at both of its
//     occurrences (they are different absolute instants). With a one-hour
//     shift, 0 * * * * launches once every absolute hour through both
//     transitions and */15 * * * * every fifteen absolute minutes; with a
//     30-minute shift (Australia/Lord_Howe), */15 and */30 keep their
//     cadence, while 0 * * * * has one interval of 90 minutes at each
//     transition. A step that yields a single hour (1/24, 2-23/22, 13/14,
//     */24, ?/24) is a fixed hour, as daily as that hour written plainly;
//     one that yields two hours or more, however far apart (*/12, 1/12),
//     is a cadence.
//
// In both cases no launch is doubled (Next is strictly increasing and an
// instant is returned once) and none is lost beyond what the rules say.
//
// # Cost
//
// Each field is a bit mask and Next steps forward field by field on
// integer civil dates, with one or two zone look-ups per call away from
// transitions: a few hundred nanoseconds or less for common expressions
// (BenchmarkNext).
package schedule

package schedule

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		expr, job, resolved string
	}{
		{"*/5 * * * *", "", "*/5 * * * *"},
		{"  0  9 * * MON-FRI ", "", "0 9 * * MON-FRI"},
		{"0 0 1 jan,Jul *", "", "0 0 1 jan,Jul *"},
		{"30 */2 1-15/3 * sun,3,7", "", "30 */2 1-15/3 * sun,3,7"},
		{"5/15 * * * *", "", "5/15 * * * *"},
		{"0 0 L * *", "", "0 0 L * *"},
		{"0 0 1,15,L * *", "", "0 0 1,15,L * *"},
		{"0 0 LW * *", "", "0 0 LW * *"},
		{"0 0 15W * *", "", "0 0 15W * *"},
		{"0 0 * * 5L", "", "0 0 * * 5L"},
		{"0 0 * * FRIL,MON#1", "", "0 0 * * FRIL,MON#1"},
		{"*/10 * * * * *", "", "*/10 * * * * *"},
		{"@daily", "", "@daily"},
		{"@Hourly", "", "@hourly"},
		{"@every 90s", "", "@every 1m30s"},
		// Golden values of the hash (see TestHashGolden): changing them moves
		// every hashed job, so they are part of the contract.
		{"0 ? * * *", "nightly-report", "0 11 * * *"},
		{"0 H * * *", "nightly-report", "0 11 * * *"},
		{"? ? ? ? ?", "nightly-report", "13 11 19 10 3"},
		{"?(0-7) ?(1-5) * * *", "nightly-report", "5 3 * * *"},
		{"?/15 * * * *", "nightly-report", "13-59/15 * * * *"},
		{"h(0-29)/10 * * * *", "nightly-report", "3-29/10 * * * *"},
		{"? * * * * *", "nightly-report", "53 * * * * *"},
	} {
		s, err := Parse(tc.expr, Options{JobName: tc.job})
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.expr, err)
			continue
		}
		if got := s.String(); got != tc.resolved {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.expr, got, tc.resolved)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		expr, zone, field, reason string
	}{
		{"0 25 * * *", "", "hour", "25 is out of range 0-23"},
		{"60 * * * *", "", "minute", "60 is out of range 0-59"},
		{"0 0 0 * *", "", "day-of-month", "0 is out of range 1-31"},
		{"0 0 * 13 *", "", "month", "13 is out of range 1-12"},
		{"0 0 * * 8", "", "day-of-week", "8 is out of range 0-7"},
		{"0 0 * JANU *", "", "month", `"JANU" is not a number or a month name`},
		{"0 0 * * FUN", "", "day-of-week", `"FUN" is not a number or a weekday name`},
		{"0 5-1 * * *", "", "hour", "range 5-1 starts after it ends"},
		{"*/0 * * * *", "", "minute", "step 0 must be at least 1"},
		{"*/61 * * * *", "", "minute", "step 61 is larger"},
		{"*/x * * * *", "", "minute", `step "X" is not a number`},
		{"1,,2 * * * *", "", "minute", "empty term"},
		{"0 0 30 2 *", "", "day-of-month", "30 never occurs in month 2"},
		{"0 0 31 4,6,9,11 *", "", "day-of-month", "never occurs"},
		{"0 0 15W,1 * *", "", "day-of-month", "must be the only term"},
		{"0 0 * * MON#6", "", "day-of-week", "not a week of the month"},
		{"0 ? * * *", "", "hour", "need the job's name"},
		{"0 ?(5) * * *", "", "hour", "expected (lo-hi) or /step"},
		{"0 ?(0-30) * * *", "", "hour", "30 is out of range 0-23"},
		{"* * * *", "", "expression", "expected 5 fields"},
		{"* * * * * * *", "", "expression", "got 7"},
		{"", "", "expression", "got 0"},
		{"@weekly 3", "", "@weekly", "takes no argument"},
		{"@fortnightly", "", "@fortnightly", "unknown macro"},
		{"@every", "", "@every", "needs a duration"},
		{"@every 500ms", "", "@every", "shorter than the minimum 1s"},
		{"@every 1.5s", "", "@every", "not a whole number of seconds"},
		{"@every soon", "", "@every", "is not a duration"},
		{"0 0 * * *", "Mars/Olympus_Mons", "time zone", `unknown time zone "Mars/Olympus_Mons"`},
		{strings.Repeat("1,", 600) + "1 * * * *", "", "expression", "longer than 1024 bytes"},
	} {
		job := "some-job"
		if strings.Contains(tc.reason, "job's name") {
			job = ""
		}
		_, err := Parse(tc.expr, Options{JobName: job, TimeZone: tc.zone})
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want a *ParseError", tc.expr, err)
			continue
		}
		if pe.Field != tc.field || !strings.Contains(pe.Reason, tc.reason) || pe.Expr != tc.expr {
			t.Errorf("Parse(%q) = %+v, want field %q, reason containing %q", tc.expr, pe, tc.field, tc.reason)
		}
		if want := "schedule: " + tc.field + ": "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Parse(%q).Error() = %q, want prefix %q", tc.expr, err, want)
		}
	}
}

func TestParseZone(t *testing.T) {
	for _, zone := range []string{"", "UTC", "America/New_York"} {
		s, err := Parse("0 0 * * *", Options{TimeZone: zone})
		if err != nil {
			t.Fatal(err)
		}
		want := zone
		if want == "" {
			want = "UTC"
		}
		if s.Location().String() != want {
			t.Errorf("zone %q: Location() = %v", zone, s.Location())
		}
	}
	// "Local" is Go's name for the host's zone: replicas on hosts in
	// other zones would launch at other times (found in review).
	if _, err := Parse("0 9 * * *", Options{TimeZone: "Local"}); err == nil || !strings.Contains(err.Error(), "IANA zone") {
		t.Errorf("zone Local: %v; want refused", err)
	}
}

// TestResolvedReparses checks that the resolved expression is a fixed
// point: parsing it (with any job name) gives the same schedule.
func TestResolvedReparses(t *testing.T) {
	for _, expr := range []string{"? ? ? ? ?", "?/7 ?(2-5) ?(1-9) * ?", "H/20 * * * * *"} {
		s := mustParse(t, expr, "job-a", "")
		r := mustParse(t, s.String(), "another job", "")
		if r.String() != s.String() || *withoutText(r) != *withoutText(s) {
			t.Errorf("%q resolved to %q, which parses differently", expr, s)
		}
	}
}

// withoutText keeps what decides launch times: not the text, nor whether
// the text hashed a name.
func withoutText(s *Schedule) *Schedule {
	c := *s
	c.resolved, c.usesName = "", false
	return &c
}

func mustParse(t testing.TB, expr, job, zone string) *Schedule {
	t.Helper()
	s, err := Parse(expr, Options{JobName: job, TimeZone: zone})
	if err != nil {
		t.Fatalf("Parse(%q): %v", expr, err)
	}
	return s
}

func TestUsesName(t *testing.T) {
	for expr, want := range map[string]bool{
		"0 ? * * *": true, "H H * * *": true, "?/15 * * * *": true, "0 9 * * MON-FRI": false,
		"*/5 * * * *": false, "@daily": false, "@every 5m": false, "0 0 ?(1-7) * *": true,
	} {
		s, err := Parse(expr, Options{JobName: "j"})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if s.UsesName() != want {
			t.Errorf("%s: UsesName %t, want %t", expr, s.UsesName(), want)
		}
	}
}

func TestSplitFieldsIsStringsFields(t *testing.T) {
	for _, text := range []string{
		"", " ", "0 5 * * *", "  0\t5 *\n*  * ", "0 0 0 0 0 0", "1 2 3 4 5 6 7 8",
		"0\u00a05 * * *", "0\u20035 * * * *", "a", "a\u00a0",
	} {
		var store [6]string
		fields, count := splitFields(text, &store)
		want := strings.Fields(text)
		if count != len(want) || !slices.Equal(fields, want[:min(len(want), 6)]) {
			t.Errorf("splitFields(%q) = %q, %d; strings.Fields gives %q", text, fields, count, want)
		}
	}
}

// TestMacroArgumentAfterAnySpace: fields are split at any white space, and
// so is a macro from its argument; @every and its duration separated by a
// tab were refused as an unknown macro named "@every\t90s".
func TestMacroArgumentAfterAnySpace(t *testing.T) {
	for _, expr := range []string{"@every\t90s", "@every \t 90s", "@every\n90s", "@every\u00a090s"} {
		s, err := Parse(expr, Options{})
		if err != nil || s.String() != "@every 1m30s" {
			t.Errorf("Parse(%q) = %v, %v; want @every 1m30s", expr, s, err)
		}
	}
	if _, err := Parse("@daily\t3", Options{}); err == nil || !strings.Contains(err.Error(), "@daily: takes no argument") {
		t.Errorf("@daily with a tab and an argument: %v", err)
	}
}

// TestImpossibleDayNamesTheHashedMonth: a day that never occurs in the
// month a ? hashed to was reported as "31 never occurs in month ?", which
// does not say which month; the message now gives what ? resolved to.
func TestImpossibleDayNamesTheHashedMonth(t *testing.T) {
	_, err := Parse("0 0 31 ? *", Options{JobName: "job-2"}) // ? is 6 for job-2
	if err == nil || !strings.Contains(err.Error(), "31 never occurs in month 6") {
		t.Errorf("got %v; want the hashed month named", err)
	}
}

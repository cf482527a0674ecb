package cronfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"paxcron/cron/state"
)

const good = `
# Two jobs: every field, and the fewest.
cron "nightly-report" {
  schedule       = "0 ? * * *"
  time_zone      = "Europe/Berlin"
  concurrency    = "forbid"
  catchup_window = "10m"
  delivery       = "at-least-once"
  nomad {
    job       = "report"
    namespace = "analytics"
    region    = "eu"
    meta      = { kind = "nightly", "team.name" = "data" }
    payload   = file("params.json")
  }
}

cron "hourly" {
  schedule = "@hourly"
  nomad {
    job     = "ping"
    payload = jsonencode({ shard = 3 })
  }
}
`

func TestParseGood(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "params.json"), []byte(`{"day": "yesterday"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "jobs.hcl")
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	crons, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []state.JobSpec{{
		Schedule: "0 ? * * *", TimeZone: "Europe/Berlin", Concurrency: state.ConcurrencyForbid, CatchupWindow: 10 * time.Minute, AtLeastOnce: true,
		NomadJob: "report", Namespace: "analytics", Region: "eu",
		Meta: map[string]string{"kind": "nightly", "team.name": "data"}, Payload: []byte(`{"day": "yesterday"}` + "\n"),
	}, {
		Schedule: "@hourly", NomadJob: "ping", Payload: []byte(`{"shard":3}`),
	}}
	if len(crons) != 2 || crons[0].Name != "nightly-report" || crons[1].Name != "hourly" {
		t.Fatalf("got %+v", crons)
	}
	for i, c := range crons {
		if !reflect.DeepEqual(c.Spec, want[i]) {
			t.Errorf("%s: spec\n %+v\nwant\n %+v", c.Name, c.Spec, want[i])
		}
		if err := c.Spec.Validate(c.Name); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
	if r := crons[0].Resolved; strings.Contains(r, "?") || !strings.HasPrefix(r, "0 ") {
		t.Errorf("resolved schedule %q", r)
	}
	if crons[0].Range.Start.Line != 3 || crons[1].Range.Start.Line != 18 {
		t.Errorf("ranges %v %v", crons[0].Range, crons[1].Range)
	}
}

// TestParseBad: every mistake is reported at the line and column of
// what is wrong, with a message that says what to do.
func TestParseBad(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", state.MaxPayloadBytes+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "latin1.txt"), []byte{'c', 'a', 'f', 0xe9}, 0o644); err != nil {
		t.Fatal(err)
	}
	nomad := `nomad { job = "p" }`
	for _, tc := range []struct {
		name, src string
		want      []string // each must appear in the error
	}{
		{"empty file", ``, []string{"jobs.hcl:1,1: No cron block"}},
		{"syntax", `cron "a" {`, []string{"jobs.hcl:1,"}},
		{"unknown top-level", `job "a" {}`, []string{"jobs.hcl:1,1: Unsupported block type"}},
		{"no label", `cron { schedule = "@daily" }`, []string{"jobs.hcl:1,6: Missing name for cron"}},
		{"bad name", `cron "a b" {` + "\n" + `schedule = "@daily"` + "\n" + nomad + "\n}", []string{"jobs.hcl:1,6: Invalid cron name", "[a-zA-Z0-9_.-]"}},
		{"missing schedule", `cron "a" {` + "\n" + nomad + "\n}", []string{"jobs.hcl:1,10: Missing required argument", "schedule"}},
		{"unknown field", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `timezone = "UTC"` + "\n" + nomad + "\n}", []string{"jobs.hcl:3,1: Unsupported argument", "timezone"}},
		{"bad schedule", `cron "a" {` + "\n" + `schedule = "61 * * * *"` + "\n" + nomad + "\n}", []string{"jobs.hcl:2,12: Invalid schedule", "minute"}},
		{"bad zone", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `time_zone = "Mars/Olympus"` + "\n" + nomad + "\n}", []string{"jobs.hcl:3,13: Invalid schedule", "Mars/Olympus"}},
		{"bad concurrency", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `concurrency = "never"` + "\n" + nomad + "\n}", []string{"jobs.hcl:3,15: Invalid concurrency", "allow, forbid or replace"}},
		{"bad window", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `catchup_window = "soon"` + "\n" + nomad + "\n}", []string{"jobs.hcl:3,18: Invalid catch-up window", `"10m"`}},
		{"bad delivery", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `delivery = "exactly-once"` + "\n" + nomad + "\n}", []string{"jobs.hcl:3,12: Invalid delivery", "at-least-once"}},
		{"window too long", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `catchup_window = "200h"` + "\n" + nomad + "\n}", []string{"jobs.hcl:3,18: Invalid catch-up window", "168h0m0s"}},
		{"wildcard namespace", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `nomad {` + "\n" + `job = "p"` + "\n" + `namespace = "*"` + "\n}\n}", []string{"jobs.hcl:5,13: Invalid namespace", "wildcard"}},
		{"window too short", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `catchup_window = "500ms"` + "\n" + nomad + "\n}", []string{"jobs.hcl:3,18: Invalid catch-up window", "500ms is outside [1s, 168h0m0s]"}},
		{"no nomad", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n}", []string{"jobs.hcl:1,1: Missing nomad block"}},
		{"two nomad", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + nomad + "\n" + nomad + "\n}", []string{"jobs.hcl:4,1: Duplicate nomad block", "line 3"}},
		{"nomad without job", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `nomad { namespace = "x" }` + "\n}", []string{"jobs.hcl:3,9: Missing required argument", "job"}},
		{"bad namespace", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `nomad {` + "\n" + `job = "p"` + "\n" + `namespace = "has space"` + "\n}\n}", []string{"jobs.hcl:3,1: Invalid nomad block", "namespace"}},
		{"meta not a map", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `nomad {` + "\n" + `job = "p"` + "\n" + `meta = ["x"]` + "\n}\n}", []string{"jobs.hcl:5,8: Invalid meta"}},
		{"reserved meta", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `nomad {` + "\n" + `job = "p"` + "\n" + `meta = { paxcron_job = "x" }` + "\n}\n}", []string{"jobs.hcl:5,8: Reserved meta key"}},
		{"schedule not a string", `cron "a" {` + "\n" + `schedule = ["@daily"]` + "\n" + nomad + "\n}", []string{"jobs.hcl:2,12: Invalid value for schedule"}},
		{"missing payload file", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `nomad {` + "\n" + `job = "p"` + "\n" + `payload = file("nope.json")` + "\n}\n}", []string{"jobs.hcl:5,", "nope.json"}},
		{"payload too large", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `nomad {` + "\n" + `job = "p"` + "\n" + `payload = file("big.bin")` + "\n}\n}", []string{"jobs.hcl:5,", "16384"}},
		{"payload not utf-8", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + `nomad {` + "\n" + `job = "p"` + "\n" + `payload = file("latin1.txt")` + "\n}\n}", []string{"jobs.hcl:5,", "not UTF-8 text"}},
		{"duplicate name", `cron "a" {` + "\n" + `schedule = "@daily"` + "\n" + nomad + "\n}\n" + `cron "a" {` + "\n" + `schedule = "@hourly"` + "\n" + nomad + "\n}", []string{"jobs.hcl:5,6: Duplicate cron name", "line 1"}},
		{"several errors", `cron "a" {` + "\n" + `schedule = "@nope"` + "\n" + nomad + "\n}\n" + `cron "b" {` + "\n" + `schedule = "@daily"` + "\n" + `concurrency = "x"` + "\n" + nomad + "\n}", []string{"jobs.hcl:2,12: Invalid schedule", "jobs.hcl:7,15: Invalid concurrency"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crons, err := Parse("jobs.hcl", []byte(tc.src), dir)
			var ferr *Error
			if !errors.As(err, &ferr) {
				t.Fatalf("got %v, %+v; want a *cronfile.Error", err, crons)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	if _, err := Parse("big.hcl", make([]byte, MaxFileBytes+1), "."); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
	var b strings.Builder
	for i := range MaxCrons + 1 {
		b.WriteString("cron \"j" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + "\" {\n}\n")
	}
	if _, err := Parse("many.hcl", []byte(b.String()), "."); err == nil || !strings.Contains(err.Error(), "Too many cron blocks") {
		t.Fatalf("too many blocks: %v", err)
	}
	if _, err := ParseFile(filepath.Join(t.TempDir(), "missing.hcl")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// FuzzParse: Parse never panics, and what it accepts the state accepts.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`cron "a" { schedule = "@daily" nomad { job = "p" } }`))
	f.Add([]byte(`cron "a" {` + "\n" + `schedule = "H H * * *"` + "\n" + `nomad { job = "p" meta = { a = 1 } }` + "\n}"))
	f.Fuzz(func(t *testing.T, src []byte) {
		crons, err := Parse("fuzz.hcl", src, t.TempDir())
		if err != nil {
			return
		}
		for _, c := range crons {
			if err := c.Spec.Validate(c.Name); err != nil {
				t.Fatalf("accepted %q, which the state refuses: %v", c.Name, err)
			}
		}
	})
}

// TestExamples: the example files of cron jobs in the repository parse
// (the others are a server's configuration and a Nomad jobspec).
func TestExamples(t *testing.T) {
	paths, err := filepath.Glob("../../examples/*.hcl")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	parsed := 0
	for _, path := range paths {
		if b, _ := os.ReadFile(path); !strings.Contains(string(b), "\ncron \"") {
			continue
		}
		parsed++
		if _, err := ParseFile(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	if parsed < 2 {
		t.Errorf("%d example files of cron jobs, want at least 2", parsed)
	}
}

// TestFormat: what Format writes, Parse reads back the same.
func TestFormat(t *testing.T) {
	in := []Cron{
		{Name: "a.b", Spec: state.JobSpec{Schedule: "0 ? * * *", TimeZone: "Europe/Berlin", Concurrency: state.ConcurrencyForbid, CatchupWindow: 90 * time.Minute, AtLeastOnce: true,
			NomadJob: "report", Namespace: "data", Region: "eu", Meta: map[string]string{"k": `quote " and ${x}`, "team.name": "x"}, Payload: []byte("{\"day\": 1}\n")}},
		{Name: "plain", Spec: state.JobSpec{Schedule: "@hourly", NomadJob: "p"}},
	}
	checkFormatReadsBack(t, in)
	if _, err := Format([]Cron{{Name: "bin", Spec: state.JobSpec{Schedule: "@daily", NomadJob: "p", Payload: []byte{0xff}}}}); err == nil {
		t.Error("a binary payload formatted")
	}
}

func TestParseSubmittedRefusesFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.json"), []byte(`{"a":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	src := []byte(`cron "x" {
  schedule = "@hourly"
  nomad {
    job     = "p"
    payload = file("` + filepath.Join(dir, "p.json") + `")
  }
}
`)
	if _, err := Parse("x.hcl", src, dir); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	_, err := ParseSubmitted("x.hcl", src)
	if err == nil || !strings.Contains(err.Error(), "file() cannot be used") || !strings.Contains(err.Error(), "x.hcl:5") {
		t.Fatalf("ParseSubmitted: %v; want file() refused at x.hcl:5", err)
	}
	ok := []byte("cron \"x\" {\n  schedule = \"@hourly\"\n  nomad { job = \"p\" }\n}\n")
	if crons, err := ParseSubmitted("x.hcl", ok); err != nil || len(crons) != 1 {
		t.Fatalf("ParseSubmitted without file(): %v, %v", crons, err)
	}
}

// TestHostileShapesAreRefused: a file nested deeper than MaxNesting, or
// with a for expression, is refused before the parser or the evaluator
// sees it. 70,000 levels of parentheses (140 KB, under MaxFileBytes) once
// overflowed the parser's stack, a fatal error that killed the server
// taking the file; nested for expressions cost ten times more per level.
func TestHostileShapesAreRefused(t *testing.T) {
	deep := `cron "a" {
  schedule = ` + strings.Repeat("(", 70000) + `"@daily"` + strings.Repeat(")", 70000) + `
  nomad { job = "p" }
}
`
	loops := `cron "a" {
  schedule = "@daily"
  nomad {
    job     = "p"
    payload = jsonencode([for a in [0, 1]: [for b in [0, 1]: b]])
  }
}
`
	// Four template for directives nested, each over 40 values: about
	// 500 bytes that expanded to a payload of 2,560,001 bytes, which took
	// this test 1.9-2.2 s more than it takes now (3 runs at 4dc6438's
	// parent with this test, AMD EPYC 2 vCPU: go test -count=1 -v -run
	// TestHostileShapesAreRefused ./cron/cronfile/).
	list := "[" + strings.TrimSuffix(strings.Repeat("0,", 40), ",") + "]"
	directives := strings.Repeat("%{ for x in "+list+" }", 4) + "x" + strings.Repeat("%{ endfor }", 4)
	templateLoops := "cron \"a\" {\n  schedule = \"@daily\"\n  nomad {\n    job = \"p\"\n    payload = <<EOT\n" + directives + "\nEOT\n  }\n}\n"
	inline := `cron "a" {
  schedule = "@daily"
  nomad {
    job     = "p"
    payload = "%{for a in [0, 1]}${a}%{endfor}"
  }
}
`
	for name, src := range map[string]string{"deep": deep, "for": loops, "template for": templateLoops, "inline template for": inline} {
		_, err := ParseSubmitted("jobs.hcl", []byte(src))
		want := map[string]string{"deep": "Nested too deep"}[name]
		if want == "" {
			want = "For expression not allowed"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", name, err, want)
		}
	}
	ok := `cron "a" {
  schedule = "@daily"
  nomad {
    job     = "p"
    meta    = { team = "ops", list = "${"x"}", check = "%{ if true }y%{ endif }" }
    payload = jsonencode({ a = [1, [2, [3]]] })
  }
}
`
	if _, err := ParseSubmitted("jobs.hcl", []byte(ok)); err != nil {
		t.Fatalf("an ordinary file: %v", err)
	}
}

// TestDuplicateMetaKeyIsRefused: a meta key written twice is an error at
// the second, naming the first's line. HCL's object constructor keeps the
// last value without a word, so the first was dropped silently (found in
// review).
func TestDuplicateMetaKeyIsRefused(t *testing.T) {
	for _, tc := range []struct{ meta, at string }{
		{`{ kind = "nightly", team = "a", kind = "weekly" }`, "jobs.hcl:5,44: Duplicate meta key"},
		{"{\n      kind   = \"nightly\"\n      \"kind\" = \"weekly\"\n    }", "jobs.hcl:7,7: Duplicate meta key"},
	} {
		src := "cron \"a\" {\n  schedule = \"@daily\"\n  nomad {\n    job  = \"p\"\n    meta = " + tc.meta + "\n  }\n}\n"
		crons, err := Parse("jobs.hcl", []byte(src), ".")
		if err == nil {
			t.Errorf("meta %s: accepted as %v", tc.meta, crons[0].Spec.Meta)
			continue
		}
		if !strings.Contains(err.Error(), tc.at) || !strings.Contains(err.Error(), `"kind"`) || !strings.Contains(err.Error(), "line") {
			t.Errorf("meta %s: %v; want %q naming the key and the first's line", tc.meta, err, tc.at)
		}
	}
}

// TestDuplicateKeyInAPayloadIsRefused: jsonencode({ ... }) with a key
// written twice dropped the first value silently, as meta did.
func TestDuplicateKeyInAPayloadIsRefused(t *testing.T) {
	src := "cron \"a\" {\n  schedule = \"@daily\"\n  nomad {\n    job     = \"p\"\n    payload = jsonencode({ shard = 1, opts = { day = \"mon\", day = \"tue\" }, shard = 2 })\n  }\n}\n"
	crons, err := Parse("jobs.hcl", []byte(src), ".")
	if err == nil {
		t.Fatalf("accepted, payload %s", crons[0].Spec.Payload)
	}
	for _, want := range []string{`jobs.hcl:5,61: Duplicate key: "day" is set already at line 5`, `jobs.hcl:5,76: Duplicate key: "shard"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
}

// TestForExpressionBehindACommentIsRefused: the parser skips comments, so
// a comment between a bracket and "for" still makes a for expression; the
// check that refuses for expressions looked at the comment instead, and let
// nested for expressions (the cost TestHostileShapesAreRefused measures)
// through.
func TestForExpressionBehindACommentIsRefused(t *testing.T) {
	for _, expr := range []string{
		`jsonencode([/* */ for a in [0, 1]: a])`,
		"jsonencode([ # a comment\n for a in [0, 1]: a])",
		"jsonencode({ // a comment\n for k, v in { a = 1 }: k => v })",
		`"%{ /* */ for a in [0, 1] }${a}%{ endfor }"`,
	} {
		src := "cron \"a\" {\n  schedule = \"@daily\"\n  nomad {\n    job     = \"p\"\n    payload = " + expr + "\n  }\n}\n"
		crons, err := ParseSubmitted("jobs.hcl", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "For expression not allowed") {
			t.Errorf("payload = %s: %v, %d crons; want refused as a for expression", expr, err, len(crons))
		}
	}
}

// TestUnbracketedNestingIsRefused: the parser and the evaluator recurse
// once per operator of a chain (a unary operator's operand, a
// conditional's false branch, a binary operator's left operand, a splat's
// source) and once per template if directive inside another, with no
// bracket for MaxNesting to count; and closing brackets with nothing open
// made room for as many openers after them. Each shape overflowed the
// goroutine's 1 GB stack, a fatal error that kills a server parsing a
// file sent to its API, in a file within MaxFileBytes (found in review):
// 300,000 minus signs (300 KB, the first case here), 2,000,000 ! signs,
// 950,000 conditionals (1?1:, 3.8 MB), 500,000 additions (1 MB), 260,000
// template ifs (3.9 MB), 1,300,000 splats ([*], 3.9 MB), and 70,000 stray
// closers before 70,000 parentheses. The others are shorter here, to keep
// the test quick: they were accepted, now refused.
func TestUnbracketedNestingIsRefused(t *testing.T) {
	payload := func(expr string) string {
		return "cron \"a\" {\n  schedule = \"@daily\"\n  nomad {\n    job     = \"p\"\n    payload = " + expr + "\n  }\n}\n"
	}
	const n = 10_000
	for _, tc := range []struct{ name, src string }{
		{"unary minus", payload(strings.Repeat("-", 300_000) + "1")},
		{"logical not", payload(strings.Repeat("!", n) + "true")},
		{"conditionals", payload(strings.Repeat("1?1:", n) + "1")},
		{"binary chain", payload(strings.Repeat("1+", n) + "1")},
		{"template ifs", payload(`"` + strings.Repeat("%{if a}", n) + "x" + strings.Repeat("%{endif}", n) + `"`)},
		{"splat chain", payload("[1]" + strings.Repeat("[*]", n))},
		{"stray closers", "cron \"a\" {\n  x = 1" + strings.Repeat(")", n) + "\n  y = " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + "\n}\n"},
	} {
		_, err := ParseSubmitted("jobs.hcl", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), "Nested too deep") {
			t.Errorf("%s: %.200v; want Nested too deep", tc.name, err)
		}
	}
	ok := payload(`jsonencode({ a = -1, b = [1 + 2 * 3, !false ? 1 : 2], c = "%{ if true }y%{ endif }", d = [[1], [2]][0][0] })`)
	if _, err := ParseSubmitted("jobs.hcl", []byte(ok)); err != nil {
		t.Fatalf("an ordinary file: %v", err)
	}
}

// TestFormatQuotesKeywordMetaKeys: Format wrote a meta key that is a
// valid identifier bare, and "for" or "null" written bare is no key to
// Parse (a for expression, a null key), so Format's output did not read
// back; every meta key is now written quoted.
func TestFormatQuotesKeywordMetaKeys(t *testing.T) {
	in := []Cron{{Name: "a", Spec: state.JobSpec{Schedule: "@daily", NomadJob: "p", Meta: map[string]string{"for": "x", "null": "y", "true": "z", "team": "w"}}}}
	checkFormatReadsBack(t, in)
}

// checkFormatReadsBack formats in and parses the text back to the same
// crons.
func checkFormatReadsBack(t *testing.T, in []Cron) {
	t.Helper()
	b, err := Format(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Parse("formatted.hcl", b, ".")
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(out) != len(in) {
		t.Fatalf("%d crons back", len(out))
	}
	for i := range in {
		if out[i].Name != in[i].Name || !reflect.DeepEqual(out[i].Spec, in[i].Spec) {
			t.Errorf("cron %d:\n got %+v\nwant %+v\n%s", i, out[i], in[i], b)
		}
	}
}

// TestNonNFCTextIsRefused: the HCL parser turns every string into
// Unicode normal form C without a word, so a decomposed "café" (e and a
// combining acute) in a meta value, a payload's list or a heredoc
// reached Nomad composed. A file not in NFC is now refused at its first
// offending character (line and column as HCL counts them, in grapheme
// clusters), saying what it would become and why; file() refused such
// content already.
func TestNonNFCTextIsRefused(t *testing.T) {
	const decomposed, composed = "cafe\u0301", "caf\u00e9"
	file := func(nomad string) string {
		return "cron \"a\" {\n  schedule = \"@daily\"\n  nomad {\n    job  = \"p\"\n" + nomad + "\n  }\n}\n"
	}
	for _, tc := range []struct{ name, src, at string }{
		{"meta value", file(`    meta = { drink = "` + decomposed + `" }`), "jobs.hcl:5,26:"},
		// Columns count characters as HCL does: ü and the composed é are
		// one each, as is the emoji with its skin tone.
		{"after other text on its line", file(`    meta = { "ü" = "` + composed + `", "👍🏽" = "` + decomposed + `" }`), "jobs.hcl:5,38:"},
		{"payload list", file(`    payload = jsonencode({ args = ["x", "` + decomposed + `"] })`), "jobs.hcl:5,45:"},
		{"heredoc", file("    payload = <<EOT\n" + decomposed + "\nEOT"), "jobs.hcl:6,4:"},
		{"meta key", file(`    meta = { ` + decomposed + ` = "x" }`), "jobs.hcl:5,17:"},
		{"comment", "# " + decomposed + "\n" + file(""), "jobs.hcl:1,6:"},
		{"first character", "e\u0301" + file(""), "jobs.hcl:1,1:"},
	} {
		crons, err := Parse("jobs.hcl", []byte(tc.src), ".")
		if err == nil {
			t.Errorf("%s: accepted, meta %+q payload %+q", tc.name, crons[0].Spec.Meta, crons[0].Spec.Payload)
			continue
		}
		for _, want := range []string{tc.at + " Text not in Unicode normal form C", `"e\u0301" (U+0065 U+0301) would be read as "\u00e9" (U+00E9)`, "would reach Nomad changed"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v\nlacks %q", tc.name, err, want)
			}
		}
		if _, err := ParseSubmitted("jobs.hcl", []byte(tc.src)); err == nil || !strings.Contains(err.Error(), "normal form C") {
			t.Errorf("%s: ParseSubmitted: %v", tc.name, err)
		}
	}
	crons, err := Parse("jobs.hcl", []byte(file(`    meta = { drink = "`+composed+`" }`)), ".")
	if err != nil || crons[0].Spec.Meta["drink"] != composed {
		t.Fatalf("NFC text: %v, %v", crons, err)
	}
	// Found at the end of a long line, in time: hcl.RangeScanner, tried
	// first, took minutes to place a character 80 KB into a file.
	unit := "caf\u00e9 \U0001f44d\U0001f3fd x " // 9 characters: the emoji and its skin tone are one
	long := "# " + strings.Repeat(unit, 256<<10/len(unit)) + decomposed + "\n" + file("")
	_, err = Parse("jobs.hcl", []byte(long), ".")
	if want := fmt.Sprintf("jobs.hcl:1,%d: Text not in Unicode normal form C", 2+9*(256<<10/len(unit))+4); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a long line: %.200v; want %q", err, want)
	}
}

// TestDotNamesAreRefused: the API refuses the job names "." and ".."
// (no URL can name them: /v1/jobs/.. is cleaned to /v1/), but a cron
// file took them, so `job validate` passed a file that `job run` then
// failed. Found in review.
func TestDotNamesAreRefused(t *testing.T) {
	for _, name := range []string{".", ".."} {
		src := "cron \"" + name + "\" {\n  schedule = \"@daily\"\n  nomad { job = \"p\" }\n}\n"
		crons, err := Parse("jobs.hcl", []byte(src), ".")
		if err == nil {
			t.Errorf("cron %q: accepted as %+v", name, crons)
			continue
		}
		if !strings.Contains(err.Error(), "jobs.hcl:1,6: Invalid cron name") {
			t.Errorf("cron %q: %v; want it refused at its label", name, err)
		}
	}
	for _, name := range []string{"...", ".a", "a.."} {
		src := "cron \"" + name + "\" {\n  schedule = \"@daily\"\n  nomad { job = \"p\" }\n}\n"
		if _, err := Parse("jobs.hcl", []byte(src), "."); err != nil {
			t.Errorf("cron %q: %v; the API takes it", name, err)
		}
	}
}

// TestStateErrorsLoseTheirPrefix: the state's errors start "state:
// invalid command: ", which means nothing to someone writing a file.
// trimInvalid cut at the first ": " and so left "invalid command: " in
// every message it was meant to clean. Found in review.
func TestStateErrorsLoseTheirPrefix(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"cron \"a b\" {\n  schedule = \"@daily\"\n  nomad { job = \"p\" }\n}\n", `jobs.hcl:1,6: Invalid cron name: job name "a b"`},
		{"cron \"a\" {\n  schedule = \"@daily\"\n  nomad { job = \"p q\" }\n}\n", `jobs.hcl:3,3: Invalid nomad block: Nomad job "p q"`},
		{"cron \"a\" {\n  schedule = \"@daily\"\n  nomad {\n    job  = \"p\"\n    meta = { \"\" = \"v\" }\n  }\n}\n", `jobs.hcl:1,1: Invalid cron job: meta has an empty key`},
	} {
		_, err := Parse("jobs.hcl", []byte(tc.src), ".")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "invalid command") {
			t.Errorf("%v\nwant %q, without the state's prefix", err, tc.want)
		}
	}
}

// TestMetaNumberChangedIsRefused: a meta value written as a number goes
// to Nomad as HCL's shortest form of it, so `version = 1.10` was
// dispatched as "1.1", `build = 007` as "7" and `size = 1e3` as "1000",
// other bytes than written, without a word (as text not in NFC was); and
// `job = 1.50` dispatched job "1.5". A number whose text is its shortest
// form is still taken. Found in review.
func TestMetaNumberChangedIsRefused(t *testing.T) {
	file := func(meta string) string {
		return "cron \"a\" {\n  schedule = \"@daily\"\n  nomad {\n    job  = \"p\"\n    meta = " + meta + "\n  }\n}\n"
	}
	for _, tc := range []struct{ meta, at, becomes string }{
		{`{ version = 1.10 }`, "jobs.hcl:5,24", `"1.1"`},
		{`{ ok = "x", build = 007 }`, "jobs.hcl:5,32", `"7"`},
		{`{ size = 1e3 }`, "jobs.hcl:5,21", `"1000"`},
	} {
		crons, err := Parse("jobs.hcl", []byte(file(tc.meta)), ".")
		if err == nil {
			t.Errorf("meta %s: accepted as %v", tc.meta, crons[0].Spec.Meta)
			continue
		}
		if !strings.Contains(err.Error(), tc.at) || !strings.Contains(err.Error(), tc.becomes) {
			t.Errorf("meta %s: %v; want it refused at %s, saying it becomes %s", tc.meta, err, tc.at, tc.becomes)
		}
	}
	src := "cron \"a\" {\n  schedule = \"@daily\"\n  nomad {\n    job = 1.50\n  }\n}\n"
	if crons, err := Parse("jobs.hcl", []byte(src), "."); err == nil || !strings.Contains(err.Error(), "jobs.hcl:4,11") || !strings.Contains(err.Error(), `"1.5"`) {
		t.Errorf("job = 1.50: %v, %+v; want it refused at jobs.hcl:4,11", err, crons)
	}
	src = "cron \"a\" {\n  schedule = \"@daily\"\n  nomad {\n    job = 123\n  }\n}\n"
	if crons, err := Parse("jobs.hcl", []byte(src), "."); err != nil || crons[0].Spec.NomadJob != "123" {
		t.Errorf("job = 123: %v, %+v", err, crons)
	}
	crons, err := Parse("jobs.hcl", []byte(file(`{ shard = 3, big = 12345678901234567890, neg = -2, half = 0.5, on = true }`)), ".")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"shard": "3", "big": "12345678901234567890", "neg": "-2", "half": "0.5", "on": "true"}
	if !reflect.DeepEqual(crons[0].Spec.Meta, want) {
		t.Errorf("meta %v, want %v", crons[0].Spec.Meta, want)
	}
}

package state

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
)

func TestIdentityGolden(t *testing.T) {
	for _, tc := range []struct {
		job  string
		at   time.Time
		want string
	}{
		{"nightly", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), "nightly-1772323200"},
		{"a", time.Unix(0, 0), "a-0"},
		{"report.v2_eu-west", time.Date(2030, 1, 1, 2, 30, 0, 0, time.FixedZone("X", 3600)), "report.v2_eu-west-1893461400"},
		{"x", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), "x-253402300799"},
	} {
		if got := Identity(tc.job, tc.at); got != tc.want {
			t.Errorf("Identity(%q, %v) = %q, want %q", tc.job, tc.at, got, tc.want)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true}, {"Nightly_backup-2.v1", true}, {strings.Repeat("x", MaxNameBytes), true},
		{"", false}, {strings.Repeat("x", MaxNameBytes+1), false}, {"a b", false}, {"a/b", false},
		{"é", false}, {"a\x00", false}, {"job:1", false},
	} {
		if err := ValidName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestValidate(t *testing.T) {
	good := PutJob{Name: "j", Spec: spec("*/5 * * * *"), At: t0}
	mutate := func(f func(*PutJob)) PutJob { c := good; f(&c); return c }
	bigMeta := map[string]string{}
	for i := 0; i <= MaxMetaEntries; i++ {
		bigMeta[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		name string
		cmd  Command
		ok   bool
	}{
		{"good put", good, true},
		{"hashed schedule", mutate(func(c *PutJob) { c.Spec.Schedule = "? ? * * *" }), true},
		{"zone", mutate(func(c *PutJob) { c.Spec.TimeZone = "Europe/Paris" }), true},
		{"all fields", mutate(func(c *PutJob) {
			c.Spec = JobSpec{Schedule: "@daily", TimeZone: "Asia/Kolkata", Concurrency: ConcurrencyForbid, CatchupWindow: time.Hour,
				Payload: []byte("p"), Meta: map[string]string{"a": "1"}, NomadJob: "batch", Namespace: "ops", Region: "eu"}
		}), true},
		{"bad name", mutate(func(c *PutJob) { c.Name = "a b" }), false},
		{"bad schedule", mutate(func(c *PutJob) { c.Spec.Schedule = "61 * * * *" }), false},
		{"impossible schedule", mutate(func(c *PutJob) { c.Spec.Schedule = "0 0 30 2 *" }), false},
		{"bad zone", mutate(func(c *PutJob) { c.Spec.TimeZone = "Mars/Olympus" }), false},
		{"bad concurrency", mutate(func(c *PutJob) { c.Spec.Concurrency = "sometimes" }), false},
		{"negative window", mutate(func(c *PutJob) { c.Spec.CatchupWindow = -1 }), false},
		{"huge window", mutate(func(c *PutJob) { c.Spec.CatchupWindow = MaxCatchupWindow + 1 }), false},
		{"huge payload", mutate(func(c *PutJob) { c.Spec.Payload = make([]byte, MaxPayloadBytes+1) }), false},
		{"too much meta", mutate(func(c *PutJob) { c.Spec.Meta = bigMeta }), false},
		{"empty meta key", mutate(func(c *PutJob) { c.Spec.Meta = map[string]string{"": "v"} }), false},
		{"no Nomad job", mutate(func(c *PutJob) { c.Spec.NomadJob = "" }), false},
		{"Nomad job with a space", mutate(func(c *PutJob) { c.Spec.NomadJob = "a b" }), false},
		{"zero time", mutate(func(c *PutJob) { c.At = time.Time{} }), false},
		{"before 1970", mutate(func(c *PutJob) { c.At = time.Unix(-1, 0) }), false},
		{"delete", DeleteJob{Name: "j", IfVersion: 3}, true},
		{"delete bad name", DeleteJob{Name: ""}, false},
		{"pause", Pause{Name: "j"}, true},
		{"resume bad name", Resume{Name: "j?"}, false},
		{"started", started("j", t0, 1), true},
		{"started wrong identity", LaunchStarted{Job: "j", ScheduledAt: t0, Identity: "j-1", SpecVersion: 1}, false},
		{"started fractional second", started("j", t0.Add(time.Millisecond), 1), false},
		{"started version 0", started("j", t0, 0), false},
		{"finished", finished("j", t0, OutcomeDispatched), true},
		{"finished unknown", LaunchFinished{Job: "j", ScheduledAt: t0, Outcome: Outcome{Kind: OutcomeUnknown}}, true},
		{"dispatched without child", LaunchFinished{Job: "j", ScheduledAt: t0, Outcome: Outcome{Kind: OutcomeDispatched}}, false},
		{"failed without reason", LaunchFinished{Job: "j", ScheduledAt: t0, Outcome: Outcome{Kind: OutcomeFailed}}, false},
		{"bad outcome", LaunchFinished{Job: "j", ScheduledAt: t0, Outcome: Outcome{Kind: "maybe", Reason: "r"}}, false},
		{"long reason", LaunchFinished{Job: "j", ScheduledAt: t0, Outcome: Outcome{Kind: OutcomeSkipped, Reason: strings.Repeat("r", MaxReasonBytes+1)}}, false},
	} {
		err := tc.cmd.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v does not wrap ErrInvalid", tc.name, err)
		}
		if _, encErr := Encode(tc.cmd); (encErr == nil) != tc.ok {
			t.Errorf("%s: Encode error %v, want ok=%v", tc.name, encErr, tc.ok)
		}
	}
}

// sampleCommands has one valid command of each kind, with every field set.
func sampleCommands() []Command {
	full := JobSpec{Schedule: "0 ? * * 1-5", TimeZone: "America/New_York", Concurrency: ConcurrencyReplace,
		CatchupWindow: 90 * time.Second, Payload: []byte{0, 1, 2}, Meta: map[string]string{"b": "2", "a": "1", "c": ""},
		NomadJob: "report", Namespace: "ops", Region: "global"}
	return []Command{
		PutJob{Name: "nightly", Spec: full, IfVersion: 7, At: time.Unix(1772323200, 123456789).UTC()},
		put("minimal", "@every 1m", 0, t0),
		DeleteJob{Name: "nightly", IfVersion: 9},
		Pause{Name: "nightly"},
		Resume{Name: "nightly"},
		started("nightly", t0, 3),
		finished("nightly", t0, OutcomeDispatched),
		finished("nightly", t0, OutcomeFailed),
		LaunchFinished{Job: "nightly", ScheduledAt: t0, Outcome: Outcome{Kind: OutcomeUnknown}},
		LaunchFinished{Job: "nightly", ScheduledAt: t0, LaunchKind: LaunchManual, Outcome: Outcome{Kind: OutcomeSkipped, Reason: "paused"}},
		Trigger{Name: "nightly", At: t0, Force: true},
		Takeover{Term: Term{Round: 7, Replica: 2}},
		LaunchFinished{Job: "nightly", ScheduledAt: t0, Outcome: Outcome{Kind: OutcomeFailed, Reason: "x"}, Term: Term{Round: 7, Replica: 2}},
		LaunchFinished{Job: "nightly", ScheduledAt: t0, LaunchKind: LaunchBackfill, Outcome: Outcome{Kind: OutcomeDispatched, ChildID: "c"}, Term: Term{Round: 7, Replica: 2}, StartedSlot: 1 << 40},
		Backfill{Name: "nightly", From: t0.Add(-time.Hour), To: t0, At: t0.Add(time.Minute), Force: true},
		SetClusterID{ID: ClusterID{0xc1, 0x05, 0x7e, 0x12, 0x1d, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		b, err := Encode(c)
		if err != nil {
			t.Fatalf("Encode(%#v): %v", c, err)
		}
		if b[0] != commandVersion || Kind(b[1]) != c.Kind() {
			t.Fatalf("%s: header % x", c.Kind(), b[:2])
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(%#v)): %v", c, err)
		}
		if !reflect.DeepEqual(normalizeCmd(got), normalizeCmd(c)) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, c)
		}
		again, _ := Encode(got)
		if !bytes.Equal(again, b) {
			t.Fatalf("%s: re-encoding differs", c.Kind())
		}
	}
}

// normalizeCmd puts times in UTC for comparison.
func normalizeCmd(c Command) Command {
	switch c := c.(type) {
	case PutJob:
		c.At = c.At.UTC()
		return c
	case LaunchStarted:
		c.ScheduledAt = c.ScheduledAt.UTC()
		return c
	case LaunchFinished:
		c.ScheduledAt = c.ScheduledAt.UTC()
		return c
	}
	return c
}

func TestMetaEncodedInKeyOrder(t *testing.T) {
	c := put("j", "@daily", 0, t0)
	c.Spec.Meta = map[string]string{}
	for _, k := range []string{"z", "a", "m", "b", "y", "c"} {
		c.Spec.Meta[k] = k
	}
	first, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		b, _ := Encode(c)
		if !bytes.Equal(b, first) {
			t.Fatal("encoding a map depends on iteration order")
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good, err := Encode(put("j", "@daily", 0, t0))
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func([]byte) []byte) []byte { return f(bytes.Clone(good)) }
	unsorted := put("j", "@daily", 0, t0)
	unsortedWire := wirePutJob{Name: "j", Spec: specToWire(unsorted.Spec), At: toWire(t0)}
	unsortedWire.Spec.Meta = []wireKV{{"b", "1"}, {"a", "2"}}
	unsortedBytes, _ := appendValue([]byte{commandVersion, byte(KindPutJob)}, &unsortedWire)
	badSpec := wirePutJob{Name: "j", Spec: specToWire(spec("not a schedule")), At: toWire(t0)}
	badSpecBytes, _ := appendValue([]byte{commandVersion, byte(KindPutJob)}, &badSpec)
	pauseWithVersion, _ := appendValue([]byte{commandVersion, byte(KindPause)}, &wireName{Name: "j", IfVersion: 1})
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, ErrDecode},
		{"one byte", []byte{1}, ErrDecode},
		{"header only", []byte{1, 1}, ErrDecode},
		{"version", with(func(b []byte) []byte { b[0] = 2; return b }), ErrDecode},
		{"kind 0", with(func(b []byte) []byte { b[1] = 0; return b }), ErrDecode},
		{"kind 7", with(func(b []byte) []byte { b[1] = 7; return b }), ErrDecode},
		{"other kind's body", with(func(b []byte) []byte { b[1] = byte(KindLaunchStarted); return b }), ErrDecode},
		{"truncated", good[:len(good)-1], ErrDecode},
		{"trailing byte", append(bytes.Clone(good), 0), ErrDecode},
		{"too long", make([]byte, MaxCommandBytes+1), ErrDecode},
		{"huge array length", []byte{1, 1, 0xdd, 0xff, 0xff, 0xff, 0xff}, ErrDecode},
		{"unsorted meta", unsortedBytes, ErrDecode},
		{"bad spec", badSpecBytes, ErrInvalid},
		{"pause with a version", pauseWithVersion, ErrDecode},
	} {
		c, err := Decode(tc.b)
		if !errors.Is(err, tc.want) || c != nil {
			t.Errorf("%s: Decode = %v, %v; want %v", tc.name, c, err, tc.want)
		}
	}
}

// TestNomadFieldASCIIFastPath: the byte loop decides as the rune loop
// would, for every ASCII character and a few others.
func TestNomadFieldASCIIFastPath(t *testing.T) {
	slow := func(s string) bool {
		for _, r := range s {
			if !unicode.IsPrint(r) || unicode.IsSpace(r) {
				return false
			}
		}
		return true
	}
	cases := []string{"batch", "ns-é", "a\u00a0b", "x\u2028", "日本"}
	for c := range 128 {
		cases = append(cases, "job"+string(rune(c)))
	}
	for _, s := range cases {
		if got, want := nomadField("f", s, true) == nil, slow(s); got != want {
			t.Errorf("nomadField(%q) ok=%t, the rune loop says %t", s, got, want)
		}
	}
}

func TestSpecSame(t *testing.T) {
	base := JobSpec{Schedule: "@hourly", NomadJob: "p", Meta: map[string]string{"a": "1"}, Payload: []byte("x")}
	if !base.Same(JobSpec{Schedule: "@hourly", NomadJob: "p", Meta: map[string]string{"a": "1"}, Payload: []byte("x"),
		Concurrency: ConcurrencyAllow, CatchupWindow: DefaultCatchupWindow}) {
		t.Error("defaults spelled out: not Same")
	}
	for name, change := range map[string]func(*JobSpec){
		"schedule": func(s *JobSpec) { s.Schedule = "@daily" },
		"zone":     func(s *JobSpec) { s.TimeZone = "Europe/Berlin" },
		"policy":   func(s *JobSpec) { s.Concurrency = ConcurrencyForbid },
		"window":   func(s *JobSpec) { s.CatchupWindow = time.Hour },
		"payload":  func(s *JobSpec) { s.Payload = []byte("y") },
		"meta":     func(s *JobSpec) { s.Meta = map[string]string{"a": "2"} },
		"no meta":  func(s *JobSpec) { s.Meta = nil },
		"job":      func(s *JobSpec) { s.NomadJob = "q" },
		"ns":       func(s *JobSpec) { s.Namespace = "n" },
		"region":   func(s *JobSpec) { s.Region = "r" },
		"delivery": func(s *JobSpec) { s.AtLeastOnce = true },
	} {
		b := base
		b.Meta = map[string]string{"a": "1"}
		change(&b)
		if base.Same(b) {
			t.Errorf("%s changed: still Same", name)
		}
	}
}

// A payload decodes in one piece: go-msgpack reads a byte string in
// steps of its handle's MaxInitLen, allocating and copying at each (at
// 64, a payload of MaxPayloadBytes took 256 allocations and 3.3 ms).
func TestPayloadDecodesInOnePiece(t *testing.T) {
	small, big := payloadCommand(t, 0), payloadCommand(t, MaxPayloadBytes)
	base := testing.AllocsPerRun(20, func() { _, _ = Decode(small) })
	with := testing.AllocsPerRun(20, func() { _, _ = Decode(big) })
	if with > base+4 {
		t.Errorf("decoding a %d-byte payload took %.0f allocations more than an empty one", MaxPayloadBytes, with-base)
	}
	c, err := Decode(big)
	if err != nil || len(c.(PutJob).Spec.Payload) != MaxPayloadBytes {
		t.Fatalf("%v", err)
	}
}

func payloadCommand(t testing.TB, n int) []byte {
	t.Helper()
	c := PutJob{Name: "j", Spec: JobSpec{Schedule: "@hourly", NomadJob: "p", Payload: make([]byte, n)}, At: time.Unix(1, 0)}
	b, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkDecodePayload: a PutJob's decode by payload size.
//
//	go test -run '^$' -bench DecodePayload ./cron/state
func BenchmarkDecodePayload(b *testing.B) {
	for _, n := range []int{0, 1 << 10, MaxPayloadBytes} {
		enc := payloadCommand(b, n)
		b.Run(fmt.Sprintf("bytes=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Decode(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestValidNameNamesTheCharacter: a name error names the offending
// character and its byte offset, or the byte in hex where the name is not
// UTF-8. It printed the byte as a rune: "é" read "byte 0 ('Ã')".
func TestValidNameNamesTheCharacter(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"é", `job name "é": character 'é' (U+00E9) at byte 0 is not one of [a-zA-Z0-9_.-]`},
		{"nightly-café", `job name "nightly-café": character 'é' (U+00E9) at byte 11 is not one of [a-zA-Z0-9_.-]`},
		{"a b", `job name "a b": character ' ' (U+0020) at byte 1 is not one of [a-zA-Z0-9_.-]`},
		{"a\x00", `job name "a\x00": character '\x00' (U+0000) at byte 1 is not one of [a-zA-Z0-9_.-]`},
		{"ok\xffx", `job name "ok\xffx": byte 2 (0xff) is not valid UTF-8, nor one of [a-zA-Z0-9_.-]`},
		{"a\xc3", `job name "a\xc3": byte 1 (0xc3) is not valid UTF-8, nor one of [a-zA-Z0-9_.-]`},
	} {
		err := ValidName(tc.name)
		if !errors.Is(err, ErrInvalid) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("ValidName(%q) = %v, want ...%s", tc.name, err, tc.want)
		}
	}
}

// TestWildcardNamespaceIsRefusedByTheState: a PutJob naming namespace
// "*" (Nomad's wildcard for listings, which no dispatch can use) is
// invalid, whatever path wrote it: only the API and cron files refused
// it (CheckWritable), and a command built elsewhere stored it. A
// snapshot that holds such a job, from a log an older version applied,
// still restores.
func TestWildcardNamespaceIsRefusedByTheState(t *testing.T) {
	c := put("j", "@daily", 0, t0)
	c.Spec.Namespace = "*"
	if err := c.Validate(); !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrWildcardNamespace) {
		t.Fatalf("Validate: %v; want invalid, the wildcard", err)
	}
	if _, err := Encode(c); err == nil {
		t.Fatal("Encode took a job in namespace *")
	}
	m := New()
	if err := m.ApplyCommand(1, c); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ApplyCommand: %v; want invalid", err)
	}
	if _, ok := m.Job("j"); ok {
		t.Fatal("the state stored a job in namespace *")
	}
	ok := put("j", "@daily", 0, t0)
	ok.Spec.Namespace = "ns"
	if err := m.ApplyCommand(2, ok); err != nil {
		t.Fatal(err)
	}
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	old := edited(t, snap, func(s *wireState) { s.JobList[0].Spec.Namespace = "*" })
	if err := New().Restore(old); err != nil {
		t.Fatalf("a snapshot holding a job in namespace * no longer restores: %v", err)
	}
}

package nomad

import (
	"strings"
	"testing"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
)

func TestDispatchMeta(t *testing.T) {
	at := time.Date(2026, 3, 1, 3, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name string
		l    Launch
		want map[string]string
		err  string
	}{
		{"no meta", Launch{Job: "j", Identity: "j-1772330400", ScheduledAt: at},
			map[string]string{MetaIdentity: "j-1772330400", MetaJob: "j", MetaScheduledAt: "2026-03-01T02:00:00Z"}, ""},
		{"job meta kept", Launch{Job: "j", Identity: "j-1772330400-manual", ScheduledAt: at, Meta: map[string]string{"a": "1", "paxcron": "ok"}},
			map[string]string{"a": "1", "paxcron": "ok", MetaIdentity: "j-1772330400-manual", MetaJob: "j", MetaScheduledAt: "2026-03-01T02:00:00Z"}, ""},
		{"reserved key", Launch{Job: "j", Identity: "j-1", Meta: map[string]string{"paxcron_identity": "x"}}, nil, "paxcron's own"},
		{"empty identity", Launch{Job: "j"}, nil, "1 to 256 bytes"},
		{"quote in identity", Launch{Job: "j", Identity: `j"-1`}, nil, "not one of"},
		{"slash in identity", Launch{Job: "j", Identity: "j/1"}, nil, "not one of"},
		{"long identity", Launch{Job: "j", Identity: strings.Repeat("a", 257)}, nil, "1 to 256 bytes"},
	} {
		got, err := DispatchMeta(tc.l)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !sameMap(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestDispatchMetaLeavesJobMetaAlone(t *testing.T) {
	meta := map[string]string{"a": "1"}
	if _, err := DispatchMeta(Launch{Job: "j", Identity: "j-1", Meta: meta}); err != nil {
		t.Fatal(err)
	}
	if len(meta) != 1 {
		t.Fatalf("the job's meta was changed: %v", meta)
	}
}

func TestLaunchOf(t *testing.T) {
	at := time.Unix(1772330400, 0).UTC()
	r := launcher.Request{ID: 9, Op: launcher.OpDispatch, Job: "j", ScheduledAt: at, Identity: state.Identity("j", at),
		Spec: state.JobSpec{NomadJob: "p", Namespace: "ns", Region: "r", Meta: map[string]string{"k": "v"}, Payload: []byte("x")}}
	l := LaunchOf(r)
	if l.Target != (state.Target{NomadJob: "p", Namespace: "ns", Region: "r"}) || l.Job != "j" || l.Identity != "j-1772330400" ||
		!l.ScheduledAt.Equal(at) || l.Meta["k"] != "v" || string(l.Payload) != "x" {
		t.Fatalf("LaunchOf = %+v", l)
	}
}

func TestIsChildOf(t *testing.T) {
	for _, tc := range []struct {
		child, parent, identity string
		want                    bool
	}{
		{"p/dispatch-j-1772330400-1795421969-8ab5f0ca", "p", "j-1772330400", true},
		{"p/dispatch-j-1772330400-manual-1795421969-8ab5f0ca", "p", "j-1772330400", false},
		{"p/dispatch-j-1772330400-manual-1795421969-8ab5f0ca", "p", "j-1772330400-manual", true},
		{"p/dispatch-j-1772330400-5-1795421969-8ab5f0ca", "p", "j-1772330400", false},
		{"p/dispatch-j-1772330400-1795421969-8AB5F0CA", "p", "j-1772330400", false},
		{"p/dispatch-j-1772330400-1795421969-8ab5f0c", "p", "j-1772330400", false},
		{"p/dispatch-j-1772330400-1795421969", "p", "j-1772330400", false},
		{"p/dispatch-j-1772330400--8ab5f0ca", "p", "j-1772330400", false},
		{"p2/dispatch-j-1772330400-1795421969-8ab5f0ca", "p", "j-1772330400", false},
		{"q/p/dispatch-j-1772330400-1795421969-8ab5f0ca", "p", "j-1772330400", false},
		{"p/dispatch-j-1772330400-" + strings.Repeat("1", maxUnixDigits+1) + "-8ab5f0ca", "p", "j-1772330400", false},
	} {
		if got := isChildOf(tc.child, tc.parent, tc.identity); got != tc.want {
			t.Errorf("isChildOf(%s, %s, %s) = %v", tc.child, tc.parent, tc.identity, got)
		}
	}
}

// TestLongestChildIsRecordable: the longest child name a dispatch can be
// answered with (the longest parent and job name the state accepts, a
// manual launch, the most seconds isChildOf takes) fits in the outcome
// that records it. Before, a parent and a name of 120 bytes each gave a
// child the state refused, and every leader in turn stopped on it.
func TestLongestChildIsRecordable(t *testing.T) {
	name := strings.Repeat("n", state.MaxNameBytes)
	parent := strings.Repeat("p", state.MaxNomadFieldBytes)
	at := time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)
	spec := state.JobSpec{Schedule: "@every 1m", NomadJob: parent}
	if err := (state.PutJob{Name: name, Spec: spec, At: at}).Validate(); err != nil {
		t.Fatalf("the longest spec is refused: %v", err)
	}
	identity := state.LaunchIdentity(name, at, state.LaunchManual)
	if err := validIdentity(identity); err != nil {
		t.Fatal(err)
	}
	child := ChildPrefix(parent, identity) + strings.Repeat("9", maxUnixDigits) + "-0123abcd"
	if !isChildOf(child, parent, identity) {
		t.Fatalf("%s is not taken for a child", child)
	}
	finished := state.LaunchFinished{Job: name, ScheduledAt: at, LaunchKind: state.LaunchManual, Term: state.Term{Round: 1, Replica: 1},
		Outcome: state.Outcome{Kind: state.OutcomeDispatched, ChildID: child}}
	if _, err := state.Encode(finished); err != nil {
		t.Fatalf("a child of %d bytes cannot be recorded: %v", len(child), err)
	}
}

// FuzzIdentity checks, for any identity: a valid one makes meta, a filter
// with exactly its two quotes, and a child name that Lookup keeps, while
// the children of every longer identity sharing its prefix are not kept;
// an invalid one is refused before it reaches Nomad.
func FuzzIdentity(f *testing.F) {
	for _, s := range []string{"nightly-1772330400", "a", "j-1-manual", `x"y`, "a b", "ü-1", ""} {
		f.Add(s, "manual")
	}
	f.Fuzz(func(t *testing.T, id, more string) {
		const parent = "report"
		meta, err := DispatchMeta(Launch{Job: "j", Identity: id})
		if validIdentity(id) != nil {
			if err == nil {
				t.Fatalf("identity %q: no error", id)
			}
			return
		}
		if err != nil || meta[MetaIdentity] != id {
			t.Fatalf("identity %q: %v, %v", id, meta, err)
		}
		if f := tokenFilter(id); strings.Count(f, `"`) != 2 {
			t.Fatalf("filter %s", f)
		}
		if child := ChildPrefix(parent, id) + "1772330400-0123abcd"; !isChildOf(child, parent, id) {
			t.Fatalf("%s is not a child of %s", child, id)
		}
		longer := id + "-" + more
		if validIdentity(longer) == nil {
			if child := ChildPrefix(parent, longer) + "1772330400-0123abcd"; isChildOf(child, parent, id) {
				t.Fatalf("%s, a child of %s, is taken for one of %s", child, longer, id)
			}
		}
	})
}

// TestIdentityErrorNamesTheByteInHex: a byte outside the name's
// characters is shown in hex; printed as a rune, the first byte of "é"
// read 'Ã'.
func TestIdentityErrorNamesTheByteInHex(t *testing.T) {
	err := validIdentity("caf\u00e9-1700000000")
	if err == nil || !strings.Contains(err.Error(), "byte 3 (0xc3) is not one of") {
		t.Fatalf("validIdentity = %v, want byte 3 (0xc3) named", err)
	}
}

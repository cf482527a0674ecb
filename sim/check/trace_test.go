package check

import (
	"reflect"
	"testing"

	"paxcron/paxos"
)

func TestTraceIsAFunctionOfTheEvents(t *testing.T) {
	run := func(events ...func(tr *Trace)) uint64 {
		tr := NewTrace()
		for _, e := range events {
			e(tr)
		}
		return tr.Sum()
	}
	rec := func(s string) func(*Trace) { return func(tr *Trace) { tr.Record(s) } }
	nums := func(vs ...uint64) func(*Trace) { return func(tr *Trace) { tr.RecordUint64s(vs...) } }
	entry := func(r paxos.ReplicaID, e paxos.Entry) func(*Trace) {
		return func(tr *Trace) { tr.RecordEntry(5, r, e) }
	}
	base := run(rec("crash 2"), nums(1, 2), entry(1, cmd(1, 1, 1, "x")))
	if again := run(rec("crash 2"), nums(1, 2), entry(1, cmd(1, 1, 1, "x"))); again != base {
		t.Fatal("same events, different sums")
	}
	for _, tc := range []struct {
		name string
		sum  uint64
	}{
		{"empty", run()},
		{"order", run(nums(1, 2), rec("crash 2"), entry(1, cmd(1, 1, 1, "x")))},
		{"string content", run(rec("crash 3"), nums(1, 2), entry(1, cmd(1, 1, 1, "x")))},
		{"numbers", run(rec("crash 2"), nums(2, 1), entry(1, cmd(1, 1, 1, "x")))},
		{"entry data", run(rec("crash 2"), nums(1, 2), entry(1, cmd(1, 1, 1, "y")))},
		{"entry replica", run(rec("crash 2"), nums(1, 2), entry(2, cmd(1, 1, 1, "x")))},
	} {
		if tc.sum == base {
			t.Errorf("%s: changing the events did not change the sum", tc.name)
		}
	}
	// Boundaries between records count.
	if run(rec("ab"), rec("c")) == run(rec("a"), rec("bc")) {
		t.Error(`"ab","c" and "a","bc" hash alike`)
	}
	if run(nums(1), nums(2)) == run(nums(1, 2)) {
		t.Error("(1)(2) and (1,2) hash alike")
	}
	if run(rec("")) == run(nums()) {
		t.Error("typed records are not kept apart")
	}
	tr := NewTrace()
	tr.Record("x")
	tr.RecordUint64s(1)
	if tr.Events() != 2 {
		t.Fatalf("Events = %d, want 2", tr.Events())
	}
}

// TestTraceCoversEveryMessageField changes each leaf field of a message in
// turn and expects the hash to change: a field that paxos.Message gains and
// RecordMessage forgets makes this fail.
func TestTraceCoversEveryMessageField(t *testing.T) {
	base := paxos.Message{
		Entries:  []paxos.Entry{{}},
		Snapshot: &paxos.Snapshot{Meta: paxos.SnapshotMeta{Membership: paxos.Membership{Voters: []paxos.ReplicaID{0}}}},
	}
	sum := func(m paxos.Message) uint64 {
		tr := NewTrace()
		tr.RecordMessage(0, m)
		return tr.Sum()
	}
	want := sum(base)
	leaves := 0
	for _, leaf := range leafPaths(reflect.TypeFor[paxos.Message](), "Message", nil) {
		m := base
		m.Entries = []paxos.Entry{{}}
		snap := *base.Snapshot
		snap.Meta.Membership.Voters = []paxos.ReplicaID{0}
		m.Snapshot = &snap
		setLeaf(reflect.ValueOf(&m).Elem(), leaf.path)
		leaves++
		if sum(m) == want {
			t.Errorf("changing %s does not change the trace hash", leaf.name)
		}
	}
	if leaves < 20 {
		t.Fatalf("only %d leaf fields found; the walk is broken", leaves)
	}
	// A nil snapshot and nil entries differ from the base too.
	if sum(paxos.Message{}) == want {
		t.Error("nil snapshot and entries hash like present ones")
	}
}

// leaf is a scalar field reachable from a type: its name for reports and
// its index path for setLeaf.
type leaf struct {
	name string
	path []int
}

// leafPaths lists every scalar reachable from typ (through slices and
// pointers, whose first element is assumed present).
func leafPaths(typ reflect.Type, name string, path []int) []leaf {
	with := func(i int) []int { return append(append([]int(nil), path...), i) }
	switch typ.Kind() {
	case reflect.Struct:
		var out []leaf
		for i := range typ.NumField() {
			out = append(out, leafPaths(typ.Field(i).Type, name+"."+typ.Field(i).Name, with(i))...)
		}
		return out
	case reflect.Slice, reflect.Pointer:
		if typ.Elem().Kind() == reflect.Uint8 {
			return []leaf{{name, path}} // []byte: set as a whole
		}
		return leafPaths(typ.Elem(), name+"[0]", with(-1))
	}
	return []leaf{{name, path}}
}

// setLeaf follows path (-1 steps into element 0 of a slice or through a
// pointer) and sets the scalar there to a non-zero value.
func setLeaf(v reflect.Value, path []int) {
	for _, i := range path {
		switch {
		case i >= 0:
			v = v.Field(i)
		case v.Kind() == reflect.Pointer:
			v = v.Elem()
		default:
			v = v.Index(0)
		}
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		v.SetUint(7)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		v.SetInt(7)
	case reflect.Slice:
		v.SetBytes([]byte{7})
	case reflect.String:
		v.SetString("7")
	default:
		panic("setLeaf: unhandled kind " + v.Kind().String())
	}
}

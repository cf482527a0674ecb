package scheduler

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"paxcron/internal/mapshrink"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// check asserts the heap property and that the index matches the array.
func check(t *testing.T, h *Heap) {
	t.Helper()
	if len(h.ids) != len(h.items) || len(h.pos) != len(h.items)+len(h.free) {
		t.Fatalf("%d ids, %d positions, %d free ids for %d items", len(h.ids), len(h.pos), len(h.free), len(h.items))
	}
	for i, it := range h.items {
		if p := (i - 1) / 2; i > 0 && less(it, h.items[p]) {
			t.Fatalf("item %d %v is smaller than its parent %d %v", i, it, p, h.items[p])
		}
		if id, ok := h.ids[it.name]; !ok || id != it.id || int(h.pos[id]) != i {
			t.Fatalf("ids[%q] = %d, %v; item %v is at %d", it.name, id, ok, it, i)
		}
	}
	for _, id := range h.free {
		if h.pos[id] != -1 {
			t.Fatalf("free id %d has position %d", id, h.pos[id])
		}
	}
}

func drain(h *Heap) []Entry { return h.PopDue(time.Unix(1<<40, 0), h.Len()+1) }

func TestHeap(t *testing.T) {
	type op struct {
		name string
		sec  int // -1: Remove; 0 with set: zero time
		zero bool
	}
	for _, tc := range []struct {
		name  string
		build []Entry
		ops   []op
		want  []string // drain order
	}{
		{name: "empty"},
		{name: "ties by name", build: []Entry{{"c", at(5)}, {"a", at(5)}, {"b", at(5)}}, want: []string{"a", "b", "c"}},
		{name: "time before name", build: []Entry{{"a", at(9)}, {"b", at(1)}, {"c", at(5)}}, want: []string{"b", "c", "a"}},
		{name: "zero NextAt left out", build: []Entry{{"a", time.Time{}}, {"b", at(1)}}, want: []string{"b"}},
		{name: "set inserts", ops: []op{{name: "b", sec: 2}, {name: "a", sec: 3}, {name: "c", sec: 1}}, want: []string{"c", "b", "a"}},
		{name: "set moves earlier", build: []Entry{{"a", at(1)}, {"b", at(2)}, {"c", at(3)}}, ops: []op{{name: "c", sec: 0}}, want: []string{"c", "a", "b"}},
		{name: "set moves later", build: []Entry{{"a", at(1)}, {"b", at(2)}, {"c", at(3)}}, ops: []op{{name: "a", sec: 4}}, want: []string{"b", "c", "a"}},
		{name: "set same time", build: []Entry{{"a", at(1)}, {"b", at(2)}}, ops: []op{{name: "a", sec: 1}}, want: []string{"a", "b"}},
		{name: "set zero removes", build: []Entry{{"a", at(1)}, {"b", at(2)}}, ops: []op{{name: "a", zero: true}}, want: []string{"b"}},
		{name: "remove root", build: []Entry{{"a", at(1)}, {"b", at(2)}, {"c", at(3)}}, ops: []op{{name: "a", sec: -1}}, want: []string{"b", "c"}},
		{name: "remove last", build: []Entry{{"a", at(1)}, {"b", at(2)}, {"c", at(3)}}, ops: []op{{name: "c", sec: -1}}, want: []string{"a", "b"}},
		{name: "remove missing", build: []Entry{{"a", at(1)}}, ops: []op{{name: "x", sec: -1}}, want: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Heap
			h.Build(tc.build)
			for _, o := range tc.ops {
				switch {
				case o.zero:
					h.Set(o.name, time.Time{})
				case o.sec < 0:
					h.Remove(o.name)
				default:
					h.Set(o.name, at(o.sec))
				}
				check(t, &h)
			}
			var got []string
			for _, e := range drain(&h) {
				got = append(got, e.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("drained %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPopDue(t *testing.T) {
	var h Heap
	h.Build([]Entry{{"a", at(1)}, {"b", at(2)}, {"c", at(2)}, {"d", at(3)}, {"e", at(10)}})
	for _, tc := range []struct {
		t    time.Time
		max  int
		want []Entry
	}{
		{at(0), 10, nil},
		{at(2), 2, []Entry{{"a", at(1)}, {"b", at(2)}}},
		{at(2).Add(999 * time.Millisecond), 10, []Entry{{"c", at(2)}}}, // a fraction of a second later
		{at(9), 10, []Entry{{"d", at(3)}}},
		{at(100), 1, []Entry{{"e", at(10)}}},
		{at(100), 1, nil},
	} {
		got := h.PopDue(tc.t, tc.max)
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("PopDue(%v, %d) = %v, want %v", tc.t, tc.max, got, tc.want)
		}
		check(t, &h)
	}
}

func TestTimesRoundTrip(t *testing.T) {
	var h Heap
	for i, tm := range []time.Time{
		time.Unix(0, 0),
		time.Date(2262, 4, 12, 0, 0, 0, 0, time.UTC), // past the end of Unix nanoseconds
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 3, 29, 2, 30, 0, 0, time.FixedZone("X", 3600)),
	} {
		h.Build(nil)
		h.Set(fmt.Sprint("j", i), tm)
		e, ok := h.Peek()
		if !ok || !e.NextAt.Equal(tm) || e.NextAt.Location() != time.UTC {
			t.Fatalf("Peek after Set(%v) = %v, %v", tm, e, ok)
		}
	}
}

func TestPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(h *Heap)
		want string
	}{
		{"duplicate", func(h *Heap) { h.Build([]Entry{{"b", at(1)}, {"a", at(2)}, {"b", at(3)}}) }, `duplicate job name "b"`},
		{"fraction", func(h *Heap) { h.Set("a", at(1).Add(time.Millisecond)) }, "not a whole second"},
		{"empty name", func(h *Heap) { h.Set("", at(1)) }, "empty job name"},
		{"max", func(h *Heap) { h.PopDue(at(1), 0) }, "max 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Heap
			h.Build([]Entry{{"x", at(7)}})
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.want) {
					t.Fatalf("panic %v, want one containing %q", r, tc.want)
				}
				if e, ok := h.Peek(); !ok || e.Name != "x" || h.Len() != 1 {
					t.Fatalf("heap changed by a failed call: %v %v len %d", e, ok, h.Len())
				}
			}()
			tc.f(&h)
		})
	}
}

// oracle is the dumb reference: a slice kept sorted by (time, name).
type oracle []Entry

func compareEntry(a, b Entry) int {
	return cmp.Or(a.NextAt.Compare(b.NextAt), cmp.Compare(a.Name, b.Name))
}

func (o *oracle) remove(name string) bool {
	i := slices.IndexFunc(*o, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		return false
	}
	*o = slices.Delete(*o, i, i+1)
	return true
}

func (o *oracle) set(name string, t time.Time) {
	o.remove(name)
	if !t.IsZero() {
		*o = append(*o, Entry{name, t})
		slices.SortFunc(*o, compareEntry)
	}
}

func (o *oracle) popDue(t time.Time, max int) []Entry {
	n := 0
	for n < len(*o) && n < max && !(*o)[n].NextAt.After(t) {
		n++
	}
	if n == 0 {
		return nil
	}
	out := slices.Clone((*o)[:n])
	*o = slices.Delete(*o, 0, n)
	return out
}

// TestAgainstOracle runs random operation sequences on a Heap and on the
// oracle and compares every result. Few names and a narrow time range
// make ties, moves to the same time and removals of absent names common.
// Half the seeds set a shrink floor of a few jobs, so that Remove
// compacts the index as they go.
func TestAgainstOracle(t *testing.T) {
	compactions := 0
	for seed := uint64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		names := make([]string, 1+r.IntN(40))
		for i := range names {
			names[i] = fmt.Sprintf("j%02d", i)
		}
		randTime := func() time.Time { return at(r.IntN(20)) }
		var h Heap
		var o oracle
		if r.IntN(2) == 0 { // start from Build
			for _, n := range names {
				if r.IntN(3) > 0 {
					o = append(o, Entry{n, randTime()})
				}
			}
			if r.IntN(2) == 0 {
				h.Build(slices.Clone(o))
			} else {
				h = buildInSteps(t, o, 1+r.IntN(4))
			}
			slices.SortFunc(o, compareEntry)
		}
		if r.IntN(2) == 0 {
			h.SetShrinkFloor(1 + r.IntN(8)) // compacted as it goes
		}
		for step := range 300 {
			name := names[r.IntN(len(names))]
			what := ""
			switch k := r.IntN(10); {
			case k < 5:
				tm := randTime()
				if r.IntN(20) == 0 {
					tm = time.Time{}
				}
				what = fmt.Sprintf("Set(%s, %v)", name, tm)
				h.Set(name, tm)
				o.set(name, tm)
			case k < 7:
				what = "Remove(" + name + ")"
				if got, want := h.Remove(name), o.remove(name); got != want {
					t.Fatalf("seed %d step %d: %s = %v, want %v", seed, step, what, got, want)
				}
			case k < 9:
				tm, max := randTime(), 1+r.IntN(5)
				what = fmt.Sprintf("PopDue(%v, %d)", tm, max)
				if got, want := h.PopDue(tm, max), o.popDue(tm, max); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d step %d: %s = %v, want %v", seed, step, what, got, want)
				}
			default:
				what = "Peek"
			}
			got, ok := h.Peek()
			if ok != (len(o) > 0) || (ok && got != o[0]) || h.Len() != len(o) {
				t.Fatalf("seed %d step %d after %s: Peek = %v, %v, Len %d; oracle %v", seed, step, what, got, ok, h.Len(), o)
			}
			check(t, &h)
		}
		if got := drain(&h); !reflect.DeepEqual(got, []Entry(o)) && len(got)+len(o) > 0 {
			t.Fatalf("seed %d: drained %v, want %v", seed, got, o)
		}
		compactions += h.compactions
	}
	if compactions == 0 {
		t.Error("no seed compacted the index")
	}
}

// buildInSteps builds entries with a Builder, work sift-downs per Step,
// checking that no Step does more than it may.
func buildInSteps(t *testing.T, entries []Entry, work int) Heap {
	t.Helper()
	b := NewBuilder(len(entries))
	for _, e := range entries {
		b.Add(e)
	}
	want := (b.Len()/2 + work - 1) / work // the steps heapify needs
	steps := 1
	for ; !b.Step(work); steps++ {
		if steps > want {
			t.Fatalf("%d entries, %d sift-downs a step: not built after %d steps", b.Len(), work, steps)
		}
	}
	if steps > max(want, 1) {
		t.Fatalf("%d entries, %d sift-downs a step: built in %d steps, want %d", b.Len(), work, steps, max(want, 1))
	}
	return b.Heap()
}

// TestBuilder: a heap built in steps is the heap Build makes, and the
// Builder refuses what would break it.
func TestBuilder(t *testing.T) {
	var entries []Entry
	for i := range 1000 {
		entries = append(entries, Entry{fmt.Sprintf("j%04d", i), at((i * 7919) % 97)})
	}
	entries = append(entries, Entry{"zero", time.Time{}}) // no next launch: left out
	for _, work := range []int{1, 3, 64, 1000} {
		h := buildInSteps(t, entries, work)
		check(t, &h)
		var ref Heap
		ref.Build(entries)
		if got, want := drain(&h), drain(&ref); !reflect.DeepEqual(got, want) || len(got) != 1000 {
			t.Fatalf("work %d: built in steps, drained %d entries different from Build's %d", work, len(got), len(want))
		}
	}
	for _, tc := range []struct {
		name string
		f    func(b *Builder)
		want string
	}{
		{"duplicate", func(b *Builder) { b.Add(Entry{"a", at(1)}); b.Add(Entry{"a", at(2)}) }, `duplicate job name "a"`},
		{"add after step", func(b *Builder) { b.Add(Entry{"a", at(1)}); b.Step(1); b.Add(Entry{"b", at(1)}) }, "Add after Step"},
		{"heap before built", func(b *Builder) {
			for i := range 10 {
				b.Add(Entry{fmt.Sprint(i), at(i)})
			}
			b.Step(1)
			b.Heap()
		}, "before the heap is built"},
		{"no work", func(b *Builder) { b.Step(0) }, "work 0"},
		{"fraction", func(b *Builder) { b.Add(Entry{"a", at(1).Add(time.Millisecond)}) }, "not a whole second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if s, _ := recover().(string); !strings.Contains(s, tc.want) {
					t.Fatalf("panic %q, want one containing %q", s, tc.want)
				}
			}()
			tc.f(NewBuilder(0))
		})
	}
}

// A heap whose jobs were mostly removed rebuilds its index in fresh
// memory, and holds and orders the jobs left as before.
func TestRemovingMostJobsCompactsTheIndex(t *testing.T) {
	n := 5 * mapshrink.Floor
	var h Heap
	var left []Entry
	for i := range n {
		e := Entry{fmt.Sprintf("j%06d", i), at(i % 997)}
		h.Set(e.Name, e.NextAt)
		if i < n/10 {
			left = append(left, e)
		}
	}
	for i := n / 10; i < n; i++ {
		h.Remove(fmt.Sprintf("j%06d", i))
	}
	if h.compactions == 0 || len(h.pos) >= n/4 {
		t.Fatalf("%d jobs left of %d: %d compactions, %d ids", h.Len(), n, h.compactions, len(h.pos))
	}
	check(t, &h)
	h.Set("new", at(5))
	left = append(left, Entry{"new", at(5)})
	slices.SortFunc(left, compareEntry)
	if got := drain(&h); !reflect.DeepEqual(got, left) {
		t.Fatalf("drained %d jobs, not the %d left in order", len(got), len(left))
	}
}

package scheduler

import "fmt"

// Builder builds a Heap a bounded amount of work at a time, for a caller
// that must not stall for the whole build: the launcher builds its heap on
// its replica's loop when it takes over, and at a million jobs the build
// in one go held the loop half a second of a one-second lease. Add every
// entry, then call Step until it reports the heap built, then Heap.
type Builder struct {
	items []item
	ids   map[string]int32
	// sift is the next position heapify sifts down; -2 until the first
	// Step, -1 once the heap is built.
	sift int
}

const (
	notHeapified = -2
	heapified    = -1
)

// NewBuilder returns an empty Builder with room for capacity entries.
func NewBuilder(capacity int) *Builder {
	return &Builder{items: make([]item, 0, capacity), ids: make(map[string]int32, capacity), sift: notHeapified}
}

// Add adds a job, in O(1). An entry with a zero NextAt is left out. A
// duplicate or empty name, a fractional NextAt, MaxJobs exceeded, or an
// Add after the first Step are programmer errors and panic.
func (b *Builder) Add(e Entry) {
	if b.sift != notHeapified {
		panic("scheduler: Builder.Add after Step")
	}
	if e.NextAt.IsZero() {
		return
	}
	if len(b.items) >= MaxJobs {
		panic("scheduler: Builder.Add beyond MaxJobs")
	}
	id := int32(len(b.items))
	if _, dup := b.ids[e.Name]; dup {
		panic(fmt.Sprintf("scheduler: Builder.Add: duplicate job name %q", e.Name))
	}
	b.items = append(b.items, item{at: seconds(e.Name, e.NextAt), name: e.Name, id: id})
	b.ids[e.Name] = id
}

// Len returns the number of jobs added.
func (b *Builder) Len() int { return len(b.items) }

// Step orders the heap by at most work sift-downs, each O(log n), and
// reports whether it is built. work must be positive.
func (b *Builder) Step(work int) bool {
	if work <= 0 {
		panic(fmt.Sprintf("scheduler: Builder.Step with work %d, want > 0", work))
	}
	if b.sift == notHeapified {
		b.sift = len(b.items)/2 - 1
	}
	for ; work > 0 && b.sift >= 0; work-- {
		siftDown(b.items, b.sift)
		b.sift--
	}
	return b.sift == heapified
}

// Heap returns the built heap (the Builder is then empty). Calling it
// before Step reported the heap built is a programmer error and panics.
func (b *Builder) Heap() Heap {
	if b.sift != heapified {
		panic("scheduler: Builder.Heap before the heap is built")
	}
	pos := make([]int32, len(b.items))
	for i, it := range b.items {
		pos[it.id] = int32(i)
	}
	h := Heap{items: b.items, ids: b.ids, pos: pos}
	*b = Builder{sift: heapified}
	return h
}

package scheduler

import (
	"fmt"
	"math"
	"time"

	"paxcron/internal/mapshrink"
)

// MaxJobs is the most jobs a Heap holds: positions are int32 to keep the
// index small.
const MaxJobs = math.MaxInt32

// Entry is one job's next scheduled time.
type Entry struct {
	Name   string
	NextAt time.Time
}

// item is an Entry as stored: Unix seconds, the name, and the job's slot
// in Heap.pos.
type item struct {
	at   int64
	name string
	id   int32
}

func less(a, b item) bool {
	return a.at < b.at || (a.at == b.at && a.name < b.name)
}

// Heap is a min-heap of jobs ordered by (next scheduled time, name), with an
// index from name to position so a job can be moved or removed in
// O(log n). The index has two steps: the map gives a job's id, fixed while
// it stays in the heap, and pos[id] its position. A move inside the heap
// then updates pos, an array, not the map: hashing a name at every level
// made Set and PopDue several times slower.
// The zero value is an empty heap ready to use.
type Heap struct {
	items []item
	ids   map[string]int32 // name -> id
	pos   []int32          // id -> position in items; -1 for a free id
	free  []int32          // ids free for reuse
	// compactions counts the index's rebuilds (compact).
	compactions int
	// shrinkFloor replaces mapshrink.Floor where not 0 (SetShrinkFloor).
	shrinkFloor int
}

// SetShrinkFloor sets the number of jobs the heap must have held before
// Remove compacts its index; 0 is mapshrink.Floor. The simulator's few
// jobs need a small one to be compacted at all.
func (h *Heap) SetShrinkFloor(floor int) { h.shrinkFloor = floor }

// Len returns the number of jobs in the heap.
func (h *Heap) Len() int { return len(h.items) }

// Build replaces the heap's content with entries, in O(n). Entries with a
// zero NextAt are left out. Two entries with the same name, an empty name,
// or a fractional NextAt are programmer errors and panic.
func (h *Heap) Build(entries []Entry) {
	if len(entries) > MaxJobs {
		panic(fmt.Sprintf("scheduler: Build of %d entries exceeds MaxJobs", len(entries)))
	}
	b := NewBuilder(len(entries))
	for _, e := range entries {
		b.Add(e)
	}
	for !b.Step(len(entries) + 1) {
	}
	floor := h.shrinkFloor
	*h = b.Heap()
	h.shrinkFloor = floor
}

// Set inserts the job or moves it to nextAt, in O(log n). A zero nextAt
// removes it (the job has no next launch).
func (h *Heap) Set(name string, nextAt time.Time) {
	if nextAt.IsZero() {
		h.Remove(name)
		return
	}
	at := seconds(name, nextAt)
	id, ok := h.ids[name]
	if !ok {
		h.insert(item{at: at, name: name})
		return
	}
	i := h.pos[id]
	old := h.items[i].at
	h.items[i].at = at
	switch {
	case at < old:
		h.up(int(i))
	case at > old:
		h.down(int(i))
	}
}

// Remove removes the job, in O(log n), and reports whether it was there.
func (h *Heap) Remove(name string) bool {
	id, ok := h.ids[name]
	if !ok {
		return false
	}
	h.removeAt(int(h.pos[id]))
	if mapshrink.FarBelow(len(h.items), len(h.pos), h.shrinkFloor) {
		h.compact()
	}
	return true
}

// compact renumbers the jobs by their positions and rebuilds the index
// in memory of their number: a Go map never shrinks, and pos holds an
// entry per id ever given, so a heap that held a million jobs kept their
// memory after all but a few were removed. Only Remove compacts: the
// jobs PopDue takes come back with their next time. The heap's order is
// unchanged.
func (h *Heap) compact() {
	items := make([]item, len(h.items))
	ids := make(map[string]int32, len(h.items))
	pos := make([]int32, len(h.items))
	for i, it := range h.items {
		it.id = int32(i)
		items[i], ids[it.name], pos[i] = it, it.id, it.id
	}
	h.items, h.ids, h.pos, h.free = items, ids, pos, nil
	h.compactions++
}

// NextAt returns the job's time in the heap, and whether it is there.
func (h *Heap) NextAt(name string) (time.Time, bool) {
	id, ok := h.ids[name]
	if !ok {
		return time.Time{}, false
	}
	return h.items[h.pos[id]].entry().NextAt, true
}

// Peek returns the job due first, if any.
func (h *Heap) Peek() (Entry, bool) {
	if len(h.items) == 0 {
		return Entry{}, false
	}
	return h.items[0].entry(), true
}

// PopDue removes and returns the jobs whose next scheduled time is at or
// before t, earliest first (ties by name), at most max of them: a herd of
// due jobs is taken in bounded batches. max must be positive.
func (h *Heap) PopDue(t time.Time, max int) []Entry {
	if max <= 0 {
		panic(fmt.Sprintf("scheduler: PopDue with max %d, want > 0", max))
	}
	// Stored times are whole seconds, so at <= t exactly when at <= the
	// second t falls in (Unix rounds down).
	limit := t.Unix()
	var out []Entry
	for len(h.items) > 0 && len(out) < max && h.items[0].at <= limit {
		out = append(out, h.items[0].entry())
		h.removeAt(0)
	}
	return out
}

func (it item) entry() Entry {
	return Entry{Name: it.name, NextAt: time.Unix(it.at, 0).UTC()}
}

// seconds returns t as Unix seconds, asserting that it is a whole second
// and that the name is not empty.
func seconds(name string, t time.Time) int64 {
	if name == "" {
		panic("scheduler: empty job name")
	}
	if t.Nanosecond() != 0 {
		panic(fmt.Sprintf("scheduler: job %q: scheduled time %s is not a whole second", name, t.Format(time.RFC3339Nano)))
	}
	return t.Unix()
}

// insert adds a job not in the heap, giving it a free id or a new one.
func (h *Heap) insert(it item) {
	if len(h.items) >= MaxJobs {
		panic("scheduler: Set: the heap holds MaxJobs jobs")
	}
	if h.ids == nil {
		h.ids = make(map[string]int32)
	}
	if n := len(h.free); n > 0 {
		it.id = h.free[n-1]
		h.free = h.free[:n-1]
	} else {
		it.id = int32(len(h.pos))
		h.pos = append(h.pos, -1)
	}
	h.ids[it.name] = it.id
	h.items = append(h.items, it)
	h.up(len(h.items) - 1)
}

// removeAt removes the item at position i: the last item takes its place
// and moves up or down.
func (h *Heap) removeAt(i int) {
	last := len(h.items) - 1
	gone := h.items[i]
	delete(h.ids, gone.name)
	h.pos[gone.id] = -1
	h.free = append(h.free, gone.id)
	moved := h.items[last]
	h.items[last] = item{} // drop the name for the collector
	h.items = h.items[:last]
	if i == last {
		return
	}
	h.place(i, moved)
	if i > 0 && less(moved, h.items[(i-1)/2]) {
		h.up(i)
	} else {
		h.down(i)
	}
}

// up moves the item at i toward the root until its parent is smaller,
// keeping the index up to date.
func (h *Heap) up(i int) {
	it := h.items[i]
	for i > 0 {
		p := (i - 1) / 2
		if !less(it, h.items[p]) {
			break
		}
		h.place(i, h.items[p])
		i = p
	}
	h.place(i, it)
}

// down moves the item at i toward the leaves until its children are
// larger, keeping the index up to date.
func (h *Heap) down(i int) {
	it := h.items[i]
	for {
		c := smallerChild(h.items, i)
		if c < 0 || !less(h.items[c], it) {
			break
		}
		h.place(i, h.items[c])
		i = c
	}
	h.place(i, it)
}

func (h *Heap) place(i int, it item) {
	h.items[i] = it
	h.pos[it.id] = int32(i)
}

// siftDown is down without the index, for Build's heapify.
func siftDown(items []item, i int) {
	it := items[i]
	for {
		c := smallerChild(items, i)
		if c < 0 || !less(items[c], it) {
			break
		}
		items[i] = items[c]
		i = c
	}
	items[i] = it
}

// smallerChild returns the position of i's smaller child, -1 if none.
func smallerChild(items []item, i int) int {
	c := 2*i + 1
	if c >= len(items) {
		return -1
	}
	if r := c + 1; r < len(items) && less(items[r], items[c]) {
		c = r
	}
	return c
}

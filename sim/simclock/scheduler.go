package simclock

import (
	"fmt"
	"time"
)

// Scheduler is a queue of events ordered by (true time, insertion sequence):
// events due at the same instant run in the order they were scheduled, so
// ties never depend on anything but the run itself.
//
// It is a 4-ary min-heap of small value items over a pool of event slots
// that are recycled, so that steady-state scheduling does not allocate
// (beyond whatever closure the caller builds). A Scheduler is not safe for
// concurrent use; the simulator runs everything from one goroutine.
type Scheduler struct {
	now   time.Duration
	seq   uint64
	steps uint64
	heap  []heapItem
	slots []slot
	free  []int32
}

// heapItem is what the heap compares and moves; kept small so that sifting
// touches little memory.
type heapItem struct {
	at   time.Duration
	seq  uint64
	slot int32
}

// slot holds an event's callback and where its item sits in the heap, so
// that Cancel can remove it directly. gen changes every time the slot is
// freed, which makes stale Timer handles harmless.
type slot struct {
	fn  func()
	gen uint32
	pos int32 // index in heap, or -1 when free
}

// Timer is a handle to a scheduled event. The zero Timer refers to nothing.
type Timer struct {
	s    *Scheduler
	slot int32
	gen  uint32
}

// NewScheduler returns an empty scheduler at true time zero.
func NewScheduler() *Scheduler { return &Scheduler{} }

// Now returns the current true time: the time of the event running or last
// run, or the limit of the last RunUntil.
func (s *Scheduler) Now() time.Duration { return s.now }

// Len returns the number of pending events.
func (s *Scheduler) Len() int { return len(s.heap) }

// Steps returns the number of events run so far.
func (s *Scheduler) Steps() uint64 { return s.steps }

// Next returns the time of the earliest pending event.
func (s *Scheduler) Next() (time.Duration, bool) {
	if len(s.heap) == 0 {
		return 0, false
	}
	return s.heap[0].at, true
}

// At schedules fn to run at true time t. Scheduling in the past is a
// programmer error and panics: it would make time run backwards.
func (s *Scheduler) At(t time.Duration, fn func()) Timer {
	if t < s.now {
		panic(fmt.Sprintf("simclock: At(%v) is before now (%v)", t, s.now))
	}
	if fn == nil {
		panic("simclock: At with a nil func")
	}
	id := s.allocSlot(fn)
	s.seq++
	s.heap = append(s.heap, heapItem{at: t, seq: s.seq, slot: id})
	s.slots[id].pos = int32(len(s.heap) - 1)
	s.up(len(s.heap) - 1)
	return Timer{s: s, slot: id, gen: s.slots[id].gen}
}

// After schedules fn to run d after now. A negative d panics, as in At.
func (s *Scheduler) After(d time.Duration, fn func()) Timer {
	return s.At(s.now+d, fn)
}

// Step runs the earliest pending event, advancing Now to its time. It
// returns false when nothing is pending.
func (s *Scheduler) Step() bool {
	if len(s.heap) == 0 {
		return false
	}
	top := s.heap[0]
	s.removeAt(0)
	fn := s.slots[top.slot].fn
	s.freeSlot(top.slot)
	s.now = top.at
	s.steps++
	fn()
	return true
}

// RunUntil runs every event due at or before t (including those that
// running events schedule within that window), then sets Now to t. It
// returns how many events ran. A t before Now panics.
func (s *Scheduler) RunUntil(t time.Duration) int {
	if t < s.now {
		panic(fmt.Sprintf("simclock: RunUntil(%v) is before now (%v)", t, s.now))
	}
	n := 0
	for len(s.heap) > 0 && s.heap[0].at <= t {
		s.Step()
		n++
	}
	s.now = t
	return n
}

// Cancel removes the event if it is still pending and reports whether it
// was. Cancelling an event that ran, was cancelled, or a zero Timer is a
// no-op.
func (t Timer) Cancel() bool {
	if !t.Pending() {
		return false
	}
	s := t.s
	s.removeAt(int(s.slots[t.slot].pos))
	s.freeSlot(t.slot)
	return true
}

// Pending reports whether the event has neither run nor been cancelled.
func (t Timer) Pending() bool {
	return t.s != nil && t.s.slots[t.slot].gen == t.gen && t.s.slots[t.slot].pos >= 0
}

// When returns the time the event is due at, if it is pending.
func (t Timer) When() (time.Duration, bool) {
	if !t.Pending() {
		return 0, false
	}
	return t.s.heap[t.s.slots[t.slot].pos].at, true
}

func (s *Scheduler) allocSlot(fn func()) int32 {
	if n := len(s.free); n > 0 {
		id := s.free[n-1]
		s.free = s.free[:n-1]
		s.slots[id].fn = fn
		return id
	}
	s.slots = append(s.slots, slot{fn: fn, pos: -1})
	return int32(len(s.slots) - 1)
}

func (s *Scheduler) freeSlot(id int32) {
	sl := &s.slots[id]
	sl.fn = nil // let the closure be collected
	sl.gen++
	sl.pos = -1
	s.free = append(s.free, id)
}

func less(a, b *heapItem) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// removeAt takes the item at heap index i out, filling the hole with the
// last item and restoring heap order around it.
func (s *Scheduler) removeAt(i int) {
	last := len(s.heap) - 1
	if i != last {
		s.heap[i] = s.heap[last]
		s.slots[s.heap[i].slot].pos = int32(i)
	}
	s.heap = s.heap[:last]
	if i < last {
		if !s.down(i) {
			s.up(i)
		}
	}
}

func (s *Scheduler) up(i int) {
	h := s.heap
	item := h[i]
	for i > 0 {
		p := (i - 1) / 4
		if !less(&item, &h[p]) {
			break
		}
		h[i] = h[p]
		s.slots[h[i].slot].pos = int32(i)
		i = p
	}
	h[i] = item
	s.slots[item.slot].pos = int32(i)
}

// down sifts the item at i towards the leaves and reports whether it moved.
func (s *Scheduler) down(i int) bool {
	h := s.heap
	n := len(h)
	item := h[i]
	start := i
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if less(&h[j], &h[m]) {
				m = j
			}
		}
		if !less(&h[m], &item) {
			break
		}
		h[i] = h[m]
		s.slots[h[i].slot].pos = int32(i)
		i = m
	}
	h[i] = item
	s.slots[item.slot].pos = int32(i)
	return i != start
}

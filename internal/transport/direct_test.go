package transport

import (
	"errors"
	"slices"
	"testing"
)

// fakeRaw takes at most take bytes of a write, after running during (a
// Send on another goroutine, at the worst moment), and then fails with
// err if set.
type fakeRaw struct {
	take    int
	err     error
	during  func()
	written []byte
	closed  bool
}

func (f *fakeRaw) tryWrite(b []byte) (int, error) {
	if f.during != nil {
		f.during()
	}
	n := min(f.take, len(b))
	f.written = append(f.written, b[:n]...)
	return n, f.err
}

func (f *fakeRaw) close() { f.closed = true }

// writeDirect writes only while the pump is idle with nothing queued; what
// the socket does not take goes first in the queue, ahead of frames sent
// meanwhile; a failed write loses the frame.
func TestWriteDirect(t *testing.T) {
	strs := func(q [][]byte) []string {
		var s []string
		for _, f := range q {
			s = append(s, string(f))
		}
		return s
	}
	t.Run("whole", func(t *testing.T) {
		p, st, w := newPeer(2, "a"), &counters{}, &fakeRaw{take: 100}
		p.setDirect(w)
		if !p.writeDirect([]byte("frame"), st) || string(w.written) != "frame" || len(p.takeAll()) != 0 {
			t.Fatalf("wrote %q", w.written)
		}
		if st.sent.Load() != 1 || st.sentDirect.Load() != 1 {
			t.Fatalf("sent %d, direct %d; want 1 and 1", st.sent.Load(), st.sentDirect.Load())
		}
	})
	t.Run("the rest goes first", func(t *testing.T) {
		p, st := newPeer(2, "a"), &counters{}
		w := &fakeRaw{take: 4, during: func() { p.push([]byte("later"), DefaultLimits()) }}
		p.setDirect(w)
		if !p.writeDirect([]byte("0123456789"), st) {
			t.Fatal("refused")
		}
		if got := strs(p.takeAll()); !slices.Equal(got, []string{"456789", "later"}) || string(w.written) != "0123" {
			t.Fatalf("wrote %q, queued %q; want 0123, then 456789 ahead of later", w.written, got)
		}
		// The pump counts the rest when it writes it.
		if st.sent.Load() != 0 || st.sentDirect.Load() != 1 {
			t.Fatalf("sent %d, direct %d; want 0 and 1", st.sent.Load(), st.sentDirect.Load())
		}
		if len(p.wake) != 1 {
			t.Fatal("the pump was not woken for the rest")
		}
	})
	t.Run("full socket", func(t *testing.T) {
		p, st, w := newPeer(2, "a"), &counters{}, &fakeRaw{take: 0}
		p.setDirect(w)
		if !p.writeDirect([]byte("frame"), st) {
			t.Fatal("refused")
		}
		if got := strs(p.takeAll()); !slices.Equal(got, []string{"frame"}) || st.sentDirect.Load() != 0 {
			t.Fatalf("queued %q, direct %d; want the whole frame queued, none direct", got, st.sentDirect.Load())
		}
	})
	t.Run("refused", func(t *testing.T) {
		w := &fakeRaw{take: 100}
		queued := newPeer(2, "a")
		queued.setDirect(w)
		queued.push([]byte("first"), DefaultLimits())
		pumping := newPeer(2, "a")
		pumping.setDirect(w)
		pumping.wmu.Lock()
		defer pumping.wmu.Unlock()
		for name, p := range map[string]*peer{"no connection": newPeer(2, "a"), "frames queued": queued, "the pump writing": pumping} {
			if p.writeDirect([]byte("frame"), &counters{}) {
				t.Errorf("%s: wrote directly", name)
			}
		}
		if len(w.written) != 0 {
			t.Fatalf("wrote %q", w.written)
		}
	})
	t.Run("failed before a byte", func(t *testing.T) {
		// A closed connection, a passed deadline: the pump takes the frame.
		p, st, w := newPeer(2, "a"), &counters{}, &fakeRaw{err: errors.New("use of closed network connection")}
		p.setDirect(w)
		if p.writeDirect([]byte("frame"), st) || st.lost.Load() != 0 || w.closed {
			t.Fatalf("lost %d, closed %v; want the frame handed back, nothing lost or closed", st.lost.Load(), w.closed)
		}
	})
	t.Run("failed part way", func(t *testing.T) {
		p, st, w := newPeer(2, "a"), &counters{}, &fakeRaw{take: 3, err: errors.New("broken pipe")}
		p.setDirect(w)
		if !p.writeDirect([]byte("frame"), st) || len(p.takeAll()) != 0 || st.lost.Load() != 1 || st.sent.Load() != 0 || !w.closed {
			t.Fatalf("lost %d, sent %d, closed %v; want the frame lost and the connection closed", st.lost.Load(), st.sent.Load(), w.closed)
		}
	})
}

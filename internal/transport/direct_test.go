package transport

import (
	"errors"
	"slices"
	"testing"
)

// fakeRaw takes at most take bytes of a write, after running during (a
// Send on another goroutine, at the worst moment), or fails with err.
type fakeRaw struct {
	take    int
	err     error
	during  func()
	written []byte
}

func (f *fakeRaw) tryWrite(b []byte) (int, error) {
	if f.during != nil {
		f.during()
	}
	if f.err != nil {
		return 0, f.err
	}
	n := min(f.take, len(b))
	f.written = append(f.written, b[:n]...)
	return n, nil
}

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
	t.Run("failed", func(t *testing.T) {
		p, st := newPeer(2, "a"), &counters{}
		p.setDirect(&fakeRaw{err: errors.New("broken pipe")})
		if !p.writeDirect([]byte("frame"), st) || len(p.takeAll()) != 0 || st.lost.Load() != 1 || st.sent.Load() != 0 {
			t.Fatalf("lost %d, sent %d; want the frame lost, not queued", st.lost.Load(), st.sent.Load())
		}
	})
}

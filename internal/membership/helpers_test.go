package membership

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitMax bounds every wait in these tests: generous, since a loaded
// machine running -race stretches memberlist's timers. A failing wait
// fails the test; nothing sleeps.
const waitMax = 10 * time.Second

type eventKind int

const (
	updated eventKind = iota
	suspected
	alive
)

func (k eventKind) String() string { return [...]string{"updated", "suspected", "alive"}[k] }

type event struct {
	kind eventKind
	id   uint64
	info PeerInfo // for updated
	at   time.Time
}

func (e event) String() string {
	if e.kind == updated {
		return fmt.Sprintf("%v %+v", e.kind, e.info)
	}
	return fmt.Sprintf("%v %d", e.kind, e.id)
}

// recorder is an Events that keeps every call; it never blocks.
type recorder struct {
	mu      sync.Mutex
	events  []event
	changed chan struct{} // closed and replaced at each event
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) add(e event) {
	e.at = time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) PeerUpdated(p PeerInfo)  { r.add(event{kind: updated, id: p.ID, info: p}) }
func (r *recorder) PeerSuspected(id uint64) { r.add(event{kind: suspected, id: id}) }
func (r *recorder) PeerAlive(id uint64)     { r.add(event{kind: alive, id: id}) }

// snapshot returns the events so far and a channel closed at the next.
func (r *recorder) snapshot() ([]event, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...), r.changed
}

// mark is the number of events so far: waitFor(mark, ...) looks only at
// later ones.
func (r *recorder) mark() int {
	evs, _ := r.snapshot()
	return len(evs)
}

// waitFor returns the first event from index from on that matches, and
// its index; it fails the test after waitMax.
func (r *recorder) waitFor(t *testing.T, from int, what string, match func(event) bool) (event, int) {
	t.Helper()
	deadline := time.NewTimer(waitMax)
	defer deadline.Stop()
	for {
		evs, changed := r.snapshot()
		for i := from; i < len(evs); i++ {
			if match(evs[i]) {
				return evs[i], i
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %s within %v; events: %v", what, waitMax, evs)
		}
	}
}

func (r *recorder) waitKind(t *testing.T, from int, kind eventKind, id uint64) (event, int) {
	t.Helper()
	return r.waitFor(t, from, fmt.Sprintf("%v %d", kind, id), func(e event) bool { return e.kind == kind && e.id == id })
}

// about returns the events about replica id.
func (r *recorder) about(id uint64) []event {
	evs, _ := r.snapshot()
	var out []event
	for _, e := range evs {
		if e.id == id {
			out = append(out, e)
		}
	}
	return out
}

// eventually polls cond until it holds; it fails the test after waitMax.
// For counters that no event announces.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitMax)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("not within %v: %s", waitMax, what)
		}
	}
}

// testLogger logs to t until the test ends (memberlist's goroutines may
// log a little after Close), at level.
func testLogger(t *testing.T, level slog.Level) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop) // registered first: runs after every Close
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
}

// info is replica id's PeerInfo in these tests (nothing listens there:
// membership only carries the addresses).
func info(id uint64) PeerInfo {
	return PeerInfo{
		ID:        id,
		PaxosAddr: fmt.Sprintf("127.0.0.1:%d", 17000+id),
		APIAddr:   fmt.Sprintf("127.0.0.1:%d", 18000+id),
	}
}

var members3 = []uint64{1, 2, 3}

// testConfig is replica id's Config on loopback with a free port.
func testConfig(t *testing.T, id uint64, join ...string) Config {
	return Config{
		Self:     info(id),
		Members:  members3,
		BindAddr: "127.0.0.1:0",
		Join:     join,
		Logger:   testLogger(t, slog.LevelWarn),
		Events:   newRecorder(),
		Timing:   DefaultTiming(),
	}
}

// start starts cfg and closes it at the end of the test.
func start(t *testing.T, cfg Config) (*Membership, *recorder) {
	t.Helper()
	m, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start(replica %d): %v", cfg.Self.ID, err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close(replica %d): %v", cfg.Self.ID, err)
		}
	})
	return m, cfg.Events.(*recorder)
}

// cluster starts replicas 1, 2 and 3, the last two joining the first, and
// waits until each has seen the others alive.
func cluster(t *testing.T) ([]*Membership, []*recorder) {
	t.Helper()
	a, ra := start(t, testConfig(t, 1))
	b, rb := start(t, testConfig(t, 2, a.Addr()))
	c, rc := start(t, testConfig(t, 3, a.Addr()))
	ms, rs := []*Membership{a, b, c}, []*recorder{ra, rb, rc}
	for i, r := range rs {
		for _, id := range members3 {
			if id != uint64(i+1) {
				r.waitKind(t, 0, alive, id)
			}
		}
	}
	return ms, rs
}

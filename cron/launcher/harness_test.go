package launcher

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"paxcron/cron/state"
	"paxcron/paxos"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeDispatcher records requests; the test answers them.
type fakeDispatcher struct {
	pending []Request
}

func (d *fakeDispatcher) Submit(r Request) { d.pending = append(d.pending, r) }

// harness is one replica's launcher over a log the test commits by hand:
// proposals wait in proposed until commit applies them in order.
type harness struct {
	t        *testing.T
	l        *Launcher
	d        *fakeDispatcher
	proposed []state.Command
	slot     uint64
	now      time.Time
	lead     Leadership
	busy     bool // Propose fails with paxos.ErrBusy
	// A Takeover is committed as soon as it is proposed, unless
	// holdTakeover leaves it with the other proposals.
	holdTakeover bool
	takeover     *state.Takeover
	// A SetClusterID is committed as soon as it is proposed too, unless
	// holdNaming leaves it with the other proposals.
	holdNaming bool
	naming     *state.SetClusterID
	// drawn counts the cluster IDs drawn (Config.NewClusterID).
	drawn int
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, d: &fakeDispatcher{}, now: t0}
	cfg := Config{
		Machine:       state.New(),
		Dispatcher:    h.d,
		MemoryHorizon: 4 * time.Hour,
		NewClusterID: func() state.ClusterID {
			h.drawn++
			return state.ClusterID{0xc1, byte(h.drawn)}
		},
		// Lookups wait this long for calls to land: settle() passes it.
		MaxCallLatency: time.Millisecond,
		Propose: func(c state.Command) error {
			if h.busy {
				return paxos.ErrBusy
			}
			if _, err := state.Encode(c); err != nil {
				// internal/node stops the replica on such a proposal.
				t.Errorf("the launcher proposed a command the node refuses: %v", err)
				return err
			}
			if tk, ok := c.(state.Takeover); ok && !h.holdTakeover {
				h.takeover = &tk // committed at once by step
				return nil
			}
			if n, ok := c.(state.SetClusterID); ok && !h.holdNaming {
				h.naming = &n // committed at once by step
				return nil
			}
			h.proposed = append(h.proposed, c)
			return nil
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.l = l
	return h
}

// lease makes the replica a caught-up leader of term with a lease for d.
func (h *harness) lease(term uint64, d time.Duration) {
	h.lead = Leadership{Leader: true, Term: paxos.Ballot{Round: term, Replica: 1}, CaughtUp: true, LeaseUntil: h.now.Add(d)}
}

func (h *harness) step() {
	h.l.Step(h.now, h.lead)
	if n := h.naming; n != nil {
		h.naming = nil
		h.apply(*n)
	}
	if tk := h.takeover; tk != nil {
		h.takeover = nil
		h.apply(*tk)
		h.l.Step(h.now, h.lead)
	}
}

// settle lets MaxCallLatency pass, so that delayed lookups are made.
func (h *harness) settle() { h.at(h.now.Add(time.Millisecond)) }

// at moves the clock to t, keeping a held lease 10 s ahead, and steps.
func (h *harness) at(t time.Time) {
	h.now = t
	if h.lead.Leader && !h.lead.LeaseUntil.IsZero() {
		h.lead.LeaseUntil = t.Add(10 * time.Second)
	}
	h.step()
}

// apply puts commands straight into the log (a client or another leader
// wrote them).
func (h *harness) apply(cs ...state.Command) {
	h.t.Helper()
	for _, c := range cs {
		b, err := state.Encode(c)
		if err != nil {
			h.t.Fatalf("encode %s: %v", c.Kind(), err)
		}
		h.slot++
		h.l.Apply(h.slot, b)
	}
}

// commit applies every proposal so far, in order, then steps.
func (h *harness) commit() []state.Command {
	h.t.Helper()
	cs := h.proposed
	h.proposed = nil
	h.apply(cs...)
	h.step()
	return cs
}

// answer completes the oldest pending request with r (its ID filled in).
func (h *harness) answer(r Result) Request {
	h.t.Helper()
	if len(h.d.pending) == 0 {
		h.t.Fatalf("no request pending")
	}
	req := h.d.pending[0]
	h.d.pending = h.d.pending[1:]
	r.ID = req.ID
	h.l.Done(r)
	h.step()
	return req
}

// answerFor completes the pending request for (op, identity) with r.
func (h *harness) answerFor(op Op, identity string, r Result) {
	h.t.Helper()
	for i, req := range h.d.pending {
		if req.Op == op && req.Identity == identity {
			h.d.pending = append(h.d.pending[:i:i], h.d.pending[i+1:]...)
			r.ID = req.ID
			h.l.Done(r)
			h.step()
			return
		}
	}
	h.t.Fatalf("no %s request pending for %s", op, identity)
}

func (h *harness) wantRequest(op Op, identity string) Request {
	h.t.Helper()
	if len(h.d.pending) == 0 {
		h.t.Fatalf("want a %s request for %s, none pending", op, identity)
	}
	r := h.d.pending[0]
	if r.Op != op || r.Identity != identity {
		h.t.Fatalf("pending request %s %s, want %s %s", r.Op, r.Identity, op, identity)
	}
	if !r.Deadline.Equal(h.lead.LeaseUntil) {
		h.t.Fatalf("request deadline %v, want the lease end %v", r.Deadline, h.lead.LeaseUntil)
	}
	return r
}

func (h *harness) wantNoRequest() {
	h.t.Helper()
	if len(h.d.pending) > 0 {
		h.t.Fatalf("unexpected request %s %s", h.d.pending[0].Op, h.d.pending[0].Identity)
	}
}

// describe renders commands compactly for comparisons.
func describe(cs []state.Command) string {
	var parts []string
	for _, c := range cs {
		switch c := c.(type) {
		case state.LaunchStarted:
			parts = append(parts, fmt.Sprintf("started %s", c.Identity))
		case state.Takeover:
			parts = append(parts, "takeover "+c.Term.String())
		case state.LaunchFinished:
			o := c.Outcome
			detail := strings.TrimSpace(o.ChildID + " " + o.Reason)
			parts = append(parts, fmt.Sprintf("finished %s %s %s", state.LaunchIdentity(c.Job, c.ScheduledAt, c.LaunchKind), o.Kind, detail))
		default:
			parts = append(parts, c.Kind().String())
		}
	}
	return strings.Join(parts, "\n")
}

func (h *harness) wantProposed(want ...string) []state.Command {
	h.t.Helper()
	got := describe(h.proposed)
	w := strings.Join(want, "\n")
	if !matchLines(got, w) {
		h.t.Fatalf("proposed:\n%s\nwant:\n%s", got, w)
	}
	return h.proposed
}

// matchLines compares line by line; a wanted line ending in "*" matches
// any line with that prefix.
func matchLines(got, want string) bool {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		if p, ok := strings.CutSuffix(w[i], "*"); ok {
			if !strings.HasPrefix(g[i], p) {
				return false
			}
		} else if g[i] != w[i] {
			return false
		}
	}
	return true
}

func job(schedule string) state.JobSpec {
	return state.JobSpec{Schedule: schedule, NomadJob: "batch"}
}

func putJob(name string, spec state.JobSpec) state.PutJob {
	return state.PutJob{Name: name, Spec: spec, At: t0}
}

var errTimeout = errors.New("context deadline exceeded")

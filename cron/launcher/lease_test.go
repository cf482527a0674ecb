package launcher

import (
	"testing"
	"time"
)

// leaseFollower is a fakeDispatcher that records the leases it is told.
type leaseFollower struct {
	fakeDispatcher
	told []toldLease
}

type toldLease struct {
	stint uint64
	until time.Time
}

func (d *leaseFollower) Lease(stint uint64, until time.Time) {
	d.told = append(d.told, toldLease{stint, until})
}

// TestLeaseIsToldToItsFollower: a LeaseFollower dispatcher hears the
// lease each Step renews, in the stint the requests carry; a stint's end
// (demotion, a new term, the lease lapsed) is told as a zero time, once,
// and a new promotion starts a new stint. A dispatcher that follows the
// lease lets queued calls start as long as it is told; one told a lease
// the launcher does not hold would let calls start without it.
func TestLeaseIsToldToItsFollower(t *testing.T) {
	f := &leaseFollower{}
	h := newHarness(t, func(c *Config) { c.Dispatcher = f })
	h.d = &f.fakeDispatcher
	last := func() toldLease {
		t.Helper()
		if len(f.told) == 0 {
			t.Fatal("no lease told")
		}
		return f.told[len(f.told)-1]
	}
	h.apply(putJob("a", job("@every 1h")))
	h.step() // a follower: nothing to tell
	if len(f.told) != 0 {
		t.Fatalf("a follower told leases %v", f.told)
	}
	h.lease(1, 10*time.Second)
	h.at(t0.Add(time.Hour))
	h.commit()
	r := h.wantRequest(OpDispatch, "a-1772370000")
	if got := last(); got.stint != 1 || r.Stint != 1 || !got.until.Equal(h.lead.LeaseUntil) {
		t.Fatalf("told %+v, request in stint %d; want stint 1 to the lease end %v", got, r.Stint, h.lead.LeaseUntil)
	}
	h.at(h.now.Add(time.Second)) // renewed
	if got := last(); got.stint != 1 || !got.until.Equal(h.now.Add(10*time.Second)) {
		t.Fatalf("told %+v after a renewal; want stint 1 to %v", got, h.now.Add(10*time.Second))
	}

	// The lease lapses while the replica still leads: told once.
	h.lead.LeaseUntil = h.now
	h.step()
	h.step()
	n := len(f.told)
	if got := last(); got.stint != 1 || !got.until.IsZero() || f.told[n-2].until.IsZero() {
		t.Fatalf("told %v after the lease lapsed; want one zero time", f.told)
	}

	// Renewed in the same stint, then a follower: the stint ends.
	h.lease(1, 10*time.Second)
	h.step()
	if got := last(); got.stint != 1 || got.until.IsZero() {
		t.Fatalf("told %+v once renewed; want stint 1 with the lease", got)
	}
	h.lead = Leadership{}
	h.step()
	h.step()
	if got, m := last(), len(f.told); got.stint != 1 || !got.until.IsZero() || f.told[m-2].until.IsZero() {
		t.Fatalf("told %v after demotion; want stint 1 ended once", f.told)
	}

	// Promoted again in a later term: stint 2, and so are its requests.
	h.answer(Result{Err: errTimeout}) // stale: stint 1's call
	h.lease(2, 10*time.Second)
	h.at(h.now.Add(time.Second))
	h.settle()
	if len(h.d.pending) != 1 || h.d.pending[0].Op != OpLookup {
		t.Fatalf("pending %+v; want the lookup of a's launch", h.d.pending)
	}
	r = h.d.pending[0]
	if got := last(); got.stint != 2 || r.Stint != 2 || got.until.IsZero() {
		t.Fatalf("told %+v, request in stint %d; want stint 2 for both", got, r.Stint)
	}
	for _, l := range f.told {
		if !l.until.IsZero() && l.until.After(h.now.Add(10*time.Second)) {
			t.Fatalf("told a lease to %v, past any the launcher held", l.until)
		}
	}
}

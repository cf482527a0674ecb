package scalebench

import (
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"paxcron/cron/launcher"
	"paxcron/paxos"
)

// fakeNomad answers the launchers' calls as Nomad would, after Latency, so
// that it is never the bottleneck (the real dev agent cannot make 167
// children a second on a 2-core machine beside three replicas). A dispatch
// makes a child named as Nomad names a dispatch whose ID prefix is the
// identity (<parent>/dispatch-<identity>-<unix>-<8 hex>), so that the
// replicas' packed histories hold what they would in production; a second
// dispatch with the same token gets the same child (Nomad's idempotency). It
// records when each dispatch was submitted and how late that was against the
// launch's scheduled time.
type fakeNomad struct {
	latency time.Duration

	mu       sync.Mutex
	calls    []dispatchCall
	children map[string]string // identity -> child
	repeats  int               // dispatches of a token already dispatched
	others   int               // lookups, running checks, stops
}

type dispatchCall struct {
	at   time.Time     // when Submit ran (real clock: the launchers' too)
	late time.Duration // at minus the launch's scheduled time
}

func newFakeNomad(latency time.Duration) *fakeNomad {
	return &fakeNomad{latency: latency, children: map[string]string{}}
}

type dispatcherFunc func(launcher.Request)

func (f dispatcherFunc) Submit(r launcher.Request) { f(r) }

// dispatcher is node.CronOptions.NewDispatcher: one Nomad for every replica.
func (n *fakeNomad) dispatcher(_ paxos.ReplicaID, done func(launcher.Result)) launcher.Dispatcher {
	return dispatcherFunc(func(req launcher.Request) {
		now := time.Now()
		res := launcher.Result{ID: req.ID}
		n.mu.Lock()
		switch req.Op {
		case launcher.OpDispatch:
			child, ok := n.children[req.Identity]
			if ok {
				n.repeats++
			} else {
				child = childID(req.Spec.NomadJob, req.Identity, now)
				n.children[req.Identity] = child
			}
			n.calls = append(n.calls, dispatchCall{at: now, late: now.Sub(req.ScheduledAt)})
			res.ChildID = child
		case launcher.OpLookup:
			res.ChildID = n.children[req.Identity]
			res.Found = res.ChildID != ""
			n.others++
		default:
			n.others++
		}
		n.mu.Unlock()
		// Submit must not block; the answer comes later, as from a call
		// over HTTP.
		time.AfterFunc(n.latency, func() { done(res) })
	})
}

func childID(parent, identity string, now time.Time) string {
	h := fnv.New32a()
	h.Write([]byte(identity))
	return fmt.Sprintf("%s/dispatch-%s-%d-%08x", parent, identity, now.Unix(), h.Sum32())
}

// dispatchesBetween returns the dispatches submitted in [from, to).
func (n *fakeNomad) dispatchesBetween(from, to time.Time) []dispatchCall {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []dispatchCall
	for _, c := range n.calls {
		if !c.at.Before(from) && c.at.Before(to) {
			out = append(out, c)
		}
	}
	return out
}

func (n *fakeNomad) counts() (dispatches, repeats, others int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.calls), n.repeats, n.others
}

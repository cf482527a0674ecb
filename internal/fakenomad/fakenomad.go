// Package fakenomad owns the in-memory Nomad that the in-process cluster
// tests (internal/node's and internal/localcluster's) give their replicas'
// launchers in place of an agent over HTTP (and internal/server's tests
// theirs): Nomad.Dispatcher is a node.CronOptions.NewDispatcher. It dispatches at most one child per
// idempotency token, as Nomad does, finds a token's child on lookup, and
// records what it was asked, so that a test can check that no launch was
// dispatched twice and which replica dispatched. It has no latency, no
// faults but lost answers (Hold), and no garbage collection: for those,
// sim/simnomad is the simulated Nomad and nomad/nomadtest a real agent.
package fakenomad

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"paxcron/cron/launcher"
	"paxcron/paxos"
)

// Options are how a Nomad answers.
type Options struct {
	// InlineLookups answers lookups, and the calls it refuses, from inside
	// Submit, while dispatches are still answered from a goroutine of
	// their own, so that both ways back to the replica are used. Unset,
	// every answer comes from a goroutine of its own.
	InlineLookups bool
	// MissingJobs are parents Nomad does not know: a dispatch of one is
	// refused (launcher.ErrRejected), as an agent answers 404.
	MissingJobs []string
}

// Nomad is one Nomad shared by every replica's Dispatcher. A dispatch
// makes the child <parent>/dispatch-<identity>, or returns the one its
// token made before; a lookup finds it; OpRunning and OpStop are refused
// (launcher.ErrRejected). No call fails otherwise, so a new leader's
// lookup always finds what the last one dispatched. Its methods are safe
// for concurrent use.
type Nomad struct {
	opts Options

	mu         sync.Mutex
	children   map[string]string // by identity
	dispatches map[string]int    // dispatch calls by identity
	byReplica  map[paxos.ReplicaID]int
	holding    bool
	kept       chan struct{} // closed when an answer is kept while holding
}

// New returns a Nomad with no children.
func New(o Options) *Nomad {
	return &Nomad{opts: o, children: map[string]string{}, dispatches: map[string]int{}, byReplica: map[paxos.ReplicaID]int{}}
}

type submitFunc func(launcher.Request)

func (f submitFunc) Submit(r launcher.Request) { f(r) }

// Dispatcher is replica id's Dispatcher: it calls done with each answer.
func (n *Nomad) Dispatcher(id paxos.ReplicaID, done func(launcher.Result)) launcher.Dispatcher {
	return submitFunc(func(req launcher.Request) {
		n.mu.Lock()
		defer n.mu.Unlock()
		res := launcher.Result{ID: req.ID}
		switch req.Op {
		case launcher.OpDispatch:
			n.dispatches[req.Identity]++
			n.byReplica[id]++
			if slices.Contains(n.opts.MissingJobs, req.Spec.NomadJob) {
				res.Err = fmt.Errorf("%w: job %q not found", launcher.ErrRejected, req.Spec.NomadJob)
				break
			}
			child, ok := n.children[req.Identity]
			if !ok {
				child = req.Spec.NomadJob + "/dispatch-" + req.Identity
				n.children[req.Identity] = child
			}
			res.ChildID = child
			if n.holding {
				if n.kept != nil {
					close(n.kept)
					n.kept = nil
				}
				return
			}
			go done(res)
			return
		case launcher.OpLookup:
			res.ChildID, res.Found = n.children[req.Identity]
		default:
			res.Err = fmt.Errorf("%w: fake Nomad does not do %s", launcher.ErrRejected, req.Op)
		}
		if n.opts.InlineLookups {
			done(res)
		} else {
			go done(res)
		}
	})
}

// HoldUntilKept starts holding answers: dispatches still make their
// children, but their answers are kept and never sent, as after lost
// replies. It returns once an answer was kept, so that a launch is open,
// dispatched, with its answer lost; or with ctx's error.
func (n *Nomad) HoldUntilKept(ctx context.Context) error {
	kept := make(chan struct{})
	n.mu.Lock()
	n.holding = true
	n.kept = kept
	n.mu.Unlock()
	select {
	case <-kept:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release stops holding: later answers are sent again; kept ones never are.
func (n *Nomad) Release() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.holding = false
	n.kept = nil
}

// Children returns the children dispatched, by identity.
func (n *Nomad) Children() map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.children)
}

// Child returns the child identity's dispatch made.
func (n *Nomad) Child(identity string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.children[identity]
	return c, ok
}

// Dispatches returns the dispatch calls made since New or the last
// ForgetDispatches, by identity.
func (n *Nomad) Dispatches() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.dispatches)
}

// ForgetDispatches clears the dispatch calls counted (not the children),
// so that a test can see which launches a later phase dispatched.
func (n *Nomad) ForgetDispatches() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.dispatches)
}

// DispatchedPerJob counts the children of each of jobs.
func (n *Nomad) DispatchedPerJob(jobs []string) map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]int{}
	for id := range n.children {
		for _, j := range jobs {
			if strings.HasPrefix(id, j+"-") {
				out[j]++
			}
		}
	}
	return out
}

// DispatchesFrom counts the dispatch calls replica id made.
func (n *Nomad) DispatchesFrom(id paxos.ReplicaID) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byReplica[id]
}

// Repeated returns the identities dispatched more than once, each as
// "<identity> x<calls>", sorted.
func (n *Nomad) Repeated() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for id, k := range n.dispatches {
		if k > 1 {
			out = append(out, fmt.Sprintf("%s x%d", id, k))
		}
	}
	slices.Sort(out)
	return out
}

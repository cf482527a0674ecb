package launcher

import (
	"errors"
	"fmt"
	"time"

	"paxcron/cron/state"
)

// Op is what a Request asks of Nomad.
type Op uint8

// The operations a Dispatcher performs.
const (
	// OpDispatch dispatches Spec.NomadJob (in Spec.Namespace and
	// Spec.Region) with Spec.Payload and Spec.Meta, with Identity as the
	// idempotency token and in the child's ID prefix. It returns the
	// child's ID. A repeated token returns the child it created before.
	OpDispatch Op = 1
	// OpLookup finds the child dispatched with token Identity: Found and
	// ChildID. Not found is authoritative only for tokens younger than the
	// Dispatcher's memory horizon (Config.MemoryHorizon).
	OpLookup Op = 2
	// OpRunning asks whether child ChildID is still pending or running
	// (Found), for the forbid concurrency policy.
	OpRunning Op = 3
	// OpStop stops child ChildID, for the replace concurrency policy. A
	// child that already ended, or is gone, is stopped.
	OpStop Op = 4
)

func (o Op) String() string {
	switch o {
	case OpDispatch:
		return "dispatch"
	case OpLookup:
		return "lookup"
	case OpRunning:
		return "running"
	case OpStop:
		return "stop"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Request is one call the launcher asks of Nomad.
type Request struct {
	// ID is unique per Launcher and comes back in the Result.
	ID          uint64
	Op          Op
	Job         string
	ScheduledAt time.Time
	// Identity is state.Identity(Job, ScheduledAt): the idempotency token.
	Identity string
	// Spec is the job's spec at the launch's spec version.
	Spec state.JobSpec
	// ChildID is the child OpRunning and OpStop are about.
	ChildID string
	// Deadline is on the launcher's clock (the now it is given): the
	// leader's lease ends then. A call must not start after it, unless
	// the Dispatcher follows the lease as it is renewed (LeaseFollower).
	Deadline time.Time
	// Stint is the launcher's leadership the request was made in: its
	// promotions are counted from 1, and a demotion ends one.
	Stint uint64
}

// Result is the answer to a Request.
type Result struct {
	ID uint64
	// ChildID is the child dispatched (OpDispatch) or found (OpLookup).
	ChildID string
	// Found: OpLookup found the token's child; OpRunning found the child
	// still pending or running.
	Found bool
	// Err is nil on success. An error wrapping ErrRejected says the call
	// had no effect and retrying it cannot help; one wrapping ErrNotSent
	// says it never reached Nomad, so a dispatch is made again after the
	// retry's wait; any other error leaves open whether a dispatch
	// happened (a timeout, a lost reply, a 5xx), and the launcher finds
	// out by OpLookup once the dispatch must have landed (MaxCallLatency).
	Err error
}

// ErrRejected wraps errors for calls Nomad refused without effect: the
// parameterized job does not exist, the payload is refused, a permission
// is missing. Retrying such a call cannot succeed.
var ErrRejected = errors.New("launcher: rejected by Nomad")

// ErrNotSent wraps errors for calls that never reached Nomad, none of
// their attempts: the request's time ran out while it waited for a worker
// or a connection, or no connection could be made. Such a dispatch had no
// effect, and nothing is to be looked up. A Dispatcher must not use it for
// a call any attempt of which may have been sent, however it then failed.
var ErrNotSent = errors.New("launcher: not sent to Nomad")

// Dispatcher makes the launcher's calls to Nomad. Calls are asynchronous,
// so the launcher, like the rest of the replica, never blocks and stays
// deterministic: Submit must not block, and the caller hands each Result
// back, once, through Launcher.Done on the launcher's thread. Results may
// come back in any order; a Result for a request the launcher no longer
// waits for (it lost the lease meanwhile) is ignored.
type Dispatcher interface {
	Submit(Request)
}

// LeaseFollower is a Dispatcher told of the launcher's lease as it is
// renewed: it may start a request's call while the request's Stint goes
// on and its lease holds, past the request's Deadline. A herd's calls
// queue for a Dispatcher's workers and Nomad's connections for longer
// than a lease (0.6-0.8 s): ended at the lease the request was made
// under, a tenth of a herd of 1,000 was sent again after a doubling wait
// (issue 6), while the same replica held the lease in the same term all
// along.
//
// The launcher calls Lease from Step, on its own thread: with its
// current stint and lease end (Leadership.LeaseUntil, on the launcher's
// clock) while it leads and holds the lease, with its stint and a zero
// time once that stint is over or the lease lapsed. Lease must not block
// or call into the launcher.
type LeaseFollower interface {
	Dispatcher
	Lease(stint uint64, until time.Time)
}

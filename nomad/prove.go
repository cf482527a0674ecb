package nomad

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Proving dispatches in batches.
//
// A dispatch reply is not proof that its child exists: concurrent
// dispatches with one token answer the losers with a child Nomad never
// stored (see Dispatch). Every new child a reply names is therefore read
// back. Reading each one back costs Nomad a second HTTP call per child,
// and in a herd the agent's CPU is what bounds the launch rate; so the
// children of concurrent dispatches are read back together, in one call
// to /v1/jobs/statuses with the children's IDs (the request Nomad's UI
// makes for its job list), which answers with those of them that exist.
//
// The batching is a group commit: a worker that needs a proof joins the
// batch of its scope (namespace and region); if no read is under way for
// that scope it runs one for the whole batch, else the batch waits for the
// read in flight to end, and its first member then runs it. No timer, no
// goroutine: batches grow only when Nomad is slow.
//
// Only a child in the answer is proved. One missing from it is not
// concluded absent (the endpoint might lag or page): the dispatch is made
// again with the same token, which returns the token's stored child with
// an empty EvalID (proof enough) or makes it. Any error proves nothing
// either, and the dispatch is retried likewise.

// MaxProofBatch bounds the children read back in one call.
const MaxProofBatch = 256

// statusesPath is Nomad's batch read of jobs by ID.
const statusesPath = "/v1/jobs/statuses"

// proofScope is where children are read back: one call per scope.
type proofScope struct{ namespace, region string }

// proof is one child waiting to be read back.
type proof struct {
	child string
	// wake is signalled once: when the proof is done, or when its caller
	// is to run the batch it heads.
	wake chan struct{}
	// Under prover.mu:
	leads  bool // its caller runs the next batch
	taken  bool // a read for it is under way or done
	done   bool
	exists bool
	err    error
}

// proofQueue is one scope's batch and whether a read runs for it.
type proofQueue struct {
	waiting []*proof
	busy    bool
}

// prover batches read-backs for a Client.
type prover struct {
	read func(ctx context.Context, s proofScope, children []string) (map[string]bool, error)

	mu sync.Mutex
	// queues holds a scope's queue while a read-back there waits or
	// runs: kept once idle, one stayed for every namespace and region
	// ever dispatched to, for the life of the process (found in review).
	queues map[proofScope]*proofQueue
	// Counters, under mu.
	reads, proved uint64
}

func newProver(read func(context.Context, proofScope, []string) (map[string]bool, error)) *prover {
	return &prover{read: read, queues: map[proofScope]*proofQueue{}}
}

// prove reports whether child exists in scope s, reading it back in a
// batch with the children other callers need proved meanwhile. An error
// (ctx's included) proves nothing.
func (p *prover) prove(ctx context.Context, s proofScope, child string) (bool, error) {
	me := &proof{child: child, wake: make(chan struct{}, 1)}
	p.mu.Lock()
	q := p.queues[s]
	if q == nil {
		q = &proofQueue{}
		p.queues[s] = q
	}
	q.waiting = append(q.waiting, me)
	if !q.busy {
		q.busy, me.leads = true, true
	}
	p.mu.Unlock()
	for {
		p.mu.Lock()
		switch {
		case me.done:
			p.mu.Unlock()
			return me.exists, me.err
		case me.leads && !me.taken:
			batch := p.take(q)
			p.mu.Unlock()
			p.run(ctx, s, q, batch)
			continue
		}
		p.mu.Unlock()
		select {
		case <-me.wake:
		case <-ctx.Done():
			if p.abandon(s, q, me) {
				return false, context.Cause(ctx)
			}
			// Already in a read under way: its answer comes soon (that
			// read is bounded by its runner's deadline).
			<-me.wake
		}
	}
}

// take removes the batch from q's head, at most MaxProofBatch. p.mu held.
func (p *prover) take(q *proofQueue) []*proof {
	n := min(len(q.waiting), MaxProofBatch)
	batch := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	for _, b := range batch {
		b.taken = true
	}
	return batch
}

// run reads batch back, answers each member, and hands q to the next
// batch's head, or marks q idle.
func (p *prover) run(ctx context.Context, s proofScope, q *proofQueue, batch []*proof) {
	children := make([]string, len(batch))
	for i, b := range batch {
		children[i] = b.child
	}
	found, err := p.read(ctx, s, children)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	for _, b := range batch {
		b.done, b.err = true, err
		if err == nil {
			b.exists = found[b.child]
			if b.exists {
				p.proved++
			}
		}
		signal(b.wake)
	}
	p.handOff(s, q)
}

// handOff makes the head of q's waiting batch run it, or q idle and
// forgotten (a later proof in scope s makes a new one). p.mu held.
func (p *prover) handOff(s proofScope, q *proofQueue) {
	if len(q.waiting) == 0 {
		q.busy = false
		if p.queues[s] == q {
			delete(p.queues, s)
		}
		return
	}
	head := q.waiting[0]
	head.leads = true
	signal(head.wake)
}

// abandon takes me out of q if no read has it yet, handing the lead on if
// it had it; false means a read has it.
func (p *prover) abandon(s proofScope, q *proofQueue, me *proof) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if me.taken || me.done {
		return false
	}
	for i, w := range q.waiting {
		if w == me {
			q.waiting = append(q.waiting[:i:i], q.waiting[i+1:]...)
			break
		}
	}
	if me.leads {
		p.handOff(s, q)
	}
	return true
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// statusesRequest is the body of a /v1/jobs/statuses call.
type statusesRequest struct {
	Jobs            []statusesID `json:"jobs"`
	IncludeChildren bool         `json:"include_children"`
}

type statusesID struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
}

// statusesJob is what the benchmark reads of each job in the answer.
type statusesJob struct {
	ID        string
	Namespace string
	ParentID  string
}

// readChildren asks Nomad (the leader: not stale) which of children exist
// in scope s, in one call. A child counts only if the answer names it in
// s's namespace with a parent, and that parent is the one its ID is
// derived from.
func (c *Client) readChildren(ctx context.Context, s proofScope, children []string) (map[string]bool, error) {
	subject := fmt.Sprintf("%d children", len(children))
	if len(children) == 0 || len(children) > MaxProofBatch {
		panic(fmt.Sprintf("nomad: reading back %d children at once", len(children)))
	}
	body := statusesRequest{IncludeChildren: true}
	for _, id := range children {
		body.Jobs = append(body.Jobs, statusesID{ID: id, Namespace: s.namespace})
	}
	enc, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(c.base + statusesPath)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %v", ErrConfig, c.cfg.Address, err)
	}
	q := u.Query()
	q.Set("include_children", "true")
	if s.namespace != "" {
		q.Set("namespace", s.namespace)
	}
	if s.region != "" {
		q.Set("region", s.region)
	}
	u.RawQuery = q.Encode()
	cctx, release, err := c.proofSlots.acquire(ctx, "prove", subject)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, u.String(), bytes.NewReader(enc))
	if err != nil {
		release()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.cfg.Token != "" {
		req.Header.Set("X-Nomad-Token", c.cfg.Token)
	}
	resp, err := c.api.Raw().Do(req)
	if err != nil {
		release()
		return nil, &CallError{Op: "prove", Subject: subject, Message: err.Error(), Err: err}
	}
	// A batch of MaxProofBatch jobs with their allocations fits easily.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	release()
	if err != nil {
		return nil, &CallError{Op: "prove", Subject: subject, Status: resp.StatusCode, Message: err.Error(), Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(raw))
		return nil, &CallError{Op: "prove", Subject: subject, Status: resp.StatusCode, Message: msg, Err: errors.New(msg)}
	}
	var jobs []statusesJob
	if err := json.Unmarshal(raw, &jobs); err != nil {
		return nil, &CallError{Op: "prove", Subject: subject, Status: resp.StatusCode, Message: "undecodable answer: " + err.Error(), Err: err}
	}
	asked := make(map[string]bool, len(children))
	for _, id := range children {
		asked[id] = true
	}
	found := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		ns := s.namespace
		if ns == "" {
			ns = "default"
		}
		if asked[j.ID] && j.Namespace == ns && j.ParentID != "" && strings.HasPrefix(j.ID, j.ParentID+"/dispatch-") {
			found[j.ID] = true
		}
	}
	return found, nil
}

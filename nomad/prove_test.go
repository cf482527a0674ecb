package nomad

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"paxcron/cron/state"
)

// batchNomad is a fake Nomad that makes one child per token and answers
// read-backs of children in batches; omit, when set, leaves a child out of
// a read-back's answer (a lagging listing), and failReads answers that
// many read-backs with a 500 first.
type batchNomad struct {
	t  *testing.T
	mu sync.Mutex
	// children by token, and every child made.
	byToken map[string]string
	made    map[string]bool
	// dispatches, reads and the children each read asked for.
	dispatches, reads int
	asked             [][]string
	omit              func(child string, read int) bool
	failReads         int
	readDelay         time.Duration
}

func newBatchNomad(t *testing.T) *batchNomad {
	return &batchNomad{t: t, byToken: map[string]string{}, made: map[string]bool{}}
}

func (n *batchNomad) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case isDispatch(r):
		d := readDispatch(n.t, r)
		parent := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/job/"), "/dispatch")
		n.mu.Lock()
		n.dispatches++
		if child, ok := n.byToken[d.Token]; ok {
			n.mu.Unlock()
			reply(w, 200, map[string]any{"DispatchedJobID": child, "EvalID": ""})
			return
		}
		child := fmt.Sprintf("%s/dispatch-%s-1772330401-%08x", parent, d.IdPrefixTemplate, len(n.made))
		n.byToken[d.Token], n.made[child] = child, true
		n.mu.Unlock()
		reply(w, 200, map[string]any{"DispatchedJobID": child, "EvalID": "e-" + child})
	case isStatuses(r):
		ids := readStatuses(n.t, r)
		time.Sleep(n.readDelay)
		n.mu.Lock()
		n.reads++
		read := n.reads
		n.asked = append(n.asked, ids)
		if n.failReads > 0 {
			n.failReads--
			n.mu.Unlock()
			reply(w, 500, "rpc error: no cluster leader")
			return
		}
		var listed []string
		for _, id := range ids {
			if n.made[id] && (n.omit == nil || !n.omit(id, read)) {
				listed = append(listed, id)
			}
		}
		n.mu.Unlock()
		reply(w, 200, statusesOf("default", listed...))
	default:
		n.t.Errorf("unexpected %s %s", r.Method, r.URL)
		reply(w, 404, "not found")
	}
}

func launchOf(i int) Launch {
	name := fmt.Sprintf("job%03d", i)
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	return Launch{Target: state.Target{NomadJob: "parent" + name}, Job: name, Identity: state.Identity(name, at), ScheduledAt: at}
}

// TestDispatchProofsBatched: concurrent dispatches are read back in
// batches, fewer reads than children, and each gets its own child.
func TestDispatchProofsBatched(t *testing.T) {
	n := newBatchNomad(t)
	n.readDelay = 20 * time.Millisecond
	c := fake(t, n.serve)
	const launches = 48
	got := make([]string, launches)
	var wg sync.WaitGroup
	for i := range launches {
		wg.Go(func() {
			child, err := c.Dispatch(context.Background(), launchOf(i))
			if err != nil {
				t.Errorf("launch %d: %v", i, err)
			}
			got[i] = child
		})
	}
	wg.Wait()
	for i, child := range got {
		if child != n.byToken[launchOf(i).Identity] {
			t.Fatalf("launch %d got %q, want its token's child %q", i, child, n.byToken[launchOf(i).Identity])
		}
	}
	st := c.Stats()
	if st.Proved != launches || st.ProofReads != uint64(n.reads) || n.reads >= launches {
		t.Fatalf("%d reads for %d children; stats %+v", n.reads, launches, st)
	}
	for _, ids := range n.asked {
		if len(ids) == 0 || len(ids) > MaxProofBatch {
			t.Fatalf("a read asked for %d children", len(ids))
		}
	}
	t.Logf("%d children proved in %d reads", launches, n.reads)
}

// TestDispatchLaggingReadBack: a read-back that does not list a child
// just made proves nothing; the dispatch is made again with the same
// token, which answers with the stored child, and no second child is
// made.
func TestDispatchLaggingReadBack(t *testing.T) {
	n := newBatchNomad(t)
	n.omit = func(string, int) bool { return true } // never listed
	c := fake(t, n.serve)
	l := launchOf(1)
	child, err := c.Dispatch(context.Background(), l)
	if err != nil || child != n.byToken[l.Identity] {
		t.Fatalf("Dispatch = %q, %v; want %s", child, err, n.byToken[l.Identity])
	}
	if len(n.made) != 1 || n.dispatches != 2 {
		t.Fatalf("%d children made in %d dispatches; want 1 in 2", len(n.made), n.dispatches)
	}
	if st := c.Stats(); st.Phantoms != 1 || st.RepeatedTokens != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDispatchReadBackFails: a failed read-back leaves the dispatch open;
// it is retried with the same token.
func TestDispatchReadBackFails(t *testing.T) {
	n := newBatchNomad(t)
	n.failReads = 1
	c := fake(t, n.serve)
	l := launchOf(2)
	child, err := c.Dispatch(context.Background(), l)
	if err != nil || child != n.byToken[l.Identity] || len(n.made) != 1 {
		t.Fatalf("Dispatch = %q, %v with %d children made", child, err, len(n.made))
	}
}

// TestReadChildrenChecksAnswer: a child counts only if asked for, in the
// scope's namespace, with the parent its ID names.
func TestReadChildrenChecksAnswer(t *testing.T) {
	const asked = "p/dispatch-a-1772330400-1772330401-00000001"
	c := fake(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, []map[string]any{
			{"ID": asked, "Namespace": "other", "ParentID": "p"},
			{"ID": "p/dispatch-b-1772330400-1772330401-00000002", "Namespace": "default", "ParentID": "p"},
		})
	})
	found, err := c.readChildren(context.Background(), proofScope{}, []string{asked})
	if err != nil || len(found) != 0 {
		t.Fatalf("found %v, %v; want nothing", found, err)
	}
	c = fake(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, []map[string]any{{"ID": asked, "Namespace": "default", "ParentID": "q"}})
	})
	if found, err := c.readChildren(context.Background(), proofScope{}, []string{asked}); err != nil || len(found) != 0 {
		t.Fatalf("a child of another parent: found %v, %v", found, err)
	}
	c = fake(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, statusesOf("default", asked)) })
	if found, err := c.readChildren(context.Background(), proofScope{}, []string{asked}); err != nil || !found[asked] {
		t.Fatalf("found %v, %v; want %s", found, err, asked)
	}
}

// TestProverAbandon: a caller whose context ends while it waits leaves the
// batch; if it was to run the batch, the next one in it does.
func TestProverAbandon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var reads [][]string
		p := newProver(func(_ context.Context, _ proofScope, children []string) (map[string]bool, error) {
			reads = append(reads, children)
			if len(reads) == 1 {
				<-release
			}
			found := map[string]bool{}
			for _, c := range children {
				found[c] = true
			}
			return found, nil
		})
		s := proofScope{}
		type answer struct {
			ok  bool
			err error
		}
		prove := func(ctx context.Context, child string) chan answer {
			out := make(chan answer, 1)
			go func() { ok, err := p.prove(ctx, s, child); out <- answer{ok, err} }()
			synctest.Wait()
			return out
		}
		a := prove(context.Background(), "a") // runs a read, held
		// b heads the next batch and gives up; c, behind it, must run it.
		ctxB, cancelB := context.WithCancel(context.Background())
		b := prove(ctxB, "b")
		c := prove(context.Background(), "c")
		cancelB()
		if r := <-b; r.ok || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("b: %+v, want cancelled", r)
		}
		close(release)
		if r := <-a; !r.ok || r.err != nil {
			t.Fatalf("a: %+v", r)
		}
		if r := <-c; !r.ok || r.err != nil {
			t.Fatalf("c: %+v", r)
		}
		if len(reads) != 2 || len(reads[1]) != 1 || reads[1][0] != "c" {
			t.Fatalf("reads %v, want [[a] [c]]", reads)
		}
		if q := p.queues[s]; q != nil {
			t.Fatalf("queue left (busy %v, %d waiting)", q.busy, len(q.waiting))
		}
	})
}

// TestProverForgetsIdleScopes: a queue is kept per namespace and region
// only while a read-back there waits or runs. Found in review: one was
// kept for every scope ever dispatched to, for the life of the process
// (10,000 here, after jobs in 10,000 namespaces came and went).
func TestProverForgetsIdleScopes(t *testing.T) {
	p := newProver(func(_ context.Context, _ proofScope, children []string) (map[string]bool, error) {
		return map[string]bool{children[0]: true}, nil
	})
	for i := range 10_000 {
		s := proofScope{namespace: fmt.Sprintf("team-%d", i), region: "global"}
		if ok, err := p.prove(context.Background(), s, "c"); !ok || err != nil {
			t.Fatalf("prove in %v: %v, %v", s, ok, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queues) != 0 || p.reads != 10_000 {
		t.Fatalf("%d queues kept after 10,000 scopes were read in, %d reads", len(p.queues), p.reads)
	}
}

package nomadtest

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// The agent a test package shares (Main and Shared).
var shared struct {
	mu     sync.Mutex
	inMain bool
	opts   Options
	agent  *Agent
	err    error
}

// Main runs a test package's tests with one agent for the whole package,
// and returns the exit code for os.Exit. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(nomadtest.Main(m, nomadtest.Options{})) }
//
// The agent starts with opts when a test first calls Shared (none if no test
// does), and Main stops it once the tests are done. If a test failed, Main
// prints the end of the agent's log.
func Main(m *testing.M, opts Options) int {
	shared.mu.Lock()
	shared.inMain = true
	shared.opts = opts
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	defer shared.mu.Unlock()
	if a := shared.agent; a != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "nomad agent %s, end of its log (%s):\n%s\n", a.Addr, a.LogPath, a.LogTail(60))
		}
		if err := a.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "nomadtest: %v\n", err)
		}
	}
	return code
}

// Shared returns the package's agent, starting it on the first call. It
// skips the test when there is no nomad binary and fails it if the agent
// cannot start (every later call fails the same way, without starting
// another). Tests share its state: they use job IDs of their own.
func Shared(tb testing.TB) *Agent {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		tb.Fatal("nomadtest.Shared: the package's TestMain must call nomadtest.Main, which stops the agent after the tests")
	}
	if shared.agent == nil && shared.err == nil {
		shared.agent, shared.err = Launch(shared.opts)
	}
	if errors.Is(shared.err, ErrNoBinary) {
		tb.Skip(shared.err)
	}
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.agent
}

//go:build hoptrace

package hoptrace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With the tag, marks are kept in order and written one a line after the
// process's arguments; none is kept once the trace stopped.
func TestMarksAreWritten(t *testing.T) {
	dir = t.TempDir()
	Mark(ClientCall, 0)
	Mark(TransportSend, Message(5, 2))
	Mark(ClientDone, 7)
	stopped.Store(true)
	Mark(ClientCall, 0)
	if err := dump(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.hops", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], `["`) {
		t.Fatalf("want the arguments and 3 marks, have:\n%s", b)
	}
	for i, want := range []string{" 1 0", fmt.Sprintf(" %d %d", TransportSend, 5<<8|2), fmt.Sprintf(" %d 7", ClientDone)} {
		if !strings.HasSuffix(lines[i+1], want) {
			t.Errorf("mark %d: %q, want it to end %q", i, lines[i+1], want)
		}
	}
}

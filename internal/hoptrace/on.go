//go:build hoptrace

package hoptrace

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Enabled is whether this binary was built with the hoptrace tag.
const Enabled = true

// maxMarks bounds the memory a trace takes (16 bytes a mark).
const maxMarks = 1 << 20

type mark struct {
	at    int64 // Unix nanoseconds
	point Point
	arg   uint32
}

var (
	dir     = os.Getenv("PAXCRON_HOPTRACE")
	marks   []mark
	next    atomic.Int64
	stopped atomic.Bool
	start   sync.Once
)

// Mark records p with its argument, when PAXCRON_HOPTRACE names a folder.
func Mark(p Point, arg uint32) {
	if dir == "" || stopped.Load() {
		return
	}
	start.Do(begin)
	i := next.Add(1) - 1
	if i >= int64(len(marks)) {
		return
	}
	marks[i] = mark{at: time.Now().UnixNano(), point: p, arg: arg}
}

func begin() {
	marks = make([]mark, maxMarks)
	seconds := 14
	if s := os.Getenv("PAXCRON_HOPTRACE_SECONDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			seconds = n
		}
	}
	go func() {
		time.Sleep(time.Duration(seconds) * time.Second)
		stopped.Store(true)
		time.Sleep(100 * time.Millisecond) // marks under way finish
		if err := dump(); err != nil {
			fmt.Fprintf(os.Stderr, "hoptrace: %v\n", err)
		}
	}()
}

// dump writes the marks: a first line with the process's arguments, then
// one "nanoseconds point argument" line a mark.
func dump() error {
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d.hops", os.Getpid())))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "%q\n", os.Args)
	n := min(next.Load(), int64(len(marks)))
	for _, m := range marks[:n] {
		fmt.Fprintf(w, "%d %d %d\n", m.at, m.point, m.arg)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

package main

import (
	"bytes"
	"strings"
	"testing"
)

// Where no Docker engine answers (here: no docker CLI on PATH) the test
// is skipped with exit 0 and says so, unless -require-docker.
func TestSkipsWithoutDocker(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var out, errOut bytes.Buffer
	if code := run([]string{"-duration", "1m", "-dir", t.TempDir()}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "SKIPPED") {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"-duration", "1m", "-require-docker", "-dir", t.TempDir()}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no Docker engine") {
		t.Fatalf("-require-docker: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-duration", "10s"},
		{"-jobs", "2"},
		{"-late", "0s"},
		{"extra"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errOut.String())
		}
	}
}

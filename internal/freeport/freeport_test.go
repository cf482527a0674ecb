package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestPickGivesDistinctFreePortsBelowTheEphemeralRange(t *testing.T) {
	start, ok := ephemeralStart()
	if !ok {
		t.Skip("no ephemeral range to read on this machine")
	}
	ports, err := Pick(40, "127.0.0.1", "127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 40 {
		t.Fatalf("got %d ports, want 40", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
		if p >= start || p < 1024 {
			t.Fatalf("port %d is not below the ephemeral range (from %d)", p, start)
		}
		// Pick let every port go: each binds again, on both addresses.
		if release, ok := hold(p, []string{"127.0.0.1", "127.0.0.2"}); !ok {
			t.Fatalf("port %d is not free after Pick returned", p)
		} else {
			release()
		}
	}
}

func TestHoldRefusesAPortTakenForEitherProtocol(t *testing.T) {
	ports, err := Pick(2)
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(ports[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	for _, p := range ports {
		if release, ok := hold(p, []string{"127.0.0.1"}); ok {
			release()
			t.Fatalf("port %d, taken, was held", p)
		}
	}
	// A refused hold keeps nothing: the UDP side of the TCP-taken port is
	// free again.
	u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(ports[0]))
	if err != nil {
		t.Fatalf("a refused hold kept its UDP bind: %v", err)
	}
	u.Close()
}

func TestWindowFollowsTheKernelsRange(t *testing.T) {
	for _, c := range []struct {
		file            string // "" for no file
		low, high       int
		wantErrContains string
	}{
		{"", defaultLow, defaultHigh, ""},
		{"32768\t60999\n", 20000, 32000, ""},
		{"49152 65535\n", 20000, 32000, ""},
		{"25000 60999\n", 20000, 25000, ""},
		{"20500 60999\n", 1024, 20500, ""},
		{"10000 60999\n", 1024, 10000, ""},
		{"1500 60999\n", 0, 0, "too few ports"},
		{"garbage\n", defaultLow, defaultHigh, ""},
		{"0 0\n", defaultLow, defaultHigh, ""},
	} {
		path := filepath.Join(t.TempDir(), "range")
		if c.file != "" {
			if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		saved := portRangeFile
		portRangeFile = path
		low, high, err := window()
		portRangeFile = saved
		if c.wantErrContains != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErrContains) {
				t.Errorf("%q: err %v, want one saying %q", c.file, err, c.wantErrContains)
			}
			continue
		}
		if err != nil || low != c.low || high != c.high {
			t.Errorf("%q: window %d-%d (%v), want %d-%d", c.file, low, high, err, c.low, c.high)
		}
	}
}

func TestPickRefusesNoPorts(t *testing.T) {
	if _, err := Pick(0); err == nil {
		t.Fatal("Pick(0) gave no error")
	}
}

// Package freeport picks the ports that tests, benchmarks and the demo
// give to the programs they start (replicas, a Nomad agent, etcd).
//
// A port the kernel hands out for ":0" lies in its ephemeral range, and
// between our closing it and the program binding it the kernel may give
// it to any outgoing connection on the machine: a test running beside
// ours, or our own client dialling the cluster. Found in CI, as a replica
// that could not bind its API port. So ports are drawn at random from
// below the ephemeral range, where only another explicit bind can take
// one, and each is checked free for TCP and UDP (gossip and Nomad's serf
// listen on both) on every address asked.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Linux's default ephemeral range starts at 32768; the window below it
// is used when the machine's own range cannot be read.
const (
	defaultLow  = 20000
	defaultHigh = 32000
	// minWindow is the fewest ports worth drawing from at random; a
	// machine whose ephemeral range starts lower than defaultLow+minWindow
	// gets the registered ports from 1024 up to its start.
	minWindow = 1000
	// triesPerPort bounds the draws for each port asked.
	triesPerPort = 200
)

// portRangeFile holds the ephemeral range as "low<tab>high"; a variable
// so that tests can give another.
var portRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Pick returns n distinct ports, each free now for TCP and UDP on every
// address in hosts (127.0.0.1 when none is given), all below the
// kernel's ephemeral range. The ports are held until all n are found, so
// none repeats.
func Pick(n int, hosts ...string) ([]int, error) {
	if n <= 0 {
		return nil, fmt.Errorf("freeport: asked for %d ports", n)
	}
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	low, high, err := window()
	if err != nil {
		return nil, err
	}
	var held []func()
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	picked := make([]int, 0, n)
	seen := map[int]bool{}
	for tries := 0; len(picked) < n; tries++ {
		if tries == triesPerPort*n {
			return nil, fmt.Errorf("freeport: %d of %d ports free in %d-%d after %d tries", len(picked), n, low, high-1, tries)
		}
		p := low + rand.IntN(high-low)
		if seen[p] {
			continue
		}
		seen[p] = true
		release, ok := hold(p, hosts)
		if !ok {
			continue
		}
		held = append(held, release)
		picked = append(picked, p)
	}
	return picked, nil
}

// hold binds port p for TCP and UDP on every host and returns what lets
// them go, or false (with nothing held) if any bind failed.
func hold(p int, hosts []string) (release func(), ok bool) {
	var closers []func() error
	release = func() {
		for _, c := range closers {
			c()
		}
	}
	for _, h := range hosts {
		addr := net.JoinHostPort(h, strconv.Itoa(p))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			release()
			return nil, false
		}
		closers = append(closers, ln.Close)
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			release()
			return nil, false
		}
		closers = append(closers, pc.Close)
	}
	return release, true
}

// window is the range [low, high) ports are drawn from.
func window() (low, high int, err error) {
	start, ok := ephemeralStart()
	if !ok {
		return defaultLow, defaultHigh, nil
	}
	high = min(start, defaultHigh)
	if high-defaultLow >= minWindow {
		return defaultLow, high, nil
	}
	if high-1024 >= minWindow {
		return 1024, high, nil
	}
	return 0, 0, errors.New("freeport: the kernel's ephemeral range starts at " + strconv.Itoa(start) +
		", leaving too few ports below it (" + portRangeFile + ")")
}

// ephemeralStart reads where the kernel's ephemeral range begins.
func ephemeralStart() (int, bool) {
	b, err := os.ReadFile(portRangeFile)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start <= 0 || start > 65535 {
		return 0, false
	}
	return start, true
}

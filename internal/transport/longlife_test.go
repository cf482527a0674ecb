package transport

import (
	"net"
	"runtime"
	"testing"
)

// TestConnectionChurnLeavesNothing: a peer that connects, sends and goes
// away 300 times, and strangers that connect and go away before their
// handshake, leave no connection, goroutine or slot behind.
func TestConnectionChurnLeavesNothing(t *testing.T) {
	n := startAlone(t)
	before := runtime.NumGoroutine()
	for i := range 300 {
		c, err := rawDial(t, n.tr, testKey, 2, 1)
		if err != nil {
			t.Fatal(err)
		}
		writeFrame(t, c, frameOf(t, heartbeat(2, 1, uint64(i+1))))
		c.Close()
		s, err := net.Dial("tcp", n.tr.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	held := func() (conns, handshaking, inbound, slots int) {
		n.tr.mu.Lock()
		defer n.tr.mu.Unlock()
		return len(n.tr.conns), len(n.tr.handshaking), len(n.tr.inbound), len(n.tr.inboundSlots)
	}
	n.rec.waitFor(t, "the connections to be let go", func() bool {
		conns, handshaking, inbound, slots := held()
		return conns+handshaking+inbound+slots == 0 && runtime.NumGoroutine() <= before
	})
	conns, handshaking, inbound, slots := held()
	t.Logf("after 600 connections: %d connections, %d in handshake, %d inbound, %d slots; goroutines %d (before %d)",
		conns, handshaking, inbound, slots, runtime.NumGoroutine(), before)
}

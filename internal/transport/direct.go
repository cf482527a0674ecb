package transport

import "net"

// rawWriter writes to a connection's socket without blocking and without
// going through its net.Conn (which would park the caller while the
// socket is full).
type rawWriter interface {
	// tryWrite writes what the socket takes of b now: n < len(b) with a
	// nil error when it is full.
	tryWrite(b []byte) (n int, err error)
	// close closes the connection (after a write that failed part way).
	close()
}

// directWriter is c's raw writer when c is a plain TCP connection (a
// wrapped one without TLS) on a system that has one; nil otherwise.
func directWriter(c net.Conn) rawWriter {
	w, ok := c.(*wrapped)
	if !ok || w.rw != w.Conn {
		return nil // TLS: its records are written by its own Write
	}
	tc, ok := w.Conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return newRawWriter(rc, c)
}

//go:build unix

package transport

import (
	"errors"
	"io"
	"syscall"
)

type unixRawWriter struct {
	rc   syscall.RawConn
	conn io.Closer
}

func newRawWriter(rc syscall.RawConn, conn io.Closer) rawWriter { return unixRawWriter{rc, conn} }

func (w unixRawWriter) close() { w.conn.Close() }

func (w unixRawWriter) tryWrite(b []byte) (n int, err error) {
	// The runtime keeps the socket non-blocking; returning true from the
	// callback, whatever the write did, keeps RawConn.Write from waiting
	// for the socket to become writable. RawConn.Write refuses to run the
	// callback once the connection's write deadline has passed: the pump
	// clears its deadline after every batch (Transport.write).
	ctlErr := w.rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, werr := syscall.Write(int(fd), b[n:])
			if m > 0 {
				n += m
			}
			switch {
			case werr == syscall.EINTR:
				continue
			case werr == syscall.EAGAIN:
				return true
			case werr != nil:
				err = werr
				return true
			case m <= 0:
				err = errors.New("transport: a write to the socket took nothing")
				return true
			}
		}
		return true
	})
	if err == nil {
		err = ctlErr
	}
	return n, err
}

//go:build !unix

package transport

import (
	"io"
	"syscall"
)

// Without a portable non-blocking write every frame goes through the
// pump.
func newRawWriter(syscall.RawConn, io.Closer) rawWriter { return nil }

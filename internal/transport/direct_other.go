//go:build !unix

package transport

import "syscall"

// Without a portable non-blocking write every frame goes through the
// pump.
func newRawWriter(syscall.RawConn) rawWriter { return nil }

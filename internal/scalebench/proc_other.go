//go:build !linux

package scalebench

import (
	"errors"
	"time"
)

var errNotLinux = errors.New("scalebench: measures only on Linux (/proc, getrusage)")

func isTmpfs(string) (bool, error)       { return false, nil }
func processCPU() (time.Duration, error) { return 0, errNotLinux }
func residentBytes() (uint64, error)     { return 0, errNotLinux }

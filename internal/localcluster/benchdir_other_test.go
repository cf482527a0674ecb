//go:build !linux

package localcluster_test

import "time"

// isTmpfs cannot tell off Linux; b.TempDir is assumed to be on a disk.
func isTmpfs(string) (bool, error) { return false, nil }

// processCPU is not measured off Linux.
func processCPU() time.Duration { return 0 }

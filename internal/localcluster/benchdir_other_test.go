//go:build !linux

package localcluster_test

// isTmpfs cannot tell off Linux; b.TempDir is assumed to be on a disk.
func isTmpfs(string) (bool, error) { return false, nil }

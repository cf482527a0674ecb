//go:build !linux

package nomadtest

func unmountUnder(string) {}

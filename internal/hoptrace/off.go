//go:build !hoptrace

package hoptrace

// Enabled is whether this binary was built with the hoptrace tag.
const Enabled = false

// Mark does nothing without the hoptrace build tag.
func Mark(Point, uint32) {}

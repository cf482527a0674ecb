// Package bad plants every construct detlint forbids (see detlint_test.go).
// Each forbidden line is marked "want"; the test counts them.
package bad

import (
	crand "crypto/rand" // want
	"maps"
	"math/rand/v2"
	"slices"
	"time"
)

var _ = crand.Reader

func bad(m map[int]int, ch chan int) {
	go func() {}() // want
	select {       // want
	case <-ch:
	}
	_ = time.Now()     // want
	time.Sleep(1)      // want
	_ = rand.IntN(3)   // want
	for k := range m { // want
		_ = k
	}
	for k := range maps.Keys(m) { // want
		_ = k
	}
	_ = slices.Collect(maps.Values(m)) // want
}

func allowed(m map[int]int) {
	//detlint:maprange summing is order-free
	for _, v := range m {
		_ = v
	}
	//detlint:maprange summing is order-free
	for _, v := range maps.All(m) {
		_ = v
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		_ = k
	}
	_ = slices.SortedFunc(maps.Values(m), func(a, b int) int { return a - b })
	r := rand.New(rand.NewPCG(1, 2))
	_ = r.IntN(3)
	_ = time.Duration(3) * time.Second
}

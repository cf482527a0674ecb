// Package bad plants every construct detlint forbids (see detlint_test.go).
package bad

import (
	crand "crypto/rand"
	"math/rand/v2"
	"time"
)

var _ = crand.Reader

func bad(m map[int]int, ch chan int) {
	go func() {}()
	select {
	case <-ch:
	}
	_ = time.Now()
	time.Sleep(1)
	_ = rand.IntN(3)
	for k := range m {
		_ = k
	}
	//detlint:maprange summing is order-free
	for _, v := range m {
		_ = v
	}
	r := rand.New(rand.NewPCG(1, 2))
	_ = r.IntN(3)
	_ = time.Duration(3) * time.Second
}

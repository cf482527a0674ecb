package sim

import (
	"testing"
)

func TestSeedsPass(t *testing.T) {
	seeds := uint64(20)
	if testing.Short() {
		seeds = 5
	}
	for seed := range seeds {
		r := Run(DefaultOptions(seed))
		if r.Err != nil {
			t.Fatalf("seed %d: %v\nfaults: %s", seed, r.Err, r.FaultSummary())
		}
		t.Logf("seed %d: acked=%d events=%d faults: %s", seed, r.Acked, r.Events, r.FaultSummary())
	}
}

package sim

import (
	"testing"

	"paxcron/sim/check"
)

// The checker's schedule oracle reads every schedule the simulator gives
// jobs: a new one it cannot read would go unchecked.
func TestOracleReadsEverySimulatedSchedule(t *testing.T) {
	for _, spec := range jobSpecs {
		for _, name := range jobNames {
			if _, err := check.NewOracle(spec.Schedule, name, spec.TimeZone); err != nil {
				t.Errorf("job %s: %v", name, err)
			}
		}
	}
}

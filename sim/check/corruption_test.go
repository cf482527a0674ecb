package check

import "testing"

func TestCorruption(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(c *Corruption) []step
		inv   Invariant
		parts []string
	}{
		{"injected, read, detected", func(c *Corruption) []step {
			return []step{
				func() error { c.CorruptionInjected(2); c.CorruptionInjected(2); return c.Check() },
				func() error { c.CorruptRecordRead(2); c.CorruptRecordRead(2); return c.CorruptionDetected(2) },
				c.Check,
				// injected on 3 but never read: nothing is owed.
				func() error { c.CorruptionInjected(3); return c.Check() },
			}
		}, 0, nil},
		{"read but never detected", func(c *Corruption) []step {
			return []step{
				func() error { c.CorruptionInjected(3); c.CorruptionInjected(2); return nil },
				func() error { c.CorruptRecordRead(3); c.CorruptRecordRead(2); return c.CorruptionDetected(2) },
				c.Check,
			}
		}, InvCorruption, []string{"replica 3", "1 corrupted record", "did not report"}},
		{"false alarm", func(c *Corruption) []step {
			return []step{
				func() error { c.CorruptionInjected(1); return nil },
				func() error { return c.CorruptionDetected(2) },
			}
		}, InvCorruption, []string{"replica 2", "none was injected"}},
		// The corrupted records went with the wiped disk: a report after
		// it, before a new injection, is a false alarm (the books kept
		// the old injection and passed it).
		{"false alarm after a wipe", func(c *Corruption) []step {
			return []step{
				func() error { c.CorruptionInjected(2); c.CorruptRecordRead(2); return c.CorruptionDetected(2) },
				func() error { c.DiskWiped(2); return c.Check() },
				func() error { return c.CorruptionDetected(2) },
			}
		}, InvCorruption, []string{"replica 2", "none was injected"}},
		// A wipe also forgives a corrupt read not yet reported: the
		// replica that read it is gone with its disk.
		{"read, then wiped", func(c *Corruption) []step {
			return []step{
				func() error { c.CorruptionInjected(3); c.CorruptRecordRead(3); return nil },
				func() error { c.DiskWiped(3); return c.Check() },
			}
		}, 0, nil},
		{"corrupt value applied", func(c *Corruption) []step {
			return []step{
				func() error { c.CorruptionInjected(1); c.CorruptRecordRead(1); return c.CorruptionDetected(1) },
				func() error { return c.CorruptValueApplied(1) },
			}
		}, InvCorruption, []string{"replica 1 applied", "corrupted bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runSteps(t, tc.steps(NewCorruption()), tc.inv, tc.parts...)
		})
	}
}

func TestCorruptionStats(t *testing.T) {
	c := NewCorruption()
	c.CorruptionInjected(1)
	c.CorruptRecordRead(1)
	wantOK(t, c.CorruptionDetected(1))
	if got := c.Stats(); got != (CorruptionStats{Injected: 1, Read: 1, Detected: 1}) {
		t.Fatalf("Stats = %+v", got)
	}
}

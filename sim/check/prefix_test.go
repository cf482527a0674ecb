package check

import "testing"

func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(p *Prefix) []step
		inv   Invariant
		parts []string
	}{
		{"in order, crash, restore, re-apply the same", func(p *Prefix) []step {
			return []step{
				func() error { return p.Applied(1, cmd(1, 1, 1, "a")) },
				func() error { return p.Applied(1, cmd(2, 1, 1, "b")) },
				func() error { return p.Applied(1, noop(3, 2, 2)) },
				func() error { p.Crashed(1); return p.Restored(1, 2) },
				func() error { return p.Applied(1, noop(3, 2, 2)) },
				func() error { return p.Applied(1, cmd(4, 2, 2, "c")) },
				// replica 2 installs a snapshot at 3, then goes on.
				func() error { return p.Restored(2, 3) },
				func() error { return p.Applied(2, cmd(4, 2, 2, "c")) },
				// replica 3 restarts with no snapshot and replays from 1.
				func() error { p.Crashed(3); return p.Restored(3, 0) },
				func() error { return p.Applied(3, cmd(1, 1, 1, "a")) },
			}
		}, 0, nil},
		{"gap", func(p *Prefix) []step {
			return []step{
				func() error { return p.Applied(2, cmd(1, 1, 1, "a")) },
				func() error { return p.Applied(2, cmd(3, 1, 1, "c")) },
			}
		}, InvPrefixOrder, []string{"replica 2", "slot 3", "after slot 1", "want slot 2"}},
		{"applied twice", func(p *Prefix) []step {
			return []step{
				func() error { return p.Applied(2, cmd(1, 1, 1, "a")) },
				func() error { return p.Applied(2, cmd(1, 1, 1, "a")) },
			}
		}, InvPrefixOrder, []string{"applied slot 1", "want slot 2"}},
		{"first slot is not 1", func(p *Prefix) []step {
			return []step{func() error { return p.Applied(1, cmd(2, 1, 1, "b")) }}
		}, InvPrefixOrder, []string{"slot 2 ", "want slot 1"}},
		{"re-applied a different value after restart", func(p *Prefix) []step {
			return []step{
				func() error { return p.Applied(1, cmd(1, 1, 1, "a")) },
				func() error { return p.Applied(1, cmd(2, 1, 1, "b")) },
				func() error { p.Crashed(1); return p.Restored(1, 1) },
				func() error { return p.Applied(1, cmd(2, 3, 3, "B")) },
			}
		}, InvAgreement, []string{"replica 1 applied", "slot 2", `"B"`, `"b"`}},
		{"two replicas apply different orders", func(p *Prefix) []step {
			return []step{
				func() error { return p.Applied(1, cmd(1, 1, 1, "a")) },
				func() error { return p.Applied(1, cmd(2, 1, 1, "b")) },
				func() error { return p.Applied(2, cmd(1, 1, 1, "b")) },
			}
		}, InvAgreement, []string{"replica 2 applied", "slot 1"}},
		{"applied while crashed", func(p *Prefix) []step {
			return []step{
				func() error { return p.Applied(1, cmd(1, 1, 1, "a")) },
				func() error { p.Crashed(1); return p.Applied(1, cmd(2, 1, 1, "b")) },
			}
		}, InvPrefixOrder, []string{"replica 1", "while crashed"}},
		{"snapshot of unlearned slots", func(p *Prefix) []step {
			return []step{
				func() error { return p.Applied(1, cmd(1, 1, 1, "a")) },
				func() error { return p.Restored(2, 5) },
			}
		}, InvPrefixOrder, []string{"replica 2", "slot 5", "no replica has learned"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPrefix(NewAgreement())
			runSteps(t, tc.steps(p), tc.inv, tc.parts...)
		})
	}
}

func TestPrefixAppliedIndex(t *testing.T) {
	p := NewPrefix(NewAgreement())
	wantOK(t, p.Applied(1, cmd(1, 1, 1, "a")))
	wantOK(t, p.Applied(1, cmd(2, 1, 1, "b")))
	if got := p.AppliedIndex(1); got != 2 {
		t.Fatalf("AppliedIndex = %d, want 2", got)
	}
	p.Crashed(1)
	wantOK(t, p.Restored(1, 1))
	if got := p.AppliedIndex(1); got != 1 {
		t.Fatalf("AppliedIndex after restore = %d, want 1", got)
	}
}

package node

import (
	"testing"
	"time"

	"paxcron/cron/state"
	"paxcron/internal/hashsm"
)

// fuzzSnapshot is a cron-mode snapshot's data as a replica sends it to a
// peer or backs it up: the hash machine's 16 bytes, then the cron state.
func fuzzSnapshot(tb testing.TB, cmds ...state.Command) []byte {
	tb.Helper()
	h, m := &hashsm.Machine{}, state.New()
	for i, c := range cmds {
		b, err := state.Encode(c)
		if err != nil {
			tb.Fatal(err)
		}
		h.Apply(uint64(i+1), b)
		m.Apply(uint64(i+1), b)
	}
	hb, _ := h.Snapshot()
	sb, err := m.Snapshot()
	if err != nil {
		tb.Fatal(err)
	}
	return append(hb, sb...)
}

// FuzzDescribeSnapshot feeds any bytes as a cron-mode snapshot (from a
// peer, a backup or a file given to `snapshot restore`). No input may
// panic; DescribeSnapshot and RestoreState agree on what decodes; and a
// state that decodes, snapshotted again behind the same hash, is
// described the same; SnapshotTerm, reading the header alone, reads the
// term of every snapshot that decodes.
func FuzzDescribeSnapshot(f *testing.F) {
	at := time.Unix(1772323200, 0).UTC()
	spec := state.JobSpec{Schedule: "*/5 * * * * *", NomadJob: "report", Meta: map[string]string{"team": "a"}}
	full := fuzzSnapshot(f,
		state.PutJob{Name: "a", Spec: spec, At: at},
		state.PutJob{Name: "b", Spec: spec, At: at},
		state.Pause{Name: "b"},
		state.Trigger{Name: "a", At: at.Add(time.Minute)},
		state.Takeover{Term: state.Term{Round: 4, Replica: 2}},
	)
	f.Add(full)
	f.Add(fuzzSnapshot(f))
	f.Add(full[:hashSnapshotBytes])
	f.Add(full[:len(full)-1])
	f.Add(append(full, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		sum, err := DescribeSnapshot(data)
		m, rerr := RestoreState(data)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("DescribeSnapshot: %v; RestoreState: %v", err, rerr)
		}
		if err != nil {
			return
		}
		if term, err := SnapshotTerm(data); err != nil || term != m.Term() || sum.Term != term {
			t.Fatalf("SnapshotTerm: %v, %v; the state's term is %v, the summary's %v", term, err, m.Term(), sum.Term)
		}
		if sum.Jobs != m.JobCount() || sum.Open != m.OpenCount() || sum.LastSlot != m.LastSlot() {
			t.Fatalf("summary %+v of a state with %d jobs, %d open, last slot %d", sum, m.JobCount(), m.OpenCount(), m.LastSlot())
		}
		again, err := m.Snapshot()
		if err != nil {
			t.Fatalf("a restored state does not snapshot: %v", err)
		}
		sum2, err := DescribeSnapshot(append(data[:hashSnapshotBytes:hashSnapshotBytes], again...))
		if err != nil || sum2 != sum {
			t.Fatalf("snapshotted again: %+v, %v; want %+v", sum2, err, sum)
		}
	})
}

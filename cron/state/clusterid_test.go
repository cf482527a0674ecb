package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

var (
	idA = ClusterID{0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	idB = ClusterID{0xb2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
)

// TestFirstClusterIDWins: the first SetClusterID applied names the
// cluster; the same ID again is a duplicate and another is stale, and
// neither changes it or counts as a rejection.
func TestFirstClusterIDWins(t *testing.T) {
	m := New()
	if !m.ClusterID().IsZero() {
		t.Fatalf("a new state is named %s", m.ClusterID())
	}
	if err := m.ApplyCommand(1, SetClusterID{ID: idA}); err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyCommand(2, SetClusterID{ID: idA}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the same ID again: %v, want ErrDuplicate", err)
	}
	if err := m.ApplyCommand(3, SetClusterID{ID: idB}); !errors.Is(err, ErrStale) {
		t.Fatalf("another ID: %v, want ErrStale", err)
	}
	if err := m.ApplyCommand(4, SetClusterID{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("the zero ID: %v, want ErrInvalid", err)
	}
	if m.ClusterID() != idA {
		t.Fatalf("named %s, want the first applied, %s", m.ClusterID(), idA)
	}
	if st := m.Stats(); st.Applied != 1 || st.Stale != 1 || st.Rejected != 1 {
		t.Fatalf("stats %+v: want 1 applied, 1 stale, 1 rejected (the zero ID)", st)
	}
}

// TestClusterIDInSnapshots: the ID survives a snapshot and its restore,
// and SnapshotTerm still reads the header.
func TestClusterIDInSnapshots(t *testing.T) {
	m := run(t, []step{{put("j", "0 * * * *", 0, t0), nil}, {SetClusterID{ID: idA}, nil}, {Takeover{Term: Term{Round: 2, Replica: 1}}, nil}})
	data := snapshot(t, m)
	r := New()
	if err := r.Restore(data); err != nil {
		t.Fatal(err)
	}
	if r.ClusterID() != idA {
		t.Fatalf("restored ID %s, want %s", r.ClusterID(), idA)
	}
	if !bytes.Equal(snapshot(t, r), data) {
		t.Fatal("a restored named state snapshots to other bytes")
	}
	if term, err := SnapshotTerm(data); err != nil || term != (Term{Round: 2, Replica: 1}) {
		t.Fatalf("SnapshotTerm: %v, %v", term, err)
	}
	// Unnamed: the header carries no bytes for it.
	empty := snapshot(t, New())
	if r := New(); r.Restore(empty) != nil || !r.ClusterID().IsZero() {
		t.Fatalf("an unnamed state restored named %s", r.ClusterID())
	}
}

// TestRestoreVersion5: a version 5 snapshot (written by the code before
// the cluster ID, at 32c2f53, of buildContentFixture) restores unnamed,
// to the state the fixture builds now; written again it is version 6 and
// round-trips.
func TestRestoreVersion5(t *testing.T) {
	data, err := os.ReadFile("testdata/snapshot-v5.bin")
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	if err := m.Restore(data); err != nil {
		t.Fatalf("restoring version 5: %v", err)
	}
	if !m.ClusterID().IsZero() {
		t.Fatalf("a version 5 snapshot restored named %s", m.ClusterID())
	}
	if got, want := restoredView(m), restoredView(buildContentFixture(t)); !reflect.DeepEqual(got, want) {
		t.Fatalf("version 5 restored to\n%+v\nthe fixture is\n%+v", got, want)
	}
	again := snapshot(t, m)
	if again[0] != snapshotVersion || snapshotVersion != 6 {
		t.Fatalf("written again as version %d", again[0])
	}
	back := New()
	if err := back.Restore(again); err != nil || !reflect.DeepEqual(restoredView(back), restoredView(m)) {
		t.Fatalf("version 6 round trip of a version 5 snapshot: %v", err)
	}
}

// TestSnapshotClusterIDIsStrict: a header's cluster ID is none or
// exactly ClusterIDBytes not all zero, and a version 5 header has none.
func TestSnapshotClusterIDIsStrict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version byte
		id      []byte
		ok      bool
	}{
		{"none", 6, nil, true},
		{"named", 6, idA[:], true},
		{"short", 6, idA[:15], false},
		{"long", 6, append(idA[:], 0), false},
		{"zeros", 6, make([]byte, ClusterIDBytes), false},
		{"in version 5", 5, idA[:], false},
		{"empty in version 5", 5, []byte{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := wireHeader{ClusterID: tc.id}
			var body []byte
			if err := codec.NewEncoderBytes(&body, msgpackHandle).Encode(&h); err != nil {
				t.Fatal(err)
			}
			data := append([]byte{tc.version}, body...)
			if data, err := appendValue(data, &wireTrailer{}); err != nil {
				t.Fatal(err)
			} else {
				_, err = DecodeSnapshot(data)
				if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrSnapshot) {
					t.Fatalf("DecodeSnapshot: %v, want ok=%t", err, tc.ok)
				}
			}
		})
	}
}

// TestSetClusterIDEncoding: the command carries exactly the ID's bytes;
// the zero ID, a short or long one and all zeros are refused.
func TestSetClusterIDEncoding(t *testing.T) {
	b, err := Encode(SetClusterID{ID: idA})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Decode(b); err != nil || c != (SetClusterID{ID: idA}) {
		t.Fatalf("Decode: %#v, %v", c, err)
	}
	if _, err := Encode(SetClusterID{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Encode of the zero ID: %v", err)
	}
	for _, id := range [][]byte{nil, idA[:15], append(idA[:], 1), make([]byte, ClusterIDBytes)} {
		bad, err := appendValue([]byte{commandVersion, byte(KindSetClusterID)}, &wireSetClusterID{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if c, err := Decode(bad); err == nil {
			t.Errorf("decoded %x as %#v", id, c)
		}
	}
}

func TestParseClusterID(t *testing.T) {
	if id, err := ParseClusterID(idA.String()); err != nil || id != idA {
		t.Fatalf("ParseClusterID(%q): %s, %v", idA.String(), id, err)
	}
	if id, err := ParseClusterID(""); err != nil || !id.IsZero() || id.String() != "" {
		t.Fatalf(`ParseClusterID(""): %s, %v`, id, err)
	}
	b, err := json.Marshal(struct{ ID, Unset ClusterID }{ID: idA})
	if want := `{"ID":"` + idA.String() + `","Unset":""}`; err != nil || string(b) != want {
		t.Fatalf("JSON %s, %v; want %s", b, err, want)
	}
	var back struct{ ID, Unset ClusterID }
	if err := json.Unmarshal(b, &back); err != nil || back.ID != idA || !back.Unset.IsZero() {
		t.Fatalf("JSON read back %+v, %v", back, err)
	}
	for _, bad := range []string{"a1", idA.String() + "00", "zz" + idA.String()[2:]} {
		if _, err := ParseClusterID(bad); err == nil {
			t.Errorf("ParseClusterID(%q) succeeded", bad)
		}
	}
}

// TestSnapshotClusterID: the cluster ID read from a snapshot's header
// alone is the state's, zero before it is named, and a header that does
// not decode is an error.
func TestSnapshotClusterID(t *testing.T) {
	m := New()
	unnamed, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := SnapshotClusterID(unnamed); err != nil || !got.IsZero() {
		t.Errorf("SnapshotClusterID of an unnamed state: %v, %v", got, err)
	}
	if err := m.ApplyCommand(1, SetClusterID{ID: idA}); err != nil {
		t.Fatal(err)
	}
	named, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := SnapshotClusterID(named); err != nil || got != idA {
		t.Errorf("SnapshotClusterID: %v, %v; want %v", got, err, idA)
	}
	for _, bad := range [][]byte{nil, {9}, {snapshotVersion}, named[:3]} {
		if _, err := SnapshotClusterID(bad); !errors.Is(err, ErrSnapshot) {
			t.Errorf("SnapshotClusterID(%x): %v, want ErrSnapshot", bad, err)
		}
	}
}

// SnapshotWithClusterID: the same state, every part of it, under
// another ID, or none (then named by the next SetClusterID, as a new
// cluster's first leader names it). A snapshot that does not decode is
// refused, not passed on.
func TestSnapshotWithClusterID(t *testing.T) {
	m := run(t, []step{{put("j", "0 * * * *", 0, t0), nil}, {SetClusterID{ID: idA}, nil}, {Takeover{Term: Term{Round: 2, Replica: 1}}, nil}})
	data := snapshot(t, m)
	for _, id := range []ClusterID{idB, {}} {
		renamed, err := SnapshotWithClusterID(data, id)
		if err != nil {
			t.Fatal(err)
		}
		r := New()
		if err := r.Restore(renamed); err != nil {
			t.Fatal(err)
		}
		if r.ClusterID() != id {
			t.Fatalf("renamed %q, the state is named %q", id, r.ClusterID())
		}
		if !reflect.DeepEqual(restoredView(r), restoredView(m)) || r.Term() != m.Term() || r.LastSlot() != m.LastSlot() {
			t.Fatalf("renamed %q, the state changed:\n%+v\nwas\n%+v", id, restoredView(r), restoredView(m))
		}
	}
	unnamed, err := SnapshotWithClusterID(data, ClusterID{})
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.Restore(unnamed); err != nil {
		t.Fatal(err)
	}
	if err := r.ApplyCommand(r.LastSlot()+1, SetClusterID{ID: idB}); err != nil || r.ClusterID() != idB {
		t.Fatalf("naming the unnamed state: %v, named %s", err, r.ClusterID())
	}
	if back, err := SnapshotWithClusterID(unnamed, idA); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("named back, the snapshot is not the bytes it was (%v)", err)
	}
	if _, err := SnapshotWithClusterID(data[:len(data)/2], idB); err == nil {
		t.Fatal("a truncated snapshot was re-encoded")
	}
}

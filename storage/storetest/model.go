package storetest

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"

	"paxcron/paxos"
	"paxcron/storage"
)

// State is everything a store holds, as its read side reports it.
type State struct {
	HardState paxos.HardState
	Snapshot  paxos.Snapshot
	// Entries are every held entry, in slot order: the log's tail at or
	// below the snapshot index, then the log above it.
	Entries   []paxos.Entry
	FirstSlot uint64
	LastSlot  uint64
}

// Equal reports whether s and o hold the same state, counting nil and
// empty byte slices alike.
func (s State) Equal(o State) bool {
	return reflect.DeepEqual(s.canonical(), o.canonical())
}

func (s State) canonical() State {
	s.Snapshot.Data = nilIfEmpty(s.Snapshot.Data)
	if len(s.Snapshot.Meta.Membership.Voters) == 0 {
		s.Snapshot.Meta.Membership.Voters = nil
	}
	es := make([]paxos.Entry, len(s.Entries))
	for i, e := range s.Entries {
		e.Data = nilIfEmpty(e.Data)
		es[i] = e
	}
	if len(es) == 0 {
		es = nil
	}
	s.Entries = es
	return s
}

func (s State) String() string {
	slots := make([]uint64, len(s.Entries))
	for i, e := range s.Entries {
		slots[i] = e.Slot
	}
	return fmt.Sprintf("{hs=%+v snap=%d(%d bytes) first=%d last=%d slots=%v}",
		s.HardState, s.Snapshot.Meta.Index, len(s.Snapshot.Data), s.FirstSlot, s.LastSlot, slots)
}

// ReadState reads the whole state of s through its read side, checking that
// InitialState and Snapshot agree.
func ReadState(s storage.Store) (State, error) {
	hs, meta, err := s.InitialState()
	if err != nil {
		return State{}, fmt.Errorf("storetest: InitialState: %w", err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		return State{}, fmt.Errorf("storetest: Snapshot: %w", err)
	}
	if !reflect.DeepEqual(meta, snap.Meta) {
		return State{}, fmt.Errorf("storetest: InitialState meta %+v differs from Snapshot meta %+v", meta, snap.Meta)
	}
	last, err := s.LastSlot()
	if err != nil {
		return State{}, fmt.Errorf("storetest: LastSlot: %w", err)
	}
	first, err := s.FirstSlot()
	if err != nil {
		return State{}, fmt.Errorf("storetest: FirstSlot: %w", err)
	}
	if _, err := s.Entries(first-1, math.MaxUint64, math.MaxUint64); err != paxos.ErrCompacted {
		return State{}, fmt.Errorf("storetest: Entries below FirstSlot %d = %v, want paxos.ErrCompacted", first, err)
	}
	es, err := s.Entries(first, math.MaxUint64, math.MaxUint64)
	if err != nil {
		return State{}, fmt.Errorf("storetest: Entries: %w", err)
	}
	return State{HardState: hs, Snapshot: snap, Entries: es, FirstSlot: first, LastSlot: last}, nil
}

// Model is the reference the stores are checked against: the Store
// contract written as plainly as possible, on a map. It shares no code with
// the stores, so that a misreading in their shared helpers shows up here.
type Model struct {
	hardState paxos.HardState
	snapshot  paxos.Snapshot
	entries   map[uint64]paxos.Entry
}

// NewModel returns the model of an empty store.
func NewModel() *Model { return &Model{entries: make(map[uint64]paxos.Entry)} }

// Clone returns an independent copy of m.
func (m *Model) Clone() *Model {
	return &Model{hardState: m.hardState, snapshot: m.snapshot, entries: maps.Clone(m.entries)}
}

// Save applies u as Store.Save must.
func (m *Model) Save(u storage.Update) error {
	if u.Snapshot != nil && u.Snapshot.Meta.Index < m.snapshot.Meta.Index {
		return storage.ErrInvalid
	}
	if u.Snapshot == nil && u.TailSlots != 0 {
		return storage.ErrInvalid
	}
	for _, e := range u.Entries {
		if e.Slot == 0 {
			return storage.ErrInvalid
		}
	}
	if u.HardState != nil {
		m.hardState = *u.HardState
	}
	// Entries at or below this slot are not written: the stored snapshot
	// covers them, or this update's snapshot deletes them.
	floor := m.snapshot.Meta.Index
	if u.Snapshot != nil {
		m.snapshot = cloneSnapshot(*u.Snapshot)
		deleted := uint64(0)
		if index := m.snapshot.Meta.Index; index > u.TailSlots {
			deleted = index - u.TailSlots
		}
		m.deleteThrough(deleted)
		floor = max(floor, deleted)
	}
	for _, e := range u.Entries {
		if e.Slot > floor {
			e.Data = bytes.Clone(nilIfEmpty(e.Data))
			m.entries[e.Slot] = e
		}
	}
	return nil
}

func (m *Model) deleteThrough(upTo uint64) {
	maps.DeleteFunc(m.entries, func(slot uint64, _ paxos.Entry) bool { return slot <= upTo })
}

// SnapIndex returns the index of the stored snapshot (0 if none).
func (m *Model) SnapIndex() uint64 { return m.snapshot.Meta.Index }

// State returns what a store in m's state must report. FirstSlot is the
// lowest held slot if it lies at or below the snapshot index (the tail),
// else the snapshot index + 1.
func (m *Model) State() State {
	index := m.snapshot.Meta.Index
	st := State{HardState: m.hardState, Snapshot: cloneSnapshot(m.snapshot), FirstSlot: index + 1, LastSlot: index}
	for i, slot := range slices.Sorted(maps.Keys(m.entries)) {
		if i == 0 && slot <= index {
			st.FirstSlot = slot
		}
		st.Entries = append(st.Entries, m.entries[slot])
		st.LastSlot = max(st.LastSlot, slot)
	}
	return st
}

func cloneSnapshot(s paxos.Snapshot) paxos.Snapshot {
	s.Data = bytes.Clone(nilIfEmpty(s.Data))
	s.Meta.Membership.Voters = slices.Clone(s.Meta.Membership.Voters)
	if len(s.Meta.Membership.Voters) == 0 {
		s.Meta.Membership.Voters = nil
	}
	return s
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// RandomUpdate draws an update for a store in m's state: hard states,
// runs of entries with gaps and overwrites over a small slot space, and now
// and then a snapshot (sometimes with entries in the same update, some of
// them at or below its index), half of them keeping a tail.
func RandomUpdate(r *rand.Rand, m *Model) storage.Update {
	var u storage.Update
	if r.IntN(2) == 0 {
		u.HardState = &paxos.HardState{
			Promised: paxos.Ballot{Round: r.Uint64N(100), Replica: paxos.ReplicaID(1 + r.IntN(5))},
			Chosen:   r.Uint64N(200),
		}
	}
	last := m.State().LastSlot
	if r.IntN(8) == 0 {
		index := m.SnapIndex() + r.Uint64N(last-m.SnapIndex()+8)
		u.Snapshot = &paxos.Snapshot{
			Meta: paxos.SnapshotMeta{Index: index, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}},
			Data: randomBytes(r, r.IntN(200)),
		}
		if r.IntN(2) == 0 {
			u.TailSlots = r.Uint64N(index + 2)
		}
	}
	for range r.IntN(12) {
		// Mostly just past the end, sometimes an overwrite, a gap, or a
		// slot the snapshot already covers.
		low := max(m.SnapIndex(), last, 8) - 8
		slot := 1 + low + r.Uint64N(16)
		u.Entries = append(u.Entries, RandomEntry(r, slot))
	}
	return u
}

// RandomEntry draws an entry for slot.
func RandomEntry(r *rand.Rand, slot uint64) paxos.Entry {
	e := paxos.Entry{
		Slot:   slot,
		Ballot: paxos.Ballot{Round: r.Uint64N(50), Replica: paxos.ReplicaID(1 + r.IntN(5))},
		Kind:   paxos.EntryCommand,
		Data:   randomBytes(r, r.IntN(64)),
	}
	if r.IntN(8) == 0 {
		e.Kind, e.Data = paxos.EntryNoop, nil
	}
	return e
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

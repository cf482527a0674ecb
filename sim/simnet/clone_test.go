package simnet

import (
	"reflect"
	"slices"
	"testing"

	"paxcron/paxos"
)

func fullMessage() paxos.Message {
	return paxos.Message{
		Type: paxos.MsgAccept, From: 1, To: 2, Ballot: paxos.Ballot{Round: 3, Replica: 1},
		Entries: []paxos.Entry{
			{Slot: 5, Kind: paxos.EntryCommand, Data: []byte("abc")},
			{Slot: 6, Kind: paxos.EntryNoop},
			{Slot: 7, Kind: paxos.EntryCommand, Data: []byte{}},
			{Slot: 8, Kind: paxos.EntryCommand, Data: []byte("xyz")},
		},
		Snapshot: &paxos.Snapshot{
			Meta: paxos.SnapshotMeta{Index: 4, Membership: paxos.Membership{Voters: []paxos.ReplicaID{1, 2, 3}}},
			Data: []byte("state"),
		},
	}
}

func TestCloneSharesNoMemory(t *testing.T) {
	orig := fullMessage()
	want := fullMessage()
	c := CloneMessage(orig)
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("clone differs:\n%+v\n%+v", c, want)
	}
	if c.Entries[1].Data != nil || c.Entries[2].Data == nil {
		t.Fatal("clone does not keep nil and empty Data apart")
	}
	// The receiver scribbles on its copy, appending included...
	c.Entries[0].Data[0] = 'X'
	c.Entries[0].Data = append(c.Entries[0].Data, "more"...)
	c.Entries[3].Slot = 99
	c.Snapshot.Data[0] = 'X'
	c.Snapshot.Meta.Membership.Voters[0] = 9
	// ... and the sender reuses its buffers.
	copy(orig.Entries[3].Data, "zzz")
	if !reflect.DeepEqual(fullMessage(), want) || string(c.Entries[3].Data) != "xyz" {
		t.Fatal("clone and original share memory")
	}
	if want := fullMessage(); !slices.Equal(orig.Entries[0].Data, want.Entries[0].Data) {
		t.Fatal("receiver's writes reached the sender")
	}
}

func TestDeliveredMessageIsACopy(t *testing.T) {
	h := newHarness(t, 1, perfectConfig())
	m := fullMessage()
	h.net.Send(m)
	m.Entries[0].Data[0] = 'X' // sender reuses its buffer before delivery
	h.drain()
	if got := string(h.got[0].msg.Entries[0].Data); got != "abc" {
		t.Fatalf("delivered data %q, want abc", got)
	}
}

// TestCloneCoversEveryReference fails when paxos.Message grows a field that
// holds memory (slice, map, pointer) that CloneMessage does not know about,
// so that a new field cannot silently alias between replicas.
func TestCloneCoversEveryReference(t *testing.T) {
	var got []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		switch typ.Kind() {
		case reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				walk(prefix+"."+f.Name, f.Type)
			}
		case reflect.Slice, reflect.Pointer, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func:
			got = append(got, prefix)
			if typ.Kind() == reflect.Slice || typ.Kind() == reflect.Pointer {
				walk(prefix+"[]", typ.Elem())
			}
		}
	}
	walk("Message", reflect.TypeFor[paxos.Message]())
	want := []string{
		"Message.Entries",
		"Message.Entries[].Data",
		"Message.Snapshot",
		"Message.Snapshot[].Meta.Membership.Voters",
		"Message.Snapshot[].Data",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paxos.Message reference fields are %v; CloneMessage handles %v: update it", got, want)
	}
}

package api

import (
	"strings"
	"testing"
)

// TestUTCIsTheDefaultZone: a job sent with time_zone "UTC" is the job sent
// without one, as in a cron file, so that writing it both ways changes
// nothing. Found in review: the JSON form kept "UTC", a new version.
func TestUTCIsTheDefaultZone(t *testing.T) {
	with, err := Spec{Schedule: "@daily", TimeZone: "UTC", NomadJob: "p"}.JobSpec()
	if err != nil {
		t.Fatal(err)
	}
	without, err := Spec{Schedule: "@daily", NomadJob: "p"}.JobSpec()
	if err != nil {
		t.Fatal(err)
	}
	if with.TimeZone != "" || !with.Same(without) {
		t.Fatalf("with UTC %+v, without %+v: want the same spec", with, without)
	}
	if berlin, err := (Spec{Schedule: "@daily", TimeZone: "Europe/Berlin", NomadJob: "p"}).JobSpec(); err != nil || berlin.TimeZone != "Europe/Berlin" {
		t.Fatalf("another zone: %+v, %v", berlin, err)
	}
}

// TestReservedMetaKeysAreRefused: a job write in JSON or msgpack whose
// meta uses paxcron's prefix is refused, as a cron file's is. It was
// accepted (the state does not look, and Nomad's check passes a parent
// that lists paxcron's keys), and then every launch failed: the
// dispatcher refuses to send a job's own paxcron_ key.
func TestReservedMetaKeysAreRefused(t *testing.T) {
	for _, k := range []string{"paxcron_job", "paxcron_identity", "paxcron_mine"} {
		_, err := Spec{Schedule: "@daily", NomadJob: "p", Meta: map[string]string{"team": "a", k: "x"}}.JobSpec()
		if err == nil || !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("meta key %q: %v; want an error naming it as reserved", k, err)
		}
	}
	if _, err := (Spec{Schedule: "@daily", NomadJob: "p", Meta: map[string]string{"Paxcron": "x", "my_paxcron_job": "y"}}).JobSpec(); err != nil {
		t.Errorf("keys that only contain paxcron: %v", err)
	}
}

package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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

// A catch-up window under a second skips nearly every launch (they start
// milliseconds late, seconds after a failover), and a JSON number is
// nanoseconds: "catchup_window": 300 asked for 300ns and was written.
func TestCatchupWindowUnderASecondIsRefused(t *testing.T) {
	var s Spec
	if err := json.Unmarshal([]byte(`{"schedule":"@daily","nomad_job":"p","catchup_window":300}`), &s); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobSpec(); err == nil || !strings.Contains(err.Error(), "300ns") || !strings.Contains(err.Error(), "nanoseconds") {
		t.Errorf("catchup_window 300 (ns): %v; want an error naming 300ns and how a number is read", err)
	}
	for _, w := range []time.Duration{0, time.Second, 10 * time.Minute} {
		if _, err := (Spec{Schedule: "@daily", NomadJob: "p", CatchupWindow: Duration(w)}).JobSpec(); err != nil {
			t.Errorf("catchup_window %v: %v", w, err)
		}
	}
}

// A job's namespace "*" (Nomad's wildcard for listings) would have every
// dispatch refused: it is refused when written.
func TestWildcardNamespaceIsRefused(t *testing.T) {
	_, err := Spec{Schedule: "@daily", NomadJob: "p", Namespace: "*"}.JobSpec()
	if err == nil || !strings.Contains(err.Error(), "wildcard") {
		t.Errorf("namespace *: %v; want an error naming the wildcard", err)
	}
}

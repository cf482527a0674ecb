package api

import "testing"

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

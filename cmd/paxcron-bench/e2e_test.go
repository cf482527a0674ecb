package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestEtcdSuiteOneTinyRepetition runs the whole suite once, tiny: a real
// three-member etcd, three `paxcron server` processes and the in-process
// log, two clients each for under a second, and checks that every system
// acknowledged writes without an error and that the report was written.
// It skips when etcd is not on PATH and cannot be installed.
func TestEtcdSuiteOneTinyRepetition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and paxcron processes: not in -short")
	}
	etcd, err := findEtcd("", filepath.Join("..", "..", "tools", "etcd", "install"), t.Logf)
	if err != nil {
		t.Skipf("no etcd to compare with (tools/etcd/install installs Debian's etcd-server as root): %v", err)
	}
	out := t.TempDir()
	cfg := etcdConfig{
		Reps: 1, Clients: []int{2}, Systems: allSystems, Warmup: 200 * time.Millisecond, Window: 700 * time.Millisecond,
		APITarget: targetClient, OutDir: out, DataDir: t.TempDir(), EtcdBin: etcd, // make bench's default
		// The test checks the harness, not the machine: never wait, never
		// redo.
		QuietCores: 1e9, QuietWait: time.Second, MaxOthersCores: 1e9,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := etcdSuite(ctx, cfg, []string{"(test)"}, t.Logf); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "etcd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct{ Runs []runRecord }
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rep.Runs {
		seen[r.System] = true
		if !r.Kept || r.Writes == 0 || r.Errors != 0 || r.P99Ms <= 0 {
			t.Errorf("%s: %+v", r.System, r)
		}
		if r.InProcess != (r.System == sysPaxcronLog) || r.ServerCPUSec <= 0 {
			t.Errorf("%s: CPU accounting %+v", r.System, r)
		}
	}
	if len(seen) != len(allSystems) {
		t.Errorf("systems run: %v", seen)
	}
	for _, f := range []string{"etcd.md", "etcd-throughput.png", "etcd-p99.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}

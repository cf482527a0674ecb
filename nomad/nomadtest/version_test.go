package nomadtest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckVersionOutput(t *testing.T) {
	for _, tc := range []struct {
		out, version string
		ok           bool
	}{
		{"Nomad v1.11.3\nBuildDate 2026-02-10T12:00:00Z\nRevision 1a2b3c\n", "1.11.3", true},
		{"Nomad v1.11.2\n", "1.11.2", true},
		{"Nomad v1.12.0-dev\n", "1.12.0-dev", true},
		{"Nomad v2.0.0-beta.1+ent\n", "2.0.0-beta.1+ent", true},
		{"Nomad v1.11.1\n", "1.11.1", false},
		{"Nomad v1.11.2-dev\n", "1.11.2-dev", false},
		{"Nomad v1.10.9\n", "1.10.9", false},
		{"Nomad v0.12.0\n", "0.12.0", false},
		{"nomad: command not found\n", "", false},
	} {
		version, err := checkVersionOutput(tc.out)
		if version != tc.version || (err == nil) != tc.ok {
			t.Errorf("%q: %q, %v; want %q, ok %v", tc.out, version, err, tc.version, tc.ok)
		}
		if err != nil && tc.version != "" && !strings.Contains(err.Error(), "older than 1.11.2") {
			t.Errorf("%q: the error does not say why: %v", tc.out, err)
		}
	}
}

func TestBinary(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "nomad")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho Nomad v1.11.3\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	t.Setenv("NOMAD_BIN", fake)
	if got, err := Binary(); got != fake || err != nil {
		t.Errorf("NOMAD_BIN set: %q, %v; want %q", got, err, fake)
	}
	t.Setenv("NOMAD_BIN", filepath.Join(dir, "missing"))
	if _, err := Binary(); err == nil || errors.Is(err, ErrNoBinary) {
		t.Errorf("NOMAD_BIN names no file: %v; want an error that is not ErrNoBinary (a failure, not a skip)", err)
	}

	t.Setenv("NOMAD_BIN", "")
	t.Setenv("PATH", dir)
	if got, err := Binary(); got != fake || err != nil {
		t.Errorf("nomad on PATH: %q, %v; want %q", got, err, fake)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Binary(); !errors.Is(err, ErrNoBinary) {
		t.Errorf("no nomad: %v; want ErrNoBinary", err)
	}
}

func TestDevConfig(t *testing.T) {
	a := &Agent{HTTPPort: 1, RPCPort: 2, SerfPort: 3}
	cfg := devConfig("/tmp/x/data", a, true)
	for _, want := range []string{
		`data_dir  = "/tmp/x/data"`,
		"http = 1", "rpc  = 2", "serf = 3",
		"acl {\n  enabled = true\n}",
		"plugin \"raw_exec\" {\n  config {\n    enabled = true\n  }\n}",
		`"fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"`,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("dev.hcl lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(devConfig("/d", a, false), "acl") {
		t.Error("dev.hcl enables ACLs when not asked to")
	}
}

func TestLaunchRefusesAnOldNomad(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "nomad")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho Nomad v1.11.1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOMAD_BIN", fake)
	if _, err := Launch(Options{}); err == nil || !strings.Contains(err.Error(), "this is Nomad 1.11.1, older than 1.11.2") {
		t.Errorf("Launch with Nomad 1.11.1: %v; want a refusal that says why", err)
	}
}

package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"paxcron/internal/freeport"
	"paxcron/internal/testcert"
)

// lockedBuffer is a process's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls cond for up to 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool, detail func() string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s:\n%s", what, detail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A SIGHUP to `paxcron server` reloads its TLS files: new connections get
// the new certificate, the log says which other settings changed in the
// file (they wait for a restart), files that fail a check are refused
// with the old ones kept, and the server serves on until SIGTERM.
func TestSIGHUPReloadsTheTLSFiles(t *testing.T) {
	dir := t.TempDir()
	bin := buildPaxcron(t, dir)
	ca := testcert.NewCA(t, "paxcron test CA", time.Now().Add(24*time.Hour))
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	issue := func() *big.Int {
		issued := ca.Issue(t, testcert.Leaf{Name: "replica-1"})
		cert, key := issued.PEM(t)
		write("cert.pem", cert)
		write("key.pem", key)
		return issued.Serial
	}
	write("ca.pem", ca.PEM())
	write("cluster.key", []byte("sighup-cluster-key-0123456789abcdef\n"))
	first := issue()
	ports, err := freeport.Pick(3)
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	config := func(everyEntries int) {
		write("server.hcl", fmt.Appendf(nil, `
replica_id = 1
data_dir   = %q
cluster {
  members  = [1, 2, 3]
  key_file = %q
}
bind {
  http  = %q
  paxos = "127.0.0.1:%d"
}
tls {
  ca_file   = %q
  cert_file = %q
  key_file  = %q
}
api {
  write_tokens = ["sighup-write-token-0123456789"]
}
nomad {
  address     = "http://127.0.0.1:%d"
  skip_checks = true
}
snapshot {
  every_entries = %d
}
backup {
  url = "off"
}
`, filepath.Join(dir, "data"), filepath.Join(dir, "cluster.key"), httpAddr, ports[1],
			filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), ports[2], everyEntries))
	}
	config(1000)
	var out lockedBuffer
	cmd := exec.Command(bin, "server", "-config", filepath.Join(dir, "server.hcl"), "-bootstrap")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	served := func() *big.Int {
		conn, err := tls.Dial("tcp", httpAddr, &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})
		if err != nil {
			return nil
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	servedIs := func(want *big.Int) func() bool {
		return func() bool { got := served(); return got != nil && got.Cmp(want) == 0 }
	}
	waitFor(t, "the API to serve the first certificate", servedIs(first), out.String)

	renewed := issue()
	config(2000)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the API to serve the renewed certificate", servedIs(renewed), out.String)
	waitFor(t, "the log to name the setting that waits for a restart", func() bool {
		l := out.String()
		return strings.Contains(l, "TLS files reloaded") && strings.Contains(l, "take effect at the next restart") &&
			strings.Contains(l, "settings=snapshot.every_entries")
	}, out.String)

	write("cert.pem", []byte("not a certificate\n"))
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the log to say the bad files were refused", func() bool {
		l := out.String()
		return strings.Contains(l, "reloading this replica's TLS files failed") && strings.Contains(l, filepath.Join(dir, "cert.pem"))
	}, out.String)
	if got := served(); got == nil || got.Cmp(renewed) != 0 {
		t.Errorf("after a refused reload the API serves %v, want the certificate before, %x", got, renewed)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("the server exited with %v after SIGTERM, want 0:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not stop after SIGTERM:\n%s", out.String())
	}
}

// The server's help says what SIGHUP does.
func TestServerHelpSaysWhatSIGHUPDoes(t *testing.T) {
	var out, errOut strings.Builder
	if code := runServer([]string{"-help"}, &out, &errOut, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"SIGHUP reloads the TLS files", "tls.cert_file", "nomad.cert_file", "paxcron_config_reloads_total", "next restart",
		"a CA move needs no restart"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("the help does not say %q", want)
		}
	}
}

// A SIGHUP says that a cluster key replaced in its file waits for a
// restart, as a setting changed does, naming the setting and not the
// key; a key file left as it was says nothing.
func TestSIGHUPSaysAClusterKeyChangedInItsFile(t *testing.T) {
	dir := t.TempDir()
	keyFile, acceptFile, configFile := filepath.Join(dir, "cluster.key"), filepath.Join(dir, "old.key"), filepath.Join(dir, "server.hcl")
	write := func(name string, b string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(keyFile, "the-first-cluster-key-0123\n")
	write(acceptFile, "the-old-cluster-key-0123\n")
	write(configFile, fmt.Sprintf("replica_id = 1\ncluster {\n  members = [1, 2, 3]\n  key_file = %q\n  accept_key_files = [%q]\n}\n", keyFile, acceptFile))
	o, err := defaultSettings()
	if err != nil {
		t.Fatal(err)
	}
	table := o.table()
	noEnv := func(string) string { return "" }
	if err := o.apply(table, configFile, noEnv, nil); err != nil {
		t.Fatal(err)
	}
	key, accepted, err := o.clusterKeys()
	if err != nil {
		t.Fatal(err)
	}
	started := digestKeys(key, accepted)
	sighup := func() string {
		var log bytes.Buffer
		sayRestartNeeded(slog.New(slog.NewTextHandler(&log, nil)), table, started, configFile, noEnv, nil)
		return log.String()
	}
	if l := sighup(); l != "" {
		t.Errorf("a SIGHUP with nothing changed logged:\n%s", l)
	}
	write(keyFile, "the-second-cluster-key-0123\n")
	write(acceptFile, "the-first-cluster-key-0123\n")
	l := sighup()
	if !strings.Contains(l, "take effect at the next restart") ||
		!strings.Contains(l, `settings="cluster.key_file (the content of its files), cluster.accept_key_files (the content of its files)"`) {
		t.Errorf("a SIGHUP after the key files changed does not name them:\n%s", l)
	}
	if strings.Contains(l, "cluster-key-0123") {
		t.Errorf("a SIGHUP logged a key:\n%s", l)
	}
}

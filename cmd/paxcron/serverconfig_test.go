package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"paxcron/cron/replica"
	"paxcron/paxos"
	"paxcron/storage/backup"
)

func TestExampleServerConfigLoads(t *testing.T) {
	o, err := defaultSettings()
	if err != nil {
		t.Fatal(err)
	}
	if err := o.loadHCL(filepath.Join("..", "..", "examples", "server.hcl"), o.table()); err != nil {
		t.Fatal(err)
	}
	if o.id != 1 || o.bindHTTP != "0.0.0.0:4750" || len(o.members) != 3 || len(o.join) != 2 || o.logFormat != "json" || o.nomad.JobGCThreshold != 4*time.Hour {
		t.Fatalf("settings: %+v", o)
	}
}

// Each source overrides the one before: defaults, file, variables, flags.
func TestServerSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("0123456789abcdef0123\n"), 0o600)
	file := filepath.Join(dir, "server.hcl")
	os.WriteFile(file, []byte(`
replica_id = 2
data_dir   = "/from/file"
cluster {
  members  = [1, 2, 3]
  key_file = "`+key+`"
}
bind { http = "127.0.0.1:9000" }
api { write_tokens = ["file-token-0123456789"] }
`), 0o644)
	o, err := defaultSettings()
	if err != nil {
		t.Fatal(err)
	}
	table := o.table()
	if err := o.loadHCL(file, table); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PAXCRON_DATA_DIR": "/from/env", "PAXCRON_BIND_HTTP": "127.0.0.1:9001", "PAXCRON_API_WRITE_TOKENS": "env-token-0123456789,env-token-abcdefghij"}
	if err := applyEnv(table, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	for _, s := range table {
		if s.key == "bind.http" {
			if err := s.set("127.0.0.1:9002"); err != nil { // a flag
				t.Fatal(err)
			}
		}
	}
	cfg, err := o.serverConfig(os.Stderr, "test")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ID != 2 || cfg.DataDir != "/from/env" || cfg.HTTPAddr != "127.0.0.1:9002" || len(cfg.WriteTokens) != 2 ||
		cfg.WriteTokens[0] != "env-token-0123456789" || len(cfg.Members) != 3 || cfg.Members[2] != paxos.ReplicaID(3) ||
		string(cfg.ClusterKey) != "0123456789abcdef0123" || cfg.PaxosAddr != "127.0.0.1:4751" {
		t.Fatalf("config: %+v", cfg)
	}
}

func TestServerConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ file, want string }{
		{"replica_idd = 1\n", `server.hcl:1,1-12: Unsupported argument`},
		{"bind { htp = \"x\" }\n", `Unsupported argument`},
		{"bind { http = \"a\" }\nbind { paxos = \"b\" }\n", "a second bind block"},
		{"replica_id = \"one\"\n", "replica_id: want a whole number"},
		{"cluster { members = 3 }\n", ""},
		{"api { insecure = [true] }\n", "a single value, not a list"},
		{"log { level = 1.5 }\n", ""},
	} {
		path := filepath.Join(dir, "server.hcl")
		os.WriteFile(path, []byte(tc.file), 0o644)
		o, _ := defaultSettings()
		err := o.loadHCL(path, o.table())
		if tc.want == "" {
			continue // accepted here; refused when the config is built
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.file, err, tc.want)
		}
	}
	code, _, errOut := runCLI(t, "server", "-replica-id", "1")
	if code != 2 || !strings.Contains(errOut, "cluster key is required") {
		t.Errorf("no key: exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "server", "-nope")
	if code != 2 {
		t.Errorf("unknown flag: exit %d: %s", code, errOut)
	}
	// A boolean setting stands alone, as Go's boolean flags do; it once
	// took the next argument for its value ("-api-insecure -replica-id 1":
	// "want true or false").
	code, _, errOut = runCLI(t, "server", "-api-insecure", "-nomad-skip-checks=true", "-replica-id", "1")
	if code != 2 || !strings.Contains(errOut, "cluster key is required") {
		t.Errorf("bare boolean flags: exit %d: %s", code, errOut)
	}
	// Values once changed silently are refused, naming what to write.
	keyFile := filepath.Join(dir, "cluster.key")
	os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-backup-keep", "0"}, "backup.keep 0: at least 1"},
		{[]string{"-snapshot-every", "10ms"}, "snapshot.every 10ms: 0 (never by time) or at least 50ms"},
	} {
		args := append([]string{"server", "-replica-id", "1", "-cluster-key-file", keyFile, "-data-dir", filepath.Join(dir, "data")}, tc.args...)
		code, _, errOut = runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d: %s; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	code, _, errOut = runCLI(t, "server", "-api-insecure=maybe")
	if code != 2 || !strings.Contains(errOut, "want true or false") {
		t.Errorf("a boolean flag's bad value: exit %d: %s", code, errOut)
	}
}

func TestBackupTargetDefault(t *testing.T) {
	// A folder a URL must escape: found in review, the default target
	// was the folder's path pasted into a URL, so "#" cut it short and
	// backups went to the parent folder.
	dir := filepath.Join(t.TempDir(), "data #1 ?x=%41")
	got := backupTarget("", dir)
	if !strings.HasPrefix(got, "file://") || !strings.Contains(got, "/backups?create_dir=true") {
		t.Fatalf("default backup target %q", got)
	}
	if backupTarget("off", dir) != "" || backupTarget("s3://b", dir) != "s3://b" {
		t.Fatal("off or an explicit URL not honoured")
	}
	// The default opens (and creates its folder).
	st, err := backup.Open(context.Background(), got, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := os.Stat(filepath.Join(dir, "backups")); err != nil {
		t.Fatal(err)
	}
}

// TestBackupDefaultIsMarked: the default backup target (a folder beside
// each replica's store, its path the replica's own) is marked so, so that
// replicas on the default compare as agreeing; a URL given, or off, is
// not.
func TestBackupDefaultIsMarked(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]bool{"": true, "off": false, "s3://bucket/paxcron": false} {
		o, err := defaultSettings()
		if err != nil {
			t.Fatal(err)
		}
		o.id, o.keyFile, o.dataDir, o.members, o.backupURL = 1, keyFile, filepath.Join(dir, "data"), []int{1, 2, 3}, url
		cfg, err := o.serverConfig(io.Discard, "test")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.BackupDefault != want {
			t.Errorf("backup.url %q: BackupDefault %v, want %v (target %q)", url, cfg.BackupDefault, want, cfg.Backup)
		}
	}
}

// FuzzServerConfig: any configuration file is read or refused with an
// error, never a panic.
func FuzzServerConfig(f *testing.F) {
	ex, _ := os.ReadFile(filepath.Join("..", "..", "examples", "server.hcl"))
	f.Add(ex)
	f.Add([]byte("replica_id = 1\ncluster { members = [1, 2, 3] }\n"))
	f.Add([]byte("bind { http = [1] }\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		path := filepath.Join(t.TempDir(), "server.hcl")
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
		o, err := defaultSettings()
		if err != nil {
			t.Skip(err)
		}
		_ = o.loadHCL(path, o.table())
	})
}

// The help names each setting's default where it has one, once, and
// never a secret's.
func TestServerHelpNamesDefaults(t *testing.T) {
	var out, errOut strings.Builder
	code := runServer([]string{"-help"}, &out, &errOut, func(string) string { return "" })
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	help := errOut.String()
	usageOf := func(flag string) string {
		_, after, ok := strings.Cut(help, "  -"+flag+", ")
		if !ok {
			t.Fatalf("help has no -%s:\n%s", flag, help)
		}
		_, usage, _ := strings.Cut(after, "\n")
		usage, _, _ = strings.Cut(usage, "\n")
		return strings.TrimSpace(usage)
	}
	entries := strconv.FormatUint(replica.DefaultSnapshotPolicy().EveryEntries, 10)
	for flag, want := range map[string]string{
		"bind-http":              "(default 127.0.0.1:4750)",
		"snapshot-every-entries": "(default " + entries + ")",
		"snapshot-every":         "(default 10m)",
		"backup-keep":            "(default 5)",
		"log-level":              "(default info)",
	} {
		if u := usageOf(flag); !strings.HasSuffix(u, want) {
			t.Errorf("-%s: %q does not end with %q", flag, u, want)
		}
	}
	// A secret's value stays out of the help even where one was set
	// before the help is printed.
	o, err := defaultSettings()
	if err != nil {
		t.Fatal(err)
	}
	o.writeTokens, o.nomad.Token = []string{"secret-token-0123456789"}, "nomad-secret"
	for _, st := range o.table() {
		if d := st.helpDefault(); st.secret && d != "" {
			t.Errorf("%s: the help would print %q", st.key, d)
		}
	}
	for _, flag := range []string{"replica-id", "bind-gossip", "api-write-tokens", "api-insecure", "nomad-gc-threshold", "advertise-http"} {
		if u := usageOf(flag); strings.Count(u, "default") > 1 || strings.HasSuffix(u, "(default )") || strings.HasSuffix(u, "(default 0)") {
			t.Errorf("-%s: %q names a default it does not have, or twice", flag, u)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{10 * time.Minute: "10m", 4 * time.Hour: "4h", 90 * time.Second: "1m30s", 1500 * time.Millisecond: "1.5s", 2*time.Hour + 30*time.Minute: "2h30m"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestTuneGC: the server collects at GOGC=200 unless the operator set
// GOGC, which then stands.
func TestTuneGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	tuneGC(func(string) string { return "50" })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set, the GC percent became %d", got)
	}
	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Fatalf("with GOGC unset, the GC percent is %d, want %d", got, serverGCPercent)
	}
}

// TestPeerNamedTwiceIsRefused: cluster.peers giving one replica ID two
// addresses kept the last without a word (the peers are a map), so a
// typo for another replica's ID ("2=...,2=..." for "2=...,3=...") left
// that replica with no address and its own ID's first address dropped.
// cluster.members refuses a replica named twice; so do the peers now.
// Found in review.
func TestPeerNamedTwiceIsRefused(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := defaultSettings()
	if err != nil {
		t.Fatal(err)
	}
	o.id, o.keyFile, o.dataDir, o.members = 1, keyFile, filepath.Join(dir, "data"), []int{1, 2, 3}
	o.peers = []string{"2=10.0.0.2:4751/10.0.0.2:4750", "2=10.0.0.3:4751/10.0.0.3:4750"}
	if _, err := o.serverConfig(io.Discard, "test"); err == nil || !strings.Contains(err.Error(), "replica 2 twice") {
		t.Errorf("cluster.peers %v: %v; want it refused, naming replica 2", o.peers, err)
	}
	o.peers = []string{"2=10.0.0.2:4751/10.0.0.2:4750", "3=10.0.0.3:4751/10.0.0.3:4750"}
	if _, err := o.serverConfig(io.Discard, "test"); err != nil {
		t.Errorf("cluster.peers %v: %v", o.peers, err)
	}
}

// TestConfigNumberChangedIsRefused: a setting read as text that is
// written as a number became HCL's shortest form of it, so `namespace =
// 007` named namespace "7" and a token of digits with a leading zero
// lost it, without a word, as cron files did before
// TestMetaNumberChangedIsRefused. Such a number is refused where a
// setting is text, naming where and what it would become (but not a
// secret's value); a number whose text is its shortest form is taken,
// and so is any number where the setting is one. Found in review.
func TestConfigNumberChangedIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.hcl")
	load := func(src string) (serverSettings, error) {
		t.Helper()
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		o, err := defaultSettings()
		if err != nil {
			t.Fatal(err)
		}
		return o, o.loadHCL(path, o.table())
	}
	for _, tc := range []struct{ src, at, becomes string }{
		{"nomad { namespace = 007 }\n", "server.hcl:1,21-24", `"7"`},
		{"nomad {\n  region = 1.10\n}\n", "server.hcl:2,12-16", `"1.1"`},
		{"data_dir = 1e3\n", "server.hcl:1,12-15", `"1000"`},
		{"cluster { join = [\"a:1\", 0.50] }\n", "server.hcl:1,26-30", `"0.5"`},
	} {
		_, err := load(tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.at) || !strings.Contains(err.Error(), tc.becomes) {
			t.Errorf("%q: %v; want it refused at %s, saying it becomes %s", tc.src, err, tc.at, tc.becomes)
		}
	}
	// A secret is refused without its value.
	for _, src := range []string{"nomad { token = 0123456789 }\n", "api { read_tokens = [00123456789012345678] }\n"} {
		_, err := load(src)
		if err == nil || !strings.Contains(err.Error(), "quote it") || strings.Contains(err.Error(), "123456789") {
			t.Errorf("%q: %v; want it refused without the value", src, err)
		}
	}
	o, err := load("replica_id = 007\ncluster { members = [01, 2.0, 3] }\nnomad { namespace = 7 }\nbackup { keep = 1e1 }\n")
	if err != nil {
		t.Fatal(err)
	}
	if o.id != 7 || len(o.members) != 3 || o.members[1] != 2 || o.nomad.Namespace != "7" || o.backupKeep != 10 {
		t.Errorf("settings: id %d, members %v, namespace %q, keep %d", o.id, o.members, o.nomad.Namespace, o.backupKeep)
	}
}

// TestSnapshotEveryOffTheTickIsRefused: the replica counts time in
// ticks of 50ms, and a snapshot.every between two multiples of it was
// rounded down to the lower without a word (75ms ran as 50ms). It is
// refused, naming the tick and the two multiples around it; a multiple
// is taken as that many ticks. Found in review.
func TestSnapshotEveryOffTheTickIsRefused(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	build := func(every time.Duration) (uint64, error) {
		o, err := defaultSettings()
		if err != nil {
			t.Fatal(err)
		}
		o.id, o.keyFile, o.dataDir, o.snapEvery = 1, keyFile, filepath.Join(dir, "data"), every
		cfg, err := o.serverConfig(io.Discard, "test")
		return cfg.Snapshots.EveryTicks, err
	}
	for _, tc := range []struct {
		every time.Duration
		want  string
	}{
		{75 * time.Millisecond, "snapshot.every 75ms: not a multiple of the tick, 50ms: 50ms or 100ms"},
		{90*time.Second + 10*time.Millisecond, "snapshot.every 1m30.01s: not a multiple of the tick, 50ms: 1m30s or 1m30.05s"},
		{time.Second + 1, "snapshot.every 1.000000001s: not a multiple of the tick, 50ms: 1s or 1.05s"},
	} {
		if ticks, err := build(tc.every); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %d ticks, %v; want %q", tc.every, ticks, err, tc.want)
		}
	}
	for every, want := range map[time.Duration]uint64{0: 0, 50 * time.Millisecond: 1, 150 * time.Millisecond: 3, 10 * time.Minute: 12000} {
		if ticks, err := build(every); err != nil || ticks != want {
			t.Errorf("%v: %d ticks, %v; want %d", every, ticks, err, want)
		}
	}
}

// TestNeverSnapshottingIsRefused: with neither a count of entries nor a
// period, a replica never snapshots: found in review (a long life), its
// log grew with every entry ever written (and a restart replayed all of
// it), and no routine backup was ever taken, as backups follow
// snapshots. Either alone is accepted.
func TestNeverSnapshottingIsRefused(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	build := func(entries int, every time.Duration) error {
		o, err := defaultSettings()
		if err != nil {
			t.Fatal(err)
		}
		o.id, o.keyFile, o.dataDir, o.snapEntries, o.snapEvery = 1, keyFile, filepath.Join(dir, "data"), entries, every
		_, err = o.serverConfig(io.Discard, "test")
		return err
	}
	want := "snapshot.every_entries and snapshot.every are both 0: the replica would never take a snapshot"
	if err := build(0, 0); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("neither: %v; want %q", err, want)
	}
	if err := build(0, time.Minute); err != nil {
		t.Errorf("by time only: %v", err)
	}
	if err := build(1000, 0); err != nil {
		t.Errorf("by entries only: %v", err)
	}
}

// cluster.accept_key_files are read as key_file is, each trimmed; a file
// that cannot be read is named.
func TestAcceptKeyFiles(t *testing.T) {
	dir := t.TempDir()
	key, old := filepath.Join(dir, "new.key"), filepath.Join(dir, "old.key")
	os.WriteFile(key, []byte("the-new-cluster-key-0123\n"), 0o600)
	os.WriteFile(old, []byte("the-old-cluster-key-0123\n"), 0o600)
	file := filepath.Join(dir, "server.hcl")
	os.WriteFile(file, []byte(`
replica_id = 1
data_dir   = "/var/lib/paxcron"
cluster {
  members          = [1, 2, 3]
  key_file         = "`+key+`"
  accept_key_files = ["`+old+`"]
}
api { write_tokens = ["file-token-0123456789"] }
`), 0o644)
	o, err := defaultSettings()
	if err != nil {
		t.Fatal(err)
	}
	if err := o.loadHCL(file, o.table()); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.serverConfig(io.Discard, "test")
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.ClusterKey) != "the-new-cluster-key-0123" || len(cfg.AcceptKeys) != 1 || string(cfg.AcceptKeys[0]) != "the-old-cluster-key-0123" {
		t.Fatalf("keys %q, accepted %q", cfg.ClusterKey, cfg.AcceptKeys)
	}
	o.acceptKeyFiles = []string{filepath.Join(dir, "missing.key")}
	if _, err := o.serverConfig(io.Discard, "test"); err == nil || !strings.Contains(err.Error(), "cluster.accept_key_files") {
		t.Fatalf("a missing accepted key file: %v", err)
	}
}

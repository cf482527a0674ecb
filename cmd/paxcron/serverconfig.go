package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"paxcron/cron/replica"
	"paxcron/internal/hcltext"
	"paxcron/internal/server"
	"paxcron/nomad"
	"paxcron/paxos"
)

// serverSettings are the raw settings of `paxcron server`, filled from
// the defaults, then the HCL file, then PAXCRON_* variables, then flags:
// each later source overrides the earlier ones, setting by setting.
type serverSettings struct {
	id             int
	dataDir        string
	members        []int
	keyFile        string
	acceptKeyFiles []string
	join           []string
	peers          []string
	bindHTTP       string
	bindPaxos      string
	bindGossip     string
	advHTTP        string
	advPaxos       string
	advGossip      string
	tlsCA          string
	tlsCert        string
	tlsKey         string
	writeTokens    []string
	readTokens     []string
	anonReads      bool
	pprof          bool
	insecure       bool
	nomad          nomad.Config
	nomadSkipCheck bool
	snapEntries    int
	snapEvery      time.Duration
	snapTail       int
	backupURL      string
	backupKeep     int
	logLevel       string
	logFormat      string
	// testClockFile is for fault testing only (server.Config.TestClockOffsetFile).
	testClockFile string
}

// setting is one of them: its HCL path ("nomad.address": attribute
// address of block nomad), which also names its flag (-nomad-address) and
// its variable (PAXCRON_NOMAD_ADDRESS).
type setting struct {
	key   string
	usage string
	// set parses one value; for a list, one element (reset empties it
	// first, so that a later source replaces rather than appends).
	set   func(string) error
	reset func()
	// secret settings are not echoed in errors (nor their defaults in
	// the help).
	secret bool
	// show is the setting's value as the help prints it: "" for none.
	show func() string
	// boolean settings are flags that stand alone (-api-insecure, or
	// -api-insecure=false), as Go's boolean flags do.
	boolean bool
	// text settings are read as text: a number written in the file for
	// one must read as written (numberChanged).
	text bool
}

// helpDefault is what the help adds to s's usage for its default, read
// before any source is applied: "" where there is none to name, or
// where the usage names it already.
func (s setting) helpDefault() string {
	if s.secret || s.show == nil || strings.Contains(s.usage, "default") {
		return ""
	}
	if v := s.show(); v != "" {
		return " (default " + v + ")"
	}
	return ""
}

func (s setting) list() bool { return s.reset != nil }
func (s setting) flagName() string {
	return strings.ReplaceAll(strings.ReplaceAll(s.key, ".", "-"), "_", "-")
}
func (s setting) envName() string {
	return "PAXCRON_" + strings.ToUpper(strings.ReplaceAll(strings.ReplaceAll(s.key, ".", "_"), "-", "_"))
}

// defaultSettings are a single replica's defaults: ports 4750 (API), 4751
// (Paxos) and 4752 (gossip) on loopback; the NOMAD_* variables as the
// nomad CLI reads them.
func defaultSettings() (serverSettings, error) {
	nc, err := nomad.ConfigFromEnv()
	if err != nil {
		return serverSettings{}, err
	}
	p := replica.DefaultSnapshotPolicy()
	return serverSettings{
		bindHTTP: "127.0.0.1:4750", bindPaxos: "127.0.0.1:4751",
		nomad:       nc,
		snapEntries: int(p.EveryEntries), snapEvery: 10 * time.Minute, snapTail: int(p.TailEntries),
		backupKeep: 5, logLevel: "info", logFormat: "text",
	}, nil
}

func (o *serverSettings) table() []setting {
	str := func(key, usage string, dst *string) setting {
		return setting{key: key, usage: usage, text: true, set: func(v string) error { *dst = v; return nil },
			show: func() string { return *dst }}
	}
	secret := func(s setting) setting { s.secret = true; return s }
	strs := func(key, usage string, dst *[]string) setting {
		return setting{key: key, usage: usage, text: true, set: func(v string) error {
			for part := range strings.SplitSeq(v, ",") {
				if part = strings.TrimSpace(part); part != "" {
					*dst = append(*dst, part)
				}
			}
			return nil
		}, reset: func() { *dst = nil }, show: func() string { return strings.Join(*dst, ",") }}
	}
	integer := func(key, usage string, dst *int) setting {
		return setting{key: key, usage: usage, set: func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("want a whole number, 0 or more")
			}
			*dst = n
			return nil
		}, show: func() string {
			if *dst == 0 {
				return ""
			}
			return strconv.Itoa(*dst)
		}}
	}
	ints := func(key, usage string, dst *[]int) setting {
		return setting{key: key, usage: usage, set: func(v string) error {
			for part := range strings.SplitSeq(v, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(part))
				if err != nil || n <= 0 {
					return fmt.Errorf("%q is not a replica ID (a positive whole number)", part)
				}
				*dst = append(*dst, n)
			}
			return nil
		}, reset: func() { *dst = nil }, show: func() string {
			parts := make([]string, len(*dst))
			for i, n := range *dst {
				parts[i] = strconv.Itoa(n)
			}
			return strings.Join(parts, ",")
		}}
	}
	boolean := func(key, usage string, dst *bool) setting {
		return setting{key: key, usage: usage, boolean: true, set: func(v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false")
			}
			*dst = b
			return nil
		}, show: func() string {
			if *dst {
				return "true"
			}
			return ""
		}}
	}
	duration := func(key, usage string, dst *time.Duration) setting {
		return setting{key: key, usage: usage, set: func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("want a duration such as 10m or 4h")
			}
			*dst = d
			return nil
		}, show: func() string {
			if *dst == 0 {
				return ""
			}
			return shortDuration(*dst)
		}}
	}
	return []setting{
		integer("replica_id", "this replica's ID, one of cluster.members", &o.id),
		str("data_dir", "folder of this replica's store (kept across restarts)", &o.dataDir),
		ints("cluster.members", "every replica ID of the cluster, e.g. 1,2,3", &o.members),
		str("cluster.key_file", "file holding the cluster key (16 bytes or more, the same on every replica)", &o.keyFile),
		strs("cluster.accept_key_files", "files of further cluster keys accepted from other replicas, during a key rotation (README.md, \"Day-two operations\")", &o.acceptKeyFiles),
		strs("cluster.join", "gossip addresses of other replicas to join through (host:port, comma-separated)", &o.join),
		strs("cluster.peers", "other replicas' addresses, ID=PAXOS_ADDR/HTTP_ADDR (optional when gossip runs)", &o.peers),
		str("bind.http", "address of the HTTP API, metrics and status page", &o.bindHTTP),
		str("bind.paxos", "address of the replica-to-replica Paxos transport", &o.bindPaxos),
		str("bind.gossip", "address of membership gossip (UDP and TCP); empty: no gossip", &o.bindGossip),
		str("advertise.http", "HTTP address other replicas forward to (default bind.http)", &o.advHTTP),
		str("advertise.paxos", "Paxos address other replicas dial (default bind.paxos)", &o.advPaxos),
		str("advertise.gossip", "gossip address other replicas reach (default bind.gossip)", &o.advGossip),
		str("tls.ca_file", "CA certificates (PEM, one or several: during a CA move the old and the new) that signed every replica's: mutual TLS between replicas, TLS for the API", &o.tlsCA),
		str("tls.cert_file", "this replica's certificate (PEM)", &o.tlsCert),
		str("tls.key_file", "this replica's key (PEM)", &o.tlsKey),
		secret(strs("api.write_tokens", "bearer tokens that may change anything (16 characters or more)", &o.writeTokens)),
		secret(strs("api.read_tokens", "bearer tokens that may only read", &o.readTokens)),
		boolean("api.anonymous_reads", "let reads and the status page through without a token", &o.anonReads),
		boolean("api.enable_pprof", "serve Go's runtime profiles (CPU, heap, goroutines, trace) under /debug/pprof/ to a write token", &o.pprof),
		boolean("api.insecure", "allow a server without any write token (a local demo only)", &o.insecure),
		str("nomad.address", "Nomad's HTTP API (default NOMAD_ADDR, else http://127.0.0.1:4646)", &o.nomad.Address),
		str("nomad.region", "region of jobs that name none (default NOMAD_REGION)", &o.nomad.Region),
		str("nomad.namespace", "namespace of jobs that name none (default NOMAD_NAMESPACE)", &o.nomad.Namespace),
		secret(str("nomad.token", "Nomad ACL token (default NOMAD_TOKEN): dispatch-job, read-job, list-jobs", &o.nomad.Token)),
		str("nomad.ca_file", "CA certificate of Nomad's API (default NOMAD_CACERT)", &o.nomad.TLS.CACert),
		str("nomad.cert_file", "client certificate for Nomad (default NOMAD_CLIENT_CERT)", &o.nomad.TLS.ClientCert),
		str("nomad.key_file", "client key for Nomad (default NOMAD_CLIENT_KEY)", &o.nomad.TLS.ClientKey),
		str("nomad.tls_server_name", "name checked in Nomad's certificate (default NOMAD_TLS_SERVER_NAME)", &o.nomad.TLS.ServerName),
		boolean("nomad.skip_verify", "do not verify Nomad's certificate (default NOMAD_SKIP_VERIFY)", &o.nomad.TLS.SkipVerify),
		duration("nomad.gc_threshold", "Nomad servers' job_gc_threshold: how long Nomad remembers a dispatch (default 4h)", &o.nomad.JobGCThreshold),
		boolean("nomad.skip_checks", "launch without checking Nomad's version and GC threshold first", &o.nomadSkipCheck),
		integer("snapshot.every_entries", "snapshot after this many log entries (0: never by count)", &o.snapEntries),
		duration("snapshot.every", "snapshot at least this often (0: never by time; a multiple of "+shortDuration(server.DefaultTickInterval)+", the replica's tick)", &o.snapEvery),
		integer("snapshot.tail_entries", "log entries kept below a snapshot, to catch a follower up without it", &o.snapTail),
		str("backup.url", "where the leader backs snapshots up: file:///path, s3://bucket, gs://bucket, azblob://container; default file://<data_dir>/backups (the same disk: point it elsewhere); off: none", &o.backupURL),
		integer("backup.keep", "backups kept (the newest; the cluster's first backup at backup.url is kept too, as its claim on the target)", &o.backupKeep),
		str("log.level", "debug, info, warn or error", &o.logLevel),
		str("log.format", "text or json", &o.logFormat),
		str("test.clock_offset_file", "FOR FAULT TESTING ONLY (make chaos), never in production: a file holding a duration (30s, -1m) added to the launcher's clock, re-read every 250 ms so that a test can make this replica's clock jump", &o.testClockFile),
	}
}

// shortDuration is d as a person writes it: 10m, not 10m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// loadHCL applies the settings of an HCL file: top-level attributes and
// one level of blocks (bind { http = ... }), lists as HCL lists.
func (o *serverSettings) loadHCL(path string, table []setting) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the config file: %w", err)
	}
	f, diags := hclparse.NewParser().ParseHCL(src, path)
	if diags.HasErrors() {
		return diags
	}
	top := &hcl.BodySchema{}
	blocks := map[string]*hcl.BodySchema{}
	byKey := map[string]setting{}
	for _, s := range table {
		byKey[s.key] = s
		block, attr, nested := strings.Cut(s.key, ".")
		if !nested {
			top.Attributes = append(top.Attributes, hcl.AttributeSchema{Name: block})
			continue
		}
		if blocks[block] == nil {
			blocks[block] = &hcl.BodySchema{}
			top.Blocks = append(top.Blocks, hcl.BlockHeaderSchema{Type: block})
		}
		blocks[block].Attributes = append(blocks[block].Attributes, hcl.AttributeSchema{Name: attr})
	}
	content, diags := f.Body.Content(top)
	if diags.HasErrors() {
		return diags
	}
	apply := func(key string, a *hcl.Attribute) error {
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return diags
		}
		s := byKey[key]
		if s.text {
			if err := numberChanged(src, key, s.secret, a.Expr); err != nil {
				return err
			}
		}
		if err := applyValue(s, v); err != nil {
			return fmt.Errorf("%s: %s: %w", a.Range.String(), key, err)
		}
		return nil
	}
	for name, a := range content.Attributes {
		if err := apply(name, a); err != nil {
			return err
		}
	}
	seen := map[string]hcl.Range{}
	for _, b := range content.Blocks {
		if first, dup := seen[b.Type]; dup {
			return fmt.Errorf("%s: a second %s block (the first is at %s)", b.DefRange.String(), b.Type, first.String())
		}
		seen[b.Type] = b.DefRange
		inner, diags := b.Body.Content(blocks[b.Type])
		if diags.HasErrors() {
			return diags
		}
		for name, a := range inner.Attributes {
			if err := apply(b.Type+"."+name, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// numberChanged refuses a number that expr writes for a text setting,
// alone or in a list, whose text is not the string it becomes
// (hcltext.NumberChanged): `namespace = 007` read as "7", as cron
// files' meta once did (found in review). A secret's value is not
// echoed.
func numberChanged(src []byte, key string, secret bool, expr hcl.Expression) error {
	exprs := []hcl.Expression{expr}
	if list, ok := expr.(*hclsyntax.TupleConsExpr); ok {
		exprs = exprs[:0]
		for _, e := range list.Exprs {
			exprs = append(exprs, e)
		}
	}
	for _, e := range exprs {
		v, diags := e.Value(nil)
		if diags.HasErrors() {
			continue // applyValue says why
		}
		written, becomes, changed := hcltext.NumberChanged(src, e, v)
		switch {
		case !changed:
			continue
		case secret:
			return fmt.Errorf("%s: %s: a number HCL would read as other text than written (its shortest form): quote it to keep it as written", e.Range(), key)
		}
		return fmt.Errorf("%s: %s: %s would be read as %q, HCL's shortest form of the number: quote it (\"%s\") to keep it as written", e.Range(), key, written, becomes, written)
	}
	return nil
}

// applyValue sets s from an HCL value: a string, number or bool, or for a
// list setting a list of them.
func applyValue(s setting, v cty.Value) error {
	if !v.IsKnown() || v.IsNull() {
		return errors.New("no value")
	}
	t := v.Type()
	if t.IsListType() || t.IsTupleType() || t.IsSetType() {
		if !s.list() {
			return errors.New("a single value, not a list")
		}
		s.reset()
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			str, err := scalar(e)
			if err != nil {
				return err
			}
			if err := s.set(str); err != nil {
				return err
			}
		}
		return nil
	}
	str, err := scalar(v)
	if err != nil {
		return err
	}
	if s.list() {
		s.reset()
	}
	return s.set(str)
}

func scalar(v cty.Value) (string, error) {
	switch v.Type() {
	case cty.String:
		return v.AsString(), nil
	case cty.Number:
		return v.AsBigFloat().Text('f', -1), nil
	case cty.Bool:
		return strconv.FormatBool(v.True()), nil
	}
	return "", fmt.Errorf("a %s, want a string, number or bool", v.Type().FriendlyName())
}

// applyEnv applies every PAXCRON_* variable that is set.
func applyEnv(table []setting, getenv func(string) string) error {
	for _, s := range table {
		v := getenv(s.envName())
		if v == "" {
			continue
		}
		if s.list() {
			s.reset()
		}
		if err := s.set(v); err != nil {
			return fmt.Errorf("%s: %w", s.envName(), err)
		}
	}
	return nil
}

// clusterKeys reads the cluster key (cluster.key_file) and the keys
// accepted besides (cluster.accept_key_files), each trimmed of the white
// space around it.
func (o *serverSettings) clusterKeys() (key []byte, accepted [][]byte, err error) {
	key, err = os.ReadFile(o.keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the cluster key: %w", err)
	}
	for _, f := range o.acceptKeyFiles {
		k, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("reading an accepted cluster key (cluster.accept_key_files): %w", err)
		}
		accepted = append(accepted, bytes.TrimSpace(k))
	}
	return bytes.TrimSpace(key), accepted, nil
}

// serverConfig turns the settings into the server's Config.
func (o *serverSettings) serverConfig(logOut io.Writer, version string) (server.Config, error) {
	bad := func(format string, args ...any) (server.Config, error) {
		return server.Config{}, fmt.Errorf(format, args...)
	}
	if o.id <= 0 {
		return bad("the replica ID is required: replica_id in the file, -replica-id or PAXCRON_REPLICA_ID")
	}
	if o.keyFile == "" {
		return bad("the cluster key is required: cluster.key_file (a file of 16 bytes or more, the same on every replica; e.g. head -c 32 /dev/urandom | base64 > cluster.key)")
	}
	key, accepted, err := o.clusterKeys()
	if err != nil {
		return bad("%w", err)
	}
	cfg := server.Config{
		ID: paxos.ReplicaID(o.id), DataDir: o.dataDir, ClusterKey: key, AcceptKeys: accepted,
		PaxosAddr: o.bindPaxos, PaxosAdvertise: o.advPaxos, HTTPAddr: o.bindHTTP, HTTPAdvertise: o.advHTTP,
		GossipAddr: o.bindGossip, GossipAdvertise: o.advGossip, Join: o.join,
		WriteTokens: o.writeTokens, ReadTokens: o.readTokens, AnonymousReads: o.anonReads, EnablePprof: o.pprof, Insecure: o.insecure,
		Nomad: o.nomad, SkipNomadChecks: o.nomadSkipCheck,
		Snapshots: replica.SnapshotPolicy{
			EveryEntries: uint64(o.snapEntries), LogPerState: 1, TailEntries: uint64(o.snapTail),
		},
		Backup: backupTarget(o.backupURL, o.dataDir), BackupDefault: o.backupURL == "", BackupKeep: o.backupKeep, Version: version,
		TestClockOffsetFile: o.testClockFile,
	}
	for _, m := range o.members {
		cfg.Members = append(cfg.Members, paxos.ReplicaID(m))
	}
	cfg.TickInterval = server.DefaultTickInterval
	// Both once changed silently: keep 0 became the default 5, and a
	// period under one tick became "never by time".
	if o.backupKeep < 1 {
		return bad("backup.keep %d: at least 1 (the newest backups kept, besides the cluster's first; backup.url = \"off\" turns backups off)", o.backupKeep)
	}
	if o.snapEvery > 0 && o.snapEvery < cfg.TickInterval {
		return bad("snapshot.every %v: 0 (never by time) or at least %v, one tick", o.snapEvery, cfg.TickInterval)
	}
	if below := o.snapEvery.Truncate(cfg.TickInterval); below != o.snapEvery {
		// Counted in ticks, it was rounded down without a word (found
		// in review). Refused rather than rounded either way: the tick
		// is no setting an operator sees, and a period that is not the
		// one written is the silent change the other checks refuse.
		return bad("snapshot.every %v: not a multiple of the tick, %v: %v or %v", o.snapEvery, cfg.TickInterval,
			shortDuration(below), shortDuration(below+cfg.TickInterval))
	}
	if o.snapEvery > 0 {
		cfg.Snapshots.EveryTicks = uint64(o.snapEvery / cfg.TickInterval)
	}
	if o.snapEntries == 0 && o.snapEvery == 0 {
		return bad("%s", server.NeverSnapshots)
	}
	if o.tlsCA != "" || o.tlsCert != "" || o.tlsKey != "" {
		if o.tlsCA == "" || o.tlsCert == "" || o.tlsKey == "" {
			return bad("tls needs all of ca_file, cert_file and key_file")
		}
		cfg.TLS = &server.TLSFiles{CAFile: o.tlsCA, CertFile: o.tlsCert, KeyFile: o.tlsKey}
	}
	if len(o.peers) > 0 {
		cfg.Peers = map[paxos.ReplicaID]server.PeerAddrs{}
		for _, p := range o.peers {
			id, addrs, ok := strings.Cut(p, "=")
			pax, http, ok2 := strings.Cut(addrs, "/")
			n, err := strconv.Atoi(id)
			if !ok || !ok2 || err != nil || n <= 0 {
				return bad("cluster.peers %q: want ID=PAXOS_ADDR/HTTP_ADDR, e.g. 2=10.0.0.2:4751/10.0.0.2:4750", p)
			}
			if first, dup := cfg.Peers[paxos.ReplicaID(n)]; dup {
				// A map keeps the last: a typo for another ID was
				// silently lost (found in review).
				return bad("cluster.peers names replica %d twice (%s/%s and %s)", n, first.Paxos, first.HTTP, addrs)
			}
			cfg.Peers[paxos.ReplicaID(n)] = server.PeerAddrs{Paxos: pax, HTTP: http}
		}
	}
	if err := o.nomad.Validate(); err != nil {
		return server.Config{}, err
	}
	logger, err := newLogger(logOut, o.logLevel, o.logFormat)
	if err != nil {
		return server.Config{}, err
	}
	cfg.Logger = logger
	if slices.Contains(o.members, 0) {
		return bad("cluster.members: 0 is not a replica ID")
	}
	return cfg, nil
}

// backupTarget is backup.url, or by default a folder beside the store
// (which guards against a damaged store, not a lost disk), or none.
func backupTarget(target, dataDir string) string {
	switch {
	case target == "off":
		return ""
	case target != "":
		return target
	case dataDir == "":
		return "" // the server refuses the config anyway
	}
	abs, err := filepath.Abs(filepath.Join(dataDir, "backups"))
	if err != nil {
		return ""
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: "create_dir=true"}
	return u.String() // escaped: a folder's name may hold "#", "?" or "%"
}

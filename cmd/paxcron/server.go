package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"paxcron/internal/server"
)

const serverUsage = `Usage: paxcron server [-config FILE] [-bootstrap] [settings]

Runs one paxcron replica until SIGINT or SIGTERM: its Paxos transport,
the cron state, the leader's launches into Nomad, and the HTTP API.
SIGHUP reloads its TLS files (below).

Every setting comes, in increasing precedence, from its default, the HCL
file (-config), its PAXCRON_* variable, and its flag. A setting "a.b" is
attribute b of block a in the file (bind { http = "0.0.0.0:4750" }), the
flag -a-b and the variable PAXCRON_A_B. Lists are HCL lists in the file
and comma-separated elsewhere.

-bootstrap starts a NEW cluster: a replica whose store is empty then votes
from the start. Without it an empty store rejoins as a learner, catching
up from its peers before it votes: a replica whose disk was lost must not
vote on what it forgot. Pass it only on the first start of a new cluster's
replicas: a store that holds anything refuses it (exit 2), so that it is
not left where a replica whose disk is lost would start with it.

Memory: unless GOGC is set, the server runs Go's garbage collector at
GOGC=200, not Go's 100: at 512 writers a fifth of the leader's CPU went
to collecting, most of it marking the live cron state. The heap peaks at
about three times the live state instead of two (a million jobs hold
about 660 MiB: a peak near 2 GiB, not 1.3); set GOGC=100 for the smaller
peak, or GOMEMLIMIT to cap it.

SIGHUP reloads the TLS files, at the paths the replica started with: its
own (tls.ca_file, tls.cert_file, tls.key_file) and the Nomad client's
(nomad.ca_file, nomad.cert_file, nomad.key_file). New connections use
them; connections open go on, but for those between replicas (Paxos, and
requests forwarded) whose other end's certificate the new tls.ca_file
does not verify: each is closed, and logged. Files that fail the checks
of the start (a certificate from a CA outside tls.ca_file, expired, not
for both server and client authentication, a key that does not match, a
file that does not parse, a CA bundle missing a line break) are refused:
the replica keeps the files it had, logs why, and counts it in
paxcron_config_reloads_total{result="failed"}. The CAs of
tls.ca_file count both ways, dialed and dialing, from the next
connection on, so a CA move needs no restart: (1) both CAs in every
replica's tls.ca_file, SIGHUP each; (2) certificates from the new CA,
SIGHUP each; (3) the new CA alone, SIGHUP each. A certificate from a CA
that peers do not trust yet is refused by them, as at a start, and both
sides log it. Nothing else is reloaded: a SIGHUP logs which other
settings changed in the file, and which cluster key files
(cluster.key_file, cluster.accept_key_files) hold other keys than at
start, to take effect at the next restart.

test.clock_offset_file (-test-clock-offset-file) is for fault testing
only (make chaos): it shifts the launcher's clock by the duration the file
holds and makes it jump when the file changes. It is off unless set.

Exit status: 0 after a clean shutdown, 1 if the replica failed, 2 bad
usage or configuration.

Flags:
  -config FILE   the HCL configuration file
  -bootstrap     this is the first start of a new cluster

Settings (flag, variable: meaning):
`

func runServer(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	// A SIGHUP's default is to end the process: caught from the first,
	// one sent while the store opens waits for the start instead.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	fs := flag.NewFlagSet("paxcron server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var configFile string
	var bootstrap bool
	fs.StringVar(&configFile, "config", "", "the HCL configuration file")
	fs.BoolVar(&bootstrap, "bootstrap", false, "this is the first start of a new cluster")
	settings, err := defaultSettings()
	if err != nil {
		fmt.Fprintf(stderr, "paxcron server: %v\n", err)
		return 2
	}
	table := settings.table()
	// flagged holds each flag's values by setting, applied after the
	// file and the variables (and again when a SIGHUP reads them).
	flagged := map[string][]string{}
	for _, s := range table {
		keep := func(v string) error { flagged[s.key] = append(flagged[s.key], v); return nil }
		if s.boolean {
			// A bare -flag means true; the value otherwise goes after '='
			// (a separate "true" once swallowed the next argument).
			fs.BoolFunc(s.flagName(), s.usage, keep)
		} else {
			fs.Func(s.flagName(), s.usage, keep)
		}
	}
	fs.Usage = func() {
		fmt.Fprint(stderr, serverUsage)
		for _, s := range table {
			fmt.Fprintf(stderr, "  -%s, %s\n        %s%s\n", s.flagName(), s.envName(), s.usage, s.helpDefault())
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "paxcron server: unexpected argument %q (settings are flags: see -h)\n", fs.Arg(0))
		return 2
	}
	if err := settings.apply(table, configFile, getenv, flagged); err != nil {
		fmt.Fprintf(stderr, "paxcron server: %v\n", err)
		return 2
	}
	cfg, err := settings.serverConfig(stderr, version)
	if err != nil {
		fmt.Fprintf(stderr, "paxcron server: %v\n", err)
		return 2
	}
	startedKeys := digestKeys(cfg.ClusterKey, cfg.AcceptKeys)
	tuneGC(getenv)
	srv, err := server.New(cfg, bootstrap)
	if err != nil {
		fmt.Fprintf(stderr, "paxcron server: %v\n", err)
		if errors.Is(err, server.ErrConfig) {
			return 2
		}
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv.Start()
	fmt.Fprintf(stdout, "paxcron server: replica %d serving its API on %s (Paxos on %s)\n", cfg.ID, srv.HTTPAddr(), srv.PaxosAddr())
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-srv.Node().Done():
			running = false
		case <-hup:
			// ReloadTLS logs what it did, and what it refused.
			_ = srv.ReloadTLS()
			sayRestartNeeded(cfg.Logger, table, startedKeys, configFile, getenv, flagged)
		}
	}
	failed := srv.Node().Status().Err
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		cfg.Logger.Error("shutdown", "err", err)
	}
	if failed != nil {
		fmt.Fprintf(stderr, "paxcron server: the replica stopped: %v\n", failed)
		return 1
	}
	return 0
}

// apply fills o (whose table is table) from its sources after the
// defaults: the HCL file (none if configFile is ""), the PAXCRON_*
// variables, then the flags' values.
func (o *serverSettings) apply(table []setting, configFile string, getenv func(string) string, flagged map[string][]string) error {
	if configFile != "" {
		if err := o.loadHCL(configFile, table); err != nil {
			return err
		}
	}
	if err := applyEnv(table, getenv); err != nil {
		return err
	}
	for _, s := range table {
		raw := flagged[s.key]
		if len(raw) == 0 {
			continue
		}
		if s.list() {
			s.reset()
		}
		for _, v := range raw {
			if err := s.set(v); err != nil {
				return fmt.Errorf("-%s: %v", s.flagName(), err)
			}
		}
	}
	return nil
}

// keyDigests are SHA-256 digests of the cluster keys: a SIGHUP compares
// the keys the files hold then with those the replica started with,
// since a key replaced in its file leaves the setting, a path, as it
// was (found in review, TLS reload: such a SIGHUP said nothing). Digests,
// so that no key is kept for this, nor could be logged.
type keyDigests struct {
	key, accepted [sha256.Size]byte
}

func digestKeys(key []byte, accepted [][]byte) keyDigests {
	h := sha256.New()
	for _, k := range accepted {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(k))))
		h.Write(k)
	}
	return keyDigests{key: sha256.Sum256(key), accepted: [sha256.Size]byte(h.Sum(nil))}
}

// sayRestartNeeded reads the settings again, as at start, and logs those
// that changed since (in the file: the variables and flags are the
// process's own), and the cluster key files whose keys changed: a
// SIGHUP reloads only the TLS files, so they wait for a restart. Values
// are not logged (some are secrets).
func sayRestartNeeded(log *slog.Logger, started []setting, startedKeys keyDigests, configFile string, getenv func(string) string, flagged map[string][]string) {
	now, err := defaultSettings()
	if err != nil {
		log.Warn("SIGHUP: the settings could not be read again to compare them with those the replica started with", "err", err)
		return
	}
	table := now.table()
	if err := now.apply(table, configFile, getenv, flagged); err != nil {
		log.Warn("SIGHUP: the configuration file no longer reads; the replica runs on as it started, and would not start with it",
			"config", configFile, "err", err)
		return
	}
	var changed []string
	for i, s := range table {
		if s.show() != started[i].show() {
			changed = append(changed, s.key)
		}
	}
	for _, key := range changedKeyFiles(log, &now, startedKeys) {
		if !slices.Contains(changed, key) { // a path changed says it already
			changed = append(changed, key+" (the content of its files)")
		}
	}
	if len(changed) > 0 {
		log.Warn("SIGHUP reloads only the TLS files: these settings changed and take effect at the next restart",
			"config", configFile, "settings", strings.Join(changed, ", "))
	}
}

// changedKeyFiles names the cluster key settings whose files hold other
// keys than those the replica started with.
func changedKeyFiles(log *slog.Logger, now *serverSettings, started keyDigests) []string {
	key, accepted, err := now.clusterKeys()
	if err != nil {
		log.Warn("SIGHUP: the cluster key files no longer read; the replica runs on with the keys it started with, and would not start with these",
			"err", err)
		return nil
	}
	var changed []string
	digests := digestKeys(key, accepted)
	if digests.key != started.key {
		changed = append(changed, "cluster.key_file")
	}
	if digests.accepted != started.accepted {
		changed = append(changed, "cluster.accept_key_files")
	}
	return changed
}

// newLogger is the server's log: text or JSON at a level.
func newLogger(out io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log.level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(out, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(out, opts)), nil
	}
	return nil, fmt.Errorf("log.format %q: want text or json", format)
}

// serverGCPercent is the garbage collector's target the server runs at
// unless GOGC is set. At Go's 100, 512 concurrent writers had a fifth of
// the leader's CPU collecting, most of it marking the live cron state;
// at 200 the same writers made 1.12-1.28x the writes (BENCHMARKS.md), for
// a heap that peaks at about three times the live state instead of two.
const serverGCPercent = 200

// tuneGC sets serverGCPercent, unless the operator chose GOGC.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
	}
}

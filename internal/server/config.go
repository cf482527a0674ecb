package server

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	"paxcron/cron/launcher"
	"paxcron/cron/replica"
	"paxcron/internal/node"
	"paxcron/internal/transport"
	"paxcron/nomad"
	"paxcron/paxos"
	"paxcron/storage/backup"
)

// Config configures a replica's server. cmd/paxcron builds it from the
// HCL file, flags and PAXCRON_* variables; tests build it directly.
type Config struct {
	// ID is this replica's ID, one of Members.
	ID paxos.ReplicaID
	// Members are the cluster's replica IDs (3 or 5 in production).
	Members []paxos.ReplicaID
	// DataDir holds the replica's Pebble store (DataDir/store).
	DataDir string
	// ClusterKey authenticates replicas to one another (at least
	// transport.MinKeyBytes); every member holds the same.
	ClusterKey []byte
	// AcceptKeys are further cluster keys accepted from other replicas
	// (optional): during a key rotation, a replica proves itself with
	// ClusterKey and accepts a peer that proves itself with any of these
	// (see transport's package comment for the three steps).
	AcceptKeys [][]byte

	// PaxosAddr is where the Paxos transport listens; PaxosAdvertise the
	// address peers dial (default PaxosAddr, which then must not be a
	// wildcard).
	PaxosAddr, PaxosAdvertise string
	// HTTPAddr is where the API, metrics and status page are served;
	// HTTPAdvertise the address peers forward requests to.
	HTTPAddr, HTTPAdvertise string
	// GossipAddr is where memberlist listens (UDP and TCP);
	// GossipAdvertise the address others reach it at. Empty: no
	// membership, the peers' addresses come from Peers alone.
	GossipAddr, GossipAdvertise string
	// Join are memberlist addresses of other replicas to join through.
	Join []string
	// Peers gives other replicas' addresses up front (optional when
	// membership runs: it learns them and their changes).
	Peers map[paxos.ReplicaID]PeerAddrs

	// TLS, when set, is mutual TLS between replicas (transport) and TLS
	// for the API.
	TLS *TLSFiles
	// WriteTokens may change anything; ReadTokens only read. A request
	// carries one as "Authorization: Bearer <token>".
	WriteTokens, ReadTokens []string
	// AnonymousReads lets reads (the status page included) through
	// without a token.
	AnonymousReads bool
	// EnablePprof serves Go's runtime profiles under /debug/pprof/ (CPU,
	// heap, goroutines, execution trace), to a write token only: for
	// finding where a replica spends its time in place.
	EnablePprof bool
	// Insecure allows a server with no write token at all: every caller
	// may then change anything. For a local demo only.
	Insecure bool

	// Nomad is how the leader reaches Nomad.
	Nomad nomad.Config
	// SkipNomadChecks starts without checking Nomad's version and GC
	// threshold (a Nomad that is down at start-up is then found later).
	SkipNomadChecks bool

	// Snapshots is when the replica snapshots its state and compacts its
	// log (replica.DefaultSnapshotPolicy when zero).
	Snapshots replica.SnapshotPolicy
	// Backup, when set, is where every snapshot is also uploaded
	// (gocloud.dev/blob URL: file:///path, s3://, gs://, azblob://).
	Backup     string
	BackupKeep int
	// BackupDefault says Backup is the default folder beside DataDir
	// (backup.url unset): each replica's own disk, which replicas that
	// compare their settings take as one value, "the default", whatever
	// its path.
	BackupDefault bool

	// TickInterval is one Paxos tick (default DefaultTickInterval); Timing and Limits
	// the core's (paxos defaults when zero).
	TickInterval time.Duration
	Timing       paxos.Timing
	Limits       paxos.Limits
	// Launcher holds the launcher's limits (its defaults when zero);
	// MemoryHorizon comes from Nomad's.
	Launcher launcher.Config
	// TransportLimits bound the Paxos transport (its defaults when zero).
	TransportLimits transport.Limits

	// Logger receives the server's structured log (default: discard).
	Logger *slog.Logger
	// Version is reported in status.
	Version string

	// NewDispatcher, when set, replaces the Nomad dispatcher (tests).
	NewDispatcher func(done func(launcher.Result)) launcher.Dispatcher

	// TestClockOffsetFile is for fault testing only (cmd/paxcron-chaos):
	// a file holding a duration ("30s", "-1m") added to the launcher's
	// clock, re-read every TestClockPoll, so that a test can make this
	// replica's clock jump while it runs. Empty (the default): the real
	// clock. Never set it in production: a replica whose clock is off
	// launches early or late.
	TestClockOffsetFile string
}

// PeerAddrs are where another replica is reached.
type PeerAddrs struct {
	Paxos string
	HTTP  string
}

// check refuses an address of replica id's that no dial could use: one
// set must be host:port with a host and a port number.
func (a PeerAddrs) check(id paxos.ReplicaID) error {
	for _, x := range [...]struct{ what, addr string }{{"Paxos", a.Paxos}, {"HTTP", a.HTTP}} {
		if x.addr == "" {
			continue
		}
		host, port, err := net.SplitHostPort(x.addr)
		if n, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || n == 0 || host == "" {
			return fmt.Errorf("replica %d's %s address %q is not host:port", id, x.what, x.addr)
		}
	}
	return nil
}

// TLSFiles are PEM files: a CA that signed every replica's certificate,
// and this replica's certificate and key.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("server: invalid config")

// NeverSnapshots says why a snapshot policy with neither trigger is
// refused. Found in review (a long life): such a replica's log grew with
// every entry ever written, a restart replayed all of it, and no routine
// backup was taken (backups follow snapshots).
const NeverSnapshots = "snapshot.every_entries and snapshot.every are both 0: the replica would never take a snapshot, " +
	"so its log would grow with every entry ever written, a restart would replay all of it, and no backup would be taken; set one of them"

// DefaultTickInterval is Config.TickInterval's default: the unit the
// replica's timeouts and its snapshot period count in.
const DefaultTickInterval = 50 * time.Millisecond

// withDefaults fills the zero fields with their defaults.
func (c Config) withDefaults() Config {
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.Timing == (paxos.Timing{}) {
		c.Timing = paxos.DefaultTiming()
	}
	if c.Limits == (paxos.Limits{}) {
		c.Limits = paxos.DefaultLimits()
	}
	if c.Snapshots == (replica.SnapshotPolicy{}) {
		c.Snapshots = replica.DefaultSnapshotPolicy()
	}
	if c.TransportLimits == (transport.Limits{}) {
		c.TransportLimits = transport.DefaultLimits()
	}
	if c.PaxosAdvertise == "" {
		c.PaxosAdvertise = c.PaxosAddr
	}
	if c.HTTPAdvertise == "" {
		c.HTTPAdvertise = c.HTTPAddr
	}
	if c.GossipAdvertise == "" {
		c.GossipAdvertise = c.GossipAddr
	}
	if c.BackupKeep == 0 {
		c.BackupKeep = 5
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	return c
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.ID == paxos.None:
		return bad("the replica ID is required (replica_id, -replica-id, PAXCRON_REPLICA_ID)")
	case len(c.Members) == 0:
		return bad("the members are required (cluster.members, -cluster-members, PAXCRON_CLUSTER_MEMBERS): the replica IDs of the whole cluster")
	case !slices.Contains(c.Members, c.ID):
		return bad("replica %d is not among the members %v", c.ID, c.Members)
	case len(c.Members) == 1:
		return bad("1 member: a cluster needs 3 or 5 replicas (a leader waits for a quorum of others, and a lone replica has none)")
	case len(c.Members)%2 == 0:
		return bad("%d members: use an odd number (3 or 5), an even one tolerates no more failures than one fewer", len(c.Members))
	case c.DataDir == "":
		return bad("the data folder is required (data_dir, -data-dir, PAXCRON_DATA_DIR)")
	case len(c.ClusterKey) < transport.MinKeyBytes:
		return bad("the cluster key has %d bytes, want at least %d (cluster.key_file): every replica must hold the same", len(c.ClusterKey), transport.MinKeyBytes)
	case slices.ContainsFunc(c.AcceptKeys, func(k []byte) bool { return len(k) < transport.MinKeyBytes }):
		return bad("an accepted cluster key has fewer than %d bytes (cluster.accept_key_files)", transport.MinKeyBytes)
	case c.PaxosAddr == "" || c.HTTPAddr == "":
		return bad("the Paxos and HTTP listen addresses are required (bind.paxos, bind.http)")
	case len(c.WriteTokens) == 0 && !c.Insecure:
		return bad("no write token: set api.write_tokens (or api.insecure = true, for a local demo only)")
	case c.BackupKeep < 0:
		return bad("backup.keep %d is negative", c.BackupKeep)
	case c.Snapshots.EveryEntries == 0 && c.Snapshots.EveryTicks == 0:
		return bad("%s", NeverSnapshots)
	}
	if c.Backup != "" {
		// Before anything is opened: Open would refuse it too, but only
		// after the store and Nomad.
		if err := backup.CheckURL(c.Backup); err != nil {
			return bad("backup.url: %v", err)
		}
	}
	seen := map[paxos.ReplicaID]bool{}
	for _, id := range c.Members {
		if id == paxos.None || seen[id] || id > node.MaxReplicaID {
			return bad("members must be distinct, from 1 to %d: %v", node.MaxReplicaID, c.Members)
		}
		seen[id] = true
	}
	for _, id := range slices.Sorted(maps.Keys(c.Peers)) {
		if !seen[id] || id == c.ID {
			return bad("peer %d is not another member of %v", id, c.Members)
		}
		if err := c.Peers[id].check(id); err != nil {
			return bad("cluster.peers: %v", err)
		}
	}
	// The port as Listen and Dial read it (a number up to 65535, or a
	// service name): one past 65535 was taken, and the replica failed at
	// Listen (exit 1) or advertised what no peer can dial (found in
	// review).
	hostPort := func(addr string) error {
		_, port, err := net.SplitHostPort(addr)
		if err == nil {
			_, err = net.LookupPort("tcp", port)
		}
		return err
	}
	// In this order: an advertised address defaults to the bound one,
	// whose name the error then gives.
	addrs := [][2]string{{"bind.paxos", c.PaxosAddr}, {"bind.http", c.HTTPAddr}, {"advertise.paxos", c.PaxosAdvertise}, {"advertise.http", c.HTTPAdvertise}}
	advertised := map[string]string{"advertise.paxos": c.PaxosAdvertise, "advertise.http": c.HTTPAdvertise}
	if c.GossipAddr != "" {
		advertised["advertise.gossip"] = c.GossipAdvertise
		addrs = append(addrs, [2]string{"bind.gossip", c.GossipAddr}, [2]string{"advertise.gossip", c.GossipAdvertise})
	}
	for _, a := range addrs {
		if err := hostPort(a[1]); err != nil {
			return bad("%s %q is not host:port (%v)", a[0], a[1], err)
		}
	}
	for _, j := range c.Join {
		if err := hostPort(j); err != nil {
			return bad("cluster.join %q is not host:port (%v)", j, err)
		}
	}
	for what, addr := range advertised {
		if host, _, _ := net.SplitHostPort(addr); host == "" || net.ParseIP(host).IsUnspecified() {
			return bad("%s %q is not an address peers can reach: set it when binding to all interfaces", what, addr)
		}
	}
	for _, tok := range append(slices.Clone(c.WriteTokens), c.ReadTokens...) {
		if len(tok) < 16 {
			return bad("an API token has %d characters: use at least 16 (e.g. a UUID)", len(tok))
		}
	}
	if c.Launcher.Machine != nil || c.Launcher.Propose != nil || c.Launcher.Dispatcher != nil || c.Launcher.Applied != nil {
		return bad("Launcher's Machine, Propose, Dispatcher and Applied are the server's to set")
	}
	return nil
}

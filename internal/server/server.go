// Package server owns one paxcron replica as an operator runs it: the
// wiring of its Pebble store, its internal/node replica, the Paxos
// transport between replicas, membership, the Nomad dispatcher, the HTTP
// API, metrics and status page, and snapshot backups; start-up and
// graceful shutdown. Protocol rules live in the packages it wires; this
// one decides nothing about consensus or launches.
package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/internal/gossip"
	"paxcron/internal/node"
	"paxcron/internal/transport"
	"paxcron/nomad"
	"paxcron/paxos"
	"paxcron/storage"
	"paxcron/storage/pebblestore"
)

// Server is one running replica. Its methods are safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger

	store storage.Store
	tr    *transport.Transport
	node  *node.Node
	// nomad is nil when Config.NewDispatcher replaces it.
	nomad      *nomad.Client
	dispatcher *nomad.Dispatcher
	// nomadReady opens once Nomad passed the version and GC checks.
	nomadReady atomic.Bool

	// testClock shifts the launcher's clock (Config.TestClockOffsetFile);
	// nil: the real clock.
	testClock *testClock

	peers     *peers
	roles     roleLog
	slowSaves slowSaveLog
	slowTurns slowTurnLog
	gossip    *gossip.Gossip // nil without bind.gossip
	metrics   *metrics
	recent    recentLaunches
	backups   *backups // nil without a backup target
	http      *http.Server
	httpLn    net.Listener
	// apiTLS is the API's TLS config, nil without TLS.
	apiTLS *tls.Config
	// tlsNow is what the TLS files held when last read (nil without
	// TLS); ReloadTLS replaces it and pokes replicaCert.reloaded.
	tlsNow atomic.Pointer[tlsMaterial]
	// replicaCert and nomadCert watch the expiry of the certificates
	// this replica and its Nomad client present (nil without one);
	// nomadCertNow is the Nomad client's as last read.
	replicaCert, nomadCert *certWatch
	nomadCertNow           atomic.Pointer[certInfo]
	reloading              sync.Mutex
	// proxy carries the requests this replica forwards to the leader:
	// bundles of them (proxyClient, bundles) and large ones alone.
	proxy *http.Transport
	// forwarded are proxy's TLS connections, with TLS.
	forwarded   *forwardConns
	proxyClient *http.Client
	bundles     *bundler
	bundleKey   []byte
	callWorkers *workerPool
	streams     streams
	// api is the API's handler (routes), which also serves the calls of a
	// follower's bundle.
	api http.Handler

	// bundleAccepts are the bundle keys of every cluster key accepted,
	// bundleKey first.
	bundleAccepts [][]byte
	// authFailures logs the transport's refused handshakes.
	authFailures *authFailureLog
	// clusterID is the cluster's ID as the replica's state holds it (nil
	// until New reads it; zero until named): the transport's handshakes
	// read it. noteClusterID keeps it.
	clusterID atomic.Pointer[state.ClusterID]
	// gossipRef is gossip once started, for noteClusterID, which runs on
	// the replica's loop.
	gossipRef atomic.Pointer[gossip.Gossip]
	// renamedSaid: noteClusterID logged a state renamed, which it says
	// once.
	renamedSaid atomic.Bool
	// startChosen is the slot up to which the store knew the log chosen
	// when it opened; ready is set once the replica applied that far (or
	// its state holds a cluster ID): until then its transport neither
	// dials nor answers (transport.Config.Ready), since its cluster ID may
	// be in what it has yet to apply.
	startChosen uint64
	ready       atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// New opens the replica's store and binds its ports; Start starts it.
// bootstrap says the cluster is new: an empty store then starts as a
// voter. Without it an empty store starts rebuilding, as a learner that
// rejoins from its peers (a replica whose disk was lost must not vote on
// what it forgot). A store that holds anything refuses bootstrap
// (ErrConfig).
func New(cfg Config, bootstrap bool) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("replica", uint64(cfg.ID))}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if cfg.TestClockOffsetFile != "" {
		c, err := startTestClock(cfg.TestClockOffsetFile)
		if err != nil {
			return nil, err
		}
		s.testClock = c
	}
	empty, err := s.openStore()
	if err != nil {
		return nil, err
	}
	if bootstrap && !empty {
		// Found in review (the operator's procedures): the flag was
		// ignored here, so it could stay in a unit file or job, and the
		// day this replica's disk was lost it started on the empty one
		// as a voter that forgot what it had promised.
		return nil, fmt.Errorf("%w: -bootstrap starts a new cluster, but the store in %s already holds this replica's state: "+
			"start it without -bootstrap, and remove the flag from how it is started (left in, a replica whose disk is lost "+
			"would start again as a voter that forgot what it promised, instead of rejoining as a learner)",
			ErrConfig, filepath.Join(cfg.DataDir, "store"))
	}
	rebuilding := empty && !bootstrap
	if err := s.loadTLS(); err != nil {
		return nil, err
	}
	var dialTLS func() *tls.Config
	if s.apiTLS != nil {
		dialTLS = s.dialerTLS
	}
	s.forwarded = newForwardConns()
	s.proxy = newProxyTransport(dialTLS, s.forwarded)
	s.proxyClient = &http.Client{Transport: s.proxy}
	s.bundles = newBundler(s)
	s.bundleKey = bundleKey(cfg.ClusterKey)
	s.bundleAccepts = [][]byte{s.bundleKey}
	for _, k := range cfg.AcceptKeys {
		s.bundleAccepts = append(s.bundleAccepts, bundleKey(k))
	}
	s.callWorkers = newWorkerPool(workerIdle)
	s.peers = newPeers(cfg)
	s.authFailures = newAuthFailureLog(s.log, time.Now)
	s.authFailures.dataDir = cfg.DataDir
	s.metrics = newMetrics(s)
	if err := s.openNomad(); err != nil {
		return nil, err
	}
	if err := s.openBackups(); err != nil {
		return nil, err
	}
	if err := s.newNode(rebuilding); err != nil {
		return nil, err
	}
	// What the store's state says, before any handshake.
	s.noteClusterID(s.node.Status().ClusterID)
	s.noteTargetsNewest()
	s.noteReady(s.node.Status())
	time.AfterFunc(readyWaitMax, s.readyAnyway)
	if err := s.newTransport(); err != nil {
		return nil, err
	}
	if err := s.listenHTTP(); err != nil {
		return nil, err
	}
	// Port 0 asks for any free port: advertise the one given.
	s.cfg.PaxosAdvertise = realPort(s.cfg.PaxosAdvertise, s.tr.Addr().String())
	s.cfg.HTTPAdvertise = realPort(s.cfg.HTTPAdvertise, s.httpLn.Addr().String())
	s.peers.selfAPI, s.peers.selfPax = s.cfg.HTTPAdvertise, s.cfg.PaxosAdvertise
	switch {
	case rebuilding:
		s.log.Warn("the store is empty: rejoining as a learner, catching up from the peers before voting (start a new cluster's replicas with -bootstrap)", "data_dir", cfg.DataDir)
	case empty:
		s.log.Info("the store is empty: starting a new cluster (bootstrap)", "data_dir", cfg.DataDir)
	}
	ok = true
	return s, nil
}

// openStore opens the replica's store and reports whether it holds
// nothing. Damage found by either (Open, or the first read of the hard
// state and snapshot) is named with what to do about it.
func (s *Server) openStore() (empty bool, err error) {
	dir := filepath.Join(s.cfg.DataDir, "store")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("server: creating the data folder: %w", err)
	}
	store, err := pebblestore.Open(dir, pebblestore.Options{FS: vfs.Default, Logger: pebbleLogger{s.log}})
	if err == nil {
		s.store = store
		empty, s.startChosen, err = storeIsEmpty(store)
	}
	if err != nil && (errors.Is(err, syscall.EAGAIN) || strings.Contains(err.Error(), "lock held by current process")) {
		// Pebble's lock file: found in review (the operator's
		// procedures), the error named the lock alone.
		return false, fmt.Errorf("server: the store in %s is in use: another paxcron server runs on this data folder "+
			"(a replica started twice, or two replicas given one data_dir): stop it, or give this replica its own folder: %w", dir, err)
	}
	if errors.Is(err, storage.ErrCorrupt) {
		return false, fmt.Errorf("server: the store in %s is damaged: move that folder aside (for inspection) and start again: "+
			"a replica on an empty store rejoins from its peers, and votes again once it cannot contradict what it forgot "+
			"(every replica damaged: restore from a backup, see paxcron operator snapshot restore): %w", dir, err)
	}
	return empty, err
}

// realPort replaces port 0 in advertised with bound's port.
func realPort(advertised, bound string) string {
	host, port, err := net.SplitHostPort(advertised)
	if err != nil || port != "0" {
		return advertised
	}
	_, real, err := net.SplitHostPort(bound)
	if err != nil {
		return advertised
	}
	return net.JoinHostPort(host, real)
}

// storeIsEmpty reports whether the store holds nothing: no promise, no
// entry, no snapshot; and the slot up to which it knows the log chosen.
func storeIsEmpty(st storage.Store) (empty bool, chosen uint64, err error) {
	hs, snap, err := st.InitialState()
	if err != nil {
		return false, 0, err
	}
	last, err := st.LastSlot()
	if err != nil {
		return false, 0, err
	}
	return hs == (paxos.HardState{}) && snap.Index == 0 && last == 0, hs.Chosen, nil
}

func (s *Server) openNomad() error {
	if s.cfg.NewDispatcher != nil {
		s.nomadReady.Store(true)
		return nil
	}
	client, err := nomad.New(s.cfg.Nomad)
	if err != nil {
		return err
	}
	s.nomad = client
	s.noteNomadCert()
	return nil
}

func (s *Server) newNode(rebuilding bool) error {
	lc := s.cfg.Launcher
	if s.nomad != nil {
		lc.MemoryHorizon = s.nomad.MemoryHorizon()
	} else if lc.MemoryHorizon == 0 {
		lc.MemoryHorizon = nomad.DefaultConfig().MemoryHorizon()
	}
	n, err := node.New(node.Config{
		ID: s.cfg.ID, Membership: paxos.Membership{Voters: s.cfg.Members}, Store: s.store,
		Send:         s.send,
		TickInterval: s.cfg.TickInterval, Timing: s.cfg.Timing, Limits: s.cfg.Limits,
		Snapshots: s.cfg.Snapshots, Seed: rand.Uint64(), Rebuilding: rebuilding,
		OnSnapshot: s.snapshotTaken,
		OnSaveTimed: func(entries int, took time.Duration) {
			s.metrics.saveSeconds.Observe(took.Seconds())
			s.metrics.saveEntries.Observe(float64(entries))
			s.slowSaves.note(s.log, entries, took, time.Duration(s.cfg.Timing.ElectionTicks)*s.cfg.TickInterval)
		},
		OnCommit: func(took time.Duration) { s.metrics.commitSeconds.Observe(took.Seconds()) },
		SlowTurn: time.Duration(s.cfg.Timing.ElectionTicks) * s.cfg.TickInterval / 4,
		OnSlowTurn: func(t node.Turn) {
			s.metrics.slowTurns.WithLabelValues(t.Woke.String()).Inc()
			s.slowTurns.note(s.log, t, time.Duration(s.cfg.Timing.ElectionTicks)*s.cfg.TickInterval)
		},
		OnChange: func() {
			if s.node != nil {
				st := s.node.Status()
				s.metrics.status(st)
				s.roles.note(s.log, st, s.dropCounts)
				s.noteClusterID(st.ClusterID)
				s.noteReady(st)
			}
		},
		Cron: &node.CronOptions{
			Now:           s.launcherNow(),
			Launcher:      lc,
			NewDispatcher: s.newDispatcher,
			Applied:       s.applied,
			CanLaunch:     s.nomadReady.Load,
		},
	})
	if err != nil {
		return err
	}
	s.node = n
	return nil
}

// dropCounts are the messages this replica dropped: its inbox full
// (node), or its transport's queue to a peer full or the peer cut off.
func (s *Server) dropCounts() []any {
	ts := s.tr.Stats()
	return []any{"inbox_dropped", s.node.Dropped(), "send_dropped", ts.Dropped, "send_lost", ts.Lost}
}

// launcherNow is the launcher's clock, which the dispatcher's deadlines
// are on too: nil (time.Now) unless a test shifts it.
func (s *Server) launcherNow() func() time.Time {
	if s.testClock == nil {
		return nil
	}
	return s.testClock.now
}

func (s *Server) newDispatcher(_ paxos.ReplicaID, done func(launcher.Result)) launcher.Dispatcher {
	if s.cfg.NewDispatcher != nil {
		return s.cfg.NewDispatcher(done)
	}
	d, err := nomad.NewDispatcher(nomad.DispatcherConfig{Caller: timedCaller{c: s.nomad, m: s.metrics}, Deliver: done, Now: s.launcherNow()})
	if err != nil {
		panic(err) // the config is fixed here; an error is a bug
	}
	s.dispatcher = d
	return d
}

func (s *Server) newTransport() error {
	peers := map[paxos.ReplicaID]string{}
	for _, id := range s.cfg.Members {
		if id != s.cfg.ID {
			peers[id] = s.cfg.Peers[id].Paxos
		}
	}
	cfg := transport.Config{
		ID: s.cfg.ID, Peers: peers, Key: s.cfg.ClusterKey, AcceptKeys: s.cfg.AcceptKeys, ListenAddr: s.cfg.PaxosAddr,
		TLS: s.transportTLS(), Handler: s.node.Deliver, Limits: s.cfg.TransportLimits,
		OnAuthFailure: s.authFailures.note, OnReachability: s.logReachability, Agreed: agreedSettings(s.cfg),
		ClusterID: func() transport.ClusterID { return transport.ClusterID(s.ClusterID()) },
		Ready:     s.ready.Load,
	}
	if cfg.TLS != nil {
		cfg.DialTLS = s.dialerTLS
	}
	tr, err := transport.New(cfg)
	if err != nil {
		return err
	}
	s.tr = tr
	return nil
}

// ClusterID is the cluster's ID as this replica's state holds it, zero
// until it is named (or, rebuilding, until it catches up that far).
func (s *Server) ClusterID() state.ClusterID {
	if id := s.clusterID.Load(); id != nil {
		return *id
	}
	return state.ClusterID{}
}

// noteClusterID keeps the ID the replica's state holds, as its status
// published it. Learned while running (a new cluster named, a replica
// rebuilding or upgraded from before the ID), it is logged once, every
// connection is made again so that each is checked against it (one
// made while it was unknown was checked against nothing), and gossip
// carries it. It runs on the replica's loop (OnChange) and must not
// block.
func (s *Server) noteClusterID(id state.ClusterID) {
	prev := s.ClusterID()
	if id == prev || id.IsZero() {
		return
	}
	if !prev.IsZero() {
		// The state is never renamed: a restored snapshot comes from this
		// cluster's leader. Said once, and the first kept.
		if s.renamedSaid.Swap(true) {
			return
		}
		s.log.Error("the replica's state now holds another cluster ID than it did: this replica's state was replaced by another cluster's",
			"cluster_id", prev.String(), "now", id.String(), "data_dir", s.cfg.DataDir)
		return
	}
	s.clusterID.Store(&id)
	if s.tr == nil {
		return // read from the store at start: Start logs it
	}
	s.log.Info("cluster ID learned: replicas of other clusters are refused from now on", "cluster_id", id.String())
	s.tr.Redial()
	if g := s.gossipRef.Load(); g != nil {
		go func() { _ = g.SetClusterID(id, time.Second) }()
	}
}

// readyWaitMax bounds how long a replica waits to apply what its store
// held as chosen before its transport connects anyway: applying is local
// and takes milliseconds to seconds; past this, something is wrong, and
// staying cut off would not help.
const readyWaitMax = time.Minute

// noteReady marks the replica ready to connect once it applied what its
// store held as chosen when it opened, or its state holds a cluster ID
// (transport.Config.Ready).
func (s *Server) noteReady(st node.Status) {
	if s.ready.Load() || st.Applied < s.startChosen && st.ClusterID.IsZero() {
		return
	}
	s.ready.Store(true)
}

// readyAnyway lets the transport connect readyWaitMax after New, ready
// or not, saying so.
func (s *Server) readyAnyway() {
	if s.ctx.Err() != nil || s.ready.Swap(true) {
		return
	}
	s.log.Warn("the replica has not applied what its store holds as chosen within "+readyWaitMax.String()+": connecting to its peers anyway, its cluster ID unchecked until it does",
		"applied", s.node.Status().Applied, "store_chosen", s.startChosen)
}

// agreedSettings are the settings every replica must share besides the
// members and the key, which the transport's handshake binds: the tick
// and the core's timing. Each replica counts the lease in its own ticks:
// a leader whose lease lasted longer in wall time than an acceptor's
// would serve reads after that acceptor had promised a successor. Found
// in review (the operator's procedures): nothing checked that they agree.
// No setting of paxcron server changes them, but versions may, and in a
// rolling upgrade across such a change the two sides refuse each other
// rather than mix leases.
func agreedSettings(c Config) []byte {
	b := []byte("paxcron agreed settings v1: tick, heartbeat, election, lease, drift")
	b = binary.BigEndian.AppendUint64(b, uint64(c.TickInterval))
	for _, v := range []int{c.Timing.HeartbeatTicks, c.Timing.ElectionTicks, c.Timing.LeaseTicks, c.Timing.MaxClockDriftPPM} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// send is the node's transport: it never blocks (a message the transport
// cannot queue is dropped, and the protocol retransmits).
func (s *Server) send(m paxos.Message) {
	if s.tr != nil {
		_ = s.tr.Send(m)
	}
}

func (s *Server) listenHTTP() error {
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("server: listening for HTTP on %s: %w", s.cfg.HTTPAddr, err)
	}
	if s.apiTLS != nil {
		ln = tls.NewListener(ln, s.apiTLS)
	}
	s.httpLn = ln
	s.api = s.routes()
	s.http = &http.Server{
		Handler:           s.api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return nil
}

// Start starts the replica: its loop, the HTTP server and the Nomad
// checks.
func (s *Server) Start() {
	s.node.Start()
	s.wg.Go(func() {
		if err := s.http.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("the HTTP server stopped", "err", err)
		}
	})
	switch {
	case s.nomad != nil && s.cfg.SkipNomadChecks:
		s.nomadReady.Store(true)
		s.log.Warn("Nomad's version and GC threshold are not checked (nomad.skip_checks): launches go ahead, trusting that Nomad keeps finished children for the memory horizon",
			"memory_horizon", s.nomad.MemoryHorizon().String())
	case s.nomad != nil:
		s.wg.Go(s.checkNomad)
	}
	if s.backups != nil {
		s.wg.Go(s.backupLoop)
	}
	if s.testClock != nil {
		s.log.Warn("FAULT TESTING: the launcher's clock is shifted by the offset in test.clock_offset_file; never run so in production",
			"file", s.testClock.path, "offset", time.Duration(s.testClock.offset.Load()).String())
		s.wg.Go(s.watchTestClock)
	}
	if s.tlsNow.Load() != nil {
		s.warnCert(time.Now())
	}
	for _, w := range []*certWatch{s.replicaCert, s.nomadCert} {
		if w != nil {
			s.wg.Go(func() { s.watchCertExpiry(w) })
		}
	}
	if err := s.startGossip(); err != nil {
		s.log.Error("gossip did not start: peers are known only from the configuration, and crashes by the Paxos timeouts", "err", err)
	}
	s.log.Info("replica started", "paxos", s.tr.Addr().String(), "http", s.httpLn.Addr().String(), "members", s.cfg.Members,
		"cluster_id", orNone(s.ClusterID().String(), "none yet (named by the first leader, or learned from the peers)"))
}

// checkNomad opens the launcher's gate once Nomad is recent enough and
// keeps finished children long enough, checking every few seconds until
// it is; until then this replica never launches.
func (s *Server) checkNomad() {
	for {
		ctx, cancel := context.WithTimeout(s.ctx, 20*time.Second)
		version, err := s.nomad.CheckVersion(ctx)
		if err == nil {
			_, _, err = s.nomad.CheckGCThreshold(ctx)
		}
		cancel()
		if err == nil {
			s.nomadReady.Store(true)
			s.log.Info("Nomad checked: launches may go ahead", "nomad_version", version, "memory_horizon", s.nomad.MemoryHorizon().String())
			return
		}
		s.log.Error("this replica will not launch until Nomad passes its checks", "err", err)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// HTTPAddr and PaxosAddr are where the server listens (the real ports
// when the config asked for port 0).
func (s *Server) HTTPAddr() string  { return s.httpLn.Addr().String() }
func (s *Server) PaxosAddr() string { return s.tr.Addr().String() }

// TransportStats are the Paxos transport's counters (refused frames and
// handshakes among them).
func (s *Server) TransportStats() transport.Stats { return s.tr.Stats() }

// Node is the replica's node (tests and the status page read it).
func (s *Server) Node() *node.Node { return s.node }

// SetPeer tells the server where another replica now is (membership, or
// a test).
func (s *Server) SetPeer(id paxos.ReplicaID, addrs PeerAddrs) error {
	if err := s.peers.set(id, addrs); err != nil {
		return err
	}
	if addrs.Paxos != "" {
		return s.tr.SetPeerAddr(id, addrs.Paxos)
	}
	return nil
}

// snapshotTaken is the node's OnSnapshot: it must not block.
func (s *Server) snapshotTaken(index uint64) {
	s.metrics.snapshotTime.SetToCurrentTime()
	if s.backups != nil {
		select {
		case s.backups.wake <- struct{}{}:
		default: // an upload is already due: it takes the newest snapshot
		}
	}
	s.log.Debug("snapshot taken", "index", index)
}

// applied logs each launch as it is recorded: at info on the replica
// that launches, at debug elsewhere. It runs on the replica's loop.
func (s *Server) applied(_ paxos.ReplicaID, slot uint64, c state.Command, err error) {
	s.metrics.applied(c, err, time.Now())
	if f, ok := c.(state.LaunchFinished); ok && err == nil {
		s.recent.add(f)
	}
	level := slog.LevelDebug
	if s.node != nil && s.node.Status().Launching {
		level = slog.LevelInfo
	}
	if !s.log.Enabled(s.ctx, level) {
		return
	}
	switch c := c.(type) {
	case state.LaunchStarted:
		if err == nil {
			s.log.Log(s.ctx, level, "launch started", "job", c.Job, "scheduled_at", c.ScheduledAt, "identity", c.Identity, "slot", slot)
		}
	case state.LaunchFinished:
		if err == nil {
			s.log.Log(s.ctx, level, "launch "+string(c.Outcome.Kind), "job", c.Job, "scheduled_at", c.ScheduledAt,
				"identity", state.LaunchIdentity(c.Job, c.ScheduledAt, c.LaunchKind), "outcome", string(c.Outcome.Kind),
				"child", c.Outcome.ChildID, "reason", c.Outcome.Reason, "slot", slot)
		}
	}
}

// Shutdown stops the replica gracefully, within ctx: the API stops
// taking requests (those under way finish); a leader then drains (starts
// no launch, concludes those under way, for at most DrainTimeout), steps
// down naming a successor, and waits until another replica leads (at
// most HandoverTimeout); then the replica stops. A launch still open is
// concluded by the next leader, which looks every open launch up in
// Nomad.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	if s.http != nil {
		errs = append(errs, s.http.Shutdown(ctx))
	}
	// The streams' calls under way are answered before the node stops.
	errs = append(errs, s.streams.letGo(ctx))
	if s.node != nil && s.node.Status().Role == paxos.Leader {
		s.handOver(ctx)
	}
	if s.gossip != nil {
		// Leaving, the others hear of it at once (not after a suspicion).
		errs = append(errs, s.gossip.Close(time.Second))
		s.gossip = nil
	}
	errs = append(errs, s.Close())
	return errors.Join(errs...)
}

// Graceful shutdown bounds.
const (
	DrainTimeout    = 10 * time.Second
	HandoverTimeout = 5 * time.Second
)

// handOver drains the launcher, steps down and waits for a successor.
func (s *Server) handOver(ctx context.Context) {
	drainCtx, cancel := context.WithTimeout(ctx, DrainTimeout)
	defer cancel()
	_ = s.node.Cron(drainCtx, func(l *launcher.Launcher) { l.SetDraining(true) })
	drained := false
	for !drained && drainCtx.Err() == nil {
		_ = s.node.Cron(drainCtx, func(l *launcher.Launcher) { drained = l.Drained() })
		if !drained {
			sleepCtx(drainCtx, 50*time.Millisecond)
		}
	}
	successor, err := s.node.StepDown(ctx)
	if err != nil {
		s.log.Warn("stepping down", "err", err)
		return
	}
	s.log.Info("stepped down", "successor", uint64(successor), "drained", drained)
	waitCtx, cancel2 := context.WithTimeout(ctx, HandoverTimeout)
	defer cancel2()
	for waitCtx.Err() == nil {
		if l := s.node.Status().Leader; l != paxos.None && l != s.cfg.ID {
			s.log.Info("handed over", "leader", uint64(l))
			return
		}
		sleepCtx(waitCtx, 20*time.Millisecond)
	}
	s.log.Warn("no other replica leads yet; stopping anyway", "successor", uint64(successor))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Close stops the replica as a crash would (Shutdown first hands over
// gracefully): the loop, the transport, the HTTP server, then the store.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		var errs []error
		if s.gossip != nil {
			_ = s.gossip.Close(0)
		}
		s.streams.closeAll()
		if s.http != nil {
			errs = append(errs, s.http.Close())
		} else if s.httpLn != nil {
			errs = append(errs, s.httpLn.Close())
		}
		if s.proxy != nil {
			s.proxy.CloseIdleConnections()
		}
		if s.node != nil {
			s.node.Stop()
			if err := s.node.Status().Err; err != nil && !errors.Is(err, node.ErrStopped) {
				errs = append(errs, err)
			}
		}
		if s.tr != nil {
			errs = append(errs, s.tr.Close())
		}
		if s.dispatcher != nil {
			s.dispatcher.Close()
		}
		if s.nomad != nil {
			s.nomad.Close()
		}
		s.wg.Wait()
		if s.backups != nil {
			errs = append(errs, s.backups.store.Close())
		}
		if s.store != nil {
			errs = append(errs, s.store.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// pebbleLogger sends Pebble's messages to the server's log.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
	pebble.DefaultLogger.Fatalf(format, args...)
}

// startGossip joins the other replicas' gossip, when bind.gossip is set:
// it learns where they are (and where they move), and hears when one is
// declared dead, which the core takes as a suspicion of it.
func (s *Server) startGossip() error {
	if s.cfg.GossipAddr == "" {
		return nil
	}
	members := make([]uint64, len(s.cfg.Members))
	for i, id := range s.cfg.Members {
		members[i] = uint64(id)
	}
	g, err := gossip.Start(gossip.Config{
		Self:     gossip.Peer{ID: uint64(s.cfg.ID), ClusterID: s.ClusterID(), PaxosAddr: s.cfg.PaxosAdvertise, APIAddr: s.cfg.HTTPAdvertise},
		Members:  members,
		BindAddr: s.cfg.GossipAddr, AdvertiseAddr: s.cfg.GossipAdvertise, Join: s.cfg.Join,
		Key: s.cfg.ClusterKey, AcceptKeys: s.cfg.AcceptKeys, Logger: s.log.With("component", "gossip"),
		Events:   gossip.Events{Updated: s.peerUpdated, Dead: s.peerDead},
		Settings: sharedSettings(s.cfg),
	})
	if err != nil {
		return err
	}
	s.gossip = g
	s.gossipRef.Store(g)
	if id := s.ClusterID(); !id.IsZero() {
		// Learned while gossip started: noteClusterID did not see it.
		go func() { _ = g.SetClusterID(id, time.Second) }()
	}
	return nil
}

// orNone is s, or none when s is empty.
func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// peerUpdated points the transport at a peer's current address.
func (s *Server) peerUpdated(p gossip.Peer) {
	if err := s.SetPeer(paxos.ReplicaID(p.ID), PeerAddrs{Paxos: p.PaxosAddr, HTTP: p.APIAddr}); err != nil {
		s.log.Warn("a peer's addresses from gossip", "peer", p.ID, "err", err)
		return
	}
	s.log.Info("peer found", "peer", p.ID, "paxos", p.PaxosAddr, "api", p.APIAddr)
}

// peerDead feeds gossip's verdict to the core as a suspicion (memberlist's
// goroutine must not wait on the loop).
func (s *Server) peerDead(id uint64) {
	s.peers.setHealth(paxos.ReplicaID(id), healthSuspect)
	s.log.Warn("peer declared dead by gossip", "peer", id)
	go func() {
		ctx, cancel := context.WithTimeout(s.ctx, time.Second)
		defer cancel()
		_ = s.node.ReportSuspect(ctx, paxos.ReplicaID(id))
	}()
}

package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"paxcron/cron/launcher"
	"paxcron/cron/state"
	"paxcron/internal/node"
	"paxcron/internal/transport"
	"paxcron/nomad"
	"paxcron/paxos"
)

// metrics are the replica's Prometheus metrics, on a registry of its own
// (several servers in one test process do not collide). Launch counters
// follow the replicated state, so every replica counts the same launches:
// read one replica, or take the maximum, never the sum.
type metrics struct {
	reg *prometheus.Registry

	commitSeconds      prometheus.Histogram
	saveSeconds        prometheus.Histogram
	saveEntries        prometheus.Histogram
	leaderChanges      prometheus.Counter
	isLeader           prometheus.Gauge
	launching          prometheus.Gauge
	leaseSeconds       prometheus.Gauge
	chosen, appliedIdx prometheus.Gauge
	launches           *prometheus.CounterVec
	startLateness      prometheus.Histogram
	dispatchLate       prometheus.Histogram
	nomadSeconds       *prometheus.HistogramVec
	nomadErrors        *prometheus.CounterVec
	snapshotIndex      prometheus.Gauge
	snapshotTime       prometheus.Gauge
	backupTime         prometheus.Gauge
	backupErrors       prometheus.Counter
	bundleCalls        prometheus.Histogram
	slowTurns          *prometheus.CounterVec
	reloads            *prometheus.CounterVec

	mu         sync.Mutex
	lastLeader paxos.ReplicaID
}

// latencyBuckets span a fast loopback commit to a slow Nomad: 0.5 ms to
// about 33 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 17)

// latenessBuckets span a launch on time to one an hour late.
var latenessBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "paxcron_commit_seconds",
		Help: "Time from a command proposed through the API to its being applied here.", Buckets: latencyBuckets})
	m.saveSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "paxcron_storage_save_seconds",
		Help: "Time of one synced write (a batch) to the replica's store.", Buckets: latencyBuckets})
	m.saveEntries = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "paxcron_storage_save_entries",
		Help: "Log entries per synced write (the batch size).", Buckets: prometheus.ExponentialBuckets(1, 2, 13)})
	m.leaderChanges = prometheus.NewCounter(prometheus.CounterOpts{Name: "paxcron_leader_changes_total",
		Help: "Changes of the leader this replica follows (or is)."})
	m.isLeader = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paxcron_leader", Help: "1 if this replica leads."})
	m.launching = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paxcron_launching",
		Help: "1 if this replica launches: it leads, holds the lease, caught up and Nomad passed its checks."})
	m.leaseSeconds = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paxcron_lease_remaining_seconds",
		Help: "How long this replica still holds the leader's lease (0 if it does not)."})
	m.chosen = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paxcron_log_chosen_index", Help: "The replica's chosen index."})
	m.appliedIdx = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paxcron_log_applied_index", Help: "The replica's applied index."})
	m.launches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paxcron_launches_total",
		Help: "Launches recorded finished, by outcome (dispatched, failed, skipped, unknown); the same on every replica."}, []string{"outcome"})
	m.startLateness = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "paxcron_launch_start_lateness_seconds",
		Help: "How late after its scheduled time the leader started a launch.", Buckets: latenessBuckets})
	m.dispatchLate = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "paxcron_launch_dispatch_lateness_seconds",
		Help: "How late after its scheduled time a launch was recorded dispatched (measured where applied).", Buckets: latenessBuckets})
	m.nomadSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "paxcron_nomad_call_seconds",
		Help: "Time of the leader's calls to Nomad, retries included, by operation.", Buckets: latencyBuckets}, []string{"op"})
	m.nomadErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paxcron_nomad_call_errors_total",
		Help: "The leader's calls to Nomad that failed, by operation and kind (refused: permanent; unknown: outcome not known)."}, []string{"op", "kind"})
	m.snapshotIndex = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paxcron_snapshot_index", Help: "Log index of the newest local snapshot."})
	m.snapshotTime = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paxcron_snapshot_timestamp_seconds",
		Help: "When the newest local snapshot was taken (Unix seconds; age = time() - this)."})
	m.backupTime = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paxcron_backup_timestamp_seconds",
		Help: "When the newest backup was uploaded (Unix seconds; age = time() - this)."})
	m.backupErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "paxcron_backup_errors_total", Help: "Failed backup uploads."})
	m.bundleCalls = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "paxcron_forward_bundle_calls",
		Help: "API calls per bundle this replica forwarded to the leader.", Buckets: prometheus.ExponentialBuckets(1, 2, 8)})
	m.slowTurns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paxcron_slow_loop_turns_total",
		Help: "Turns of the replica's loop that took a quarter of the election timeout or more (it reads no message meanwhile), by the input that woke it."}, []string{"woken_by"})
	for _, c := range []prometheus.Collector{m.commitSeconds, m.saveSeconds, m.saveEntries, m.leaderChanges, m.isLeader,
		m.launching, m.leaseSeconds, m.chosen, m.appliedIdx, m.launches, m.startLateness, m.dispatchLate, m.nomadSeconds,
		m.nomadErrors, m.snapshotIndex, m.snapshotTime, m.backupTime, m.backupErrors, m.bundleCalls, m.slowTurns} {
		f(c)
	}
	for _, o := range []state.OutcomeKind{state.OutcomeDispatched, state.OutcomeFailed, state.OutcomeSkipped, state.OutcomeUnknown} {
		m.launches.WithLabelValues(string(o))
	}
	if s.tlsNow.Load() != nil {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paxcron_tls_certificate_expiry_timestamp_seconds",
			Help: "When the TLS certificate this replica presents stops verifying (it, or a CA certificate of its chain, expires; Unix seconds): renew it before, and reload it (SIGHUP). Only with TLS."},
			func() float64 { return float64(s.tlsNow.Load().info.expires.Unix()) }))
	}
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paxcron_config_reloads_total",
		Help: "Reloads of TLS files (SIGHUP), by the files (tls: the replica's; nomad: the Nomad client's) and result (ok, or failed: the files before are kept)."},
		[]string{"files", "result"})
	f(m.reloads)
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paxcron_open_launches",
		Help: "Launches started and not yet recorded finished; at 1,000,000 the leader starts none until some finish, and triggers and backfills are refused with 507."}, s.stateGauge((*state.Machine).OpenCount)))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paxcron_jobs", Help: "Cron jobs."}, s.stateGauge((*state.Machine).JobCount)))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paxcron_spec_bytes",
		Help: "Bytes the jobs' specs take (names, schedules, zones, payloads, meta, Nomad targets, and the older versions open launches still dispatch); a job write that would take them past 512 MiB is refused with 507."},
		s.stateGauge((*state.Machine).SpecBytes)))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paxcron_history_reason_bytes",
		Help: "Bytes of the reasons the jobs' histories keep; past 32 MiB a launch's failure or skip is kept with the reason \"reason not kept\" (its job's older entries give theirs up first)."},
		s.stateGauge((*state.Machine).HistoryReasonBytes)))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paxcron_snapshot_bytes",
		Help: "Bytes of the newest snapshot of the cron state taken or restored here; a replica takes one of at most 1 GiB from a peer, so a state near that leaves a follower that needs one unable to catch up."},
		s.stateGauge((*state.Machine).SnapshotBytes)))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paxcron_api_streams",
		Help: "API streams open on this replica."}, func() float64 { return float64(s.streams.count()) }))
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "paxcron_api_streams_opened_total",
		Help: "API streams opened on this replica."}, func() float64 { return float64(s.streams.opened.Load()) }))
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "paxcron_api_stream_calls_total",
		Help: "API calls read from streams on this replica."}, func() float64 { return float64(s.streams.calls.Load()) }))
	for _, c := range []struct {
		name, help string
		get        func(transport.Stats) uint64
	}{
		{"sent", "Frames sent to peers.", func(t transport.Stats) uint64 { return t.Sent }},
		{"received", "Messages received from peers.", func(t transport.Stats) uint64 { return t.Received }},
		{"dropped", "Messages dropped because a peer's send queue was full.", func(t transport.Stats) uint64 { return t.Dropped }},
		{"auth_failures", "Handshakes this replica refused (a wrong cluster key, an unknown replica, other members or settings).", func(t transport.Stats) uint64 { return t.AuthFailures }},
		{"handshakes_closed", "Handshakes the other end closed before they completed (it refused this replica, or was stopping).", func(t transport.Stats) uint64 { return t.HandshakesClosed }},
		{"undecodable", "Frames that did not decode as a message.", func(t transport.Stats) uint64 { return t.Undecodable }},
		{"misaddressed", "Messages whose sender or receiver did not match their connection.", func(t transport.Stats) uint64 { return t.Misaddressed }},
		{"oversized", "Connections closed for a frame over the size limit.", func(t transport.Stats) uint64 { return t.Oversized }},
		{"rejected", "Inbound connections closed over the limit.", func(t transport.Stats) uint64 { return t.Rejected }},
		{"lost", "Frames taken from a send queue whose connection then failed.", func(t transport.Stats) uint64 { return t.Lost }},
		{"dial_failures", "Dials or handshakes to a peer that did not yield a connection.", func(t transport.Stats) uint64 { return t.DialFailures }},
		{"reconnects", "Outbound connections made to a peer after its first.", func(t transport.Stats) uint64 { return t.Reconnects }},
		{"superseded", "Messages dropped because they arrived on a peer's connection that a newer one had replaced.", func(t transport.Stats) uint64 { return t.Superseded }},
	} {
		get := c.get
		f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "paxcron_transport_" + c.name + "_total", Help: c.help},
			func() float64 {
				if s.tr == nil {
					return 0
				}
				return float64(get(s.tr.Stats()))
			}))
	}
	for _, name := range sharedSettingNames() {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paxcron_settings_mismatch", ConstLabels: prometheus.Labels{"setting": name},
			Help: "Peers whose value of this setting differs from this replica's, as gossip heard them (0 without gossip): every replica must hold it alike, since only the leader backs up and launches."},
			func() float64 { return float64(peersDiffering(s.settingsDiffer(), name)) }))
	}
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// status updates the role gauges from a published status.
func (m *metrics) status(st node.Status) {
	m.isLeader.Set(b2f(st.Role == paxos.Leader))
	m.launching.Set(b2f(st.Launching))
	m.leaseSeconds.Set(st.Lease.Seconds())
	m.chosen.Set(float64(st.Chosen))
	m.appliedIdx.Set(float64(st.Applied))
	m.snapshotIndex.Set(float64(st.SnapshotIndex))
	m.mu.Lock()
	defer m.mu.Unlock()
	if st.Leader != m.lastLeader && st.Leader != paxos.None {
		m.leaderChanges.Inc()
		m.lastLeader = st.Leader
	}
}

// applied counts a launch command applied.
func (m *metrics) applied(c state.Command, err error, now time.Time) {
	if err != nil {
		return
	}
	switch c := c.(type) {
	case state.LaunchStarted:
		m.startLateness.Observe(max(0, c.At.Sub(c.ScheduledAt).Seconds()))
	case state.LaunchFinished:
		m.launches.WithLabelValues(string(c.Outcome.Kind)).Inc()
		if c.Outcome.Kind == state.OutcomeDispatched {
			m.dispatchLate.Observe(max(0, now.Sub(c.ScheduledAt).Seconds()))
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// timedCaller measures the calls a Dispatcher makes to Nomad.
type timedCaller struct {
	c nomad.Caller
	m *metrics
}

func (t timedCaller) observe(op launcher.Op, began time.Time, err error) {
	t.m.nomadSeconds.WithLabelValues(op.String()).Observe(time.Since(began).Seconds())
	switch {
	case err == nil:
	case nomad.Permanent(err):
		t.m.nomadErrors.WithLabelValues(op.String(), "refused").Inc()
	case errors.Is(err, context.Canceled):
	default:
		t.m.nomadErrors.WithLabelValues(op.String(), "unknown").Inc()
	}
}

func (t timedCaller) Dispatch(ctx context.Context, l nomad.Launch) (string, error) {
	began := time.Now()
	child, err := t.c.Dispatch(ctx, l)
	t.observe(launcher.OpDispatch, began, err)
	return child, err
}

func (t timedCaller) Lookup(ctx context.Context, target state.Target, identity string) (string, bool, error) {
	began := time.Now()
	child, found, err := t.c.Lookup(ctx, target, identity)
	t.observe(launcher.OpLookup, began, err)
	return child, found, err
}

func (t timedCaller) Running(ctx context.Context, target state.Target, child string) (bool, error) {
	began := time.Now()
	running, err := t.c.Running(ctx, target, child)
	t.observe(launcher.OpRunning, began, err)
	return running, err
}

func (t timedCaller) Stop(ctx context.Context, target state.Target, child string) error {
	began := time.Now()
	err := t.c.Stop(ctx, target, child)
	t.observe(launcher.OpStop, began, err)
	return err
}

// openLaunches and jobCount read the state for the gauges (a scrape
// waits at most a second for the loop).
// stateGauge is a gauge of what read says of the cron state.
func (s *Server) stateGauge(read func(*state.Machine) int) func() float64 {
	return func() float64 {
		n := 0
		s.readForMetrics(func(l *launcher.Launcher) { n = read(l.Machine()) })
		return float64(n)
	}
}

func (s *Server) readForMetrics(fn func(*launcher.Launcher)) {
	ctx, cancel := context.WithTimeout(s.ctx, time.Second)
	defer cancel()
	_ = s.node.Cron(ctx, fn)
}

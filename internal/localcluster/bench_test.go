package localcluster_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/internal/localcluster"
	"paxcron/paxos"
	"paxcron/storage"
)

// These benchmarks compare the commit throughput of a three-replica cluster
// on real Pebble with raw Pebble synced writes on the same disk. Run them in
// one invocation, so that both sides meet the same disk at the same time
// and BenchmarkRawPebbleSyncedSaveBatch sees the Save sizes the cluster
// produced:
//
//	go test -run '^$' -bench . -benchmem -benchtime 2s ./internal/localcluster
//
// Each commit costs a synced Save on the leader and on each follower, and
// the three replicas share the one disk, so the cluster pays for several
// syncs where a raw writer pays for one; see the report metrics.

const (
	// commandBytes is each command as replicated: the 8-byte id Propose
	// puts in front and a 248-byte payload.
	commandBytes = 256
	payloadBytes = commandBytes - 8
)

// concurrencies are the numbers of concurrent proposers (or raw writers).
var concurrencies = []int{1, 8, 64, 512}

// saveShape is what one Save wrote.
type saveShape struct {
	entries   int
	hardState bool
}

// saveSizes are two medians of the Saves of one BenchmarkCommitThroughput
// run. The distribution is bimodal (the leader alternates between batches
// of new entries and small Saves of its chosen index), so the plain median
// can land on either mode from run to run; the entry-weighted median, the
// Save the median command was written in, is steadier.
type saveSizes struct {
	perSave  saveShape // the median Save
	perEntry saveShape // the Save holding the median entry
}

// medianSaves holds, per proposer count, the Save sizes of the latest
// BenchmarkCommitThroughput run with that count. Benchmarks run one at a
// time, in source order, so no lock is needed.
var medianSaves = map[int]saveSizes{}

// BenchmarkCommitThroughput measures commits through a three-replica
// cluster on real Pebble (synced) from concurrent proposers, each waiting
// for its command to be applied on the leader before proposing the next.
// Each replica writes on its writer goroutine (the default). One op is
// one commit.
func BenchmarkCommitThroughput(b *testing.B) { commitThroughput(b, false) }

// BenchmarkCommitThroughputInline is BenchmarkCommitThroughput with each
// replica writing on its own goroutine (Options.InlineWrites). It does not
// record Save sizes for the raw-Pebble comparisons.
func BenchmarkCommitThroughputInline(b *testing.B) { commitThroughput(b, true) }

func commitThroughput(b *testing.B, inline bool) {
	for _, proposers := range concurrencies {
		var rec saveRecorder
		o := localcluster.DefaultOptions(benchDir(b))
		o.OnSave = rec.record
		o.InlineWrites = inline
		cl, err := localcluster.Start(o)
		if err != nil {
			b.Fatal(err)
		}
		// The cluster lives across the b.N ramp-up runs of the
		// sub-benchmark: an election per run would dominate short runs.
		b.Run(fmt.Sprintf("proposers=%d", proposers), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if _, err := cl.WaitLeader(ctx); err != nil {
				b.Fatal(err)
			}
			rec.take() // forget the election's and earlier runs' Saves
			dropped := cl.Dropped()
			payload := make([]byte, payloadBytes)
			latencies := make([][]time.Duration, proposers)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			began := time.Now()
			for w := range proposers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						t := time.Now()
						if err := cl.Propose(ctx, payload); err != nil {
							b.Error(err)
							return
						}
						latencies[w] = append(latencies[w], time.Since(t))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(began)
			b.StopTimer()
			saves := rec.take()
			reportRate(b, b.N, elapsed, "commits/s", slices.Concat(latencies...))
			m := medianSizes(saves)
			if !inline {
				medianSaves[proposers] = m
			}
			b.ReportMetric(float64(len(saves))/float64(b.N), "saves/commit")
			b.ReportMetric(float64(m.perSave.entries), "save-entries-p50")
			b.ReportMetric(float64(m.perEntry.entries), "cmd-save-entries-p50")
			b.Logf("b.N=%d: %s", b.N, describeSaves(saves))
			if d := cl.Dropped() - dropped; d > 0 {
				b.Logf("transport dropped %d messages", d)
			}
		})
		if err := cl.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawPebbleSynced is the baseline: writers goroutines on one
// Pebble database on the same disk, each committing one synced batch of
// one key per op with the record a 256-byte command is stored as. Pebble's
// own group commit shares a WAL sync among concurrent writers, as the
// replica loop shares a Save among concurrent proposers. One op is one
// write.
func BenchmarkRawPebbleSynced(b *testing.B) {
	value := entryRecord()
	for _, writers := range concurrencies {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			db := openRawPebble(b)
			latencies := make([][]time.Duration, writers)
			var next atomic.Int64
			var slot atomic.Uint64
			var wg sync.WaitGroup
			b.ResetTimer()
			began := time.Now()
			for w := range writers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						t := time.Now()
						if err := commitSynced(db, 1, slot.Add, value, nil); err != nil {
							b.Error(err)
							return
						}
						latencies[w] = append(latencies[w], time.Since(t))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(began)
			b.StopTimer()
			reportRate(b, b.N, elapsed, "writes/s", slices.Concat(latencies...))
		})
	}
}

// BenchmarkRawPebbleSyncedSaveBatch writes, with raw Pebble, batches of
// the size of a median Save that BenchmarkCommitThroughput/proposers=N
// recorded (its entry records and, if it had one, a hard-state record),
// each batch committed synced by one writer per database. size=save-p50
// takes the median Save, size=cmd-p50 the Save the median command was
// written in (see saveSizes). dbs=1 is one writer alone on the disk; dbs=3
// is three databases written at once, as the three replicas write theirs.
// One op is one entry written to each database, so entries/s compares
// directly with commits/s.
func BenchmarkRawPebbleSyncedSaveBatch(b *testing.B) {
	value, hardState := entryRecord(), hardStateRecord()
	for _, proposers := range concurrencies {
		for _, size := range []string{"save-p50", "cmd-p50"} {
			for _, dbs := range []int{1, 3} {
				name := fmt.Sprintf("proposers=%d/size=%s/dbs=%d", proposers, size, dbs)
				b.Run(name, func(b *testing.B) {
					sizes, ok := medianSaves[proposers]
					if !ok {
						b.Skipf("run BenchmarkCommitThroughput/proposers=%d first, in the same invocation, for the Save size", proposers)
					}
					shape := sizes.perSave
					if size == "cmd-p50" {
						shape = sizes.perEntry
					}
					rawSavedBatches(b, dbs, shape, value, hardState)
				})
			}
		}
	}
}

// rawSavedBatches writes at least b.N entries to each of dbs fresh
// databases at once, in synced batches shaped like shape.
func rawSavedBatches(b *testing.B, dbs int, shape saveShape, value, hardState []byte) {
	perBatch := max(shape.entries, 1)
	batches := (b.N + perBatch - 1) / perBatch
	latencies := make([][]time.Duration, dbs)
	dbList := make([]*pebble.DB, dbs)
	for i := range dbList {
		dbList[i] = openRawPebble(b)
	}
	var wg sync.WaitGroup
	b.ResetTimer()
	began := time.Now()
	for i, db := range dbList {
		wg.Go(func() {
			var slot uint64
			nextSlot := func(delta uint64) uint64 { slot += delta; return slot }
			hs := hardState
			if !shape.hardState {
				hs = nil
			}
			for range batches {
				t := time.Now()
				if err := commitSynced(db, perBatch, nextSlot, value, hs); err != nil {
					b.Error(err)
					return
				}
				latencies[i] = append(latencies[i], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	reportRate(b, batches*perBatch, elapsed, "entries/s", slices.Concat(latencies...))
	b.ReportMetric(float64(batches)/elapsed.Seconds(), "batches/s")
	b.ReportMetric(float64(perBatch), "batch-entries")
}

// commitSynced commits one synced batch: a hard-state record if hardState
// is set, then n entry records under the slots nextSlot(1) hands out.
func commitSynced(db *pebble.DB, n int, nextSlot func(uint64) uint64, value, hardState []byte) error {
	batch := db.NewBatch()
	defer batch.Close()
	if hardState != nil {
		if err := batch.Set([]byte{'h'}, hardState, nil); err != nil {
			return err
		}
	}
	key := make([]byte, 0, 9)
	for range n {
		key = binary.BigEndian.AppendUint64(append(key[:0], 'e'), nextSlot(1))
		if err := batch.Set(key, value, nil); err != nil {
			return err
		}
	}
	return batch.Commit(pebble.Sync)
}

// reportRate reports n events in elapsed as a rate, with the p50 and p99
// of the latencies.
func reportRate(b *testing.B, n int, elapsed time.Duration, unit string, latencies []time.Duration) {
	b.ReportMetric(float64(n)/elapsed.Seconds(), unit)
	if len(latencies) == 0 {
		return
	}
	slices.Sort(latencies)
	at := func(q float64) float64 {
		return float64(latencies[int(q*float64(len(latencies)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// saveRecorder collects the shape of every Save of every replica.
type saveRecorder struct {
	mu    sync.Mutex
	saves []saveShape
}

func (r *saveRecorder) record(_ paxos.ReplicaID, u storage.Update) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.saves = append(r.saves, saveShape{entries: len(u.Entries), hardState: u.HardState != nil})
}

// take returns the Saves recorded so far and forgets them.
func (r *saveRecorder) take() []saveShape {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.saves
	r.saves = nil
	return s
}

// medianSizes returns the median Save and the Save holding the median
// entry.
func medianSizes(saves []saveShape) saveSizes {
	if len(saves) == 0 {
		return saveSizes{}
	}
	slices.SortFunc(saves, func(a, b saveShape) int { return cmp.Compare(a.entries, b.entries) })
	total := 0
	for _, s := range saves {
		total += s.entries
	}
	sizes := saveSizes{perSave: saves[len(saves)/2], perEntry: saves[len(saves)-1]}
	seen := 0
	for _, s := range saves {
		seen += s.entries
		if 2*seen >= total {
			sizes.perEntry = s
			break
		}
	}
	return sizes
}

// describeSaves summarises the distribution of Save sizes.
func describeSaves(saves []saveShape) string {
	if len(saves) == 0 {
		return "no saves"
	}
	slices.SortFunc(saves, func(a, b saveShape) int { return cmp.Compare(a.entries, b.entries) })
	hardStateOnly := 0
	for _, s := range saves {
		if s.entries == 0 {
			hardStateOnly++
		}
	}
	at := func(q float64) int { return saves[int(q*float64(len(saves)-1))].entries }
	return fmt.Sprintf("%d saves, entries p10/p50/p90/max %d/%d/%d/%d, %d with no entries",
		len(saves), at(0.1), at(0.5), at(0.9), at(1), hardStateOnly)
}

// entryRecord is the value pebblestore writes for a 256-byte command.
func entryRecord() []byte {
	return storage.NewCodec().AppendEntry(nil, paxos.Entry{
		Slot: 1 << 20, Ballot: paxos.Ballot{Round: 1, Replica: 1}, Kind: paxos.EntryCommand, Data: make([]byte, commandBytes),
	})
}

// hardStateRecord is the value pebblestore writes for a hard state.
func hardStateRecord() []byte {
	return storage.NewCodec().AppendHardState(nil, paxos.HardState{Promised: paxos.Ballot{Round: 1, Replica: 1}, Chosen: 1 << 20})
}

func openRawPebble(b *testing.B) *pebble.DB {
	b.Helper()
	db, err := pebble.Open(benchDir(b), &pebble.Options{
		FS: vfs.Default, FormatMajorVersion: pebble.FormatNewest, Logger: quietLogger{},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// benchDir returns a fresh directory on a real disk: b.TempDir, unless
// that is a tmpfs (where a sync costs nothing), then one under the
// repository's git-ignored .cache.
func benchDir(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	tmpfs, err := isTmpfs(dir)
	if err != nil {
		b.Fatal(err)
	}
	if !tmpfs {
		return dir
	}
	base, err := filepath.Abs(filepath.Join("..", "..", ".cache"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		b.Fatal(err)
	}
	dir, err = os.MkdirTemp(base, "localcluster-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// quietLogger drops Pebble's informational chatter and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)              {}
func (quietLogger) Errorf(format string, args ...any) { pebble.DefaultLogger.Errorf(format, args...) }
func (quietLogger) Fatalf(format string, args ...any) { pebble.DefaultLogger.Fatalf(format, args...) }

// BenchmarkRawPebbleStoresAtOnce is the disk's floor for one commit of a
// lone write: databases on the same disk, as replicas are, each committing
// one synced entry record at the same moment. One op is one round of a
// write to each. It reports when the first, second... of the round's
// writes was durable (n1-p50-ms, n2-p50-ms...): with three stores a commit
// needs two, so n2 is the floor. wal=fresh writes to WALs that grow as
// they are written (as a new store did before its WALs were written
// through, DESIGN.md "Storage"), wal=recycled to WALs overwritten in
// place, as a running replica's are. stores=2 is the floor a leader that
// left its own sync off the commit path would meet: two followers' syncs
// with no third beside them.
func BenchmarkRawPebbleStoresAtOnce(b *testing.B) {
	value := entryRecord()
	for _, wal := range []string{"fresh", "recycled"} {
		for _, stores := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("wal=%s/stores=%d", wal, stores), func(b *testing.B) {
				var slot atomic.Uint64
				dbs := make([]*pebble.DB, stores)
				for i := range dbs {
					dbs[i] = openRawPebble(b)
					if wal == "recycled" {
						recycleWAL(b, dbs[i], slot.Add, value)
					}
				}
				durable := make([][]time.Duration, stores) // [k]: the k+1th write of each round
				b.ResetTimer()
				for b.Loop() {
					start := time.Now()
					done := make(chan time.Duration, stores)
					for _, db := range dbs {
						go func() {
							if err := commitSynced(db, 1, slot.Add, value, nil); err != nil {
								b.Error(err)
							}
							done <- time.Since(start)
						}()
					}
					round := make([]time.Duration, stores)
					for i := range round {
						round[i] = <-done
					}
					slices.Sort(round)
					for k, d := range round {
						durable[k] = append(durable[k], d)
					}
				}
				b.StopTimer()
				for k, ds := range durable {
					slices.Sort(ds)
					b.ReportMetric(float64(ds[len(ds)/2])/float64(time.Millisecond), fmt.Sprintf("n%d-p50-ms", k+1))
				}
			})
		}
	}
}

// BenchmarkRawPebbleSyncedWAL commits one synced entry record at a time to
// a fresh database, whose WAL grows as it is written (wal=fresh), and to
// one whose WAL is a recycled file already as long as a memtable's log
// (wal=recycled), as a replica's is once its first memtables are flushed:
// the recycled file is overwritten in place, so its sync has no file size
// or extents to record.
func BenchmarkRawPebbleSyncedWAL(b *testing.B) {
	value := entryRecord()
	for _, recycled := range []bool{false, true} {
		b.Run(map[bool]string{false: "wal=fresh", true: "wal=recycled"}[recycled], func(b *testing.B) {
			db := openRawPebble(b)
			var slot atomic.Uint64
			if recycled {
				recycleWAL(b, db, slot.Add, value)
			}
			b.ResetTimer()
			for b.Loop() {
				if err := commitSynced(db, 1, slot.Add, value, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// recycleWAL writes, unsynced, twice a memtable's worth of entries and
// flushes after each, so that the WAL in use is a recycled file; it fails
// b if Pebble did not recycle one.
func recycleWAL(b *testing.B, db *pebble.DB, nextSlot func(uint64) uint64, value []byte) {
	b.Helper()
	const memtableBytes = 4 << 20 // Pebble's default, which openRawPebble keeps
	perMemtable := memtableBytes/len(value) + 1
	for range 2 {
		batch := db.NewBatch()
		key := make([]byte, 0, 9)
		for range perMemtable {
			key = binary.BigEndian.AppendUint64(append(key[:0], 'e'), nextSlot(1))
			if err := batch.Set(key, value, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := batch.Commit(pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		batch.Close()
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	if wal := db.Metrics().WAL; wal.PhysicalSize <= wal.Size {
		b.Fatalf("the WAL was not recycled: %d bytes on disk for %d written", wal.PhysicalSize, wal.Size)
	}
}

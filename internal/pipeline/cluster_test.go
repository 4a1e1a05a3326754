package pipeline

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestClusterDropsStaleGenerations: a cluster member takes only messages
// read in the generation it joined, of partitions assigned to it. A
// message an earlier generation's reader queued, past the group's offset
// (the rows before it were dropped at the rejoin), would otherwise move
// the partition's offset over them: they would never be learned.
func TestClusterDropsStaleGenerations(t *testing.T) {
	p, err := New(Options{Config: testConfig(t), Registry: prometheus.NewRegistry(), Source: ingest.NewMemSource("v", 16), DeadLetters: &ingest.MemDeadLetter{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	p.clu = &clusterState{ready: true, gen: 2, mine: map[int]bool{0: true}}
	p.consumed[0] = 500 // the group's offset, set by the rejoin
	l := &loop{p: p}
	msg := func(partition int, offset int64, gen int32) parsed {
		return parsed{m: ingest.Message{Topic: "v", Partition: partition, Offset: offset, Value: []byte("1,2")}, x: []float64{1, 2}, gen: gen}
	}
	ctx := context.Background()
	for _, stale := range []parsed{msg(0, 520, 1), msg(1, 7, 2)} {
		if l.handle(ctx, stale) || l.rows != 0 {
			t.Fatalf("took partition %d offset %d of generation %d", stale.m.Partition, stale.m.Offset, stale.gen)
		}
	}
	if p.consumed[0] != 500 {
		t.Fatalf("partition 0 moved to %d by a stale message; the group's offset is 500", p.consumed[0])
	}
	if !l.handle(ctx, msg(0, 500, 2)) || l.rows != 1 || p.consumed[0] != 501 {
		t.Fatalf("the generation's own message: rows %d, offset %d", l.rows, p.consumed[0])
	}
}

// Defect: a cluster member took a snapshot of the model at every step
// (Member.Confirmed), to have one every member holds when the cadence asks
// for it. A snapshot copies the coefficients twice over and orthonormalises
// the averaged model: a step and a snapshot took 1.9× a step alone at
// d = 64, 32,768 features, k = 10, and 1.6× at 65,536 features, k = 50
// (BenchmarkSnapshot in package online).
// Now a confirmed state is taken only when a snapshot is due, and the
// snapshots still come on the cadence, each with the offsets of its state.
func TestClusterSnapshotsOnlyWhenDue(t *testing.T) {
	c := testConfig(t)
	c.Snapshot.Every = time.Hour // the cadence is every_batches (4)
	p, err := New(Options{Config: c, Registry: prometheus.NewRegistry(), Source: ingest.NewMemSource("v", 1), DeadLetters: &ingest.MemDeadLetter{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx := context.Background()
	lc := c.Learner.Online(c.Model, c.Kafka.Dim)
	m, err := cluster.Join(ctx, cluster.NewMemGroup(1, time.Minute).Member(0), lc, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Confirmed = p.onConfirmed
	p.clu = &clusterState{ready: true, gen: 1, rank0: true, mine: map[int]bool{0: true}}
	p.learner = &clusterLearner{cfg: lc, m: m, stepCtx: ctx, next: p.myOffsets}
	linger := time.NewTimer(time.Hour)
	defer linger.Stop()
	l := &loop{p: p, linger: linger}
	sem := semaphore.NewWeighted(1)

	rng := rand.New(rand.NewPCG(5, 5))
	const steps = 40
	var off int64
	var taken, written int
	var confirmed, cut *snapshot.Snapshot
	for range steps {
		batch := make([]parsed, c.Learner.Batch)
		for i := range batch {
			batch[i] = parsed{m: ingest.Message{Topic: "v", Partition: 0, Offset: off}, x: []float64{rng.NormFloat64(), rng.NormFloat64()}, gen: 1}
			off++
		}
		if rest := l.consume(ctx, batch, sem, linger); len(rest) != 0 || l.fatal != nil {
			t.Fatalf("%d messages not taken (%v)", len(rest), l.fatal)
		}
		if p.clu.confirmed != confirmed {
			confirmed = p.clu.confirmed
			taken++
		}
		if l.lastCut != cut {
			cut = l.lastCut
			written++
			// What is persisted is a state the member held, with the
			// offsets of exactly the samples it learned.
			if next := nextOffset(cut, 0); next != int64(cut.Header.SamplesSeen) {
				t.Fatalf("snapshot at step %d: %d samples seen, covers offsets up to %d", cut.Header.Step, cut.Header.SamplesSeen, next)
			}
			if lag := m.Learner().Step() - cut.Header.Step; lag > 1 {
				t.Fatalf("snapshot of step %d written at step %d: more than the one step a confirmed state lags", cut.Header.Step, m.Learner().Step())
			}
		}
	}
	t.Logf("%d steps: %d states taken, %d snapshots written", m.Learner().Step(), taken, written)
	if want := steps/c.Snapshot.EveryBatches - 1; written < want {
		t.Errorf("%d snapshots written in %d steps at every_batches %d, want at least %d", written, steps, c.Snapshot.EveryBatches, want)
	}
	if taken > written+1 {
		t.Errorf("%d snapshots taken for %d written: a member snapshots steps nobody persists", taken, written)
	}
}

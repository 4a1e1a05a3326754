package pipeline

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/online"
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
	p.led.consumed[0] = 500 // the group's offset, set by the rejoin
	l := &loop{p: p}
	msg := func(partition int, offset int64, gen int32) ingest.Parsed {
		return ingest.Parsed{Msg: ingest.Message{Topic: "v", Partition: partition, Offset: offset, Value: []byte("1,2")}, X: []float64{1, 2}, Generation: gen}
	}
	ctx := context.Background()
	for _, stale := range []ingest.Parsed{msg(0, 520, 1), msg(1, 7, 2)} {
		if l.handle(ctx, stale) || l.rows != 0 {
			t.Fatalf("took partition %d offset %d of generation %d", stale.Msg.Partition, stale.Msg.Offset, stale.Generation)
		}
	}
	if p.led.consumed[0] != 500 {
		t.Fatalf("partition 0 moved to %d by a stale message; the group's offset is 500", p.led.consumed[0])
	}
	if !l.handle(ctx, msg(0, 500, 2)) || l.rows != 1 || p.led.consumed[0] != 501 {
		t.Fatalf("the generation's own message: rows %d, offset %d", l.rows, p.led.consumed[0])
	}
}

// clusterSnapshot is the snapshot of a learner of cfg after steps
// batches of 64 3-D Gaussian rows.
func clusterSnapshot(t *testing.T, cfg online.Config, steps int) *snapshot.Snapshot {
	t.Helper()
	l, err := online.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	x := gaussRows(64, 3, 7)
	for range steps {
		if err := l.Update(x, 64); err != nil {
			t.Fatal(err)
		}
	}
	return l.Snapshot()
}

// gaussRows returns rows×d standard normal values drawn from seed.
func gaussRows(rows, d int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, seed))
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	return x
}

// TestClusterLearnerBeforeAndAfterJoin: before the group's first step the
// cluster learner reports the local snapshot's header (what the status
// page and the metrics show after a restart), zeros without one, and
// refuses to learn; once a member, it reports the member's learner, a
// step learns the rows, a change a step found is reported once, and its
// growth is voted and applied at the group's next step.
func TestClusterLearnerBeforeAndAfterJoin(t *testing.T) {
	cfg := online.Config{Model: "loop", K: 2, BlockSize: 64, MaxFeatures: 256, Workers: 1,
		Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1.5}}
	local := clusterSnapshot(t, cfg, 3)
	h := local.Header

	none := &clusterLearner{cfg: cfg}
	if none.samplesSeen() != 0 || none.step() != 0 || none.features() != 0 || none.snapshot() != nil || none.quality() != nil {
		t.Errorf("no snapshot, no member: samples %d, step %d, features %d", none.samplesSeen(), none.step(), none.features())
	}
	c := &clusterLearner{cfg: cfg, local: local}
	if d, _ := c.dims(); c.samplesSeen() != 192 || c.step() != h.Step || c.features() != h.Features() || d != 3 {
		t.Errorf("before the first join: samples %d (want 192), step %d (%d), features %d (%d), dim %d (3)",
			c.samplesSeen(), c.step(), h.Step, c.features(), h.Features(), d)
	}
	if c.snapshot() != local || c.generated() != nil || c.bandwidth() != 0 {
		t.Error("before the first join the snapshot is the local one, with nothing generated and no bandwidth")
	}
	if err := c.update(gaussRows(64, 3, 8), nil, 64); !errors.Is(err, errNotMember) {
		t.Errorf("update before joining: %v, want errNotMember", err)
	}

	m, err := cluster.Join(context.Background(), cluster.NewMemGroup(1, time.Minute).Member(0), cfg, local)
	if err != nil {
		t.Fatal(err)
	}
	c.m = m
	defer c.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.stepCtx, c.next = ctx, func() cluster.Offsets { return cluster.Offsets{"v": {0: 256}} }
	if err := c.update(gaussRows(64, 3, 9), nil, 64); err != nil {
		t.Fatal(err)
	}
	l := m.Learner()
	if c.samplesSeen() != 256 || c.step() != l.Step() || c.features() != l.Features() || c.bandwidth() != 1.5 {
		t.Errorf("a member after one step: samples %d (want 256), step %d (%d), features %d (%d), bandwidth %g",
			c.samplesSeen(), c.step(), l.Step(), c.features(), l.Features(), c.bandwidth())
	}
	if s := c.snapshot(); s == nil || s.Header.SamplesSeen != 256 {
		t.Error("a member's snapshot is not the member's model")
	}
	c.changed = true
	if ch, err := c.assess(gaussRows(4, 3, 10), nil, 4); !ch || err != nil {
		t.Errorf("assess after a step that found a change: %v, %v; want the change", ch, err)
	}
	if ch, _ := c.assess(gaussRows(4, 3, 11), nil, 4); ch {
		t.Error("a change reported twice")
	}
	// Growth is the group's (one member here): a vote, applied at the
	// next step.
	// What 320 features hold on batches of 64 rows: at least the
	// coefficients (32·k bytes a feature) and the kept features (8 bytes
	// a row and feature).
	need := l.MemoryBytes(320, 64) + 4*320*32*2 // and the service's four copies of the coefficients (serviceCopies)
	if need < 5*320*32*2+320*64*8 {
		t.Errorf("320 features held in %d bytes: fewer than the coefficients and kept features", need)
	}
	if n, raised := c.raiseBudget(need-1, 64); raised || n != 256 {
		t.Errorf("a block more would pass max_model_bytes by a byte: budget %d, raised %v", n, raised)
	}
	c.holdGrowth(true)
	if n, raised := c.raiseBudget(need, 64); !raised || n != 256 || c.budget() != 256 {
		t.Errorf("asking for a block more: %d (%v), budget %d; want 256 until the group's step", n, raised, c.budget())
	}
	if err := c.update(gaussRows(64, 3, 12), nil, 64); err != nil {
		t.Fatal(err)
	}
	if c.budget() != 320 || c.features() != 256 {
		t.Errorf("after the step that raised the budget while holding: budget %d (want 320), features %d (256)", c.budget(), c.features())
	}
	c.holdGrowth(false)
	if err := c.update(gaussRows(64, 3, 13), nil, 64); err != nil {
		t.Fatal(err)
	}
	if c.budget() != 320 || c.features() != 320 {
		t.Errorf("growth resumed: budget %d, features %d; want 320 and 320", c.budget(), c.features())
	}
}

// TestClusterOffsetsAndConfirmedState: a member's offsets are those of
// its own partitions only; a confirmed state is taken as the snapshot to
// persist only when the loop asked for one and it is newer than the last
// persisted, with the offsets the group's step covers and the messages
// the group shed among them; the member count reaches the status and the
// gauge.
func TestClusterOffsetsAndConfirmedState(t *testing.T) {
	p, err := New(Options{Config: testConfig(t), Registry: prometheus.NewRegistry(), Source: ingest.NewMemSource("v", 16), DeadLetters: &ingest.MemDeadLetter{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	p.clu = &clusterState{mine: map[int]bool{0: true, 2: true}}
	p.led.consumed[0], p.led.consumed[1], p.led.consumed[2] = 10, 20, 30
	got := p.myOffsets()
	if len(got) != 1 || len(got["v"]) != 2 || got["v"][0] != 10 || got["v"][2] != 30 {
		t.Errorf("my offsets %v, want partitions 0 and 2 only: {v: {0: 10, 2: 30}}", got)
	}

	cfg := online.Config{Model: "loop", K: 2, BlockSize: 64, MaxFeatures: 256, Workers: 1,
		Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1.5}}
	l, err := online.Restore(clusterSnapshot(t, cfg, 3), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	next := cluster.Offsets{"v": {0: 10, 1: 20, 2: 30}}
	p.onConfirmed(l, next, 9)
	if p.clu.confirmed != nil {
		t.Error("a confirmed state was taken although no snapshot was due")
	}
	p.clu.due, p.clu.saved = true, l.Step()
	p.onConfirmed(l, next, 9)
	if p.clu.confirmed != nil {
		t.Error("a confirmed state no newer than the last persisted was taken")
	}
	p.clu.saved = l.Step() - 1
	p.onConfirmed(l, next, 9)
	s := p.clu.confirmed
	if s == nil || p.clu.due || s.Header.Step != l.Step() || len(s.Header.Offsets) != 3 || s.Header.Diagnostics.Shed != 9 {
		t.Fatalf("due and newer: confirmed %v, due %v (want it with the group's 9 shed messages)", s != nil, p.clu.due)
	}
	for _, o := range s.Header.Offsets {
		if want := next["v"][o.Partition]; o.Topic != "v" || o.Next != want {
			t.Errorf("persisted offset %+v, want partition %d at %d", o, o.Partition, want)
		}
	}

	p.setMembers(3, 7)
	if st := p.Status(); st.Members != 3 || st.Generation != 7 {
		t.Errorf("status: %d members, generation %d; want 3, 7", st.Members, st.Generation)
	}
	if v := testutil.ToFloat64(p.met.Members); v != 3 {
		t.Errorf("streamkpca_cluster_members %g, want 3", v)
	}
	p.cfg.Cluster.Enabled = true
	rec := httptest.NewRecorder()
	p.statusPage(time.Now()).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if page := rec.Body.String(); !strings.Contains(page, "one model with 3 instance(s), generation 7") {
		t.Error("the status page does not show the group")
	}
}

// TestClusterFailedStepDropsHeldRows: a failed cluster step drops the
// batch's rows (the group's offsets say where they are read again) and
// its held-out rows with them: rows kept would be scored later with
// another batch's, by a model that never saw their batch, and counted
// twice when they are read again.
func TestClusterFailedStepDropsHeldRows(t *testing.T) {
	c := testConfig(t)
	c.Learner.Holdout = 2
	p, err := New(Options{Config: c, Registry: prometheus.NewRegistry(), Source: ingest.NewMemSource("v", 16), DeadLetters: &ingest.MemDeadLetter{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	p.clu = &clusterState{ready: true, gen: 2, mine: map[int]bool{0: true}}
	ended, cancel := context.WithCancel(context.Background())
	cancel() // the generation ended during the step
	p.learner = &clusterLearner{cfg: c.Learner.Online(c.Model, 1), stepCtx: ended}
	l := &loop{p: p}
	for off := int64(0); l.heldRows == 0 && off < 64; off++ {
		l.handle(context.Background(), ingest.Parsed{Msg: ingest.Message{Topic: "v", Partition: 0, Offset: off, Value: []byte("1")}, X: []float64{1}, Generation: 2})
	}
	if l.heldRows == 0 || l.rows == 0 {
		t.Fatalf("no held-out row among the batch's (rows %d)", l.rows)
	}
	l.clusterStepFailed(errors.New("a member is gone"))
	if l.rows != 0 || l.heldRows != 0 || len(l.heldX) != 0 {
		t.Fatalf("after a failed step: %d rows, %d held-out rows (%d values) kept; want none", l.rows, l.heldRows, len(l.heldX))
	}
}

package pipeline

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
	"github.com/streamkpca/streamkpca/transport"
)

// The coordinators the conformance tests run the loop with: one
// instance, a member of a one-member in-memory group, and a member of a
// two-member group over NATS (an embedded server and transport.Exchange, as
// the service's), whose other member steps with no rows of its own.
const (
	soloMode    = "solo"
	memoryGroup = "cluster, in memory"
	natsGroup   = "cluster, over NATS"
)

var coordinatorModes = []string{soloMode, memoryGroup, natsGroup}

// coordinated is a pipeline whose loop runs with the coordinator of mode.
func coordinated(t *testing.T, mode string) (*Pipeline, *loop) {
	t.Helper()
	c := testConfig(t)
	c.Snapshot.Every = time.Hour // the cadence is every_batches (4)
	p, err := New(Options{Config: c, Registry: prometheus.NewRegistry(), Source: ingest.NewMemSource("v", 1), DeadLetters: &ingest.MemDeadLetter{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	if mode != soloMode {
		lc := c.Learner.Online(c.Model, c.Kafka.Dim)
		var m *cluster.Member
		if mode == natsGroup {
			m = natsPair(t, lc)
		} else if m, err = cluster.Join(context.Background(), cluster.NewMemGroup(1, time.Minute).Member(0), lc, nil); err != nil {
			t.Fatal(err)
		}
		m.Confirmed = p.onConfirmed
		cl := &clusterLearner{cfg: lc, m: m, stepCtx: context.Background(), next: p.myOffsets, stored: p.deadLettersStored}
		p.clu = &clusterState{learner: cl, events: make(chan genEvent), ready: true, gen: 1, rank0: true, mine: map[int]bool{0: true}}
		p.learner = cl
	}
	linger := time.NewTimer(time.Hour)
	t.Cleanup(func() { linger.Stop() })
	return p, &loop{p: p, linger: linger}
}

// natsPair joins two members of a group over an embedded NATS server and
// returns the first (rank 0); the second steps with no rows whenever the
// first steps, until the test ends.
func natsPair(t *testing.T, cfg online.Config) *cluster.Member {
	t.Helper()
	stack, err := devstack.StartNATSOnly(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Close)
	ids := []string{"a", "b"}
	exs := make([]*transport.Exchange, 2)
	for i, id := range ids {
		nc, err := nats.Connect(stack.NATSURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if exs[i], err = transport.NewExchange(nc, transport.ExchangeConfig{Model: cfg.Model, Generation: 1, Members: ids, Self: id, Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = exs[i].Close() })
	}
	ms := make([]*cluster.Member, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range ms {
		wg.Go(func() { ms[i], errs[i] = cluster.Join(context.Background(), exs[i], cfg, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: join over NATS: %v", i, err)
		}
		t.Cleanup(ms[i].Close)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			err := ms[1].Step(ctx, nil, 0, cluster.Offsets{})
			if err != nil && ctx.Err() == nil && !errors.Is(err, online.ErrDiverged) && !errors.Is(err, cluster.ErrFirstStep) && !errors.Is(err, cluster.ErrAborted) {
				t.Errorf("the idle member's step: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ms[0]
}

// TestCoordinatorsPersistWhatTheyCover runs the loop over 40 batches with
// each coordinator. With both: every snapshot persisted covers exactly
// the samples in it (its partition's next offset is its samples seen),
// the offsets learned after a step are the learner's samples, and the
// snapshots come on the cadence (every_batches). In a group a snapshot is
// a state every member holds, at most one step behind, taken only when
// one is due (before, a member copied the model at every step: a step
// and a snapshot took 1.9× a step alone at d = 64, 32,768 features,
// k = 10; BenchmarkSnapshot in package online).
func TestCoordinatorsPersistWhatTheyCover(t *testing.T) {
	for _, mode := range coordinatorModes {
		p, l := coordinated(t, mode)
		ctx := context.Background()
		sem := semaphore.NewWeighted(1)
		rng := rand.New(rand.NewPCG(5, 5))
		const steps = 40
		var off int64
		var taken, written int
		var confirmed, cut *snapshot.Snapshot
		for range steps {
			batch := make([]ingest.Parsed, p.cfg.Learner.Batch)
			for i := range batch {
				batch[i] = ingest.Parsed{Msg: ingest.Message{Topic: "v", Partition: 0, Offset: off}, X: []float64{rng.NormFloat64(), rng.NormFloat64()}, Generation: 1}
				off++
			}
			if rest := l.consume(ctx, batch, sem, l.linger); len(rest) != 0 || l.fatal != nil {
				t.Fatalf("%s: %d messages not taken (%v)", mode, len(rest), l.fatal)
			}
			if got, want := p.led.learned[0], int64(p.learner.samplesSeen()); got != want {
				t.Fatalf("%s: offsets learned through %d after a step, the learner has %d samples", mode, got, want)
			}
			if p.clu != nil && p.clu.confirmed != confirmed {
				confirmed = p.clu.confirmed
				taken++
			}
			if l.lastCut != cut {
				cut = l.lastCut
				written++
				if next := nextOffset(cut, 0); next != int64(cut.Header.SamplesSeen) {
					t.Fatalf("%s: snapshot at step %d: %d samples seen, covers offsets up to %d", mode, cut.Header.Step, cut.Header.SamplesSeen, next)
				}
				if lag := p.learner.step() - cut.Header.Step; lag > 1 {
					t.Fatalf("%s: snapshot of step %d written at step %d", mode, cut.Header.Step, p.learner.step())
				}
			}
		}
		t.Logf("%s: %d steps: %d snapshots written (%d states taken)", mode, p.learner.step(), written, taken)
		if want := steps/p.cfg.Snapshot.EveryBatches - 1; written < want {
			t.Errorf("%s: %d snapshots written in %d steps at every_batches %d, want at least %d", mode, written, steps, p.cfg.Snapshot.EveryBatches, want)
		}
		if mode != soloMode && taken > written+1 {
			t.Errorf("%d states taken for %d snapshots written: a member copies states nobody persists", taken, written)
		}
	}
}

// fakeGroup is a Source with generations whose Rebalance is counted.
type fakeGroup struct {
	*ingest.MemSource
	rebalances chan struct{}
}

func (f *fakeGroup) Partitions(context.Context) (int, error)     { return 1, nil }
func (f *fakeGroup) Rebalance() error                            { f.rebalances <- struct{}{}; return nil }
func (f *fakeGroup) StepAside(func(context.Context) error) error { return nil }

// TestCoordinatorDecisions: what each coordinator decides, case by case:
// which messages it takes, when it steps, how it takes a failed step,
// what a graceful stop learns, whether load shedding applies, and who
// publishes.
func TestCoordinatorDecisions(t *testing.T) {
	var s solo
	if !s.takes(7, 3) || s.stepNow(0) || !s.stepNow(1) || s.idle() || !s.leads() || !s.learnsAtStop() || s.generations() != nil {
		t.Error("solo: takes every message, steps with rows only, leads, learns at stop, keeps up, has no generations")
	}
	if s.capacity(10, 512) != 10 || s.capacity(600, 512) != 600 {
		t.Error("solo: a step's capacity is its rows")
	}
	if s.failed(nil, errors.New("any")) {
		t.Error("solo: a failed step is the loop's to handle")
	}

	p, l := coordinated(t, memoryGroup)
	c := p.clu
	c.gen, c.mine = 3, map[int]bool{0: true, 2: true}
	for _, m := range []struct {
		gen       int32
		partition int
		want      bool
	}{{3, 0, true}, {3, 2, true}, {3, 1, false}, {2, 0, false}} {
		if got := c.takes(m.gen, m.partition); got != m.want {
			t.Errorf("cluster: takes generation %d partition %d: %v, want %v", m.gen, m.partition, got, m.want)
		}
	}
	if !c.stepNow(0) || !c.idle() || c.learnsAtStop() || c.generations() == nil {
		t.Error("cluster: steps with the group even without rows, learns nothing alone at stop, sheds load on its partitions, grows as the group")
	}
	c.rank0 = false
	if c.leads() {
		t.Error("cluster: a member that is not the lowest-ranked publishes")
	}
	if c.failed(l, online.ErrDiverged) || c.failed(l, cluster.ErrFirstStep) {
		t.Error("cluster: a refused batch or a first step without a model is the loop's to count")
	}
	l.rows = 5
	if !c.failed(l, cluster.ErrAborted) || l.rows != 5 || !c.ready {
		t.Error("cluster: an aborted step keeps the rows for the next and the membership")
	}
	g := &fakeGroup{MemSource: ingest.NewMemSource("v", 1), rebalances: make(chan struct{}, 1)}
	p.in.src = g
	if !c.failed(l, errors.New("a round lost")) || c.ready || l.rows != 0 {
		t.Error("cluster: a lost round leaves the generation, dropping the rows (read again from the group's offsets)")
	}
	select {
	case <-g.rebalances:
	case <-time.After(10 * time.Second):
		t.Error("cluster: a lost round did not ask the consumer group for a new generation")
	}
	if snap, ok := c.cut(l); ok || snap != nil || !c.due {
		t.Error("cluster: with no confirmed state, nothing to persist, and one is due")
	}
}

// closedSource counts its Closes.
type closedSource struct {
	*ingest.MemSource
	closed *int
}

func (s closedSource) Close() error { *s.closed++; return s.MemSource.Close() }

// TestNewReleasesWhatItBuilt: New fails after the consumer exists —
// cluster mode over a source that is not a consumer group — and closes
// it, once, before returning, with no goroutine left (goleak, TestMain).
func TestNewReleasesWhatItBuilt(t *testing.T) {
	c := testConfig(t)
	c.Cluster.Enabled, c.NATS.Disabled = true, false
	var closed int
	src := closedSource{ingest.NewMemSource("v", 1), &closed}
	p, err := New(Options{Config: c, Registry: prometheus.NewRegistry(), Source: src, DeadLetters: &ingest.MemDeadLetter{}})
	if err == nil || p != nil {
		t.Fatalf("New in cluster mode over a source without generations: %v, want an error", err)
	}
	if closed != 1 {
		t.Errorf("the source was closed %d times, want once", closed)
	}
	t.Logf("New: %v", err)
}

// TestRefusalNamesTheSettings: the error a refused member stops with
// names each differing setting by its configuration key, with both
// values, and is cluster.ErrRefused.
func TestRefusalNamesTheSettings(t *testing.T) {
	err := refusal(&cluster.RefusedError{Differences: []cluster.Difference{
		{Field: "K", Here: "4", Group: "3"}, {Field: "Kernel.Bandwidth", Here: "2", Group: "1.5"}}})
	want := "learner.k is 4 here, 3 in the group, learner.bandwidth is 2 here, 1.5 in the group"
	if !errors.Is(err, cluster.ErrRefused) || !strings.Contains(err.Error(), want) {
		t.Errorf("refusal: %v; want cluster.ErrRefused naming %q", err, want)
	}
}

// TestClusterMemberShedsExactlyOnce: a cluster member sheds load as one
// instance does (before, cluster mode never shed, and a group slower than
// its topic let lag grow until retention deleted messages): at a learned
// fraction of one half, the messages whose hash falls above it are
// counted as shed and not learned, every message is either learned or
// shed, the offsets the group's state covers include the shed ones, and
// the state persisted records this member's shed count and fraction.
func TestClusterMemberShedsExactlyOnce(t *testing.T) {
	for _, mode := range coordinatorModes[1:] {
		t.Run(mode, func(t *testing.T) { shedsExactlyOnce(t, mode) })
	}
}

func shedsExactlyOnce(t *testing.T, mode string) {
	p, l := coordinated(t, mode)
	p.led.status.LearnedFraction = 0.5
	l.pace = p.newPace()
	ctx := context.Background()
	sem := semaphore.NewWeighted(1)
	rng := rand.New(rand.NewPCG(6, 6))
	var off int64
	for range 40 {
		batch := make([]ingest.Parsed, p.cfg.Learner.Batch)
		for i := range batch {
			batch[i] = ingest.Parsed{Msg: ingest.Message{Topic: "v", Partition: 0, Offset: off}, X: []float64{rng.NormFloat64(), rng.NormFloat64()}, Generation: 1}
			off++
		}
		if rest := l.consume(ctx, batch, sem, l.linger); len(rest) != 0 || l.fatal != nil {
			t.Fatalf("%d messages not taken (%v)", len(rest), l.fatal)
		}
	}
	l.learn() // the partial batch
	st := p.Status()
	t.Logf("%d messages: %d learned, %d shed", off, st.Samples, st.Shed)
	if st.Shed == 0 {
		t.Fatal("a cluster member at learned fraction 0.5 shed nothing")
	}
	if st.Samples+st.Shed != uint64(off) {
		t.Errorf("learned %d + shed %d = %d of %d messages: each must be learned or shed, once", st.Samples, st.Shed, st.Samples+st.Shed, off)
	}
	if p.led.learned[0] != off {
		t.Errorf("the group's state covers offsets up to %d, want %d (the shed messages too)", p.led.learned[0], off)
	}
	snap := l.lastCut
	if snap == nil {
		t.Fatal("no state persisted")
	}
	if d := snap.Header.Diagnostics; d.Shed == 0 || d.Shed+snap.Header.SamplesSeen != uint64(nextOffset(snap, 0)) {
		t.Errorf("persisted state: %d samples and %d shed, offsets to %d: want the group's shed count, learned plus shed covering every message",
			snap.Header.SamplesSeen, d.Shed, nextOffset(snap, 0))
	}
}

// Defect (issue 58, item 12): a cluster member's step offsets covered its
// dead-lettered messages while their dead letters were only in its
// queue; the group's snapshot and commit (rank 0's, after flushing only
// its own queue) then covered messages a crash of this member lost. Now
// a member stores its dead letters (topic or spill) before it steps; it
// does not step while it cannot, and steps once it can.
func TestClusterMemberStoresItsDeadLettersBeforeItSteps(t *testing.T) {
	p, l := coordinated(t, memoryGroup)
	p.cfg.Cluster.StepTimeout = 200 * time.Millisecond
	dl := &ingest.MemDeadLetter{Fail: errors.New("down")}
	p.deadLetters().Close(context.Background())
	p.in.adm = ingest.NewAdmission(p.in.adm.Parser(), shape{p}, ingest.NewDeadLetterQueue(dl, 8, 1<<20, nil, nil)) // no spill: nowhere to keep them
	fg := &fakeGroup{MemSource: ingest.NewMemSource("v", 1), rebalances: make(chan struct{}, 4)}
	p.in.src = fg
	ctx := context.Background()
	sem := semaphore.NewWeighted(1)
	batch := []ingest.Parsed{{Msg: ingest.Message{Topic: "v", Partition: 0, Offset: 0, Value: []byte("x")}, Err: &ingest.BadMessageError{Reason: ingest.ReasonMalformed, Err: errors.New("not a vector")}, Generation: 1}}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 1; i <= p.cfg.Learner.Batch; i++ {
		batch = append(batch, ingest.Parsed{Msg: ingest.Message{Topic: "v", Partition: 0, Offset: int64(i)}, X: []float64{rng.NormFloat64(), rng.NormFloat64()}, Generation: 1})
	}
	l.consume(ctx, batch, sem, l.linger)
	if got := p.Status().Samples; got != 0 {
		t.Fatalf("the member stepped (%d samples) while its dead letter was not stored", got)
	}
	if snap := l.lastCut; snap != nil && nextOffset(snap, 0) > 0 {
		t.Fatalf("the group's state covers offset %d while the dead letter at 0 is not stored", nextOffset(snap, 0)-1)
	}
	select {
	case <-fg.rebalances: // the failed step's way: the group reads the rows again
	case <-time.After(10 * time.Second):
		t.Fatal("the member neither stepped nor rejoined the group")
	}
	if p.clu.ready {
		t.Error("the member stays in the generation after a step it could not take")
	}
	dl.SetFail(nil) // the close flushes
}

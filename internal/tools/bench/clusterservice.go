package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/pipeline"
	"github.com/streamkpca/streamkpca/snapshot"
)

// serviceWarmSteps is how many steps' rows a service run learns before
// the timed ones (the first fetches). serviceTailSteps are rows after
// them: the timing ends at a full step of every member, not at the
// stream's end, where a member whose partitions hold fewer rows than a
// batch makes the others wait for it (learner.linger).
const serviceWarmSteps, serviceTailSteps = 2, 4

// serviceTopicPartitions is the partitions of a service run's topic.
const serviceTopicPartitions = 4

// runClusterService is RunCluster with cfg.Service: the whole service.
// For each d it starts the embedded Kafka broker and NATS server and,
// for each group size n, runs n pipelines (the `run` service, in this
// process) with cluster.enabled in one consumer group on a topic of four
// partitions, one worker each; the row with Members 0 is one pipeline
// without cluster mode, the service as it runs alone. Every instance
// starts from the same model with the whole feature budget drawn (in its
// snapshot directory); once the group has formed, the rows are produced
// (raw f64le messages: parsing is not what is measured) as fast as the
// embedded broker takes them. The rate is the samples the group learns in
// cfg.Steps steps of every member after two, over their time
// (ProducerBound if the producer was still writing at their end: then the
// rate may be the producer's); the service snapshots on its default
// cadence.
func runClusterService(ctx context.Context, cfg ClusterConfig) ([]ClusterRow, error) {
	var rows []ClusterRow
	for _, d := range cfg.Dims {
		topics := map[string]int32{}
		sizes := append([]int{0}, cfg.Members...)
		for _, n := range sizes {
			topics[serviceTopic(d, n)] = serviceTopicPartitions
		}
		stack, err := devstack.Start(devstack.Options{Dir: filepath.Join(cfg.Dir, "d"+strconv.Itoa(d)), Topics: topics})
		if err != nil {
			return nil, err
		}
		var base ClusterRow
		for _, n := range sizes {
			row, err := serviceRun(ctx, stack, cfg, d, n)
			if err != nil {
				stack.Close()
				return nil, fmt.Errorf("bench cluster --service: d = %d, %d members: %w", d, n, err)
			}
			if n == 0 {
				base = row
			}
			row.Speedup = row.PointsPerSec / base.PointsPerSec
			rows = append(rows, row)
			if cfg.Progress != nil {
				cfg.Progress(row)
			}
		}
		stack.Close()
	}
	return rows, nil
}

func serviceTopic(d, n int) string { return fmt.Sprintf("bench-d%d-n%d", d, n) }

// serviceConfig is the service's configuration for instance i of a run.
func serviceConfig(stack *devstack.Stack, cfg ClusterConfig, d, n, i int) configs.Config {
	var c configs.Config
	c.Model = "bench"
	c.Kafka.Brokers, c.Kafka.Topic, c.Kafka.Group = stack.Brokers(), serviceTopic(d, n), serviceTopic(d, n)
	c.Kafka.Format, c.Kafka.Dim = "f64le", d
	c.Kafka.SessionTimeout, c.Kafka.RebalanceTimeout = 6*time.Second, 6*time.Second
	c.NATS.URL = stack.NATSURL()
	c.Cluster.Enabled = n > 0
	c.Learner.K, c.Learner.Bandwidth, c.Learner.MaxFeatures, c.Learner.Batch = cfg.K, float64(d), cfg.Features, cfg.Batch
	c.Learner.Block, c.Learner.Workers = min(online.DefaultSubspaceBlockSize, cfg.Features), cfg.Workers
	// The rate measured is what the group learns from a stream it cannot
	// keep up with (produced as fast as the broker takes it): every
	// message, not the fraction load shedding would leave.
	c.Learner.LoadShedding = "off"
	// The step timed is that of a model of the whole budget: no
	// challenger replaces it with a smaller one mid-run (one did after
	// 18 steps from the start model, which has learned a few hundred
	// points), so the challenger's own work is not in the figures.
	c.Learner.Forget = "off"
	c.Snapshot.Dir = filepath.Join(cfg.Dir, "d"+strconv.Itoa(d), "n"+strconv.Itoa(n), "instance"+strconv.Itoa(i))
	c.HTTP.Addr = "off"
	c.SetDefaults()
	return c
}

// serviceRun times one group size (0: the service without cluster mode).
func serviceRun(ctx context.Context, stack *devstack.Stack, cfg ClusterConfig, d, n int) (ClusterRow, error) {
	members := max(n, 1)
	c0 := serviceConfig(stack, cfg, d, n, 0)
	start, err := fullBudget(c0.Learner.Online(c0.Model, d), d)
	if err != nil {
		return ClusterRow{}, err
	}
	pool := randomRows(rand.New(rand.NewPCG(uint64(d), 3)), 4096, d)
	total := members * cfg.Batch * (serviceWarmSteps + cfg.Steps + serviceTailSteps)
	message := func(i int) []byte { return encodeRow("f64le", pool[(i%4096)*d:(i%4096+1)*d]) }
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ps := make([]*pipeline.Pipeline, members)
	done := make(chan error, members)
	running := 0
	defer func() {
		stop()
		for range running {
			<-done
		}
	}()
	log := zerolog.Nop()
	for i := range ps {
		c := serviceConfig(stack, cfg, d, n, i)
		st := snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}
		if _, _, err := st.Save(start); err != nil {
			return ClusterRow{}, err
		}
		if ps[i], err = pipeline.New(pipeline.Options{Config: c, Logger: &log}); err != nil {
			return ClusterRow{}, err
		}
		go func(p *pipeline.Pipeline) { done <- p.Run(runCtx) }(ps[i])
		running++
	}
	wait := func(what string, cond func() bool) error {
		deadline := time.Now().Add(10 * time.Minute)
		for !cond() {
			select {
			case err := <-done:
				running--
				return fmt.Errorf("an instance stopped while waiting for %s: %v", what, err)
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("no %s within 10 minutes", what)
			}
		}
		return nil
	}
	// The rows are produced once every instance steps in one generation
	// of n members, so that no instance learns alone.
	formed := func() bool {
		gen := ps[0].Status().Generation
		for _, p := range ps {
			if st := p.Status(); n > 0 && (st.Members != n || st.Generation != gen) {
				return false
			}
		}
		return true
	}
	if err := wait("group of every instance", formed); err != nil {
		return ClusterRow{}, err
	}
	// The producer's outcome and when it ended; runCtx stops it when
	// this returns early.
	type production struct {
		err error
		end time.Time
	}
	produced := make(chan production, 1)
	go func() {
		err := devstack.Produce(runCtx, message, devstack.ProduceOptions{Brokers: stack.Brokers(), Topic: c0.Kafka.Topic, N: total})
		produced <- production{err, time.Now()}
	}()
	learned := func(rows int) func() bool {
		return func() bool { return ps[0].Status().Samples >= start.Header.SamplesSeen+uint64(rows) }
	}
	if err := wait("the first steps", learned(members*cfg.Batch*serviceWarmSteps)); err != nil {
		return ClusterRow{}, err
	}
	t0, cpu0, s0, step0 := time.Now(), cpuNow(), ps[0].Status().Samples, ps[0].Status().Step
	// Steps faster than this loop looks can be past the warm ones: time
	// what is left, and never wait for rows that are not there.
	done0 := int(s0 - start.Header.SamplesSeen)
	timed := min(members*cfg.Batch*cfg.Steps, total-done0)
	if timed < members*cfg.Batch {
		return ClusterRow{}, fmt.Errorf("%d of the %d rows were learned before the timing began: steps too fast to time (raise --steps)", done0, total)
	}
	if err := wait("the timed rows learned", learned(done0+timed)); err != nil {
		return ClusterRow{}, err
	}
	t1, cpu, st := time.Now(), cpuNow()-cpu0, ps[0].Status() // the rows counted are those at t1
	wall := t1.Sub(t0).Seconds()
	pr := <-produced
	if pr.err != nil {
		return ClusterRow{}, pr.err
	}
	producerBound := pr.end.After(t1)
	steps := max(int(st.Step-step0), 1)
	return ClusterRow{D: d, Members: n, Features: st.Features, K: cfg.K, Batch: cfg.Batch,
		PointsPerSec: float64(st.Samples-s0) / wall, StepSec: wall / float64(steps), ProducerBound: producerBound,
		CPUMicros: perPoint(cpu, int(st.Samples-s0))}, nil
}

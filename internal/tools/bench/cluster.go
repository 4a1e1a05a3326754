package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
	"github.com/streamkpca/streamkpca/transport"
)

// ClusterConfig configures RunCluster. Zero values mean the default.
type ClusterConfig struct {
	// Dims to measure. Default: 64, 784.
	Dims []int
	// Members: the group sizes to measure. Default: 1, 2.
	Members []int
	// Features, K and Batch (rows per member and step) of the model.
	// Defaults: 32,768 (the service's default budget), 10, 512.
	Features, K, Batch int
	// Steps timed per configuration (after one untimed). Default: 10.
	Steps int
	// Workers per member. Default: 1 (one member a core).
	Workers int
	// Dir holds the embedded NATS server's data. Required.
	Dir string
	// Memory exchanges through memory (cluster.MemGroup) instead of NATS:
	// what the exchange costs beyond the transport.
	Memory bool
	// Parts is how the members sum their gradient parts. Default:
	// cluster.ReduceScatter (the service's).
	Parts cluster.PartsExchange
	// Service times the whole service instead of the members alone:
	// pipelines with cluster.enabled over the embedded Kafka broker and
	// NATS server (runClusterService); Members 0 is the service without
	// cluster mode. StepSec is then the mean time a step, and ExchangeSec,
	// ComputeSec and PayloadBytes are not measured.
	Service bool
	// Processes times the service as separate processes: Members
	// `streamkpca run` processes of Binary (default: this executable)
	// in cluster mode over the embedded brokers of this process
	// (runClusterProcesses).
	Processes bool
	Binary    string
	// Progress, if set, is called with every row.
	Progress func(ClusterRow)
}

// ClusterRow is one group size at one d.
type ClusterRow struct {
	D        int `json:"d"`
	Members  int `json:"members"`
	Features int `json:"features"`
	K        int `json:"k"`
	Batch    int `json:"batch_per_member"`
	// PointsPerSec is the group's rate: members × batch × steps over the
	// wall time of the steps.
	PointsPerSec float64 `json:"points_per_second"`
	// StepSec is the median step's wall time. ComputeSec is the median
	// of the slowest member's time outside the rounds (its own work), and
	// ExchangeSec the median of the least time a member spent in its two
	// rounds (sending, waiting, receiving): the slowest member waits for
	// nobody, so its rounds are the transport's cost.
	StepSec     float64 `json:"step_median_seconds"`
	ExchangeSec float64 `json:"exchange_median_seconds"`
	ComputeSec  float64 `json:"compute_median_seconds"`
	// PayloadBytes is one member's gradient part, features × columns
	// float64 (k and the columns learned beyond it, online.Config.Oversample).
	PayloadBytes int `json:"payload_bytes"`
	// SentBytes and ReceivedBytes are the payload bytes a member handed
	// to the exchange and received from the others per timed step (the
	// largest over the members; cluster.Member.Traffic): every round of
	// the step, chunk headers aside.
	SentBytes     float64 `json:"sent_bytes_per_member_step,omitempty"`
	ReceivedBytes float64 `json:"received_bytes_per_member_step,omitempty"`
	// Exchange names how the parts were summed: reduce-scatter or
	// all-gather.
	Exchange string `json:"exchange,omitempty"`
	// CPUMicros is the process's CPU time (user + system) over the timed
	// steps per point learned: every member's work, the exchange and the
	// embedded servers (all in this process). Unlike the rates it does
	// not move with other load on the machine, and on c cores n members
	// can learn at most c/CPUMicros points a second whatever the rest.
	CPUMicros float64 `json:"cpu_us_per_point"`
	// Speedup is PointsPerSec over one instance's Update with the same
	// workers and batch (Members 0 in the table: no exchange at all).
	Speedup float64 `json:"speedup"`
	// ProducerBound (Service) says the rows were still being produced
	// when the timed steps ended: the rate may be the producer's.
	ProducerBound bool `json:"producer_bound,omitempty"`
}

// RunCluster times data-parallel steps (package cluster) of 1, 2, …
// members on one machine, each member with its own NATS connection to an
// embedded server (the exchange is the service's: transport.Exchange), and
// one learner's Update alone (the row with Members 0). The members start
// from one model with the whole feature budget drawn (coefficients of a
// few small steps), so every step costs what a step costs in the long
// run.
func RunCluster(ctx context.Context, cfg ClusterConfig) ([]ClusterRow, error) {
	if len(cfg.Dims) == 0 {
		cfg.Dims = []int{64, 784}
	}
	if len(cfg.Members) == 0 {
		cfg.Members = []int{1, 2}
	}
	orDefault(&cfg.Features, online.DefaultMaxFeatures)
	orDefault(&cfg.K, 10)
	orDefault(&cfg.Batch, 512)
	orDefault(&cfg.Steps, 10)
	orDefault(&cfg.Workers, 1)
	if cfg.Dir == "" {
		return nil, fmt.Errorf("bench cluster: a directory for the NATS server is required")
	}
	if cfg.Processes {
		return runClusterProcesses(ctx, cfg)
	}
	if cfg.Service {
		return runClusterService(ctx, cfg)
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, StoreDir: cfg.Dir})
	if err != nil {
		return nil, err
	}
	go ns.Start()
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	if !ns.ReadyForConnections(10 * time.Second) {
		return nil, fmt.Errorf("bench cluster: the embedded NATS server did not start")
	}
	var rows []ClusterRow
	gen := int64(0)
	for _, d := range cfg.Dims {
		// Forget off, as the service's runs (serviceConfig): no
		// challenger replaces the model of the whole budget.
		lc := online.Config{Model: "bench", K: cfg.K, BlockSize: online.DefaultSubspaceBlockSize, MaxFeatures: cfg.Features,
			Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: float64(d)}, Workers: cfg.Workers, Forget: online.ForgetOff}
		start, err := fullBudget(lc, d)
		if err != nil {
			return nil, err
		}
		base, err := clusterBaseline(lc, start, d, cfg)
		if err != nil {
			return nil, err
		}
		base.D = d
		rows = append(rows, base)
		if cfg.Progress != nil {
			cfg.Progress(base)
		}
		for _, n := range cfg.Members {
			gen++
			row, err := clusterRun(ctx, ns.ClientURL(), gen, lc, start, d, n, cfg)
			if err != nil {
				return nil, err
			}
			row.Speedup = row.PointsPerSec / base.PointsPerSec
			rows = append(rows, row)
			if cfg.Progress != nil {
				cfg.Progress(row)
			}
		}
	}
	return rows, nil
}

// fullBudget returns a model of lc with every block of the budget drawn:
// steps of 16 points each, which cost little.
func fullBudget(lc online.Config, d int) (*snapshot.Snapshot, error) {
	l, err := online.New(lc)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	x := randomRows(rand.New(rand.NewPCG(7, 7)), 64, d)
	if err := l.Update(x, 64); err != nil {
		return nil, err
	}
	for l.Features() < lc.MaxFeatures {
		if err := l.Update(x[:16*d], 16); err != nil {
			return nil, fmt.Errorf("bench cluster: filling the budget: %w", err)
		}
	}
	return l.Snapshot(), nil
}

func randomRows(rng *rand.Rand, rows, d int) []float64 {
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	return x
}

// clusterBaseline times one learner's Update (no exchange).
func clusterBaseline(lc online.Config, start *snapshot.Snapshot, d int, cfg ClusterConfig) (ClusterRow, error) {
	l, err := online.Restore(start, lc)
	if err != nil {
		return ClusterRow{}, err
	}
	defer l.Close()
	x := randomRows(rand.New(rand.NewPCG(1, 1)), cfg.Batch, d)
	if err := l.Update(x, cfg.Batch); err != nil { // untimed: caches
		return ClusterRow{}, err
	}
	steps := make([]float64, cfg.Steps)
	t0, cpu0 := time.Now(), cpuNow()
	for i := range steps {
		s := time.Now()
		if err := l.Update(x, cfg.Batch); err != nil {
			return ClusterRow{}, err
		}
		steps[i] = time.Since(s).Seconds()
	}
	wall, cpu := time.Since(t0).Seconds(), cpuNow()-cpu0
	slices.Sort(steps)
	return ClusterRow{Features: l.Features(), K: lc.K, Batch: cfg.Batch, PointsPerSec: float64(cfg.Batch*cfg.Steps) / wall,
		StepSec: steps[len(steps)/2], ComputeSec: steps[len(steps)/2], Speedup: 1, CPUMicros: perPoint(cpu, cfg.Batch*cfg.Steps)}, nil
}

// timedGatherer sums the time spent in the rounds.
type timedGatherer struct {
	cluster.Gatherer
	in time.Duration
}

func (t *timedGatherer) AllGather(ctx context.Context, round uint64, p []byte) ([][]byte, error) {
	s := time.Now()
	out, err := t.Gatherer.AllGather(ctx, round, p)
	t.in += time.Since(s)
	return out, err
}

func (t *timedGatherer) AllToAll(ctx context.Context, round uint64, parts [][]byte) ([][]byte, error) {
	s := time.Now()
	out, err := t.Gatherer.AllToAll(ctx, round, parts)
	t.in += time.Since(s)
	return out, err
}

// partsName is how a ClusterRow names a cluster.PartsExchange.
func partsName(p cluster.PartsExchange) string {
	if p == cluster.AllGatherParts {
		return "all-gather"
	}
	return "reduce-scatter"
}

// clusterRun times n members stepping together.
func clusterRun(ctx context.Context, url string, gen int64, lc online.Config, start *snapshot.Snapshot, d, n int, cfg ClusterConfig) (ClusterRow, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("member-%02d", i)
	}
	members := make([]*cluster.Member, n)
	timers := make([]*timedGatherer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	if cfg.Memory {
		g := cluster.NewMemGroup(n, 5*time.Minute)
		for i := range n {
			timers[i] = &timedGatherer{Gatherer: g.Member(i)}
		}
	}
	for i := 0; i < n && !cfg.Memory; i++ {
		nc, err := nats.Connect(url)
		if err != nil {
			return ClusterRow{}, err
		}
		defer nc.Close()
		ex, err := transport.NewExchange(nc, transport.ExchangeConfig{Model: "bench", Generation: gen, Members: ids, Self: ids[i], Timeout: 5 * time.Minute})
		if err != nil {
			return ClusterRow{}, err
		}
		defer ex.Close()
		timers[ex.Rank()] = &timedGatherer{Gatherer: ex}
	}
	for i := range n {
		wg.Go(func() { members[i], errs[i] = cluster.Join(ctx, timers[i], lc, start) })
	}
	wg.Wait()
	for i, m := range members {
		if errs[i] != nil {
			return ClusterRow{}, errs[i]
		}
		defer m.Close()
		m.Parts = cfg.Parts
	}
	xs := make([][]float64, n)
	for i := range xs {
		xs[i] = randomRows(rand.New(rand.NewPCG(uint64(i+1), 1)), cfg.Batch, d)
	}
	stepAll := func() error {
		var wg sync.WaitGroup
		for i, m := range members {
			wg.Go(func() { errs[i] = m.Step(ctx, xs[i], cfg.Batch, nil) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := stepAll(); err != nil { // untimed: caches
		return ClusterRow{}, err
	}
	sent0, recv0 := make([]int64, n), make([]int64, n)
	for i, m := range members {
		sent0[i], recv0[i] = m.Traffic()
	}
	steps := make([]float64, cfg.Steps)
	exch := make([]float64, cfg.Steps)    // the least any member spent in its rounds
	slowest := make([]float64, cfg.Steps) // the most any member spent outside them
	t0, cpu0 := time.Now(), cpuNow()
	for i := range steps {
		for _, t := range timers {
			t.in = 0
		}
		s := time.Now()
		if err := stepAll(); err != nil {
			return ClusterRow{}, err
		}
		steps[i] = time.Since(s).Seconds()
		exch[i] = steps[i]
		for _, t := range timers {
			exch[i] = min(exch[i], t.in.Seconds())
			slowest[i] = max(slowest[i], steps[i]-t.in.Seconds())
		}
	}
	wall, cpu := time.Since(t0).Seconds(), cpuNow()-cpu0
	slices.Sort(steps)
	slices.Sort(exch)
	slices.Sort(slowest)
	step := steps[len(steps)/2]
	var sent, recv float64
	for i, m := range members {
		s, r := m.Traffic()
		sent = max(sent, float64(s-sent0[i])/float64(cfg.Steps))
		recv = max(recv, float64(r-recv0[i])/float64(cfg.Steps))
	}
	f := members[0].Learner().Features()
	return ClusterRow{D: d, Members: n, Features: f, K: lc.K, Batch: cfg.Batch,
		PointsPerSec: float64(n*cfg.Batch*cfg.Steps) / wall, StepSec: step, ExchangeSec: exch[len(exch)/2],
		ComputeSec: slowest[len(slowest)/2], PayloadBytes: 8 * f * members[0].Learner().Columns(), CPUMicros: perPoint(cpu, n*cfg.Batch*cfg.Steps),
		SentBytes: sent, ReceivedBytes: recv, Exchange: partsName(cfg.Parts)}, nil
}

package bench

import (
	"context"
	"fmt"
	"gonum.org/v1/gonum/mat"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/pipeline"
)

// KeepUpConfig configures RunKeepUp. Zero values mean the default.
type KeepUpConfig struct {
	// Rate of the producer, messages per second. Default: 15,000.
	Rate float64
	// Duration of the stream. Default: 150 s.
	Duration time.Duration
	// Partitions of the topic. Default: 4.
	Partitions int
	// LoadShedding is the service's learner.load_shedding. Default: auto.
	LoadShedding string
	// Budget is the service's learner.budget. Default: stream.
	Budget string
	// Instances: with more than one, that many services in cluster mode
	// (one model, one consumer group) share the stream. Default: 1.
	Instances int
	// Every: how often the lag is sampled. Default: 10 s.
	Every time.Duration
	// Dir holds the brokers' and snapshots' data. Required.
	Dir string
	// Progress, if set, is called with every sample.
	Progress func(KeepUpPoint)
}

// KeepUpPoint is one sample of a keep-up run.
type KeepUpPoint struct {
	Seconds  float64 `json:"seconds"`
	Produced int64   `json:"produced"`
	Consumed uint64  `json:"consumed"`
	Learned  uint64  `json:"learned"`
	// Lag is produced − consumed: what the service has not read yet.
	Lag      int64   `json:"lag"`
	Fraction float64 `json:"learned_fraction"`
	Features int     `json:"features"`
	Budget   int     `json:"budget"`
	// Quality is the held-out score (0 before the first); Error the
	// served model's subspace error against the stream's closed-form
	// eigenfunctions on 2,000 held-out points (1 before the first).
	Quality float64 `json:"quality"`
	Error   float64 `json:"subspace_error"`
}

// KeepUpResult is the JSON printed by `bench keepup`.
type KeepUpResult struct {
	Bench        string        `json:"bench"`
	Rate         float64       `json:"rate"`
	Seconds      float64       `json:"seconds"`
	LoadShedding string        `json:"load_shedding"`
	Budget       string        `json:"budget"`
	Samples      []KeepUpPoint `json:"samples"`
	// LagAt60 and LagAtEnd are the lag at 60 s and at the end;
	// GrowthShare is the lag's growth per second between them over the
	// produce rate (0.02: the lag grew by 2% of the stream).
	LagAt60     int64   `json:"lag_at_60s"`
	LagAtEnd    int64   `json:"lag_at_end"`
	GrowthShare float64 `json:"lag_growth_share"`
	// Shed is the messages not learned to keep up.
	Shed uint64 `json:"shed"`
	// Instances is the services sharing the stream (cluster mode above 1).
	Instances int `json:"instances"`
}

// RunKeepUp produces 16-D hermite messages (JSON) at Rate into the
// embedded Kafka broker for Duration while the service (`run`, default
// learner settings) learns them, and samples how far behind it is.
func RunKeepUp(ctx context.Context, cfg KeepUpConfig) (KeepUpResult, error) {
	if cfg.Dir == "" {
		return KeepUpResult{}, fmt.Errorf("bench: keepup needs a data directory")
	}
	orDefault(&cfg.Rate, 15000)
	orDefault(&cfg.Duration, 150*time.Second)
	orDefault(&cfg.Partitions, 4)
	orDefault(&cfg.LoadShedding, "auto")
	orDefault(&cfg.Budget, "stream")
	orDefault(&cfg.Every, 10*time.Second)
	orDefault(&cfg.Instances, 1)
	res := KeepUpResult{Bench: "keepup", Rate: cfg.Rate, LoadShedding: cfg.LoadShedding, Budget: cfg.Budget, Instances: cfg.Instances}
	const topic = "keepup"
	stack, err := devstack.Start(devstack.Options{Dir: cfg.Dir, Topics: map[string]int32{topic: int32(cfg.Partitions)}})
	if err != nil {
		return res, err
	}
	defer stack.Close()
	var c configs.Config
	c.Model = "keepup"
	c.Kafka.Brokers, c.Kafka.Topic = stack.Brokers(), topic
	c.NATS.URL = stack.NATSURL()
	c.Learner.LoadShedding, c.Learner.Budget = cfg.LoadShedding, cfg.Budget
	h := synth.Hermite16()
	c.Learner.Bandwidth = h.L // the closed form's (the median trick gives 2.49): the error measures the learner
	held := make([]float64, 2000*16)
	h.Sample(held, rand.New(rand.NewPCG(99, 99)))
	c.HTTP.Addr = "off"
	c.Cluster.Enabled = cfg.Instances > 1
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, cfg.Instances)
	var ps []*pipeline.Pipeline
	for i := range cfg.Instances {
		ci := c
		ci.Snapshot.Dir = filepath.Join(cfg.Dir, fmt.Sprintf("snapshots-%d", i))
		ci.SetDefaults()
		if err := ci.Validate(); err != nil {
			return res, err
		}
		log := zerolog.Nop()
		p, err := pipeline.New(pipeline.Options{Config: ci, Logger: &log})
		if err != nil {
			return res, err
		}
		ps = append(ps, p)
		go func() { done <- p.Run(runCtx) }()
	}

	var produced atomic.Int64
	n := int(cfg.Rate * cfg.Duration.Seconds())
	prodDone := make(chan error, 1)
	start := time.Now()
	go func() {
		prodDone <- devstack.Produce(runCtx, devstack.HermiteJSON(h, 1),
			devstack.ProduceOptions{Brokers: stack.Brokers(), Topic: topic, N: n, Rate: cfg.Rate,
				Progress: func(k int) { produced.Store(int64(k)) }})
	}()
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
	sample := func() KeepUpPoint {
		// The group's figures: consumed and shed summed over the
		// instances, the learned fraction the lowest of them; the model
		// (learned, features, quality, error) is the first instance's.
		st := ps[0].Status()
		pt := KeepUpPoint{Seconds: time.Since(start).Seconds(), Produced: produced.Load(),
			Learned: st.Samples, Fraction: 1, Features: st.Features, Budget: st.Budget}
		res.Shed = 0
		for _, p := range ps {
			s := p.Status()
			pt.Consumed += s.Consumed
			pt.Fraction = min(pt.Fraction, s.LearnedFraction)
			res.Shed += s.Shed
		}
		if st.Quality != nil {
			pt.Quality = st.Quality.Score
		}
		pt.Error = 1
		if m, _ := ps[0].Current().Get(); m != nil {
			if proj, err := m.Project(nil, held); err == nil {
				pt.Error = synth.SubspaceError(mat.NewDense(2000, m.K(), proj), h.Eigenfunctions(held, 2000, m.K()))
			}
		}
		pt.Lag = pt.Produced - int64(pt.Consumed)
		return pt
	}
	for running := true; running; {
		select {
		case err := <-done:
			return res, fmt.Errorf("the service stopped: %v", err)
		case err := <-prodDone:
			if err != nil {
				return res, fmt.Errorf("producer: %w", err)
			}
			running = false
		case <-tick.C:
		}
		pt := sample()
		res.Samples = append(res.Samples, pt)
		if cfg.Progress != nil {
			cfg.Progress(pt)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	last := res.Samples[len(res.Samples)-1]
	res.LagAtEnd = last.Lag
	for _, s := range res.Samples {
		if s.Seconds >= 60 {
			res.LagAt60 = s.Lag
			if dt := last.Seconds - s.Seconds; dt > 0 {
				res.GrowthShare = float64(last.Lag-s.Lag) / dt / cfg.Rate
			}
			break
		}
	}
	stop()
	for range ps {
		if err := <-done; err != nil {
			return res, err
		}
	}
	return res, nil
}

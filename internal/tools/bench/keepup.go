package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"gonum.org/v1/gonum/mat"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/baseline"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/pipeline"
	"github.com/streamkpca/streamkpca/snapshot"
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
	// Images, if set, replaces the hermite stream by these 784-pixel
	// images (rows of Images×784 values) as CSV messages, produced in
	// order and again until Rate×Duration messages; Test (Test×784) are
	// held-out images that score the served model against exact kernel
	// PCA of Images with its kernel. K is the service's learner.k
	// (default 10) and Frequencies its learner.frequencies (default auto).
	Images, Test []float64
	K            int
	Frequencies  string
	// Rows, if set, replaces the stream by a real data set's rows
	// (rows×Dim values) as CSV messages, each pass over them in its own
	// order (the case file of `bench drift`, seeded by Seed), scored
	// against exact kernel PCA of the rows (of 5,000 drawn from a larger
	// set) on 1,000 of them, with the median trick's bandwidth. K is the
	// service's learner.k (default 10).
	Rows []float64
	Dim  int
	// Seed is the service's learner.seed and the file stream's order
	// (default 1); Forget its learner.forget (default: the service's).
	Seed   uint64
	Forget string
	// Linger is the service's learner.linger (default: the service's): a
	// long one makes every batch full, so that with one partition the
	// service learns the same batches on every run.
	Linger time.Duration
	// SaveModel, when set, is where the first instance's final snapshot
	// is written (bench floor --model reads it).
	SaveModel string
	// Replay is the service's learner.replay (0: the service's default;
	// -1: off).
	Replay float64
	// Ramp, if above 0, replaces the stream by `bench drift`'s case
	// mnist-ramp on MNIST (digits 0–4 for Ramp points, the share of 5–9
	// rising evenly over the next Ramp, then Ramp of 5–9; Seed draws the
	// images), as CSV messages: a changing stream through the service.
	// Every sample scores the served model against exact kernel PCA of
	// the classes in force at the position learned (newMNISTDrift's
	// truth); the result adds the error at +20% and +100% of Ramp after
	// the ramp's end. A snapshot is taken every 4 batches. K is the
	// service's learner.k (default 10).
	// RampFrom starts the ramp's stream at that position instead of 0
	// (2·Ramp: a service started at the ramp's end, the reference a
	// following model is held to).
	Ramp, RampFrom int
	MNIST          mnist.Set
	// Output turns output.topic on (<topic>.scores, as many partitions):
	// every message scored and written, its record waited for before the
	// stop; the result then has the records' rate and their delay from
	// the input's append to the record's.
	Output bool
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
	// Switches: following's switches so far; Revisited: rows learned
	// again (learner.replay).
	Switches  uint64 `json:"switches"`
	Revisited uint64 `json:"revisited"`
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
	// Error is the subspace error of the model served at the end, after
	// the service's graceful stop (its final snapshot); 1 if there is
	// none.
	Error float64 `json:"subspace_error"`
	// Stream is "hermite16" or "mnist"; Frequencies the learner's.
	Stream      string `json:"stream"`
	Frequencies string `json:"frequencies,omitempty"`
	// Instances is the services sharing the stream (cluster mode above 1).
	Instances int `json:"instances"`
	// Seed and Forget: the service's learner.seed and learner.forget
	// ("" the default); Switches and Rollbacks its following's, Restarts
	// its change detector's.
	Seed   uint64 `json:"seed"`
	Forget string `json:"forget,omitempty"`
	// Replay: the service's learner.replay; Revisited the rows it
	// learned again.
	Replay    float64 `json:"replay"`
	Revisited uint64  `json:"revisited"`
	Switches  uint64  `json:"switches"`
	Rollbacks uint64  `json:"rollbacks"`
	// Restarts: the change detector's restarts of the model.
	Restarts uint64 `json:"restarts"`
	// With Output: Records stored on the output topic and their rate over
	// the run, beside the messages learned a second (LearnedRate); the
	// delay from a message's append to its record's append (the
	// timestamps the producers set as they send), median, p99 and most,
	// in milliseconds, over the records read back after the run.
	Records     uint64  `json:"records,omitempty"`
	RecordRate  float64 `json:"records_per_second,omitempty"`
	LearnedRate float64 `json:"learned_per_second,omitempty"`
	DelayP50    float64 `json:"delay_p50_ms,omitempty"`
	DelayP99    float64 `json:"delay_p99_ms,omitempty"`
	DelayMax    float64 `json:"delay_max_ms,omitempty"`
	// With Ramp: T, and the served model's error against the classes
	// 5–9 at the first sample with 2.2·T points learned or shed (+20%;
	// RampAt20At is that sample's position: later when the points came
	// between the last two samples) and after the stop (+100%, 3·T).
	Ramp       int     `json:"ramp,omitempty"`
	RampAt20   float64 `json:"ramp_error_20,omitempty"`
	RampAt100  float64 `json:"ramp_error_100,omitempty"`
	RampAt20At int     `json:"ramp_error_20_at,omitempty"`
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
	const topic, scores = "keepup", "keepup.scores"
	topics := map[string]int32{topic: int32(cfg.Partitions)}
	if cfg.Output {
		topics[scores] = int32(cfg.Partitions)
	}
	stack, err := devstack.Start(devstack.Options{Dir: cfg.Dir, Topics: topics})
	if err != nil {
		return res, err
	}
	defer stack.Close()
	var c configs.Config
	c.Model = "keepup"
	c.Kafka.Brokers, c.Kafka.Topic = stack.Brokers(), topic
	c.NATS.URL = stack.NATSURL()
	c.Learner.LoadShedding, c.Learner.Budget = cfg.LoadShedding, cfg.Budget
	c.Learner.Frequencies = cfg.Frequencies
	h := synth.Hermite16()
	c.Learner.Bandwidth = h.L // the closed form's (the median trick gives 2.49): the error measures the learner
	held := make([]float64, 2000*16)
	h.Sample(held, rand.New(rand.NewPCG(99, 99)))
	nheld := 2000
	source := devstack.HermiteJSON(h, 1)
	truth := func(k int) *mat.Dense { return h.Eigenfunctions(held, nheld, k) }
	res.Stream = "hermite16"
	if cfg.Images != nil && cfg.Ramp == 0 {
		var err error
		if source, truth, err = imageStream(&c, cfg); err != nil {
			return res, err
		}
		held, nheld, res.Stream = cfg.Test, len(cfg.Test)/mnistPixels, "mnist"
	}
	if cfg.Rows != nil {
		var err error
		if source, truth, held, nheld, err = fileStream(&c, cfg); err != nil {
			return res, err
		}
		res.Stream = "file"
	}
	// at, with Ramp, points held, nheld and truth at the classes in force
	// at stream position n.
	at := func(int) {}
	if cfg.Ramp > 0 {
		ramp, err := rampStream(&c, cfg)
		if err != nil {
			return res, err
		}
		source, res.Stream, res.Ramp = func(i int) []byte { return ramp.source(i + cfg.RampFrom) }, "mnist-ramp", cfg.Ramp
		c.Snapshot.EveryBatches = 4 // the served model follows the stream within 2,048 points: the +20% is measured, not a snapshot of the ramp
		at = func(n int) {
			h := ramp.half(n)
			held, nheld = ramp.test[h], mnistDriftTest
			truth = func(k int) *mat.Dense {
				if k != ramp.k {
					return mat.NewDense(nheld, k, nil)
				}
				return ramp.truth[h]
			}
		}
		at(0)
	}
	orDefault(&cfg.Seed, 1)
	c.Learner.Seed, c.Learner.Forget, c.Learner.Linger = cfg.Seed, cfg.Forget, cfg.Linger
	res.Seed, res.Forget, res.Replay = cfg.Seed, cfg.Forget, cfg.Replay
	c.Learner.Replay = cfg.Replay
	c.HTTP.Addr = "off"
	c.Cluster.Enabled = cfg.Instances > 1
	if cfg.Output {
		c.Output.Topic = scores
	}
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
	if cfg.Ramp > 0 {
		n = 3*cfg.Ramp - cfg.RampFrom
	}
	if cfg.Rows != nil {
		n -= n % 512 // whole batches of the default learner.batch: learned without lingering
	}
	prodDone := make(chan error, 1)
	start := time.Now()
	go func() {
		prodDone <- devstack.Produce(runCtx, source,
			devstack.ProduceOptions{Brokers: stack.Brokers(), Topic: topic, N: n, Rate: cfg.Rate,
				Progress: func(k int) { produced.Store(int64(k)) }})
	}()
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
	// served is the served model's subspace error on the held-out points
	// (1 when there is none or it cannot project them), and notes its
	// frequencies.
	served := func() float64 {
		m, _ := ps[0].Current().Get()
		if m == nil {
			return 1
		}
		res.Frequencies = m.Header().Views[0].Frequencies
		if res.Frequencies == "" {
			res.Frequencies = "iid"
		}
		proj, err := m.Project(nil, held)
		if err != nil {
			return 1
		}
		return synth.SubspaceError(mat.NewDense(nheld, m.K(), proj), truth(m.K()))
	}
	sample := func() KeepUpPoint {
		// The group's figures: consumed and shed summed over the
		// instances, the learned fraction the lowest of them; the model
		// (learned, features, quality, error) is the first instance's.
		st := ps[0].Status()
		pt := KeepUpPoint{Seconds: time.Since(start).Seconds(), Produced: produced.Load(),
			Learned: st.Samples, Fraction: 1, Features: st.Features, Budget: st.Budget, Switches: st.Switches, Revisited: st.Revisited}
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
		pos := cfg.RampFrom + int(st.Samples+st.Shed)
		at(pos)
		pt.Error = served()
		if cfg.Ramp > 0 && res.RampAt20At == 0 && pos >= cfg.Ramp*22/10 {
			res.RampAt20, res.RampAt20At = pt.Error, pos
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
	if cfg.Rows != nil || cfg.Ramp > 0 {
		// A file's stream is learned to its end before the stop (a
		// stop leaves a lagging service's backlog unlearned): every
		// message learned or shed, n a whole number of batches.
		for st := ps[0].Status(); st.Samples+st.Shed < uint64(n); st = ps[0].Status() {
			if err := nap(ctx, done); err != nil {
				return res, err
			}
			if cfg.Ramp > 0 && res.RampAt20At == 0 { // the +20% point may come after the producer's end
				res.Samples = append(res.Samples, sample())
			}
		}
		if cfg.Ramp > 0 { // the last sample at the end (a +20% point learned between two samples is measured there: RampAt20At says when)
			res.Samples = append(res.Samples, sample())
		}
	}
	if cfg.Output {
		// Every message's record is waited for before the stop (a stop
		// leaves the records of a lagging service's backlog unwritten,
		// and a busy machine's service starts late): the records counted
		// are the stream's, not what a wall-clock window let through.
		// Records that stop coming for outputDrainIdle end the wait.
		last, since := uint64(0), time.Now()
		for recs := outRecords(ps); recs < uint64(n) && time.Since(since) < outputDrainIdle; recs = outRecords(ps) {
			if recs > last {
				last, since = recs, time.Now()
			}
			if err := nap(ctx, done); err != nil {
				return res, err
			}
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.LagAt60, res.LagAtEnd, res.GrowthShare = lagFigures(res.Samples, cfg.Rate)
	res.Error = res.Samples[len(res.Samples)-1].Error
	stop()
	for range ps {
		if err := <-done; err != nil {
			return res, err
		}
	}
	// The model served after the graceful stop (its final snapshot): a
	// run too short for the snapshot cadence is scored too. In cluster
	// mode a snapshot holds what the group confirmed when one was due
	// (pipeline.onConfirmed): a run shorter than the cadence has none.
	at(cfg.RampFrom + n)
	res.Error = served()
	if cfg.Ramp > 0 {
		res.RampAt100 = res.Error
		if res.RampAt20At == 0 {
			res.RampAt20 = 1
		}
	}
	st := ps[0].Status()
	res.Switches, res.Rollbacks, res.Restarts = st.Switches, st.Rollbacks, st.Changes
	res.Revisited = st.Revisited
	if cfg.SaveModel != "" {
		store := snapshot.Store{Dir: filepath.Join(cfg.Dir, "snapshots-0"), Model: c.Model}
		_, data, err := store.Latest()
		if err != nil {
			return res, fmt.Errorf("bench keepup: the final snapshot: %w", err)
		}
		if err := os.WriteFile(cfg.SaveModel, data, 0o644); err != nil {
			return res, fmt.Errorf("bench keepup: --save-model: %w", err)
		}
	}
	if cfg.Output {
		res.Records = outRecords(ps)
		res.RecordRate = float64(res.Records) / res.Seconds
		res.LearnedRate = float64(st.Samples) / res.Seconds
		if err := outputDelays(ctx, stack, topic, scores, cfg.Partitions, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// nap waits 100 ms, unless a service stops (done) or ctx ends first.
func nap(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return fmt.Errorf("the service stopped: %v", err)
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}

// outRecords is the records the instances wrote to the output topic.
func outRecords(ps []*pipeline.Pipeline) uint64 {
	var n uint64
	for _, p := range ps {
		n += p.Status().OutRecords
	}
	return n
}

// outputDrainIdle ends keepup --output's wait for the last records when
// none has come for this long.
const outputDrainIdle = 30 * time.Second

// outputDelays reads both topics back and sets res's delay figures: for
// each record, its append time less its source message's (both the
// time their producer sent them).
func outputDelays(ctx context.Context, stack *devstack.Stack, in, out string, partitions int, res *KeepUpResult) error {
	sent := make([][]time.Time, partitions) // by partition and offset
	for p := range partitions {
		err := stack.ReadPartition(ctx, in, p, func(m kafka.Message) {
			for int64(len(sent[p])) < m.Offset {
				sent[p] = append(sent[p], time.Time{})
			}
			sent[p] = append(sent[p], m.Time)
		})
		if err != nil {
			return err
		}
	}
	var delays []float64
	for p := range partitions {
		err := stack.ReadPartition(ctx, out, p, func(m kafka.Message) {
			sp, so := -1, int64(-1)
			for _, h := range m.Headers {
				switch h.Key {
				case "source-partition":
					sp, _ = strconv.Atoi(string(h.Value))
				case "source-offset":
					so, _ = strconv.ParseInt(string(h.Value), 10, 64)
				}
			}
			if sp >= 0 && sp < partitions && so >= 0 && so < int64(len(sent[sp])) && !sent[sp][so].IsZero() {
				delays = append(delays, float64(m.Time.Sub(sent[sp][so]).Microseconds())/1000)
			}
		})
		if err != nil {
			return err
		}
	}
	if len(delays) == 0 {
		return errors.New("bench: keepup --output: no record could be matched to its message")
	}
	slices.Sort(delays)
	q := func(f float64) float64 { return delays[min(len(delays)-1, int(f*float64(len(delays))))] }
	res.DelayP50, res.DelayP99, res.DelayMax = q(0.5), q(0.99), delays[len(delays)-1]
	return nil
}

// fileStream sets c for a stream of cfg.Rows (Dim columns) as CSV
// messages, every pass in its own order (fileDrift, the case file of
// `bench drift`), and returns the messages, the truth and the rows it is
// scored on.
func fileStream(c *configs.Config, cfg KeepUpConfig) (devstack.Source, func(int) *mat.Dense, []float64, int, error) {
	orDefault(&cfg.K, 10)
	orDefault(&cfg.Seed, 1)
	s, err := newFileDrift(DriftConfig{Rows: cfg.Rows, Dim: cfg.Dim, K: cfg.K, Seed: cfg.Seed})
	if err != nil {
		return nil, nil, nil, 0, err
	}
	c.Kafka.Format, c.Kafka.Dim, c.Learner.K = "csv", s.d, cfg.K
	c.Learner.Bandwidth = s.kern.Bandwidth
	x := make([]float64, s.d)
	src := func(i int) []byte {
		s.sample(x, 1, i)
		b := make([]byte, 0, 12*len(x))
		for j, v := range x {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		return b
	}
	return src, func(k int) *mat.Dense {
		if k != cfg.K {
			return mat.NewDense(s.nScore, k, nil)
		}
		return s.truth
	}, s.scored, s.nScore, nil
}

// lagFigures are a run's lag at its first sample at 60 s or later (0 if
// none), at its last sample, and the lag's growth per second between
// them over the produce rate.
func lagFigures(samples []KeepUpPoint, rate float64) (at60, atEnd int64, growth float64) {
	last := samples[len(samples)-1]
	for _, s := range samples {
		if s.Seconds >= 60 {
			if dt := last.Seconds - s.Seconds; dt > 0 {
				growth = float64(last.Lag-s.Lag) / dt / rate
			}
			return s.Lag, last.Lag, growth
		}
	}
	return 0, last.Lag, 0
}

const mnistPixels = 784

// rampSource is a keep-up run's MNIST ramp: bench drift's stream
// (mnistDrift, case mnist-ramp) as CSV messages.
type rampSource struct {
	*mnistDrift
	x []float64
}

// source is the message at stream position i (called in order).
func (r *rampSource) source(i int) []byte {
	r.sample(r.x, 1, i)
	b := make([]byte, 0, 4*len(r.x))
	for j, v := range r.x {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return b
}

// rampStream sets c for cfg's MNIST ramp (learner k cfg.K, the drift
// case's bandwidth) and returns its source.
func rampStream(c *configs.Config, cfg KeepUpConfig) (*rampSource, error) {
	orDefault(&cfg.K, 10)
	orDefault(&cfg.Seed, 1)
	s, err := newMNISTDrift(DriftConfig{Case: "mnist-ramp", MNIST: cfg.MNIST, Points: cfg.Ramp, K: cfg.K, Seed: cfg.Seed})
	if err != nil {
		return nil, err
	}
	c.Kafka.Format, c.Kafka.Dim, c.Learner.K = "csv", mnistPixels, cfg.K
	c.Learner.Bandwidth = s.kern.Bandwidth
	return &rampSource{mnistDrift: s, x: make([]float64, mnistPixels)}, nil
}

// imageStream sets c for a stream of cfg.Images as CSV messages (learner
// k cfg.K, the Gaussian kernel with the bandwidth the median trick gives
// on the first 512 images, as the service's would on a first batch of
// them) and returns the messages and the truth: exact kernel PCA of the
// images with that kernel, evaluated on cfg.Test by its Nyström
// extension (baseline.Exact), computed before the stream starts so that
// it does not take the service's cores.
func imageStream(c *configs.Config, cfg KeepUpConfig) (devstack.Source, func(int) *mat.Dense, error) {
	n := len(cfg.Images) / mnistPixels
	if n == 0 || len(cfg.Test) == 0 {
		return nil, nil, fmt.Errorf("bench: keepup needs images and held-out images")
	}
	orDefault(&cfg.K, 10)
	c.Kafka.Format, c.Kafka.Dim, c.Learner.K = "csv", mnistPixels, cfg.K
	bw := online.MedianDistance(cfg.Images, min(n, 512), mnistPixels, 512)
	c.Learner.Bandwidth = bw
	kern := features.Kernel{Family: features.Gaussian, Bandwidth: bw}
	exact, err := baseline.NewExact(kern, mnistPixels, cfg.K, n)
	if err != nil {
		return nil, nil, err
	}
	exact.Observe(cfg.Images, n)
	if err := exact.Fit(); err != nil && !errors.Is(err, baseline.ErrNotConverged) {
		return nil, nil, fmt.Errorf("bench: exact kernel PCA of the images: %w", err)
	}
	nt := len(cfg.Test) / mnistPixels
	tv := make([]float64, nt*cfg.K)
	exact.Eval(tv, cfg.Test, nt)
	want := mat.NewDense(nt, cfg.K, tv)
	lines := make([][]byte, n)
	for i := range lines {
		var b []byte
		for j, v := range cfg.Images[i*mnistPixels : (i+1)*mnistPixels] {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		lines[i] = b
	}
	return func(i int) []byte { return lines[i%n] }, func(k int) *mat.Dense {
		if k != cfg.K {
			return mat.NewDense(nt, k, nil)
		}
		return want
	}, nil
}

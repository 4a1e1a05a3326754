package pipeline

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Options configure a Pipeline.
type Options struct {
	Config configs.Config
	// Logger; default zerolog.Nop().
	Logger *zerolog.Logger
	// Registry for metrics; default a new registry (served on /metrics).
	Registry *prometheus.Registry
	// NATS is the connection to publish on; nil connects with
	// Config.NATS unless publishing is disabled.
	NATS *nats.Conn
}

// Status is a point-in-time view of the pipeline for progress displays.
type Status struct {
	Samples      uint64
	Features     int
	Step         uint64
	Version      uint64 // newest persisted snapshot
	Published    uint64 // newest published version
	Bad          uint64
	Consumed     uint64 // messages handled (learned or dead-lettered), this run
	Lag          int64
	Bandwidth    float64
	Eigenvalues  []float64
	LastSnapshot time.Time
}

// Pipeline is the streaming service.
type Pipeline struct {
	cfg      configs.Config
	log      zerolog.Logger
	reg      *prometheus.Registry
	met      *Metrics
	store    *snapshot.Store
	learner  learner
	consumer *ingest.Consumer
	dlq      *ingest.DeadLetter
	dec      *ingest.Decoder
	nc       *nats.Conn
	ownNC    bool
	pub      *publish.Publisher
	svc      *publish.Service
	cur      publish.Current

	mu       sync.Mutex
	consumed map[int]int64 // partition → next offset consumed
	learned  map[int]int64 // partition → next offset covered by learned batches
	status   Status

	history      []historyPoint
	startSamples uint64

	kill     chan struct{}
	killOnce sync.Once
	pubReq   chan pubItem
	pubFinal chan struct{} // closed at shutdown: publish what is pending, then exit
	httpLn   net.Listener
}

type pubItem struct {
	snap *snapshot.Snapshot
	data []byte
}

// New restores the newest valid snapshot (if any) and builds the parts.
// Nothing is fetched until Run.
func New(opt Options) (*Pipeline, error) {
	cfg := opt.Config
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pipeline: invalid configuration:\n%w", err)
	}
	log := zerolog.Nop()
	if opt.Logger != nil {
		log = *opt.Logger
	}
	reg := opt.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	p := &Pipeline{
		cfg: cfg, log: log, reg: reg, met: newMetrics(reg),
		consumed: map[int]int64{}, learned: map[int]int64{},
		kill: make(chan struct{}), pubReq: make(chan pubItem, 1), pubFinal: make(chan struct{}),
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "streamkpca_consumer_lag", Help: "Messages behind the partition ends (last fetch, summed over partitions)."},
			func() float64 {
				if p.consumer == nil {
					return 0
				}
				return float64(p.consumer.Lag())
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "streamkpca_snapshot_age_seconds", Help: "Seconds since the newest persisted snapshot (0 before the first)."},
			func() float64 {
				p.mu.Lock()
				defer p.mu.Unlock()
				if p.status.LastSnapshot.IsZero() {
					return 0
				}
				return time.Since(p.status.LastSnapshot).Seconds()
			}),
	)
	p.store = &snapshot.Store{Dir: cfg.Snapshot.Dir, Model: cfg.Model, Keep: cfg.Snapshot.Keep,
		OnSkip: func(path string, err error) {
			log.Warn().Err(err).Str("file", path).Msg("skipping invalid snapshot; falling back to an older one")
		}}
	lc := online.Config{
		Model: cfg.Model, Algorithm: online.Algorithm(cfg.Learner.Algorithm), K: cfg.Learner.K, Dim: cfg.Kafka.Dim,
		Kernel: cfg.Learner.KernelSpec(), KernelY: cfg.Learner.KernelYSpec(),
		Slices: cfg.Learner.Slices, Uncentered: cfg.Learner.Uncentered,
		BlockSize: cfg.Learner.Block, MaxFeatures: cfg.Learner.MaxFeatures, Theta0: cfg.Learner.Theta0, Theta1: cfg.Learner.Theta1,
		Seed: cfg.Learner.Seed, Standardize: cfg.Learner.Standardize, Center: cfg.Learner.Center,
		Workers: cfg.Learner.Workers, CacheBytes: cfg.Learner.CacheBytes, Precision: online.Precision(cfg.Learner.Precision), Compute: online.Compute(cfg.Learner.Compute), Solver: online.Solver(cfg.Learner.Solver),
	}
	snap, data, err := p.store.Latest()
	switch {
	case err == nil:
		if got, want := online.Algorithm(snap.Header.Algorithm), online.Algorithm(cfg.Learner.Algorithm); got != want {
			return nil, fmt.Errorf("pipeline: the snapshot in %s is a %s model but learner.algorithm is %s; point snapshot.dir elsewhere or change the config", cfg.Snapshot.Dir, got, want)
		}
		p.learner, err = newLearner(lc, snap)
		if err != nil {
			return nil, fmt.Errorf("pipeline: restore %s version %d: %w", cfg.Snapshot.Dir, snap.Header.Version(), err)
		}
		if v := snap.Header.Views[0]; v.Float32() != (lc.Precision == online.Float32) || v.BLAS() != (lc.Compute == online.ComputeBLAS) {
			log.Warn().Str("learner.precision", cfg.Learner.Precision).Str("learner.compute", cfg.Learner.Compute).
				Bool("snapshot_float32", v.Float32()).Bool("snapshot_blas", v.BLAS()).
				Msg("the restored snapshot keeps the precision and compute mode it was learned with; learner.precision and learner.compute apply to new models (point snapshot.dir elsewhere to start one)")
		}
		for _, o := range snap.Header.Offsets {
			if o.Topic == cfg.Kafka.Topic {
				p.consumed[o.Partition], p.learned[o.Partition] = o.Next, o.Next
			}
		}
		m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
		if err != nil {
			return nil, err
		}
		p.cur.Set(m, data)
		p.status.Version = snap.Header.Version()
		log.Info().Uint64("version", snap.Header.Version()).Uint64("samples_seen", snap.Header.SamplesSeen).
			Interface("offsets", snap.Header.Offsets).Msg("restored snapshot; resuming from its offsets")
	case errors.Is(err, snapshot.ErrNoSnapshot):
		p.learner, err = newLearner(lc, nil)
		if err != nil {
			return nil, err
		}
		log.Info().Str("dir", cfg.Snapshot.Dir).Msg("no snapshot found; starting a new model")
	default:
		return nil, err
	}
	p.status.Samples, p.status.Step, p.status.Features = p.learner.samplesSeen(), p.learner.step(), p.learner.features()
	p.startSamples = p.status.Samples
	dx, dy := p.learner.dims()
	p.dec = &ingest.Decoder{Format: ingest.Format(cfg.Kafka.Format), Dim: dx, DimY: dy, MaxBytes: cfg.Kafka.MaxMessageBytes}
	if p.dec.Dim == 0 {
		p.dec.Dim = cfg.Kafka.Dim
	}

	kt, err := cfg.Kafka.TLS.Config()
	if err != nil {
		return nil, err
	}
	pass, err := configs.Secret(cfg.Kafka.SASL.Password, cfg.Kafka.SASL.PasswordFile)
	if err != nil {
		return nil, err
	}
	cc := ingest.ConsumerConfig{
		Brokers: cfg.Kafka.Brokers, Topic: cfg.Kafka.Topic, GroupID: cfg.Kafka.Group, Start: cfg.Kafka.Start,
		QueueSize: cfg.Kafka.QueueSize, SessionTimeout: cfg.Kafka.SessionTimeout, RebalanceTimeout: cfg.Kafka.RebalanceTimeout, TLS: kt, SASLMechanism: cfg.Kafka.SASL.Mechanism, SASLUser: cfg.Kafka.SASL.User,
		SASLPassword: pass, Logger: &log,
	}
	if p.consumer, err = ingest.NewConsumer(cc); err != nil {
		return nil, err
	}
	if p.dlq, err = ingest.NewDeadLetter(cc, cfg.Kafka.DeadLetterTopic); err != nil {
		return nil, err
	}
	if !cfg.NATS.Disabled {
		p.nc = opt.NATS
		if p.nc == nil {
			if p.nc, err = Connect(cfg.NATS, log); err != nil {
				return nil, err
			}
			p.ownNC = true
		}
		pc := publish.Config{Prefix: cfg.NATS.Prefix, Model: cfg.Model, ObjectBucket: cfg.NATS.ObjectBucket, KVBucket: cfg.NATS.KVBucket, Keep: cfg.NATS.Keep}
		if p.pub, err = publish.NewPublisher(p.nc, pc, log); err != nil {
			return nil, err
		}
		if p.svc, err = publish.NewService(p.nc, pc, &p.cur, publish.Limits{MaxVectors: cfg.HTTP.MaxVectors}); err != nil {
			log.Warn().Err(err).Msg("NATS query service not registered (NATS unreachable?); HTTP queries still work")
		}
	}
	return p, nil
}

// Connect opens a NATS connection from the config that keeps retrying in
// the background when the servers are unreachable.
func Connect(c configs.NATS, log zerolog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("streamkpca"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn().Err(err).Msg("NATS disconnected; learning continues")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("NATS reconnected") }),
	}
	pass, err := configs.Secret(c.Password, c.PasswordFile)
	if err != nil {
		return nil, err
	}
	tok, err := configs.Secret(c.Token, c.TokenFile)
	if err != nil {
		return nil, err
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, pass))
	}
	if tok != "" {
		opts = append(opts, nats.Token(tok))
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("pipeline: nats.nkey_file: %w", err)
		}
		opts = append(opts, o)
	}
	if tc, err := c.TLS.Config(); err != nil {
		return nil, err
	} else if tc != nil {
		opts = append(opts, nats.Secure(tc))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("pipeline: connect to NATS at %s: %w", redact(c.URL), err)
	}
	return nc, nil
}

// Current is the served model.
func (p *Pipeline) Current() *publish.Current { return &p.cur }

// Status returns a copy of the current status.
func (p *Pipeline) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.status
	s.Lag = p.consumer.Lag()
	return s
}

// HTTPAddr is the HTTP server's address once Run has started it.
func (p *Pipeline) HTTPAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.httpLn == nil {
		return ""
	}
	return p.httpLn.Addr().String()
}

// Kill stops Run at once with no final snapshot, as a crash would (tests).
func (p *Pipeline) Kill() { p.killOnce.Do(func() { close(p.kill) }) }

// nextOffset tells the consumer where the model needs a partition to start.
func (p *Pipeline) nextOffset(topic string, partition int) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	off, ok := p.consumed[partition]
	return off, ok
}

// errKilled is returned by Run after Kill.
var errKilled = errors.New("pipeline: killed")

// Run learns until ctx is done (graceful: final snapshot) or Kill (none).
func (p *Pipeline) Run(ctx context.Context) error {
	defer p.close()
	srv, err := p.startHTTP()
	if err != nil {
		return err
	}
	if srv != nil {
		defer srv.Close()
	}
	fetchCtx, stopFetch := context.WithCancel(context.Background())
	defer stopFetch()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := p.consumer.Run(fetchCtx, p.nextOffset); err != nil && fetchCtx.Err() == nil {
			p.log.Error().Err(err).Msg("kafka consumer stopped")
		}
	}()
	pubCtx, stopPub := context.WithCancel(context.Background())
	defer stopPub()
	pubDone := make(chan struct{})
	go func() { defer wg.Done(); defer close(pubDone); p.publishLoop(pubCtx) }()
	defer wg.Wait()

	l := &loop{p: p, batch: make([]float64, 0, p.cfg.Learner.Batch*max(p.dec.Dim, 1)), lastSnap: time.Now()}
	if p.learner.twoView() && p.cfg.Kafka.Format != "json" {
		return fmt.Errorf("pipeline: %s learns from (x, y) pairs, which only kafka.format json carries ({\"x\":[...],\"y\":[...]} or {\"x\":[...],\"target\":[...]})", p.cfg.Learner.Algorithm)
	}
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	msgs := p.consumer.Messages()
	p.log.Info().Str("topic", p.cfg.Kafka.Topic).Strs("brokers", p.cfg.Kafka.Brokers).Str("model", p.cfg.Model).Msg("learning")
	for {
		select {
		case <-p.kill:
			stopFetch()
			stopPub()
			return errKilled
		case <-ctx.Done():
			stopFetch()
			l.learn()
			l.snapshot(true)
			// Give the publisher a bounded time to send the final version.
			close(p.pubFinal)
			select {
			case <-pubDone:
			case <-time.After(10 * time.Second):
				p.log.Warn().Msg("final publish did not finish in 10s; the snapshot is on disk and will be published on the next start")
			}
			stopPub()
			return nil
		case m := <-msgs:
			if l.handle(ctx, m) {
				linger.Reset(p.cfg.Learner.Linger)
			}
			if l.rows >= p.cfg.Learner.Batch {
				l.learn()
				linger.Stop()
				if l.sinceSnap >= p.cfg.Snapshot.EveryBatches {
					l.snapshot(false)
				}
			}
		case <-linger.C:
			l.learn()
			l.snapshot(false)
		case <-tick.C:
			if l.sinceSnap > 0 && time.Since(l.lastSnap) >= p.cfg.Snapshot.Every {
				l.snapshot(false)
			}
		}
	}
}

// loop is the state of the learning loop (owned by Run's goroutine).
type loop struct {
	p         *Pipeline
	batch     []float64
	batchY    []float64
	rows      int
	sinceSnap int
	lastSnap  time.Time
	lastCut   *snapshot.Snapshot
}

// handle decodes one message into the batch or dead-letters it. It reports
// whether the message started a new partial batch.
func (l *loop) handle(ctx context.Context, m ingest.Message) bool {
	p := l.p
	p.mu.Lock()
	next, seen := p.consumed[m.Partition]
	if seen && m.Offset < next {
		p.mu.Unlock()
		p.met.Duplicates.Inc()
		return false
	}
	p.consumed[m.Partition] = m.Offset + 1
	p.status.Consumed++
	p.mu.Unlock()
	var err error
	n0, m0 := len(l.batch), len(l.batchY)
	dim0, dimY0 := p.dec.Dim, p.dec.DimY
	l.batch, l.batchY, err = p.dec.Decode(l.batch, l.batchY, m.Value)
	if err == nil {
		err = l.validate(n0, m0)
	}
	if err != nil {
		l.batch, l.batchY = l.batch[:n0], l.batchY[:m0]
		// A refused message must not fix the dimension for the rest.
		p.dec.Dim, p.dec.DimY = dim0, dimY0
	}
	if err != nil {
		reason := ingest.Reason(err)
		if reason == "" {
			reason = ingest.ReasonMalformed
		}
		p.met.BadMessages.WithLabelValues(reason).Inc()
		p.mu.Lock()
		p.status.Bad++
		p.mu.Unlock()
		p.log.Warn().Str("reason", reason).Int("partition", m.Partition).Int64("offset", m.Offset).Err(err).Msg("bad message dead-lettered")
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.dlq.Send(dctx, m, reason, err); err != nil {
			p.met.DeadLetterErrs.Inc()
			p.log.Error().Err(err).Int("partition", m.Partition).Int64("offset", m.Offset).Msg("dead-letter write failed; the message is counted and logged")
		}
		return false
	}
	l.rows++
	return l.rows == 1
}

// validate checks the decoded pair against the model: dimensions, a y for
// two-view models (dropped for one-view ones), the kernel's domain.
func (l *loop) validate(n0, m0 int) error {
	p := l.p
	dx, dy := p.learner.dims()
	x, y := l.batch[n0:], l.batchY[m0:]
	if dx != 0 && len(x) != dx {
		return &ingest.BadMessageError{Reason: ingest.ReasonDimension, Err: fmt.Errorf("%d values, model dimension %d", len(x), dx)}
	}
	if !p.learner.twoView() {
		l.batchY = l.batchY[:m0] // a one-view model ignores y
		y = nil
	} else {
		if len(y) == 0 {
			return &ingest.BadMessageError{Reason: ingest.ReasonDimension, Err: fmt.Errorf("%s needs {\"x\":[...],\"y\":[...]} (or \"target\"); the message has no y", p.cfg.Learner.Algorithm)}
		}
		if dy != 0 && len(y) != dy {
			return &ingest.BadMessageError{Reason: ingest.ReasonDimension, Err: fmt.Errorf("y has %d values, model dimension %d", len(y), dy)}
		}
	}
	if err := p.learner.checkInput(x, y); err != nil {
		return &ingest.BadMessageError{Reason: ingest.ReasonDomain, Err: err}
	}
	return nil
}

// learn feeds the pending batch to the learner.
func (l *loop) learn() {
	if l.rows == 0 {
		return
	}
	p := l.p
	t0 := time.Now()
	err := p.learner.update(l.batch, l.batchY, l.rows)
	p.met.BatchSeconds.Observe(time.Since(t0).Seconds())
	p.met.Samples.Add(float64(l.rows))
	switch {
	case err == nil:
		p.met.Batches.Inc()
	case errors.Is(err, online.ErrDiverged):
		p.met.Rejected.Inc()
		p.log.Warn().Err(err).Msg("batch rejected by the divergence guard; step size lowered")
	default:
		// Validated upstream; an error here is a bug or a first-batch
		// problem (e.g. all points equal for the median trick).
		p.log.Error().Err(err).Int("rows", l.rows).Msg("batch not learned")
	}
	if dx, dy := p.learner.dims(); dx != 0 && p.dec.Dim == 0 {
		p.dec.Dim, p.dec.DimY = dx, dy
	}
	p.mu.Lock()
	for k, v := range p.consumed {
		p.learned[k] = v
	}
	p.status.Samples, p.status.Step, p.status.Features = p.learner.samplesSeen(), p.learner.step(), p.learner.features()
	p.status.Bandwidth = p.learner.bandwidth()
	p.mu.Unlock()
	p.met.Features.Set(float64(p.learner.features()))
	l.batch, l.batchY, l.rows = l.batch[:0], l.batchY[:0], 0
	l.sinceSnap++
}

// snapshot persists the model (if it changed), serves it, hands it to the
// publisher and commits the offsets it covers.
func (l *loop) snapshot(final bool) {
	p := l.p
	if p.learner.step() == 0 || (l.sinceSnap == 0 && !final) {
		return
	}
	if l.sinceSnap == 0 && l.lastCut != nil && l.lastCut.Header.Step == p.learner.step() {
		return // nothing new since the last snapshot
	}
	snap := p.learner.snapshot()
	p.mu.Lock()
	offs := p.learned
	if l.rows == 0 {
		offs = p.consumed // trailing dead-lettered messages are covered too
	}
	commit := map[int]int64{}
	for part, next := range offs {
		snap.Header.Offsets = append(snap.Header.Offsets, snapshot.Offset{Topic: p.cfg.Kafka.Topic, Partition: part, Next: next})
		commit[part] = next
	}
	p.mu.Unlock()
	sortOffsets(snap.Header.Offsets)
	path, data, err := p.store.Save(snap)
	l.lastSnap = time.Now()
	if err != nil {
		p.met.SnapshotErrors.Inc()
		p.log.Error().Err(err).Msg("snapshot write failed; learning continues and the next snapshot retries")
		return
	}
	l.sinceSnap = 0
	l.lastCut = snap
	p.met.Snapshots.Inc()
	p.met.Version.Set(float64(snap.Header.Version()))
	m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
	if err == nil {
		p.cur.Set(m, data)
	}
	eig := snap.Header.Diagnostics.Eigenvalues
	p.mu.Lock()
	p.status.Version, p.status.LastSnapshot, p.status.Eigenvalues = snap.Header.Version(), l.lastSnap, eig
	if len(eig) > 0 {
		p.history = append(p.history, historyPoint{Samples: snap.Header.SamplesSeen, Eigenvalues: eig})
		if len(p.history) > historyLen {
			p.history = p.history[len(p.history)-historyLen:]
		}
	}
	p.mu.Unlock()
	p.log.Info().Str("file", path).Uint64("version", snap.Header.Version()).Uint64("samples_seen", snap.Header.SamplesSeen).
		Int("features", snap.Header.Features()).Floats64("eigenvalues", eig).Msg("snapshot persisted")
	if p.pub != nil {
		// Replace any unpublished older version: only the newest matters.
		select {
		case <-p.pubReq:
		default:
		}
		p.pubReq <- pubItem{snap: snap, data: data}
	}
	if err := p.consumer.Commit(map[string]map[int]int64{p.cfg.Kafka.Topic: commit}); err != nil {
		p.log.Debug().Err(err).Msg("offset commit (a hint for tooling) failed")
	}
}

func sortOffsets(o []snapshot.Offset) {
	for i := 1; i < len(o); i++ {
		for j := i; j > 0 && o[j].Partition < o[j-1].Partition; j-- {
			o[j], o[j-1] = o[j-1], o[j]
		}
	}
}

// publishLoop publishes the newest persisted version, retrying with backoff
// while NATS is unreachable; a newer version supersedes a pending one.
func (p *Pipeline) publishLoop(ctx context.Context) {
	var pending *pubItem
	backoff := 500 * time.Millisecond
	for {
		if pending == nil {
			select {
			case <-ctx.Done():
				return
			case it := <-p.pubReq:
				pending = &it
			case <-p.pubFinal:
				select {
				case it := <-p.pubReq:
					pending = &it
				default:
					return // nothing left to publish
				}
			}
		}
		select {
		case it := <-p.pubReq:
			pending = &it
		default:
		}
		n, err := p.publishOnce(ctx, pending)
		if err == nil {
			p.met.Publishes.Inc()
			p.mu.Lock()
			p.status.Published = n.Version
			p.mu.Unlock()
			p.log.Info().Uint64("version", n.Version).Str("object", n.Object).Int("bytes", n.Size).Msg("published")
			pending, backoff = nil, 500*time.Millisecond
			continue
		}
		p.met.PublishErrors.Inc()
		p.log.Warn().Err(err).Dur("retry_in", backoff).Msg("publish failed; the snapshot is safe on disk, retrying")
		select {
		case <-ctx.Done():
			return
		case it := <-p.pubReq:
			pending = &it
		case <-time.After(backoff):
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}

// publishTimeout bounds one publish; a call still running publishGrace
// after it is abandoned and the next attempt starts afresh, so that the
// publish loop can never hang on the network, whatever the client does.
const publishTimeout, publishGrace = 10 * time.Second, 5 * time.Second

func (p *Pipeline) publishOnce(ctx context.Context, it *pubItem) (publish.Notice, error) {
	pctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	type result struct {
		n   publish.Notice
		err error
	}
	res := make(chan result, 1)
	go func() {
		n, err := p.pub.Publish(pctx, it.snap, it.data)
		res <- result{n, err}
	}()
	select {
	case r := <-res:
		return r.n, r.err
	case <-time.After(publishTimeout + publishGrace):
		p.pub.Reset()
		return publish.Notice{}, fmt.Errorf("publish of version %d did not return %v after its deadline; abandoned, retrying with fresh handles", it.snap.Header.Version(), publishGrace)
	}
}

func (p *Pipeline) close() {
	p.consumer.Close()
	p.dlq.Close()
	if p.svc != nil {
		p.svc.Stop()
	}
	if p.ownNC && p.nc != nil {
		p.nc.Drain()
		deadline := time.Now().Add(5 * time.Second)
		for !p.nc.IsClosed() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	p.learner.close()
}

func (p *Pipeline) startHTTP() (*http.Server, error) {
	if p.cfg.HTTP.Addr == "off" {
		return nil, nil
	}
	tok, err := configs.Secret(p.cfg.HTTP.Token, p.cfg.HTTP.TokenFile)
	if err != nil {
		return nil, err
	}
	guard := func(h http.Handler) http.Handler {
		if tok == "" {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+tok {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"error":"missing or wrong bearer token"}` + "\n"))
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	open := func(h http.Handler) http.Handler {
		if p.cfg.HTTP.ProtectAll {
			return guard(h)
		}
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", open(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })))
	mux.Handle("GET /readyz", open(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, _ := p.cur.Get(); m == nil {
			http.Error(w, "no model version yet", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})))
	mux.Handle("GET /metrics", open(promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{})))
	mux.Handle("GET /{$}", open(p.statusPage(time.Now())))
	mux.Handle("/v1/", guard(publish.HTTPHandler(p.cfg.Model, &p.cur, publish.Limits{MaxVectors: p.cfg.HTTP.MaxVectors, MaxBytes: p.cfg.HTTP.MaxBodyBytes})))
	ln, err := net.Listen("tcp", p.cfg.HTTP.Addr)
	if err != nil {
		return nil, fmt.Errorf("pipeline: http.addr %s: %w", p.cfg.HTTP.Addr, err)
	}
	p.mu.Lock()
	p.httpLn = ln
	p.mu.Unlock()
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second}
	if c, k := p.cfg.HTTP.TLSCertFile, p.cfg.HTTP.TLSKeyFile; c != "" {
		cert, err := tls.LoadX509KeyPair(c, k)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("pipeline: http.tls_cert_file/tls_key_file: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		go srv.ServeTLS(ln, "", "")
		return srv, nil
	}
	go srv.Serve(ln)
	return srv, nil
}

// redact hides credentials in server URLs (nats://user:pass@host) before
// they reach a log line or an error.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = url.User("redacted")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/internal/memlimit"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/output"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/serve"
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
	// Source and DeadLetters replace the Kafka consumer group and the
	// dead-letter topic (tests: ingest.MemSource, ingest.MemDeadLetter);
	// nil uses Config.Kafka.
	Source      ingest.Source
	DeadLetters ingest.DeadLetterWriter
	// Publish, if set, is where versions are published instead of NATS
	// (tests: publish.NewMemBackend()): no NATS connection is made and no
	// NATS query service is registered, whatever Config.NATS says.
	Publish publish.Backend
	// Score, if set, is a quality measure of the served model that the
	// status page shows (the demo's known error); see Pipeline.Score.
	Score *Score
	// Output, if set, replaces the Kafka producer of output.topic (tests:
	// output.Memory); used only when output.topic is set.
	Output output.Producer

	// paceWindow, in tests, shortens load shedding's rate window (see
	// pace; 0: the default 1 s).
	paceWindow time.Duration
	// containerLimit, in tests, replaces the container's memory limit
	// as read (memlimit.Container).
	containerLimit func() (int64, string, error)
}

// Status is a point-in-time view of the pipeline for progress displays.
type Status struct {
	// OutRecords and OutNovel: records stored on output.topic by this
	// run, and how many of them were novel.
	OutRecords, OutNovel uint64
	Samples              uint64
	Features             int
	// Budget is the feature budget (learner.max_features, raised with
	// learner.budget: stream).
	Budget      int
	Step        uint64
	Version     uint64 // newest persisted snapshot
	Published   uint64 // newest published version
	Bad         uint64
	BadByReason map[string]uint64 // dead-lettered messages by reason, this run
	// Hint names the setting to check when most of the last messages
	// were refused for one reason ("" otherwise).
	Hint        string
	Consumed    uint64 // messages handled (learned or dead-lettered), this run
	Lag         int64
	Bandwidth   float64
	Eigenvalues []float64
	// Quality is the held-out score of the served model (see
	// online.KPCA.Assess), nil before any; Changes counts the changes of
	// the stream detected in this run.
	Quality *snapshot.Quality
	Changes uint64
	// Switches counts the challengers that replaced the model since it
	// started, Rollbacks the candidates withdrawn (learner.forget:
	// follow; kept in snapshots).
	Switches, Rollbacks uint64
	Restart             uint64 // the step of the model's last restart (0: none)
	// LearnedFraction is the fraction of the stream's messages learned
	// now (load shedding; 1 when it keeps up), Shed the messages not
	// learned to keep up since the model started.
	LearnedFraction float64
	// Behind: the lag grows whatever is shed (pace.behind): scoring or
	// reading alone take more than learner.target_load.
	Behind bool
	Shed   uint64
	// Revisited counts the rows learned again from the window of recent
	// rows since this process started (learner.replay).
	Revisited    uint64
	LastSnapshot time.Time
	// Members (cluster mode) is the size of the group this instance
	// steps with in Generation; 0 while it is in none (joining, idle
	// without partitions, or after a failed step until the next).
	Members    int
	Generation int32
	// StandingBy, when set, says which live service owns the model name
	// (its lease): this one learns and snapshots but publishes nothing
	// until that lease lapses (nats.lease_ttl).
	StandingBy string
	// Store is how full the object store was at the last publish (nil
	// before one, or when the store cannot say).
	Store *publish.StoreUsage
	// NATSServer is the NATS server this service is connected to now
	// (credentials removed), "" while it is disconnected or publishes
	// through no connection of its own: on a NATS cluster it moves to
	// another server of nats.url when its server goes.
	NATSServer string
}

// Pipeline is the streaming service.
type Pipeline struct {
	cfg configs.Config
	log zerolog.Logger
	met *Metrics
	mem memPlan // the parts' bounds under a container's memory limit
	// opts is what Options gave beyond the configuration.
	opts given
	dir  snapDir
	// learner is the model the loop steps; clu is cluster mode's state
	// (cluster.enabled; nil otherwise), its coordinator (coord).
	learner learner
	clu     *clusterState
	// in is the input edge (the source, admission, parsing ahead), out
	// the output topic's (output.topic; nil when off), pub the versions'
	// way out (the distributor, the NATS query service, the served
	// model).
	in  intake
	out *scores
	pub publication
	// mu guards led, life.stopBy and web.ln.
	mu   sync.Mutex
	led  ledger
	life lifecycle
	web  web
}

// given is what Options gave a Pipeline beyond its configuration.
type given struct {
	scorer     scorer
	paceWindow time.Duration // Options.paceWindow
}

// snapDir is snapshot.dir: its store, its lock (held while the pipeline
// lives) and, when the store holds a snapshot of a newer format than
// this build reads, why the service refuses to start (restore).
type snapDir struct {
	store *snapshot.Store
	lock  *snapshot.Lock
	newer error
}

// intake is the input edge: the source (the Kafka consumer group),
// admission (each message's checks and dead letter, the stream's
// dimension) and the messages parsed ahead of the loop.
type intake struct {
	src ingest.Source
	adm *ingest.Admission
	// parsed carries messages parsed ahead of the loop (ingest.Ahead);
	// ahead counts those not yet handled.
	parsed chan []ingest.Parsed
	ahead  atomic.Int64
	// registry: the Schema Registry's outage (kafka.format avro,
	// protobuf, jsonschema; parsing ahead waits for it).
	registry ingest.Outage
}

// publication is how versions leave the service: the NATS connection
// (the service's own when ownNC: drained at the stop), the distributor
// of persisted versions and its lease (nil with NATS off), the NATS
// query service it switches with the lease (nil without a connection),
// the local store's versions the queries list, and the served model.
type publication struct {
	nc       *nats.Conn
	ownNC    bool
	dist     *publish.Distributor
	front    *serve.Switch
	versions *publish.StoreVersions
	cur      serve.Current
}

// ledger is what the loop consumed, learned and shed, by partition, and
// the status built from it (p.mu's).
type ledger struct {
	consumed map[int]int64 // partition → next offset consumed
	learned  map[int]int64 // partition → next offset covered by learned batches
	shed     shedLedger    // load shedding's count as snapshots record it
	status   Status
	// history and recent: the status page's charts, its throughput now
	// and lag trend (status.go); startSamples: the samples at start.
	history      []historyPoint
	recent       []ratePoint
	startSamples uint64
}

// lifecycle is the stop's: Kill's channel, the graceful stop's deadline
// (shutdown_timeout, once it began; p.mu's), and the goroutines started
// outside Run's errgroup (a rejoin's Rebalance), which closeParts waits
// for within the stop's deadline once the consumer they may wait on is
// closed.
type lifecycle struct {
	kill     chan struct{}
	killOnce sync.Once
	stopBy   time.Time
	owned    sync.WaitGroup
}

// web is the HTTP server's listener (p.mu's, once Run started it) and
// the token that guards its API when set (read once, in New).
type web struct {
	ln    net.Listener
	token string
}

// coord is the loop's coordinator: the cluster's in cluster mode, else
// solo.
func (p *Pipeline) coord() coordinator {
	if p.clu != nil {
		return p.clu
	}
	return solo{}
}

// New restores the newest valid snapshot (if any) and builds the parts:
// the consumer group, the dead-letter writer, the NATS publisher. Nothing
// is fetched until Run. On an error, whatever it had set up is released
// before it returns; a pipeline that will not Run is released by Close.
func New(opt Options) (*Pipeline, error) {
	p, err := build(opt)
	if err != nil {
		if p != nil {
			p.release()
		}
		return nil, err
	}
	return p, nil
}

// build is New's work; on an error it returns what it had built so far
// (nil before anything), for New to release.
func build(opt Options) (*Pipeline, error) {
	cfg := opt.Config
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pipeline: invalid configuration:\n%w", err)
	}
	log := zerolog.Nop()
	if opt.Logger != nil {
		log = *opt.Logger
	}
	// A container's memory limit sizes the service below it.
	readLimit := memlimit.Container
	if opt.containerLimit != nil {
		readLimit = opt.containerLimit
	}
	lim, src, err := readLimit()
	if err != nil {
		log.Warn().Err(err).Msg("the container's memory limit could not be read; the configured bounds apply as they are")
	}
	plan, err := fitMemory(&cfg, lim, src, log, setMemoryLimit)
	if err != nil {
		return nil, err
	}
	reg := opt.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	p := &Pipeline{
		cfg: cfg, log: log, met: newMetrics(reg), mem: plan,
		opts: given{scorer: scorer{s: opt.Score}, paceWindow: opt.paceWindow},
		led:  ledger{consumed: map[int]int64{}, learned: map[int]int64{}},
		life: lifecycle{kill: make(chan struct{})},
		in:   intake{parsed: make(chan []ingest.Parsed, 1)},
	}
	p.registerGauges()
	if err := p.openStore(); err != nil {
		return p, err
	}
	lc := cfg.Learner.Online(cfg.Model, cfg.Kafka.Dim)
	snap, err := p.restore(&lc)
	if err != nil {
		return p, err
	}
	dec, err := p.newDecoder()
	if err != nil {
		return p, err
	}
	if err := p.readHTTPToken(); err != nil {
		return p, err
	}
	if err := p.connectKafka(opt, dec); err != nil {
		return p, err
	}
	if err := p.connectNATS(opt, lc.Incarnation, snap); err != nil {
		return p, err
	}
	return p, nil
}

// registerGauges registers the metrics read from the pipeline's state
// when scraped.
func (p *Pipeline) registerGauges() {
	p.met.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "streamkpca_consumer_lag", Help: "Messages behind the partition ends (last fetch, summed over partitions)."},
			func() float64 {
				if p.in.src == nil {
					return 0
				}
				return float64(p.lag())
			}),
		newPartitionLags(p),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "streamkpca_queue_bytes", Help: "Bytes of fetched messages waiting for the learner, as counted against kafka.queue_bytes (never above it)."},
			func() float64 {
				if q, ok := p.in.src.(interface{ QueuedBytes() int64 }); ok {
					return float64(q.QueuedBytes())
				}
				return 0
			}),
		p.served(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "streamkpca_dead_letters_spilled", Help: "Dead letters the dead-letter topic refused, kept in <snapshot.dir>/<model>.dead-letters until it takes them (kafka.dead_letter_spill_bytes)."},
			func() float64 {
				n, _ := p.deadLetters().Spilled() // nil-safe
				return float64(n)
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "streamkpca_nats_sent_bytes_total", Help: "Bytes this service sent to NATS (its connection's count: the cluster exchange, publishing, answers)."},
			func() float64 { return float64(p.natsStats().OutBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "streamkpca_nats_received_bytes_total", Help: "Bytes this service received from NATS (its connection's count: the cluster exchange, queries)."},
			func() float64 { return float64(p.natsStats().InBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "streamkpca_snapshot_age_seconds", Help: "Seconds since the newest persisted snapshot (0 before the first)."},
			func() float64 {
				p.mu.Lock()
				defer p.mu.Unlock()
				if p.led.status.LastSnapshot.IsZero() {
					return 0
				}
				return time.Since(p.led.status.LastSnapshot).Seconds()
			}),
	)
}

// openStore opens the snapshot directory: one process a snapshot.dir
// (and model), leftover temporary files removed.
func (p *Pipeline) openStore() error {
	cfg, log := p.cfg, p.log
	p.dir.store = &snapshot.Store{Dir: cfg.Snapshot.Dir, Model: cfg.Model, Keep: cfg.Snapshot.Keep,
		OnSkip: func(path string, err error) {
			if errors.Is(err, snapshot.ErrNewer) && p.dir.newer == nil {
				p.dir.newer = fmt.Errorf("%s: %w", path, err)
			}
			log.Warn().Err(err).Str("file", path).Msg("skipping invalid snapshot; falling back to an older one")
		}}
	// One process a snapshot.dir (and model): a second would interleave
	// two lives of the model in it.
	// (A directory that cannot be created yet is not a refusal: learning
	// starts, and the lock is taken before the first snapshot is saved.)
	lock, err := p.dir.store.Lock()
	switch {
	case errors.Is(err, snapshot.ErrLocked):
		return fmt.Errorf("pipeline: %w", err)
	case err != nil:
		log.Warn().Err(err).Msg("the snapshot directory cannot be locked yet; learning starts, snapshots wait for it")
	}
	if lock != nil {
		p.locked(lock)
	}
	p.pub.versions = publish.NewStoreVersions(p.dir.store)
	p.pub.versions.HoldBytes, p.pub.versions.CacheBytes = p.mem.versionHold, p.mem.versionCache
	return nil
}

// locked keeps the snapshot directory's lock and, holding it, removes
// the temporary files a crash left mid-write there (no other process
// can be writing them).
func (p *Pipeline) locked(lock *snapshot.Lock) {
	p.dir.lock = lock
	if err := p.dir.store.Clean(); err != nil {
		p.log.Warn().Err(err).Str("dir", p.cfg.Snapshot.Dir).Msg("leftover temporary files in snapshot.dir could not be removed; they take disk until removed by hand")
	}
}

// restore makes the learner: the newest snapshot's, with the offsets it
// covers and its model served, or a new model (lc's incarnation set).
// It returns the snapshot restored (nil: a new model).
func (p *Pipeline) restore(lc *online.Config) (*snapshot.Snapshot, error) {
	cfg, log := p.cfg, p.log
	snap, data, err := p.dir.store.Latest()
	if p.dir.newer != nil {
		// Learning here would let the retention, which keeps the highest
		// versions, delete the newer release's model or this one's.
		return nil, fmt.Errorf("pipeline: snapshot.dir holds a snapshot written by a newer streamkpca (%w): run that release or a later one, or point snapshot.dir elsewhere to start a new model", p.dir.newer)
	}
	if err == nil {
		var diffs []string
		if got, want := online.Algorithm(snap.Header.Algorithm), online.Algorithm(cfg.Learner.Algorithm); got != want {
			diffs = append(diffs, fmt.Sprintf("learner.algorithm is %s in the configuration but %s in the stored model", want, got))
		}
		for _, d := range online.Differences(*lc, &snap.Header) {
			diffs = append(diffs, d.String())
		}
		if len(diffs) > 0 {
			if !cfg.Learner.Reset {
				return nil, fmt.Errorf("pipeline: the model stored in %s (version %d) was learned with other settings, which a restored model keeps: %s; put the stored values back in the configuration, point snapshot.dir elsewhere, or start a new model here with learner.reset: true (--set learner.reset=true; the stored snapshots are moved to a subdirectory)",
					cfg.Snapshot.Dir, snap.Header.Version(), strings.Join(diffs, "; "))
			}
			if p.dir.lock == nil {
				return nil, fmt.Errorf("pipeline: learner.reset: snapshot.dir %s cannot be locked, so its snapshots cannot be moved aside safely", cfg.Snapshot.Dir)
			}
			sub := "replaced-" + time.Now().UTC().Format("20060102T150405Z")
			n, merr := p.dir.store.MoveAside(sub)
			if merr != nil {
				return nil, fmt.Errorf("pipeline: learner.reset: %w", merr)
			}
			log.Warn().Strs("differences", diffs).Int("moved", n).Str("to", filepath.Join(cfg.Snapshot.Dir, sub)).
				Msg("learner.reset: the stored model was learned with other settings; its snapshots are moved aside and a new model (a new incarnation) starts")
			snap, err = nil, snapshot.ErrNoSnapshot
		}
	}
	switch {
	case err == nil:
		if cfg.Cluster.Enabled {
			p.learner = &clusterLearner{cfg: *lc, local: snap}
		} else {
			p.learner, err = newLearner(*lc, snap)
		}
		if err != nil {
			return nil, fmt.Errorf("pipeline: restore %s version %d: %w", cfg.Snapshot.Dir, snap.Header.Version(), err)
		}
		if o, ok := p.learner.(oneView); ok && lc.MaxFeatures > o.l.MaxFeatures() {
			from := o.l.MaxFeatures()
			if got := o.l.RaiseBudget(lc.MaxFeatures); got > from {
				log.Info().Int("from", from).Int("to", got).Msg("learner.max_features is above the stored model's budget: raised (new blocks join one a step)")
			}
		}
		if v := snap.Header.Views[0]; v.Float32() != (lc.Precision == online.Float32) || v.BLAS() != (lc.Compute == online.ComputeBLAS) {
			log.Warn().Str("learner.precision", cfg.Learner.Precision).Str("learner.compute", cfg.Learner.Compute).
				Bool("snapshot_float32", v.Float32()).Bool("snapshot_blas", v.BLAS()).
				Msg("the restored snapshot keeps the precision and compute mode it was learned with; learner.precision and learner.compute apply to new models (point snapshot.dir elsewhere to start one)")
		}
		for _, o := range snap.Header.Offsets {
			if o.Topic == cfg.Kafka.Topic {
				p.led.consumed[o.Partition], p.led.learned[o.Partition] = o.Next, o.Next
			}
		}
		m, err := snapshot.NewModel(snap.Served(), snapshot.ModelOptions{CacheBytes: p.mem.servedCache})
		if err != nil {
			return nil, err
		}
		if data, err = publish.PublishedBytes(snap, data); err != nil {
			return nil, err
		}
		p.pub.cur.Set(m, data)
		p.led.status.Version = snap.Header.Version()
		log.Info().Uint64("version", snap.Header.Version()).Uint64("samples_seen", snap.Header.SamplesSeen).
			Interface("offsets", snap.Header.Offsets).Msg("restored snapshot; resuming from its offsets")
	case errors.Is(err, snapshot.ErrNoSnapshot):
		if cfg.Cluster.Enabled {
			// The members must write one model bit for bit: no random
			// incarnation (docs/api.md).
			p.learner = &clusterLearner{cfg: *lc}
		} else {
			lc.Incarnation = newIncarnation()
			if p.learner, err = newLearner(*lc, nil); err != nil {
				return nil, err
			}
		}
		log.Info().Str("dir", cfg.Snapshot.Dir).Str("incarnation", lc.Incarnation).Msg("no snapshot found; starting a new model")
	default:
		return nil, err
	}
	p.led.status.Samples, p.led.status.Step, p.led.status.Features = p.learner.samplesSeen(), p.learner.step(), p.learner.features()
	p.led.status.LearnedFraction = 1
	if snap != nil && !cfg.Cluster.Enabled {
		if f := snap.Header.Diagnostics.LearnedFraction; f > 0 && f < 1 {
			p.led.status.LearnedFraction = f
		}
		p.led.status.Shed = snap.Header.Diagnostics.Shed
		p.led.shed.restore(snap.Header.Diagnostics.Shed)
	}
	p.led.startSamples = p.led.status.Samples
	return snap, nil
}

// newDecoder makes the messages' decoder for the learner's dimensions
// (configs.Kafka.Decoder).
func (p *Pipeline) newDecoder() (ingest.Decoder, error) {
	dx, dy := p.learner.dims()
	dec, err := p.cfg.Kafka.Decoder(dx, dy, !online.Algorithm(p.cfg.Learner.Algorithm).TwoView())
	if err != nil {
		return ingest.Decoder{}, fmt.Errorf("pipeline: %w", err)
	}
	return *dec, nil
}

// readHTTPToken reads the HTTP token (an unusable one stops start-up).
func (p *Pipeline) readHTTPToken() error {
	h := p.cfg.HTTP
	if h.Addr == "off" {
		return nil
	}
	var err error
	if p.web.token, err = configs.Secret("http.token", h.Token, h.TokenFile); err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if h.ProtectAll && p.web.token == "" {
		return errors.New("pipeline: http.protect_all is set but there is no token: set http.token or http.token_file")
	}
	return nil
}

// outputCluster is how the output topic's writer reaches its cluster:
// cc with output.brokers and the output's TLS and SASL settings
// (configs.Config.OutputSecurity), their secrets read.
func outputCluster(cfg configs.Config, cc ingest.ConsumerConfig) (ingest.ConsumerConfig, error) {
	tlsc, sasl, sec := cfg.OutputSecurity()
	occ := cc
	occ.Brokers = cfg.Output.Brokers
	if sec == "kafka" {
		return occ, nil // cc holds kafka.tls and kafka.sasl, read already
	}
	var err error
	if occ.TLS, err = tlsc.Config(); err != nil {
		return occ, fmt.Errorf("pipeline: output.tls: %w", err)
	}
	if occ.SASLPassword, err = configs.Secret("output.sasl.password", sasl.Password, sasl.PasswordFile); err != nil {
		return occ, fmt.Errorf("pipeline: %w", err)
	}
	occ.SASLMechanism, occ.SASLUser = sasl.Mechanism, sasl.User
	return occ, nil
}

// connectKafka reads the Kafka secrets and makes the consumer
// (opt.Source unless nil) and the dead-letter queue.
func (p *Pipeline) connectKafka(opt Options, dec ingest.Decoder) error {
	cfg, log := p.cfg, p.log
	kt, err := cfg.Kafka.TLS.Config()
	if err != nil {
		return err
	}
	pass, err := configs.Secret("kafka.sasl.password", cfg.Kafka.SASL.Password, cfg.Kafka.SASL.PasswordFile)
	if err != nil {
		return err
	}
	cc := ingest.ConsumerConfig{
		Brokers: cfg.Kafka.Brokers, Topic: cfg.Kafka.Topic, GroupID: cfg.Kafka.Group, Start: cfg.Kafka.Start,
		QueueSize: cfg.Kafka.QueueSize, QueueBytes: cfg.Kafka.QueueBytes, FetchMaxWait: cfg.Kafka.FetchMaxWait, SessionTimeout: cfg.Kafka.SessionTimeout, RebalanceTimeout: cfg.Kafka.RebalanceTimeout, TLS: kt, SASLMechanism: cfg.Kafka.SASL.Mechanism, SASLUser: cfg.Kafka.SASL.User,
		SASLPassword: pass, Logger: &log, OutOfRange: cfg.Kafka.OffsetOutOfRange,
		OnGap: func(g ingest.OffsetGap) {
			p.met.OffsetGaps.WithLabelValues(g.Kind).Inc()
			p.met.DeletedUnread.Add(float64(g.Lost))
		},
	}
	if cfg.Cluster.Enabled {
		p.clu = &clusterState{learner: p.learner.(*clusterLearner), events: make(chan genEvent)}
		cc.OnAssign = p.onAssign
		p.learner.(*clusterLearner).next = p.myOffsets
		p.learner.(*clusterLearner).stored = p.deadLettersStored
	}
	p.in.src = opt.Source
	if p.in.src == nil {
		if p.in.src, err = ingest.NewConsumer(cc); err != nil {
			return err
		}
	}
	if _, ok := p.in.src.(groupSource); p.clu != nil && !ok {
		return errors.New("pipeline: cluster.enabled needs the Kafka consumer group (a Source with generations)") // New releases the consumer
	}
	dw := opt.DeadLetters
	if dw == nil {
		if dw, err = ingest.NewDeadLetter(cc, cfg.Kafka.DeadLetterTopic); err != nil {
			return err
		}
	}
	if cfg.Output.Topic != "" {
		prod := opt.Output
		if prod == nil {
			occ, err := outputCluster(cfg, cc)
			if err != nil {
				return err
			}
			tr, err := occ.Transport()
			if err != nil {
				return fmt.Errorf("pipeline: output topic (output.tls, output.sasl or kafka's): %w", err)
			}
			if prod, err = output.NewKafka(output.KafkaConfig{Brokers: cfg.Output.Brokers, Topic: cfg.Output.Topic, Transport: tr}); err != nil {
				return fmt.Errorf("pipeline: output topic (output.topic, output.brokers): %w", err)
			}
		}
		restored, _ := p.pub.cur.Get()
		p.out = newScores(prod, cfg.Output.NoveltyWindow, restored)
	}
	spill, err := ingest.OpenSpill(filepath.Join(cfg.Snapshot.Dir, cfg.Model+".dead-letters"), cfg.Kafka.DeadLetterSpillBytes)
	if err != nil {
		// As the snapshots: learning starts; dead letters the topic
		// refuses are written again until stored, and snapshots wait.
		p.log.Warn().Err(err).Msg("the dead-letter spill cannot be read; starting without it (check snapshot.dir)")
		spill = nil
	}
	if n, b := spill.Len(); n > 0 {
		p.log.Warn().Int64("records", n).Int64("bytes", b).Str("file", spill.Path()).Str("kafka.dead_letter_topic", cfg.Kafka.DeadLetterTopic).
			Msg("dead letters an earlier run could not write are waiting; sending them to the dead-letter topic")
	}
	var dlq *ingest.DeadLetterQueue
	dlq = ingest.NewDeadLetterQueue(dw, deadLetterQueue, deadLetterBytes, spill, func(recs []ingest.DeadLetterRecord, err error) {
		p.met.DeadLetterErrs.Add(float64(len(recs)))
		if len(recs) == 0 {
			n, _ := dlq.Spilled()
			p.log.Error().Err(err).Int64("spilled", n).Str("kafka.dead_letter_topic", cfg.Kafka.DeadLetterTopic).Str("file", spill.Path()).
				Msg("spilled dead letters not sent; retrying with back-off (check the topic exists and this service may write to it)")
			return
		}
		r := recs[0]
		p.log.Error().Err(err).Int("records", len(recs)).Str("reason", r.Reason).Int("partition", r.Msg.Partition).Int64("offset", r.Msg.Offset).
			Str("kafka.dead_letter_topic", cfg.Kafka.DeadLetterTopic).
			Msg("dead-letter write failed; the records go to the spill in snapshot.dir (kafka.dead_letter_spill_bytes) or, when it is full, are written again while snapshots wait")
	})
	p.in.adm = ingest.NewAdmission(dec, shape{p}, dlq)
	return nil
}

// deadLetters is the dead-letter queue (nil before it is made).
func (p *Pipeline) deadLetters() *ingest.DeadLetterQueue {
	if p.in.adm == nil {
		return nil
	}
	return p.in.adm.DeadLetters()
}

// deadLettersStored waits, for at most half cluster.step_timeout, until
// the dead letters queued so far are stored (on the topic or in the
// spill): a cluster member's step covers them.
func (p *Pipeline) deadLettersStored(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Cluster.StepTimeout/2)
	defer cancel()
	return p.deadLetters().Flush(ctx)
}

// connectNATS makes the publisher (opt.Publish, or a NATS connection
// unless nats.disabled) and takes the model name's lease.
func (p *Pipeline) connectNATS(opt Options, incarnation string, snap *snapshot.Snapshot) error {
	cfg, log := p.cfg, p.log
	var err error
	pc := publish.Config{Prefix: cfg.NATS.Prefix, Model: cfg.Model, ObjectBucket: cfg.NATS.ObjectBucket, KVBucket: cfg.NATS.KVBucket, Keep: cfg.NATS.Keep, Replicas: cfg.NATS.Replicas}
	var pub *publish.Publisher
	switch {
	case opt.Publish != nil:
		if pub, err = publish.NewPublisherOn(opt.Publish, pc, log); err != nil {
			return err
		}
	case !cfg.NATS.Disabled:
		p.pub.nc = opt.NATS
		if p.pub.nc == nil {
			cc, err := cfg.NATS.ConnectConfig()
			if err != nil {
				return err
			}
			if p.pub.nc, err = publish.Connect(cc, log); err != nil {
				return err
			}
			p.pub.ownNC = true
		}
		if pub, err = publish.NewPublisher(p.pub.nc, pc, log); err != nil {
			return err
		}
		p.pub.front = serve.NewSwitch(p.pub.nc, pc, &p.pub.cur, serve.Limits{MaxVectors: cfg.HTTP.MaxVectors},
			serve.VersionOptions{Versions: p.pub.versions, CanPin: cfg.NATS.AllowPin, OnPin: p.tellWatchers})
	default:
		return nil
	}
	host, _ := os.Hostname()
	me := publish.Owner{ID: p.ownerID(incarnation, snap), Host: host, PID: os.Getpid(), TTL: cfg.NATS.LeaseTTL}
	if !cfg.Cluster.Enabled {
		me.Dir = dirIdentity(cfg.Snapshot.Dir)
	}
	dc := publish.DistributorConfig{Owner: me}
	if p.pub.nc != nil {
		dc.Setting, dc.Address = "nats.url", publish.RedactURL(cfg.NATS.URL)
	}
	if p.pub.dist, err = publish.NewDistributor(pub, dc, log, p.distributionHooks()); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // start-up must not wait long for NATS
	p.pub.dist.Renew(ctx)
	cancel()
	return nil
}

// ownerID names this service in the model name's lease (publish.Owner):
// the cluster's group, else the model's incarnation (a restart on the
// same snapshot.dir keeps it), else (a model restored from before
// incarnations) this host's snapshot.dir.
func (p *Pipeline) ownerID(inc string, snap *snapshot.Snapshot) string {
	if p.cfg.Cluster.Enabled {
		return "group:" + p.cfg.Kafka.Group
	}
	if snap != nil && snap.Header.Incarnation != "" {
		return snap.Header.Incarnation
	}
	if inc != "" {
		return inc
	}
	host, _ := os.Hostname()
	dir, _ := filepath.Abs(p.cfg.Snapshot.Dir)
	return "dir:" + host + ":" + dir
}

// deadLetterQueue and deadLetterBytes bound the dead letters waiting for
// their write, in count and in bytes of keys and values: the learner waits
// beyond them.
const (
	deadLetterQueue = 4096
	deadLetterBytes = 16 << 20
)

// natsStats is the traffic of the service's own NATS connection (zero
// without one).
func (p *Pipeline) natsStats() nats.Statistics {
	if p.pub.nc == nil {
		return nats.Statistics{}
	}
	return p.pub.nc.Stats()
}

// served is the streamkpca_served_version gauge: the version the queries
// answer, pinned or newest.
func (p *Pipeline) served() prometheus.GaugeFunc {
	p.met.Served = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "streamkpca_served_version", Help: "Version answered by the HTTP and NATS queries: the pinned one, else the newest (0 before the first)."},
		func() float64 {
			if m, _ := p.pub.cur.Get(); m != nil {
				return float64(m.Header().Version())
			}
			return 0
		})
	return p.met.Served
}

// restorePin serves the version an operator pinned before a restart (the
// NATS pin key), if the local store still holds it; otherwise it says why
// the newest is served. NATS unreachable: the pin is restored by nobody
// and the newest is served, as the log says.
func (p *Pipeline) restorePin() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // start-up must not wait long for NATS
	defer cancel()
	pin, err := p.pub.dist.Publisher().Pinned(ctx)
	v := pin.Version
	switch {
	case err != nil:
		p.log.Warn().Err(err).Msg("could not read the pin from NATS; serving the newest version")
	case v == 0:
	default:
		m, data, err := p.pub.versions.Load(v)
		if err != nil {
			p.log.Error().Err(err).Uint64("pinned", v).Msg("the pinned version is not in snapshot.dir; serving the newest while Watch clients follow the pin: unpin or pin again")
			return
		}
		if inc := m.Header().Incarnation; pin.Incarnation != "" && inc != pin.Incarnation {
			// A pin names a version of one incarnation: this model's
			// version of that number is another model.
			p.log.Error().Uint64("pinned", v).Str("pin_incarnation", pin.Incarnation).Str("incarnation", inc).
				Msg("the pin names a version of another incarnation of this model; serving the newest while Watch clients follow the pin: unpin or pin again")
			return
		}
		p.pub.cur.Pin(m, data)
		p.log.Info().Uint64("pinned", v).Msg("restored the pin: serving the pinned version")
	}
}

// tellWatchers moves the NATS pin key before a pin (m) or an unpin (nil)
// takes effect, so that every Watch follows it; with NATS off it has
// nothing to tell.
func (p *Pipeline) tellWatchers(m *snapshot.Model, data []byte) error {
	if p.pub.dist == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), publish.Timeout)
	defer cancel()
	if m == nil {
		return p.pub.dist.Publisher().Unpin(ctx)
	}
	return p.pub.dist.Publisher().Pin(ctx, m, data)
}

// Current is the served model.
func (p *Pipeline) Current() *serve.Current { return &p.pub.cur }

// Status returns a copy of the current status.
func (p *Pipeline) Status() Status {
	lag := p.lag() // the source's lock, never under p.mu (see sourcetest)
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.led.status
	s.Lag = lag
	s.BadByReason = maps.Clone(p.led.status.BadByReason)
	if o := p.pub.dist.StandingBy(); o != nil {
		s.StandingBy = fmt.Sprintf("%s (host %s, pid %d)", o.ID, o.Host, o.PID)
	}
	if p.pub.nc != nil && p.pub.nc.IsConnected() {
		s.NATSServer = p.pub.nc.ConnectedUrlRedacted()
	}
	return s
}

// HTTPAddr is the HTTP server's address once Run has started it.
func (p *Pipeline) HTTPAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.web.ln == nil {
		return ""
	}
	return p.web.ln.Addr().String()
}

// waitOwned waits for the goroutines of p.life.owned and those the
// distributor left running until the stop's deadline (5 s outside a
// graceful stop), and says so if one is left.
func (p *Pipeline) waitOwned() {
	done := make(chan struct{})
	go func() { p.life.owned.Wait(); close(done) }()
	ctx, cancel := p.stopContext(5 * time.Second)
	defer cancel()
	ok := p.pub.dist.Wait(ctx)
	select {
	case <-done:
	case <-ctx.Done():
		ok = false
	}
	if !ok {
		p.log.Warn().Msg("a network call (a publish or a consumer group rejoin) had not returned by the stop's deadline; stopping without it")
	}
}

// killed reports whether Kill was called.
func (p *Pipeline) killed() bool {
	select {
	case <-p.life.kill:
		return true
	default:
		return false
	}
}

// Kill stops Run at once with no final snapshot, as a crash would (tests).
func (p *Pipeline) Kill() { p.life.killOnce.Do(func() { close(p.life.kill) }) }

// nextOffset tells the consumer where the model needs a partition to start.
func (p *Pipeline) nextOffset(topic string, partition int) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	off, ok := p.led.consumed[partition]
	return off, ok
}

// lag is the consumer's lag plus the messages parsed ahead and not yet
// taken by the loop.
func (p *Pipeline) lag() int64 {
	return p.in.src.Lag() + p.in.ahead.Load()
}

// newPace is the loop's load shedding (see pace): off with
// learner.load_shedding off, from the restored learned fraction. A
// member of a group sheds load on its own partitions as one instance
// does: it learns only the messages whose hash falls under its fraction,
// and the group's offsets cover the others; its step's time is the
// group's, so it sheds when its partitions bring more rows than the
// group's steps can take.
func (p *Pipeline) newPace() *pace {
	return newPace(p.cfg.Learner.LoadShedding == "off", p.cfg.Learner.TargetLoad, p.led.status.LearnedFraction, p.opts.paceWindow)
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
		defer func() {
			// Answer the requests in flight (each bounded by the server's
			// timeouts), then close whatever is left.
			sctx, cancel := p.stopContext(5 * time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				srv.Close()
			}
		}()
	}
	// Run owns every goroutine it starts (g). Each ends with its context;
	// the first deferred call below stops them all and waits, before the
	// parts they use are closed, so no return path can hang or leak.
	bg, stopAll := context.WithCancel(context.Background())
	fetchCtx, stopFetch := context.WithCancel(bg)
	defer stopFetch()
	pubCtx, stopPub := context.WithCancel(bg)
	defer stopPub()
	// work bounds waits inside the loop (a full dead-letter queue): not
	// by ctx, which ends the loop gracefully, only by Kill.
	work, stopWork := context.WithCancel(bg)
	var g errgroup.Group
	defer func() {
		stopAll()
		g.Wait()
	}()
	// A consumer that ends on its own (kafka.offset_out_of_range: fail)
	// stops the service: learning would halt without a word otherwise.
	srcErr := make(chan error, 1)
	g.Go(func() error {
		if err := p.in.src.Run(fetchCtx, p.nextOffset); err != nil && fetchCtx.Err() == nil {
			p.log.Error().Err(err).Msg("kafka consumer stopped; stopping the service (a final snapshot of what was learned)")
			srcErr <- err
		}
		return nil
	})
	pubDone := make(chan struct{})
	g.Go(func() error {
		defer close(pubDone)
		p.pub.dist.Run(pubCtx)
		return nil
	})
	g.Go(func() error {
		select {
		case <-p.life.kill:
			stopWork()
		case <-work.Done():
		}
		return nil
	})

	l := p.newLoop(ctx)
	// Dead letters wait for room until the stop or Kill (see handle).
	enq, stopEnq := context.WithCancel(work)
	defer stopEnq()
	defer context.AfterFunc(ctx, stopEnq)()
	l.enq = enq
	// Parsing runs ahead of the loop by up to a batch (and a byte budget
	// of kafka.queue_bytes), on its own goroutine.
	budget := p.cfg.Kafka.QueueBytes
	sem := semaphore.NewWeighted(budget)
	g.Go(func() error {
		ingest.Ahead{Source: p.in.src, Decoder: p.in.adm.Parser(), Log: p.log, Max: p.cfg.Learner.Batch,
			Budget: sem, Bytes: budget, Pending: &p.in.ahead, Registry: &p.in.registry}.Run(fetchCtx, p.in.parsed)
		return nil
	})
	return p.drive(ctx, l, runEnds{work: work, sem: sem, stopFetch: stopFetch, stopPub: stopPub, pubDone: pubDone, srcErr: srcErr})
}

// runEnds is what the loop of Run needs of the goroutines around it: the
// context that bounds its waits (ended by Kill), the parsed messages'
// byte budget, the stops of fetching and publishing, and the signal that
// publishing has ended.
type runEnds struct {
	work               context.Context
	sem                *semaphore.Weighted
	stopFetch, stopPub context.CancelFunc
	pubDone            chan struct{}
	srcErr             <-chan error // the consumer ended on its own
}

// drive runs the learning loop until ctx is done (a graceful stop: the
// final snapshot), Kill (none) or an error that stops learning: it takes
// parsed messages, learns batches when they are full or have lingered,
// snapshots on time and follows the group's generations.
func (p *Pipeline) drive(ctx context.Context, l *loop, e runEnds) error {
	linger := l.linger
	generations := p.coord().generations() // cluster mode: the consumer's new generations
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	// pending: messages handed over and not yet handled (the loop was
	// full, or a batch ended inside the slice).
	var pending []ingest.Parsed
	p.log.Info().Str("topic", p.cfg.Kafka.Topic).Strs("brokers", p.cfg.Kafka.Brokers).Str("model", p.cfg.Model).Msg("learning")
	for {
		if errors.Is(l.fatal, cluster.ErrRefused) {
			return fmt.Errorf("pipeline: this instance leaves the consumer group (nothing was committed): %w", l.fatal)
		}
		if l.fatal != nil {
			return fmt.Errorf("pipeline: the model cannot learn this stream with this configuration (nothing was committed): %w", l.fatal)
		}
		if len(pending) > 0 && !l.full() {
			pending = l.consume(e.work, pending, e.sem, linger)
			continue
		}
		inbox := p.in.parsed
		if l.full() || len(pending) > 0 {
			inbox = nil
		}
		var revisit <-chan struct{} // learner.replay: ready while a revisit is due
		if inbox != nil && l.replayDue() {
			revisit = alwaysReady
		}
		select {
		case <-p.life.kill:
			e.stopFetch()
			e.stopPub()
			return errKilled
		case <-ctx.Done():
			l.stop(e.stopFetch, e.pubDone)
			e.stopPub()
			return nil
		case err := <-e.srcErr:
			l.stop(e.stopFetch, e.pubDone)
			e.stopPub()
			return fmt.Errorf("pipeline: the Kafka consumer stopped (what was learned is in the final snapshot): %w", err)
		case pending = <-inbox:
		case ev := <-generations:
			l.rejoin(ev)
		case <-linger.C:
			if len(l.pre) > 0 { // fewer than a batch came: decide on those
				pending = append(l.decide(), pending...)
				continue
			}
			l.learn()
			l.snapshot(false)
		case <-tick.C:
			if p.out != nil && len(p.out.meta) > 0 { // messages shed or waiting for a batch: their records go now
				l.writeScores(l.enq)
			}
			if (l.sinceSnap > 0 || l.revised) && time.Since(l.lastSnap) >= p.cfg.Snapshot.Every {
				l.snapshot(false)
			}
		case <-revisit:
			// The stream first: a message that waits is handled before
			// any revisit (the select above picks among ready cases at
			// random).
			select {
			case pending = <-inbox:
				continue
			default:
			}
			l.revisit()
		}
	}
}

// alwaysReady is a channel a receive never waits on.
var alwaysReady = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// newLoop makes the learning loop's state: a batch's room, the version
// served (a restored one's blocks are reused by the next), a linger
// timer stopped, and growth held when the restored model was shedding.
func (p *Pipeline) newLoop(ctx context.Context) *loop {
	l := &loop{p: p, batch: make([]float64, 0, p.cfg.Learner.Batch*max(p.in.adm.Dim(), 1)), lastSnap: time.Now(), pace: p.newPace(), run: ctx}
	if f := p.led.status.LearnedFraction; f < 1 {
		l.holding = true
		p.learner.holdGrowth(true)
		p.log.Info().Float64("learned_fraction", f).Msg("resuming with the restored snapshot's learned fraction (load shedding)")
	}
	if _, ok := p.learner.(revisiter); ok && p.clu == nil { // a group's step is the group's: no member revisits alone
		l.replay = online.NewWindow(p.cfg.Learner.Replay, p.cfg.Learner.ReplayBytes, p.cfg.Learner.Seed)
	}
	l.model, _ = p.pub.cur.Get()
	l.linger = time.NewTimer(time.Hour)
	l.linger.Stop()
	return l
}

// stop is the graceful stop: fetching stopped (stopFetch), the partial batch
// learned (where the coordinator allows), a final snapshot, and its
// publish awaited (pubDone) until shutdown_timeout. From here one
// deadline bounds the stop: the final snapshot's wait for its dead
// letters, the final publish, the HTTP server, the dead letters' flush,
// NATS's drain.
func (l *loop) stop(stopFetch func(), pubDone <-chan struct{}) {
	p := l.p
	p.mu.Lock()
	p.life.stopBy = time.Now().Add(p.cfg.ShutdownTimeout)
	p.mu.Unlock()
	p.log.Info().Dur("shutdown_timeout", p.cfg.ShutdownTimeout).Msg("stopping: learning the partial batch, then a final snapshot, its offsets committed and its publish")
	stopFetch()
	if p.coord().learnsAtStop() {
		l.learn()
	}
	l.snapshot(true)
	p.pub.dist.Final()
	select {
	case <-pubDone:
	case <-time.After(time.Until(p.life.stopBy)):
		p.log.Warn().Dur("shutdown_timeout", p.cfg.ShutdownTimeout).Msg("the final publish did not finish within shutdown_timeout; the snapshot is on disk and will be published on the next start")
	}
}

// stopContext is a context for one part of the stop: until the stop's
// deadline (shutdown_timeout after the stop signal) in a graceful stop,
// else for d (while running, Kill, a failed start).
func (p *Pipeline) stopContext(d time.Duration) (context.Context, context.CancelFunc) {
	if by := p.stopDeadline(); !by.IsZero() {
		return context.WithDeadline(context.Background(), by)
	}
	return context.WithTimeout(context.Background(), d)
}

func (p *Pipeline) stopDeadline() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.life.stopBy
}

// Close releases a pipeline that will not Run (Run releases it itself):
// the consumer, the dead-letter queue, the NATS connection it opened and
// the learner.
func (p *Pipeline) Close() { p.release() }

// release closes what build set up, whatever it got to.
func (p *Pipeline) release() { p.closeParts(false) }

func (p *Pipeline) close() {
	p.closeParts(true)
	p.mu.Lock()
	v, samples := p.led.status.Version, p.led.status.Samples
	p.mu.Unlock()
	p.log.Info().Uint64("version", v).Uint64("samples_learned", samples).Msg("stopped")
}

// closeParts closes whatever was built, in order: the consumer, the
// cluster exchange, the dead-letter queue (flushed within the stop's
// deadline), the NATS service and connection (drained after a run,
// closed otherwise) and the learner.
func (p *Pipeline) closeParts(drain bool) {
	if p.in.src != nil {
		p.in.src.Close()
	}
	p.coord().close()
	if p.out != nil {
		if err := p.out.prod.Close(); err != nil {
			p.log.Warn().Err(err).Msg("output topic's producer not closed cleanly")
		}
	}
	if dlq := p.deadLetters(); dlq != nil {
		dctx, cancel := p.stopContext(30 * time.Second)
		defer cancel()
		if err := dlq.Close(dctx); err != nil {
			p.log.Error().Err(err).Msg("dead-letter queue not flushed at shutdown")
		}
	}
	p.serveNATS(false)
	if p.pub.dist != nil && drain && !p.killed() && !p.cfg.Cluster.Enabled && (p.pub.nc == nil || !p.pub.nc.IsClosed()) {
		// A clean stop gives the name up: a successor takes it at once.
		// Not a cluster member's: the group's members hold the lease
		// together and the others may run on (they renew it; once the
		// last has gone it lapses after a TTL).
		lctx, cancel := p.stopContext(2 * time.Second)
		if err := p.pub.dist.Release(lctx); err != nil {
			p.log.Warn().Err(err).Msg("the model name's lease was not released; a successor with another incarnation waits nats.lease_ttl")
		}
		cancel()
	}
	if p.pub.ownNC && p.pub.nc != nil {
		if !drain {
			p.pub.nc.Close()
		} else {
			p.pub.nc.Drain()
			deadline := time.Now().Add(5 * time.Second)
			if by := p.stopDeadline(); !by.IsZero() {
				deadline = by
			}
			for !p.pub.nc.IsClosed() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	p.waitOwned()
	if p.learner != nil {
		p.learner.close()
	}
	if err := p.dir.lock.Release(); err != nil {
		p.log.Warn().Err(err).Msg("the snapshot directory's lock could not be released")
	}
}

// newIncarnation returns a random incarnation id (snapshot.Header.Incarnation):
// 16 hex digits.
func newIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

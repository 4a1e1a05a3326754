package demo

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/pipeline"
	"github.com/streamkpca/streamkpca/snapshot"
)

// options are the demo's flags.
type options struct {
	points              int
	rate, thenRate      float64
	httpAddr            string
	natsPort, kafkaPort int
	dir                 string
	duration            time.Duration
	verbose             bool
	set                 map[string]bool // the flags given
}

// parseFlags reads the demo's flags from args.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.IntVar(&o.points, "points", 2_000_000, "hermite points to produce")
	fs.Float64Var(&o.rate, "rate", 5000, "points per second the producer sends")
	fs.Float64Var(&o.thenRate, "then-rate", 50, "after --points, points per second sent until the demo stops, so that new versions keep coming (0: the stream ends)")
	fs.StringVar(&o.httpAddr, "http", "127.0.0.1:8080", "HTTP address (if unset and 8080 is taken, a free port is used and printed; a port you set is used or refused)")
	fs.IntVar(&o.natsPort, "nats-port", 4222, "NATS port on 127.0.0.1 (if unset and taken, a free port is used and printed)")
	fs.IntVar(&o.kafkaPort, "kafka-port", 9092, "Kafka port on 127.0.0.1 (if unset and taken, a free port is used and printed)")
	fs.StringVar(&o.dir, "dir", "", "data directory (default: a temp dir, removed at exit)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0 = until Ctrl-C)")
	fs.BoolVar(&o.verbose, "v", false, "show the service's logs")
	if err := cliflag.Parse(fs, args); err != nil {
		return o, err
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, nil
}

const topic, model = "hermite", "hermite"

// scoresTopic receives every message's projection, residual and novelty
// (output.topic).
const scoresTopic = "hermite.scores"

// startStack claims the well-known ports when free, so that the commands
// in the README work as written (a free one otherwise, said and printed),
// and starts the embedded Kafka and NATS.
func startStack(o *options) (*devstack.Stack, error) {
	if err := freeOr("http", &o.httpAddr, "127.0.0.1:0", o.set["http"]); err != nil {
		return nil, err
	}
	natsAddr, kafkaAddr := fmt.Sprintf("127.0.0.1:%d", o.natsPort), fmt.Sprintf("127.0.0.1:%d", o.kafkaPort)
	if err := freeOr("nats-port", &natsAddr, "127.0.0.1:0", o.set["nats-port"]); err != nil {
		return nil, err
	}
	if err := freeOr("kafka-port", &kafkaAddr, "127.0.0.1:0", o.set["kafka-port"]); err != nil {
		return nil, err
	}
	return devstack.Start(devstack.Options{Dir: o.dir, Topics: map[string]int32{topic: 4, scoresTopic: 4}, NATSPort: port(natsAddr), KafkaPort: port(kafkaAddr)})
}

// serviceConfig is the service's configuration on the stack.
func serviceConfig(stack *devstack.Stack, o options) configs.Config {
	var cfg configs.Config
	cfg.Model = model
	cfg.Kafka.Brokers, cfg.Kafka.Topic = stack.Brokers(), topic
	cfg.NATS.URL = stack.NATSURL()
	cfg.Learner.K, cfg.Learner.Bandwidth = 3, 1 // the stream's true bandwidth, so the closed form is the truth
	cfg.Learner.Linger = 500 * time.Millisecond
	cfg.Snapshot.Dir = stack.Dir() + "/snapshots"
	cfg.Snapshot.EveryBatches, cfg.Snapshot.Every = 40, 5*time.Second
	cfg.Output.Topic = scoresTopic
	cfg.HTTP.Addr = o.httpAddr
	cfg.Log.Level = "warn"
	if o.verbose {
		cfg.Log.Level = "info"
	}
	cfg.SetDefaults()
	return cfg
}

// closedFormScore is the served model's subspace error against the
// demo stream's closed-form eigenfunctions on 2,000 held-out points,
// shown on the status page and in the progress lines.
func closedFormScore() *pipeline.Score {
	h := synth.Hermite1D()
	held := make([]float64, 2000)
	h.Sample(held, rand.New(rand.NewPCG(99, 99)))
	truth := h.Eigenfunctions(held, 2000, 3)
	return &pipeline.Score{
		Name: "subspace error vs the closed-form eigenfunctions (1 − cos²θ_max on 2,000 held-out points, lower is better)",
		Eval: func(m *snapshot.Model) (float64, error) {
			out, err := m.Project(nil, held)
			if err != nil {
				return 0, err
			}
			return synth.SubspaceError(mat.NewDense(2000, 3, out), truth), nil
		},
	}
}

// Run is `streamkpca demo`: embedded Kafka and NATS, a hermite producer
// and the service, with a line of progress every two seconds. args are
// its flags.
func Run(ctx context.Context, args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	stack, err := startStack(&o)
	if err != nil {
		return err
	}
	defer stack.Close()
	cfg := serviceConfig(stack, o)
	log := cfg.Log.Logger(os.Stderr)
	p, err := pipeline.New(pipeline.Options{Config: cfg, Logger: &log, Score: closedFormScore()})
	if err != nil {
		return err
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(runCtx) }()
	for p.HTTPAddr() == "" {
		time.Sleep(10 * time.Millisecond)
	}
	// With --dir from an earlier run the topic already holds a prefix of
	// the stream: produce only the rest, continuing the same sequence.
	have, err := stack.Messages(ctx, topic)
	if err != nil {
		return err
	}
	src := devstack.HermiteJSON(synth.Hermite1D(), 1)
	for i := range int(have) {
		src(i)
	}
	d := &demo{o: o, stack: stack, p: p, src: src, batch: cfg.Learner.Batch, first: max(int64(o.points)-have, 0), start: p.Status().Samples}
	d.prodErr = make(chan error, 1)
	go func() { d.prodErr <- d.produce(ctx, int(d.first), o.rate, 0) }()
	d.banner(have)
	return d.follow(ctx, runErr, stopRun)
}

// demo is a running demo: the stack, the service and the producer.
type demo struct {
	o       options
	stack   *devstack.Stack
	p       *pipeline.Pipeline
	src     devstack.Source
	batch   int
	first   int64 // points this run produces at --rate
	prodErr chan error
	start   uint64 // samples learned when this run began
	// trickling: the first stream is sent; --then-rate goes on
	trickling bool
}

// produce sends n points (negative: until ctx ends) at rate, chunk at a
// time (0: a second of the rate).
func (d *demo) produce(ctx context.Context, n int, rate float64, chunk int) error {
	return devstack.Produce(ctx, d.src, devstack.ProduceOptions{Brokers: d.stack.Brokers(), Topic: topic, N: n, Rate: rate, Chunk: chunk})
}

// banner prints where everything is and what to try.
func (d *demo) banner(have int64) {
	o := d.o
	thenWhat := ""
	if o.thenRate > 0 {
		thenWhat = fmt.Sprintf(", then %.0f/s until stopped", o.thenRate)
	}
	http, nurl := "http://"+d.p.HTTPAddr(), d.stack.NATSURL()
	fmt.Printf(`streamkpca demo — kernel PCA learned online from Kafka, served over NATS and HTTP

  Kafka (embedded)  %s  topic %q (4 partitions), %d hermite points at %.0f/s%s;
                    every point's scores on topic %q
  NATS  (embedded)  %s
  HTTP              %s

Try, in another terminal:
  curl -s %s/v1/models/%s | head -c 600
  curl -s -X POST %s/v1/models/%s/project -d '{"vectors":[[0.0],[0.5],[1.5]]}'
  curl -s -X POST %s/v1/models/%s/score -d '{"vectors":[[0.5],[9]]}'
  kcat -b %s -t %s -C -o -3 -e      (each message's projection, residual and novelty, with Debian's kcat)
  curl -s %s/metrics | grep ^streamkpca_
  go run ./cmd/streamkpca watch --nats %s --model %s --points '[[0.5]]'
  go run ./examples/subscriber --nats %s --model %s --points '[[0.5]]'
  nats --server %s req streamkpca.%s.project '{"vectors":[[0.5]]}'   (with the nats CLI, if you have it)
  python3 clients/python/examples/project.py --url %s --model %s --points '[[0.5]]' --check

`, d.stack.Brokers()[0], topic, o.points, o.rate, thenWhat, scoresTopic, nurl, http, http, model, http, model, http, model, d.stack.Brokers()[0], scoresTopic, http, nurl, model, nurl, model, nurl, model, http, model)
	if have > 0 {
		fmt.Printf("Resuming from %s: the topic holds %d points of an earlier run and the model has learned %d; producing the remaining %d.\n\n",
			d.stack.Dir(), have, d.start, d.first)
	}
	fmt.Println("Progress (subspace error vs the closed-form eigenfunctions; 1 − cos²θ_max, lower is better):")
}

// follow prints a progress line every two seconds until ctx ends (then
// stops the service: a final snapshot and publish) or the service stops;
// when the first stream has been sent it goes on at --then-rate.
func (d *demo) follow(ctx context.Context, runErr chan error, stopRun func()) error {
	start := time.Now()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var lastVer, lastSamples uint64
	produced, ended := false, false
	prodErr := d.prodErr
	errStr := "   -"
	for {
		select {
		case err := <-prodErr:
			if d.producerDone(ctx, err) {
				prodErr, produced = nil, true
			}
		case err := <-runErr:
			return err
		case <-ctx.Done():
			fmt.Println("stopping: final snapshot and publish…")
			stopRun()
			err := <-runErr
			s := d.p.Status()
			fmt.Printf("done: %d samples learned, version %d persisted, version %d published\n", s.Samples, s.Version, s.Published)
			return err
		case <-tick.C:
			s := d.p.Status()
			if produced && s.Samples == lastSamples && s.Lag == 0 && s.Version == lastVer {
				if !ended {
					if s.Version == 0 {
						fmt.Printf("the stream has ended: %d samples learned, too few for a model version (learner.batch); nothing is served. Stop the demo (Ctrl-C) and give it more --points\n", s.Samples)
					} else {
						fmt.Printf("the stream has ended: %d samples learned; version %d is served until you stop the demo (Ctrl-C)\n", s.Samples, s.Version)
					}
					ended = true
				}
				continue
			}
			lastSamples, ended = s.Samples, false
			if v, ok := d.p.Score(); ok && v.Err == nil {
				errStr = fmt.Sprintf("%.2e", v.Value)
			}
			lastVer = s.Version
			d.progressLine(s, time.Since(start).Seconds(), errStr)
		}
	}
}

// freeOr checks that *addr can be listened on; if not, an address the
// user set (explicit) is an error naming the flag, a default gives way
// to fallback (a free port), with a line saying so.
func freeOr(flagName string, addr *string, fallback string, explicit bool) error {
	ln, err := net.Listen("tcp", *addr)
	if err == nil {
		ln.Close()
		return nil
	}
	if explicit {
		return fmt.Errorf("demo: --%s %s: %w (pick a free port, or leave --%s unset to use any)", flagName, *addr, err, flagName)
	}
	fmt.Fprintf(os.Stderr, "demo: %s is taken (%v); using a free port instead (printed below)\n", *addr, err)
	*addr = fallback
	return nil
}

// port is an address's port, 0 for any.
func port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// producerDone handles the end of a producer: an error or the end of the
// whole stream is final (true); the end of the first stream starts the
// trickle at --then-rate (false), so that a watcher or a follower keeps
// seeing new versions.
func (d *demo) producerDone(ctx context.Context, err error) bool {
	switch {
	case err != nil && ctx.Err() == nil:
		fmt.Fprintf(os.Stderr, "producer: %v\n", err)
		return true
	case err != nil || d.trickling || d.o.thenRate <= 0:
		if err == nil && !d.trickling {
			fmt.Printf("producer: all %d points sent\n", d.first)
		}
		return true
	}
	fmt.Printf("producer: %d points sent; %.0f a second from now on (--then-rate), until you stop the demo\n", d.first, d.o.thenRate)
	d.trickling = true
	// Whole batches in bursts: the learner steps on full ones.
	go func() { d.prodErr <- d.produce(ctx, -1, d.o.thenRate, d.batch) }()
	return false
}

// progressLine prints the service's state after el seconds.
func (d *demo) progressLine(s pipeline.Status, el float64, errStr string) {
	extra := ""
	if q := s.Quality; q != nil {
		extra += fmt.Sprintf("  held-out share %.3f", q.Score)
	}
	if s.LearnedFraction < 1 {
		// Load shedding: say it, or the lag staying flat while fewer
		// points are learned reads as a fault.
		extra += fmt.Sprintf("  learning %.0f%% of the stream to keep up", 100*s.LearnedFraction)
	}
	fmt.Printf("%6.0fs  samples %9d  %7.0f pts/s  features %6d  lag %7d  version %5d (published %5d)  error %s  eig %.3f%s\n",
		el, s.Samples, float64(s.Samples-d.start)/el, s.Features, s.Lag, s.Version, s.Published, errStr, s.Eigenvalues, extra)
}

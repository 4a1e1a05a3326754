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
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/pipeline"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Run is `streamkpca demo`: embedded Kafka and NATS, a hermite producer
// and the service, with a line of progress a second. args are its flags.
func Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	points := fs.Int("points", 2_000_000, "hermite points to produce")
	rate := fs.Float64("rate", 5000, "points per second the producer sends")
	thenRate := fs.Float64("then-rate", 50, "after --points, points per second sent until the demo stops, so that new versions keep coming (0: the stream ends)")
	httpAddr := fs.String("http", "127.0.0.1:8080", "HTTP address (if unset and 8080 is taken, a free port is used and printed; a port you set is used or refused)")
	natsPort := fs.Int("nats-port", 4222, "NATS port on 127.0.0.1 (if unset and taken, a free port is used and printed)")
	kafkaPort := fs.Int("kafka-port", 9092, "Kafka port on 127.0.0.1 (if unset and taken, a free port is used and printed)")
	dir := fs.String("dir", "", "data directory (default: a temp dir, removed at exit)")
	duration := fs.Duration("duration", 0, "stop after this long (0 = until Ctrl-C)")
	verbose := fs.Bool("v", false, "show the service's logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// The well-known ports when free, so that the commands in the README
	// work as written; a free one otherwise, said and printed below.
	if err := freeOr("http", httpAddr, "127.0.0.1:0", set["http"]); err != nil {
		return err
	}
	natsAddr, kafkaAddr := fmt.Sprintf("127.0.0.1:%d", *natsPort), fmt.Sprintf("127.0.0.1:%d", *kafkaPort)
	if err := freeOr("nats-port", &natsAddr, "127.0.0.1:0", set["nats-port"]); err != nil {
		return err
	}
	if err := freeOr("kafka-port", &kafkaAddr, "127.0.0.1:0", set["kafka-port"]); err != nil {
		return err
	}
	const topic, model = "hermite", "hermite"
	stack, err := devstack.Start(devstack.Options{Dir: *dir, Topics: map[string]int32{topic: 4}, NATSPort: port(natsAddr), KafkaPort: port(kafkaAddr)})
	if err != nil {
		return err
	}
	defer stack.Close()
	var cfg configs.Config
	cfg.Model = model
	cfg.Kafka.Brokers, cfg.Kafka.Topic = stack.Brokers(), topic
	cfg.NATS.URL = stack.NATSURL()
	cfg.Learner.K, cfg.Learner.Bandwidth = 3, 1 // the stream's true bandwidth, so the closed form is the truth
	cfg.Learner.Linger = 500 * time.Millisecond
	cfg.Snapshot.Dir = stack.Dir() + "/snapshots"
	cfg.Snapshot.EveryBatches, cfg.Snapshot.Every = 40, 5*time.Second
	cfg.HTTP.Addr = *httpAddr
	cfg.Log.Level = "warn"
	if *verbose {
		cfg.Log.Level = "info"
	}
	cfg.SetDefaults()
	log := cfg.Log.Logger(os.Stderr)
	// The demo's stream has closed-form eigenfunctions: the status page and
	// the progress lines show the served model's subspace error against
	// them on 2,000 held-out points.
	h := synth.Hermite1D()
	held := make([]float64, 2000)
	h.Sample(held, rand.New(rand.NewPCG(99, 99)))
	truth := h.Eigenfunctions(held, 2000, 3)
	score := &pipeline.Score{
		Name: "subspace error vs the closed-form eigenfunctions (1 − cos²θ_max on 2,000 held-out points, lower is better)",
		Eval: func(m *snapshot.Model) (float64, error) {
			out, err := m.Project(nil, held)
			if err != nil {
				return 0, err
			}
			return synth.SubspaceError(mat.NewDense(2000, 3, out), truth), nil
		},
	}
	p, err := pipeline.New(pipeline.Options{Config: cfg, Logger: &log, Score: score})
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
	first := max(int64(*points)-have, 0)
	prodErr := make(chan error, 1)
	go func() {
		prodErr <- devstack.Produce(ctx, src,
			devstack.ProduceOptions{Brokers: stack.Brokers(), Topic: topic, N: int(first), Rate: *rate})
	}()
	startSamples := p.Status().Samples
	thenWhat := ""
	if *thenRate > 0 {
		thenWhat = fmt.Sprintf(", then %.0f/s until stopped", *thenRate)
	}
	http := "http://" + p.HTTPAddr()
	fmt.Printf(`streamkpca demo — kernel PCA learned online from Kafka, served over NATS and HTTP

  Kafka (embedded)  %s  topic %q (4 partitions), %d hermite points at %.0f/s%s
  NATS  (embedded)  %s
  HTTP              %s

Try, in another terminal:
  curl -s %s/v1/models/%s | head -c 600
  curl -s -X POST %s/v1/models/%s/project -d '{"vectors":[[0.0],[0.5],[1.5]]}'
  curl -s %s/metrics | grep ^streamkpca_
  go run ./cmd/streamkpca watch --nats %s --model %s --points '[[0.5]]'
  go run ./examples/subscriber --nats %s --model %s --points '[[0.5]]'
  nats --server %s req streamkpca.%s.project '{"vectors":[[0.5]]}'   (with the nats CLI, if you have it)
  python3 clients/python/examples/project.py --url %s --model %s --points '[[0.5]]' --check

`, stack.Brokers()[0], topic, *points, *rate, thenWhat, stack.NATSURL(), http, http, model, http, model, http, stack.NATSURL(), model, stack.NATSURL(), model, stack.NATSURL(), model, http, model)
	if have > 0 {
		fmt.Printf("Resuming from %s: the topic holds %d points of an earlier run and the model has learned %d; producing the remaining %d.\n\n",
			stack.Dir(), have, startSamples, first)
	}
	fmt.Println("Progress (subspace error vs the closed-form eigenfunctions; 1 − cos²θ_max, lower is better):")
	start := time.Now()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var lastVer, lastSamples uint64
	produced, ended, trickling := false, false, false
	errStr := "   -"
	for {
		select {
		case err := <-prodErr:
			if err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "producer: %v\n", err)
				prodErr, produced = nil, true
				continue
			}
			if err != nil || trickling || *thenRate <= 0 {
				if err == nil && !trickling {
					fmt.Printf("producer: all %d points sent\n", first)
				}
				prodErr, produced = nil, true
				continue
			}
			// The stream goes on slowly, so that a watcher or a
			// follower keeps seeing new versions.
			fmt.Printf("producer: %d points sent; %.0f a second from now on (--then-rate), until you stop the demo\n", first, *thenRate)
			trickling = true
			// Whole batches in bursts: the learner steps on full ones.
			full := cfg
			full.SetDefaults()
			go func() {
				prodErr <- devstack.Produce(ctx, src,
					devstack.ProduceOptions{Brokers: stack.Brokers(), Topic: topic, N: -1, Rate: *thenRate, Chunk: full.Learner.Batch})
			}()
		case err := <-runErr:
			return err
		case <-ctx.Done():
			fmt.Println("stopping: final snapshot and publish…")
			stopRun()
			err := <-runErr
			s := p.Status()
			fmt.Printf("done: %d samples learned, version %d persisted, version %d published\n", s.Samples, s.Version, s.Published)
			return err
		case <-tick.C:
			s := p.Status()
			if produced && s.Samples == lastSamples && s.Lag == 0 && s.Version == lastVer {
				if !ended {
					fmt.Printf("the stream has ended: %d samples learned; version %d is served until you stop the demo (Ctrl-C)\n", s.Samples, s.Version)
					ended = true
				}
				continue
			}
			lastSamples, ended = s.Samples, false
			if v, ok := p.Score(); ok && v.Err == nil {
				errStr = fmt.Sprintf("%.2e", v.Value)
			}
			lastVer = s.Version
			el := time.Since(start).Seconds()
			extra := ""
			if q := s.Quality; q != nil {
				extra += fmt.Sprintf("  held-out share %.3f", q.Score)
			}
			if s.LearnedFraction < 1 {
				// Load shedding: say it, or the lag staying flat while
				// fewer points are learned reads as a fault.
				extra += fmt.Sprintf("  learning %.0f%% of the stream to keep up", 100*s.LearnedFraction)
			}
			fmt.Printf("%6.0fs  samples %9d  %7.0f pts/s  features %6d  lag %7d  version %5d (published %5d)  error %s  eig %.3f%s\n",
				el, s.Samples, float64(s.Samples-startSamples)/el, s.Features, s.Lag, s.Version, s.Published, errStr, s.Eigenvalues, extra)
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

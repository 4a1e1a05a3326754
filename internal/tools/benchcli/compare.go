package benchcli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/progress"
	"github.com/streamkpca/streamkpca/internal/tools/bench"
	"github.com/streamkpca/streamkpca/online"
)

// benchCompare is `streamkpca bench compare` (internal/tools/bench.RunCompare),
// each method in a child process unless --isolate=false.
func benchCompare(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench compare", flag.ContinueOnError)
	caseName := fs.String("case", "hermite16", "stream: hermite1, hermite16 or slow")
	points := fs.Int("points", 1_000_000, "stream length")
	budget := fs.Duration("budget", 30*time.Second, "report each method's error within this much compute")
	maxTime := fs.Duration("max-time", 0, "stop a method once its clock passes this (0: run the whole stream)")
	k := fs.Int("k", 0, "components (default: the case's)")
	methods := fs.String("methods", "dsgd,rff,nystrom,exact", "methods to run, comma-separated: dsgd, dsgd-landmarks (streamkpca with landmark blocks), rff, nystrom, exact; name=size overrides the size flag (e.g. nystrom=2048)")
	dsgdFeatures := fs.Int("dsgd-features", 0, "streamkpca feature budget, max_features (0 = the case's, then grown within --budget: online.Growth)")
	solver := fs.String("solver", "", "streamkpca solver: subspace or oja (default: the learner's)")
	theta0 := fs.Float64("theta0", 0, "streamkpca θ₀ (0 = the learner's default)")
	center := fs.Bool("center", false, "learn the centred operator, scored against exact centred kernel PCA of --exact-n fresh points (--methods dsgd,exact: the other baselines are uncentred)")
	theta1 := fs.Float64("theta1", 0, "streamkpca θ₁ (0 = the learner's default)")
	block := fs.Int("block", 0, "streamkpca block size, features per step (0 = the learner's default)")
	average := fs.Float64("average", 0, "streamkpca averaging window of the subspace solver (0 = the learner's default, negative = serve the last iterate)")
	keepBytes := fs.Int64("keep-bytes", 0, "streamkpca keep_bytes: a batch's features kept for the gradient (0 = the learner's default, -1 = none)")
	precision := fs.String("precision", "float64", "streamkpca precision: float64 or float32")
	compute := fs.String("compute", "exact", "streamkpca products: exact (own kernels) or blas")
	isolate := fs.Bool("isolate", true, "run each method in a child process and report its peak RSS (false: in this process, peak heap sampled)")
	rffFeatures := fs.Int("rff-features", 4096, "fixed random features")
	landmarks := fs.Int("landmarks", 512, "Nyström landmarks")
	exactN := fs.Int("exact-n", 2000, "exact kernel PCA sample size")
	seed := fs.Uint64("seed", 1, "stream and feature seed")
	table := fs.Bool("table", true, "print a table to stderr after the JSON")
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	var ms []string
	for _, m := range strings.Split(*methods, ",") {
		ms = append(ms, strings.TrimSpace(m))
	}
	if *isolate {
		return compareIsolated(ctx, args, ms, *table)
	}
	pr := progress.New()
	res, err := bench.RunCompare(ctx, bench.CompareConfig{Case: *caseName, Points: *points, Budget: *budget, MaxTime: *maxTime, K: *k,
		Methods: ms, DSGDFeatures: *dsgdFeatures, RFFFeatures: *rffFeatures, Landmarks: *landmarks, ExactN: *exactN, Seed: *seed,
		Learner: online.Config{Center: *center, Solver: online.Solver(*solver), Theta0: *theta0, Theta1: *theta1, Average: *average, BlockSize: *block, KeepBytes: *keepBytes,
			Precision: online.Precision(*precision), Compute: online.Compute(*compute)},
		Progress: func(n, stop int, e, secs float64) { pr.Update("%d/%d points  error %.3g  %.1f s", n, stop, e, secs) },
	})
	pr.Done()
	if err != nil {
		return err
	}
	if err := printJSON(res); err != nil {
		return err
	}
	if *table {
		bench.PrintCompareTable(os.Stderr, res)
	}
	return nil
}

// compareIsolated runs each method in a child process of this binary
// (bench.CompareIsolated).
func compareIsolated(ctx context.Context, args []string, methods []string, table bool) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench compare: cannot find this executable to isolate methods (use --isolate=false): %w", err)
	}
	res, err := bench.CompareIsolated(ctx, append([]string{self, "bench", "compare"}, args...), methods)
	if err != nil {
		return err
	}
	if err := printJSON(res); err != nil {
		return err
	}
	if table {
		bench.PrintCompareTable(os.Stderr, res)
	}
	return nil
}

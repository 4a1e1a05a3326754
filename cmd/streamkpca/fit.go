package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/online/features"
	"github.com/streamkpca/streamkpca/snapshot"
)

// readVectors reads every record of a csv, jsonl or f32le/f64le file (dim
// needed for the raw formats), refusing bad records with their line number.
func readVectors(path string, format ingest.Format, dim int) ([]float64, int, int, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("open input: %w", err)
		}
		defer f.Close()
		r = f
		if format == "" {
			switch strings.ToLower(filepath.Ext(path)) {
			case ".jsonl", ".json", ".ndjson":
				format = ingest.FormatJSON
			case ".f32", ".f32le":
				format = ingest.FormatF32LE
			case ".f64", ".f64le":
				format = ingest.FormatF64LE
			default:
				format = ingest.FormatCSV
			}
		}
	}
	if format == "" || format == "jsonl" {
		if format == "" {
			format = ingest.FormatCSV
		} else {
			format = ingest.FormatJSON
		}
	}
	x, rows, d, err := ingest.ReadAll(r, format, dim)
	if err != nil && (format == ingest.FormatF32LE || format == ingest.FormatF64LE) && dim < 1 {
		return nil, 0, 0, fmt.Errorf("--dim is required for %s input", format)
	}
	return x, rows, d, err
}

// learnerFlags registers the learner's flags on fs.
type learnerFlags struct {
	algo, kernel, bandwidth, coefs string
	k, batch, block, maxF, degree  int
	theta0, theta1, nu, offset     float64
	p, beta, lambda                float64
	seed                           uint64
	center, standardize            bool
	kernelY, bandwidthY            string
	slices                         int
	uncentered                     bool
	precision, compute             string
	solver                         string
	features                       string
}

func (lf *learnerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&lf.algo, "algo", "kpca", "algorithm: kpca, gha, ksvd, kcca or ksir (the last three need --y-cols)")
	fs.StringVar(&lf.kernelY, "kernel-y", "gaussian", "ksvd/kcca: kernel of the y view")
	fs.StringVar(&lf.bandwidthY, "bandwidth-y", "auto", "ksvd/kcca: bandwidth of the y view")
	fs.IntVar(&lf.slices, "slices", 10, "ksir: target slices")
	fs.BoolVar(&lf.uncentered, "uncentered", false, "ksvd/kcca/ksir: turn off the default centring")
	fs.IntVar(&lf.k, "k", 0, "number of components (required)")
	fs.StringVar(&lf.kernel, "kernel", "gaussian", "kernel: gaussian, laplacian, cauchy, matern, dotproduct, polynomial, expsemigroup, recsemigroup, arccosine, linear")
	fs.Float64Var(&lf.nu, "nu", 0, "matern ν")
	fs.IntVar(&lf.degree, "degree", 0, "polynomial p, or arccosine n")
	fs.Float64Var(&lf.offset, "offset", 0, "polynomial c")
	fs.StringVar(&lf.coefs, "coefficients", "", "dotproduct a_0,…,a_M")
	fs.Float64Var(&lf.p, "p", 0, "dotproduct degree law parameter (default 2)")
	fs.Float64Var(&lf.beta, "beta", 0, "expsemigroup β")
	fs.Float64Var(&lf.lambda, "lambda", 0, "recsemigroup λ")
	fs.StringVar(&lf.bandwidth, "bandwidth", "auto", "kernel bandwidth, or auto for the median trick on the first batch")
	fs.IntVar(&lf.batch, "batch", 512, "data mini-batch size b")
	fs.IntVar(&lf.block, "block", 0, "random features per block B (0 = 512 for kpca/gha with the subspace solver, 128 otherwise)")
	fs.IntVar(&lf.maxF, "max-features", 0, fmt.Sprintf("feature budget; past it blocks are revisited (0 = %d random features, %d landmarks)", online.DefaultMaxFeatures, online.DefaultLandmarkMaxFeatures))
	fs.StringVar(&lf.features, "features", "random", "feature blocks: random (from seeds) or landmarks (points of the data and their Nyström map; the model then holds those points)")
	fs.StringVar(&lf.solver, "solver", "subspace", "kpca/gha update rule: subspace (needs no tuning) or oja (the paper's rule)")
	fs.Float64Var(&lf.theta0, "theta0", 0, "unitless initial step (0 = the default: 1 for the subspace solver, 0.5 for oja, 1 for two-view)")
	fs.Float64Var(&lf.theta1, "theta1", 0, "step decay η_t ∝ 1/(1+θ₁·t) (0 = 0.05 for the subspace solver, 0.01 for oja, 0.001 for two-view)")
	fs.Uint64Var(&lf.seed, "seed", online.DefaultSeed, "model seed")
	fs.BoolVar(&lf.center, "center", false, "learn the centred covariance operator")
	fs.BoolVar(&lf.standardize, "standardize", false, "standardise each input dimension (first-batch statistics)")
	fs.StringVar(&lf.precision, "precision", "float64", "arithmetic of x·Ω: float64 or float32 (shift-invariant kernels)")
	fs.StringVar(&lf.compute, "compute", "exact", "products by the own kernels (exact) or the linked BLAS (blas)")
}

func (lf *learnerFlags) config(model string) (online.Config, error) {
	if lf.k < 1 {
		return online.Config{}, fmt.Errorf("--k is required: the number of components to learn (got %d)", lf.k)
	}
	cfg := online.Config{
		Model: model, Algorithm: online.Algorithm(lf.algo), K: lf.k,
		Kernel: features.Kernel{Family: features.Family(lf.kernel), Nu: lf.nu, Degree: lf.degree, Offset: lf.offset,
			P: lf.p, Beta: lf.beta, Lambda: lf.lambda},
		BlockSize: lf.block, MaxFeatures: lf.maxF, Theta0: lf.theta0, Theta1: lf.theta1,
		Seed: lf.seed, Center: lf.center, Solver: online.Solver(lf.solver), Standardize: lf.standardize, Precision: online.Precision(lf.precision), Compute: online.Compute(lf.compute),
		Features: online.FeatureSource(lf.features),
		KernelY:  features.Kernel{Family: features.Family(lf.kernelY)}, Slices: lf.slices, Uncentered: lf.uncentered,
	}
	if lf.bandwidthY != "auto" && lf.bandwidthY != "" {
		bw, err := strconv.ParseFloat(lf.bandwidthY, 64)
		if err != nil {
			return cfg, fmt.Errorf("--bandwidth-y: %w", err)
		}
		cfg.KernelY.Bandwidth = bw
	}
	if lf.coefs != "" {
		for _, c := range strings.Split(lf.coefs, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(c), 64)
			if err != nil {
				return cfg, fmt.Errorf("--coefficients: %w", err)
			}
			cfg.Kernel.Coefficients = append(cfg.Kernel.Coefficients, v)
		}
	}
	if lf.bandwidth != "auto" && lf.bandwidth != "" {
		bw, err := strconv.ParseFloat(lf.bandwidth, 64)
		if err != nil {
			return cfg, fmt.Errorf("--bandwidth: %w", err)
		}
		cfg.Kernel.Bandwidth = bw
	}
	if lf.batch < 1 {
		return cfg, fmt.Errorf("--batch must be ≥ 1")
	}
	return cfg, cfg.Validate()
}

// progress prints a refreshing status line on a terminal, nothing otherwise.
type progress struct {
	on   bool
	last time.Time
}

func newProgress() *progress { return &progress{on: term.IsTerminal(int(os.Stderr.Fd()))} }

func (p *progress) update(format string, args ...any) {
	if !p.on || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(os.Stderr, "\r\033[K"+format, args...)
}

// eta formats the remaining time for done of total units after elapsed.
func eta(done, total float64, elapsed time.Duration) string {
	if done <= 0 || total <= done {
		return ""
	}
	left := time.Duration(float64(elapsed) * (total - done) / done).Round(time.Second)
	return "  ETA " + left.String()
}

func (p *progress) done() {
	if p.on {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
}

func cmdFit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fit", flag.ContinueOnError)
	var lf learnerFlags
	lf.register(fs)
	input := fs.String("input", "", "input file (csv, jsonl, f32le, f64le), - for stdin")
	format := fs.String("format", "", "input format: csv, jsonl, f32le, f64le (default: from the extension)")
	dim := fs.Int("dim", 0, "input dimension (required for f32le/f64le)")
	epochs := fs.Int("epochs", 1, "passes over the input (shuffled after the first)")
	yCols := fs.Int("y-cols", 0, "two-view algorithms: the last N columns of each row are y (ksir: 1, the target)")
	out := fs.String("out", "model.skpca", "snapshot file to write")
	model := fs.String("model", "model", "model name stored in the snapshot")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" {
		return errors.New("--input is required (a file, or - for stdin)")
	}
	cfg, err := lf.config(*model)
	if err != nil {
		return err
	}
	x, rows, d, err := readVectors(*input, ingest.Format(*format), *dim)
	if err != nil {
		return err
	}
	if rows == 0 {
		return errors.New("input holds no vectors")
	}
	if cfg.Algorithm.TwoView() {
		return fitTwoView(ctx, cfg, x, rows, d, *yCols, lf.batch, *epochs, lf.seed, *out)
	}
	l, err := online.New(cfg)
	if err != nil {
		return err
	}
	defer l.Close()
	start := time.Now()
	pr := newProgress()
	b := min(lf.batch, rows)
	batch := make([]float64, b*d)
	rejected, err := epochLoop(ctx, rows, b, *epochs, lf.seed, func(e int, perm []int) error {
		for r, p := range perm {
			copy(batch[r*d:r*d+d], x[p*d:p*d+d])
		}
		n := len(perm)
		if err := l.Update(batch[:n*d], n); err != nil {
			return err
		}
		el := time.Since(start)
		pr.update("epoch %d/%d  %d points  %d features  %.0f points/s%s", e+1, *epochs, l.SamplesSeen(), l.Features(),
			float64(l.SamplesSeen())/el.Seconds(), eta(float64(l.SamplesSeen()), float64(rows**epochs), el))
		return nil
	})
	if err != nil {
		return err
	}
	pr.done()
	snap := l.Snapshot()
	data, err := snap.MarshalBinary()
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	eig, _ := l.Eigenvalues()
	fmt.Fprintf(os.Stderr, "wrote %s: %d points, %d features, bandwidth %.4g, eigenvalue estimates %.4g, %d batches rejected, %.1fs\n",
		*out, l.SamplesSeen(), l.Features(), l.Kernel().Bandwidth, eig, rejected, time.Since(start).Seconds())
	return nil
}

func cmdProject(args []string) error {
	fs := flag.NewFlagSet("project", flag.ContinueOnError)
	modelPath := fs.String("model", "", "snapshot file")
	input := fs.String("input", "-", "input file, - for stdin")
	format := fs.String("format", "", "input format (default: from the extension, csv for stdin)")
	view := fs.String("view", "x", "view to project: x or y (two-view models)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *modelPath == "" {
		return errors.New("--model is required: the snapshot file to project with (from fit, or a service's snapshot.dir)")
	}
	snap, _, err := snapshot.Load(*modelPath)
	if err != nil {
		return err
	}
	m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
	if err != nil {
		return err
	}
	v := 0
	if *view == "y" {
		v = 1
	}
	x, rows, _, err := readVectors(*input, ingest.Format(*format), m.Dim(min(v, m.Views()-1)))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	k := m.K()
	d := m.Dim(min(v, m.Views()-1))
	const chunk = 1024
	for s := 0; s < rows; s += chunk {
		n := min(chunk, rows-s)
		p, err := m.ProjectView(v, nil, x[s*d:(s+n)*d])
		if err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			for q := 0; q < k; q++ {
				if q > 0 {
					w.WriteByte(',')
				}
				w.WriteString(strconv.FormatFloat(p[r*k+q], 'g', -1, 64))
			}
			w.WriteByte('\n')
		}
	}
	return nil
}

func cmdInspect(args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: streamkpca inspect FILE.skpca\n\nPrints the snapshot's file size, feature count and header as JSON. A model\nwith landmark features holds rows of the data it learned from: the output\nsays how many (data_rows) and warns.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: streamkpca inspect FILE")
	}
	snap, data, err := snapshot.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	out := struct {
		File     string           `json:"file"`
		Bytes    int              `json:"bytes"`
		Features int              `json:"features"`
		DataRows int              `json:"data_rows"`
		Warning  string           `json:"warning,omitempty"`
		Header   *snapshot.Header `json:"header"`
	}{File: fs.Arg(0), Bytes: len(data), Features: snap.Header.Features(), Header: &snap.Header}
	for v, view := range snap.Header.Views {
		if view.Landmarks() {
			seeds, bs := snap.Header.ViewSeeds(v)
			out.DataRows += len(seeds) * bs
		}
	}
	if out.DataRows > 0 {
		out.Warning = fmt.Sprintf("this model holds %d rows of the data it learned from (its landmark points, standardised if standardize was on): treat the file as you treat the data", out.DataRows)
		fmt.Fprintln(os.Stderr, "warning: "+out.Warning)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// fitTwoView fits ksvd, kcca or ksir on rows whose last yc columns are y.
func fitTwoView(ctx context.Context, cfg online.Config, data []float64, rows, d, yc, batch, epochs int, seed uint64, out string) error {
	if yc < 1 || yc >= d {
		return fmt.Errorf("%s needs --y-cols N (1 ≤ N < %d): the last N columns of each row are y", cfg.Algorithm, d)
	}
	dx := d - yc
	l, err := online.NewTwoView(cfg)
	if err != nil {
		return err
	}
	defer l.Close()
	start := time.Now()
	pr := newProgress()
	b := min(batch, rows)
	bx, by := make([]float64, b*dx), make([]float64, b*yc)
	rejected, err := epochLoop(ctx, rows, b, epochs, seed, func(e int, perm []int) error {
		for r, p := range perm {
			row := data[p*d : p*d+d]
			copy(bx[r*dx:(r+1)*dx], row[:dx])
			copy(by[r*yc:(r+1)*yc], row[dx:])
		}
		n := len(perm)
		if err := l.Update(bx[:n*dx], by[:n*yc], n); err != nil {
			return err
		}
		pr.update("epoch %d/%d  %d pairs  %d features  %.0f pairs/s%s", e+1, epochs, l.SamplesSeen(), l.Features(),
			float64(l.SamplesSeen())/time.Since(start).Seconds(), eta(float64(l.SamplesSeen()), float64(rows*epochs), time.Since(start)))
		return nil
	})
	if err != nil {
		return err
	}
	pr.done()
	data2, err := l.Snapshot().MarshalBinary()
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, data2, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %s, %d pairs, %d features, %d batches rejected, %.1fs\n",
		out, cfg.Algorithm, l.SamplesSeen(), l.Features(), rejected, time.Since(start).Seconds())
	return nil
}

// epochLoop runs epochs over rows in mini-batches of b, shuffled (seeded)
// after the first epoch, calling step with the row indices of each batch.
// Batches the divergence guard rejects are counted, not fatal.
func epochLoop(ctx context.Context, rows, b, epochs int, seed uint64, step func(epoch int, perm []int) error) (int, error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	perm := make([]int, rows)
	for i := range perm {
		perm[i] = i
	}
	var rejected int
	for e := 0; e < epochs; e++ {
		if e > 0 {
			rng.Shuffle(rows, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
		for s := 0; s < rows; s += b {
			if err := ctx.Err(); err != nil {
				return rejected, err
			}
			if err := step(e, perm[s:min(s+b, rows)]); err != nil {
				if errors.Is(err, online.ErrDiverged) {
					rejected++
					continue
				}
				return rejected, err
			}
		}
	}
	return rejected, nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/streamkpca/streamkpca/internal/blasimpl"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/online/features"
)

// CurvePoint is one point of a convergence curve (paper Figure 1).
type CurvePoint struct {
	Points   int     `json:"points"`
	Features int     `json:"features"`
	Error    float64 `json:"subspace_error"`
	Seconds  float64 `json:"seconds"`
}

// HermiteResult is the JSON printed by `bench hermite`.
type HermiteResult struct {
	Bench           string       `json:"bench"`
	Dims            int          `json:"dims"`
	K               int          `json:"k"`
	Algorithm       string       `json:"algorithm"`
	Batch           int          `json:"batch"`
	Block           int          `json:"block"`
	MaxFeatures     int          `json:"max_features"`
	Solver          string       `json:"solver"`
	Theta0          float64      `json:"theta0"`
	Theta1          float64      `json:"theta1"`
	Points          int          `json:"points"`
	Features        int          `json:"features"`
	SubspaceError   float64      `json:"subspace_error"`
	Seconds         float64      `json:"seconds"`
	PointsPerSecond float64      `json:"points_per_second"`
	Slope10k100k    float64      `json:"loglog_slope_10k_100k"`
	Curve           []CurvePoint `json:"curve"`
}

func cmdBench(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: streamkpca bench hermite|kcca|throughput|compare|mnist|pipeline [flags]")
	}
	switch args[0] {
	case "hermite":
		return benchHermite(ctx, args[1:])
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
	}
	return fmt.Errorf("unknown benchmark %q (known: hermite, kcca, throughput, compare, mnist, pipeline)", args[0])
}

func benchHermite(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench hermite", flag.ContinueOnError)
	points := fs.Int("points", 1_000_000, "stream length")
	k := fs.Int("k", 3, "components")
	dims := fs.Int("dims", 1, "1 (s=1, ℓ=1) or 16 (the product form of shared/data)")
	algo := fs.String("algo", "kpca", "kpca or gha")
	batch := fs.Int("batch", 512, "mini-batch b")
	block := fs.Int("block", 128, "block B")
	maxF := fs.Int("max-features", 65536, "feature budget")
	solver := fs.String("solver", "", "subspace or oja (default: the learner's)")
	theta0 := fs.Float64("theta0", 0, "θ₀ (0: the solver's default)")
	theta1 := fs.Float64("theta1", 0, "θ₁ (0: the solver's default)")
	seed := fs.Uint64("seed", 1, "seed")
	asJSON := fs.Bool("json", true, "print JSON (the only output format)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	_ = asJSON
	h := synth.Hermite1D()
	if *dims == 16 {
		h = synth.Hermite16()
	} else if *dims != 1 {
		return errors.New("--dims must be 1 or 16")
	}
	d := h.Dim()
	rng := rand.New(rand.NewPCG(*seed, 1))
	const held = 2000
	xh := make([]float64, held*d)
	h.Sample(xh, rng)
	truth := h.Eigenfunctions(xh, held, *k)
	l, err := online.New(online.Config{
		Model: "hermite", Algorithm: online.Algorithm(*algo), K: *k,
		Kernel:    features.Kernel{Family: features.Gaussian, Bandwidth: h.L},
		BlockSize: *block, MaxFeatures: *maxF, Solver: online.Solver(*solver), Theta0: *theta0, Theta1: *theta1, Seed: *seed,
	})
	if err != nil {
		return err
	}
	defer l.Close()
	lc := l.Config()
	res := HermiteResult{Bench: "hermite", Dims: d, K: *k, Algorithm: *algo, Solver: string(lc.Solver), Batch: *batch, Block: *block,
		MaxFeatures: *maxF, Theta0: lc.Theta0, Theta1: lc.Theta1}
	x := make([]float64, *batch*d)
	out := make([]float64, held**k)
	pr := newProgress()
	var learn time.Duration
	next := 1000.0
	score := func(n int) float64 {
		l.EvalTo(out, xh, held)
		e := synth.SubspaceError(mat.NewDense(held, *k, out), truth)
		res.Curve = append(res.Curve, CurvePoint{Points: n, Features: l.Features(), Error: e, Seconds: learn.Seconds()})
		return e
	}
	for n := 0; n < *points; {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := min(*batch, *points-n)
		h.Sample(x[:b*d], rng)
		t0 := time.Now()
		err := l.Update(x[:b*d], b)
		learn += time.Since(t0)
		if err != nil && !errors.Is(err, online.ErrDiverged) {
			return err
		}
		n += b
		if float64(n) >= next || n == *points {
			e := score(n)
			pr.update("%d/%d points  %d features  error %.3g  %.0f points/s%s", n, *points, l.Features(), e, float64(n)/learn.Seconds(), eta(float64(n), float64(*points), learn))
			for next <= float64(n) {
				next *= math.Pow(10, 0.125)
			}
		}
	}
	pr.done()
	last := res.Curve[len(res.Curve)-1]
	res.Points, res.Features, res.SubspaceError = last.Points, last.Features, last.Error
	res.Seconds = learn.Seconds()
	res.PointsPerSecond = float64(res.Points) / res.Seconds
	res.Slope10k100k = slope(res.Curve, 10_000, 100_000)
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// slope is the least-squares log–log slope of the curve between two point
// counts.
func slope(c []CurvePoint, lo, hi int) float64 {
	var sx, sy, sxx, sxy, n float64
	for _, p := range c {
		if p.Points < lo || p.Points > hi || !(p.Error > 0) {
			continue
		}
		x, y := math.Log(float64(p.Points)), math.Log(p.Error)
		sx, sy, sxx, sxy, n = sx+x, sy+y, sxx+x*x, sxy+x*y, n+1
	}
	if n < 2 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// KCCAResult is the JSON printed by `bench kcca`.
type KCCAResult struct {
	Bench           string    `json:"bench"`
	K               int       `json:"k"`
	Points          int       `json:"points"`
	Features        int       `json:"features"`
	HeldOut         []float64 `json:"heldout_correlations"`
	SumK            float64   `json:"heldout_sum"`
	LinearCCASumK   float64   `json:"linear_cca_heldout_sum"`
	Seconds         float64   `json:"seconds"`
	PointsPerSecond float64   `json:"points_per_second"`
}

// benchKCCA streams fresh pairs of the twoview stream into KCCA (defaults
// except k) and reports held-out canonical correlations next to linear CCA
// (gonum stat.CC) fitted on 20,000 pairs of the same stream.
func benchKCCA(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench kcca", flag.ContinueOnError)
	points := fs.Int("points", 200_000, "pairs streamed")
	k := fs.Int("k", 2, "components")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 1))
	const held = 2000
	hx, hy := synth.TwoView(rng, held)
	l, err := online.NewTwoView(online.Config{Algorithm: online.AlgKCCA, K: *k})
	if err != nil {
		return err
	}
	defer l.Close()
	pr := newProgress()
	var learn time.Duration
	for n := 0; n < *points; n += 512 {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := min(512, *points-n)
		x, y := synth.TwoView(rng, b)
		t0 := time.Now()
		if err := l.Update(x, y, b); err != nil && !errors.Is(err, online.ErrDiverged) {
			return err
		}
		learn += time.Since(t0)
		pr.update("%d/%d pairs  %d features  %.0f pairs/s%s", n+b, *points, l.Features(), float64(n+b)/learn.Seconds(), eta(float64(n+b), float64(*points), learn))
	}
	pr.done()
	u, v := make([]float64, held**k), make([]float64, held**k)
	l.EvalTo(0, u, hx, held)
	l.EvalTo(1, v, hy, held)
	cc := synth.CanonicalCorrelations(mat.NewDense(held, *k, u), mat.NewDense(held, *k, v))
	tx, ty := synth.TwoView(rng, 20000)
	var lc stat.CC
	if err := lc.CanonicalCorrelations(mat.NewDense(20000, 6, tx), mat.NewDense(20000, 6, ty), nil); err != nil {
		return err
	}
	var a, bm, lu, lv mat.Dense
	lc.LeftTo(&a, true)
	lc.RightTo(&bm, true)
	lu.Mul(mat.NewDense(held, 6, hx), a.Slice(0, 6, 0, *k))
	lv.Mul(mat.NewDense(held, 6, hy), bm.Slice(0, 6, 0, *k))
	res := KCCAResult{Bench: "kcca", K: *k, Points: *points, Features: l.Features(), HeldOut: cc, SumK: synth.Sum(cc),
		LinearCCASumK: synth.Sum(synth.CanonicalCorrelations(&lu, &lv)), Seconds: learn.Seconds(),
		PointsPerSecond: float64(*points) / learn.Seconds()}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// ThroughputRow is one configuration of `bench throughput`.
type ThroughputRow struct {
	D               int     `json:"d"`
	Features        int     `json:"features"`
	K               int     `json:"k"`
	Batch           int     `json:"batch"`
	Block           int     `json:"block"`
	StepMedianSec   float64 `json:"step_median_seconds"`
	PointsPerSecond float64 `json:"points_per_second"`
	StepGFLOPS      float64 `json:"step_gflops"`
	GEMMMedianSec   float64 `json:"gemm_median_seconds"`
	GEMMGFLOPS      float64 `json:"gemm_gflops"`
	Ratio           float64 `json:"step_over_gemm"`
	BLAS            string  `json:"blas"`
	Precision       string  `json:"precision"`
	Compute         string  `json:"compute"`
}

// benchThroughput times the DSGD step and, for the same shapes, the two
// plain matrix products x·Ω (b×d by d×features) and Φ·α (b×features by
// features×k) through gonum's BLAS: the GEMM ceiling. Both count
// 2·b·features·(d+k) flops, so step_over_gemm compares like with like (the
// step also evaluates b·features cosines and generates nothing: blocks are
// cached).
func benchThroughput(args []string) error {
	fs := flag.NewFlagSet("bench throughput", flag.ContinueOnError)
	ds := fs.String("d", "1,64,784", "input dimensions, comma-separated")
	nf := fs.Int("features", 65536, "random features")
	k := fs.Int("k", 10, "components")
	b := fs.Int("batch", 512, "mini-batch b")
	block := fs.Int("block", online.DefaultBlockSize, "features per block B")
	runs := fs.Int("runs", 5, "timed steps (and GEMMs) per configuration; medians are reported")
	precision := fs.String("precision", "float64", "float64 or float32 (x·Ω; the ceiling's x·Ω then uses SGEMM)")
	compute := fs.String("compute", "exact", "exact (own kernels) or blas (the linked BLAS)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rows []ThroughputRow
	for _, ds := range strings.Split(*ds, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(ds))
		if err != nil || d < 1 {
			return fmt.Errorf("--d: %q", ds)
		}
		rt := online.Config{BlockSize: *block, Precision: online.Precision(*precision), Compute: online.Compute(*compute)}
		if rt.Compute == online.ComputeBLAS {
			// The evaluator's workers each call the BLAS: one BLAS thread
			// each, or the two levels oversubscribe the cores.
			blasimpl.SetThreads(1)
		}
		r, err := online.MeasureStep(d, *nf, *k, *b, *runs, rt)
		if err != nil {
			return err
		}
		blasimpl.SetThreads(runtime.NumCPU())
		g := gemmCeiling(d, *nf, *k, *b, *runs, *precision == "float32")
		row := ThroughputRow{D: d, Features: r.Features, K: *k, Batch: *b, StepMedianSec: r.Median(),
			PointsPerSecond: float64(*b) / r.Median(), StepGFLOPS: r.GEMMFlops() / r.Median() / 1e9,
			GEMMMedianSec: g, GEMMGFLOPS: r.GEMMFlops() / g / 1e9, BLAS: blasLabel(),
			Precision: *precision, Compute: *compute, Block: *block}
		row.Ratio = row.StepGFLOPS / row.GEMMGFLOPS
		rows = append(rows, row)
		fmt.Fprintf(os.Stderr, "d=%d: step %.3fs (%.1f GFLOP/s), GEMM %.3fs (%.1f GFLOP/s), ratio %.2f\n",
			d, row.StepMedianSec, row.StepGFLOPS, g, row.GEMMGFLOPS, row.Ratio)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// gemmCeiling returns the median time of x·Ω plus Φ·α through blas64 (or
// blas32 for x·Ω when f32, as the float32 step): gonum's pure-Go BLAS, or
// OpenBLAS in the openblas build.
func gemmCeiling(d, nf, k, b, runs int, f32 bool) float64 {
	rng := rand.New(rand.NewPCG(2, 2))
	fill := func(r, c int) *mat.Dense {
		m := mat.NewDense(r, c, nil)
		raw := m.RawMatrix().Data
		for i := range raw {
			raw[i] = rng.NormFloat64()
		}
		return m
	}
	x, om, alpha := fill(b, d), fill(d, nf), fill(nf, k)
	var z, h mat.Dense
	z.Mul(x, om)
	to32 := func(m *mat.Dense) blas32.General {
		r, c := m.Dims()
		g := blas32.General{Rows: r, Cols: c, Stride: c, Data: make([]float32, r*c)}
		for i, v := range m.RawMatrix().Data {
			g.Data[i] = float32(v)
		}
		return g
	}
	x32, om32, z32 := to32(x), to32(om), to32(&z)
	product := func() {
		if f32 {
			blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, x32, om32, 0, z32)
		} else {
			z.Mul(x, om)
		}
		h.Mul(&z, alpha)
	}
	product() // warm up
	var ts []float64
	for i := 0; i < runs; i++ {
		t0 := time.Now()
		product()
		ts = append(ts, time.Since(t0).Seconds())
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}

// blasLabel names the BLAS behind gonum in this binary and, for OpenBLAS,
// the kernels it chose for this CPU.
func blasLabel() string {
	if c := blasimpl.CoreName(); c != "" {
		return blasimpl.Name + " (" + c + ")"
	}
	return blasimpl.Name
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online"
)

// MNISTCCADefaults are RunMNISTCCA's defaults: 8,000 training and 2,000
// held-out pairs, k = 50, at most 100 epochs or 120 s, Nyström with 2,048
// landmarks and 2,048 fixed random features per view. The learner's
// features are fit's for a file (online.FitFeatures: landmark blocks,
// 2,048 a view for 8,000 pairs); with --features random, what the 120 s
// and the default memory bound pay for (online.CovarianceBudget).
var MNISTCCADefaults = MNISTRun{Train: 8000, Test: 2000, K: 50, Epochs: 100, Budget: 120 * time.Second,
	Batch: 512, Landmarks: 2048, RFFFeatures: 2048, Seed: 1}

// MNISTCCAConfig configures RunMNISTCCA. Zero values mean the default
// (MNISTCCADefaults; the baselines' sizes are taken as given).
type MNISTCCAConfig struct {
	MNISTRun
	// Learner overrides the learner's configuration (Algorithm kcca and K
	// are set); its zero value is the defaults.
	Learner online.Config
	// Reg is the baselines' ridge, relative to the mean eigenvalue of
	// each view's feature covariance. Default: 1e-2 (held-out S50 with
	// Nyström-2,048: 38.2 at 1e-3, 41.0 at 1e-2, 40.7 at 1e-1).
	Reg float64
	// BandwidthScale, if set and not 1, multiplies the median-trick
	// bandwidths of both views, for the learner (then given explicit
	// Gaussian kernels) and the baselines alike.
	BandwidthScale float64
	// Progress, if set, is called after every scored checkpoint.
	Progress func(method string, c CCACheckpoint)
}

// CCACheckpoint is one point of a held-out correlation curve.
type CCACheckpoint struct {
	Epoch    int     `json:"epoch,omitempty"`
	Seconds  float64 `json:"seconds"`
	Features int     `json:"features,omitempty"`
	SumK     float64 `json:"sum_k"`
}

// CCAMethodResult is one method's row.
type CCAMethodResult struct {
	Method  string  `json:"method"`
	Size    int     `json:"size"`
	SizeOf  string  `json:"size_of"`
	Seconds float64 `json:"seconds"`
	SumK    float64 `json:"sum_k"`
	// Ridge is the learner's covariance-solver ridge at the end (chosen
	// on held-out pairs unless set), 0 for the baselines.
	Ridge float64         `json:"ridge,omitempty"`
	Curve []CCACheckpoint `json:"curve,omitempty"`
}

// MNISTCCAResult is RunMNISTCCA's report.
type MNISTCCAResult struct {
	Bench   string            `json:"bench"`
	Train   int               `json:"train"`
	Test    int               `json:"test"`
	K       int               `json:"k"`
	Methods []CCAMethodResult `json:"methods"`
}

// RunMNISTCCA learns kernel CCA between the left and right halves of MNIST
// images (392 pixels each) and scores every method by S_k, the sum of the
// k canonical correlations between its two k-dimensional projections of
// the held-out pairs (synth.CanonicalCorrelations): the measure of the
// paper's MNIST8M experiment (its Fig. 4, "total correlation").
//
// The learner (kcca with its defaults: Gaussian kernels, median-trick
// bandwidths, random features) streams the training pairs for up to
// Epochs epochs, the first in order, then shuffled, scored after each
// epoch; its clock excludes the scoring. The baselines are regularised
// CCA (ridge Reg × the mean eigenvalue on each covariance) on the pixels
// (linear CCA), on fixed random Fourier features and on Nyström features
// of the same Gaussian kernels, fitted on all training pairs at once;
// their clock counts features, covariances and the solve.
func RunMNISTCCA(ctx context.Context, set mnist.Set, cfg MNISTCCAConfig) (MNISTCCAResult, error) {
	cfg.setDefaults(MNISTCCADefaults)
	orDefault(&cfg.Reg, 1e-2)
	if set.Len() < cfg.Train+cfg.Test {
		return MNISTCCAResult{}, fmt.Errorf("bench: %d images, need %d + %d", set.Len(), cfg.Train, cfg.Test)
	}
	set = set.Shuffle(rand.New(rand.NewPCG(cfg.Seed, 1)))
	const d = mnist.Pixels / 2
	left, right := set.Halves()
	n, m, k := cfg.Train, cfg.Test, cfg.K
	xTr, yTr := left[:n*d], right[:n*d]
	xTe, yTe := left[n*d:(n+m)*d], right[n*d:(n+m)*d]
	res := MNISTCCAResult{Bench: "mnist-kcca", Train: n, Test: m, K: k}
	score := func(u, v []float64) float64 {
		return synth.Sum(synth.CanonicalCorrelations(mat.NewDense(m, k, u), mat.NewDense(m, k, v)))
	}

	// The learner, fed as fit feeds it.
	lc := cfg.Learner
	lc.Algorithm, lc.K = online.AlgKCCA, k
	if lc.Features == "" && lc.MaxFeatures == 0 {
		// fit's choice for a file (online.FitFeatures): landmark blocks.
		lc.Features, lc.MaxFeatures = online.FitFeatures(online.AlgKCCA, n)
	}
	if lc.MaxFeatures == 0 && lc.TakesCovarianceBudget() {
		// An offline run: the budget the time limit and the memory bound
		// pay for, as fit chooses it (online.CovarianceBudget).
		lc.MaxFeatures = online.CovarianceBudget(online.OfflineCovariance{Limit: cfg.Budget, Rows: n, K: k, Batch: cfg.Batch, Dims: [2]int{d, d}})
	}
	// The median trick on the first batch, as the learner does it (the
	// first epoch is in order).
	bwX := online.MedianDistance(xTr, min(cfg.Batch, n), d, 512)
	bwY := online.MedianDistance(yTr, min(cfg.Batch, n), d, 512)
	if s := cfg.BandwidthScale; s > 0 && s != 1 {
		bwX, bwY = s*bwX, s*bwY
		lc.Kernel = features.Kernel{Family: features.Gaussian, Bandwidth: bwX}
		lc.KernelY = features.Kernel{Family: features.Gaussian, Bandwidth: bwY}
	}
	l, err := online.NewTwoView(lc)
	if err != nil {
		return res, err
	}
	defer l.Close()
	row := CCAMethodResult{Method: "streamkpca kcca (defaults)", Size: l.Config().MaxFeatures, SizeOf: "features per view (max)"}
	if s := cfg.BandwidthScale; s > 0 && s != 1 {
		row.Method = fmt.Sprintf("streamkpca kcca (bandwidth %g× the median trick)", s)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	bx, by := make([]float64, cfg.Batch*d), make([]float64, cfg.Batch*d)
	u, v := make([]float64, m*k), make([]float64, m*k)
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	var clock time.Duration
	for e := 0; e < cfg.Epochs && clock < cfg.Budget; e++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if e > 0 {
			rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
		t0 := time.Now()
		for s := 0; s < n; s += cfg.Batch {
			b := min(cfg.Batch, n-s)
			for r := 0; r < b; r++ {
				p := perm[s+r]
				copy(bx[r*d:(r+1)*d], xTr[p*d:(p+1)*d])
				copy(by[r*d:(r+1)*d], yTr[p*d:(p+1)*d])
			}
			if err := l.Update(bx[:b*d], by[:b*d], b); err != nil && !errors.Is(err, online.ErrDiverged) {
				return res, err
			}
		}
		clock += time.Since(t0)
		l.EvalTo(0, u, xTe, m)
		l.EvalTo(1, v, yTe, m)
		c := CCACheckpoint{Epoch: e + 1, Seconds: clock.Seconds(), Features: l.Features(), SumK: score(u, v)}
		row.Curve = append(row.Curve, c)
		if cfg.Progress != nil {
			cfg.Progress(row.Method, c)
		}
	}
	row.Seconds, row.SumK = clock.Seconds(), row.Curve[len(row.Curve)-1].SumK
	row.Ridge, _ = l.Ridge()
	res.Methods = append(res.Methods, row)

	// The baselines: a feature map per view, then regularised CCA.
	baseline := func(name string, size int, sizeOf string, fx, fy func(dst, x []float64, rows int), p int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		px, py := make([]float64, n*p), make([]float64, n*p)
		fx(px, xTr, n)
		fy(py, yTr, n)
		a, b, mx, my, err := regCCA(px, py, n, p, k, cfg.Reg)
		if err != nil {
			return fmt.Errorf("bench: %s: %w", name, err)
		}
		secs := time.Since(t0).Seconds()
		tx, ty := make([]float64, m*p), make([]float64, m*p)
		fx(tx, xTe, m)
		fy(ty, yTe, m)
		project(u, tx, m, p, mx, a, k)
		project(v, ty, m, p, my, b, k)
		r := CCAMethodResult{Method: name, Size: size, SizeOf: sizeOf, Seconds: secs, SumK: score(u, v)}
		res.Methods = append(res.Methods, r)
		if cfg.Progress != nil {
			cfg.Progress(name, CCACheckpoint{Seconds: secs, SumK: r.SumK})
		}
		return nil
	}
	ident := func(dst, x []float64, rows int) { copy(dst, x[:rows*d]) }
	if err := baseline("linear CCA", d, "pixels per view", ident, ident, d); err != nil {
		return res, err
	}
	if f := cfg.RFFFeatures; f > 0 {
		mk := func(bw float64, seed uint64) func(dst, x []float64, rows int) {
			fm := features.Map{Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: bw}, Dim: d, BlockSize: f}
			var blk features.Block
			fm.Generate(&blk, seed)
			return func(dst, x []float64, rows int) {
				fm.PhiTo(dst, make([]float64, fm.ScratchLen()), x, rows, &blk)
			}
		}
		if err := baseline("random Fourier features + CCA", f, "features per view", mk(bwX, cfg.Seed), mk(bwY, cfg.Seed^0x9E3779B97F4A7C15), f); err != nil {
			return res, err
		}
	}
	if f := cfg.Landmarks; f > 0 {
		mk := func(x []float64, bw float64) (func(dst, x []float64, rows int), error) {
			fm := features.Map{Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: bw}, Dim: d, BlockSize: f, Landmarks: true}
			lb, err := fm.NewLandmarks(x[:f*d]) // the first f training images (already shuffled)
			if err != nil {
				return nil, err
			}
			return func(dst, x []float64, rows int) {
				fm.PhiTo(dst, make([]float64, fm.ScratchLen()), x, rows, &features.Block{LM: lb})
			}, nil
		}
		fx, err := mk(xTr, bwX)
		if err != nil {
			return res, err
		}
		fy, err := mk(yTr, bwY)
		if err != nil {
			return res, err
		}
		if err := baseline("Nyström + CCA", f, "landmarks per view", fx, fy, f); err != nil {
			return res, err
		}
	}
	return res, nil
}

// regCCA is regularised linear CCA of the n×p feature matrices px, py
// (row-major): with C the centred covariances plus reg × their mean
// eigenvalue on the diagonal, C_x = L_x·L_xᵀ, the top-k eigenvectors U of
// T·Tᵀ, T = L_x⁻¹·C_xy·L_y⁻ᵀ, give A = L_x⁻ᵀ·U and B = L_y⁻ᵀ·Tᵀ·U (the
// columns' scale does not matter to canonical correlations). It returns
// A, B (p×k) and the feature means.
func regCCA(px, py []float64, n, p, k int, reg float64) (a, b *mat.Dense, mx, my []float64, err error) {
	cx, mx := centredDense(px, n, p)
	cy, my := centredDense(py, n, p)
	chol := func(c *mat.Dense) (*mat.TriDense, error) {
		var s mat.SymDense
		s.SymOuterK(1/float64(n), c.T())
		var tr float64
		for i := 0; i < p; i++ {
			tr += s.At(i, i)
		}
		r := reg * tr / float64(p)
		for i := 0; i < p; i++ {
			s.SetSym(i, i, s.At(i, i)+r)
		}
		var ch mat.Cholesky
		if !ch.Factorize(&s) {
			return nil, fmt.Errorf("covariance not positive definite with ridge %g", r)
		}
		var l mat.TriDense
		ch.LTo(&l)
		return &l, nil
	}
	lx, err := chol(cx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ly, err := chol(cy)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var cxy, a1, tt, t mat.Dense
	cxy.Mul(cx.T(), cy)
	cxy.Scale(1/float64(n), &cxy)
	if err := a1.Solve(lx, &cxy); err != nil { // L_x⁻¹·C_xy
		return nil, nil, nil, nil, err
	}
	if err := tt.Solve(ly, a1.T()); err != nil { // Tᵀ = L_y⁻¹·(L_x⁻¹·C_xy)ᵀ
		return nil, nil, nil, nil, err
	}
	t.CloneFrom(tt.T())
	var g mat.SymDense
	g.SymOuterK(1, &t) // T·Tᵀ
	var es mat.EigenSym
	if !es.Factorize(&g, true) {
		return nil, nil, nil, nil, fmt.Errorf("eigendecomposition failed")
	}
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	uk := mat.NewDense(p, k, nil)
	for q := 0; q < k; q++ { // eigenvalues ascend
		for i := 0; i < p; i++ {
			uk.Set(i, q, vecs.At(i, p-1-q))
		}
	}
	var vk mat.Dense
	vk.Mul(&tt, uk) // Tᵀ·U
	a, b = new(mat.Dense), new(mat.Dense)
	if err := a.Solve(lx.T(), uk); err != nil {
		return nil, nil, nil, nil, err
	}
	if err := b.Solve(ly.T(), &vk); err != nil {
		return nil, nil, nil, nil, err
	}
	return a, b, mx, my, nil
}

func centredDense(x []float64, n, p int) (*mat.Dense, []float64) {
	mean := make([]float64, p)
	for r := 0; r < n; r++ {
		for c, v := range x[r*p : (r+1)*p] {
			mean[c] += v
		}
	}
	for c := range mean {
		mean[c] /= float64(n)
	}
	out := mat.NewDense(n, p, nil)
	for r := 0; r < n; r++ {
		for c, v := range x[r*p : (r+1)*p] {
			out.Set(r, c, v-mean[c])
		}
	}
	return out, mean
}

// project sets dst (rows×k) to (x − mean)·a.
func project(dst, x []float64, rows, p int, mean []float64, a *mat.Dense, k int) {
	xc := mat.NewDense(rows, p, nil)
	for r := 0; r < rows; r++ {
		for c := 0; c < p; c++ {
			xc.Set(r, c, x[r*p+c]-mean[c])
		}
	}
	out := mat.NewDense(rows, k, dst)
	out.Mul(xc, a)
	for i, v := range dst {
		if math.IsNaN(v) {
			dst[i] = 0
		}
	}
}

package online

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/streamkpca/streamkpca/online/features"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TwoView learns from pairs (x, y): kernel SVD (paper Alg. 3), kernel CCA
// (Alg. 4) or kernel sliced inverse regression (Sec. 5.4: kernel CCA of x
// against the slice indicators of a target). It is not safe for concurrent
// use.
//
// # Mini-batch update
//
// Views X (b×d_x), Y (b×d_y); U = Σ_j Φ_j(X)·α_j, V = Σ_j Ψ_j(Y)·β_j; Ũ, Ṽ
// their batch-centred versions (unless Uncentered); W = (ŨᵀṼ + ṼᵀŨ)/b.
//
//	KSVD (Alg. 3):  α_j ← α_j(I − ηW), β_j ← β_j(I − ηW);
//	                α_new = η·Φ_newᵀṼ/b,  β_new = η·Ψ_newᵀŨ/b.
//	KCCA (Alg. 4):  α_new = η·Φ_newᵀ(Ṽ − ŨW)/b,  β_new = η·Ψ_newᵀ(Ũ − ṼW)/b
//	                (no shrinking: C_XX·G_X·W is itself a new-feature term).
//
// The first batch initialises block 0 of the two views jointly by a tiny
// exact solve (see initPair): the SVD of the blocks' cross-covariance for
// KSVD, their regularised CCA for KCCA/KSIR, so that W starts positive
// semi-definite (unit RKHS norm for KSVD, unit variance for KCCA/KSIR).
// η = min(θ₀/(1+θ₁t), 1)·g/λ̂ with λ̂ the larger top eigenvalue of the two
// initial feature covariances; the divergence guard rejects a batch whose
// U or V is non-finite or whose variance exceeds 1e4× its initial value.
//
// KSIR: the target of the first batch fixes Slices−1 thresholds at its
// quantiles; view y is the one-hot slice indicator under the linear map (a
// single block of Slices features, revisited every step).
//
// View y's block seeds derive from Seed ^ 0x9E3779B97F4A7C15, so the views
// draw independent features; both seed lists are stored in the snapshot.
type TwoView struct {
	cfg Config
	v   [2]tvView

	t, samples uint64
	lambda0    float64
	trace0     float64
	backoff    float64
	rejected   uint64
	slices     []float64

	cov *covariance // the covariance solver's statistics (Config.Solver SolverCovariance), once the budget is full

	wnorm        float64 // ‖W‖₂ of the current batch (0 before the first update)
	trRun        float64 // exponential average of the functions' variance
	w, wUse, tmp []float64
	pv, pw       []float64
}

type tvView struct {
	fm       features.Map
	ev       *features.Evaluator
	seeds    []uint64
	coef     []float64
	pre      snapshot.Preprocess
	center   []float64
	maxBlock int
	seedBase uint64

	xs, h, hc, res, phi, newc, mean []float64
}

// Two-view step defaults (see NewTwoView).
const (
	DefaultTwoViewTheta0 = 1.0
	DefaultTwoViewTheta1 = 1e-3
)

// viewTag separates view y's seeds from view x's.
const viewTag = 0x9E3779B97F4A7C15

// NewTwoView returns a two-view learner (Algorithm ksvd, kcca or ksir).
func NewTwoView(cfg Config) (*TwoView, error) {
	// Two-view defaults: the unit step at its cap and a slow decay. The
	// canonical directions with small feature variance λ_i move at rate
	// ≈ η·λ_i ≪ η·λ̂, so KCCA needs the largest stable step (measured on
	// the twoview stream: θ₀ = 0.5, θ₁ = 0.01 reaches S₂ = 1.45 after 40
	// epochs where θ₀ = 1, θ₁ = 1e-3 reaches 1.69 of an exact 1.72).
	if cfg.Theta0 == 0 {
		cfg.Theta0 = DefaultTwoViewTheta0
	}
	if cfg.Theta1 == 0 {
		cfg.Theta1 = DefaultTwoViewTheta1
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if !cfg.Algorithm.TwoView() {
		return nil, fmt.Errorf("%w: %s is not a two-view algorithm", ErrConfig, cfg.Algorithm)
	}
	cfg.MaxFeatures -= cfg.MaxFeatures % cfg.BlockSize
	return &TwoView{cfg: cfg, backoff: 1}, nil
}

// Config returns the configuration with defaults.
func (l *TwoView) Config() Config { return l.cfg }

// Close releases the evaluators' workers.
func (l *TwoView) Close() {
	for i := range l.v {
		if l.v[i].ev != nil {
			l.v[i].ev.Close()
		}
	}
	if l.cov != nil {
		l.cov.ws.Close()
	}
}

// Step, SamplesSeen, Features, Rejected: as for KPCA.
func (l *TwoView) Step() uint64        { return l.t }
func (l *TwoView) SamplesSeen() uint64 { return l.samples }
func (l *TwoView) Features() int       { return len(l.v[0].seeds) * l.v[0].fm.BlockSize }
func (l *TwoView) Rejected() uint64    { return l.rejected }

// Dims returns the input dimensions of x and y (y: 1 for ksir's target).
func (l *TwoView) Dims() (int, int) {
	if l.cfg.Algorithm == AlgKSIR {
		return l.v[0].fm.Dim, 1
	}
	return l.v[0].fm.Dim, l.v[1].fm.Dim
}

func (l *TwoView) centered() bool { return !l.cfg.Uncentered }

// StepSize returns η for the next batch.
func (l *TwoView) StepSize() float64 {
	u := math.Min(l.cfg.Theta0/(1+l.cfg.Theta1*float64(l.t)), MaxUnitStep)
	s := l.lambda0
	// The update multiplies by I − ηW (KSVD) or subtracts η·C·G·W (KCCA,
	// KSIR); once the functions grow, ‖W‖ grows and a fixed η would flip
	// and amplify them. Bound η·‖W‖ on every batch: in normal operation
	// (‖W‖ ≤ 2λ̂ for KSVD, ≈ 2ρ ≤ 2 for KCCA) the step is unchanged.
	if l.cfg.Algorithm == AlgKSVD {
		s = math.Max(s, l.wnorm/2)
	} else {
		s *= math.Max(1, l.wnorm/2)
	}
	if !(s > 0) {
		s = 1
	}
	return u * l.backoff / s
}

func (l *TwoView) initView(i int, kern features.Kernel, x []float64, rows, d, nb, maxF int, standardize bool) error {
	v := &l.v[i]
	if standardize {
		v.pre = standardizer(x, rows, d)
	}
	if kern.Family.HasBandwidth() && kern.Bandwidth == 0 {
		xs := make([]float64, rows*d)
		v.pre.Apply(xs, x[:rows*d])
		kern.Bandwidth = MedianDistance(xs, rows, d, 512)
		if !(kern.Bandwidth > 0) {
			return fmt.Errorf("%w: the median trick found bandwidth %v for view %d; set a bandwidth", ErrInput, kern.Bandwidth, i)
		}
	}
	if kern.Family == features.Linear {
		nb, maxF = d, d
	}
	if nb < l.cfg.K {
		return fmt.Errorf("%w: view %d has %d features per block, fewer than k = %d", ErrConfig, i, nb, l.cfg.K)
	}
	v.fm = features.Map{Kernel: kern, Dim: d, BlockSize: nb,
		Float32: l.cfg.Precision == Float32 && kern.Family.ShiftInvariant(), BLAS: l.cfg.Compute == ComputeBLAS,
		Landmarks: l.cfg.Features == FeaturesLandmarks}
	if err := v.fm.Validate(); err != nil {
		return fmt.Errorf("%w: view %d: %w", ErrConfig, i, err)
	}
	v.maxBlock = maxF / nb
	v.ev = features.NewEvaluator(v.fm, features.EvaluatorConfig{Workers: l.cfg.Workers, CacheBytes: l.cfg.CacheBytes})
	k := l.cfg.K
	v.coef = make([]float64, 0, v.maxBlock*nb*k)
	v.newc = make([]float64, nb*k)
	v.mean = make([]float64, k)
	if l.centered() {
		v.center = make([]float64, k)
	}
	v.seedBase = l.cfg.Seed
	if i == 1 {
		v.seedBase ^= viewTag
	}
	return nil
}

func (v *tvView) scratch(rows, k int) {
	d, nb := v.fm.Dim, v.fm.BlockSize
	if cap(v.xs) < rows*d {
		v.xs = make([]float64, rows*d)
	}
	if cap(v.h) < rows*k {
		v.h, v.hc, v.res = make([]float64, rows*k), make([]float64, rows*k), make([]float64, rows*k)
	}
	if cap(v.phi) < rows*nb {
		v.phi = make([]float64, rows*nb)
	}
	v.xs, v.h, v.hc, v.res, v.phi = v.xs[:rows*d], v.h[:rows*k], v.hc[:rows*k], v.res[:rows*k], v.phi[:rows*nb]
}

// inputs writes view i's feature-space inputs for the batch into v.xs.
func (l *TwoView) inputs(i int, x []float64) {
	v := &l.v[i]
	if i == 1 && l.cfg.Algorithm == AlgKSIR {
		copy(v.xs, snapshot.SliceIndicators(l.slices, x))
		return
	}
	v.pre.Apply(v.xs, x)
}

// Update learns from one mini-batch of rows pairs: x (rows×d_x) and y
// (rows×d_y; for ksir the rows targets). Errors as for KPCA.Update.
func (l *TwoView) Update(x, y []float64, rows int) error {
	if rows < 1 || len(x)%rows != 0 || len(y)%rows != 0 || len(x) == 0 || len(y) == 0 {
		return fmt.Errorf("%w: %d x values and %d y values for %d rows", ErrInput, len(x), len(y), rows)
	}
	dx, dy := len(x)/rows, len(y)/rows
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: non-finite x value", ErrInput)
		}
	}
	for _, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: non-finite y value", ErrInput)
		}
	}
	if l.cfg.Features == FeaturesLandmarks && len(l.v[0].seeds) == 0 && rows < l.cfg.BlockSize {
		// Not an error in the data: the first landmark blocks need B pairs.
		return fmt.Errorf("%w: the first landmark blocks need %d pairs, the batch has %d (send more, or lower the block size)", ErrInput, l.cfg.BlockSize, rows)
	}
	if l.v[0].ev == nil {
		if err := l.init(x, y, rows, dx, dy); err != nil {
			return err
		}
	}
	if wx, wy := l.Dims(); dx != wx || dy != wy {
		return fmt.Errorf("%w: dimensions %d and %d, model has %d and %d", ErrInput, dx, dy, wx, wy)
	}
	if err := l.v[0].fm.Kernel.CheckInput(x); err != nil {
		return fmt.Errorf("%w: x: %w", ErrInput, err)
	}
	if l.cfg.Algorithm != AlgKSIR {
		if err := l.v[1].fm.Kernel.CheckInput(y); err != nil {
			return fmt.Errorf("%w: y: %w", ErrInput, err)
		}
	}
	k := l.cfg.K
	for i := range l.v {
		l.v[i].scratch(rows, k)
	}
	l.inputs(0, x)
	l.inputs(1, y)
	if len(l.v[0].seeds) == 0 {
		return l.first(rows)
	}
	if l.cfg.Solver == SolverCovariance && l.budgetFull() {
		return l.covStep(rows)
	}
	var tr float64
	for i := range l.v {
		v := &l.v[i]
		v.ev.Eval(v.h, v.xs, rows, v.seeds, v.coef, k)
		copy(v.hc, v.h)
		clear(v.mean)
		for r := 0; r < rows; r++ {
			for q := 0; q < k; q++ {
				v.mean[q] += v.h[r*k+q] / float64(rows)
			}
		}
		if l.centered() {
			for r := 0; r < rows; r++ {
				for q := 0; q < k; q++ {
					v.hc[r*k+q] -= v.mean[q]
				}
			}
		}
		for _, h := range v.hc {
			tr += float64(h*h) / float64(rows)
		}
	}
	if math.IsNaN(tr) || math.IsInf(tr, 0) || tr > 100*math.Max(l.trace0, l.trRun) {
		l.samples += uint64(rows)
		l.rejected++
		l.backoff *= 0.5
		return fmt.Errorf("%w: step %d, step size now %.3g", ErrDiverged, l.t, l.StepSize())
	}
	// W = (ŨᵀṼ + ṼᵀŨ)/b.
	u, vv := l.v[0].hc, l.v[1].hc
	clear(l.w)
	for r := 0; r < rows; r++ {
		ur, vr := u[r*k:r*k+k], vv[r*k:r*k+k]
		for a := 0; a < k; a++ {
			for c := 0; c < k; c++ {
				l.w[a*k+c] += float64(ur[a]*vr[c]) + float64(vr[a]*ur[c])
			}
		}
	}
	for i := range l.w {
		l.w[i] /= float64(rows)
	}
	l.wnorm = symNorm(l.w, l.pv, l.pw, k)
	if l.trRun == 0 {
		l.trRun = tr
	}
	l.trRun += 0.05 * (tr - l.trRun)
	eta := l.StepSize()
	// Residuals that multiply the new features.
	for i := range l.v {
		other := l.v[1-i].hc
		me := l.v[i].hc
		res := l.v[i].res
		copy(res, other)
		if l.cfg.Algorithm != AlgKSVD { // KCCA, KSIR: other − self·W
			for r := 0; r < rows; r++ {
				for c := 0; c < k; c++ {
					var s float64
					for a := 0; a < k; a++ {
						s += float64(me[r*k+a] * l.w[a*k+c])
					}
					res[r*k+c] -= s
				}
			}
		}
	}
	if l.cfg.Algorithm == AlgKSVD {
		for i := range l.w {
			l.wUse[i] = float64(eta * l.w[i])
		}
		for i := range l.v {
			shrink(l.v[i].coef, l.wUse, l.tmp, k)
		}
	}
	for i := range l.v {
		l.appendBlock(i, rows, eta)
	}
	rho := math.Max(1/float64(l.t+1), 0.01)
	for i := range l.v {
		if c := l.v[i].center; c != nil {
			for q := range c {
				c[q] += rho * (l.v[i].mean[q] - c[q])
			}
		}
	}
	l.t++
	l.samples += uint64(rows)
	return nil
}

// budgetFull reports whether both views hold all the blocks of their
// feature budget.
func (l *TwoView) budgetFull() bool {
	for i := range l.v {
		if len(l.v[i].seeds) < l.v[i].maxBlock {
			return false
		}
	}
	return true
}

// covStep is a step of the covariance solver (see covariance): the
// batch's features of every block join the statistics, and the
// coefficients become the solve's canonical directions.
func (l *TwoView) covStep(rows int) error {
	k := l.cfg.K
	if l.cov == nil {
		l.cov = newCovariance(len(l.v[0].coef)/k, len(l.v[1].coef)/k, k, l.cfg.Ridge, l.cfg.Seed, l.cfg.Workers)
	}
	c := l.cov
	for i := range l.v {
		v := &l.v[i]
		if err := c.gatherFeatures(i, v.phi, v.ev, v.xs, rows, v.seeds); err != nil {
			l.samples += uint64(rows)
			l.rejected++
			return fmt.Errorf("%w: step %d: view %d: %w", ErrDiverged, l.t, i, err)
		}
	}
	c.add(rows)
	l.t++
	l.samples += uint64(rows)
	if !c.due() {
		return nil
	}
	iters := 2
	if c.solves == 0 {
		iters = 8 // from a random basis
	}
	if err := c.solve(l.v[0].coef, l.v[1].coef, k, iters, l.centered()); err != nil {
		l.rejected++
		return fmt.Errorf("step %d (its samples are in the statistics; the coefficients are the previous step's): %w", l.t-1, err)
	}
	for i := range l.v {
		if ctr := l.v[i].center; ctr != nil {
			clear(ctr)
			addMeanTimes(ctr, c.mu[i], l.v[i].coef, k)
		}
	}
	return nil
}

// appendBlock adds η·Φ_newᵀ·res/b as a new block of view i, or to the block
// revisited in turn once the view's budget is reached.
func (l *TwoView) appendBlock(i, rows int, eta float64) {
	v := &l.v[i]
	k, nb := l.cfg.K, v.fm.BlockSize
	j := len(v.seeds)
	// A landmark block is B points of this batch (addLandmarks); a batch
	// that cannot make one revisits instead.
	revisit := j >= v.maxBlock || v.fm.Landmarks && addLandmarks(v.ev, v.xs, rows, v.seedBase, j) != nil
	var seed uint64
	if revisit {
		j = int(l.t % uint64(len(v.seeds)))
		seed = v.seeds[j]
	} else {
		seed = features.DeriveSeed(v.seedBase, uint64(j))
	}
	v.ev.PhiTo(v.phi, v.xs, rows, j, seed)
	clear(v.newc)
	s := eta / float64(rows)
	for r := 0; r < rows; r++ {
		hr := v.res[r*k : r*k+k]
		for f, p := range v.phi[r*nb : r*nb+nb] {
			ps := float64(p * s)
			c := v.newc[f*k : f*k+k]
			for q, h := range hr {
				c[q] += float64(ps * h)
			}
		}
	}
	if revisit {
		a := v.coef[j*nb*k : (j+1)*nb*k]
		for x, c := range v.newc {
			a[x] += c
		}
		return
	}
	v.seeds = append(v.seeds, seed)
	v.coef = append(v.coef, v.newc...)
}

func (l *TwoView) init(x, y []float64, rows, dx, dy int) error {
	if l.cfg.Dim != 0 && l.cfg.Dim != dx || l.cfg.DimY != 0 && l.cfg.DimY != dy {
		return fmt.Errorf("%w: dimensions %d and %d, configured %d and %d", ErrInput, dx, dy, l.cfg.Dim, l.cfg.DimY)
	}
	if err := l.initView(0, l.cfg.Kernel, x, rows, dx, l.cfg.BlockSize, l.cfg.MaxFeatures, l.cfg.Standardize); err != nil {
		return err
	}
	if l.cfg.Algorithm == AlgKSIR {
		if dy != 1 {
			return fmt.Errorf("%w: ksir needs a scalar target, got %d values per row", ErrInput, dy)
		}
		l.slices = quantiles(y, l.cfg.Slices)
		s := len(l.slices) + 1
		if err := l.initView(1, features.Kernel{Family: features.Linear}, nil, rows, s, s, s, false); err != nil {
			return err
		}
	} else if err := l.initView(1, l.cfg.KernelY, y, rows, dy, l.cfg.BlockSize, l.cfg.MaxFeatures, l.cfg.Standardize); err != nil {
		return err
	}
	k := l.cfg.K
	l.w, l.wUse, l.tmp = make([]float64, k*k), make([]float64, k*k), make([]float64, 2*k)
	l.pv, l.pw = make([]float64, k), make([]float64, k)
	for i := range l.pv {
		l.pv[i] = 1 / math.Sqrt(float64(k))
	}
	return nil
}

// quantiles returns s−1 thresholds at the i/s quantiles of t.
func quantiles(t []float64, s int) []float64 {
	v := slices.Clone(t)
	slices.Sort(v)
	out := make([]float64, 0, s-1)
	for i := 1; i < s; i++ {
		out = append(out, v[min(len(v)-1, i*len(v)/s)])
	}
	return out
}

func (l *TwoView) first(rows int) error {
	k := l.cfg.K
	if l.cfg.Solver == SolverCovariance && !l.v[0].fm.Landmarks {
		// Random features need no data: the covariance solver draws its
		// whole budget now, so that every sample, the first batch's
		// too, is in the statistics; the coefficients are the solve's.
		for i := range l.v {
			v := &l.v[i]
			for j := range v.maxBlock {
				v.seeds = append(v.seeds, features.DeriveSeed(v.seedBase, uint64(j)))
			}
			v.coef = v.coef[:v.maxBlock*v.fm.BlockSize*k]
			clear(v.coef)
		}
		return l.covStep(rows)
	}
	var seeds [2]uint64
	for i := range l.v {
		v := &l.v[i]
		seeds[i] = features.DeriveSeed(v.seedBase, 0)
		if v.fm.Landmarks {
			v.ev.TruncateLandmarks(0) // a first batch that failed may have left one
			if err := addLandmarks(v.ev, v.xs, rows, v.seedBase, 0); err != nil {
				return fmt.Errorf("%w: view %d: %w", ErrInput, i, err)
			}
		}
		v.ev.PhiTo(v.phi, v.xs, rows, 0, seeds[i])
	}
	ax, ay, top, err := initPair(l.v[0].phi, l.v[1].phi, rows, l.v[0].fm.BlockSize, l.v[1].fm.BlockSize, k,
		l.centered(), l.cfg.Algorithm != AlgKSVD)
	if err != nil {
		return err
	}
	l.lambda0 = top
	for i, coef := range [][]float64{ax, ay} {
		v := &l.v[i]
		v.seeds = append(v.seeds, seeds[i])
		v.coef = append(v.coef, coef...)
		v.ev.Eval(v.h, v.xs, rows, v.seeds, v.coef, k)
		for r := 0; r < rows; r++ {
			for q := 0; q < k; q++ {
				h := v.h[r*k+q]
				l.trace0 += float64(h*h) / float64(rows)
				if v.center != nil {
					v.center[q] += h / float64(rows)
				}
			}
		}
	}
	l.t++
	l.samples += uint64(rows)
	return nil
}

// EvalTo writes view i's functions at rows inputs (x for view 0; y, or the
// targets for ksir, for view 1) into dst (rows×k), minus the centre
// estimate: exactly what the snapshot's Model.ProjectView returns.
func (l *TwoView) EvalTo(i int, dst, x []float64, rows int) {
	v := &l.v[i]
	var xs []float64
	if i == 1 && l.cfg.Algorithm == AlgKSIR {
		xs = snapshot.SliceIndicators(l.slices, x)
	} else {
		xs = make([]float64, len(x))
		v.pre.Apply(xs, x)
	}
	v.ev.Eval(dst, xs, rows, v.seeds, v.coef, l.cfg.K)
	if v.center != nil {
		for r := 0; r < rows; r++ {
			for q := 0; q < l.cfg.K; q++ {
				dst[r*l.cfg.K+q] -= v.center[q]
			}
		}
	}
}

// Snapshot returns a snapshot of the current model (coefficients copied).
func (l *TwoView) Snapshot() *snapshot.Snapshot {
	views := make([]snapshot.View, 2)
	var landmarks [][]float64
	for i := range l.v {
		v := &l.v[i]
		views[i] = snapshot.View{Dim: v.fm.Dim, Kernel: v.fm.Kernel, Preprocess: v.pre, Precision: precisionOf(v.fm), Compute: computeOf(v.fm)}
		if v.center != nil {
			views[i].Center = slices.Clone(v.center)
		}
		if v.fm.Landmarks {
			views[i].Features = snapshot.FeaturesLandmarks
			landmarks = append(landmarks, v.landmarkPoints())
		}
	}
	views[1].Seeds = slices.Clone(snapshot.Seeds(l.v[1].seeds))
	views[1].BlockSize = l.v[1].fm.BlockSize
	views[1].Slices = slices.Clone(l.slices)
	// The two-view rule is written as "oja" (the paper's) or "covariance";
	// snapshots from before the covariance solver have none and restore
	// with the paper's rule.
	solver := SolverOja
	if l.cfg.Solver == SolverCovariance {
		solver = SolverCovariance
	}
	cov, state := l.cov.state()
	return &snapshot.Snapshot{
		Header: snapshot.Header{
			Model: l.cfg.Model, Algorithm: string(l.cfg.Algorithm), Generator: features.GeneratorID,
			K: l.cfg.K, BlockSize: l.v[0].fm.BlockSize, Seeds: slices.Clone(snapshot.Seeds(l.v[0].seeds)),
			Views: views, Step: l.t, SamplesSeen: l.samples, Covariance: cov,
			Schedule:    snapshot.Schedule{Theta0: l.cfg.Theta0, Theta1: l.cfg.Theta1, Scale: l.lambda0, Backoff: l.backoff, Solver: string(solver), Ridge: ridgeOf(l.cfg)},
			MaxFeatures: l.cfg.MaxFeatures, ModelSeed: l.cfg.Seed, Created: time.Now().UTC(),
			Diagnostics: snapshot.Diagnostics{Rejected: l.rejected},
			Settings: snapshot.Settings{Uncentered: l.cfg.Uncentered, Standardize: l.cfg.Standardize, Slices: l.cfg.Slices,
				Trace0: l.trace0, WNorm: l.wnorm, TraceRun: l.trRun},
		},
		Coef:      [][]float64{slices.Clone(l.v[0].coef), slices.Clone(l.v[1].coef)},
		Landmarks: landmarks,
		State:     state,
	}
}

// ridgeOf is the ridge a snapshot records: the covariance solver's only.
func ridgeOf(c Config) float64 {
	if c.Solver == SolverCovariance {
		return c.Ridge
	}
	return 0
}

// landmarkPoints returns the view's landmark points, block after block.
func (v *tvView) landmarkPoints() []float64 {
	z := make([]float64, 0, len(v.seeds)*v.fm.BlockSize*v.fm.Dim)
	for j := range v.seeds {
		_, lb := v.ev.Landmarks(j)
		z = append(z, lb.Z...)
	}
	return z
}

// RestoreTwoView returns a two-view learner that continues from snap.
// Runtime settings (Workers, CacheBytes) come from rt.
func RestoreTwoView(snap *snapshot.Snapshot, rt Config) (*TwoView, error) {
	if err := snap.Validate(); err != nil {
		return nil, err
	}
	h := &snap.Header
	alg := Algorithm(h.Algorithm)
	if !alg.TwoView() || len(h.Views) != 2 {
		return nil, fmt.Errorf("%w: %q with %d views is not a two-view model", snapshot.ErrUnsupported, h.Algorithm, len(h.Views))
	}
	vx, vy := h.Views[0], h.Views[1]
	if vx.Landmarks() != vy.Landmarks() {
		return nil, fmt.Errorf("%w: a two-view model with landmark features in one view only", snapshot.ErrUnsupported)
	}
	cfg := Config{
		Model: h.Model, Algorithm: alg, K: h.K, Dim: vx.Dim, Kernel: vx.Kernel, KernelY: vy.Kernel,
		BlockSize: h.BlockSize, MaxFeatures: h.MaxFeatures, Theta0: h.Schedule.Theta0, Theta1: h.Schedule.Theta1,
		Seed: h.ModelSeed, Uncentered: h.Settings.Uncentered, Standardize: h.Settings.Standardize,
		Slices: h.Settings.Slices, Workers: rt.Workers, CacheBytes: rt.CacheBytes,
		Solver: SolverOja, Ridge: h.Schedule.Ridge,
	}
	if Solver(h.Schedule.Solver) == SolverCovariance {
		cfg.Solver = SolverCovariance
	}
	if vx.Float32() || vy.Float32() {
		cfg.Precision = Float32
	}
	if vx.BLAS() {
		cfg.Compute = ComputeBLAS
	}
	if alg != AlgKSIR {
		cfg.DimY = vy.Dim
	}
	if vx.Landmarks() {
		cfg.Features = FeaturesLandmarks
	}
	l, err := NewTwoView(cfg)
	if err != nil {
		return nil, err
	}
	k := h.K
	yBlock := vy.BlockSize
	if err := l.initView(0, vx.Kernel, nil, 0, vx.Dim, h.BlockSize, h.MaxFeatures, false); err != nil {
		return nil, err
	}
	if err := l.initView(1, vy.Kernel, nil, 0, vy.Dim, yBlock, h.MaxFeatures, false); err != nil {
		return nil, err
	}
	l.v[0].pre, l.v[1].pre = vx.Preprocess, vy.Preprocess
	l.slices = slices.Clone(vy.Slices)
	l.w, l.wUse, l.tmp = make([]float64, k*k), make([]float64, k*k), make([]float64, 2*k)
	l.pv, l.pw = make([]float64, k), make([]float64, k)
	for i := range l.pv {
		l.pv[i] = 1 / math.Sqrt(float64(k))
	}
	l.wnorm, l.trRun = h.Settings.WNorm, h.Settings.TraceRun
	for i, v := range []snapshot.View{vx, vy} {
		seeds, _ := h.ViewSeeds(i)
		l.v[i].seeds = append(l.v[i].seeds, seeds...)
		l.v[i].coef = append(l.v[i].coef, snap.Coef[i]...)
		if v.Landmarks() {
			n := h.BlockSize * v.Dim
			if i == 1 {
				n = yBlock * v.Dim
			}
			z := snap.Landmarks[i]
			for j := range seeds {
				lb, err := l.v[i].fm.NewLandmarks(z[j*n : (j+1)*n])
				if err != nil {
					l.Close()
					return nil, fmt.Errorf("%w: view %d landmark block %d: %w", snapshot.ErrHeader, i, j, err)
				}
				l.v[i].ev.AddLandmarks(lb)
			}
		}
		if l.v[i].center != nil && len(v.Center) == k {
			copy(l.v[i].center, v.Center)
		}
	}
	if h.Covariance != nil {
		if cfg.Solver != SolverCovariance {
			l.Close()
			return nil, fmt.Errorf("%w: covariance state in a model whose solver is %q", snapshot.ErrHeader, h.Schedule.Solver)
		}
		c, err := restoreCovariance(h.Covariance, snap.State, len(l.v[0].coef)/k, len(l.v[1].coef)/k, k, l.cfg.Ridge, l.cfg.Seed, l.cfg.Workers)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.cov = c
	}
	l.t, l.samples, l.rejected = h.Step, h.SamplesSeen, h.Diagnostics.Rejected
	l.lambda0, l.backoff, l.trace0 = h.Schedule.Scale, h.Schedule.Backoff, h.Settings.Trace0
	if l.backoff == 0 {
		l.backoff = 1
	}
	return l, nil
}

// symNorm returns the spectral norm (largest |eigenvalue|; for a PSD matrix
// its largest eigenvalue) of the symmetric k×k matrix m by 30 power
// iterations warm-started from v (updated in place; w is scratch).
func symNorm(m, v, w []float64, k int) float64 {
	var lam float64
	for it := 0; it < 30; it++ {
		var n float64
		for a := 0; a < k; a++ {
			var s float64
			for b := 0; b < k; b++ {
				s += m[a*k+b] * v[b]
			}
			w[a] = s
			n += s * s
		}
		n = math.Sqrt(n)
		if !(n > 0) {
			return 0
		}
		lam = n
		for a := range v {
			v[a] = w[a] / n
		}
	}
	return lam
}

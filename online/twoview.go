package online

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/streamkpca/streamkpca/features"
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
	v   [2]view
	progress

	lambda0 float64
	trace0  float64
	slices  []float64

	cov *covariance // the covariance solver's statistics (Config.Solver SolverCovariance), once the budget is full

	mon monitor // the held-out score and the change detector (Assess)
	mom moments
	fol pairFollower // the challenger (Forget follow; followpair.go)
	// ridgeAuto: the covariance solver chooses its ridge on held-out
	// pairs (Config.Ridge 0; see ridge.go).
	ridgeAuto bool
	reset     bool // Forget: restart the model with the next batch

	wnorm        float64 // ‖W‖₂ of the current batch (0 before the first update)
	trRun        float64 // exponential average of the functions' variance
	w, wUse, tmp []float64
	pv, pw       []float64
	// per view: the batch-centred functions, the residual that multiplies
	// the new features, the batch mean
	hc, res, mean [2][]float64
}

// Two-view step defaults (see NewTwoView).
const (
	DefaultTwoViewTheta0 = 1.0
	DefaultTwoViewTheta1 = 1e-3
)

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
	return &TwoView{cfg: cfg, progress: progress{backoff: 1}, ridgeAuto: cfg.Solver == SolverCovariance && cfg.Ridge == 0}, nil
}

// Config returns the configuration with defaults.
func (l *TwoView) Config() Config { return l.cfg }

// Close releases the evaluators' workers.
func (l *TwoView) Close() {
	l.dropChallenger()
	for i := range l.v {
		l.v[i].close()
	}
	if l.cov != nil {
		l.cov.ws.Close()
	}
}

// Features returns the current number of features of view x.
func (l *TwoView) Features() int { return l.v[0].features() }

// HoldGrowth stops or resumes adding feature blocks to both views, as
// KPCA.HoldGrowth.
func (l *TwoView) HoldGrowth(hold bool) { l.v[0].hold, l.v[1].hold = hold, hold }

// Generated returns the blocks of both views, as KPCA.Generated.
func (l *TwoView) Generated() []features.Generated {
	return []features.Generated{l.v[0].generated(), l.v[1].generated()}
}

// Dims returns the input dimensions of x and y (y: 1 for ksir's target).
func (l *TwoView) Dims() (int, int) {
	if l.alg().targetY {
		return l.v[0].fm.Dim, 1
	}
	return l.v[0].fm.Dim, l.v[1].fm.Dim
}

func (l *TwoView) centered() bool { return !l.cfg.Uncentered }

// alg is the learner's algorithm's description.
func (l *TwoView) alg() algorithm { return l.cfg.Algorithm.spec() }

// StepSize returns η for the next batch.
func (l *TwoView) StepSize() float64 {
	u := math.Min(decay(l.cfg, l.age()), MaxUnitStep)
	s := l.lambda0
	// The update multiplies by I − ηW (KSVD) or subtracts η·C·G·W (KCCA,
	// KSIR); once the functions grow, ‖W‖ grows and a fixed η would flip
	// and amplify them. Bound η·‖W‖ on every batch: in normal operation
	// (‖W‖ ≤ 2λ̂ for KSVD, ≈ 2ρ ≤ 2 for KCCA) the step is unchanged.
	if !l.alg().correlated {
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
	return l.setupView(i, viewSpec{kernel: kern, dim: d, block: nb, maxFeatures: maxF, standardize: standardize}, x, rows)
}

// setupView sets view i up from s, with the view's index, precision and
// centring as the learner has them.
func (l *TwoView) setupView(i int, s viewSpec, x []float64, rows int) error {
	s.index, s.float32, s.center = i, l.cfg.Precision == Float32 && s.kernel.Family.ShiftInvariant(), l.centered()
	return l.v[i].setup(l.cfg, s, x, rows)
}

// drawnBy returns the learner.frequencies setting that draws both
// stored views as they were drawn (auto first: it decides per view), for
// what the restored learner makes anew (a challenger); each restored view
// keeps its own (storedFrequencies) whatever this returns.
func drawnBy(c Config, vs ...snapshot.View) Frequencies {
	for _, f := range []Frequencies{FrequenciesAuto, FrequenciesOrthogonal, FrequenciesIID} {
		c.Frequencies = f
		all := true
		for _, v := range vs {
			f32 := c.Precision == Float32 && v.Kernel.Family.ShiftInvariant()
			all = all && c.structured(v.Kernel, v.Dim, f32) == v.Structured()
		}
		if all {
			return f
		}
	}
	return storedFrequencies(vs[0])
}

// storedFrequencies is the frequencies a stored view was drawn with.
func storedFrequencies(v snapshot.View) Frequencies {
	if v.Structured() {
		return FrequenciesOrthogonal
	}
	return FrequenciesIID
}

// scratch sizes the batch buffers of both views for rows pairs.
func (l *TwoView) scratch(rows int) {
	k := l.cfg.K
	for i := range l.v {
		l.v[i].scratch(rows, k)
		if cap(l.hc[i]) < rows*k {
			l.hc[i], l.res[i] = make([]float64, rows*k), make([]float64, rows*k)
		}
		l.hc[i], l.res[i] = l.hc[i][:rows*k], l.res[i][:rows*k]
		if l.mean[i] == nil {
			l.mean[i] = make([]float64, k)
		}
	}
}

// inputs writes view i's feature-space inputs for the batch into v.xs.
func (l *TwoView) inputs(i int, x []float64) {
	v := &l.v[i]
	if i == 1 && l.alg().targetY {
		copy(v.xs, snapshot.SliceIndicators(l.slices, x))
		return
	}
	v.pre.Apply(v.xs, x)
}

// Update learns from one mini-batch of rows pairs: x (rows×d_x) and y
// (rows×d_y; for ksir the rows targets). Errors as for KPCA.Update.
func (l *TwoView) Update(x, y []float64, rows int) error {
	if err := l.update(x, y, rows); err != nil {
		return err
	}
	l.challengerStep(x, y, rows)
	return nil
}

// update is Update for the model alone.
func (l *TwoView) update(x, y []float64, rows int) error {
	dx, dy, err := l.checkBatch(x, y, rows)
	if err != nil {
		return err
	}
	if l.v[0].ev == nil {
		if err := l.init(x, y, rows, dx, dy); err != nil {
			return err
		}
	}
	if err := l.checkDomain(x, y, dx, dy); err != nil {
		return err
	}
	l.scratch(rows)
	l.inputs(0, x)
	l.inputs(1, y)
	if l.reset {
		l.restartModel()
	}
	if len(l.v[0].seeds) == 0 {
		return l.first(rows)
	}
	if l.cfg.Solver == SolverCovariance && l.budgetFull() {
		return l.covStep(rows)
	}
	return l.ojaStep(rows)
}

// checkBatch checks a batch's shape and values and returns the views'
// dimensions.
func (l *TwoView) checkBatch(x, y []float64, rows int) (dx, dy int, err error) {
	if rows < 1 || len(x)%rows != 0 || len(y)%rows != 0 || len(x) == 0 || len(y) == 0 {
		return 0, 0, fmt.Errorf("%w: %d x values and %d y values for %d rows", ErrInput, len(x), len(y), rows)
	}
	if err := checkValues(x, "x "); err != nil {
		return 0, 0, err
	}
	if err := checkValues(y, "y "); err != nil {
		return 0, 0, err
	}
	if l.cfg.Features == FeaturesLandmarks && len(l.v[0].seeds) == 0 && rows < l.cfg.BlockSize {
		// Not an error in the data: the first landmark blocks need B pairs.
		return 0, 0, fmt.Errorf("%w: the first landmark blocks need %d pairs, the batch has %d (send more, or lower the block size)", ErrInput, l.cfg.BlockSize, rows)
	}
	return len(x) / rows, len(y) / rows, nil
}

// ojaStep is the paper's rule on a batch whose inputs are in place
// (Alg. 3 for ksvd, Alg. 4 for kcca, and ksir (Sec. 5.4) as kcca): the
// functions evaluated and centred, the divergence guard,
// W = (ŨᵀṼ + ṼᵀŨ)/b, the residuals that multiply the new block, ksvd's
// shrinking, the new block's terms and the centres' running means.
func (l *TwoView) ojaStep(rows int) error {
	tr := l.evalCentred(rows)
	if math.IsNaN(tr) || math.IsInf(tr, 0) || tr > 100*math.Max(l.trace0, l.trRun) {
		l.refused(rows, true)
		return fmt.Errorf("%w: step %d, step size now %.3g", ErrDiverged, l.t, l.StepSize())
	}
	l.crossMoment(rows)
	if l.trRun == 0 {
		l.trRun = tr
	}
	l.trRun += 0.05 * (tr - l.trRun)
	eta := l.StepSize()
	l.residuals(rows, eta)
	k := l.cfg.K
	for i := range l.v {
		// The new-block term, added as a new block of view i or to the
		// block revisited in turn once the view's budget is reached.
		v := &l.v[i]
		j, seed, revisit := v.next(l.age(), rows)
		v.blockTerm(rows, k, j, seed, eta/float64(rows), l.res[i])
		v.commit(k, j, seed, revisit)
	}
	rho := math.Max(1/float64(l.age()+1), 0.01)
	for i := range l.v {
		if c := l.v[i].center; c != nil {
			for q := range c {
				c[q] += rho * (l.mean[i][q] - c[q])
			}
		}
	}
	l.learned(rows)
	return nil
}

// evalCentred evaluates both views' functions on the batch into v.h,
// their batch means into l.mean and the centred values (when centring)
// into l.hc, and returns the centred values' summed variance.
func (l *TwoView) evalCentred(rows int) float64 {
	k := l.cfg.K
	var tr float64
	for i := range l.v {
		v, hc, mean := &l.v[i], l.hc[i], l.mean[i]
		v.ev.Eval(v.h, v.xs, rows, v.seeds, v.coef, k)
		copy(hc, v.h)
		clear(mean)
		for r := 0; r < rows; r++ {
			for q := 0; q < k; q++ {
				mean[q] += v.h[r*k+q] / float64(rows)
			}
		}
		if l.centered() {
			for r := 0; r < rows; r++ {
				for q := 0; q < k; q++ {
					hc[r*k+q] -= mean[q]
				}
			}
		}
		for _, h := range hc {
			tr += float64(h*h) / float64(rows)
		}
	}
	return tr
}

// crossMoment sets W = (ŨᵀṼ + ṼᵀŨ)/b and its norm.
func (l *TwoView) crossMoment(rows int) {
	k := l.cfg.K
	u, vv := l.hc[0], l.hc[1]
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
}

// residuals sets the residuals that multiply each view's new features
// (kcca, ksir: the other view's values − its own·W; ksvd: the other
// view's values) and, for ksvd, shrinks the coefficients: α ← α(I − ηW).
func (l *TwoView) residuals(rows int, eta float64) {
	k := l.cfg.K
	for i := range l.v {
		other, me, res := l.hc[1-i], l.hc[i], l.res[i]
		copy(res, other)
		if l.alg().correlated {
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
	if !l.alg().correlated {
		for i := range l.w {
			l.wUse[i] = float64(eta * l.w[i])
		}
		for i := range l.v {
			shrink(l.v[i].coef, l.wUse, l.tmp, k)
		}
	}
}

// checkDomain reports an error for pairs of the wrong dimensions (dx, dy
// per row) or outside the kernels' domains, once the model has its
// dimensions.
func (l *TwoView) checkDomain(x, y []float64, dx, dy int) error {
	if wx, wy := l.Dims(); dx != wx || dy != wy {
		return fmt.Errorf("%w: dimensions %d and %d, model has %d and %d", ErrInput, dx, dy, wx, wy)
	}
	if err := l.v[0].fm.Kernel.CheckInput(x); err != nil {
		return fmt.Errorf("%w: x: %w", ErrInput, err)
	}
	if !l.alg().targetY {
		if err := l.v[1].fm.Kernel.CheckInput(y); err != nil {
			return fmt.Errorf("%w: y: %w", ErrInput, err)
		}
	}
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
		l.cov = newCovariance(len(l.v[0].coef)/k, len(l.v[1].coef)/k, k, l.ridgeStart(), l.cfg.Seed, l.cfg.Workers)
		if l.ridgeAuto {
			l.cov.search = newRidgeSearch(l.cov.m[0], l.cov.m[1])
		}
		l.addLandmarkPairs(l.cov)
	}
	c := l.cov
	for i := range l.v {
		v := &l.v[i]
		if err := c.gatherFeatures(i, v.phi, v.ev, v.xs, rows, v.seeds); err != nil {
			l.refused(rows, false)
			return fmt.Errorf("%w: step %d: view %d: %w", ErrDiverged, l.t, i, err)
		}
	}
	if c.search != nil {
		c.search.offer(c.phi, rows, c.m[0], c.m[1])
	}
	c.add(rows)
	l.learned(rows)
	if !c.due() {
		return nil
	}
	if c.search != nil && c.search.due(c.n) {
		c.chooseRidge(k, l.centered())
	}
	// Two iterations, the first solve's too: it starts from a random
	// basis but on one batch's statistics, and the solves of the next
	// steps go on from it (eight for the first cost 10 s of a 4,096-feature
	// first pass over MNIST halves and changed nothing after it).
	if err := c.solve(l.v[0].coef, l.v[1].coef, k, 2, l.centered()); err != nil {
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

// addLandmarkPairs adds the pairs of the landmark blocks to new
// statistics c, as KPCA.covStep does for one view: the batches that built
// the blocks were learned by the paper's rule before the budget filled,
// and block j of both views holds the same pairs (view.shuffleKey), so
// after one pass every pair is in the statistics once. A block whose
// features would overflow the sums stays out, as does everything when the
// views' block counts differ (a batch that made a block in one view only).
func (l *TwoView) addLandmarkPairs(c *covariance) {
	vx, vy := &l.v[0], &l.v[1]
	if !vx.fm.Landmarks || !vy.fm.Landmarks || len(vx.seeds) != len(vy.seeds) {
		return
	}
	nb := l.cfg.BlockSize
	one := make([]float64, nb*nb) // one block's features at one block's points
	for j := range vx.seeds {
		_, zx := vx.ev.Landmarks(j)
		_, zy := vy.ev.Landmarks(j)
		if c.gatherFeatures(0, one, vx.ev, zx.Z, nb, vx.seeds) != nil ||
			c.gatherFeatures(1, one, vy.ev, zy.Z, nb, vy.seeds) != nil {
			continue
		}
		c.add(nb)
	}
}

func (l *TwoView) init(x, y []float64, rows, dx, dy int) error {
	if l.cfg.Dim != 0 && l.cfg.Dim != dx || l.cfg.DimY != 0 && l.cfg.DimY != dy {
		return fmt.Errorf("%w: dimensions %d and %d, configured %d and %d", ErrInput, dx, dy, l.cfg.Dim, l.cfg.DimY)
	}
	if err := l.initView(0, l.cfg.Kernel, x, rows, dx, l.cfg.BlockSize, l.cfg.MaxFeatures, l.cfg.Standardize); err != nil {
		return err
	}
	if l.alg().targetY {
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
	l.pv, l.pw = unitVector(k), make([]float64, k)
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
			l.v[i].drawBudget(k)
		}
		return l.covStep(rows)
	}
	var seeds [2]uint64
	for i := range l.v {
		var err error
		if seeds[i], err = l.v[i].firstBlock(rows); err != nil {
			return fmt.Errorf("%w: view %d: %w", ErrInput, i, err)
		}
	}
	ax, ay, top, err := initPair(l.v[0].phi, l.v[1].phi, rows, l.v[0].fm.BlockSize, l.v[1].fm.BlockSize, k,
		l.centered(), l.alg().correlated)
	if err != nil {
		return err
	}
	l.lambda0 = top
	for i, coef := range [][]float64{ax, ay} {
		v := &l.v[i]
		copy(v.newc, coef)
		v.commit(k, 0, seeds[i], false)
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
	l.learned(rows)
	return nil
}

// EvalTo writes view i's functions at rows inputs (x for view 0; y, or the
// targets for ksir, for view 1) into dst (rows×k), minus the centre
// estimate: exactly what the snapshot's Model.ProjectView returns.
func (l *TwoView) EvalTo(i int, dst, x []float64, rows int) {
	v := &l.v[i]
	var xs []float64
	if i == 1 && l.alg().targetY {
		xs = snapshot.SliceIndicators(l.slices, x)
	} else {
		xs = make([]float64, len(x))
		v.pre.Apply(xs, x)
	}
	v.evalCentred(dst, xs, rows, l.cfg.K)
}

// Snapshot returns a snapshot of the current model (coefficients copied).
func (l *TwoView) Snapshot() *snapshot.Snapshot {
	views := make([]snapshot.View, 2)
	var landmarks [][]float64
	for i := range l.v {
		var z []float64
		views[i], z = l.v[i].snapshotView()
		if z != nil {
			landmarks = append(landmarks, z)
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
	chState, chValues := l.challengerState()
	if chState != nil {
		state = append(state[:len(state):len(state)], chValues...)
	}
	snap := &snapshot.Snapshot{
		Header: snapshot.Header{
			Generator: snapshot.GeneratorOf(views...), Seeds: slices.Clone(snapshot.Seeds(l.v[0].seeds)),
			Views: views, Step: l.t, SamplesSeen: l.samples, Covariance: cov, Detector: l.mon.state(),
			Schedule:    snapshot.Schedule{Scale: l.lambda0, Backoff: l.backoff, Solver: string(solver), Ridge: l.ridgeNow(), RidgeAuto: l.ridgeAuto, Restart: l.restart},
			Created:     time.Now().UTC(),
			Diagnostics: snapshot.Diagnostics{Rejected: l.rejected, Changes: l.changes, Switches: l.switches, Quality: l.mon.quality()},
			Challenger:  chState,
			Settings:    snapshot.Settings{Trace0: l.trace0, WNorm: l.wnorm, TraceRun: l.trRun},
		},
		Coef:      [][]float64{slices.Clone(l.v[0].coef), slices.Clone(l.v[1].coef)},
		Landmarks: landmarks,
		State:     state,
	}
	l.cfg.toHeader(&snap.Header, true)
	snap.Header.BlockSize = l.v[0].fm.BlockSize // the first view's blocks (0 before the first batch)
	return snap
}

// ridgeNow is the ridge a snapshot records (0 for the other rules).
func (l *TwoView) ridgeNow() float64 {
	r, _ := l.Ridge()
	return r
}

// ridgeStart is the ridge the covariance solver starts from: the
// configured one, or DefaultRidge when it is chosen on held-out pairs.
func (l *TwoView) ridgeStart() float64 {
	if l.cfg.Ridge > 0 {
		return l.cfg.Ridge
	}
	return DefaultRidge
}

// Ridge returns the covariance solver's ridge now (chosen on held-out
// pairs unless configured) and whether it is chosen; 0, false for the
// other rules.
func (l *TwoView) Ridge() (float64, bool) {
	if l.cfg.Solver != SolverCovariance {
		return 0, false
	}
	if l.cov != nil {
		return l.cov.ridge, l.ridgeAuto
	}
	return l.ridgeStart(), l.ridgeAuto
}

// RestoreTwoView returns a two-view learner that continues from snap.
// Runtime and group settings (Config's `setting` tags) come from rt.
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
	cfg := Config{Dim: vx.Dim, Kernel: vx.Kernel, KernelY: vy.Kernel, Solver: SolverOja, Ridge: h.Schedule.Ridge}
	cfg.fromHeader(h)
	cfg.takeRuntime(rt)
	if Solver(h.Schedule.Solver) == SolverCovariance {
		cfg.Solver = SolverCovariance
	}
	restoredConfig(&cfg, vx)
	if vy.Float32() {
		cfg.Precision = Float32
	}
	cfg.Frequencies = drawnBy(cfg, vx, vy)
	if !alg.TargetY() { // a sliced target's view is its indicators, not the input's dimension
		cfg.DimY = vy.Dim
	}
	l, err := NewTwoView(cfg)
	if err != nil {
		return nil, err
	}
	// A chosen ridge goes on being chosen, from the latest choice.
	l.ridgeAuto = cfg.Solver == SolverCovariance && (h.Schedule.RidgeAuto || cfg.Ridge == 0)
	k := h.K
	yBlock := vy.BlockSize
	// Each view as stored: one configuration's frequencies may draw the
	// two views differently (auto by each view's dimension).
	if err := l.setupView(0, viewSpec{kernel: vx.Kernel, dim: vx.Dim, block: h.BlockSize, maxFeatures: h.MaxFeatures, frequencies: storedFrequencies(vx)}, nil, 0); err != nil {
		return nil, err
	}
	if err := l.setupView(1, viewSpec{kernel: vy.Kernel, dim: vy.Dim, block: yBlock, maxFeatures: h.MaxFeatures, frequencies: storedFrequencies(vy)}, nil, 0); err != nil {
		return nil, err
	}
	l.slices = slices.Clone(vy.Slices)
	l.w, l.wUse, l.tmp = make([]float64, k*k), make([]float64, k*k), make([]float64, 2*k)
	l.pv, l.pw = unitVector(k), make([]float64, k)
	l.wnorm, l.trRun = h.Settings.WNorm, h.Settings.TraceRun
	for i, v := range []snapshot.View{vx, vy} {
		seeds, _ := h.ViewSeeds(i)
		var z []float64
		if v.Landmarks() {
			z = snap.Landmarks[i]
		}
		if err := l.v[i].restore(v, seeds, snap.Coef[i], z, k); err != nil {
			l.Close()
			return nil, fmt.Errorf("view %d: %w", i, err)
		}
	}
	own, window, chSnap := snap.SplitState()
	if h.Covariance != nil {
		if err := l.restoreStatistics(h, own); err != nil {
			l.Close()
			return nil, err
		}
	}
	l.resume(h)
	l.mon.resume(h.Diagnostics.Quality)
	l.mon.resumeDetector(h.Detector)
	l.lambda0, l.trace0 = h.Schedule.Scale, h.Settings.Trace0
	if chSnap != nil && l.following() {
		if err := l.restoreChallenger(h.Challenger, window, chSnap); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// restoreStatistics continues the covariance solver from the snapshot's
// statistics (own: its part of the learner state).
func (l *TwoView) restoreStatistics(h *snapshot.Header, own []float64) error {
	if l.cfg.Solver != SolverCovariance {
		return fmt.Errorf("%w: covariance state in a model whose solver is %q", snapshot.ErrHeader, h.Schedule.Solver)
	}
	// The statistics fix the features: a model that holds fewer than its
	// budget (after a switch to a challenger) keeps them.
	for i := range l.v {
		l.v[i].maxBlock = len(l.v[i].seeds)
	}
	k := h.K
	c, err := restoreCovariance(h.Covariance, own, len(l.v[0].coef)/k, len(l.v[1].coef)/k, k, l.ridgeStart(), l.cfg.Seed, l.cfg.Workers)
	if err != nil {
		return err
	}
	if l.ridgeAuto {
		c.search = newRidgeSearch(c.m[0], c.m[1])
	}
	l.cov = c
	return nil
}

// unitVector returns the k-vector with every entry 1/√k: the start of
// symNorm's power iteration.
func unitVector(k int) []float64 {
	v := make([]float64, k)
	for i := range v {
		v[i] = 1 / math.Sqrt(float64(k))
	}
	return v
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

package online

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Errors returned by Update.
var (
	// ErrDiverged: the batch was rejected by the divergence guard; the model
	// is unchanged and the step size has been halved.
	ErrDiverged = errors.New("online: batch rejected by divergence guard")
	// ErrInput: the batch holds non-finite values or has the wrong shape.
	ErrInput = errors.New("online: invalid batch")
)

// KPCA learns the top-k kernel principal components (or, with AlgGHA, the
// ordered eigenfunctions) of a stream. It is not safe for concurrent use.
type KPCA struct {
	cfg Config
	// The blocks and their coefficients (coef, blocks·B rows × k), the
	// preprocessing and the centre estimate (an exponential average of h̄).
	view
	progress
	sub *subspace   // subspace-solver state (also the covariance solver's until its budget is full); nil for SolverOja
	cov *covariance // the covariance solver's statistics (one view), once the budget is full

	lambda0 float64   // top eigenvalue of the initial block
	mrun    []float64 // exponential average of M

	mon monitor  // the held-out score and the change detector (Assess)
	fol follower // the challenger (Forget follow)
	// batchHook sees each subspace step's features (SetBatchHook).
	batchHook func(rows int, seeds []uint64, kept func(j int) []float64)
	// quickInit: the first block's top-k directions by subspace
	// iteration (initBlockTopK), not a full eigendecomposition: a
	// challenger's, started every followLife steps.
	quickInit bool
	// raisedAt is the step of the last RaiseBudget that raised it: the
	// detector waits monitorArmAge steps after it (see RaiseBudget).
	raisedAt uint64
	qual     assessScratch
	scoef    []float64 // assessed: the served columns of an oversampled model
	reset    bool      // Forget: restart the model with the next batch
	// lazy: the covariance solver adds each batch to its statistics and
	// solves only when solveCov is called, not every step. Fit sets it:
	// nothing reads the model between its batches, and the solve after
	// the last one is the only one it serves.
	lazy bool

	// scratch
	m, mUse, tmp, hbar, pv, pw []float64
	parRows                    int // rows of the batch Moments evaluated, until Partial
}

// New returns a learner; its feature map is fixed on the first Update.
func New(cfg Config) (*KPCA, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if cfg.Algorithm.TwoView() {
		return nil, fmt.Errorf("%w: %s learns from (x, y) pairs: use NewTwoView", ErrConfig, cfg.Algorithm)
	}
	cfg.MaxFeatures -= cfg.MaxFeatures % cfg.BlockSize
	cfg.Oversample = max(cfg.Oversample, 0)
	cfg.K += cfg.Oversample // the learner's columns; the first K − Oversample served
	return &KPCA{cfg: cfg, progress: progress{backoff: 1}}, nil
}

// servedK is the components l serves: its first, K less the columns it
// learns beyond them (Config.Oversample).
func (l *KPCA) servedK() int { return l.cfg.K - l.cfg.Oversample }

// userConfig is l's configuration as New takes it: K the components
// served, Oversample the columns beyond them (negative: none, so that
// New does not choose its default).
func (l *KPCA) userConfig() Config {
	c := l.cfg
	c.K -= c.Oversample
	if c.Oversample == 0 {
		c.Oversample = -1
	}
	return c
}

// ridgeOfSolver is the ridge a snapshot records: the covariance solver's,
// 0 for the others (which have none).
func (l *KPCA) ridgeOfSolver() float64 {
	if l.cfg.Solver == SolverCovariance {
		return l.cfg.Ridge
	}
	return 0
}

// Config returns the configuration with defaults filled in, as New takes
// it: K the components served, Oversample the columns learned beyond
// them (negative: none), so that New(l.Config()) makes a learner of
// l's settings. The learner's columns are K + max(Oversample, 0).
func (l *KPCA) Config() Config { return l.userConfig() }

// Columns is the components l learns: the K it serves and the
// Oversample beyond them (Config).
func (l *KPCA) Columns() int { return l.cfg.K }

// Close releases the evaluator's workers.
func (l *KPCA) Close() {
	l.dropChallenger()
	l.view.close()
	if l.cov != nil {
		l.cov.ws.Close()
	}
}

// Features returns the current number of features.
func (l *KPCA) Features() int { return l.view.features() }

// HoldGrowth stops (hold true) or resumes adding feature blocks: while
// held, every step revisits the existing blocks in turn, as past
// MaxFeatures, so a step's cost stops growing. The service holds growth
// while it cannot keep up with its stream.
func (l *KPCA) HoldGrowth(hold bool) { l.view.hold = hold }

// RaiseBudget raises the feature budget (Config.MaxFeatures, written
// into snapshots) to n features, rounded down to whole blocks, and returns
// the budget: the service raises it while its stream leaves the machine
// idle (learner.budget: stream), so that a slow stream buys accuracy with
// the time it leaves. New blocks then join one a step, as before the
// budget first filled. Only the subspace and oja solvers with random
// features grow (the covariance solver keeps m² statistics, landmark
// blocks are rows of data); for the others, before the first batch, or
// for a lower figure, the budget stays as it is. While blocks join, and
// for monitorArmAge steps after the last raise, the change detector is
// disarmed, as before the budget first filled (see Assess), and its
// reference is estimated again: the held-out score of a model with more
// features settles lower (it is the share of a larger feature space's
// variance), and on a stationary 16-D stream at 2,000 messages/s a
// detector that kept the smaller model's reference restarted the model
// once in 150 s, in each of three runs.
func (l *KPCA) RaiseBudget(n int) int {
	if !l.Grows() {
		return l.cfg.MaxFeatures
	}
	if b := n / l.fm.BlockSize; b > l.maxBlock {
		l.maxBlock = b
		l.cfg.MaxFeatures = b * l.fm.BlockSize
		l.raisedAt = l.t
		l.mon.restart() // the score of a larger model settles elsewhere: a new reference
		if l.sub != nil {
			l.sub.reserve(l.cfg.MaxFeatures)
		}
	}
	return l.cfg.MaxFeatures
}

// Grows reports whether RaiseBudget can raise the budget: after the
// first batch, for the subspace and oja solvers with random features of
// a kernel that is not linear.
func (l *KPCA) Grows() bool {
	return l.t > 0 && l.cfg.Solver != SolverCovariance && !l.fm.Landmarks && !l.fm.Kernel.Family.Identity()
}

// MaxFeatures returns the feature budget (see RaiseBudget).
func (l *KPCA) MaxFeatures() int { return l.cfg.MaxFeatures }

// Generated returns the blocks the learner has generated, for a
// snapshot.Model of its snapshots to share (snapshot.ModelOptions.Shared)
// instead of generating them again: a service serving what it learns
// then holds each block once. Call it between steps.
func (l *KPCA) Generated() []features.Generated {
	return []features.Generated{l.view.generated()}
}

// Dim returns the input dimension, 0 before the first batch.
func (l *KPCA) Dim() int { return l.fm.Dim }

// CheckInput reports whether one vector is in the kernel's domain (the
// semigroup kernels need x ≥ 0); the pipeline uses it to dead-letter a
// message instead of refusing a whole batch.
func (l *KPCA) CheckInput(x []float64) error { return l.cfg.Kernel.CheckInput(x) }

// Kernel returns the kernel (bandwidth fixed after the first batch).
func (l *KPCA) Kernel() features.Kernel { return l.fm.Kernel }

// MaxUnitStep caps η·λ̂: the update α(I − ηM) amplifies the top direction
// once η·λ_max exceeds 1 (its factor 1 − ηλ turns negative and, past 2,
// grows), so a larger Theta0 only runs at this cap until the schedule
// brings it below.
const MaxUnitStep = 1.0

// StepSize returns η for the next batch.
func (l *KPCA) StepSize() float64 {
	if l.sub != nil {
		return l.subspaceStep(l.sub.eig)
	}
	u := math.Min(decay(l.cfg, l.age()), MaxUnitStep)
	return u * l.backoff / l.scale()
}

// subspaceStep is the subspace solver's η = θ_t/(n·λ̂_k) for eigenvalue
// estimates eig, uncapped: the basis is orthonormalised every step. λ̂_k
// is floored at 1e-4·λ̂_1 so that a rank-deficient stream (λ̂_k ≈ 0) does
// not make the step a pure power step.
func (l *KPCA) subspaceStep(eig []float64) float64 {
	lk := math.Max(eig[l.cfg.K-1], 1e-4*eig[0])
	if !(lk > 0) {
		lk = 1
	}
	return decay(l.cfg, l.age()) * l.backoff / (lk * float64(max(len(l.seeds), 1)))
}

func (l *KPCA) scale() float64 {
	s := l.lambda0
	if len(l.mrun) > 0 {
		s = math.Max(s, l.powerMax(l.mrun))
	}
	if !(s > 0) {
		s = 1
	}
	return s
}

// init fixes dimension, bandwidth, standardisation and scratch from the
// first batch.
func (l *KPCA) init(x []float64, rows, d int) error {
	if l.cfg.Dim != 0 && l.cfg.Dim != d {
		return fmt.Errorf("%w: dimension %d, configured %d", ErrInput, d, l.cfg.Dim)
	}
	k := l.cfg.K
	err := l.view.setup(l.cfg, viewSpec{kernel: l.cfg.Kernel, dim: d, block: l.cfg.BlockSize, maxFeatures: l.cfg.MaxFeatures,
		standardize: l.cfg.Standardize, float32: l.cfg.Precision == Float32, keepBlocks: true, center: l.cfg.Center}, x, rows)
	if err != nil {
		return err
	}
	// The linear map is one block of d features, revisited every step.
	l.cfg.BlockSize, l.cfg.MaxFeatures = l.fm.BlockSize, l.maxBlock*l.fm.BlockSize
	l.m = make([]float64, k*k)
	l.mUse = make([]float64, k*k)
	l.mrun = make([]float64, k*k)
	l.tmp = make([]float64, 2*k)
	l.hbar = make([]float64, k)
	l.pv, l.pw = unitVector(k), make([]float64, k)
	if l.cfg.Solver == SolverSubspace || l.cfg.Solver == SolverCovariance {
		window := 0.0
		if l.cfg.Solver == SolverSubspace {
			window = max(l.cfg.Average, 0)
		}
		l.sub = newSubspace(k, l.cfg.MaxFeatures, l.cfg.BlockSize, l.cfg.Center, window)
	}
	return nil
}

// Update learns from one mini-batch x of rows points (rows×d, row-major).
// It returns ErrInput (model unchanged) for non-finite values or a wrong
// dimension, and ErrDiverged when the guard rejects the batch.
func (l *KPCA) Update(x []float64, rows int) error {
	if err := l.update(x, rows); err != nil {
		return err
	}
	l.challengerStep(x, rows)
	return nil
}

// update is Update for the model alone.
func (l *KPCA) update(x []float64, rows int) error {
	if err := l.checkBatch(x, rows); err != nil {
		return err
	}
	if l.cfg.Features == FeaturesLandmarks && len(l.seeds) == 0 && rows < l.cfg.BlockSize {
		// Not an error in the data: the first landmark block needs B points.
		return fmt.Errorf("%w: the first landmark block needs %d points, the batch has %d (send more, or lower the block size)", ErrInput, l.cfg.BlockSize, rows)
	}
	if l.ev == nil {
		if err := l.init(x, rows, len(x)/rows); err != nil {
			return err
		}
	}
	l.view.scratch(rows, l.cfg.K)
	l.pre.Apply(l.xs, x)
	if l.reset {
		l.restartModel()
	}
	if l.lazy && l.fm.Landmarks && l.cfg.Solver == SolverCovariance && l.Features() < l.cfg.MaxFeatures {
		return l.join(rows)
	}
	if len(l.seeds) == 0 {
		return l.first(rows)
	}
	if l.cfg.Solver == SolverCovariance && l.Features() >= l.cfg.MaxFeatures {
		return l.covStep(rows)
	}
	if l.sub != nil {
		return l.updateSubspace(rows)
	}
	k := l.cfg.K
	l.ev.Eval(l.h, l.xs, rows, l.seeds, l.coef, k)
	if !l.formM(rows) {
		return l.reject(rows)
	}
	l.updateRunning()
	eta := l.StepSize()

	// New-block term α_new = η·Φ_new(X)ᵀ·H̃/b.
	j, seed, revisit := l.next(l.age(), rows)
	l.blockTerm(rows, k, j, seed, eta/float64(rows), l.h)

	// Shrink: α ← α·(I − η·M'), M' = M (KPCA) or UT[M] (GHA).
	copy(l.mUse, l.m)
	if l.cfg.Algorithm.spec().hebbian {
		for a := 0; a < k; a++ {
			for b := 0; b < a; b++ {
				l.mUse[a*k+b] = 0
			}
		}
	}
	for i := range l.mUse {
		l.mUse[i] = float64(eta * l.mUse[i])
	}
	shrink(l.coef, l.mUse, l.tmp, k)
	l.commit(k, j, seed, revisit)
	l.learned(rows)
	return nil
}

// checkBatch returns ErrInput for a batch the learner cannot take: a
// shape that is not rows points of its dimension, non-finite values, or
// inputs outside the kernel's domain.
func (l *KPCA) checkBatch(x []float64, rows int) error {
	if rows < 1 || len(x) != rows*max(l.fm.Dim, 1) && l.fm.Dim != 0 || len(x)%rows != 0 {
		return fmt.Errorf("%w: %d values for %d rows (dimension %d)", ErrInput, len(x), rows, l.fm.Dim)
	}
	if err := checkValues(x, ""); err != nil {
		return err
	}
	if err := l.cfg.Kernel.CheckInput(x); err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	return nil
}

// reject counts a batch the divergence guard refused and halves the step.
func (l *KPCA) reject(rows int) error {
	l.refused(rows, true)
	return fmt.Errorf("%w: step %d, step size now %.3g", ErrDiverged, l.t, l.StepSize())
}

// addLandmarks adds landmark block j to ev: B of the rows of xs (all of
// them when rows = B, otherwise B drawn without replacement by a shuffle
// seeded from the model seed and j), or an error when there are fewer
// than B rows or they cannot make a block.
func addLandmarks(ev *features.Evaluator, xs []float64, rows int, seed uint64, j int) error {
	m := ev.Map()
	nb, d := m.BlockSize, m.Dim
	if rows < nb {
		return fmt.Errorf("%w: %d rows for a block of %d landmarks", ErrInput, rows, nb)
	}
	z := xs[:nb*d]
	if rows > nb {
		idx := make([]int, rows)
		for i := range idx {
			idx[i] = i
		}
		key := features.Key(seed, uint64(j)^landmarkStream)
		z = make([]float64, nb*d)
		for i := 0; i < nb; i++ { // partial Fisher–Yates
			r := i + int(features.Word(key, uint64(i))%uint64(rows-i))
			idx[i], idx[r] = idx[r], idx[i]
			copy(z[i*d:(i+1)*d], xs[idx[i]*d:(idx[i]+1)*d])
		}
	}
	lb, err := m.NewLandmarks(z)
	if err != nil {
		return err
	}
	ev.AddLandmarks(lb)
	return nil
}

// landmarkStream separates the landmark shuffles' random words from the
// feature generator's.
const landmarkStream = 0x4C414E444D41524B // "LANDMARK"

// updateSubspace is Update's step for SolverSubspace (see subspace).
func (l *KPCA) updateSubspace(rows int) error {
	k, s := l.cfg.K, l.sub
	l.ev.EvalKeep(l.h, l.xs, rows, l.seeds, l.coef, k)
	if l.batchHook != nil {
		l.batchHook(rows, l.seeds, l.ev.Kept)
	}
	if !l.formM(rows) {
		l.ev.Release()
		return l.reject(rows)
	}
	l.subspaceEstimates(s.eig, true)
	eta := l.StepSize()
	s.grad = s.grad[:len(l.coef)]
	s.stale = true // the served copy shares the gradient's buffer (subspace.served)
	var mean []float64
	if l.center != nil {
		mean = s.mean[:len(l.seeds)*l.cfg.BlockSize]
	}
	l.ev.Grad(s.grad, l.h, k, eta/float64(rows), mean)
	l.ev.Release()
	j, seed, revisit := l.next(l.age(), rows)
	if !revisit { // the new block's gradient is the new-block term
		l.blockTerm(rows, k, j, seed, eta/float64(rows), l.h)
		if l.center != nil {
			colMeans(s.newMean, l.phi, rows, l.cfg.BlockSize)
		}
	}
	return l.subspaceApply(rows, s.grad, mean, j, seed, revisit)
}

// SetBatchHook sets f, which each Update of the subspace solver calls with
// the batch's features as it computed them (kept(j): block j's, rows×B;
// nil when not kept), before the step changes anything; nil removes it.
// f must not keep kept or its slices past its return. The service scores
// the batch with its served version from them (snapshot.Model.ScoreKept)
// instead of computing the features a second time.
func (l *KPCA) SetBatchHook(f func(rows int, seeds []uint64, kept func(j int) []float64)) {
	l.batchHook = f
}

// subspaceEstimates moves the eigenvalue estimates eig (and, with centre
// set, the centre estimate when centring) towards this batch's M and h̄,
// which the current functions were not fitted to.
func (l *KPCA) subspaceEstimates(eig []float64, centre bool) {
	k := l.cfg.K
	rho := math.Max(1/float64(l.age()+1), 0.01)
	for q := range eig {
		eig[q] += rho * (l.m[q*k+q] - eig[q])
	}
	if centre && l.center != nil {
		for q, v := range l.hbar {
			l.center[q] += rho * (v - l.center[q])
		}
	}
}

// subspaceApply ends a subspace step over rows points: the gradient grad
// of every existing block and, unless revisiting, the new block j (seed,
// its term in newc) join the coefficients, the centre moves with them
// (mean: the blocks' feature means, sub.newMean the new block's), and the
// basis is orthonormalised.
func (l *KPCA) subspaceApply(rows int, grad, mean []float64, j int, seed uint64, revisit bool) error {
	k, s := l.cfg.K, l.sub
	if l.center != nil {
		// The centre moves with the functions: by the batch mean of the
		// update, then through the orthonormalisation below.
		addMeanTimes(l.center, mean, grad, k)
		if !revisit {
			addMeanTimes(l.center, s.newMean, l.newc, k)
		}
	}
	for i, g := range grad {
		l.coef[i] += g
	}
	if !revisit {
		l.commit(k, j, seed, false)
	}
	if !s.orthonormalise(l.coef, len(l.seeds)) {
		// Needs H̃ᵀ-directions that cancel exactly; not reachable with
		// finite H (the guard ran), but never leave a singular basis.
		return fmt.Errorf("%w: step %d: the functions became linearly dependent", ErrDiverged, l.t)
	}
	if l.center != nil {
		s.rowTimesTm(l.center)
	}
	s.average(l.coef, l.center, l.age())
	l.learned(rows)
	return nil
}

// served returns the coefficients and centre (nil without centring) the
// model serves: the average of the iterates when the subspace solver
// averages (see subspace), the iterate otherwise. averaged reports which.
func (l *KPCA) served() (coef, center []float64, averaged bool) {
	if a, c, ok := l.sub.served(l.coef, len(l.seeds)); ok {
		return a, c, true
	}
	return l.coef, l.center, false
}

// assessed returns the coefficients and centre (see served) of the k
// components l serves, its first columns (features×k; a copy when it
// learns columns beyond them, Config.Oversample): what its projections,
// quality score, change detector and following judge.
func (l *KPCA) assessed() (coef, center []float64, k int) {
	coef, center, _ = l.served()
	k, cols := l.servedK(), l.cfg.K
	if k == cols {
		return coef, center, k
	}
	rows := len(coef) / cols
	l.scoef = sized(l.scoef, rows*k)
	for r := range rows {
		copy(l.scoef[r*k:(r+1)*k], coef[r*cols:r*cols+k])
	}
	if center != nil {
		center = center[:k]
	}
	return l.scoef, center, k
}

// covStep is a step of the covariance solver (see covariance and
// solvePCA): the batch's features of every block join the statistics, and
// the coefficients become the top-k eigenvectors of their covariance.
//
// The steps before the budget filled were the subspace solver's. With
// landmark blocks, their batches' points are in the statistics all the
// same: the first covariance step adds the landmarks themselves, which
// are those batches (a landmark block is the whole batch when the batch
// has B points, as by default; otherwise B of its points drawn at
// random). So after one pass over a data set every point is in the
// statistics once, and a restored learner continues bit for bit (the
// landmarks are in the snapshot).
func (l *KPCA) covStep(rows int) error {
	l.ensureCov()
	if err := l.covAdd(l.cov, l.xs, rows); err != nil {
		l.refused(rows, false)
		return fmt.Errorf("%w: step %d: %w", ErrDiverged, l.t, err)
	}
	l.learned(rows)
	if l.lazy {
		return nil
	}
	return l.solveCov()
}

// ensureCov makes the covariance solver's statistics over the blocks so
// far, once: with landmark blocks they start with the landmarks
// themselves, which are the batches those blocks were built from.
func (l *KPCA) ensureCov() {
	if l.cov != nil {
		return
	}
	blocks := len(l.seeds)
	c := newCovariance(blocks*l.cfg.BlockSize, 0, l.cfg.K, l.cfg.Ridge, l.cfg.Seed, l.cfg.Workers)
	if l.fm.Landmarks {
		c.setGram(landmarkGram(l.ev, l.seeds, &c.ws))
		for j := range blocks {
			// A block whose features would overflow the sums (an
			// unbounded kernel) stays out: its batch was learned by
			// the subspace rule all the same.
			_, lb := l.ev.Landmarks(j)
			_ = l.covAdd(c, lb.Z, l.cfg.BlockSize)
		}
	}
	l.cov = c
}

// solveCov solves the covariance solver's statistics for the
// coefficients (and the centre): covStep's second half.
func (l *KPCA) solveCov() error {
	k, blocks := l.cfg.K, len(l.seeds)
	c := l.cov
	// Applications of the operator this solve (see solvePCA): 30 from the
	// random first basis, 8 while the statistics are young and move
	// fast, then 4 a step, tracking a T that one batch barely changes
	// (MNIST, k = 10: with 2 or 3 a step the held-out error wanders
	// between 4.4e-6 and 6.1e-6 from epoch to epoch; with 4 it holds at
	// 4.4e-6).
	iters := 4
	switch {
	case c.solves == 0:
		iters = 30
	case c.solves < 8:
		iters = 8
	}
	if err := c.solvePCA(l.coef, l.sub.eig, k, iters, blocks, l.cfg.Center); err != nil {
		l.rejected++
		return fmt.Errorf("step %d (its samples are in the statistics; the coefficients are the previous step's): %w", l.t-1, err)
	}
	if l.center != nil {
		clear(l.center)
		addMeanTimes(l.center, c.mu[0], l.coef, k)
	}
	return nil
}

// covAdd adds the features of every block at the rows points xs
// (standardised) to c's statistics (see gatherFeatures), or reports why
// it refused them.
func (l *KPCA) covAdd(c *covariance, xs []float64, rows int) error {
	if nb := l.cfg.BlockSize; cap(l.phi) < rows*nb {
		l.phi = make([]float64, rows*nb)
	}
	if err := c.gatherFeatures(0, l.phi[:rows*l.cfg.BlockSize], l.ev, xs, rows, l.seeds); err != nil {
		return err
	}
	c.add(rows)
	return nil
}

// colMeans sets dst (nb) to the column means of phi (rows×nb).
func colMeans(dst, phi []float64, rows, nb int) {
	colSums(dst, phi, rows, nb)
	for f := range dst {
		dst[f] /= float64(rows)
	}
}

// colSums sets dst (nb) to the column sums of phi (rows×nb), summed over
// the rows in order.
func colSums(dst, phi []float64, rows, nb int) {
	clear(dst)
	for r := 0; r < rows; r++ {
		for f, v := range phi[r*nb : r*nb+nb] {
			dst[f] += v
		}
	}
}

// formM centres h (if centring) and sets m = H̃ᵀH̃/b. It reports false when
// the guard trips.
func (l *KPCA) formM(rows int) bool {
	k := l.cfg.K
	colSums(l.hbar, l.h, rows, k)
	for q := range l.hbar {
		l.hbar[q] /= float64(rows)
		if math.IsNaN(l.hbar[q]) || math.IsInf(l.hbar[q], 0) {
			return false
		}
	}
	if l.cfg.Center {
		subtractRow(l.h, l.hbar, rows, k)
	}
	outerUpper(l.m, l.h, rows, k)
	return l.finishM(float64(rows), nil)
}

// subtractRow subtracts c (k) from every row of h (rows×k).
func subtractRow(h, c []float64, rows, k int) {
	for r := 0; r < rows; r++ {
		hr := h[r*k : r*k+k]
		for q := range hr {
			hr[q] -= c[q]
		}
	}
}

// outerUpper sets the upper triangle of m (k×k) to Σ_rows h_r·h_rᵀ, in
// row order, and its lower triangle to zero.
func outerUpper(m, h []float64, rows, k int) {
	clear(m)
	for r := 0; r < rows; r++ {
		hr := h[r*k : r*k+k]
		for a, va := range hr {
			ma := m[a*k : a*k+k]
			for b := a; b < k; b++ {
				ma[b] += float64(va * hr[b])
			}
		}
	}
}

// finishM turns l.m's upper triangle, a sum over b rows, into
// M = sum/b − c·cᵀ (c nil: M = sum/b), mirrored, and reports whether the
// divergence guard passes: tr M finite and ≤ 1e3·k·λ̂.
func (l *KPCA) finishM(b float64, c []float64) bool {
	k := l.cfg.K
	var tr float64
	for a := 0; a < k; a++ {
		for j := a; j < k; j++ {
			v := l.m[a*k+j] / b
			if c != nil {
				v -= float64(c[a] * c[j])
			}
			l.m[a*k+j], l.m[j*k+a] = v, v
		}
		tr += l.m[a*k+a]
	}
	return !math.IsNaN(tr) && !math.IsInf(tr, 0) && tr <= 1e3*float64(k)*l.scale()
}

func (l *KPCA) updateRunning() {
	rho := math.Max(1/float64(l.age()+1), 0.01)
	for i, v := range l.m {
		l.mrun[i] += rho * (v - l.mrun[i])
	}
	if l.center != nil {
		for q, v := range l.hbar {
			l.center[q] += rho * (v - l.center[q])
		}
	}
}

// shrink sets every row a of alpha (n×k) to a·(I − e), e k×k: the
// product a·e is accumulated by features.AddMul (a is 1×k), then
// subtracted, so the arithmetic is the same on every CPU.
func shrink(alpha, e, tmp []float64, k int) {
	acc := tmp[k : 2*k]
	if k < 4 { // too narrow to vectorise: the same sums, inline
		for i := 0; i+k <= len(alpha); i += k {
			row := alpha[i : i+k]
			copy(tmp[:k], row)
			for q := 0; q < k; q++ {
				var s float64
				for a, v := range tmp[:k] {
					s += float64(v * e[a*k+q])
				}
				row[q] = tmp[q] - s
			}
		}
		return
	}
	for i := 0; i+k <= len(alpha); i += k {
		row := alpha[i : i+k]
		copy(tmp[:k], row)
		clear(acc)
		features.AddMul(acc, tmp[:k], e, 1, k, k)
		for q := range row {
			row[q] = tmp[q] - acc[q]
		}
	}
}

// powerMax returns the largest eigenvalue of the symmetric PSD k×k matrix m
// by power iteration warm-started from the previous call's vector.
func (l *KPCA) powerMax(m []float64) float64 { return symNorm(m, l.pv, l.pw, l.cfg.K) }

// first initialises block 0 by exact PCA of its features on the first batch.
func (l *KPCA) first(rows int) error {
	k, nb := l.cfg.K, l.cfg.BlockSize
	if l.cfg.Solver == SolverCovariance && !l.fm.Landmarks {
		// Random features need no data: the covariance solver draws its
		// whole budget now, so that every sample, the first batch's
		// too, is in the statistics; the coefficients are the solve's.
		l.drawBudget(k)
		return l.covStep(rows)
	}
	seed, err := l.firstBlock(rows)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	init := initBlock
	if l.quickInit {
		init = initBlockTopK
	}
	coef, vals, err := init(l.phi, rows, nb, k, l.cfg.Center, false)
	if err != nil {
		return err
	}
	top := vals[0]
	if l.sub != nil {
		copy(l.sub.eig, vals) // the block's eigenvectors are orthonormal (n = 1)
	}
	l.lambda0 = top
	copy(l.newc, coef)
	l.commit(k, 0, seed, false)
	if l.center != nil {
		// Centre estimate: the batch mean of the initial functions.
		l.ev.Eval(l.h, l.xs, rows, l.seeds, l.coef, k)
		for r := 0; r < rows; r++ {
			for q := 0; q < k; q++ {
				l.center[q] += l.h[r*k+q] / float64(rows)
			}
		}
	}
	l.learned(rows)
	return nil
}

// join is a lazy learner's step while landmark blocks join (see lazy):
// the batch becomes the next block, with zero coefficients, and nothing
// else is learned from it yet. The first covariance step puts the
// landmark batches into the statistics (covStep) and the solve sets every
// coefficient, so the subspace rule's model of these steps, which the
// service serves meanwhile, would be computed only to be replaced.
func (l *KPCA) join(rows int) error {
	var seed uint64
	j := len(l.seeds)
	if j == 0 {
		s, err := l.firstBlock(rows)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInput, err)
		}
		seed = s
	} else {
		var revisit bool
		if j, seed, revisit = l.next(l.age(), rows); revisit {
			return fmt.Errorf("%w: the batch's %d points make no landmark block (block %d)", ErrInput, rows, j)
		}
	}
	l.newc = sized(l.newc, l.cfg.BlockSize*l.cfg.K)
	clear(l.newc)
	l.commit(l.cfg.K, j, seed, false)
	l.learned(rows)
	return nil
}

// EvalTo writes the learned functions at rows points x (raw, before
// standardisation) into dst (rows×k), minus the centre estimate when
// centring: exactly what a snapshot's Model.Project returns.
func (l *KPCA) EvalTo(dst, x []float64, rows int) {
	xs := make([]float64, len(x))
	l.pre.Apply(xs, x)
	coef, center, k := l.assessed()
	l.evalWith(dst, xs, rows, k, coef, center)
}

// Eigenvalues returns the eigenvalue estimates of the running M in
// decreasing order, and the orthogonality drift ‖M − diag M‖_F/‖M‖_F.
func (l *KPCA) Eigenvalues() ([]float64, float64) {
	k := l.cfg.K
	if len(l.mrun) == 0 {
		return nil, 0
	}
	if l.sub != nil { // Rayleigh quotients of the ordered functions
		return append([]float64(nil), l.sub.eig...), 0
	}
	s := mat.NewSymDense(k, append([]float64(nil), l.mrun...))
	var es mat.EigenSym
	if !es.Factorize(s, false) {
		return nil, 0
	}
	vals := es.Values(nil)
	sort.Sort(sort.Reverse(sort.Float64Slice(vals)))
	var off, all float64
	for a := 0; a < k; a++ {
		for b := 0; b < k; b++ {
			v := l.mrun[a*k+b] * l.mrun[a*k+b]
			all += v
			if a != b {
				off += v
			}
		}
	}
	drift := 0.0
	if all > 0 {
		drift = math.Sqrt(off / all)
	}
	return vals, drift
}

// Snapshot returns a snapshot of the current model (coefficients copied).
// The caller fills in Offsets.
func (l *KPCA) Snapshot() *snapshot.Snapshot {
	eig, drift := l.Eigenvalues()
	view, z := l.snapshotView()
	var landmarks [][]float64
	if z != nil {
		landmarks = [][]float64{z}
	}
	cov, state := l.cov.state()
	coef, center, averaged := l.served()
	var avg *snapshot.Averaged
	if averaged {
		// The served model is the average; the iterate it continues
		// from is learner state.
		view.Center = append([]float64(nil), center...)
		avg = &snapshot.Averaged{Window: l.cfg.Average}
		s := l.sub
		state = make([]float64, 0, 2*len(l.coef)+2*len(l.center))
		state = append(append(append(append(state, l.coef...), s.avg...), l.center...), s.avgCenter...)
	}
	chState, chValues := l.challengerState()
	if chState != nil {
		state = append(state[:len(state):len(state)], chValues...)
	}
	snap := &snapshot.Snapshot{
		Header: snapshot.Header{
			Generator:   snapshot.GeneratorOf(view),
			Seeds:       append(snapshot.Seeds(nil), l.seeds...),
			Views:       []snapshot.View{view},
			Step:        l.t,
			SamplesSeen: l.samples,
			Schedule:    snapshot.Schedule{Scale: l.lambda0, Backoff: l.backoff, Solver: string(l.cfg.Solver), Ridge: l.ridgeOfSolver(), Restart: l.restart},
			Created:     time.Now().UTC(),
			Diagnostics: snapshot.Diagnostics{Eigenvalues: eig, Drift: drift, Rejected: l.rejected, Changes: l.changes, Switches: l.switches, Rollbacks: l.rollbacks, Quality: l.mon.quality()},
			Running:     append([]float64(nil), l.mrun...),
			Covariance:  cov,
			Averaged:    avg,
			Detector:    l.mon.state(),
			Challenger:  chState,
		},
		Coef:      [][]float64{append([]float64(nil), coef...)},
		Landmarks: landmarks,
		State:     state,
	}
	l.cfg.toHeader(&snap.Header, false)
	snap.Header.K = l.servedK() // the header's K is the components served; Oversample the columns beyond
	return snap
}

// precisionOf is the snapshot's name for fm's precision.
func precisionOf(fm features.Map) string {
	if fm.Float32 {
		return snapshot.PrecisionFloat32
	}
	return ""
}

// computeOf is the snapshot's name for fm's compute mode.
func computeOf(fm features.Map) string {
	if fm.BLAS {
		return snapshot.ComputeBLAS
	}
	return ""
}

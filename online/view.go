package online

import (
	"fmt"
	"math"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/snapshot"
)

// view is one input space of a learner: its feature map and evaluator,
// the blocks drawn so far (seeds, or landmark blocks) with their
// coefficients, the input preprocessing and the centre estimate of the k
// functions. KPCA has one, TwoView two; every rule (the paper's, the
// subspace solver, the covariance solver) grows and reads a view through
// the methods below, so drawing, revisiting and evaluating blocks is
// written once.
type view struct {
	fm       features.Map
	ev       *features.Evaluator
	seeds    []uint64
	coef     []float64 // len(seeds)·B rows × k, row-major
	pre      snapshot.Preprocess
	center   []float64 // nil unless the functions are centred
	maxBlock int       // the feature budget in blocks
	hold     bool      // HoldGrowth: revisit instead of appending
	seedBase uint64    // block j's seed is DeriveSeed(seedBase, j)
	// shuffleKey draws a landmark block's points from a batch of more
	// than B: the model seed, the same for both views, so that the two
	// views' block j holds the same pairs (TwoView.covStep adds them).
	shuffleKey uint64

	// scratch for one batch: standardised inputs, the functions' values,
	// one block's features and its new coefficients
	xs, h, phi, newc []float64
}

// viewSpec is what setup needs to fix a view on the first batch.
type viewSpec struct {
	index       int // 0 for x, 1 for y: in messages
	kernel      features.Kernel
	dim         int
	block       int // B (the linear map: d, whatever is given)
	maxFeatures int
	standardize bool
	float32     bool
	keepBlocks  bool // size the evaluator's EvalKeep buffer (the subspace solver)
	center      bool
	// frequencies, when set, is this view's own (a restored view's, as
	// stored); else the configuration's learner.frequencies decides.
	frequencies Frequencies
}

// setup fixes the view's preprocessing, bandwidth (the median trick on
// the first batch x, rows×dim, when the kernel has a bandwidth and none is
// set) and feature map, and allocates its budget. x may be nil when both
// are known (a restore).
func (v *view) setup(c Config, s viewSpec, x []float64, rows int) error {
	d, k, nb, maxF := s.dim, c.K, s.block, s.maxFeatures
	if s.standardize {
		v.pre = standardizer(x, rows, d)
	}
	kern := s.kernel
	if kern.Family.HasBandwidth() && kern.Bandwidth == 0 {
		xs := make([]float64, rows*d)
		v.pre.Apply(xs, x[:rows*d])
		kern.Bandwidth = MedianDistance(xs, rows, d, 512)
		if !(kern.Bandwidth > 0) {
			return fmt.Errorf("%w: the median trick found bandwidth %v for view %d on the first batch (all points equal?); set a bandwidth", ErrInput, kern.Bandwidth, s.index)
		}
	}
	if kern.Family.Identity() {
		// The identity map: one block of d features, revisited every step.
		nb, maxF = d, d
	}
	if nb < k {
		return fmt.Errorf("%w: view %d has %d features per block, fewer than k = %d", ErrConfig, s.index, nb, k)
	}
	fc := c
	if s.frequencies != "" {
		fc.Frequencies = s.frequencies
	}
	v.fm = features.Map{Kernel: kern, Dim: d, BlockSize: nb, Float32: s.float32, BLAS: c.Compute == ComputeBLAS,
		Landmarks: c.Features == FeaturesLandmarks, Structured: fc.structured(kern, d, s.float32)}
	if err := v.fm.Validate(); err != nil {
		return fmt.Errorf("%w: view %d: %w", ErrConfig, s.index, err)
	}
	v.maxBlock = maxF / nb
	ec := features.EvaluatorConfig{Workers: c.Workers, CacheBytes: c.CacheBytes, KeepBytes: keepBytes(c.KeepBytes, d, k)}
	if s.keepBlocks {
		ec.KeepBlocks = v.maxBlock
	}
	v.ev = features.NewEvaluator(v.fm, ec)
	v.coef = make([]float64, 0, v.maxBlock*nb*k)
	v.seeds = make([]uint64, 0, v.maxBlock)
	v.newc = make([]float64, nb*k)
	if s.center {
		v.center = make([]float64, k)
	}
	v.seedBase, v.shuffleKey = c.Seed, c.Seed
	if s.index == 1 {
		v.seedBase ^= viewTag
	}
	return nil
}

// keepBytes is the bound on kept batch features for a view of d inputs
// and k functions: keep as configured, or by default (0) up to
// features.DefaultKeepBytes when d ≥ k and none below. Kept features save
// evaluating them a second time for the gradient, a share of a step of
// about d/(d + 8k) (`streamkpca bench throughput --keep-bytes 0|-1`, 2
// cores, AVX2: 1.07× at d = 16, k = 21; 1.15–1.35× at d = 64, k = 21;
// 1.3–1.6× at d = 16, k = 3; 2× at d = 784, k = 10), and cost b × 8 bytes
// a feature: 256 MiB at 65,536 features, more than the rest of such a
// model. Below d = k re-evaluating costs about a tenth of a step or less.
func keepBytes(configured int64, d, k int) int64 {
	if configured == 0 && d < k {
		return -1
	}
	return configured
}

// viewTag separates view y's seeds from view x's.
const viewTag = 0x9E3779B97F4A7C15

// close releases the evaluator's workers.
func (v *view) close() {
	if v.ev != nil {
		v.ev.Close()
	}
}

// generated is the view's generated blocks (none before its first
// batch).
func (v *view) generated() features.Generated {
	if v.ev == nil {
		return features.Generated{}
	}
	return v.ev.Generated()
}

// features is the number of features drawn so far.
func (v *view) features() int { return len(v.seeds) * v.fm.BlockSize }

// scratch sizes the batch buffers for rows points.
func (v *view) scratch(rows, k int) {
	d, nb := v.fm.Dim, v.fm.BlockSize
	v.xs, v.h, v.phi = sized(v.xs, rows*d), sized(v.h, rows*k), sized(v.phi, rows*nb)
}

// sized returns buf with length n, reallocated only when its capacity is
// smaller (scratch reused from batch to batch; its contents are not kept).
func sized(buf []float64, n int) []float64 {
	if cap(buf) < n {
		return make([]float64, n)
	}
	return buf[:n]
}

// next returns the block that receives step t's new-block term: a new one
// (revisit false) while the feature budget lasts, then the existing ones
// in turn (Sec. 6.1).
//
// A landmark block is built here from B points of the batch (see
// addLandmarks); a batch of fewer than B points, or whose points cannot
// make one, revisits instead.
func (v *view) next(t uint64, rows int) (j int, seed uint64, revisit bool) {
	j = len(v.seeds)
	if j >= v.maxBlock || v.hold && j > 0 || v.fm.Landmarks && addLandmarks(v.ev, v.xs, rows, v.shuffleKey, j) != nil {
		j = int(t % uint64(len(v.seeds)))
		return j, v.seeds[j], true
	}
	return j, v.fm.BlockSeed(v.seedBase, j), false
}

// blockTerm sets newc = Φ_j(X)ᵀ·(s·R) for block j at the batch's inputs,
// s = η/b (paper Eq. 6 on one block; R, rows×k, is H̃ for KPCA and the
// residual of Alg. 3–4 for the two-view rules), leaving Φ_j(X) in phi.
func (v *view) blockTerm(rows, k, j int, seed uint64, s float64, res []float64) {
	nb := v.fm.BlockSize
	v.ev.PhiTo(v.phi, v.xs, rows, j, seed)
	clear(v.newc)
	for r := 0; r < rows; r++ {
		hr := res[r*k : r*k+k]
		for f, p := range v.phi[r*nb : r*nb+nb] {
			ps := float64(p * s)
			c := v.newc[f*k : f*k+k]
			for q, h := range hr {
				c[q] += float64(ps * h)
			}
		}
	}
}

// commit adds newc to the coefficients: to block j when revisiting, as a
// new block with seed otherwise.
func (v *view) commit(k, j int, seed uint64, revisit bool) {
	if revisit {
		nb := v.fm.BlockSize
		a := v.coef[j*nb*k : (j+1)*nb*k]
		for i, c := range v.newc {
			a[i] += c
		}
		return
	}
	v.seeds = append(v.seeds, seed)
	v.coef = append(v.coef, v.newc...)
}

// drawBudget draws every block of the budget at once, with zero
// coefficients: random features need no data, so the covariance solver
// starts with its whole basis and every sample, the first batch's too, is
// in its statistics.
func (v *view) drawBudget(k int) {
	for j := len(v.seeds); j < v.maxBlock; j++ {
		v.seeds = append(v.seeds, v.fm.BlockSeed(v.seedBase, j))
	}
	v.coef = v.coef[:len(v.seeds)*v.fm.BlockSize*k]
	clear(v.coef)
}

// firstBlock draws block 0 on the first batch (for landmark features,
// from its points) and leaves its features in phi.
func (v *view) firstBlock(rows int) (uint64, error) {
	seed := v.fm.BlockSeed(v.seedBase, 0)
	if v.fm.Landmarks {
		v.ev.TruncateLandmarks(0) // a first batch that failed may have left one
		if err := addLandmarks(v.ev, v.xs, rows, v.shuffleKey, 0); err != nil {
			return 0, err
		}
	}
	v.ev.PhiTo(v.phi, v.xs, rows, 0, seed)
	return seed, nil
}

// evalCentred writes the functions at rows inputs xs (already
// preprocessed) into dst (rows×k), minus the centre estimate: exactly
// what the snapshot's Model.ProjectView returns.
func (v *view) evalCentred(dst, xs []float64, rows, k int) {
	v.evalWith(dst, xs, rows, k, v.coef, v.center)
}

// evalWith is evalCentred with the coefficients coef and centre center
// (nil: none) given.
func (v *view) evalWith(dst, xs []float64, rows, k int, coef, center []float64) {
	v.ev.Eval(dst, xs, rows, v.seeds, coef, k)
	if center != nil {
		for r := 0; r < rows; r++ {
			for q := 0; q < k; q++ {
				dst[r*k+q] -= center[q]
			}
		}
	}
}

// snapshotView returns the snapshot's description of the view and, for
// landmark features, its landmark points block after block.
func (v *view) snapshotView() (snapshot.View, []float64) {
	sv := snapshot.View{Dim: v.fm.Dim, Kernel: v.fm.Kernel, Preprocess: v.pre, Precision: precisionOf(v.fm), Compute: computeOf(v.fm)}
	if v.fm.Structured {
		sv.Frequencies = snapshot.FrequenciesOrthogonal
	}
	if v.center != nil {
		sv.Center = append([]float64(nil), v.center...)
	}
	var z []float64
	if v.fm.Landmarks {
		sv.Features = snapshot.FeaturesLandmarks
		z = make([]float64, 0, len(v.seeds)*v.fm.BlockSize*v.fm.Dim)
		for j := range v.seeds {
			_, lb := v.ev.Landmarks(j)
			z = append(z, lb.Z...)
		}
	}
	return sv, z
}

// restore sets the view's blocks, coefficients, preprocessing and centre
// from a snapshot; z holds a landmark view's points, block after block.
func (v *view) restore(sv snapshot.View, seeds []uint64, coef, z []float64, k int) error {
	if v.fm.Structured != sv.Structured() {
		return fmt.Errorf("%w: the view's frequencies are stored as %q but would be drawn otherwise", snapshot.ErrHeader, sv.Frequencies)
	}
	v.pre = sv.Preprocess
	if len(coef) > cap(v.coef) {
		v.coef = make([]float64, 0, len(coef))
	}
	v.seeds = append(v.seeds[:0], seeds...)
	v.coef = append(v.coef[:0], coef...)
	if v.fm.Landmarks {
		n := v.fm.BlockSize * v.fm.Dim
		for j := range seeds {
			lb, err := v.fm.NewLandmarks(z[j*n : (j+1)*n])
			if err != nil {
				return fmt.Errorf("%w: landmark block %d: %w", snapshot.ErrHeader, j, err)
			}
			v.ev.AddLandmarks(lb)
		}
	}
	if v.center != nil && len(sv.Center) == k {
		copy(v.center, sv.Center)
	}
	return nil
}

// restoredConfig sets what a snapshot's view implies for the
// configuration: precision, compute mode and feature source.
func restoredConfig(c *Config, sv snapshot.View) {
	if sv.Float32() {
		c.Precision = Float32
	}
	if sv.BLAS() {
		c.Compute = ComputeBLAS
	}
	if sv.Landmarks() {
		c.Features = FeaturesLandmarks
	}
	c.Frequencies = FrequenciesIID
	if sv.Structured() {
		c.Frequencies = FrequenciesOrthogonal
	}
}

// checkValues reports non-finite values in a batch (what names the input
// in the message: "" or "x ", "y ").
func checkValues(x []float64, what string) error {
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: non-finite %svalue", ErrInput, what)
		}
	}
	return nil
}

// progress is the step counter, sample count and step back-off that every
// learner keeps and snapshots.
type progress struct {
	t, samples uint64
	rejected   uint64
	backoff    float64 // the divergence guard's factor on η, halved per refused batch
	// restart is the step at which the model last restarted (Forget):
	// every rate that decays with the steps counts from it.
	restart uint64
	changes uint64 // the changes of the stream detected so far (Assess)
	// switches counts the challengers that replaced the model (follower);
	// rollbacks, the switches undone on probation.
	switches, rollbacks uint64
}

// age is the number of steps since the schedule (re)started: the t of
// θ₀/(1+θ₁t) and of every running estimate's 1/t rate.
func (p *progress) age() uint64 { return p.t - p.restart }

// Changes returns the number of changes of the stream that Assess
// detected since the model started.
func (p *progress) Changes() uint64 { return p.changes }

// Step returns the number of learned batches.
func (p *progress) Step() uint64 { return p.t }

// SamplesSeen returns the number of samples passed to Update (including
// those of rejected batches).
func (p *progress) SamplesSeen() uint64 { return p.samples }

// Rejected returns the number of batches the divergence guard refused.
func (p *progress) Rejected() uint64 { return p.rejected }

// learned counts a learned batch of rows samples.
func (p *progress) learned(rows int) {
	p.t++
	p.samples += uint64(rows)
}

// refused counts a batch of rows samples that the guard or a solver
// refused; with halve, the step size is halved for good.
func (p *progress) refused(rows int, halve bool) {
	p.samples += uint64(rows)
	p.rejected++
	if halve {
		p.backoff *= 0.5
	}
}

// resume sets p from a snapshot header.
func (p *progress) resume(h *snapshot.Header) {
	p.t, p.samples, p.rejected, p.backoff = h.Step, h.SamplesSeen, h.Diagnostics.Rejected, h.Schedule.Backoff
	p.restart, p.changes, p.switches = min(h.Schedule.Restart, h.Step), h.Diagnostics.Changes, h.Diagnostics.Switches
	p.rollbacks = h.Diagnostics.Rollbacks
	if p.backoff == 0 {
		p.backoff = 1
	}
}

// decay is θ_t = θ₀/(1 + θ₁·t), the schedule of every rule's step.
func decay(c Config, t uint64) float64 { return c.Theta0 / (1 + c.Theta1*float64(t)) }

package online

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/internal/splitmix"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Forgetting names what a learner does when its held-out score says the
// stream has changed (Config.Forget).
type Forgetting string

// Forgetting modes.
const (
	// ForgetDetect, the default: a change detector watches the held-out
	// score (see monitor) and a detected change restarts the schedule
	// (Forget).
	ForgetDetect Forgetting = "detect"
	// ForgetOff never restarts: for streams known to be stationary.
	ForgetOff Forgetting = "off"
	// ForgetFollow, the default, is detect plus a challenger that
	// follows gradual change too (see follower): a learner started on
	// the stream as it is now replaces the model when it fits the
	// held-out points better (FitScore).
	ForgetFollow Forgetting = "follow"
)

// Forgettings are the valid values of Config.Forget.
var Forgettings = []Forgetting{ForgetFollow, ForgetDetect, ForgetOff}

// # The held-out score
//
// Assess scores the served model on rows held-out points x (rows×d, raw)
// before it learns them (on a stream that repeats rows, a file replayed
// pass after pass, a point may have been learned in an earlier pass; the
// score is then a little optimistic for every model alike), then, unless
// Config.Forget is off, restarts the model (Forget) when the score shows
// a change of the stream. It reports whether a change was detected.
// Learn the points afterwards with Update: they are held out, not left
// out. A batch the model cannot
// score (before the first step, or wrong shape or values) changes
// nothing and returns an error.
func (l *KPCA) Assess(x []float64, rows int) (bool, error) {
	c, err := l.scores(x, rows)
	if c == nil || err != nil {
		return false, err
	}
	if l.ObserveScores(c, rows) {
		return true, nil
	}
	return l.followAssess(x, rows), nil
}

// HeldOutScores appends to dst the served model's component scores of rows
// held-out points x (rows×k: h_q(x)²/k(x, x) in the functions' orthonormal
// basis; a point's score is their sum), with no side effect: Assess's
// first half, for learners that hold one model on several instances
// (package cluster) and feed the union of their scores to
// ObserveScores. It appends nothing before the first step or for a
// collapsed basis.
func (l *KPCA) HeldOutScores(dst, x []float64, rows int) ([]float64, error) {
	c, err := l.scores(x, rows)
	return append(dst, c...), err
}

// ObserveScores is Assess's second half: it feeds held-out component
// scores c (rows×k, from HeldOutScores of this model) to the change
// detector and, on a change, restarts the model unless Config.Forget is
// off (Forget). It reports a change. Learners holding the same model that
// observe the same scores in the same order decide the same.
func (l *KPCA) ObserveScores(c []float64, rows int) bool {
	if rows == 0 || len(c) != rows*l.servedK() {
		return false
	}
	// The detector is armed once the feature budget is full and the model
	// is monitorArmAge steps old: while blocks join, the served average
	// holds them at less than their share, and a young model's score
	// moves as it settles (see monitor).
	grown := len(l.seeds) >= l.maxBlock && l.t-l.raisedAt >= monitorArmAge
	return l.detect(&l.mon, c, rows, l.servedK(), grown, l.cfg.Forget, l.Forget)
}

// Resetting reports whether the next Update restarts the model (Forget
// was called since the last Update).
func (l *KPCA) Resetting() bool { return l.reset }

// Score is the served model's held-out score on rows points x (rows×d,
// raw) that it has not learned, with no side effect: the mean over the
// points of the share of their kernel variance that the k functions
// capture (see Assess), in [0, 1]. fit's stopping rule compares it from
// epoch to epoch. 0 before the first step or for a collapsed basis.
func (l *KPCA) Score(x []float64, rows int) (float64, error) {
	c, err := l.scores(x, rows)
	if c == nil || err != nil {
		return 0, err
	}
	var s float64
	for _, v := range c {
		s += v
	}
	return s / float64(rows), nil
}

// scores sets the scratch to each held-out point's component scores
// h_q(x)²/k(x, x) in the basis where G = n·AᵀA is the identity, and
// returns them (rows×k); nil with no model or a collapsed basis.
func (l *KPCA) scores(x []float64, rows int) ([]float64, error) {
	h, err := l.coords(x, rows)
	for i, v := range h {
		h[i] = v * v
	}
	return h, err
}

// FitScore scores how well the served model's k functions fit the
// distribution of rows held-out points x (rows×d, raw, rows > k), from the
// points alone: with K the points' kernel matrix (centred for a centred
// model) and Q an orthonormal basis of the functions' values on them
// (rows×k), the eigenvalues μ₁ ≥ … ≥ μ_k of QᵀKQ are at most the top
// eigenvalues λ₁ ≥ … ≥ λ_k of K (the Poincaré separation theorem), all equal
// only when the functions span K's top-k eigenvectors — kernel PCA of
// these points, the paper's eq. (1) on them. The score is the geometric
// mean of μ_j/λ_j, in [0, 1]: every component weighs alike, whatever its
// eigenvalue, so a stale model whose near-constant leading function
// still captures most of the variance but whose later ones point
// elsewhere scores low, and nothing depends on the coefficients' norms
// (their noise made the RKHS-normalised shares of Score rank a stale
// model above a fresh one on a gradual MNIST change: `streamkpca bench
// drift --case mnist-ramp`). Compare models on the same points: with few
// points per component even the exact eigenfunctions score below 1.
// NaN before the first step, with rows ≤ k, or for functions whose values
// are linearly dependent on the points. Costs rows²·d kernel evaluations
// and an eigendecomposition of order rows³: for a held-out window, not
// for every batch.
func (l *KPCA) FitScore(x []float64, rows int) (float64, error) {
	k := l.servedK()
	if len(l.seeds) == 0 || rows <= k {
		return math.NaN(), nil
	}
	if err := l.checkBatch(x, rows); err != nil {
		return math.NaN(), err
	}
	return subspaceFit(l.windowKernel(x, rows), l.valuesOn(x, rows)), nil
}

// windowKernel is the kernel matrix of rows points x (raw), in l's
// preprocessing, centred in feature space when l's functions are.
func (l *KPCA) windowKernel(x []float64, rows int) *mat.SymDense {
	d := l.fm.Dim
	xs := make([]float64, rows*d)
	l.pre.Apply(xs, x)
	km := mat.NewSymDense(rows, nil)
	for i := range rows {
		for j := i; j < rows; j++ {
			km.SetSym(i, j, l.fm.Kernel.Eval(xs[i*d:i*d+d], xs[j*d:j*d+d]))
		}
	}
	if l.center != nil {
		doubleCenter(km)
	}
	return km
}

// valuesOn is the served functions' values on rows points x (raw),
// rows×k, each column centred when the functions are.
func (l *KPCA) valuesOn(x []float64, rows int) *mat.Dense {
	coef, center, k := l.assessed()
	d := l.fm.Dim
	xs := make([]float64, rows*d)
	l.pre.Apply(xs, x)
	h := make([]float64, rows*k)
	l.evalWith(h, xs, rows, k, coef, center)
	v := mat.NewDense(rows, k, h)
	if center != nil {
		centerColumns(v)
	}
	return v
}

// subspaceFit is FitScore's figure for the kernel matrix km and the
// functions' values v (rows×k): the geometric mean of μ_j/λ_j. NaN when v's
// columns are linearly dependent.
func subspaceFit(km *mat.SymDense, v *mat.Dense) float64 {
	_, k := v.Dims()
	lam, ok := topEigenvalues(km, k)
	if !ok {
		return math.NaN()
	}
	return subspaceFitWith(km, v, lam)
}

// subspaceFitWith is subspaceFit given km's top-k eigenvalues lam.
func subspaceFitWith(km *mat.SymDense, v *mat.Dense, lam []float64) float64 {
	rows, k := v.Dims()
	var qr mat.QR
	qr.Factorize(v)
	var r mat.Dense
	qr.RTo(&r)
	for j := range k {
		if math.Abs(r.At(j, j)) <= 1e-12*math.Abs(r.At(0, 0)) {
			return math.NaN()
		}
	}
	var q mat.Dense
	qr.QTo(&q)
	qk := q.Slice(0, rows, 0, k)
	var kq, m mat.Dense
	kq.Mul(km, qk)
	m.Mul(qk.T(), &kq)
	mu, ok := topEigenvalues(mat.NewSymDense(k, m.RawMatrix().Data), k)
	if !ok {
		return math.NaN()
	}
	var s float64
	for j := range k {
		if lam[j] <= 0 {
			return math.NaN()
		}
		s += math.Log(max(mu[j], 0) / lam[j])
	}
	return math.Exp(s / float64(k))
}

// topEigenvalues returns the n largest eigenvalues of a, largest first.
func topEigenvalues(a *mat.SymDense, n int) ([]float64, bool) {
	var e mat.EigenSym
	if !e.Factorize(a, false) {
		return nil, false
	}
	v := e.Values(nil) // ascending
	out := make([]float64, n)
	for j := range n {
		out[j] = v[len(v)-1-j]
	}
	return out, true
}

// doubleCenter centres a kernel matrix in feature space: K ← HKH, H = I − 11ᵀ/n.
func doubleCenter(km *mat.SymDense) {
	n := km.SymmetricDim()
	row := make([]float64, n)
	var all float64
	for i := range n {
		for j := range n {
			row[i] += km.At(i, j)
		}
		all += row[i]
		row[i] /= float64(n)
	}
	all /= float64(n * n)
	for i := range n {
		for j := i; j < n; j++ {
			km.SetSym(i, j, km.At(i, j)-row[i]-row[j]+all)
		}
	}
}

// centerColumns subtracts each column's mean.
func centerColumns(v *mat.Dense) {
	rows, k := v.Dims()
	for j := range k {
		var m float64
		for i := range rows {
			m += v.At(i, j)
		}
		m /= float64(rows)
		for i := range rows {
			v.Set(i, j, v.At(i, j)-m)
		}
	}
}

// coords sets the scratch to each held-out point's function values in the
// basis where G = n·AᵀA is the identity, divided by √k(x, x) (centred
// functions: √(k(x, x) − k̄)), and returns them (rows×k); nil with no model
// or a collapsed basis.
func (l *KPCA) coords(x []float64, rows int) ([]float64, error) {
	if len(l.seeds) == 0 || rows == 0 {
		return nil, nil
	}
	if err := l.checkBatch(x, rows); err != nil {
		return nil, err
	}
	coef, center, k := l.assessed()
	d := l.fm.Dim
	q := &l.qual
	q.grow(rows, d, k)
	l.pre.Apply(q.xs, x)
	l.evalWith(q.h, q.xs, rows, k, coef, center)
	if !q.factor(coef, len(l.seeds), k) {
		return nil, nil // a collapsed basis: nothing to score against
	}
	var kbar float64
	if center != nil {
		kbar = meanOffDiagonal(l.fm.Kernel.Eval, q.xs, rows, d)
	}
	for r := range rows {
		x := q.xs[r*d : r*d+d]
		den := math.Sqrt(l.fm.Kernel.Eval(x, x) - kbar)
		h := q.h[r*k : r*k+k]
		solveLower(q.l, h, k)
		for j, v := range h {
			h[j] = v / den
		}
	}
	return q.h[:rows*k], nil
}

// detect feeds a held-out batch's component scores c (rows×k) to mon,
// the detector armed once full (the feature budget) and the model
// monitorArmAge steps old; on a change it counts it and, unless forget is
// off, calls restart. It reports the change.
func (p *progress) detect(mon *monitor, c []float64, rows, k int, full bool, forget Forgetting, restart func()) bool {
	if !mon.observe(c, rows, k, full && p.age() >= monitorArmAge) {
		return false
	}
	p.changes++
	if forget != ForgetOff {
		restart()
	}
	return true
}

// Quality returns the held-out score so far (see Assess), nil before
// any, with the last comparison window's fit scores of the model and its
// challenger (FitScores) when there was one.
func (l *KPCA) Quality() *snapshot.Quality {
	q := l.mon.quality()
	if fit, ch := l.FitScores(); q != nil && fit > 0 && ch > 0 {
		q.Fit, q.Challenger = fit, ch
		q.Evidence, q.Level = l.Evidence()
		q.Candidate = l.Candidate()
	}
	return q
}

// Forget restarts the model with the next Update, as a learner started
// then would, keeping only its configuration, bandwidth and
// preprocessing: the blocks, coefficients, running estimates and
// statistics go, the next batch initialises block 0 again, and the step
// size and averaging window count their steps from there (the step
// counter and the samples seen go on, so versions keep increasing).
// Assess calls it when the held-out score drops; it is also for callers
// that know the stream changed.
//
// Keeping the blocks and restarting only the schedule is not enough: on
// 16-D hermite rotated by a random orthogonal Q (`streamkpca bench
// drift`) the functions of the old stream are nearly orthogonal to the
// new ones, and orthogonal iteration from them takes some 100,000 points
// to reach the error a fresh start's exact initialisation reaches in
// 5,000 (0.83 against 9.5e-4, 20,480 points after the change).
func (l *KPCA) Forget() {
	if l.t > 0 {
		l.reset = true
	}
}

// restartModel is Forget's restart, done by Update.
func (l *KPCA) restartModel() {
	l.reset = false
	l.dropChallenger()
	l.restart = l.t
	l.seeds, l.coef = l.seeds[:0], l.coef[:0]
	if l.fm.Landmarks {
		l.ev.TruncateLandmarks(0)
	}
	if l.center != nil {
		clear(l.center)
	}
	clear(l.mrun)
	l.lambda0 = 0
	if l.cov != nil {
		l.cov.ws.Close()
		l.cov = nil
	}
	if s := l.sub; s != nil {
		l.sub = newSubspace(l.cfg.K, l.cfg.MaxFeatures, l.cfg.BlockSize, l.center != nil, s.window)
	}
}

// assessScratch is Assess's scratch space: the held-out inputs, the
// functions' values and the Cholesky factor of G.
type assessScratch struct {
	xs, h, l []float64
}

func (q *assessScratch) grow(rows, d, k int) {
	q.xs, q.h, q.l = sized(q.xs, rows*d), sized(q.h, rows*k), sized(q.l, k*k)
}

// factor sets l to the lower Cholesky factor of G = n·AᵀA for the
// coefficients a (rows×k); false if G is not positive definite.
func (q *assessScratch) factor(a []float64, n, k int) bool {
	gramLower(q.l, a, k)
	for i := range q.l {
		q.l[i] *= float64(n)
	}
	_, ok := lapack64.Potrf(blas64.Symmetric{N: k, Stride: k, Data: q.l, Uplo: blas.Lower})
	return ok
}

// solveLower overwrites h with L⁻¹h, L lower triangular (k×k, row-major).
func solveLower(l, h []float64, k int) {
	for i := range k {
		s := h[i]
		for j := range i {
			s -= l[i*k+j] * h[j]
		}
		h[i] = s / l[i*k+i]
	}
}

// meanOffDiagonal is the mean of kern(x_i, x_j) over pairs i ≠ j of the
// rows points xs: an estimate of E k(x, x'), the squared norm of the
// kernel mean. 0 for a single point.
func meanOffDiagonal(kern func(x, y []float64) float64, xs []float64, rows, d int) float64 {
	if rows < 2 {
		return 0
	}
	var s float64
	for i := range rows {
		for j := i + 1; j < rows; j++ {
			s += kern(xs[i*d:i*d+d], xs[j*d:j*d+d])
		}
	}
	return s / float64(rows*(rows-1)/2)
}

// # The change detector
//
// The monitor keeps an exponentially weighted mean μ and variance σ² of
// the held-out points' scores (each point's total over the k components)
// over about the last 8,192 points, and runs a one-sided CUSUM (Page
// 1954) on each batch's mean f_t of its n_t points, in units of the
// batch's standard error σ/√n_t:
//
//	z_t = (μ − f_t)/(σ/√n_t),   S ← max(0, S + min(z_t, κ + 3) − κ),   change when S > h
//
// with h = 10 and κ the larger of ½ (the textbook slack) and 2% of μ in
// those units: a score that settles or wanders by a percent or two (a
// young covariance model's does) never adds up to a change, and one batch
// adds at most 3: held-out shares have a heavy lower tail (a few points
// far out, whose variance the top components barely capture), and on the
// stationary 1-D hermite stream a batch of 32 lies 6σ below μ about once
// in a million points; without the cap one such batch makes a false
// alarm. A drop of Δ ≥ κ + 3 standard errors is found after ⌈h/3⌉ = 4
// batches. μ and σ are frozen while S > 0, so a slow slide cannot drag
// the reference down with it; σ is the points' (not the batch means'),
// stable over a long window, where one taken from a few dozen batch means
// is small after a calm stretch and makes ordinary batches look like
// drops (docs/results.md). After a change (and at the start) the first warmup batches only
// estimate μ and σ, and the detector runs once the model is 60 steps old
// and its feature budget full: measured with landmark blocks (`streamkpca
// bench drift --features landmarks`), a model restarted 45 steps earlier
// still settled by 3% and set it off. A rising score (a model still
// learning) never fires: the statistic is one-sided.
type monitor struct {
	// the held-out score: exponentially weighted sums per component and
	// of the weights, window qualityWindow points
	comp   []float64
	weight float64

	n      int       // batches since the last restart
	np     float64   // points in the reference since the last restart
	mu, vr float64   // the reference: the points' mean and variance
	s      float64   // the CUSUM statistic
	pts    []float64 // one batch's per-point scores (scratch)
}

// Monitor settings (see monitor).
const (
	monitorKappa  = 0.5
	monitorH      = 10
	monitorWarmup = 20
	// monitorArmAge is the steps since the model (re)started before the
	// detector runs; monitorMinDrop the least drop, relative to μ, that
	// counts.
	monitorArmAge  = 60
	monitorMinDrop = 0.02
	// monitorZMax caps one batch's standardised drop: the batch means of
	// 32 held-out shares have a heavy lower tail (a few points far out,
	// whose variance the top components barely capture), and one such
	// batch must not count as several.
	monitorZMax   = 3
	monitorPoints = 8192 // held-out points of the reference μ, σ
	qualityWindow = 1024 // held-out points of the reported score
)

// observe adds a held-out batch's per-point component scores c (rows×k)
// to the reported score and, when armed, runs the detector on the
// points' totals. It reports a change.
func (m *monitor) observe(c []float64, rows, k int, armed bool) bool {
	if len(m.comp) != k {
		m.comp = make([]float64, k)
	}
	decay := math.Pow(1-1.0/qualityWindow, float64(rows))
	for q := range m.comp {
		m.comp[q] *= decay
	}
	m.weight = m.weight*decay + float64(rows)
	m.pts = m.pts[:0]
	for r := range rows {
		var f float64
		for q, v := range c[r*k : r*k+k] {
			m.comp[q] += v
			f += v
		}
		m.pts = append(m.pts, f)
	}
	if !armed {
		return false
	}
	return m.detect(m.pts)
}

// detect runs the CUSUM on one batch of per-point scores: its mean
// against the reference mean μ of the points, in units of the standard
// error σ/√rows, σ the points' deviation.
func (m *monitor) detect(pts []float64) bool {
	var f float64
	for _, v := range pts {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
		f += v
	}
	rows := len(pts)
	if rows == 0 {
		return false
	}
	f /= float64(rows)
	m.n++
	if m.n <= monitorWarmup || m.s == 0 {
		for _, v := range pts {
			m.np++
			rate := 1 / math.Min(m.np, monitorPoints)
			d := v - m.mu
			if m.np == 1 {
				m.mu, m.vr = v, 0
				continue
			}
			m.mu += rate * d
			m.vr = (1 - rate) * (m.vr + rate*d*d)
		}
	}
	if m.n <= monitorWarmup {
		return false
	}
	se := math.Sqrt(m.vr / float64(rows))
	if !(se > 0) {
		return false
	}
	kappa := math.Max(monitorKappa, monitorMinDrop*math.Abs(m.mu)/se)
	z := math.Min((m.mu-f)/se, kappa+monitorZMax)
	m.s = math.Max(0, m.s+z-kappa)
	if m.s <= monitorH {
		return false
	}
	m.restart()
	return true
}

// restart begins a new reference after a change: the scores of the old
// model say nothing of the new one's noise. The reported score goes on.
func (m *monitor) restart() {
	m.n, m.np, m.mu, m.vr, m.s = 0, 0, 0, 0, 0
}

// state is the detector's state for a snapshot, nil before it has a
// reference.
func (m *monitor) state() *snapshot.Detector {
	if m.n == 0 {
		return nil
	}
	return &snapshot.Detector{Batches: m.n, Points: m.np, Mean: m.mu, Var: m.vr, CUSUM: m.s}
}

// resumeDetector continues the detector of a snapshot's state (nil: it
// starts afresh, with its warm-up, as it did before snapshots carried
// it).
func (m *monitor) resumeDetector(d *snapshot.Detector) {
	if d == nil {
		return
	}
	m.n, m.np, m.mu, m.vr, m.s = d.Batches, d.Points, d.Mean, d.Var, d.CUSUM
}

// resume continues the reported score of a snapshot's (nil: none); the
// detector, see resumeDetector.
func (m *monitor) resume(q *snapshot.Quality) {
	if q == nil || !(q.Points > 0) || len(q.Components) == 0 {
		return
	}
	m.weight = q.Points
	m.comp = make([]float64, len(q.Components))
	for i, v := range q.Components {
		m.comp[i] = v * q.Points
	}
}

// quality returns the reported score, nil before any held-out point.
func (m *monitor) quality() *snapshot.Quality {
	if m.weight == 0 {
		return nil
	}
	q := &snapshot.Quality{Components: make([]float64, len(m.comp)), Points: m.weight}
	for i, v := range m.comp {
		q.Components[i] = v / m.weight
		q.Score += q.Components[i]
	}
	return q
}

// DefaultHoldout is the held-out slice the service (configs:
// learner.holdout) and the benchmarks use: one point in 16. At batches of
// 512 that is 32 points a batch, enough for the detector's batch figure
// (see monitor).
const DefaultHoldout = 16

// HeldOut reports whether the point with key (for a Kafka message: its
// partition and offset, HoldoutKey) belongs to the held-out slice of one
// point in every: a hash of the key, so that a restart holds out the same
// points. every ≤ 1 holds out nothing.
func HeldOut(key uint64, every int) bool {
	if every <= 1 {
		return false
	}
	return splitmix.Mix(key)%uint64(every) == 0
}

// HoldoutKey is the key of a Kafka message for HeldOut.
func HoldoutKey(partition int, offset int64) uint64 {
	return uint64(partition)<<48 ^ uint64(offset)
}

// Assess is KPCA.Assess for pairs: it scores the served functions on rows
// held-out pairs (x, y as for Update) that the model has not learned,
// restarts the model (Forget) on a detected change unless Config.Forget
// is off, and reports whether a change was detected. A pair's score of
// component q is the product of its standardised values,
// (u_q − ū_q)(v_q − v̄_q)/(s_u·s_v) for kcca and ksir (whose mean is the
// held-out correlation), (u_q − ū_q)(v_q − v̄_q) for ksvd (the held-out
// singular value), with the means and deviations of the held-out pairs
// before it (exponentially weighted over about 1,024 pairs).
func (l *TwoView) Assess(x, y []float64, rows int) (bool, error) {
	if len(l.v[0].seeds) == 0 || rows == 0 {
		return false, nil
	}
	if len(x)%rows != 0 || len(y)%rows != 0 {
		return false, fmt.Errorf("%w: %d x values and %d y values for %d rows", ErrInput, len(x), len(y), rows)
	}
	if err := checkValues(x, "x "); err != nil {
		return false, err
	}
	if err := checkValues(y, "y "); err != nil {
		return false, err
	}
	if err := l.checkDomain(x, y, len(x)/rows, len(y)/rows); err != nil {
		return false, err
	}
	k := l.cfg.K
	m := &l.mom
	m.grow(rows, k)
	l.EvalTo(0, m.u, x, rows)
	l.EvalTo(1, m.v, y, rows)
	m.score(rows, k, l.alg().correlated)
	restart := l.Forget
	if l.following() {
		restart = l.challengeNow
	}
	if l.detect(&l.mon, m.c, rows, k, l.budgetFull(), l.cfg.Forget, restart) {
		return true, nil
	}
	return l.followAssess(x, y, rows), nil
}

// Score is the served model's held-out score on rows pairs (x, y as for
// Update) that it has not learned, with no side effect: the sum over the
// k components of the pairs' correlation of u_q(x) and v_q(y) (kcca,
// ksir: the held-out canonical correlations, S_k) or of their covariance
// (ksvd: the held-out singular values). fit's stopping rule compares it
// from epoch to epoch. 0 before the first step or with fewer than 2 rows.
func (l *TwoView) Score(x, y []float64, rows int) (float64, error) {
	if len(l.v[0].seeds) == 0 || rows < 2 {
		return 0, nil
	}
	if len(x)%rows != 0 || len(y)%rows != 0 {
		return 0, fmt.Errorf("%w: %d x values and %d y values for %d rows", ErrInput, len(x), len(y), rows)
	}
	if err := checkValues(x, "x "); err != nil {
		return 0, err
	}
	if err := checkValues(y, "y "); err != nil {
		return 0, err
	}
	if err := l.checkDomain(x, y, len(x)/rows, len(y)/rows); err != nil {
		return 0, err
	}
	k := l.cfg.K
	u, v := make([]float64, rows*k), make([]float64, rows*k)
	l.EvalTo(0, u, x, rows)
	l.EvalTo(1, v, y, rows)
	n := float64(rows)
	var s float64
	for q := range k {
		var mu, mv float64
		for r := range rows {
			mu += u[r*k+q]
			mv += v[r*k+q]
		}
		mu, mv = mu/n, mv/n
		var suv, suu, svv float64
		for r := range rows {
			a, b := u[r*k+q]-mu, v[r*k+q]-mv
			suv += a * b
			suu += a * a
			svv += b * b
		}
		switch {
		case !l.alg().correlated:
			s += suv / n
		case suu > 0 && svv > 0:
			s += suv / math.Sqrt(suu*svv)
		}
	}
	return s, nil
}

// Quality returns the held-out score so far (see Assess), nil before
// any, with the current test's scores of its two learners (FitScores),
// evidence and level once it has bet on a pair.
func (l *TwoView) Quality() *snapshot.Quality {
	q := l.mon.quality()
	if q != nil && l.fol.test.rows > 0 {
		q.Fit, q.Challenger = l.FitScores()
		q.Evidence, q.Level = l.Evidence()
		q.Candidate = l.Candidate()
	}
	return q
}

// Forget restarts the model with the next Update, as KPCA.Forget.
func (l *TwoView) Forget() {
	if l.t > 0 {
		l.reset = true
	}
}

// restartModel is Forget's restart, done by Update.
func (l *TwoView) restartModel() {
	l.reset = false
	l.dropChallenger()
	l.restart = l.t
	for i := range l.v {
		v := &l.v[i]
		v.seeds, v.coef = v.seeds[:0], v.coef[:0]
		v.maxBlock = l.fullBlocks(i) // a model held small after a switch (followpair.go) starts again at its budget
		if v.fm.Landmarks {
			v.ev.TruncateLandmarks(0)
		}
		if v.center != nil {
			clear(v.center)
		}
	}
	l.lambda0, l.trace0, l.wnorm, l.trRun = 0, 0, 0, 0
	if l.cov != nil {
		l.cov.ws.Close()
		l.cov = nil
	}
	l.mom = moments{}
}

// moments are the exponentially weighted moments of the held-out values
// of the k pairs of functions (TwoView.Assess), and the scratch of one
// batch.
type moments struct {
	w                float64
	su, sv, suu, svv []float64
	u, v, c          []float64
}

func (m *moments) grow(rows, k int) {
	if len(m.su) != k {
		m.su, m.sv, m.suu, m.svv = make([]float64, k), make([]float64, k), make([]float64, k), make([]float64, k)
		m.w = 0
	}
	m.u, m.v, m.c = sized(m.u, rows*k), sized(m.v, rows*k), sized(m.c, rows*k)
}

// score sets c (rows×k) to each pair's component scores against the
// moments before it, then adds the pair to them. The first pairs, before
// the moments have a variance, score 0 and only feed the moments.
func (m *moments) score(rows, k int, corr bool) {
	const decay = 1 - 1.0/qualityWindow
	for r := range rows {
		u, v, c := m.u[r*k:r*k+k], m.v[r*k:r*k+k], m.c[r*k:r*k+k]
		for q := range k {
			c[q] = 0
			if m.w >= 2 {
				mu, mv := m.su[q]/m.w, m.sv[q]/m.w
				p := (u[q] - mu) * (v[q] - mv)
				if corr {
					vu, vv := m.suu[q]/m.w-mu*mu, m.svv[q]/m.w-mv*mv
					if vu > 0 && vv > 0 {
						p /= math.Sqrt(vu * vv)
					} else {
						p = 0
					}
				}
				c[q] = p
			}
			m.su[q] = m.su[q]*decay + u[q]
			m.sv[q] = m.sv[q]*decay + v[q]
			m.suu[q] = m.suu[q]*decay + u[q]*u[q]
			m.svv[q] = m.svv[q]*decay + v[q]*v[q]
		}
		m.w = m.w*decay + 1
	}
}

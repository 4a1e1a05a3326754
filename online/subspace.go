package online

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// Solver names the update rule of the one-view learners.
type Solver string

// Solvers.
const (
	// SolverSubspace is the default: stochastic orthogonal (block power)
	// iteration over all feature blocks, orthonormalised every step. See
	// subspace.
	SolverSubspace Solver = "subspace"
	// SolverOja is the paper's rule (Alg. 1–2 in mini-batch form): the
	// new block alone receives the gradient and the old ones are shrunk,
	// α ← α(I − ηM). Its step must keep η·λ_max ≤ 1, so a component with a
	// small eigenvalue moves at η·λ_i and small eigengaps converge slowly.
	SolverOja Solver = "oja"
	// SolverCovariance keeps the covariances of a fixed budget of feature
	// blocks and solves in their span every step: PCA for kpca and gha
	// (the default with landmark blocks: streaming Nyström PCA),
	// regularised CCA for kcca (its default); see covariance.
	SolverCovariance Solver = "covariance"
)

// Subspace-solver defaults: η_t = θ₀/(1+θ₁t)/(n·λ̂_k), and blocks of 512
// features. A block is learned by the steps after it joins, so features
// must join while the step is still large: with 128 features a step, the
// 32,768 of the default budget join until step 256, when θ_t is down to
// 0.07, and the last half barely moves (MNIST, k = 10: 1.1e-2 held-out
// subspace error with 128, 5.5e-3 with 512, the budget reached by step 64).
const (
	DefaultSubspaceTheta0    = 1.0
	DefaultSubspaceTheta1    = 0.05
	DefaultSubspaceBlockSize = 512
)

// DefaultRandomTheta0 is θ₀'s default for uncentred kpca with the
// subspace solver and random features (the service's default model).
// The rate at which the k-th component closes on the top k is
// θ_t·(λ_k − λ_{k+1})/λ_k a step, and on real streams whose leading
// eigenvalues are close, θ₀ = 1 left the learner 9–44× above the floor
// of its own features after a dozen passes; the iterate's larger noise
// at a larger step is what the served average (Config.Average) removes.
// Measured (docs/results.md, "The step, not the columns", 2026-12-06),
// k = 10, seed 1, error against exact kernel PCA of the rows at θ₀ =
// 1 / 2 / 4 / 8: UCI digits 1.7e-2 / 6.6e-3 / 5.2e-3 / –, spam 0.131 /
// 0.044 / 0.016 / –, breast cancer 0.137 / 0.018 / 3.2e-3 / –, MNIST
// 5.2e-4 / 3.0e-4 / 3.1e-4 / 3.7e-4; the 1-D and 16-D hermite streams
// within 6% of θ₀ = 1 (3.58e-5 against 3.79e-5; 16-D in results.md).
const DefaultRandomTheta0 = 4.0

// DefaultSubspaceCentredTheta0 is θ₀'s default for a centred model
// (Config.Center). Centring removes the near-constant top eigenfunction,
// and the components left have small relative eigengaps (the k-th
// against the (k+1)-th), which the rate θ_t·(λ_k − λ_{k+1})/λ_k closes
// slowly at θ₀ = 1. Measured (docs/results.md, 2026-11-27, fourth
// session): centred MNIST, k = 10, held-out subspace error after 7
// epochs 0.0935 at θ₀ = 1, 0.0295 at 2, 0.0149 at 3, 0.0101 at 4,
// 8.1e-3 at 5; on centred 1-D and 16-D hermite streams (300,000 points)
// θ₀ = 5 ends where θ₀ = 1 does within the truth's own accuracy (2.3e-4
// against 2.2e-4, 4.6e-3 against 3.9e-3, exact centred kernel PCA of
// 6,000 and 5,000 points). Uncentred models keep θ₀ = 1: on the 1-D
// hermite stream θ₀ = 2 ended at 5.8e-5 against 3.3e-5.
const DefaultSubspaceCentredTheta0 = 5.0

// DefaultAverage is the subspace solver's averaging window (Config.Average):
// the served functions average the iterates of about the last 30% of the
// steps. Measured with the defaults otherwise (docs/results.md): on the
// 1-D hermite stream, 1M points, three stream seeds, final error 4.2e-5,
// 2.6e-5, 4.2e-6 against the last iterate's 5.8e-5, 2.9e-5, 8.0e-6;
// 16-D hermite 6.6e-4 against 7.3e-4; MNIST k = 10 higher than the
// iterate for five epochs, lower from the seventh.
const DefaultAverage = 0.3

// subspace is the state of the subspace solver (Config.Solver
// SolverSubspace).
//
// # The step
//
// With A the coefficients of all n blocks (n·B × k), H = Φ(X)·A on the
// batch and H̃ its centred version (when centring):
//
//	A ← A + η·Φ(X)ᵀ·H̃/b          every block; a new one is appended at 0
//	A ← A·L⁻ᵀ/√n,  AᵀA = L·Lᵀ      orthonormalise (CholeskyQR)
//
// The first line is the paper's functional gradient (Eq. 6, the term
// k(x,·)·f(x) of Alg. 1) applied through every block's random features
// instead of the new block's only. It costs one more product of the
// features with H: EvalKeep keeps the features it computed for H. The
// second replaces the paper's shrinking term −η·f·M, which is its
// first-order form: with it η is no longer bound by 1/λ_max, and
// η = θ_t/(n·λ̂_k) moves the k-th component at rate θ_t whatever λ_1/λ_k
// is (stochastic power method; Oja 1982 for the orthonormalised form,
// Hardt & Price 2014 for its noise analysis). The decay θ_t = θ₀/(1+θ₁t)
// averages the batch noise as the Oja rule's schedule does. Each block's
// features approximate the kernel on their own, so the gradient through n
// blocks is n·K·f: hence the n. AᵀA = I/n makes the functions unit-norm
// in the RKHS of the averaged kernel (1/n)·Σ_j Φ_jΦ_jᵀ, so M = H̃ᵀH̃/b
// estimates the operator's eigenvalues, as under the Oja rule.
//
// CholeskyQR mixes each column only with those before it, so the first
// column converges to the top eigenfunction, the first two span the top
// two, and so on (orthogonal iteration): the functions come out ordered,
// as GHA's do.
//
// # What is served
//
// With a decaying step the iterate still fluctuates around its limit
// (on 1-D hermite its error moves by a factor of up to ten between
// checkpoints 30% apart). The model served is a running average of the
// iterates instead (Polyak–Ruppert averaging; Tripuraneni et al. 2018 for
// averaging on the Grassmann and Stiefel manifolds, where the Euclidean
// mean of nearby iterates followed by a retraction is the practical
// form):
//
//	Ā ← Ā + ρ_t·(A − Ā),  ρ_t = 1/(1 + q·t)       every step
//	served: Ā·L̄⁻ᵀ/√n,  ĀᵀĀ = L̄·L̄ᵀ                  when served
//
// A new block enters Ā with zero history (its rows start at ρ_t times the
// iterate's). ρ_t = 1/(1 + q·t) weighs about the last q·t steps (q =
// Config.Average), so Ā lags the iterate by a fixed fraction of the run,
// not a fixed number of steps. Orthonormalising Ā (the same CholeskyQR,
// a retraction) makes the served functions unit-norm and ordered; the
// columns' signs are continuous from step to step, so the mean does not
// cancel. A step pays rows·k multiply-adds for the mean; the rows·k²
// orthonormalisation is paid when the model is served (a snapshot, an
// EvalTo), not every step. The learner steps from A alone; what EvalTo
// and Snapshot serve is the orthonormalised Ā, and a snapshot carries A
// and Ā as learner state (snapshot.Averaged).
type subspace struct {
	k        int
	grad     []float64 // gradient of the existing blocks, like alpha
	mean     []float64 // batch column means of the existing blocks' features (centring)
	newMean  []float64 // the same for the new block
	gram, tm []float64 // k×k: AᵀA then L; L⁻ᵀ/√n
	eig      []float64 // eigenvalue estimates: running average of diag M
	eigNext  []float64 // a data-parallel step's estimates before it is applied
	v        []float64 // k scratch

	// The running average avg (like alpha) of the iterates and, when
	// centring, of their centres (avgCenter); window is q of
	// ρ_t = 1/(1+q·t), 0 when averaging is off. avg is empty until the
	// first step. out and outCenter are what is served: avg
	// orthonormalised, recomputed when stale; out shares grad's buffer
	// (see served), so writing the gradient makes it stale.
	avg, avgCenter []float64
	out, outCenter []float64
	window         float64
	stale, outOK   bool
}

func newSubspace(k, maxRows, nb int, center bool, window float64) *subspace {
	s := &subspace{k: k, gram: make([]float64, k*k), tm: make([]float64, k*k), eig: make([]float64, k), eigNext: make([]float64, k), v: make([]float64, k),
		grad: make([]float64, 0, maxRows*k), window: window}
	if center {
		s.mean = make([]float64, 0, maxRows)
		s.newMean = make([]float64, nb)
	}
	if window > 0 {
		s.avg = make([]float64, 0, maxRows*k)
		if center {
			s.avgCenter = make([]float64, 0, k)
			s.outCenter = make([]float64, 0, k)
		}
	}
	return s
}

// reserve makes room for maxRows coefficient rows (a raised budget,
// KPCA.RaiseBudget): the step reslices grad and mean to the model's rows.
func (s *subspace) reserve(maxRows int) {
	if n := maxRows * s.k; cap(s.grad) < n {
		s.grad = slices.Grow(s.grad, n-len(s.grad))
	}
	if s.mean != nil && cap(s.mean) < maxRows {
		s.mean = slices.Grow(s.mean, maxRows-len(s.mean))
	}
}

// average moves the running average towards the iterate alpha (centre
// center, nil without centring) after step t, as the type's comment
// says. The first call sets Ā = A. It costs rows·k multiply-adds; the
// orthonormalisation waits until the model is served (served).
func (s *subspace) average(alpha, center []float64, t uint64) {
	if s.window == 0 {
		return
	}
	s.stale = true
	n := len(s.avg)
	if n == 0 || n > len(alpha) {
		s.avg = append(s.avg[:0], alpha...)
		s.avgCenter = append(s.avgCenter[:0], center...)
		return
	}
	s.avg = slices.Grow(s.avg, len(alpha)-n)[:len(alpha)]
	clear(s.avg[n:]) // a new block: no history
	rho := 1 / (1 + s.window*float64(t))
	for i, a := range alpha {
		s.avg[i] += rho * (a - s.avg[i])
	}
	for q, c := range center {
		s.avgCenter[q] += rho * (c - s.avgCenter[q])
	}
}

// served returns the served functions: the average orthonormalised (and
// its centre through the same T), computed when the average has moved
// since the last call. It returns false before the first average, with
// averaging off, when alpha (the iterate) has grown past the average, or
// if the average lost rank (not reachable with a well-conditioned
// iterate); the iterate is served then.
func (s *subspace) served(alpha []float64, nblocks int) ([]float64, []float64, bool) {
	if s == nil || s.window == 0 || len(s.avg) == 0 || len(s.avg) != len(alpha) {
		return nil, nil, false
	}
	if s.stale {
		// The served copy lives in the gradient's buffer: the gradient is
		// needed only within a step, the served copy only between steps,
		// and a step marks it stale before it writes the gradient (one
		// features × k array less: 31 MB at 187,392 features and k = 21).
		s.out = append(s.grad[:0], s.avg...)
		s.outCenter = append(s.outCenter[:0], s.avgCenter...)
		s.outOK = s.orthonormalise(s.out, nblocks)
		if s.outOK && len(s.outCenter) > 0 {
			s.rowTimesTm(s.outCenter)
		}
		s.stale = false
	}
	if !s.outOK {
		return nil, nil, false
	}
	return s.out, s.outCenter, true
}

// orthonormalise sets alpha (rows×k) to alpha·T, T = L⁻ᵀ/√n with
// AᵀA = L·Lᵀ, so that TᵀAᵀAT = I/n, and leaves T in tm. It reports false
// (alpha unchanged) if AᵀA is not positive definite: a column collapsed.
func (s *subspace) orthonormalise(alpha []float64, nblocks int) bool {
	k := s.k
	gramLower(s.gram, alpha, k)
	if _, ok := lapack64.Potrf(blas64.Symmetric{N: k, Stride: k, Data: s.gram, Uplo: blas.Lower}); !ok {
		return false
	}
	if !lapack64.Trtri(blas64.Triangular{N: k, Stride: k, Data: s.gram, Uplo: blas.Lower, Diag: blas.NonUnit}) {
		return false
	}
	sc := 1 / math.Sqrt(float64(nblocks))
	clear(s.tm)
	for i := 0; i < k; i++ { // tm = (L⁻¹)ᵀ·sc, upper triangular
		for j := 0; j <= i; j++ {
			s.tm[j*k+i] = s.gram[i*k+j] * sc
		}
	}
	// alpha ← alpha·T in place: column q of a row needs its columns ≤ q,
	// so go from the last column to the first.
	for i := 0; i+k <= len(alpha); i += k {
		row := alpha[i : i+k]
		for q := k - 1; q >= 0; q-- {
			var acc float64
			for r := 0; r <= q; r++ {
				acc += float64(row[r] * s.tm[r*k+q])
			}
			row[q] = acc
		}
	}
	return true
}

// gramLower sets the lower triangle of g (k×k) to AᵀA for a (rows×k),
// summed over the rows in order, and its strict upper triangle to 0.
func gramLower(g, a []float64, k int) {
	clear(g)
	for i := 0; i+k <= len(a); i += k {
		row := a[i : i+k]
		for p, vp := range row {
			gp := g[p*k : p*k+p+1]
			for j := range gp {
				gp[j] += float64(vp * row[j])
			}
		}
	}
}

// addMeanTimes adds meanᵀ·g (g is len(mean)×k) to c.
func addMeanTimes(c, mean, g []float64, k int) {
	for i, mu := range mean {
		for q, v := range g[i*k : i*k+k] {
			c[q] += mu * v
		}
	}
}

// rowTimesTm sets the row vector c (k) to c·T.
func (s *subspace) rowTimesTm(c []float64) {
	k := s.k
	clear(s.v)
	for r, x := range c {
		for q := 0; q < k; q++ {
			s.v[q] += x * s.tm[r*k+q]
		}
	}
	copy(c, s.v)
}

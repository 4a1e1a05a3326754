package online

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/lapack64"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/online/internal/dense"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Covariance-solver defaults and limits (Config.Solver SolverCovariance).
const (
	// DefaultRidge is the ridge added to each view's feature covariance,
	// relative to its mean eigenvalue. On MNIST halves (k = 50, 2,048
	// Nyström features per view, 8,000 pairs) the held-out S50 of
	// regularised CCA is 38.2 at 1e-3, 41.0 at 1e-2 and 40.7 at 1e-1.
	DefaultRidge = 1e-2
	// DefaultCovarianceMaxFeatures is MaxFeatures' default under the
	// covariance solver: the statistics take 5·m² float64 per view pair
	// (m = features per view), 160 MiB at 2,048.
	DefaultCovarianceMaxFeatures = 2048
	// DefaultCovarianceBlockSize fills the default budget in four batches.
	DefaultCovarianceBlockSize = 512
	// MaxCovarianceFeatures bounds m: the statistics grow as m².
	MaxCovarianceFeatures = 8192
)

// covariance is the state of the covariance solver: running sums of the
// features of every block of both views, once each view's feature budget
// is full, and the warm-started basis of the last solve.
//
// # The step
//
// With Φ (b×m_x) and Ψ (b×m_y) the features of every block of the two
// views on the batch, the sums
//
//	S_xx += ΦᵀΦ,  S_yy += ΨᵀΨ,  S_xy += ΦᵀΨ,  s_x += Φᵀ1,  s_y += Ψᵀ1,  n += b
//
// give the (centred) covariances C = S/n − μμᵀ of the features seen since
// the budget filled. Every few steps (see due) the learner then solves
// regularised CCA (the paper's
// Eq. 13 with the ridge of its Sec. 5.3) in the span of those features:
// with C_xx + r_x·I = U_xᵀU_x and C_yy + r_y·I = U_yᵀU_y (Cholesky), the
// canonical directions are α = U_x⁻¹P, β = U_y⁻¹Q for the top-k singular
// pairs (P, Q) of T = U_x⁻ᵀ·C_xy·U_y⁻¹. They come from subspace iteration
// on p = min(2k, m) columns warm-started from the previous step's Q, with
// a Rayleigh–Ritz rotation (the SVD of TᵀP through the p×p eigenproblem
// of its Gram matrix), two iterations a solve, so
// that a stationary stream converges at the rate (ρ_{p+1}/ρ_k)^iterations;
// a step costs O(b·m²), a solve O(m³/3 + m²·p).
//
// Unlike the paper's rule, no direction moves at a rate bound by its
// feature variance (Sec. 5.3's η·λ ≤ 1), which is what keeps Alg. 4 from
// the small canonical directions of real data; the price is the m² state
// and a step that costs what a Nyström CCA of m features costs per batch.
// The blocks themselves (seeds, or landmark points) and the model format
// do not change: the solve writes the coefficients of the same blocks.
type covariance struct {
	m       [2]int
	p       int
	n       float64
	nSolved float64      // n at the last solve
	s       [2][]float64 // S_xx, S_yy (m×m, upper triangle used)
	sxy     []float64    // S_xy (m_x×m_y)
	sum     [2][]float64 // s_x, s_y
	solves  uint64
	ridge   float64
	seed    uint64
	phi     [2][]float64 // b×m features of a batch
	chol    [2][]float64 // U_x, U_y
	mu      [2][]float64
	q       []float64 // m_y×p warm start
	z1, z2  []float64 // max(m)×p scratch
	pm, r   []float64 // m_x×p, m_y×p
	g, ev   []float64 // p×p, p
	tau     []float64 // p
	work    []float64
	cor     []float64       // the last solve's canonical correlations (p)
	search  *ridgeSearch    // kcca with the ridge chosen on held-out pairs; nil otherwise
	gu      []float64       // one view with landmarks: U, UᵀU = G + δI, the features' Gram matrix in the RKHS (see setGram); nil otherwise
	ws      dense.Workspace // the products, factorisations and solves
}

// basisSize is the number of columns p of the solve's basis: 2k for two
// views (m_x, m_y), and k + max(k, 10) for one view (m_y = 0), whose
// solves are cheap enough to carry more oversampling.
func basisSize(mx, my, k int) int {
	if my == 0 {
		return min(k+max(k, 10), mx)
	}
	return min(2*k, mx, my)
}

// newCovariance returns empty statistics for two views of mx and my
// features, or for one view of mx features when my is 0 (kpca and gha;
// see solvePCA).
func newCovariance(mx, my, k int, ridge float64, seed uint64, workers int) *covariance {
	return newCovarianceSharing(mx, my, k, ridge, seed, workers, [2][]float64{})
}

// newCovarianceSharing is newCovariance with the Cholesky factors' room
// taken from chol where it is large enough: the factors are a solve's
// scratch, so problems that never solve at the same time can share it
// (the ridge choice's leading problem and the whole; see leading).
func newCovarianceSharing(mx, my, k int, ridge float64, seed uint64, workers int, chol [2][]float64) *covariance {
	p := basisSize(mx, my, k)
	c := &covariance{m: [2]int{mx, my}, p: p, ridge: ridge, seed: seed, ws: dense.Workspace{Workers: workers}}
	for i, m := range c.m {
		c.s[i] = make([]float64, m*m)
		c.sum[i] = make([]float64, m)
		c.chol[i] = chol[i][:0]
		if cap(c.chol[i]) < m*m {
			c.chol[i] = make([]float64, m*m)
		}
		c.chol[i] = c.chol[i][:m*m]
		c.mu[i] = make([]float64, m)
	}
	c.sxy = make([]float64, mx*my)
	mm := max(mx, my)
	c.z1, c.z2 = make([]float64, mm*p), make([]float64, mm*p)
	c.pm, c.r = make([]float64, mx*p), make([]float64, my*p)
	c.g, c.ev, c.cor, c.tau = make([]float64, p*p), make([]float64, p), make([]float64, p), make([]float64, p)
	// The first basis: standard normals from the model seed, so that the
	// solve is deterministic.
	qr := my
	if my == 0 {
		qr = mx
	}
	c.q = make([]float64, qr*p)
	rng := rand.New(rand.NewPCG(seed, 0xC0FA))
	for i := range c.q {
		c.q[i] = rng.NormFloat64()
	}
	orthonormalise(c.q, qr, p, c.tau, &c.work)
	return c
}

// due reports whether a solve is due. One view: every step (a solve costs
// a few products of the m×m covariance with the m×p basis, a fraction of
// adding the batch's b·m²). Two views: during the first four (the basis
// starts random), then whenever the statistics have grown by (2/3)·m
// samples since the last, m the larger view's features: a solve's two
// Cholesky factorisations cost (2/3)·m³ flops and adding b samples costs
// about 3·b·m², so solves then take about a quarter of the time.
func (c *covariance) due() bool {
	return c.m[1] == 0 || c.solves < 4 || c.n-c.nSolved >= 2*float64(max(c.m[0], c.m[1]))/3
}

// add accumulates the features phi[i] (rows×m_i) of one batch.
func (c *covariance) add(rows int) {
	for i, m := range c.m {
		if m == 0 {
			continue
		}
		f := dense.Dense(rows, m, c.phi[i][:rows*m])
		c.ws.Gemm(dense.Op{TransA: true, Upper: true}, f, f, dense.Dense(m, m, c.s[i]))
		for r := 0; r < rows; r++ {
			for j, v := range c.phi[i][r*m : r*m+m] {
				c.sum[i][j] += v
			}
		}
	}
	mx, my := c.m[0], c.m[1]
	if my > 0 {
		c.ws.Gemm(dense.Op{TransA: true},
			dense.Dense(rows, mx, c.phi[0][:rows*mx]),
			dense.Dense(rows, my, c.phi[1][:rows*my]),
			dense.Dense(mx, my, c.sxy))
	}
	c.n += float64(rows)
}

// solve writes the top-k regularised canonical directions of the
// statistics into ax (m_x×k) and ay (m_y×k), each scaled to unit
// regularised variance, after iters subspace iterations. With center
// the covariances are centred. It reports an error, leaving ax and ay
// alone, if a covariance is not positive definite.
func (c *covariance) solve(ax, ay []float64, k, iters int, center bool) error {
	p := c.p
	if err := c.factorCovariances(center); err != nil {
		return err
	}
	for range iters {
		if err := c.iterate(); err != nil {
			return err
		}
	}
	// α = U_x⁻¹·P[:, :k], β = U_y⁻¹·Q[:, :k]: unit regularised variance.
	for i, dst := range [][]float64{ax, ay} {
		m, src := c.m[i], c.pm
		if i == 1 {
			src = c.q
		}
		for r := 0; r < m; r++ {
			copy(dst[r*k:r*k+k], src[r*p:r*p+k])
		}
		c.ws.SolveUpper(dense.Dense(m, m, c.chol[i]), dense.Dense(m, k, dst), false)
	}
	c.solves++
	c.nSolved = c.n
	return nil
}

// factorCovariances writes into c.chol the upper Cholesky factor U of
// each view's regularised covariance, C + r·I with r the ridge times the
// mean feature variance (centred when center), and into c.mu each view's
// mean (zero unless center).
func (c *covariance) factorCovariances(center bool) error {
	for i, m := range c.m {
		u := c.chol[i]
		mu := c.mu[i]
		for j := range mu {
			mu[j] = 0
			if center {
				mu[j] = c.sum[i][j] / c.n
			}
		}
		var tr float64
		for a := 0; a < m; a++ {
			for b := a; b < m; b++ {
				u[a*m+b] = c.s[i][a*m+b]/c.n - mu[a]*mu[b]
			}
			tr += u[a*m+a]
		}
		r := c.ridge * tr / float64(m)
		if !(r > 0) {
			return fmt.Errorf("%w: view %d's features have no variance", ErrInput, i)
		}
		for a := 0; a < m; a++ {
			u[a*m+a] += r
		}
		if !c.ws.Cholesky(dense.Dense(m, m, u)) {
			return fmt.Errorf("%w: view %d's regularised covariance is not positive definite", ErrDiverged, i)
		}
	}
	return nil
}

// iterate is one subspace iteration on T = U_x⁻ᵀ·C_xy·U_y⁻¹ (c.applyT):
// P = orth(T·Q), R = Tᵀ·P, then a Rayleigh–Ritz step on RᵀR gives the
// canonical correlations (c.cor) and rotates P and Q to them.
func (c *covariance) iterate() error {
	p := c.p
	mx, my := c.m[0], c.m[1]
	// P = orth(T·Q), then R = Tᵀ·P.
	c.applyT(c.pm, c.q, false)
	orthonormalise(c.pm, mx, p, c.tau, &c.work)
	c.applyT(c.r, c.pm, true)
	// R = Ũ·Σ·Vᵀ from RᵀR = V·Σ²·Vᵀ; then T ≈ (P·V)·Σ·Ũᵀ.
	g := dense.Dense(p, p, c.g)
	rm := dense.Dense(my, p, c.r)
	clear(c.g)
	c.ws.Gemm(dense.Op{TransA: true}, rm, rm, g)
	if !c.eigDesc() {
		return fmt.Errorf("%w: the Rayleigh–Ritz eigenproblem did not converge", ErrDiverged)
	}
	// Q ← R·V·Σ⁻¹ (the right singular vectors), P ← P·V, each pair's
	// sign chosen to agree with the previous Q (the eigensolver's signs
	// are arbitrary; the served functions should not flip).
	rv := c.z2[:my*p]
	clear(rv)
	c.ws.Gemm(dense.Op{}, rm, g, dense.Dense(my, p, rv))
	for j := 0; j < p; j++ {
		var s float64
		for r := 0; r < my; r++ {
			s += c.q[r*p+j] * rv[r*p+j]
		}
		if s < 0 {
			for r := 0; r < my; r++ {
				rv[r*p+j] = -rv[r*p+j]
			}
			for r := 0; r < p; r++ {
				c.g[r*p+j] = -c.g[r*p+j]
			}
		}
	}
	copy(c.q, rv)
	for j := 0; j < p; j++ {
		c.cor[j] = math.Sqrt(math.Max(c.ev[j], 0))
	}
	copy(c.z1[:mx*p], c.pm)
	clear(c.pm)
	c.ws.Gemm(dense.Op{}, dense.Dense(mx, p, c.z1[:mx*p]), g, dense.Dense(mx, p, c.pm))
	normaliseColumns(c.q, my, p)
	return nil
}

// landmarkGram returns the inner products in the RKHS of the features of
// the landmark blocks of ev (seeds: one per block): an m×m matrix, m =
// blocks·B, of which the upper triangle is set. Block (i, j) is
// L_i⁻¹·K(Z_i, Z_j)·L_j⁻ᵀ, that is L_i⁻¹ times block j's features at
// block i's landmarks. The diagonal blocks are I up to the landmarks'
// jitter; the others are how the blocks' functions overlap.
func landmarkGram(ev *features.Evaluator, seeds []uint64, ws *dense.Workspace) []float64 {
	nb, blocks := ev.Map().BlockSize, len(seeds)
	m := blocks * nb
	g := make([]float64, m*m)
	psi := make([]float64, nb*nb)
	gm := dense.Dense(m, m, g)
	for i := range blocks {
		_, li := ev.Landmarks(i)
		for j := i; j < blocks; j++ {
			ev.PhiTo(psi, li.Z, nb, j, seeds[j])
			ws.Gemm(dense.Op{TransA: true}, dense.Dense(nb, nb, li.InvLT()), dense.Dense(nb, nb, psi),
				gm.Slice(i*nb, (i+1)*nb, j*nb, (j+1)*nb))
		}
	}
	return g
}

// gatherFeatures sets c.phi[i] (rows × m_i) to the features of every block
// of one view at the rows points xs: block j (seed seeds[j], evaluated by
// ev into one, rows×B scratch) fills columns j·B … j·B+B−1. It reports an
// error, leaving the statistics alone, when a value is not finite or
// exceeds 1e150 in magnitude: an unbounded kernel on a huge input, whose
// sums would overflow.
func (c *covariance) gatherFeatures(i int, one []float64, ev *features.Evaluator, xs []float64, rows int, seeds []uint64) error {
	m, nb := c.m[i], ev.Map().BlockSize
	if cap(c.phi[i]) < rows*m {
		c.phi[i] = make([]float64, rows*m)
	}
	phi := c.phi[i][:rows*m]
	for j, seed := range seeds {
		ev.PhiTo(one, xs, rows, j, seed)
		for r := 0; r < rows; r++ {
			copy(phi[r*m+j*nb:r*m+(j+1)*nb], one[r*nb:(r+1)*nb])
		}
	}
	for _, f := range phi {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e150 {
			return fmt.Errorf("a feature value is %v", f)
		}
	}
	return nil
}

// setGram gives the one-view solve the features' inner products in the
// RKHS, G (m×m, upper triangle read): with landmark blocks the features
// of different blocks are not orthonormal there, and G tells how they
// overlap (see KPCA.landmarkGram). It factors G + δI, δ = 1e-10 times
// G's mean diagonal, raised ×100 until the factorisation succeeds, and
// reports false (the solve then keeps the blocks' averaged kernel) if
// it never does.
func (c *covariance) setGram(g []float64) bool {
	m := c.m[0]
	var tr float64
	for i := 0; i < m; i++ {
		tr += g[i*m+i]
	}
	if !(tr > 0) || math.IsInf(tr, 0) {
		return false
	}
	u := make([]float64, m*m)
	delta := 1e-10 * tr / float64(m)
	for range 6 {
		for i := 0; i < m; i++ {
			copy(u[i*m+i:i*m+m], g[i*m+i:i*m+m])
			u[i*m+i] += delta
		}
		if c.ws.Cholesky(dense.Dense(m, m, u)) {
			c.gu = u
			return true
		}
		delta *= 100
	}
	return false
}

// solvePCA is the one-view solve (kpca and gha): it writes the top-k
// eigenfunctions of the feature covariance C = S/n − μμᵀ (μ = 0 unless
// center) into a (m×k), unit-norm in the RKHS, and their eigenvalues
// into eig (k): kernel PCA (the paper's Eq. 1) in the span of the
// features, computed from everything the statistics hold.
//
// Random features: each block approximates the kernel on its own, so the
// concatenated features of n blocks define n times the averaged kernel
// (1/n)·Σ_j Φ_jΦ_jᵀ; a is C's top eigenvectors scaled by 1/√n (unit norm
// in that kernel's RKHS, AᵀA = I/n as the subspace solver's) and eig is
// C's eigenvalues divided by n. Landmark blocks (setGram): the features
// span the kernel's functions at every landmark of every block, with
// inner products G, and the eigenfunctions solve C·a = λ·G·a with
// aᵀGa = 1: Nyström kernel PCA on all the landmarks (Williams & Seeger
// 2001), streamed. Through G + δI = UᵀU it is the symmetric problem
// T = U⁻ᵀCU⁻¹, a = U⁻¹w.
//
// The basis Q (m×p) is warm-started from the previous solve. A solve
// applies T iters times: iters − 1 subspace iterations Q ← orth(T·Q),
// then a Rayleigh–Ritz rotation with Z = T·Q, QᵀZ = VΛVᵀ: the Ritz
// vectors Q·V give the coefficients and Λ the eigenvalues, and
// orth(Z·V) is the next solve's basis, one power step further. Every
// column's sign is kept (R's diagonal positive, V's diagonal
// non-negative), so the served functions do not flip between steps.
// From solve to solve this is subspace iteration on a slowly changing T,
// converging at the rate (λ_{p+1}/λ_k) per application.
func (c *covariance) solvePCA(a, eig []float64, k, iters, blocks int, center bool) error {
	m, p := c.m[0], c.p
	mu, cm := c.mu[0], c.chol[0] // C, full, in the Cholesky factor's room
	for j := range mu {
		mu[j] = 0
		if center {
			mu[j] = c.sum[0][j] / c.n
		}
	}
	for i := 0; i < m; i++ {
		for j := i; j < m; j++ {
			v := c.s[0][i*m+j]/c.n - mu[i]*mu[j]
			cm[i*m+j], cm[j*m+i] = v, v
		}
	}
	q := dense.Dense(m, p, c.q)
	z := dense.Dense(m, p, c.z1[:m*p])
	w := dense.Dense(m, p, c.z2[:m*p])
	for it := 0; it < iters-1; it++ {
		c.applyPCA(z, q)
		copy(q.Data, z.Data)
		orthonormalise(q.Data, m, p, c.tau, &c.work)
		alignColumns(q.Data, z.Data, m, p)
	}
	// Rayleigh–Ritz on Q with Z = T·Q: QᵀZ = VΛVᵀ, the Ritz vectors Q·V
	// give the coefficients, and orth(Z·V), one power step further, is
	// the next solve's start.
	c.applyPCA(z, q)
	g := dense.Dense(p, p, c.g)
	clear(c.g)
	c.ws.Gemm(dense.Op{TransA: true}, q, z, g)
	if !c.eigDesc() {
		return fmt.Errorf("%w: the Rayleigh–Ritz eigenproblem did not converge", ErrDiverged)
	}
	for j := 0; j < p; j++ {
		if c.g[j*p+j] < 0 {
			for r := 0; r < p; r++ {
				c.g[r*p+j] = -c.g[r*p+j]
			}
		}
	}
	clear(w.Data)
	c.ws.Gemm(dense.Op{}, q, g, w) // the Ritz vectors
	if !(c.ev[0] > 0) || math.IsInf(c.ev[0], 0) {
		return fmt.Errorf("%w: the features have no variance", ErrInput)
	}
	sc, per := 1/math.Sqrt(float64(blocks)), float64(blocks)
	if c.gu != nil {
		sc, per = 1, 1
	}
	for r := 0; r < m; r++ {
		for j, v := range w.Data[r*p : r*p+k] {
			a[r*k+j] = v * sc
		}
	}
	if c.gu != nil {
		c.ws.SolveUpper(dense.Dense(m, m, c.gu), dense.Dense(m, k, a[:m*k]), false)
	}
	for j := range eig[:k] {
		eig[j] = math.Max(c.ev[j], 0) / per
	}
	clear(w.Data)
	c.ws.Gemm(dense.Op{}, z, g, w)
	copy(q.Data, w.Data)
	orthonormalise(q.Data, m, p, c.tau, &c.work)
	alignColumns(q.Data, w.Data, m, p)
	c.solves++
	c.nSolved = c.n
	return nil
}

// alignColumns flips each column of q (m×p) whose inner product with the
// same column of ref is negative: after a QR of ref, R's diagonal is then
// positive, so a basis keeps its signs from one solve to the next.
func alignColumns(q, ref []float64, m, p int) {
	for j := 0; j < p; j++ {
		var s float64
		for r := 0; r < m; r++ {
			s += q[r*p+j] * ref[r*p+j]
		}
		if s < 0 {
			for r := 0; r < m; r++ {
				q[r*p+j] = -q[r*p+j]
			}
		}
	}
}

// applyPCA sets dst (m×p) to T·src: C·src, or U⁻ᵀ·C·U⁻¹·src with the
// Gram factor of setGram. C is full in c.chol[0].
func (c *covariance) applyPCA(dst, src dense.Mat) {
	m, p := c.m[0], c.p
	in := src
	if c.gu != nil {
		in = dense.Dense(m, p, c.z2[:m*p])
		copy(in.Data, src.Data)
		c.ws.SolveUpper(dense.Dense(m, m, c.gu), in, false)
	}
	clear(dst.Data)
	c.ws.Gemm(dense.Op{}, dense.Dense(m, m, c.chol[0]), in, dst)
	if c.gu != nil {
		c.ws.SolveUpper(dense.Dense(m, m, c.gu), dst, true)
	}
}

// applyPanel is the rows of T·src that applyT computes at a time.
const applyPanel = 512

// applyT sets dst to T·src (trans false: src m_y×p, dst m_x×p) or Tᵀ·src
// (trans true), T = U_x⁻ᵀ·C_xy·U_y⁻¹ and C_xy = S_xy/n − μ_x·μ_yᵀ.
func (c *covariance) applyT(dst, src []float64, trans bool) {
	p := c.p
	in, out := 1, 0 // T: the y side first
	if trans {
		in, out = 0, 1
	}
	mi, mo := c.m[in], c.m[out]
	z1 := dense.Dense(mi, p, c.z1[:mi*p])
	copy(z1.Data, src)
	c.ws.SolveUpper(dense.Dense(mi, mi, c.chol[in]), z1, false)
	o := dense.Dense(mo, p, dst)
	sxy := dense.Dense(c.m[0], c.m[1], c.sxy)
	clear(dst)
	// In panels of dst's rows: Gemm packs the part of S_xy it multiplies,
	// and a panel's copy is applyPanel·m_in where the whole would be m²
	// (the bits are the same: each element sums over m_in in order).
	for r0 := 0; r0 < mo; r0 += applyPanel {
		r1 := min(r0+applyPanel, mo)
		a := sxy.Slice(r0, r1, 0, c.m[1])
		if trans {
			a = sxy.Slice(0, c.m[0], r0, r1)
		}
		c.ws.Gemm(dense.Op{TransA: trans}, a, z1, o.Slice(r0, r1, 0, p))
	}
	inv := 1 / c.n
	for j := range dst {
		dst[j] *= inv
	}
	// − μ_out·(μ_inᵀ·z1)
	w := c.ev[:p] // scratch: overwritten by eigDesc later
	for j := range w {
		w[j] = 0
	}
	for a, m := range c.mu[in] {
		if m == 0 {
			continue
		}
		for j, v := range z1.Data[a*p : a*p+p] {
			w[j] += m * v
		}
	}
	for a, m := range c.mu[out] {
		if m == 0 {
			continue
		}
		row := dst[a*p : a*p+p]
		for j := range row {
			row[j] -= m * w[j]
		}
	}
	c.ws.SolveUpper(dense.Dense(mo, mo, c.chol[out]), o, true)
}

// eigDesc replaces c.g (p×p symmetric) by its eigenvectors and c.ev by
// its eigenvalues, both in decreasing order of the eigenvalue.
func (c *covariance) eigDesc() bool {
	p := c.p
	a := blas64.Symmetric{N: p, Stride: p, Data: c.g, Uplo: blas.Upper}
	if cap(c.work) < 1 {
		c.work = make([]float64, 1)
	}
	lapack64.Syev(lapack.EVCompute, a, c.ev, c.work[:1], -1)
	if n := int(c.work[0]); cap(c.work) < n {
		c.work = make([]float64, n)
	}
	if !lapack64.Syev(lapack.EVCompute, a, c.ev, c.work[:cap(c.work)], len(c.work[:cap(c.work)])) {
		return false
	}
	// Ascending → descending: reverse the values and the columns.
	for i, j := 0, p-1; i < j; i, j = i+1, j-1 {
		c.ev[i], c.ev[j] = c.ev[j], c.ev[i]
		for r := 0; r < p; r++ {
			c.g[r*p+i], c.g[r*p+j] = c.g[r*p+j], c.g[r*p+i]
		}
	}
	return true
}

// orthonormalise replaces the m×p matrix a (row-major) by the Q of its QR
// factorisation; tau (p) and work are scratch (work grows as needed).
func orthonormalise(a []float64, m, p int, tau []float64, work *[]float64) {
	g := blas64.General{Rows: m, Cols: p, Stride: p, Data: a}
	if cap(*work) < 1 {
		*work = make([]float64, 1)
	}
	w := (*work)[:1]
	lapack64.Geqrf(g, tau, w, -1)
	n := int(w[0])
	lapack64.Orgqr(g, tau, w, -1)
	n = max(n, int(w[0]), 1)
	if cap(*work) < n {
		*work = make([]float64, n)
	}
	lapack64.Geqrf(g, tau, (*work)[:n], n)
	lapack64.Orgqr(g, tau, (*work)[:n], n)
}

// normaliseColumns scales each column of the m×p matrix a (row-major) to
// unit norm; a zero column stays zero.
func normaliseColumns(a []float64, m, p int) {
	for j := 0; j < p; j++ {
		var s float64
		for r := 0; r < m; r++ {
			s += a[r*p+j] * a[r*p+j]
		}
		if s = math.Sqrt(s); s > 0 {
			for r := 0; r < m; r++ {
				a[r*p+j] /= s
			}
		}
	}
}

// state returns the statistics in the snapshot's layout (see
// snapshot.Covariance); nil and nil for a nil c (no statistics yet).
func (c *covariance) state() (*snapshot.Covariance, []float64) {
	if c == nil {
		return nil, nil
	}
	h := &snapshot.Covariance{Samples: c.n, SolvedAt: c.nSolved, Solves: c.solves, Features: c.m, Basis: c.p}
	n, _ := h.Len()
	out := make([]float64, 0, n)
	for i, m := range c.m {
		for a := 0; a < m; a++ {
			out = append(out, c.s[i][a*m+a:a*m+m]...)
		}
	}
	out = append(out, c.sxy...)
	out = append(out, c.sum[0]...)
	out = append(out, c.sum[1]...)
	return h, append(out, c.q...)
}

// restoreCovariance rebuilds the statistics from a snapshot's state for a
// learner with k components whose views have mx and my features.
func restoreCovariance(h *snapshot.Covariance, st []float64, mx, my, k int, ridge float64, seed uint64, workers int) (*covariance, error) {
	if h.Features != [2]int{mx, my} || h.Basis != basisSize(mx, my, k) {
		return nil, fmt.Errorf("%w: covariance state for %v features and basis %d, the model has %d, %d and k = %d",
			snapshot.ErrHeader, h.Features, h.Basis, mx, my, k)
	}
	c := newCovariance(mx, my, k, ridge, seed, workers)
	c.n, c.nSolved, c.solves = h.Samples, h.SolvedAt, h.Solves
	off := 0
	for i, m := range c.m {
		for a := 0; a < m; a++ {
			off += copy(c.s[i][a*m+a:a*m+m], st[off:])
		}
	}
	off += copy(c.sxy, st[off:])
	off += copy(c.sum[0], st[off:])
	off += copy(c.sum[1], st[off:])
	copy(c.q, st[off:])
	return c, nil
}

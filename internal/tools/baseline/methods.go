package baseline

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
)

// RFF is fixed random Fourier features + exact PCA: m features drawn once
// (blocks of B from seeds derived from Seed, the learner's generator), the
// uncentred second moment S = ΣΦ(x)ᵀΦ(x) accumulated by a rank-b update
// per batch (SYRK), and at Fit the top-k eigenvectors V of S; the
// eigenfunctions are f(x) = Φ(x)·V. Memory is O(m²), time O(b·m·(d + m))
// per batch plus O(m³) (or O(m²·k) per iteration) per Fit. Its error
// stops falling at the feature floor of m fixed features.
type RFF struct {
	K, M  int
	m     features.Map
	ev    *features.Evaluator
	seeds []uint64
	s     []float64 // m×m, upper triangle accumulated
	phi   []float64 // rows×m
	blk   []float64 // rows×B
	v     *mat.Dense
	warm  *mat.Dense
}

// NewRFF returns fixed random features for kernel kern on d-dimensional
// inputs: m features (rounded up to whole blocks of size block).
func NewRFF(kern features.Kernel, d, k, m, block int, seed uint64) (*RFF, error) {
	mp := features.Map{Kernel: kern, Dim: d, BlockSize: block}
	if err := mp.Validate(); err != nil {
		return nil, err
	}
	nb := (m + block - 1) / block
	r := &RFF{K: k, M: nb * block, m: mp, ev: features.NewEvaluator(mp, features.EvaluatorConfig{Workers: 1})}
	for j := 0; j < nb; j++ {
		r.seeds = append(r.seeds, features.DeriveSeed(seed, uint64(j)))
	}
	r.s = make([]float64, r.M*r.M)
	return r, nil
}

// Close releases the feature evaluator.
func (r *RFF) Close() { r.ev.Close() }

// features sets r.phi (rows×M) to Φ(x).
func (r *RFF) features(x []float64, rows int) []float64 {
	b := r.m.BlockSize
	if cap(r.phi) < rows*r.M {
		r.phi = make([]float64, rows*r.M)
		r.blk = make([]float64, rows*b)
	}
	phi, blk := r.phi[:rows*r.M], r.blk[:rows*b]
	for j, sd := range r.seeds {
		r.ev.PhiTo(blk, x, rows, j, sd)
		for i := 0; i < rows; i++ {
			copy(phi[i*r.M+j*b:i*r.M+(j+1)*b], blk[i*b:(i+1)*b])
		}
	}
	return phi
}

// Observe adds Φ(x)ᵀΦ(x) to the second moment.
func (r *RFF) Observe(x []float64, rows int) {
	phi := r.features(x, rows)
	blas64.Syrk(blas.Trans, 1, blas64.General{Rows: rows, Cols: r.M, Data: phi, Stride: r.M},
		1, blas64.Symmetric{Uplo: blas.Upper, N: r.M, Data: r.s, Stride: r.M})
}

// Fit computes the top-k eigenvectors of the second moment.
func (r *RFF) Fit() error {
	symmetrize(r.s, r.M)
	v, basis, err := topEig(r.s, r.M, r.K, r.warm)
	if v == nil {
		return err
	}
	r.v, r.warm = v, basis
	return err
}

// Eval sets dst (rows×k) to Φ(x)·V.
func (r *RFF) Eval(dst, x []float64, rows int) {
	project(dst, r.features(x, rows), rows, r.M, r.v)
}

// project sets dst (rows×k, k = w's columns) to the product of f
// (rows×m, row-major) with w (m×k): a method's features at a batch times
// its eigenvectors.
func project(dst, f []float64, rows, m int, w mat.Matrix) {
	_, k := w.Dims()
	out := mat.NewDense(rows, k, dst[:rows*k])
	out.Mul(mat.NewDense(rows, m, f), w)
}

// Nystrom is Nyström + exact PCA: the first m points become landmarks z,
// ψ(x) = k_z(x)·T with T = K_zz^{-1/2} (eigenvalues below 1e-10·λ_max
// dropped), G = Σk_z(x)ᵀk_z(x) accumulated per batch (SYRK), and at Fit
// the top-k eigenvectors V of T·G·T; the eigenfunctions are
// f(x) = k_z(x)·T·V. Memory O(m²), time O(b·m·(d + m)) per batch plus
// O(m³) per Fit. Points seen while the landmarks fill are kept and
// accumulated once they are complete, so no point is skipped.
type Nystrom struct {
	K, M  int
	d     int
	kern  features.Kernel
	z     []float64 // landmarks, M×d
	zn    []float64
	nz    int
	held  []float64 // points seen before the landmarks were complete
	t     *mat.Dense
	g     []float64 // M×M, upper triangle accumulated
	kb    []float64
	w     *mat.Dense // T·V, M×k
	ready bool
	err   error // from building T; Fit returns it
}

// NewNystrom returns Nyström with m landmarks for kernel kern.
func NewNystrom(kern features.Kernel, d, k, m int) (*Nystrom, error) {
	if err := kern.Validate(); err != nil {
		return nil, err
	}
	if m < k {
		return nil, fmt.Errorf("baseline: %d landmarks cannot give %d components", m, k)
	}
	return &Nystrom{K: k, M: m, d: d, kern: kern, z: make([]float64, 0, m*d), g: make([]float64, m*m)}, nil
}

// Observe takes landmarks from the first points, then accumulates G.
func (n *Nystrom) Observe(x []float64, rows int) {
	d := n.d
	if n.nz < n.M {
		take := min(rows, n.M-n.nz)
		n.z = append(n.z, x[:take*d]...)
		n.nz += take
		n.held = append(n.held, x[:rows*d]...)
		if n.nz < n.M {
			return
		}
		n.zn = make([]float64, n.M)
		for j := range n.zn {
			n.zn[j] = sqNorm(n.z[j*d : j*d+d])
		}
		if n.err = n.buildT(); n.err != nil {
			return
		}
		held := n.held
		n.held = nil
		n.accumulate(held, len(held)/d)
		return
	}
	if n.err == nil {
		n.accumulate(x, rows)
	}
}

func (n *Nystrom) gram(x []float64, rows int) []float64 {
	if cap(n.kb) < rows*n.M {
		n.kb = make([]float64, rows*n.M)
	}
	kb := n.kb[:rows*n.M]
	kernelGram(kb, x, rows, n.z, n.zn, n.M, n.d, n.kern)
	return kb
}

func (n *Nystrom) accumulate(x []float64, rows int) {
	const chunk = 1024
	for r := 0; r < rows; r += chunk {
		c := min(chunk, rows-r)
		kb := n.gram(x[r*n.d:(r+c)*n.d], c)
		blas64.Syrk(blas.Trans, 1, blas64.General{Rows: c, Cols: n.M, Data: kb, Stride: n.M},
			1, blas64.Symmetric{Uplo: blas.Upper, N: n.M, Data: n.g, Stride: n.M})
	}
	n.ready = true
}

// buildT sets T = K_zz^{-1/2} (pseudo-inverse square root).
func (n *Nystrom) buildT() error {
	kzz := make([]float64, n.M*n.M)
	kernelGram(kzz, n.z, n.M, n.z, n.zn, n.M, n.d, n.kern)
	symmetrize(kzz, n.M) // exact symmetry
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(n.M, kzz), true) {
		return errors.New("baseline: eigendecomposition of the landmark Gram matrix failed")
	}
	vals := es.Values(nil)
	var u mat.Dense
	es.VectorsTo(&u)
	top := vals[len(vals)-1]
	scaled := mat.DenseCopyOf(&u)
	for j, v := range vals {
		s := 0.0
		if v > 1e-10*top {
			s = 1 / math.Sqrt(v)
		}
		for i := 0; i < n.M; i++ {
			scaled.Set(i, j, scaled.At(i, j)*s)
		}
	}
	n.t = mat.NewDense(n.M, n.M, nil)
	n.t.Mul(scaled, u.T())
	return nil
}

// Fit computes the top-k eigenvectors of T·G·T.
func (n *Nystrom) Fit() error {
	if n.err != nil {
		return n.err
	}
	if !n.ready {
		return errors.New("baseline: Nyström has not seen its landmarks yet")
	}
	symmetrize(n.g, n.M)
	var tg, c mat.Dense
	tg.Mul(n.t, mat.NewDense(n.M, n.M, n.g))
	c.Mul(&tg, n.t)
	v, _, err := topEig(c.RawMatrix().Data, n.M, n.K, nil)
	if v == nil {
		return err
	}
	n.w = mat.NewDense(n.M, n.K, nil)
	n.w.Mul(n.t, v)
	return err
}

// Eval sets dst (rows×k) to k_z(x)·T·V.
func (n *Nystrom) Eval(dst, x []float64, rows int) {
	project(dst, n.gram(x, rows), rows, n.M, n.w)
}

// Exact is kernel PCA of the first N points: the Gram matrix K, its top-k
// eigenvectors U, and f(x) = k_X(x)·U. Memory O(N²), time O(N²·d) for
// the Gram matrix and O(N³) for the eigendecomposition.
type Exact struct {
	K, N int
	// Center learns the centred operator: the eigenvectors of H·K·H
	// (H = I − 11ᵀ/n), and Eval centres k_X(x) the same way, so the
	// functions have zero mean over the sample (Schölkopf et al. 1998).
	Center  bool
	d       int
	rowMean []float64 // mean of each Gram row (Center)
	mean    float64   // mean of the Gram matrix (Center)
	kern    features.Kernel
	x       []float64
	xn      []float64
	u       *mat.Dense
	kb      []float64
}

// NewExact returns exact kernel PCA of the first n points.
func NewExact(kern features.Kernel, d, k, n int) (*Exact, error) {
	if err := kern.Validate(); err != nil {
		return nil, err
	}
	if n < k {
		return nil, fmt.Errorf("baseline: %d points cannot give %d components", n, k)
	}
	return &Exact{K: k, N: n, d: d, kern: kern, x: make([]float64, 0, n*d)}, nil
}

// Full reports whether the sample is complete.
func (e *Exact) Full() bool { return len(e.x) == e.N*e.d }

// Observe keeps points until the sample is complete and ignores the rest.
func (e *Exact) Observe(x []float64, rows int) {
	take := min(rows, e.N-len(e.x)/e.d)
	e.x = append(e.x, x[:take*e.d]...)
}

// Fit finds the top-k eigenvectors of the Gram matrix of the points kept
// so far: a full eigendecomposition up to DenseEigMax points, subspace
// iteration with Rayleigh–Ritz above (residuals below 1e-7·λ₁).
func (e *Exact) Fit() error {
	n := len(e.x) / e.d
	if n < e.K {
		return errors.New("baseline: too few points for exact kernel PCA")
	}
	e.xn = make([]float64, n)
	for i := range e.xn {
		e.xn[i] = sqNorm(e.x[i*e.d : i*e.d+e.d])
	}
	g := make([]float64, n*n)
	kernelGram(g, e.x[:n*e.d], n, e.x[:n*e.d], e.xn, n, e.d, e.kern)
	symmetrize(g, n)
	if e.Center {
		e.rowMean = make([]float64, n)
		e.mean = 0
		for i := 0; i < n; i++ {
			var s float64
			for _, v := range g[i*n : i*n+n] {
				s += v
			}
			e.rowMean[i] = s / float64(n)
			e.mean += s / float64(n*n)
		}
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				g[i*n+j] += e.mean - e.rowMean[i] - e.rowMean[j]
			}
		}
	}
	u, _, err := topEig(g, n, e.K, nil)
	if u == nil {
		return fmt.Errorf("baseline: exact kernel PCA of %d points: %w", n, err)
	}
	e.u = u
	return err
}

// Eval sets dst (rows×k) to k_X(x)·U (k_X(x) centred as the Gram was, with
// Center).
func (e *Exact) Eval(dst, x []float64, rows int) {
	n := len(e.xn)
	if cap(e.kb) < rows*n {
		e.kb = make([]float64, rows*n)
	}
	kb := e.kb[:rows*n]
	kernelGram(kb, x, rows, e.x[:n*e.d], e.xn, n, e.d, e.kern)
	if e.Center {
		// k̃(x)_i = k(x, x_i) − mean_j k(x, x_j) − mean_j K_ij + mean K.
		for r := 0; r < rows; r++ {
			row := kb[r*n : r*n+n]
			var s float64
			for _, v := range row {
				s += v
			}
			s /= float64(n)
			for i := range row {
				row[i] += e.mean - s - e.rowMean[i]
			}
		}
	}
	project(dst, kb, rows, n, e.u)
}

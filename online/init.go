package online

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// initBlock returns the coefficients (nb×k) that make a block's functions
// the top-k principal directions of its features on the first batch: the
// top eigenvectors of the (centred, if center) feature covariance
// C = ΦᵀΦ/b, largest first, signs fixed so that each vector's
// largest-magnitude entry is positive. With whiten, each eigenvector is
// divided by √eigenvalue so that the functions have unit variance (the
// normalisation of canonical correlation functions). It returns C's top k
// eigenvalues too, largest first. phi (rows×nb) is centred in place when center is set.
func initBlock(phi []float64, rows, nb, k int, center, whiten bool) ([]float64, []float64, error) {
	if center {
		centreCols(phi, rows, nb)
	}
	var c mat.SymDense
	c.SymOuterK(1/float64(rows), mat.NewDense(rows, nb, phi).T())
	var es mat.EigenSym
	if !es.Factorize(&c, true) {
		return nil, nil, fmt.Errorf("online: eigendecomposition of the first block failed")
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	top := vals[nb-1]
	if !(top > 0) {
		return nil, nil, fmt.Errorf("%w: the first batch gives a zero feature covariance", ErrInput)
	}
	coef := make([]float64, nb*k)
	topK := make([]float64, k)
	for q := range topK {
		topK[q] = math.Max(vals[nb-1-q], 0)
	}
	for q := 0; q < k; q++ {
		col := nb - 1 - q
		sgn := signFix(vecs.ColView(col))
		if whiten {
			// Floor tiny eigenvalues so that a rank-deficient first batch
			// does not blow a direction up.
			sgn /= math.Sqrt(math.Max(vals[col], 1e-6*top))
		}
		for f := 0; f < nb; f++ {
			coef[f*k+q] = sgn * vecs.At(f, col)
		}
	}
	return coef, topK, nil
}

// initPair returns the first blocks' coefficients of a two-view model: a
// tiny exact solve on the first batch. phiX (rows×nbx) and phiY (rows×nby)
// are centred in place when center is set. KSVD (cca false): the top-k
// singular vectors of the feature cross-covariance ΦᵀΨ/b, so the functions
// start with unit RKHS norm and W = 2·diag(σ). KCCA/KSIR (cca true): the
// regularised CCA of the two blocks — with C_x, C_y the feature covariances
// plus 10% of their top eigenvalue as ridge, the top singular vectors of
// C_x^(−½)·ΦᵀΨ/b·C_y^(−½), mapped back by C^(−½) — so the functions start
// with unit variance and W = 2·diag(ρ). Either way W starts positive
// semi-definite, which the updates need: along a direction where W is
// negative the term −η·G·W grows G instead of normalising it. It also
// returns the larger top eigenvalue of the two feature covariances.
func initPair(phiX, phiY []float64, rows, nbx, nby, k int, center, cca bool) ([]float64, []float64, float64, error) {
	if center {
		centreCols(phiX, rows, nbx)
		centreCols(phiY, rows, nby)
	}
	px, py := mat.NewDense(rows, nbx, phiX), mat.NewDense(rows, nby, phiY)
	wx, lx, err := invSqrtCov(px, rows, nbx, cca)
	if err != nil {
		return nil, nil, 0, err
	}
	wy, ly, err := invSqrtCov(py, rows, nby, cca)
	if err != nil {
		return nil, nil, 0, err
	}
	var c, t mat.Dense
	c.Mul(px.T(), py)
	c.Scale(1/float64(rows), &c)
	t.Mul(wx, &c)
	t.Mul(&t, wy)
	var svd mat.SVD
	if !svd.Factorize(&t, mat.SVDThin) {
		return nil, nil, 0, fmt.Errorf("online: SVD of the first blocks' cross-covariance failed")
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	var a, b mat.Dense
	a.Mul(wx, u.Slice(0, nbx, 0, k))
	b.Mul(wy, v.Slice(0, nby, 0, k))
	// Signs: the largest-magnitude entry of each x-column positive (the
	// y-column follows, keeping the pair's correlation positive).
	ax, ay := make([]float64, nbx*k), make([]float64, nby*k)
	for q := 0; q < k; q++ {
		sgn := signFix(a.ColView(q))
		for f := 0; f < nbx; f++ {
			ax[f*k+q] = sgn * a.At(f, q)
		}
		for f := 0; f < nby; f++ {
			ay[f*k+q] = sgn * b.At(f, q)
		}
	}
	return ax, ay, math.Max(lx, ly), nil
}

func centreCols(phi []float64, rows, nb int) {
	for f := 0; f < nb; f++ {
		var m float64
		for r := 0; r < rows; r++ {
			m += phi[r*nb+f]
		}
		m /= float64(rows)
		for r := 0; r < rows; r++ {
			phi[r*nb+f] -= m
		}
	}
}

// invSqrtCov returns (C + 0.1·λ_max·I)^(−½) for the feature covariance C of
// p (the identity when whiten is false) and C's top eigenvalue.
func invSqrtCov(p *mat.Dense, rows, nb int, whiten bool) (*mat.Dense, float64, error) {
	var c mat.SymDense
	c.SymOuterK(1/float64(rows), p.T())
	var es mat.EigenSym
	if !es.Factorize(&c, true) {
		return nil, 0, fmt.Errorf("online: eigendecomposition of a first block failed")
	}
	vals := es.Values(nil)
	top := vals[nb-1]
	if !(top > 0) {
		return nil, 0, fmt.Errorf("%w: the first batch gives a zero feature covariance", ErrInput)
	}
	out := mat.NewDense(nb, nb, nil)
	if !whiten {
		for i := 0; i < nb; i++ {
			out.Set(i, i, 1)
		}
		return out, top, nil
	}
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	d := make([]float64, nb)
	for i, v := range vals {
		d[i] = 1 / math.Sqrt(math.Max(v, 0)+0.1*top)
	}
	for i := 0; i < nb; i++ {
		for j := 0; j < nb; j++ {
			var s float64
			for l := 0; l < nb; l++ {
				s += vecs.At(i, l) * d[l] * vecs.At(j, l)
			}
			out.Set(i, j, s)
		}
	}
	return out, top, nil
}

// signFix returns ±1 so that the largest-magnitude entry of v times it is
// positive (the first such entry on ties): a deterministic sign for
// eigen- and singular vectors.
func signFix(v mat.Vector) float64 {
	var big float64
	for f := 0; f < v.Len(); f++ {
		if x := v.AtVec(f); math.Abs(x) > math.Abs(big) {
			big = x
		}
	}
	if big < 0 {
		return -1
	}
	return 1
}

// initBlockTopK is initBlock by subspace iteration on C = ΦᵀΦ/b, never
// formed: k + 8 start vectors drawn from a fixed seed, 8 multiplications
// by C, each followed by an orthonormalisation, then the Rayleigh–Ritz
// solve of the small projected matrix. About 2·rows·nb·(k + 8) flops an
// iteration, where initBlock's full eigendecomposition costs of order
// nb³ (≈ 20 times more at nb = 512, k = 10): for a challenger
// (follower), restarted every followLife steps, whose start need not be
// exact — its steps refine it. Without whiten.
func initBlockTopK(phi []float64, rows, nb, k int, center, _ bool) ([]float64, []float64, error) {
	if center {
		centreCols(phi, rows, nb)
	}
	p := min(k+8, nb)
	f := mat.NewDense(rows, nb, phi)
	rng := rand.New(rand.NewPCG(0x5eed, uint64(nb)))
	q := mat.NewDense(nb, p, nil)
	for i := range nb {
		for j := range p {
			q.Set(i, j, rng.NormFloat64())
		}
	}
	var fq mat.Dense
	for range 8 {
		fq.Mul(f, q)
		q.Mul(f.T(), &fq)
		gramSchmidt(q)
	}
	fq.Mul(f, q)
	var small mat.SymDense
	small.SymOuterK(1/float64(rows), fq.T())
	var es mat.EigenSym
	if !es.Factorize(&small, true) {
		return nil, nil, fmt.Errorf("online: eigendecomposition of the first block failed")
	}
	vals := es.Values(nil)
	if !(vals[p-1] > 0) {
		return nil, nil, fmt.Errorf("%w: the first batch gives a zero feature covariance", ErrInput)
	}
	var w, vecs mat.Dense
	es.VectorsTo(&w)
	vecs.Mul(q, &w)
	coef := make([]float64, nb*k)
	topK := make([]float64, k)
	for j := range k {
		col := p - 1 - j
		topK[j] = math.Max(vals[col], 0)
		sgn := signFix(vecs.ColView(col))
		for i := range nb {
			coef[i*k+j] = sgn * vecs.At(i, col)
		}
	}
	return coef, topK, nil
}

// gramSchmidt orthonormalises q's columns in place (modified
// Gram–Schmidt, twice for accuracy); a column that vanishes is left zero.
func gramSchmidt(q *mat.Dense) {
	_, p := q.Dims()
	for range 2 {
		for j := range p {
			cj := q.ColView(j).(*mat.VecDense)
			for i := range j {
				ci := q.ColView(i)
				cj.AddScaledVec(cj, -mat.Dot(ci, cj), ci)
			}
			if nrm := mat.Norm(cj, 2); nrm > 0 {
				cj.ScaleVec(1/nrm, cj)
			}
		}
	}
}

package online

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// # The space two learners are compared in
//
// Each learner's own captured share (Score's per-row figure, measured
// in its own random features) cannot rank two learners of different
// budgets: a model of D random features captures more of its own
// approximate kernel's variance the smaller D is (its top eigenvalues
// are biased upwards), so an eighth-size challenger "won" on a stream
// that never changed (18 switches in 300 batches of
// TestFollowStationaryNoSwitch). Following therefore compares the two
// in one space defined by the exact kernel: the Nyström space of a
// reference set W of m held-out rows, drawn when a test starts and
// fixed for its life. With K_W = UΛUᵀ (eigenvalues below
// refTolerance·λ₁ left out) a row's kernel section has coordinates
//
//	z(x) = Λ^{−½}Uᵀ k_W(x),   ‖z(x)‖² ≤ k(x, x),
//
// and a learner whose functions take the values F (m×k) on W spans the
// directions C = Λ^{−½}UᵀF there: its k functions, interpolated on W,
// are the kernel functions Σ_j α_jq k(w_j, ·) with α = K_W⁻¹F, the span
// that kernel PCA of W would give were F its eigenvectors. A row's
// share is
//
//	s(x) = ‖Q_Cᵀ z(x)‖²/k(x, x) ∈ [0, 1]   (Q_C an orthonormal basis of C),
//
// the share of its kernel variance that the learner's functions capture
// within W's span — kernel PCA's objective, eq. (1) of the paper, for
// functions known only by their values. Nothing depends on either
// learner's feature count or coefficients' norms, only on the functions
// as functions. Every learner is compared in the kernel centred on W
// (K_W double-centred, k_W(x) and k(x, x) centred by W's means), its
// values centred on W: an uncentred model's near-constant leading
// function captures about three quarters of every MNIST image's share,
// the same in any two learners of the stream, and left in it drowned
// the difference a gradual change makes (0.004 of shares near 0.75,
// against 0.015 of shares near 0.35 centred, on the MNIST ramp). The
// learners' values on W are taken at every step, so both are compared
// as they are when the row is scored, before either learns it.
//
// The cost: m rows evaluated by each learner per step (m = refRows,
// 128 by default: a quarter of a batch of 512 for the model, an eighth
// of that for the challenger), m kernel evaluations and an r×m product
// per scored row, and an eigendecomposition of order m once per test.

// refRows is the reference set's size for k components: 128, and at
// least 2k so that k directions do not fill W's span.
func refRows(k int) int { return max(128, 2*k) }

// refTolerance: eigenvalues of K_W below this share of its largest are
// left out of the Nyström coordinates (their directions are noise).
const refTolerance = 1e-9

// refSpace is a test's reference set and its Nyström coordinates.
type refSpace struct {
	m, d int
	x    []float64 // the raw rows of W, as they arrive (rows×d)
	// Fixed once W is full (ready): the rows preprocessed by the model,
	// the coordinates' map R = Λ^{−½}Uᵀ (r×m), and W's kernel means for
	// centring (nil uncentred).
	ready   bool
	xs      []float64
	r       *mat.Dense
	rowMean []float64
	all     float64
	// scratch: a row's kernel values on W and its coordinates, and
	// vectors over them
	kx, z   []float64
	kxv, zv *mat.VecDense
}

// reset empties the reference set for a new test of m rows of d.
func (s *refSpace) reset(m, d int) {
	s.m, s.d, s.ready = m, d, false
	s.x, s.r, s.rowMean = s.x[:0], nil, nil
}

// rows is how many rows W holds.
func (s *refSpace) rows() int {
	if s.d == 0 {
		return 0
	}
	return len(s.x) / s.d
}

// add appends rows of x to W until it holds m; it returns how many it
// took.
func (s *refSpace) add(x []float64, rows int) int {
	take := min(rows, s.m-s.rows())
	if take <= 0 {
		return 0
	}
	s.x = append(s.x, x[:take*s.d]...)
	return take
}

// prepare fixes the coordinates of a full W in l's preprocessing and
// kernel (centred when l is); false if W is not full or its kernel
// matrix has no positive eigenvalue.
func (s *refSpace) prepare(l *KPCA) bool {
	if s.ready {
		return true
	}
	m, d := s.m, s.d
	if m == 0 || s.rows() < m {
		return false
	}
	s.xs = sized(s.xs, m*d)
	l.pre.Apply(s.xs, s.x)
	km := mat.NewSymDense(m, nil)
	for i := range m {
		for j := i; j < m; j++ {
			km.SetSym(i, j, l.fm.Kernel.Eval(s.xs[i*d:i*d+d], s.xs[j*d:j*d+d]))
		}
	}
	s.rowMean = nil
	{ // centred for every learner: see refSpace's doc
		s.rowMean = make([]float64, m)
		s.all = 0
		for i := range m {
			for j := range m {
				s.rowMean[i] += km.At(i, j)
			}
			s.rowMean[i] /= float64(m)
			s.all += s.rowMean[i] / float64(m)
		}
		doubleCenter(km)
	}
	var e mat.EigenSym
	if !e.Factorize(km, true) {
		return false
	}
	vals := e.Values(nil)
	var u mat.Dense
	e.VectorsTo(&u)
	top := vals[m-1]
	if !(top > 0) {
		return false
	}
	var keep []int
	for j := m - 1; j >= 0; j-- {
		if vals[j] > refTolerance*top {
			keep = append(keep, j)
		}
	}
	s.r = mat.NewDense(len(keep), m, nil)
	for i, j := range keep {
		sc := 1 / math.Sqrt(vals[j])
		for c := range m {
			s.r.Set(i, c, u.At(c, j)*sc)
		}
	}
	s.kx, s.z = make([]float64, m), make([]float64, len(keep))
	s.kxv, s.zv = mat.NewVecDense(m, s.kx), mat.NewVecDense(len(keep), s.z)
	s.ready = true
	return true
}

// basis returns an orthonormal basis (r×k) of the directions of a
// learner whose functions take the values v (m×k, row-major) on W,
// centred on W for a centred comparison; nil when they are linearly
// dependent there (a collapsed or unstarted learner).
func (s *refSpace) basis(v []float64, k int) *mat.Dense {
	m := s.m
	f := mat.NewDense(m, k, v)
	if s.rowMean != nil {
		centerColumns(f)
	}
	r, _ := s.r.Dims()
	if r < k {
		return nil
	}
	var c mat.Dense
	c.Mul(s.r, f)
	var qr mat.QR
	qr.Factorize(&c)
	var rr mat.Dense
	qr.RTo(&rr)
	for j := range k {
		if !(math.Abs(rr.At(j, j)) > 1e-12*math.Abs(rr.At(0, 0))) {
			return nil
		}
	}
	var q mat.Dense
	qr.QTo(&q)
	out := mat.NewDense(r, k, nil)
	out.Copy(q.Slice(0, r, 0, k))
	return out
}

// shares sets dst[i] to the share s(x_i) (above) that each basis in bs
// captures of row x (preprocessed by l, as W): dst[i] for bs[i].
func (s *refSpace) shares(dst []float64, l *KPCA, x []float64, bs ...*mat.Dense) {
	m, d := s.m, s.d
	var mean float64
	for j := range m {
		s.kx[j] = l.fm.Kernel.Eval(x, s.xs[j*d:j*d+d])
		mean += s.kx[j] / float64(m)
	}
	kxx := l.fm.Kernel.Eval(x, x)
	if s.rowMean != nil {
		for j := range m {
			s.kx[j] += s.all - mean - s.rowMean[j]
		}
		kxx += s.all - 2*mean
	}
	r, _ := s.r.Dims()
	s.zv.MulVec(s.r, s.kxv)
	for i, b := range bs {
		_, k := b.Dims()
		var captured float64
		for q := range k {
			var p float64
			for j := range r {
				p += b.At(j, q) * s.z[j]
			}
			captured += p * p
		}
		if kxx > 0 {
			dst[i] = max(0, min(1, captured/kxx))
		} else {
			dst[i] = 0
		}
	}
}

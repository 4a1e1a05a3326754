package snapshot

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/streamkpca/streamkpca/features"
)

// ErrCentred is returned by Score for a view the model learned centred: the
// residual of a centred model is measured from the features' mean, which a
// snapshot does not keep (it keeps that mean's k projections, View.Center).
var ErrCentred = errors.New("snapshot: the residual of a centred model needs the features' mean, which snapshots do not keep (learn with learner.center: false, or uncentered: true for two views)")

// whitener holds the Cholesky factor L (k×k, row-major, lower) of the
// components' Gram matrix G = AᵀA + δ·I, δ = gramJitter·trace(AᵀA)/k:
// ‖L⁻¹h‖² is then the squared norm of φ's projection onto the span of the
// k components, h = Aᵀφ their values. Every sum runs in index order with
// each product rounded (no fused multiply-add), so another language that
// does the same gets the same bits (clients/python).
type whitener struct {
	l []float64
	k int
}

// gramJitter keeps G positive definite when the components are linearly
// dependent (or a view's coefficients are all zero): a relative 1e-12 on
// the diagonal, which moves a residual by about that much.
const gramJitter = 1e-12

// whiten builds view's whitener from its coefficients, once per Model.
func (m *Model) whiten(view int) (*whitener, error) {
	m.gramOnce[view].Do(func() {
		k := m.snap.Header.K
		coef := m.snap.Coef[view]
		g := make([]float64, k*k)
		for r := 0; r+k <= len(coef); r += k {
			c := coef[r : r+k]
			for a := 0; a < k; a++ {
				for b := 0; b < k; b++ {
					g[a*k+b] += float64(c[a] * c[b])
				}
			}
		}
		tr := 0.0
		for a := 0; a < k; a++ {
			tr += g[a*k+a]
		}
		delta := float64(gramJitter*tr) / float64(k)
		if !(delta > 0) {
			delta = gramJitter
		}
		for a := 0; a < k; a++ {
			g[a*k+a] += delta
		}
		// Cholesky–Banachiewicz, row by row.
		l := make([]float64, k*k)
		for i := 0; i < k; i++ {
			for j := 0; j <= i; j++ {
				s := g[i*k+j]
				for p := 0; p < j; p++ {
					s -= float64(l[i*k+p] * l[j*k+p])
				}
				if i == j {
					if !(s > 0) {
						return // not positive definite: not a model's coefficients
					}
					l[i*k+i] = math.Sqrt(s)
				} else {
					l[i*k+j] = s / l[j*k+j]
				}
			}
		}
		m.gram[view] = &whitener{l: l, k: k}
	})
	if m.gram[view] == nil {
		return nil, fmt.Errorf("snapshot: view %d: the components' Gram matrix is not positive definite (non-finite or corrupt coefficients)", view)
	}
	return m.gram[view], nil
}

// explained returns ‖L⁻¹h‖² for one row's k projections h (forward
// substitution, sums in index order).
func (w *whitener) explained(h, y []float64) float64 {
	k := w.k
	s := 0.0
	for i := 0; i < k; i++ {
		v := h[i]
		for p := 0; p < i; p++ {
			v -= float64(w.l[i*k+p] * y[p])
		}
		y[i] = v / w.l[i*k+i]
		s += float64(y[i] * y[i])
	}
	return s
}

// Score writes, for each of the rows points of x (rows×Dim, row-major, the
// x view), its k projections into proj (rows×k, the same bits as Project)
// and its residual into res (rows): the squared distance in feature space
// between the point's feature vector and its orthogonal projection onto
// the span of the model's k components,
//
//	r(x) = ‖φ(x)‖² − hᵀ(AᵀA)⁻¹h,  h = Aᵀφ(x),
//
// where φ(x) = (Φ_1(x), …, Φ_J(x))/√J stacks the view's J blocks (paper
// Alg. 2's Φ_j, each an unbiased estimate of the kernel on its own), so
// that ⟨φ(x), φ(y)⟩ is their average estimate of k(x, y), and A is the
// coefficients (scaled by √J to match): kernel PCA's reconstruction error
// (Hoffmann 2007) in the model's own feature space, in the kernel's units:
// 0 ≤ r(x) ≤ ‖φ(x)‖² ≈ k(x, x), which is 1 for the shift-invariant
// kernels. A negative value from rounding is reported as 0. Nil proj or res
// allocate; a wrong length of either is an error. A centred model
// returns ErrCentred.
func (m *Model) Score(proj, res, x []float64) ([]float64, []float64, error) {
	const view = 0
	if len(m.snap.Header.Views[view].Center) != 0 {
		return nil, nil, ErrCentred
	}
	w, err := m.whiten(view)
	if err != nil {
		return nil, nil, err
	}
	inDim := m.Dim(view)
	if len(x)%inDim != 0 {
		return nil, nil, fmt.Errorf("snapshot: input of %d values is not a whole number of %d-dimensional points", len(x), inDim)
	}
	rows := len(x) / inDim
	if res == nil {
		res = make([]float64, rows)
	}
	proj, err = m.project(view, proj, res, x)
	if err != nil {
		return nil, nil, err
	}
	k := m.snap.Header.K
	seeds, _ := m.snap.Header.ViewSeeds(view)
	blocks := float64(max(1, len(seeds)))
	y := make([]float64, k)
	for r := 0; r < rows; r++ {
		res[r] = max(0, res[r]-w.explained(proj[r*k:(r+1)*k], y)) / blocks
	}
	return proj, res, nil
}

// addSquares adds the squared norm of each of the rows rows of phi (rows×nb)
// to sq, in features.AddSquares' order (four running sums over the
// features f ≡ l (mod 4), then (s₀ + s₁) + (s₂ + s₃)), which another
// language can follow (clients/python).
func addSquares(sq, phi []float64, rows, nb int) { features.AddSquares(sq, phi, rows, nb) }

// Novelty returns residual r's place among the version's reference
// residuals (Header.Novelty), #{reference residuals < r} / (n + 1) for n of
// them, in [0, n/(n+1)]; false when the version has none. It is a
// conformal rank: when r and the reference are exchangeable,
// P(Novelty(r) ≥ q) ≤ 1 − q for every q, so a rule "novel when ≥ q" flags
// at most a 1 − q share of ordinary points. The service's references are
// a version's residuals on held-out rows it has learned (once each, among
// all the others): a point it has not learned ranks a little higher on
// average, so on a young model the share flagged runs above 1 − q
// (docs/results.md measures it).
func (m *Model) Novelty(r float64) (float64, bool) {
	m.refOnce.Do(func() {
		if n := m.snap.Header.Novelty; n != nil && len(n.Residuals) > 0 {
			m.ref = slices.Clone(n.Residuals)
			slices.Sort(m.ref)
		}
	})
	if m.ref == nil {
		return 0, false
	}
	below := sort.SearchFloat64s(m.ref, r) // the first ≥ r: that many are < r
	return float64(below) / float64(len(m.ref)+1), true
}

// ScoreKept is Score for rows whose features a learner has already
// computed: kept(j) returns block j's features on those rows (rows×B, as
// features.Evaluator.Kept gives them) for the learner's blocks seeds. When
// the model's blocks are the first of the learner's, with the same seeds,
// and every one is kept, it writes the projections and residuals — the
// same bits Score computes from the rows themselves, which the learner
// standardised with the model's statistics — and reports true; otherwise
// (another map, blocks revisited with new seeds, features not kept, a
// centred model) it writes nothing and reports false.
func (m *Model) ScoreKept(proj, res []float64, rows int, seeds []uint64, kept func(j int) []float64) bool {
	const view = 0
	v := &m.snap.Header.Views[view]
	if len(v.Center) != 0 || v.Landmarks() || len(v.Slices) > 0 {
		return false
	}
	own, _ := m.snap.Header.ViewSeeds(view)
	if len(own) == 0 || len(own) > len(seeds) {
		return false
	}
	for j, s := range own {
		if seeds[j] != s || kept(j) == nil {
			return false
		}
	}
	w, err := m.whiten(view)
	if err != nil {
		return false
	}
	k, fm := m.snap.Header.K, m.maps[view]
	nb := fm.BlockSize
	if len(proj) != rows*k || len(res) != rows {
		panic("snapshot: ScoreKept dst has wrong length")
	}
	coef := m.snap.Coef[view]
	part := make([]float64, rows*k)
	clear(proj)
	clear(res)
	// Project's grouping and order: blocks summed in chunks of
	// fm.Chunk() blocks, chunks added in order.
	for c0 := 0; c0 < len(own); c0 += fm.Chunk() {
		clear(part)
		for j := c0; j < min(c0+fm.Chunk(), len(own)); j++ {
			phi := kept(j)
			fm.MulAdd(part, phi, coef[j*nb*k:(j+1)*nb*k], rows, k)
			addSquares(res, phi, rows, nb)
		}
		for i, p := range part {
			proj[i] += p
		}
	}
	blocks := float64(len(own))
	y := make([]float64, k)
	for r := 0; r < rows; r++ {
		res[r] = max(0, res[r]-w.explained(proj[r*k:(r+1)*k], y)) / blocks
	}
	return true
}

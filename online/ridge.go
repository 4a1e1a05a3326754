package online

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/internal/splitmix"
	"github.com/streamkpca/streamkpca/online/internal/dense"
)

// # Choosing kcca's ridge on held-out pairs
//
// The covariance solver's ridge r (relative to each view's mean feature
// variance) trades the variance of the canonical directions for their
// bias, and where it is best depends on the features: about 1e-2 for
// Nyström features, about 0.1 for random ones (MNIST halves, k = 50).
// With Config.Ridge 0 (kcca's default) the learner chooses it itself:
//
//   - One pair in ridgeEvery (HeldOut of a hash of its features, so that a
//     pair seen again is held out again) is also kept, as its features,
//     in a ring of the last ridgeKeep such pairs. Every pair, those too,
//     goes into the statistics S.
//   - When the ring holds ridgeMinPairs pairs, and again each time the
//     statistics have grown by a quarter since, the ring's pairs are
//     taken out of the statistics (S − S_v, with the product's sign
//     flipped: no copy of the m² matrices), the solve runs from the
//     current basis (ridgeIters iterations) at each ridge of ridgeGrid
//     the first time, at the last choice and its two neighbours on the
//     grid after, and each solution is scored by S_k of the ring's
//     pairs: the sum of the canonical correlations between their k-column
//     projections, the measure the benchmarks report. The ring's pairs go
//     back into S and the best ridge is kept (Schedule.Ridge; a restored
//     learner goes on choosing from it).
//
// A held-out pair seen a second time (fit's second epoch, a replayed
// topic) ends the choosing for good: its first copy is in S and would
// score a ridge on data it was fitted to (on MNIST halves such a choice
// picks a small ridge and S50 falls from 37.9 to 31.6). The hashes of up
// to ridgeSeen held-out pairs are kept for that; past them the ridge is
// kept too.
//
// The best ridge falls as the statistics grow (fewer pairs want more
// regularisation), so the choice is made again as they grow: on MNIST
// halves (k = 50, 2,048 random features per view, 8,000 pairs) the choice
// made on 5,120 pairs is 0.3 (S50 37.3 after two epochs) and the one made
// on the whole first epoch 0.1 (37.9, as 0.1 set by hand). Scoring a
// candidate costs one solve (two Cholesky factorisations of m×m and
// ridgeIters subspace iterations) and two products of the ring with the
// coefficients, m at most ridgeFeatures (see leading).
const (
	ridgeEvery    = 10
	ridgeKeep     = 1024
	ridgeMinPairs = 256
	ridgeIters    = 4
	ridgeSeen     = 1 << 16
	ridgeGrowth   = 1.25
)

// ridgeGrid are the candidate ridges, a factor of about three apart.
var ridgeGrid = []float64{1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1}

// ridgeSearch is the held-out ring and the schedule of the choice.
type ridgeSearch struct {
	fx, fy []float64 // ridgeKeep × m_x, × m_y: the ring's features
	pairs  int       // in the ring
	next   int       // the ring's next slot
	lastN  float64   // statistics' count at the last choice
	chosen []float64 // ridge chosen at each choice (for reports)
	seen   map[uint64]struct{}
	done   bool // a held-out pair came again, or seen is full: the ridge is kept
	// sub is the choice's problem past limit (ridgeFeatures) features
	// (leading), subX and subY the ring's features of its columns.
	limit      int
	sub        *covariance
	subX, subY []float64
	// scratch
	ax, ay, u, v, q []float64
}

func newRidgeSearch(mx, my int) *ridgeSearch {
	return &ridgeSearch{fx: make([]float64, ridgeKeep*mx), fy: make([]float64, ridgeKeep*my), seen: map[uint64]struct{}{}, limit: ridgeFeatures}
}

// offer keeps the held-out pairs among the batch's features phi (rows ×
// m_x and rows × m_y) in the ring.
func (r *ridgeSearch) offer(phi [2][]float64, rows, mx, my int) {
	if r.done {
		return
	}
	for i := range rows {
		fx, fy := phi[0][i*mx:(i+1)*mx], phi[1][i*my:(i+1)*my]
		key := pairKey(fx, fy)
		if !HeldOut(key, ridgeEvery) {
			continue
		}
		if _, again := r.seen[key]; again || len(r.seen) >= ridgeSeen {
			r.done = true
			r.sub, r.subX, r.subY = nil, nil, nil
			return
		}
		r.seen[key] = struct{}{}
		copy(r.fx[r.next*mx:(r.next+1)*mx], fx)
		copy(r.fy[r.next*my:(r.next+1)*my], fy)
		r.next = (r.next + 1) % ridgeKeep
		r.pairs = min(r.pairs+1, ridgeKeep)
	}
}

// pairKey hashes a pair's features (up to 16 of each view): the same pair
// gives the same key, whatever its place in the stream.
func pairKey(fx, fy []float64) uint64 {
	var h uint64
	for _, f := range [][]float64{fx[:min(16, len(fx))], fy[:min(16, len(fy))]} {
		for _, v := range f {
			h = splitmix.Mix(h ^ math.Float64bits(v))
		}
	}
	return h
}

// due reports whether a choice is due for statistics of n pairs.
func (r *ridgeSearch) due(n float64) bool {
	return !r.done && r.pairs >= ridgeMinPairs && (r.lastN == 0 || n >= ridgeGrowth*r.lastN)
}

// candidates are the ridges a choice scores: the whole grid the first
// time, then the last choice and its two neighbours on the grid (the best
// ridge moves slowly as the statistics grow).
func (r *ridgeSearch) candidates() []float64 {
	if len(r.chosen) == 0 {
		return ridgeGrid
	}
	i := slices.Index(ridgeGrid, r.chosen[len(r.chosen)-1])
	if i < 0 {
		return ridgeGrid
	}
	return ridgeGrid[max(i-1, 0):min(i+2, len(ridgeGrid))]
}

// chooseRidge sets c.ridge to the candidate of ridgeGrid whose solve
// scores best on the ring's pairs, as the comment above says. The
// statistics, the basis and the solve counters are as before it.
//
// With more than ridgeFeatures features in a view the candidates are
// solved on the leading ridgeFeatures of each (see leading): the choice
// then costs what it costs at that budget, whatever the budget.
func (c *covariance) chooseRidge(k int, center bool) {
	r := c.search
	t, fx, fy := c, r.fx, r.fy
	first := false
	if c.m[0] > r.limit || c.m[1] > r.limit {
		first = r.sub == nil
		t, fx, fy = r.leading(c, k)
	}
	mx, my, nv := t.m[0], t.m[1], r.pairs
	vx := dense.Dense(nv, mx, fx[:nv*mx])
	vy := dense.Dense(nv, my, fy[:nv*my])
	// S ← S − S_v.
	t.ws.Gemm(dense.Op{TransA: true, Upper: true, Sub: true}, vx, vx, dense.Dense(mx, mx, t.s[0]))
	t.ws.Gemm(dense.Op{TransA: true, Upper: true, Sub: true}, vy, vy, dense.Dense(my, my, t.s[1]))
	t.ws.Gemm(dense.Op{TransA: true, Sub: true}, vx, vy, dense.Dense(mx, my, t.sxy))
	sums := func(sign float64) {
		for i, f := range [][]float64{fx[:nv*mx], fy[:nv*my]} {
			m := t.m[i]
			for p := range nv {
				for j, v := range f[p*m : p*m+m] {
					t.sum[i][j] += sign * v
				}
			}
		}
		t.n += sign * float64(nv)
	}
	sums(-1)
	r.q = append(r.q[:0], t.q...)
	solves, nSolved, ridge := t.solves, t.nSolved, c.ridge
	r.ax, r.ay = slices.Grow(r.ax[:0], mx*k)[:mx*k], slices.Grow(r.ay[:0], my*k)[:my*k]
	r.u, r.v = slices.Grow(r.u[:0], nv*k)[:nv*k], slices.Grow(r.v[:0], nv*k)[:nv*k]
	iters := ridgeIters
	if first {
		iters = 2 * ridgeIters // the leading block's basis starts from the whole's
	}
	best, bestScore := ridge, math.Inf(-1)
	for _, cand := range r.candidates() {
		t.ridge = cand
		copy(t.q, r.q)
		if t.solve(r.ax, r.ay, k, iters, center) != nil {
			continue
		}
		clear(r.u)
		clear(r.v)
		t.ws.Gemm(dense.Op{}, vx, dense.Dense(mx, k, r.ax), dense.Dense(nv, k, r.u))
		t.ws.Gemm(dense.Op{}, vy, dense.Dense(my, k, r.ay), dense.Dense(nv, k, r.v))
		if s := canonicalSum(r.u, r.v, nv, k); s > bestScore {
			best, bestScore = cand, s
		}
	}
	if t == c {
		// S ← S + S_v: the statistics are whole again.
		sums(1)
		t.ws.Gemm(dense.Op{TransA: true, Upper: true}, vx, vx, dense.Dense(mx, mx, t.s[0]))
		t.ws.Gemm(dense.Op{TransA: true, Upper: true}, vy, vy, dense.Dense(my, my, t.s[1]))
		t.ws.Gemm(dense.Op{TransA: true}, vx, vy, dense.Dense(mx, my, t.sxy))
		copy(t.q, r.q)
		t.solves, t.nSolved = solves, nSolved
	}
	c.ridge = best
	r.lastN = c.n
	r.chosen = append(r.chosen, best)
}

// ridgeFeatures is the most features per view the ridge is chosen on.
// The leading blocks of a view are a model of its kernel by themselves
// (random features or landmarks, drawn as the others), and the best
// relative ridge does not move with the budget there: on MNIST halves
// (k = 50) 0.1 at 2,048 and at 4,096 random features per view. A
// candidate's solve costs (2/3)·m³ for its factorisations, so at 4,096
// features the choice took a quarter of the first epoch's time.
const ridgeFeatures = 2048

// leading returns the choice's problem for a budget past ridgeFeatures:
// the statistics of the first ridgeFeatures features of each view (the
// leading blocks of S_xx, S_yy and S_xy, and of the sums) in a
// covariance of that size kept for the next choice, its basis from the
// last choice (the first time, the leading rows of the whole problem's),
// and the ring's pairs' features of those columns.
func (r *ridgeSearch) leading(c *covariance, k int) (*covariance, []float64, []float64) {
	mx, my := min(c.m[0], r.limit), min(c.m[1], r.limit)
	if r.sub == nil {
		// Its factors in the whole problem's: each solve makes its own.
		r.sub = newCovarianceSharing(mx, my, k, c.ridge, c.seed, c.ws.Workers, c.chol)
		copy(r.sub.q, c.q[:my*r.sub.p])
	}
	t := r.sub
	for i, m := range [2]int{mx, my} {
		for a := range m {
			copy(t.s[i][a*m:(a+1)*m], c.s[i][a*c.m[i]:a*c.m[i]+m])
		}
		copy(t.sum[i], c.sum[i][:m])
	}
	for a := range mx {
		copy(t.sxy[a*my:(a+1)*my], c.sxy[a*c.m[1]:a*c.m[1]+my])
	}
	t.n = c.n
	nv := r.pairs
	if cap(r.subX) < ridgeKeep*mx { // the ring's size at once: growing by append would hold more
		r.subX, r.subY = make([]float64, 0, ridgeKeep*mx), make([]float64, 0, ridgeKeep*my)
	}
	r.subX, r.subY = r.subX[:nv*mx], r.subY[:nv*my]
	for p := range nv {
		copy(r.subX[p*mx:(p+1)*mx], r.fx[p*c.m[0]:p*c.m[0]+mx])
		copy(r.subY[p*my:(p+1)*my], r.fy[p*c.m[1]:p*c.m[1]+my])
	}
	return t, r.subX, r.subY
}

// canonicalSum is the sum of the canonical correlations between the
// columns of u and v (n×k each): the singular values of
// L_u⁻¹·C_uv·L_v⁻ᵀ, C the centred (cross-)covariances and L their
// Cholesky factors; −∞ when a covariance is singular (a candidate whose
// projections collapsed).
func canonicalSum(u, v []float64, n, k int) float64 {
	um, vm := mat.NewDense(n, k, u), mat.NewDense(n, k, v)
	centre := func(a *mat.Dense) {
		for j := range k {
			col := mat.Col(nil, j, a)
			var s float64
			for _, x := range col {
				s += x
			}
			s /= float64(n)
			for i := range n {
				a.Set(i, j, a.At(i, j)-s)
			}
		}
	}
	centre(um)
	centre(vm)
	var cu, cv mat.SymDense
	cu.SymOuterK(1, um.T())
	cv.SymOuterK(1, vm.T())
	var cuv mat.Dense
	cuv.Mul(um.T(), vm)
	var lu, lv mat.Cholesky
	if !lu.Factorize(&cu) || !lv.Factorize(&cv) {
		return math.Inf(-1)
	}
	var luT, lvT mat.TriDense
	lu.LTo(&luT)
	lv.LTo(&lvT)
	// W = L_u⁻¹·C_uv·L_v⁻ᵀ.
	var w mat.Dense
	if err := w.Solve(&luT, &cuv); err != nil {
		return math.Inf(-1)
	}
	var wt mat.Dense
	if err := wt.Solve(&lvT, w.T()); err != nil {
		return math.Inf(-1)
	}
	var svd mat.SVD
	if !svd.Factorize(&wt, mat.SVDNone) {
		return math.Inf(-1)
	}
	var s float64
	for _, x := range svd.Values(nil) {
		s += math.Min(x, 1)
	}
	return s
}

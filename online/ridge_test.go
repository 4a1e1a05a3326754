package online

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRidgeChosenOnTheLeadingFeatures: past the search's limit the ridge
// is chosen on the leading features of each view. The truth is the same
// choice made on statistics built directly from those features' columns
// of the same batches: the copied statistics agree with them, the choice
// picks the same ridge from the same basis, and the whole problem's
// statistics are left as they were, bit for bit.
func TestRidgeChosenOnTheLeadingFeatures(t *testing.T) {
	const (
		mx, my, lead = 96, 80, 48
		k, rows, b   = 3, 3000, 500
	)
	rng := rand.New(rand.NewPCG(3, 4))
	// Two views sharing a 3-dimensional latent signal, through random
	// cosine features of different scales: a problem with a best ridge.
	latent := func() []float64 { return []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()} }
	proj := func(m int) []float64 {
		w := make([]float64, m*4)
		for i := range w {
			w[i] = rng.NormFloat64()
		}
		return w
	}
	wx, wy := proj(mx), proj(my)
	feat := func(dst, w []float64, z []float64, m int) {
		noise := rng.NormFloat64()
		for j := range m {
			a := w[j*4]*z[0] + w[j*4+1]*z[1] + w[j*4+2]*z[2] + 2*w[j*4+3]*noise
			dst[j] = math.Cos(a) * math.Sqrt(2/float64(m))
		}
	}
	whole := newCovariance(mx, my, k, 0.1, 9, 1)
	direct := newCovariance(lead, lead, k, 0.1, 9, 1)
	whole.search, direct.search = newRidgeSearch(mx, my), newRidgeSearch(lead, lead)
	whole.search.limit = lead
	for range rows / b {
		whole.phi = [2][]float64{make([]float64, b*mx), make([]float64, b*my)}
		direct.phi = [2][]float64{make([]float64, b*lead), make([]float64, b*lead)}
		for r := range b {
			z := latent()
			feat(whole.phi[0][r*mx:(r+1)*mx], wx, z, mx)
			feat(whole.phi[1][r*my:(r+1)*my], wy, z, my)
			copy(direct.phi[0][r*lead:(r+1)*lead], whole.phi[0][r*mx:r*mx+lead])
			copy(direct.phi[1][r*lead:(r+1)*lead], whole.phi[1][r*my:r*my+lead])
		}
		whole.add(b)
		direct.add(b)
		whole.search.offer(whole.phi, b, mx, my)
		direct.search.offer(direct.phi, b, lead, lead)
	}
	if whole.search.pairs != direct.search.pairs || whole.search.pairs < 100 {
		t.Fatalf("held-out pairs: %d and %d", whole.search.pairs, direct.search.pairs)
	}
	before := [][]float64{slices.Clone(whole.s[0]), slices.Clone(whole.s[1]), slices.Clone(whole.sxy), slices.Clone(whole.sum[0]), slices.Clone(whole.q)}
	// The same basis and iterations as the leading path's first choice.
	copy(direct.q, whole.q[:lead*direct.p])
	sub, subX, _ := whole.search.leading(whole, k)
	for p := range whole.search.pairs {
		if !slices.Equal(subX[p*lead:(p+1)*lead], direct.search.fx[p*lead:(p+1)*lead]) {
			t.Fatalf("held-out pair %d's leading features differ from the pair's own", p)
		}
	}
	for i := range 2 {
		for a := range lead {
			for c := a; c < lead; c++ {
				if got, want := sub.s[i][a*lead+c], direct.s[i][a*lead+c]; math.Abs(got-want) > 1e-12*math.Abs(want)+1e-15 {
					t.Fatalf("view %d: leading S[%d][%d] = %v, from the columns %v", i, a, c, got, want)
				}
			}
		}
	}
	for a := range lead * lead {
		if got, want := sub.sxy[a], direct.sxy[a]; math.Abs(got-want) > 1e-12*math.Abs(want)+1e-15 {
			t.Fatalf("leading S_xy[%d] = %v, from the columns %v", a, got, want)
		}
	}
	whole.search.sub = nil // the choice's first time
	whole.chooseRidge(k, true)
	after := [][]float64{whole.s[0], whole.s[1], whole.sxy, whole.sum[0], whole.q}
	for i := range before {
		if !slices.Equal(before[i], after[i]) {
			t.Fatalf("the whole problem's statistics or basis changed (array %d)", i)
		}
	}
	// The direct problem at its own size: the whole-statistics path, from
	// the same basis, with the first choice's iterations.
	ds := direct.search
	best, bestScore := 0.0, math.Inf(-1)
	ax, ay := make([]float64, lead*k), make([]float64, lead*k)
	for _, cand := range ridgeGrid {
		d := newCovariance(lead, lead, k, cand, 9, 1)
		copy(d.s[0], direct.s[0])
		copy(d.s[1], direct.s[1])
		copy(d.sxy, direct.sxy)
		copy(d.sum[0], direct.sum[0])
		copy(d.sum[1], direct.sum[1])
		d.n = direct.n
		holdOut(d, ds)
		copy(d.q, direct.q)
		if d.solve(ax, ay, k, 2*ridgeIters, true) != nil {
			continue
		}
		if s := scoreRing(d, ds, ax, ay, k); s > bestScore {
			best, bestScore = cand, s
		}
	}
	if got := whole.search.chosen; len(got) != 1 || got[0] != best {
		t.Errorf("chosen on the leading features: %v; on the same features' own statistics: %v", got, best)
	}
	t.Logf("ridge %v (held-out S%d %.4f)", best, k, bestScore)
}

// holdOut takes the ring's pairs out of d's statistics.
func holdOut(d *covariance, r *ridgeSearch) {
	m0, m1 := d.m[0], d.m[1]
	for p := range r.pairs {
		fx, fy := r.fx[p*m0:(p+1)*m0], r.fy[p*m1:(p+1)*m1]
		for a := range m0 {
			for c := range m0 {
				d.s[0][a*m0+c] -= fx[a] * fx[c]
			}
			for c := range m1 {
				d.sxy[a*m1+c] -= fx[a] * fy[c]
			}
			d.sum[0][a] -= fx[a]
		}
		for a := range m1 {
			for c := range m1 {
				d.s[1][a*m1+c] -= fy[a] * fy[c]
			}
			d.sum[1][a] -= fy[a]
		}
	}
	d.n -= float64(r.pairs)
}

// scoreRing is S_k of the ring's pairs under the directions ax, ay.
func scoreRing(d *covariance, r *ridgeSearch, ax, ay []float64, k int) float64 {
	nv := r.pairs
	u, v := make([]float64, nv*k), make([]float64, nv*k)
	for p := range nv {
		for q := range k {
			for a := range d.m[0] {
				u[p*k+q] += r.fx[p*d.m[0]+a] * ax[a*k+q]
			}
			for a := range d.m[1] {
				v[p*k+q] += r.fy[p*d.m[1]+a] * ay[a*k+q]
			}
		}
	}
	return canonicalSum(u, v, nv, k)
}

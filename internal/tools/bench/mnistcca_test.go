package bench

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRegCCAClosedForm checks the baselines' CCA on data whose canonical
// correlations are known in closed form: x ~ N(0, I₄), yᵢ = ρᵢ·x_{π(i)} +
// √(1 − ρᵢ²)·eᵢ, each view then mixed by its own invertible matrix (CCA
// is invariant to it). The q-th pair of projections must correlate at the
// q-th largest ρ, and different pairs not at all.
func TestRegCCAClosedForm(t *testing.T) {
	const n, p, k = 40000, 4, 3
	rho := []float64{0.3, 0.9, 0.05, 0.6} // sorted: 0.9, 0.6, 0.3, 0.05
	perm := []int{2, 0, 3, 1}
	rng := rand.New(rand.NewPCG(7, 8))
	mix := func() [p][p]float64 {
		var m [p][p]float64
		for i := range m {
			for j := range m[i] {
				m[i][j] = rng.NormFloat64()
			}
			m[i][i] += 3 // well conditioned
		}
		return m
	}
	mx, my := mix(), mix()
	px, py := make([]float64, n*p), make([]float64, n*p)
	for r := 0; r < n; r++ {
		var x, y [p]float64
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		for i := range y {
			y[i] = rho[i]*x[perm[i]] + math.Sqrt(1-rho[i]*rho[i])*rng.NormFloat64()
		}
		for i := 0; i < p; i++ {
			for j := 0; j < p; j++ {
				px[r*p+i] += mx[i][j] * x[j]
				py[r*p+i] += my[i][j] * y[j]
			}
			px[r*p+i] += 5 // a mean to remove
		}
	}
	a, b, meanX, meanY, err := regCCA(px, py, n, p, k, 1e-9)
	if err != nil {
		t.Fatal(err)
	}
	u, v := make([]float64, n*k), make([]float64, n*k)
	project(u, px, n, p, meanX, a, k)
	project(v, py, n, p, meanY, b, k)
	corr := func(s, t []float64, i, j int) float64 {
		var si, sj, sij, sii, sjj float64
		for r := 0; r < n; r++ {
			x, y := s[r*k+i], t[r*k+j]
			si, sj, sij, sii, sjj = si+x, sj+y, sij+x*y, sii+x*x, sjj+y*y
		}
		m := float64(n)
		return (sij - si*sj/m) / math.Sqrt((sii-si*si/m)*(sjj-sj*sj/m))
	}
	want := []float64{0.9, 0.6, 0.3}
	tol := 4 / math.Sqrt(n)
	for q := 0; q < k; q++ {
		if got := math.Abs(corr(u, v, q, q)); math.Abs(got-want[q]) > tol {
			t.Errorf("pair %d: correlation %.4f, want %.2f ± %.3f", q, got, want[q], tol)
		}
		for r := 0; r < k; r++ {
			if r != q {
				if c := math.Abs(corr(u, v, q, r)); c > tol {
					t.Errorf("u%d and v%d correlate at %.4f, want 0 ± %.3f", q, r, c, tol)
				}
				if c := math.Abs(corr(u, u, q, r)); c > tol {
					t.Errorf("u%d and u%d correlate at %.4f, want 0 ± %.3f", q, r, c, tol)
				}
			}
		}
	}
}

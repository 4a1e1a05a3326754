package bench

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/online"
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

// evenHalves is a·f₁ + b·f₂ on an image's left half and a²·g₁ + |b|·g₂
// on its right: the halves share two latent variables only through even
// functions, so linear CCA of the pixels finds almost nothing and kernel
// CCA nearly two perfect correlations.
func evenHalves(r, c int, a, b float64) float64 {
	if c < 14 {
		return twoFactors(r, c, a, b)
	}
	c -= 14
	return a*a*math.Cos(float64(r-c)/6) + math.Abs(b)*math.Sin(float64(r*c+3)/30)
}

// RunMNISTCCA on halves related only through even functions: the
// learner's and Nyström's held-out S₂ come near 2 (of at most 2), linear
// CCA's near 0; the learner's curve has a checkpoint per epoch.
func TestRunMNISTCCAFindsTheEvenRelation(t *testing.T) {
	res := runEvenHalves(t, MNISTRun{Train: 512, Test: 256, K: 2, Epochs: 4, Batch: 128, Landmarks: 256})
	if res.Train != 512 || res.Test != 256 || res.K != 2 {
		t.Errorf("train %d test %d k %d, want 512, 256, 2", res.Train, res.Test, res.K)
	}
	by := map[string]CCAMethodResult{}
	for _, m := range res.Methods {
		t.Logf("%s (%d %s): S_2 %.3f in %.2f s, %d checkpoints", m.Method, m.Size, m.SizeOf, m.SumK, m.Seconds, len(m.Curve))
		by[strings.Fields(m.Method)[0]] = m
		if !(m.SumK >= 0 && m.SumK <= 2+1e-9) {
			t.Errorf("%s: S_2 %v outside [0, 2]", m.Method, m.SumK)
		}
	}
	learner, nystrom, linear := by["streamkpca"], by["Nyström"], by["linear"]
	if len(learner.Curve) != 4 || learner.SumK != learner.Curve[3].SumK {
		t.Errorf("the learner's curve has %d checkpoints, its S_2 %v; want one per epoch, 4, and the last one's", len(learner.Curve), learner.SumK)
	}
	if !(learner.SumK > 1.9) || !(nystrom.SumK > 1.9) || !(linear.SumK < 0.5) {
		t.Errorf("held-out S_2: learner %v, Nyström %v, linear CCA %v; want the kernel methods above 1.9 and linear CCA below 0.5",
			learner.SumK, nystrom.SumK, linear.SumK)
	}
}

// runEvenHalves is RunMNISTCCA on 800 images whose halves are related
// only through even functions (evenHalves), with a learner of 512
// features in blocks of 128.
func runEvenHalves(t *testing.T, run MNISTRun) MNISTCCAResult {
	t.Helper()
	res, err := RunMNISTCCA(t.Context(), latentImages(800, 1, evenHalves), MNISTCCAConfig{MNISTRun: run, Learner: online.Config{MaxFeatures: 512, BlockSize: 128}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

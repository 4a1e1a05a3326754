package baseline

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
)

// TestSubspaceIteration checks the iterative solver against a matrix
// built from a known eigendecomposition (Q·diag(λ)·Qᵀ, Q from a QR of a
// random matrix), above DenseEigMax so the iterative path runs.
func TestSubspaceIteration(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	n, k := DenseEigMax+100, 6
	g := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			g.Set(i, j, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	lam := make([]float64, n)
	for i := range lam {
		lam[i] = math.Pow(0.9, float64(i)) // gap 10% between neighbours
	}
	var ql, a mat.Dense
	ql.Apply(func(_, j int, v float64) float64 { return v * lam[j] }, &q)
	a.Mul(&ql, q.T())
	raw := mat.DenseCopyOf(&a).RawMatrix().Data
	symmetrize(raw, n)
	v, _, err := topEig(raw, n, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := synth.SubspaceError(v, q.Slice(0, n, 0, k)); e > 1e-10 {
		t.Fatalf("subspace error %.3g against the known eigenvectors, want ≤ 1e-10", e)
	}
}

func hermiteRun(t *testing.T, m Method, points int) float64 {
	t.Helper()
	h := synth.Hermite1D()
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, 512)
	for n := 0; n < points; n += len(x) {
		h.Sample(x, rng)
		m.Observe(x, len(x))
	}
	if err := m.Fit(); err != nil {
		t.Fatal(err)
	}
	const held = 2000
	xh := make([]float64, held)
	h.Sample(xh, rand.New(rand.NewPCG(2, 2)))
	out := make([]float64, held*3)
	m.Eval(out, xh, held)
	return synth.SubspaceError(mat.NewDense(held, 3, out), h.Eigenfunctions(xh, held, 3))
}

var gauss1 = features.Kernel{Family: features.Gaussian, Bandwidth: 1}

// The three baselines against the closed-form hermite eigenfunctions
// (GPML §4.3.1; the closed form itself is checked against an outside computation in
// internal/synth/testdata). Bounds are about 3× the errors measured here.
func TestBaselinesHermite(t *testing.T) {
	ex, err := NewExact(gauss1, 1, 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ny, err := NewNystrom(gauss1, 1, 3, 64)
	if err != nil {
		t.Fatal(err)
	}
	rf, err := NewRFF(gauss1, 1, 3, 512, 128, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	for _, c := range []struct {
		name   string
		m      Method
		points int
		bound  float64
	}{
		{"exact n=1000", ex, 1024, 4e-4},   // measured 1.0e-4
		{"nystrom m=64", ny, 20_000, 1e-4}, // measured
		{"rff m=512", rf, 20_000, 1e-2},    // measured
	} {
		e := hermiteRun(t, c.m, c.points)
		t.Logf("%s: subspace error %.3g", c.name, e)
		if !(e <= c.bound) {
			t.Errorf("%s: subspace error %.3g against the closed form, want ≤ %.3g", c.name, e, c.bound)
		}
	}
}

// Nyström with every sample point as a landmark is exact kernel PCA of
// that sample: T·K·K·T = K for T = K^{-1/2}, and k(x)·T·V spans k(x)·U.
func TestNystromAllLandmarksIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const n, d, k = 300, 3, 4
	x := make([]float64, n*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	kern := features.Kernel{Family: features.Gaussian, Bandwidth: 1.5}
	ex, _ := NewExact(kern, d, k, n)
	ny, _ := NewNystrom(kern, d, k, n)
	for _, m := range []Method{ex, ny} {
		m.Observe(x, n)
		if err := m.Fit(); err != nil {
			t.Fatal(err)
		}
	}
	xh := make([]float64, 500*d)
	for i := range xh {
		xh[i] = rng.NormFloat64()
	}
	a, b := make([]float64, 500*k), make([]float64, 500*k)
	ex.Eval(a, xh, 500)
	ny.Eval(b, xh, 500)
	if e := synth.SubspaceError(mat.NewDense(500, k, a), mat.NewDense(500, k, b)); e > 1e-8 {
		t.Fatalf("Nyström with all points as landmarks differs from exact KPCA: subspace error %.3g", e)
	}
}

// TestExactCenteredIsPCA: centred exact kernel PCA with the linear kernel
// is PCA: its functions on held-out points span what the top principal
// axes of the centred sample (gonum's SVD of the data matrix, another
// algorithm) give there. The data's mean (5, −3, 1, 2) is larger than its
// spread, so uncentred kernel PCA finds the mean direction instead, and
// the test fails without Center.
func TestExactCenteredIsPCA(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const n, m, d, k = 400, 200, 4, 2
	mean, sd := []float64{5, -3, 1, 2}, []float64{3, 1.5, 0.5, 0.2}
	gen := func(rows int) []float64 {
		x := make([]float64, rows*d)
		for i := range x {
			x[i] = mean[i%d] + sd[i%d]*rng.NormFloat64()
		}
		return x
	}
	x, hx := gen(n), gen(m)
	for _, center := range []bool{true, false} {
		e, err := NewExact(features.Kernel{Family: features.Linear}, d, k, n)
		if err != nil {
			t.Fatal(err)
		}
		e.Center = center
		e.Observe(x, n)
		if err := e.Fit(); err != nil {
			t.Fatal(err)
		}
		got := make([]float64, m*k)
		e.Eval(got, hx, m)
		// PCA: centre the sample, take its top right singular vectors.
		mu := make([]float64, d)
		for i := 0; i < n; i++ {
			for j := 0; j < d; j++ {
				mu[j] += x[i*d+j] / n
			}
		}
		xc := mat.NewDense(n, d, nil)
		for i := 0; i < n; i++ {
			for j := 0; j < d; j++ {
				xc.Set(i, j, x[i*d+j]-mu[j])
			}
		}
		var svd mat.SVD
		if !svd.Factorize(xc, mat.SVDThin) {
			t.Fatal("SVD failed")
		}
		var v mat.Dense
		svd.VTo(&v)
		hc := mat.NewDense(m, d, nil)
		for i := 0; i < m; i++ {
			for j := 0; j < d; j++ {
				hc.Set(i, j, hx[i*d+j]-mu[j])
			}
		}
		var want mat.Dense
		want.Mul(hc, v.Slice(0, d, 0, k))
		errS := synth.SubspaceError(mat.NewDense(m, k, got), &want)
		t.Logf("center %v: subspace error against PCA %.3g", center, errS)
		if center && errS > 1e-9 {
			t.Errorf("centred exact KPCA (linear kernel) vs PCA: subspace error %.3g, want ≤ 1e-9", errS)
		}
		if !center && errS < 1e-2 {
			t.Errorf("uncentred KPCA matched centred PCA (%.3g): the data do not test centring", errS)
		}
	}
}

package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// The Gaussian kernel's integral operator has trace E[k(x, x)] = 1, so
// the eigenvalues of every Hermite stream sum to 1; and the 1-D
// eigenvalues are geometric (Zhu et al. 1998: λ_n = √(2a/A)·(b/A)ⁿ), so
// their sum is λ₀/(1 − b/A) exactly.
func TestHermiteEigenvaluesSumToTheTrace(t *testing.T) {
	ev := Hermite1D().Eigenvalues(60)
	var s float64
	for i, v := range ev {
		s += v
		if i > 0 && !(v < ev[i-1]) {
			t.Fatalf("eigenvalue %d = %v not below the one before (%v)", i, v, ev[i-1])
		}
	}
	if math.Abs(s-1) > 1e-12 {
		t.Errorf("1-D: Σλ = %.15f, want 1 (the trace of the Gaussian kernel's operator)", s)
	}
	// 1-D, s = 1, ℓ = 1: a = 1/4, b = 1/2, c = √(a² + 2ab) = √5/4 and
	// A = a + b + c = φ²/2 (φ the golden ratio), so λ₀ = √(2a/A) = 1/φ,
	// b/A = 1/φ² and λ_n = φ^−(2n+1) (0.618034, 0.236068, 0.090170, …:
	// the figures of testdata/README.md); their sum is
	// (1/φ)/(1 − 1/φ²) = 1/(φ − 1/φ) = 1.
	phi := (1 + math.Sqrt(5)) / 2
	for n, v := range ev[:8] {
		if want := math.Pow(phi, -float64(2*n+1)); math.Abs(v-want) > 1e-13 {
			t.Errorf("λ_%d = %.15f, want φ^−(2n+1) = %.15f", n, v, want)
		}
	}
	// The 16-D product: its eigenvalues are the products of the
	// dimensions' and sum to Π_i Σ_n λ_{i,n} = 1; the top 2,000 hold most
	// of it, and no partial sum passes 1.
	var s16 float64
	for _, v := range Hermite16().Eigenvalues(2000) {
		s16 += v
	}
	if !(s16 > 0.9 && s16 <= 1+1e-12) {
		t.Errorf("16-D: the top 2,000 eigenvalues sum to %v, want in (0.9, 1]", s16)
	}
}

// The eigenfunctions are orthonormal in L2(p): E[φ_i φ_j] = δ_ij under
// the stream's own distribution, checked by Monte Carlo within 5
// standard errors.
func TestHermiteEigenfunctionsAreOrthonormal(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    Hermite
		k    int
	}{{"1-D", Hermite1D(), 4}, {"16-D", Hermite16(), 6}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 200000
			rng := rand.New(rand.NewPCG(11, 12))
			x := make([]float64, n*tc.h.Dim())
			tc.h.Sample(x, rng)
			f := tc.h.Eigenfunctions(x, n, tc.k)
			for i := 0; i < tc.k; i++ {
				for j := 0; j <= i; j++ {
					var m, m2 float64
					for r := 0; r < n; r++ {
						v := f.At(r, i) * f.At(r, j)
						m += v
						m2 += v * v
					}
					m /= n
					se := math.Sqrt((m2/n - m*m) / n)
					want := 0.0
					if i == j {
						want = 1
					}
					if math.Abs(m-want) > 5*se+1e-3 {
						t.Errorf("E[φ_%d φ_%d] = %.4f ± %.4f, want %v", i, j, m, se, want)
					}
				}
			}
		})
	}
}

// Sample draws N(0, diag(S²)): per-dimension mean and variance within 5
// standard errors.
func TestHermiteSampleMoments(t *testing.T) {
	h := Hermite16()
	const n = 100000
	d := h.Dim()
	x := make([]float64, n*d)
	h.Sample(x, rand.New(rand.NewPCG(1, 2)))
	for c := 0; c < d; c++ {
		var m, v float64
		for r := 0; r < n; r++ {
			m += x[r*d+c]
		}
		m /= n
		for r := 0; r < n; r++ {
			v += (x[r*d+c] - m) * (x[r*d+c] - m)
		}
		v /= n
		s2 := h.S[c] * h.S[c]
		if math.Abs(m) > 5*h.S[c]/math.Sqrt(n) {
			t.Errorf("dim %d: mean %v, want 0", c, m)
		}
		if math.Abs(v-s2) > 5*s2*math.Sqrt(2.0/n) {
			t.Errorf("dim %d: variance %v, want %v", c, v, s2)
		}
	}
}

// SubspaceError is 1 − cos² of the largest principal angle: 0 for the
// same span in another basis, sin²θ for lines at angle θ, 1 for
// orthogonal spans.
func TestSubspaceErrorClosedForms(t *testing.T) {
	a := mat.NewDense(3, 2, []float64{1, 0, 0, 1, 0, 0})
	b := mat.NewDense(3, 2, []float64{2, 1, 1, -3, 0, 0}) // the same plane, another basis
	if e := SubspaceError(a, b); e > 1e-15 {
		t.Errorf("same span: %v, want 0", e)
	}
	for _, th := range []float64{0.1, 0.7, 1.3} {
		u := mat.NewDense(2, 1, []float64{1, 0})
		v := mat.NewDense(2, 1, []float64{math.Cos(th), math.Sin(th)})
		if e, want := SubspaceError(u, v), math.Pow(math.Sin(th), 2); math.Abs(e-want) > 1e-14 {
			t.Errorf("lines at %v rad: %v, want sin² = %v", th, e, want)
		}
	}
	c := mat.NewDense(3, 1, []float64{0, 0, 1})
	if e := SubspaceError(mat.NewDense(3, 1, []float64{1, 1, 0}), c); math.Abs(e-1) > 1e-15 {
		t.Errorf("orthogonal spans: %v, want 1", e)
	}
}

// CanonicalCorrelations of a bivariate Gaussian with correlation ρ is ρ
// (within sampling error); of a column and an affine function of it, 1.
func TestCanonicalCorrelationsClosedForms(t *testing.T) {
	const n = 50000
	rng := rand.New(rand.NewPCG(5, 6))
	for _, rho := range []float64{0.2, 0.6, 0.9} {
		u, v := mat.NewDense(n, 1, nil), mat.NewDense(n, 1, nil)
		for i := 0; i < n; i++ {
			z1, z2 := rng.NormFloat64(), rng.NormFloat64()
			u.Set(i, 0, z1)
			v.Set(i, 0, rho*z1+math.Sqrt(1-rho*rho)*z2)
		}
		// The sample correlation's standard error is (1 − ρ²)/√n.
		if c := CanonicalCorrelations(u, v)[0]; math.Abs(c-rho) > 5*(1-rho*rho)/math.Sqrt(n) {
			t.Errorf("ρ = %v: %v", rho, c)
		}
		var w mat.Dense
		w.Apply(func(_, _ int, x float64) float64 { return 3 - 2*x }, u)
		if c := CanonicalCorrelations(u, &w)[0]; math.Abs(c-1) > 1e-9 {
			t.Errorf("an affine function: %v, want 1", c)
		}
	}
}

// The two-view stream plants a relation linear CCA cannot see: cos πz₁
// (y's first column) is uncorrelated with every column of x, yet a
// function of x (cos πx₁) recovers it up to the noise.
func TestTwoViewPlantsANonlinearRelation(t *testing.T) {
	const n = 40000
	x, y := TwoView(rand.New(rand.NewPCG(7, 8)), n)
	xm := mat.NewDense(n, TwoViewDimX, x)
	y0 := mat.NewDense(n, 1, nil)
	cx := mat.NewDense(n, 1, nil)
	for i := 0; i < n; i++ {
		y0.Set(i, 0, y[i*TwoViewDimY])
		cx.Set(i, 0, math.Cos(math.Pi*x[i*TwoViewDimX]))
	}
	if lin := firstCC(xm, y0); lin > 0.05 {
		t.Errorf("the best linear function of x correlates %v with cos πz₁, want ≈ 0", lin)
	}
	if c := CanonicalCorrelations(cx, y0)[0]; c < 0.8 {
		t.Errorf("cos πx₁ correlates %v with y's first column, want > 0.8", c)
	}
}

// firstCC is the largest canonical correlation between x's columns and
// y's single column: the correlation of y with its least-squares fit on
// x (computed apart from CanonicalCorrelations, by a solve).
func firstCC(x, y *mat.Dense) float64 {
	n, _ := x.Dims()
	var beta mat.Dense
	if err := beta.Solve(centred(x), centred(y)); err != nil {
		return math.NaN()
	}
	var fit mat.Dense
	fit.Mul(centred(x), &beta)
	return CanonicalCorrelations(&fit, mat.NewDense(n, 1, centred(y).RawMatrix().Data))[0]
}

// Mixture's views are independent given the class: within a class their
// correlation is 0, while over the classes the first coordinates
// correlate strongly (the class shifts both).
func TestMixtureViewsShareOnlyTheClass(t *testing.T) {
	const n = 30000
	x, y := Mixture(rand.New(rand.NewPCG(9, 10)), n)
	d := MixtureDim
	u, v := mat.NewDense(n, 1, nil), mat.NewDense(n, 1, nil)
	for i := 0; i < n; i++ {
		u.Set(i, 0, x[i*d])
		v.Set(i, 0, y[i*d+d-1]) // y reverses the coordinates' order
	}
	if c := CanonicalCorrelations(u, v)[0]; c < 0.8 {
		t.Errorf("x₀ and y's last coordinate correlate %v over the classes, want > 0.8", c)
	}
	// Class 2 alone (x₀ near 4 ± 0.5, far from the others' mass): the
	// views are independent given the class.
	var us, vs []float64
	for i := 0; i < n; i++ {
		if x[i*d] > 3 && x[i*d+1] > 3 {
			us, vs = append(us, x[i*d]), append(vs, y[i*d+d-1])
		}
	}
	m := len(us)
	if c := CanonicalCorrelations(mat.NewDense(m, 1, us), mat.NewDense(m, 1, vs))[0]; c > 5/math.Sqrt(float64(m)) {
		t.Errorf("within class 2 (%d pairs) the views correlate %v, want ≈ 0", m, c)
	}
}

// Digits are 8×8 images with values in [0, 16], and the ten classes'
// mean images differ from each other more than one image varies.
func TestDigitsShapeAndClasses(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	img := Digits(rng, 500)
	if len(img) != 500*64 {
		t.Fatalf("%d values, want 500×64", len(img))
	}
	for i, v := range img {
		if !(v >= 0 && v <= 16) {
			t.Fatalf("value %d = %v, want in [0, 16]", i, v)
		}
	}
	const per = 200
	means := make([][]float64, 10)
	for c := range means {
		means[c] = make([]float64, 64)
		for range per {
			for j, v := range DigitsOfClass(rng, c) {
				means[c][j] += v / per
			}
		}
	}
	for a := 0; a < 10; a++ {
		for b := a + 1; b < 10; b++ {
			var s float64
			for j := range means[a] {
				s += (means[a][j] - means[b][j]) * (means[a][j] - means[b][j])
			}
			if math.Sqrt(s) < 5 {
				t.Errorf("classes %d and %d: mean images %.2f apart, want ≥ 5", a, b, math.Sqrt(s))
			}
		}
	}
}

package baseline

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
)

// TestGramIsTheClosedForm: the Gaussian Gram matrix by one GEMM
// (‖x‖² + ‖z‖² − 2x·z) equals exp(−‖x − z‖²/(2ℓ²)) computed pair by pair
// here, to rounding; the linear kernel's, x·z.
func TestGramIsTheClosedForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const rows, n, d = 7, 5, 4
	x, z := make([]float64, rows*d), make([]float64, n*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	for i := range z {
		z[i] = 2 * rng.NormFloat64()
	}
	zn := make([]float64, n)
	for j := range zn {
		zn[j] = sqNorm(z[j*d : j*d+d])
	}
	const ell = 1.7
	g, lin := make([]float64, rows*n), make([]float64, rows*n)
	kernelGram(g, x, rows, z, zn, n, d, features.Kernel{Family: features.Gaussian, Bandwidth: ell})
	kernelGram(lin, x, rows, z, zn, n, d, features.Kernel{Family: features.Linear})
	for i := range rows {
		for j := range n {
			var sq, dot float64
			for c := range d {
				diff := x[i*d+c] - z[j*d+c]
				sq += diff * diff
				dot += x[i*d+c] * z[j*d+c]
			}
			if want := math.Exp(-sq / (2 * ell * ell)); math.Abs(g[i*n+j]-want) > 1e-13 {
				t.Errorf("gaussian (%d,%d) = %.16g, want %.16g", i, j, g[i*n+j], want)
			}
			if math.Abs(lin[i*n+j]-dot) > 1e-12 {
				t.Errorf("linear (%d,%d) = %.16g, want %.16g", i, j, lin[i*n+j], dot)
			}
		}
	}
}

// TestExactOnTwoPoints: the Gram matrix of two points is [[1 a] [a 1]]
// with a = exp(−‖x₁ − x₂‖²/(2ℓ²)); its eigenvectors are (1, 1)/√2 for
// 1 + a and (1, −1)/√2 for 1 − a, so the top eigenfunction takes equal
// values at the two points, and the second opposite ones.
func TestExactOnTwoPoints(t *testing.T) {
	e, err := NewExact(features.Kernel{Family: features.Gaussian, Bandwidth: 1}, 1, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if e.Full() {
		t.Error("Full before any point")
	}
	e.Observe([]float64{0, 1, 5}, 3) // the third point is past the sample
	if !e.Full() {
		t.Error("not Full after two points")
	}
	if err := e.Fit(); err != nil {
		t.Fatal(err)
	}
	f := make([]float64, 4)
	e.Eval(f, []float64{0, 1}, 2)
	if math.Abs(f[0]-f[2]) > 1e-12*math.Abs(f[0]) || math.Abs(f[1]+f[3]) > 1e-12*math.Abs(f[1]) {
		t.Errorf("eigenfunctions at the points %v: want the first equal, the second opposite", f)
	}
	// f = K·U: the first is (1 + a)/√2 at both points.
	a := math.Exp(-0.5)
	if want := (1 + a) / math.Sqrt2; math.Abs(math.Abs(f[0])-want) > 1e-12 {
		t.Errorf("first eigenfunction %v at the points, want ±%v", f[0], want)
	}
}

// TestNystromWaitsForItsLandmarks: points seen before the m landmarks are
// complete are not lost: m landmarks fed one point at a time give the
// same model as all at once (all landmarks, so the exact one: the
// hermite stream's closed form to the error of 400 points).
func TestNystromWaitsForItsLandmarks(t *testing.T) {
	h := synth.Hermite1D()
	x := make([]float64, 400)
	h.Sample(x, rand.New(rand.NewPCG(5, 5)))
	kern := features.Kernel{Family: features.Gaussian, Bandwidth: 1}
	at, err := NewNystrom(kern, 1, 3, 400)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := NewNystrom(kern, 1, 3, 400)
	at.Observe(x, 400)
	for i := range 400 {
		one.Observe(x[i:i+1], 1)
	}
	test := make([]float64, 500)
	h.Sample(test, rand.New(rand.NewPCG(6, 6)))
	truth := h.Eigenfunctions(test, 500, 3)
	for name, m := range map[string]*Nystrom{"at once": at, "one by one": one} {
		if err := m.Fit(); err != nil {
			t.Fatal(err)
		}
		f := make([]float64, 500*3)
		m.Eval(f, test, 500)
		if e := synth.SubspaceError(mat.NewDense(500, 3, f), truth); e > 0.05 {
			t.Errorf("%s: subspace error %.3g against the closed form, want ≤ 0.05", name, e)
		}
	}
}

// TestConstructorsRefuseWhatCannotWork: fewer landmarks or points than
// components, or an invalid kernel, is an error saying so.
func TestConstructorsRefuseWhatCannotWork(t *testing.T) {
	g := features.Kernel{Family: features.Gaussian, Bandwidth: 1}
	if _, err := NewNystrom(g, 2, 5, 4); err == nil || !strings.Contains(err.Error(), "4 landmarks cannot give 5") {
		t.Errorf("NewNystrom m < k: %v", err)
	}
	if _, err := NewExact(g, 2, 5, 4); err == nil || !strings.Contains(err.Error(), "4 points cannot give 5") {
		t.Errorf("NewExact n < k: %v", err)
	}
	bad := features.Kernel{Family: features.Gaussian, Bandwidth: -1}
	if _, err := NewNystrom(bad, 2, 1, 4); err == nil {
		t.Error("NewNystrom with a negative bandwidth")
	}
	if _, err := NewExact(bad, 2, 1, 4); err == nil {
		t.Error("NewExact with a negative bandwidth")
	}
	e, _ := NewExact(g, 1, 3, 10)
	e.Observe([]float64{1, 2}, 2)
	if err := e.Fit(); err == nil {
		t.Error("Fit with 2 points for 3 components")
	}
}

// TestOrthMakesOrthonormalColumns: orth leaves QᵀQ = I and the span of
// the columns unchanged (each original column is its projection).
func TestOrthMakesOrthonormalColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	a := mat.NewDense(30, 4, nil)
	a.Apply(func(_, _ int, _ float64) float64 { return rng.NormFloat64() }, a)
	q := mat.DenseCopyOf(a)
	orth(q)
	var qtq, proj, back mat.Dense
	qtq.Mul(q.T(), q)
	if !mat.EqualApprox(&qtq, eye(4), 1e-13) {
		t.Errorf("QᵀQ = %v", mat.Formatted(&qtq))
	}
	proj.Mul(q.T(), a)
	back.Mul(q, &proj)
	if !mat.EqualApprox(&back, a, 1e-12) {
		t.Error("the columns' span changed")
	}
	if r, c := dims(nil); r != 0 || c != 0 {
		t.Errorf("dims(nil) = %d, %d", r, c)
	}
}

func eye(n int) *mat.Dense {
	m := mat.NewDense(n, n, nil)
	for i := range n {
		m.Set(i, i, 1)
	}
	return m
}

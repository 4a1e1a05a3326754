package features

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// nystromTruth is k(x, Z)(K_ZZ + εI)⁻¹k(Z, y) by gonum's Cholesky solve
// and Kernel.Eval: an evaluation that shares nothing with landmark.go but
// the kernel's closed form.
func nystromTruth(k Kernel, z []float64, nb, d int, eps float64, x, y []float64) float64 {
	kzz := mat.NewSymDense(nb, nil)
	for i := 0; i < nb; i++ {
		for j := i; j < nb; j++ {
			v := k.Eval(z[i*d:i*d+d], z[j*d:j*d+d])
			if i == j {
				v += eps
			}
			kzz.SetSym(i, j, v)
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(kzz) {
		panic("not positive definite")
	}
	kx, ky := mat.NewVecDense(nb, nil), mat.NewVecDense(nb, nil)
	for i := 0; i < nb; i++ {
		kx.SetVec(i, k.Eval(x, z[i*d:i*d+d]))
		ky.SetVec(i, k.Eval(y, z[i*d:i*d+d]))
	}
	var s mat.VecDense
	if err := ch.SolveVecTo(&s, ky); err != nil {
		panic(err)
	}
	return mat.Dot(kx, &s)
}

func TestLandmarksAreNystrom(t *testing.T) {
	const d, nb = 5, 24
	rng := rand.New(rand.NewPCG(3, 4))
	pts := make([]float64, 40*d)
	for i := range pts {
		pts[i] = rng.NormFloat64()
	}
	for _, k := range []Kernel{
		{Family: Gaussian, Bandwidth: 1.5},
		{Family: Laplacian, Bandwidth: 2},
		{Family: Matern, Bandwidth: 2, Nu: 1.5},
		{Family: Polynomial, Degree: 2, Offset: 1},
		{Family: ArcCosine, Degree: 1},
	} {
		t.Run(string(k.Family), func(t *testing.T) {
			m := Map{Kernel: k, Dim: d, BlockSize: nb, Landmarks: true}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			z := pts[:nb*d]
			lb, err := m.NewLandmarks(z)
			if err != nil {
				t.Fatal(err)
			}
			rows := 40
			phi := make([]float64, rows*nb)
			m.PhiTo(phi, make([]float64, m.ScratchLen()), pts, rows, &Block{LM: lb})
			dot := func(a, b int) float64 {
				var s float64
				for f := 0; f < nb; f++ {
					s += phi[a*nb+f] * phi[b*nb+f]
				}
				return s
			}
			var worst, worstInterp float64
			for a := 0; a < rows; a += 3 {
				for b := a; b < rows; b += 5 {
					want := nystromTruth(k, z, nb, d, lb.Jitter, pts[a*d:a*d+d], pts[b*d:b*d+d])
					scale := math.Sqrt(k.Eval(pts[a*d:a*d+d], pts[a*d:a*d+d]) * k.Eval(pts[b*d:b*d+d], pts[b*d:b*d+d]))
					worst = math.Max(worst, math.Abs(dot(a, b)-want)/scale)
					if a < nb && b < nb { // both landmarks: the kernel itself
						worstInterp = math.Max(worstInterp, math.Abs(dot(a, b)-k.Eval(pts[a*d:a*d+d], pts[b*d:b*d+d]))/scale)
					}
				}
			}
			if worst > 1e-7 {
				t.Errorf("ψ(x)·ψ(y) differs from the Nyström closed form by %.3g (relative)", worst)
			}
			if worstInterp > 1e-6 {
				t.Errorf("on the landmarks ψ(z)·ψ(z') differs from k(z, z') by %.3g (relative)", worstInterp)
			}
			// Row grouping never changes the bits.
			one := make([]float64, nb)
			for r := 0; r < rows; r++ {
				m.PhiTo(one, make([]float64, m.ScratchLen()), pts[r*d:r*d+d], 1, &Block{LM: lb})
				for f := range one {
					if one[f] != phi[r*nb+f] {
						t.Fatalf("row %d feature %d: %v alone, %v in a batch", r, f, one[f], phi[r*nb+f])
					}
				}
			}
		})
	}
}

func TestLandmarksRepeatedPoints(t *testing.T) {
	// Every landmark twice: K_ZZ is singular, the jitter makes it usable and
	// ψ still interpolates the kernel.
	const d, nb = 3, 8
	z := make([]float64, nb*d)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < nb/2; i++ {
		for c := 0; c < d; c++ {
			v := rng.NormFloat64()
			z[(2*i)*d+c], z[(2*i+1)*d+c] = v, v
		}
	}
	m := Map{Kernel: Kernel{Family: Gaussian, Bandwidth: 1}, Dim: d, BlockSize: nb, Landmarks: true}
	lb, err := m.NewLandmarks(z)
	if err != nil {
		t.Fatal(err)
	}
	phi := make([]float64, nb*nb)
	m.PhiTo(phi, make([]float64, m.ScratchLen()), z, nb, &Block{LM: lb})
	for a := 0; a < nb; a++ {
		var s float64
		for f := 0; f < nb; f++ {
			if math.IsNaN(phi[a*nb+f]) || math.IsInf(phi[a*nb+f], 0) {
				t.Fatalf("non-finite feature %v", phi[a*nb+f])
			}
			s += phi[a*nb+f] * phi[a*nb+f]
		}
		if math.Abs(s-1) > 1e-6 {
			t.Errorf("‖ψ(z_%d)‖² = %v, want k(z, z) = 1", a, s)
		}
	}
}

func TestLandmarksRefused(t *testing.T) {
	for _, m := range []Map{
		{Kernel: Kernel{Family: Gaussian, Bandwidth: 1}, Dim: 2, BlockSize: 4, Landmarks: true, Float32: true},
		{Kernel: Kernel{Family: Gaussian, Bandwidth: 1}, Dim: 2, BlockSize: 4, Landmarks: true, BLAS: true},
		{Kernel: Kernel{Family: Matern, Bandwidth: 1, Nu: 3}, Dim: 2, BlockSize: 4, Landmarks: true},
		{Kernel: Kernel{Family: Linear}, Dim: 4, BlockSize: 4, Landmarks: true},
	} {
		if err := m.Validate(); !errors.Is(err, ErrKernel) {
			t.Errorf("%+v: Validate = %v, want ErrKernel", m, err)
		}
	}
	m := Map{Kernel: Kernel{Family: Gaussian, Bandwidth: 1}, Dim: 2, BlockSize: 2, Landmarks: true}
	if _, err := m.NewLandmarks([]float64{0, 1, math.NaN(), 2}); !errors.Is(err, ErrLandmarks) {
		t.Errorf("NaN landmark: %v, want ErrLandmarks", err)
	}
	if _, err := m.NewLandmarks([]float64{0, 1, 2}); !errors.Is(err, ErrLandmarks) {
		t.Errorf("short landmarks: %v, want ErrLandmarks", err)
	}
}

func BenchmarkLandmarkPhi(b *testing.B) {
	const d, nb, rows = 784, 512, 512
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = rng.Float64()
	}
	m := Map{Kernel: Kernel{Family: Gaussian, Bandwidth: 9}, Dim: d, BlockSize: nb, Landmarks: true}
	lb, err := m.NewLandmarks(x[:nb*d])
	if err != nil {
		b.Fatal(err)
	}
	phi := make([]float64, rows*nb)
	z := make([]float64, m.ScratchLen())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.PhiTo(phi, z, x, rows, &Block{LM: lb})
	}
}

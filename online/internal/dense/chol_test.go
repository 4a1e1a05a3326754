package dense

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// spd returns XᵀX/k + I for a random k×n X.
func spd(rng *rand.Rand, n, k int) Mat {
	x := randMat(rng, k, n, n)
	a := newMat(n, n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for r := 0; r < k; r++ {
				s += x.at(r, i) * x.at(r, j)
			}
			a.Data[i*n+j] = s / float64(k)
		}
		a.Data[i*n+i]++
	}
	return a
}

// The factor is gonum's (LAPACK's dpotrf, another algorithm) to rounding,
// and UᵀU gives A back; a matrix that is not positive definite is refused.
func TestCholeskyAgainstGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 5, 127, 128, 300} {
		a := spd(rng, n, n+10)
		u := newMat(n, n)
		copy(u.Data, a.Data)
		ws := Workspace{Workers: 2}
		defer ws.Close()
		if !ws.Cholesky(u) {
			t.Fatalf("n=%d: refused a positive definite matrix", n)
		}
		g := append([]float64(nil), a.Data...)
		if _, ok := lapack64.Potrf(blas64.Symmetric{N: n, Stride: n, Data: g, Uplo: blas.Upper}); !ok {
			t.Fatal("gonum refused it")
		}
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				if d := math.Abs(u.at(i, j) - g[i*n+j]); d > 1e-12 {
					t.Fatalf("n=%d: U[%d,%d] = %v, gonum %v", n, i, j, u.at(i, j), g[i*n+j])
				}
				var s float64
				for l := 0; l <= i; l++ {
					s += u.at(l, i) * u.at(l, j)
				}
				if d := math.Abs(s - a.at(i, j)); d > 1e-12*float64(n) {
					t.Fatalf("n=%d: (UᵀU)[%d,%d] = %v, A %v", n, i, j, s, a.at(i, j))
				}
			}
		}
	}
	a := spd(rng, 200, 300)
	a.Data[150*200+150] = -1
	ws := Workspace{Workers: 1}
	if ws.Cholesky(a) {
		t.Fatal("accepted a matrix with a negative diagonal")
	}
}

// U·X = B and Uᵀ·X = B are solved: the residuals vanish to rounding.
func TestSolveUpperResidual(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{3, 64, 65, 250} {
		a := spd(rng, n, n+5)
		ws := Workspace{Workers: 2}
		defer ws.Close()
		if !ws.Cholesky(a) {
			t.Fatal("not positive definite")
		}
		for _, trans := range []bool{false, true} {
			const p = 21
			b := randMat(rng, n, p, p)
			x := newMat(n, p)
			copy(x.Data, b.Data)
			ws.SolveUpper(a, x, trans)
			for i := 0; i < n; i++ {
				for j := 0; j < p; j++ {
					var s float64
					for l := 0; l < n; l++ {
						ul := 0.0
						if !trans && l >= i {
							ul = a.at(i, l)
						} else if trans && l <= i {
							ul = a.at(l, i)
						}
						s += ul * x.at(l, j)
					}
					if math.Abs(s-b.at(i, j)) > 1e-11 {
						t.Fatalf("n=%d trans=%v: residual at (%d,%d): %v vs %v", n, trans, i, j, s, b.at(i, j))
					}
				}
			}
		}
	}
}

// BenchmarkCholesky factors the covariance solver's 2,048×2,048 matrix,
// next to gonum's dpotrf.
func BenchmarkCholesky(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 2048
	x := randMat(rng, 512, n, n)
	a := newMat(n, n)
	ws := Workspace{Workers: 2}
	defer ws.Close()
	ws.Gemm(Op{TransA: true, Upper: true}, x, x, a)
	for i := 0; i < n; i++ {
		a.Data[i*n+i] += 1
	}
	u := newMat(n, n)
	b.Run("dense", func(b *testing.B) {
		for b.Loop() {
			copy(u.Data, a.Data)
			if !ws.Cholesky(u) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("gonum", func(b *testing.B) {
		for b.Loop() {
			copy(u.Data, a.Data)
			lapack64.Potrf(blas64.Symmetric{N: n, Stride: n, Data: u.Data, Uplo: blas.Upper})
		}
	})
}

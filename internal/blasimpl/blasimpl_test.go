package blasimpl

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// The linked BLAS (gonum or OpenBLAS) multiplies like the textbook triple
// loop, to rounding.
func TestGemmAgainstLoops(t *testing.T) {
	t.Logf("BLAS: %s %s", Name, CoreName())
	rng := rand.New(rand.NewPCG(1, 1))
	const m, k, n = 37, 300, 45
	a, b, c := make([]float64, m*k), make([]float64, k*n), make([]float64, m*n)
	for i := range a {
		a[i] = rng.NormFloat64()
	}
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, blas64.General{Rows: m, Cols: k, Data: a, Stride: k},
		blas64.General{Rows: k, Cols: n, Data: b, Stride: n}, 0, blas64.General{Rows: m, Cols: n, Data: c, Stride: n})
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, abs float64
			for p := 0; p < k; p++ {
				s += a[i*k+p] * b[p*n+j]
				abs += math.Abs(a[i*k+p] * b[p*n+j])
			}
			if math.Abs(c[i*n+j]-s) > 1e-13*abs {
				t.Fatalf("C[%d,%d] = %v, loops give %v", i, j, c[i*n+j], s)
			}
		}
	}
}

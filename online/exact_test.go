package online

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
)

// exactKPCA is the reference: the top-k eigenpairs of the uncentred Gram
// matrix K/n of the training points, computed by gonum's EigenSym, with the
// Nyström extension φ_j(x) = Σ_i k(x, x_i)·v_ij to new points.
type exactKPCA struct {
	kern  features.Kernel
	train []float64
	n, d  int
	vals  []float64  // top k eigenvalues of K/n, decreasing
	vecs  *mat.Dense // n×k
}

func newExactKPCA(t testing.TB, kern features.Kernel, x []float64, n, d, k int) *exactKPCA {
	t.Helper()
	K := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			K.SetSym(i, j, kern.Eval(x[i*d:i*d+d], x[j*d:j*d+d])/float64(n))
		}
	}
	vals, vecs := topEigen(t, K, k)
	return &exactKPCA{kern: kern, train: x, n: n, d: d, vals: vals, vecs: vecs}
}

// at evaluates the exact eigenfunctions at rows points (rows×k).
func (e *exactKPCA) at(x []float64, rows int) *mat.Dense {
	kx := mat.NewDense(rows, e.n, nil)
	for r := 0; r < rows; r++ {
		for i := 0; i < e.n; i++ {
			kx.Set(r, i, e.kern.Eval(x[r*e.d:r*e.d+e.d], e.train[i*e.d:i*e.d+e.d]))
		}
	}
	var out mat.Dense
	out.Mul(kx, e.vecs)
	return &out
}

// curvedData draws 10-dimensional non-Gaussian points: a 2-D latent
// (uniform and exponential) pushed through smooth nonlinear maps, plus
// noise.
func curvedData(rng *rand.Rand, n int) []float64 {
	const d = 10
	x := make([]float64, n*d)
	for i := 0; i < n; i++ {
		u := 2*rng.Float64() - 1
		v := rng.ExpFloat64()
		row := x[i*d : i*d+d]
		row[0] = 2 * u
		row[1] = math.Sin(3 * u)
		row[2] = v
		row[3] = u * v
		row[4] = math.Cos(2*u) * v
		row[5] = u * u
		for c := 6; c < d; c++ {
			row[c] = 0.3 * rng.NormFloat64()
		}
	}
	return x
}

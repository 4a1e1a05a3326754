package baseline

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
)

// Method is one way of learning the top-k eigenfunctions from a stream.
type Method interface {
	// Observe consumes rows×d points (row-major).
	Observe(x []float64, rows int)
	// Fit extracts the current estimate of the top-k eigenfunctions.
	Fit() error
	// Eval sets dst (rows×k, row-major) to the k eigenfunctions of the
	// last Fit at the rows×d points x, up to an invertible linear map
	// (subspace errors do not depend on it).
	Eval(dst, x []float64, rows int)
}

// DenseEigMax is the largest matrix order solved by a full symmetric
// eigendecomposition; larger ones use subspace iteration.
const DenseEigMax = 1024

// ErrNotConverged is returned when subspace iteration stops at its
// iteration limit; the estimate it leaves is still usable.
var ErrNotConverged = errors.New("baseline: subspace iteration did not converge")

// gaussGram sets dst (rows×n) to exp(−‖x_i − z_j‖²/(2ℓ²)) through one
// GEMM: ‖x‖² + ‖z‖² − 2·x·zᵀ. zn holds ‖z_j‖².
func gaussGram(dst, x []float64, rows int, z, zn []float64, n, d int, ell float64) {
	blas64.Gemm(blas.NoTrans, blas.Trans, -2,
		blas64.General{Rows: rows, Cols: d, Data: x, Stride: d},
		blas64.General{Rows: n, Cols: d, Data: z, Stride: d},
		0, blas64.General{Rows: rows, Cols: n, Data: dst, Stride: n})
	s := -1 / (2 * ell * ell)
	for i := 0; i < rows; i++ {
		xn := sqNorm(x[i*d : i*d+d])
		r := dst[i*n : i*n+n]
		for j := range r {
			r[j] = math.Exp(s * max(r[j]+xn+zn[j], 0))
		}
	}
}

func sqNorm(v []float64) float64 {
	var s float64
	for _, a := range v {
		s += a * a
	}
	return s
}

// kernelGram sets dst (rows×n) to k(x_i, z_j), by GEMM for the Gaussian
// kernel and pair by pair otherwise.
func kernelGram(dst, x []float64, rows int, z, zn []float64, n, d int, k features.Kernel) {
	if k.Family == features.Gaussian {
		gaussGram(dst, x, rows, z, zn, n, d, k.Bandwidth)
		return
	}
	for i := 0; i < rows; i++ {
		for j := 0; j < n; j++ {
			dst[i*n+j] = k.Eval(x[i*d:i*d+d], z[j*d:j*d+d])
		}
	}
}

// symmetrize copies the upper triangle of the n×n matrix a into its lower.
func symmetrize(a []float64, n int) {
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			a[j*n+i] = a[i*n+j]
		}
	}
}

// topEig returns the top-k eigenvectors (n×k, columns by decreasing
// eigenvalue) of the symmetric n×n matrix a (full storage, both triangles
// set). warm, if n×p, starts subspace iteration.
func topEig(a []float64, n, k int, warm *mat.Dense) (vecs *mat.Dense, basis *mat.Dense, err error) {
	if n <= DenseEigMax {
		var es mat.EigenSym
		if !es.Factorize(mat.NewSymDense(n, slices.Clone(a)), true) {
			return nil, nil, errors.New("baseline: eigendecomposition failed")
		}
		var v mat.Dense
		es.VectorsTo(&v)
		out := mat.NewDense(n, k, nil)
		for j := 0; j < k; j++ { // EigenSym sorts ascending
			out.SetCol(j, mat.Col(nil, n-1-j, &v))
		}
		return out, nil, nil
	}
	return subspaceIter(a, n, k, warm)
}

// subspaceIter is block power iteration with Rayleigh–Ritz on p = 2k + 10
// vectors: Y = A·Q, Ritz pairs of QᵀY, stop when every one of the top k
// residuals ‖A·q_i − θ_i·q_i‖ is below 1e-7·θ_1 (eigenvector angles ≲ 1e-7·θ_1/gap).
func subspaceIter(a []float64, n, k int, warm *mat.Dense) (*mat.Dense, *mat.Dense, error) {
	p := min(2*k+10, n)
	q := mat.NewDense(n, p, nil)
	if r, c := dims(warm); r == n && c == p {
		q.Copy(warm)
	} else {
		rng := rand.New(rand.NewPCG(1, 1))
		for i := 0; i < n; i++ {
			for j := 0; j < p; j++ {
				q.Set(i, j, rng.NormFloat64())
			}
		}
	}
	orth(q)
	am := blas64.General{Rows: n, Cols: n, Data: a, Stride: n}
	y := mat.NewDense(n, p, nil)
	var t, u, qu, yu mat.Dense
	var es mat.EigenSym
	const maxIter = 2000
	for it := 0; it < maxIter; it++ {
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, am, q.RawMatrix(), 0, y.RawMatrix())
		t.Mul(q.T(), y)
		ts := mat.NewSymDense(p, nil)
		for i := 0; i < p; i++ {
			for j := i; j < p; j++ {
				ts.SetSym(i, j, (t.At(i, j)+t.At(j, i))/2)
			}
		}
		if !es.Factorize(ts, true) {
			return nil, nil, errors.New("baseline: Rayleigh–Ritz eigendecomposition failed")
		}
		es.VectorsTo(&u)
		vals := es.Values(nil)
		rev := mat.NewDense(p, p, nil) // columns by decreasing value
		for j := 0; j < p; j++ {
			rev.SetCol(j, mat.Col(nil, p-1-j, &u))
		}
		qu.Mul(q, rev)
		yu.Mul(y, rev)
		worst := 0.0
		for j := 0; j < k; j++ {
			th := vals[p-1-j]
			var r2 float64
			for i := 0; i < n; i++ {
				dv := yu.At(i, j) - th*qu.At(i, j)
				r2 += dv * dv
			}
			worst = max(worst, math.Sqrt(r2))
		}
		if worst <= 1e-7*math.Abs(vals[p-1]) {
			return mat.DenseCopyOf(qu.Slice(0, n, 0, k)), mat.DenseCopyOf(&qu), nil
		}
		q.Copy(&yu)
		orth(q)
	}
	return mat.DenseCopyOf(qu.Slice(0, n, 0, k)), mat.DenseCopyOf(&qu), fmt.Errorf("%w after %d iterations", ErrNotConverged, maxIter)
}

func dims(m *mat.Dense) (int, int) {
	if m == nil {
		return 0, 0
	}
	return m.Dims()
}

// orth replaces the columns of q by an orthonormal basis of their span
// (modified Gram–Schmidt, twice).
func orth(q *mat.Dense) {
	n, p := q.Dims()
	raw := q.RawMatrix()
	col := make([]float64, n)
	for pass := 0; pass < 2; pass++ {
		for j := 0; j < p; j++ {
			for i := 0; i < n; i++ {
				col[i] = raw.Data[i*raw.Stride+j]
			}
			for c := 0; c < j; c++ {
				var dot float64
				for i := 0; i < n; i++ {
					dot += raw.Data[i*raw.Stride+c] * col[i]
				}
				for i := 0; i < n; i++ {
					col[i] -= dot * raw.Data[i*raw.Stride+c]
				}
			}
			nrm := math.Sqrt(sqNorm(col))
			if nrm == 0 {
				nrm = 1
			}
			for i := 0; i < n; i++ {
				raw.Data[i*raw.Stride+j] = col[i] / nrm
			}
		}
	}
}

// TopEigenvectors returns the top-k eigenvectors (n×k, by decreasing
// eigenvalue) of the symmetric n×n matrix a (full storage, both triangles
// set): a dense eigendecomposition up to DenseEigMax, else subspace
// iteration (an error wrapping ErrNotConverged with its last iterate).
func TopEigenvectors(a []float64, n, k int) (*mat.Dense, error) {
	v, _, err := topEig(a, n, k, nil)
	return v, err
}

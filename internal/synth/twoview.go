package synth

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// TwoViewDims are the dimensions of the twoview stream's x and y.
const TwoViewDimX, TwoViewDimY = 6, 6

// TwoView draws n pairs (x, y) sharing a planted nonlinear latent signal:
// z ~ U(−1, 1)², x = (z₁, z₂, z₁z₂, noise…), y = (cos πz₁, z₂², sin πz₂·…,
// noise…), all plus Gaussian noise. cos πz₁ and z₂² are uncorrelated with
// every linear function of x (they are even in z₁, z₂), so linear CCA misses
// what kernel CCA finds.
func TwoView(rng *rand.Rand, n int) (x, y []float64) {
	x = make([]float64, n*TwoViewDimX)
	y = make([]float64, n*TwoViewDimY)
	for i := 0; i < n; i++ {
		z1, z2 := 2*rng.Float64()-1, 2*rng.Float64()-1
		xr, yr := x[i*TwoViewDimX:(i+1)*TwoViewDimX], y[i*TwoViewDimY:(i+1)*TwoViewDimY]
		xr[0], xr[1], xr[2] = z1, z2, z1*z2
		yr[0], yr[1], yr[2] = math.Cos(math.Pi*z1), z2*z2, math.Sin(math.Pi*z2)*z1
		for j := range xr {
			if j >= 3 {
				xr[j] = rng.NormFloat64()
			} else {
				xr[j] += 0.1 * rng.NormFloat64()
			}
		}
		for j := range yr {
			if j >= 3 {
				yr[j] = rng.NormFloat64()
			} else {
				yr[j] += 0.1 * rng.NormFloat64()
			}
		}
	}
	return x, y
}

// CanonicalCorrelations returns the canonical correlations between the
// column spans of u and v (n×k each, evaluations on the same points),
// largest first: the singular values of L_u⁻¹·C_uv·L_v⁻ᵀ with C the
// centred (cross-)covariances and L their Cholesky factors.
func CanonicalCorrelations(u, v mat.Matrix) []float64 {
	n, k := u.Dims()
	cu, cv := centred(u), centred(v)
	var suu, svv mat.SymDense
	suu.SymOuterK(1/float64(n), cu.T())
	svv.SymOuterK(1/float64(n), cv.T())
	for i := 0; i < k; i++ {
		suu.SetSym(i, i, suu.At(i, i)*(1+1e-12)+1e-300)
		svv.SetSym(i, i, svv.At(i, i)*(1+1e-12)+1e-300)
	}
	var cuv mat.Dense
	cuv.Mul(cu.T(), cv)
	cuv.Scale(1/float64(n), &cuv)
	var chu, chv mat.Cholesky
	if !chu.Factorize(&suu) || !chv.Factorize(&svv) {
		return make([]float64, k)
	}
	var lu, lv mat.TriDense
	chu.LTo(&lu)
	chv.LTo(&lv)
	var a, b mat.Dense
	if err := a.Solve(&lu, &cuv); err != nil {
		return make([]float64, k)
	}
	if err := b.Solve(&lv, a.T()); err != nil {
		return make([]float64, k)
	}
	var svd mat.SVD
	if !svd.Factorize(&b, mat.SVDNone) {
		return make([]float64, k)
	}
	return svd.Values(nil)
}

func centred(m mat.Matrix) *mat.Dense {
	n, k := m.Dims()
	out := mat.DenseCopyOf(m)
	for j := 0; j < k; j++ {
		var s float64
		for i := 0; i < n; i++ {
			s += out.At(i, j)
		}
		s /= float64(n)
		for i := 0; i < n; i++ {
			out.Set(i, j, out.At(i, j)-s)
		}
	}
	return out
}

// Sum returns the sum of v.
func Sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

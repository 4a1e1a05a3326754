package online

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// initBlock returns the coefficients (nb×k) that make a block's functions
// the top-k principal directions of its features on the first batch: the
// top eigenvectors of the (centred, if center) feature covariance
// C = ΦᵀΦ/b, largest first, signs fixed so that each vector's
// largest-magnitude entry is positive. With whiten, each eigenvector is
// divided by √eigenvalue so that the functions have unit variance (the
// normalisation of canonical correlation functions). It returns C's top
// eigenvalue too. phi (rows×nb) is centred in place when center is set.
func initBlock(phi []float64, rows, nb, k int, center, whiten bool) ([]float64, float64, error) {
	if center {
		for f := 0; f < nb; f++ {
			var m float64
			for r := 0; r < rows; r++ {
				m += phi[r*nb+f]
			}
			m /= float64(rows)
			for r := 0; r < rows; r++ {
				phi[r*nb+f] -= m
			}
		}
	}
	var c mat.SymDense
	c.SymOuterK(1/float64(rows), mat.NewDense(rows, nb, phi).T())
	var es mat.EigenSym
	if !es.Factorize(&c, true) {
		return nil, 0, fmt.Errorf("online: eigendecomposition of the first block failed")
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	top := vals[nb-1]
	if !(top > 0) {
		return nil, 0, fmt.Errorf("%w: the first batch gives a zero feature covariance", ErrInput)
	}
	coef := make([]float64, nb*k)
	for q := 0; q < k; q++ {
		col := nb - 1 - q
		var big float64
		for f := 0; f < nb; f++ {
			if v := vecs.At(f, col); math.Abs(v) > math.Abs(big) {
				big = v
			}
		}
		sgn := 1.0
		if big < 0 {
			sgn = -1
		}
		if whiten {
			// Floor tiny eigenvalues so that a rank-deficient first batch
			// does not blow a direction up.
			sgn /= math.Sqrt(math.Max(vals[col], 1e-6*top))
		}
		for f := 0; f < nb; f++ {
			coef[f*k+q] = sgn * vecs.At(f, col)
		}
	}
	return coef, top, nil
}

//go:build amd64 && !purego

package features

import (
	"math"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the AVX2 kernels. They perform exactly the operations of
// the Go code, in the same order, each rounded (multiplies and adds are
// separate instructions, never fused), so results are bit-identical to the
// pure-Go path; TestSIMDBitIdentical checks it.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasAVX

// cosConsts is the constant table of cosScaleAVX2, in the order the
// assembly reads it.
var cosConsts = func() [16]float64 {
	var c [16]float64
	c[0] = math.Float64frombits(0x7FFFFFFFFFFFFFFF) // |·| mask
	c[1] = 0.25
	c[2] = 2 * math.Pi
	c[3] = math.Float64frombits(0x8000000000000000) // sign mask
	for i := 0; i < len(sinCoef); i++ {
		c[4+i] = sinCoef[len(sinCoef)-1-i] // Horner order: highest first
	}
	return c
}()

//go:noescape
func cosScaleAVX2(dst, src *float64, n int, s float64, c *[16]float64)

//go:noescape
func phiTile4AVX2(z, x0, x1, x2, x3, om *float64, d, nb int)

// cosScale sets dst[i] = s·Cos2Pi(src[i]).
func cosScale(dst, src []float64, s float64) {
	n := len(src)
	i := 0
	if useAVX2 && n >= 4 {
		i = n &^ 3
		cosScaleAVX2(&dst[0], &src[0], i, s, &cosConsts)
	}
	for ; i < n; i++ {
		dst[i] = float64(s * Cos2Pi(src[i]))
	}
}

// tile4 adds x_q·Ω to z_q for four rows (z holds 4·nb values, pre-set to
// the phases): z_q[f] += x_q[c]·Ω[c,f] for c in order.
func tile4(z, x0, x1, x2, x3, om []float64, d, nb int) {
	if useAVX2 && nb%4 == 0 && d > 0 {
		phiTile4AVX2(&z[0], &x0[0], &x1[0], &x2[0], &x3[0], &om[0], d, nb)
		return
	}
	tile4Go(z, x0, x1, x2, x3, om, d, nb)
}

//go:noescape
func axpyRowsAVX2(dst, phi, a *float64, rows, nb, k, k4 int)

// addMulCols does AddMul for the columns q < k&^3 with AVX2 and returns
// how many columns it did.
func addMulCols(dst, phi, a []float64, rows, nb, k int) int {
	k4 := k &^ 3
	if !useAVX2 || k4 == 0 || rows == 0 || nb == 0 {
		return 0
	}
	axpyRowsAVX2(&dst[0], &phi[0], &a[0], rows, nb, k, k4)
	return k4
}

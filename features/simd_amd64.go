//go:build amd64 && !purego

package features

//go:generate sh -c "cd _asm && go run . -out ../simd_amd64.s"

import (
	"math"
	"os"

	"golang.org/x/sys/cpu"
)

// detected is the best kernel level of this CPU (SIMDAuto), set once at
// start-up. The AVX2 kernels perform exactly the operations of the Go
// code, in the same order, each rounded (multiplies and adds are separate
// instructions, never fused), so results are bit-identical to the pure-Go
// path; the AVX-512 variants of the tile and cosine kernels do the same on
// twice the lanes (TestSIMDBitIdentical runs every level).
// STREAMKPCA_NO_AVX512=1 in the environment leaves AVX-512 out of Auto.
var detected = func() SIMDLevel {
	switch {
	case !cpu.X86.HasAVX2 || !cpu.X86.HasAVX:
		return SIMDGo
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && os.Getenv("STREAMKPCA_NO_AVX512") != "1":
		return SIMDAVX512
	}
	return SIMDAVX2
}()

// maxLevel is the best level this CPU can run (tests compare every level
// up to it, whatever the environment says).
var maxLevel = func() SIMDLevel {
	switch {
	case !cpu.X86.HasAVX2 || !cpu.X86.HasAVX:
		return SIMDGo
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ:
		return SIMDAVX512
	}
	return SIMDAVX2
}()

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

//go:noescape
func phiTile4AVX512(z, x0, x1, x2, x3, om *float64, d, nb int)

//go:noescape
func phiTile4F32AVX512(z, x0, x1, x2, x3, om *float32, d, nb int)

//go:noescape
func cosScaleAVX512(dst, src *float64, n int, s float64, c *[16]float64)

// cosScale sets dst[i] = s·Cos2Pi(src[i]) with the kernels of level lv
// (resolved: see SIMDLevel.level).
func cosScale(lv SIMDLevel, dst, src []float64, s float64) {
	n := len(src)
	i := 0
	if lv >= SIMDAVX512 && n >= 8 {
		i = n &^ 7
		cosScaleAVX512(&dst[0], &src[0], i, s, &cosConsts)
		src, dst = src[i:], dst[i:]
		n -= i
		i = 0
	}
	if lv >= SIMDAVX2 && n >= 4 {
		i = n &^ 3
		cosScaleAVX2(&dst[0], &src[0], i, s, &cosConsts)
	}
	for ; i < n; i++ {
		dst[i] = float64(s * Cos2Pi(src[i]))
	}
}

// tile4 adds x_q·Ω to z_q for four rows (z holds 4·nb values, pre-set to
// the phases): z_q[f] += x_q[c]·Ω[c,f] for c in order.
func tile4(lv SIMDLevel, z, x0, x1, x2, x3, om []float64, d, nb int) {
	if lv >= SIMDAVX512 && nb%8 == 0 && d > 0 {
		phiTile4AVX512(&z[0], &x0[0], &x1[0], &x2[0], &x3[0], &om[0], d, nb)
		return
	}
	if lv >= SIMDAVX2 && nb%4 == 0 && d > 0 {
		phiTile4AVX2(&z[0], &x0[0], &x1[0], &x2[0], &x3[0], &om[0], d, nb)
		return
	}
	tile4Go(z, x0, x1, x2, x3, om, d, nb)
}

//go:noescape
func axpy4x4AVX2(dst, phi, a *float64, rows4, nb, k, k4 int, mask *[4]int64)

// tailMasks[t] enables the first t lanes of a four-lane group.
var tailMasks = [4][4]int64{{}, {-1}, {-1, -1}, {-1, -1, -1}}

// addMulSIMD does AddMul for the rows in whole groups of four with AVX2
// and returns how many rows it did.
func addMulSIMD(lv SIMDLevel, dst, phi, a []float64, rows, nb, k int) int {
	r4 := rows &^ 3
	if lv < SIMDAVX2 || r4 == 0 || nb == 0 || k == 0 {
		return 0
	}
	axpy4x4AVX2(&dst[0], &phi[0], &a[0], r4, nb, k, k&^3, &tailMasks[k&3])
	return r4
}

//go:noescape
func phiTile4F32AVX2(z, x0, x1, x2, x3, om *float32, d, nb int)

// tile4f32 is tile4 in float32 (eight lanes per AVX2 register).
func tile4f32(lv SIMDLevel, z, x0, x1, x2, x3, om []float32, d, nb int) {
	if lv >= SIMDAVX512 && nb%16 == 0 && d > 0 {
		phiTile4F32AVX512(&z[0], &x0[0], &x1[0], &x2[0], &x3[0], &om[0], d, nb)
		return
	}
	if lv >= SIMDAVX2 && nb%8 == 0 && d > 0 {
		phiTile4F32AVX2(&z[0], &x0[0], &x1[0], &x2[0], &x3[0], &om[0], d, nb)
		return
	}
	tile4Go(z, x0, x1, x2, x3, om, d, nb)
}

//go:noescape
func fwht4AVX2(v *float64, p int)

//go:noescape
func fwht4AVX512(v *float64, p int)

// fwht4SIMD runs fwht4 (p ≥ 4) with the kernels of level lv, reporting
// false where it has none (the Go code then runs).
func fwht4SIMD(lv SIMDLevel, v []float64, p int) bool {
	if len(v) < 4*p {
		panic("features: fwht4 buffer too small")
	}
	switch {
	case lv >= SIMDAVX512:
		fwht4AVX512(&v[0], p)
	case lv >= SIMDAVX2:
		fwht4AVX2(&v[0], p)
	default:
		return false
	}
	return true
}

//go:noescape
func interleave4AVX2(v, x0, x1, x2, x3, s *float64, d4 int)

//go:noescape
func signs4AVX2(v, s *float64, p int)

//go:noescape
func structuredOut4AVX2(z *float64, stride int, v, sc *float64, n4 int, pair bool, c *float64)

// pairPhaseConst is structuredOut4AVX2's constant.
var pairPhaseConst = pairPhase

// interleave4SIMD sets v[4i+q] = x[q·d+i]·s[i] for the four rows of x
// (4·d values) and i below the count it returns (a multiple of four; 0
// without AVX2): the rest is the caller's.
func interleave4SIMD(lv SIMDLevel, v, x, s []float64, d int) int {
	d4 := d &^ 3
	if lv < SIMDAVX2 || d4 == 0 {
		return 0
	}
	if len(v) < 4*d4 || len(x) < 4*d || len(s) < d4 {
		panic("features: interleave4 buffer too small")
	}
	interleave4AVX2(&v[0], &x[0], &x[d], &x[2*d], &x[3*d], &s[0], d4)
	return d4
}

// signs4SIMD is signs4 with the kernels of level lv (false: none).
func signs4SIMD(lv SIMDLevel, v, s []float64) bool {
	if lv < SIMDAVX2 || len(s) == 0 {
		return false
	}
	if len(v) < 4*len(s) {
		panic("features: signs4 buffer too small")
	}
	signs4AVX2(&v[0], &s[0], len(s))
	return true
}

// structuredOutSIMD writes structuredOut's z for four rows and the
// first frequencies of sc, a multiple of four, returning how many (0
// without AVX2): zq is row 0's first output, stride the rows' distance.
func structuredOutSIMD(lv SIMDLevel, zq []float64, stride int, vs, sc []float64, pair bool) int {
	n4 := len(sc) &^ 3
	if lv < SIMDAVX2 || n4 == 0 {
		return 0
	}
	w := n4
	if pair {
		w = 2 * n4
	}
	if len(zq) < 3*stride+w || len(vs) < 4*n4 {
		panic("features: structuredOut buffer too small")
	}
	structuredOut4AVX2(&zq[0], stride, &vs[0], &sc[0], n4, pair, &pairPhaseConst)
	return n4
}

//go:noescape
func squares4AVX2(lanes, phi *float64, rows4, nb, nb4 int)

// squaresSIMD writes AddSquares' four lane sums of the rows in whole
// groups of four (over their first nb&^3 features) to lanes (4 a row)
// with AVX2 and returns how many rows it did.
func squaresSIMD(lv SIMDLevel, lanes, phi []float64, rows, nb int) int {
	r4 := rows &^ 3
	if lv < SIMDAVX2 || r4 == 0 || nb < 4 {
		return 0
	}
	squares4AVX2(&lanes[0], &phi[0], r4, nb, nb&^3)
	return r4
}

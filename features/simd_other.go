//go:build !amd64 || purego

package features

// Without the assembly every level is the Go code.
const (
	detected = SIMDGo
	maxLevel = SIMDGo
)

func cosScale(_ SIMDLevel, dst, src []float64, s float64) {
	for i, v := range src {
		dst[i] = float64(s * Cos2Pi(v))
	}
}

func tile4(_ SIMDLevel, z, x0, x1, x2, x3, om []float64, d, nb int) {
	tile4Go(z, x0, x1, x2, x3, om, d, nb)
}

func addMulSIMD(_ SIMDLevel, dst, phi, a []float64, rows, nb, k int) int { return 0 }

func tile4f32(_ SIMDLevel, z, x0, x1, x2, x3, om []float32, d, nb int) {
	tile4Go(z, x0, x1, x2, x3, om, d, nb)
}

func fwht4SIMD(_ SIMDLevel, v []float64, p int) bool { return false }

func interleave4SIMD(_ SIMDLevel, v, x, s []float64, d int) int { return 0 }

func signs4SIMD(_ SIMDLevel, v, s []float64) bool { return false }

func structuredOutSIMD(_ SIMDLevel, zq []float64, stride int, vs, sc []float64, pair bool) int {
	return 0
}

func squaresSIMD(_ SIMDLevel, lanes, phi []float64, rows, nb int) int { return 0 }

//go:build !amd64 || purego

package features

const useAVX2 = false

var useAVX512 = false

func cosScale(dst, src []float64, s float64) {
	for i, v := range src {
		dst[i] = float64(s * Cos2Pi(v))
	}
}

func tile4(z, x0, x1, x2, x3, om []float64, d, nb int) { tile4Go(z, x0, x1, x2, x3, om, d, nb) }

func addMulSIMD(dst, phi, a []float64, rows, nb, k int) int { return 0 }

func tile4f32(z, x0, x1, x2, x3, om []float32, d, nb int) {
	tile4Go(z, x0, x1, x2, x3, om, d, nb)
}

package synth

import (
	"math"
	"math/rand/v2"
)

// MixtureDim is the dimension of each view of the mixture stream.
const MixtureDim = 2

// Mixture draws n pairs from the paper's nonparametric latent variable
// model (Sec. 6.2, after Song et al. 2014): a latent class h ∈ {0, 1, 2}
// (uniform) and two views drawn independently given h, each coordinate from
// a class-specific Gaussian or Gamma(shape 1.2) component:
//
//	h = 0: N(−2, 1)        h = 1: 1 + Gamma(1.2, 1)        h = 2: N(4, 0.5²)
//
// (view y uses the same components with the coordinates' order reversed
// and scaled by 0.7). The centred cross-covariance operator of the views
// has rank 2 exactly (classes − 1), so kernel SVD has two clearly
// separated singular values and the rest are zero.
func Mixture(rng *rand.Rand, n int) (x, y []float64) {
	const d = MixtureDim
	x, y = make([]float64, n*d), make([]float64, n*d)
	draw := func(h int) float64 {
		switch h {
		case 0:
			return -2 + rng.NormFloat64()
		case 1:
			return 1 + gamma12(rng)
		}
		return 4 + 0.5*rng.NormFloat64()
	}
	for i := 0; i < n; i++ {
		h := rng.IntN(3)
		for j := 0; j < d; j++ {
			x[i*d+j] = draw(h)
			y[i*d+d-1-j] = 0.7 * draw(h)
		}
	}
	return x, y
}

// gamma12 draws Gamma(shape 1.2, scale 1) by Marsaglia–Tsang.
func gamma12(rng *rand.Rand) float64 {
	const a = 1.2
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		z := rng.NormFloat64()
		v := 1 + c*z
		if v <= 0 {
			continue
		}
		v = v * v * v
		if math.Log(rng.Float64()) < 0.5*z*z+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

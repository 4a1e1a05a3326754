package synth

import (
	"math"
	"math/rand/v2"
)

// Digits draws n 8×8 "digit-like" images (64 values in [0, 16], like the
// UCI optical digits): ten prototype strokes (smooth bumps along random
// curves) are shifted by up to a pixel, thickened or thinned, scaled in
// intensity and corrupted by noise. The distribution is strongly
// non-Gaussian (clustered, bounded, with nonlinear within-class
// variation), which makes it a test of defaults rather than of closed forms.
func Digits(rng *rand.Rand, n int) []float64 {
	protos := digitPrototypes() // fixed
	out := make([]float64, n*64)
	for i := 0; i < n; i++ {
		c := rng.IntN(10)
		copy(out[i*64:(i+1)*64], digitImage(rng, protos[c]))
	}
	return out
}

// DigitsOfClass draws one image (64 values) of the given class 0…9.
func DigitsOfClass(rng *rand.Rand, class int) []float64 {
	return digitImage(rng, digitPrototypes()[class%10])
}

type stroke struct{ x0, y0, x1, y1, bend float64 }

// digitPrototypes returns the ten fixed prototype stroke sets.
func digitPrototypes() [][]stroke {
	protos := make([][]stroke, 10)
	prng := rand.New(rand.NewPCG(10, 10))
	for c := range protos {
		for s := 0; s < 2+c%3; s++ {
			protos[c] = append(protos[c], stroke{
				x0: 1 + 6*prng.Float64(), y0: 1 + 6*prng.Float64(),
				x1: 1 + 6*prng.Float64(), y1: 1 + 6*prng.Float64(), bend: 2 * (prng.Float64() - 0.5),
			})
		}
	}
	return protos
}

func digitImage(rng *rand.Rand, strokes []stroke) []float64 {
	const side = 8
	img := make([]float64, side*side)
	dx, dy := rng.Float64()*2-1, rng.Float64()*2-1
	width := 0.6 + 0.5*rng.Float64()
	gain := 12 + 6*rng.Float64()
	for _, s := range strokes {
		for t := 0.0; t <= 1; t += 0.05 {
			// A quadratic curve from (x0,y0) to (x1,y1) bent sideways.
			px := s.x0 + (s.x1-s.x0)*t + s.bend*4*t*(1-t)*(s.y1-s.y0)/4 + dx
			py := s.y0 + (s.y1-s.y0)*t - s.bend*4*t*(1-t)*(s.x1-s.x0)/4 + dy
			for y := 0; y < side; y++ {
				for x := 0; x < side; x++ {
					d2 := (float64(x)-px)*(float64(x)-px) + (float64(y)-py)*(float64(y)-py)
					img[y*side+x] += 0.25 * gain * math.Exp(-d2/(2*width*width))
				}
			}
		}
	}
	for j := range img {
		v := img[j] + 0.5*rng.NormFloat64()
		img[j] = math.Max(0, math.Min(16, v))
	}
	return img
}

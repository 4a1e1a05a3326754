package features

import "math"

// GeneratorID names the generator documented in the package comment. It is
// stored in every snapshot; a snapshot with another id is rejected.
const GeneratorID = "splitmix64-bm-v1"

// Random streams of the generator. Each stream is an independent sequence
// for one purpose, so adding a use never shifts the numbers of another.
const (
	StreamOmega  uint64 = 1 // frequencies (standard normals, Box–Muller)
	StreamPhase  uint64 = 2 // phases (uniform in turns)
	StreamSeeds  uint64 = 3 // block seeds derived from a model seed
	StreamInit   uint64 = 4 // initial coefficients
	StreamExtra1 uint64 = 5 // kernel-specific extra draws
)

const golden = 0x9E3779B97F4A7C15

func fmix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xBF58476D1CE4E5B9
	z ^= z >> 27
	z *= 0x94D049BB133111EB
	z ^= z >> 31
	return z
}

// Key returns the key of one stream of a seed: key(seed, stream) in the
// package comment.
func Key(seed, stream uint64) uint64 { return fmix64(seed ^ fmix64(stream+golden)) }

// Word returns the i-th 64-bit word of the stream with the given key.
func Word(key, i uint64) uint64 { return fmix64(key + (i+1)*golden) }

// Uniform maps a word to a float64 in the open interval (0, 1).
func Uniform(w uint64) float64 { return (float64(w>>11) + 0.5) * (1.0 / (1 << 53)) }

// Normal returns the i-th standard normal of the stream with the given key
// (Box–Muller, pairs (2j, 2j+1) share their two uniforms).
func Normal(key, i uint64) float64 {
	j := i / 2
	u1 := Uniform(Word(key, 2*j))
	u2 := Uniform(Word(key, 2*j+1))
	r := math.Sqrt(-2 * Log(u1))
	if i%2 == 0 {
		return float64(r * Cos2Pi(u2))
	}
	return float64(r * Cos2Pi(u2-0.25))
}

// DeriveSeed returns the seed of block i of a model with the given seed.
func DeriveSeed(modelSeed, i uint64) uint64 { return Word(Key(modelSeed, StreamSeeds), i) }

// Log returns the natural logarithm of x > 0 to within a few ulps, computed
// with the same operations on every platform: x = m·2^e with m in [√½, √2),
// s = (m−1)/(m+1), log m = 2·(s + s³/3 + … + s²¹/21). It exists so that the
// generator does not depend on an assembly math.Log; use math.Log elsewhere.
// Log returns NaN for x ≤ 0, NaN or ±Inf.
func Log(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 1) {
		return math.NaN()
	}
	m, e := math.Frexp(x) // m in [0.5, 1)
	if m < math.Sqrt2/2 {
		m *= 2
		e--
	}
	s := (m - 1) / (m + 1)
	s2 := float64(s * s)
	p := 1.0 / 21
	for n := 19; n >= 1; n -= 2 {
		p = float64(p*s2) + 1/float64(n)
	}
	return float64(float64(e)*math.Ln2) + float64(2*float64(s*p))
}

// sinCoef are the Taylor coefficients (−1)^n/(2n+1)! of sin, n = 1…9, for
// |v| ≤ π/2, where the truncation error is below 3e-16.
var sinCoef = [...]float64{
	-1.0 / 6,
	1.0 / 120,
	-1.0 / 5040,
	1.0 / 362880,
	-1.0 / 39916800,
	1.0 / 6227020800,
	-1.0 / 1307674368000,
	1.0 / 355687428096000,
	-1.0 / 121645100408832000,
}

// Cos2Pi returns cos(2π·t) for finite t. The tests check it within 1e-15
// at multiples of ¼ and within 1e-12 of math.Cos(x) for t = x/2π over
// |x| ≤ 1000, a bound that includes the rounding of x/2π itself (about
// |x|·1.1e-16). It is branch-free
// apart from the rounding: y = t − round(t) ∈ [−½, ½], u = |y| − ¼ ∈ [−¼, ¼],
// cos(2π·t) = −sin(2π·u), and sin is an odd polynomial of degree 19 on
// [−π/2, π/2]. Every product is rounded separately, so the result is the
// same on every platform. It is the evaluation's cosine: Φ = √(2/B)·Cos2Pi(z).
func Cos2Pi(t float64) float64 {
	y := t - math.RoundToEven(t)
	u := math.Abs(y) - 0.25
	v := float64(u * (2 * math.Pi))
	v2 := float64(v * v)
	p := sinCoef[8]
	p = float64(p*v2) + sinCoef[7]
	p = float64(p*v2) + sinCoef[6]
	p = float64(p*v2) + sinCoef[5]
	p = float64(p*v2) + sinCoef[4]
	p = float64(p*v2) + sinCoef[3]
	p = float64(p*v2) + sinCoef[2]
	p = float64(p*v2) + sinCoef[1]
	p = float64(p*v2) + sinCoef[0]
	return -(v + float64(float64(v*v2)*p))
}

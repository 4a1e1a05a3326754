package features

import "math"

// ExpNeg returns exp(−t) for t ≥ 0 with the same operations on every
// platform (math.Exp has assembly versions): t = k·ln2 + r, |r| ≤ ln2/2,
// exp(−t) = 2^(−k)·exp(−r), exp(−r) by its Taylor series to degree 14
// (truncation < 1e-17 relative). Relative error below 4e-16 (tested against
// math.Exp). Negative t, NaN: NaN.
func ExpNeg(t float64) float64 {
	if !(t >= 0) {
		return math.NaN()
	}
	if t > 746 {
		return 0
	}
	const ln2hi, ln2lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
	k := math.RoundToEven(float64(t * (1 / math.Ln2)))
	r := float64(t-float64(k*ln2hi)) - float64(k*ln2lo) // t − k·ln2, |r| ≲ 0.35
	// exp(−r) = Σ (−r)^n/n!, Horner from n = 14.
	p := 1.0 / 87178291200
	for n := 13; n >= 1; n-- {
		p = float64(p*(-r)) + 1/factorials[n]
	}
	p = float64(p*(-r)) + 1
	return math.Ldexp(p, -int(k))
}

var factorials = func() [15]float64 {
	var f [15]float64
	f[0] = 1
	for i := 1; i < len(f); i++ {
		f[i] = f[i-1] * float64(i)
	}
	return f
}()

// gammaDraw returns a Gamma(shape a, scale 1) variate by Marsaglia–Tsang
// rejection, drawing uniforms and normals from the stream key in order from
// index 0: deterministic and platform-independent. For a < 1 it uses
// Gamma(a+1)·U^(1/a).
func gammaDraw(key uint64, a float64) float64 {
	i := uint64(0)
	boost := 1.0
	if a < 1 {
		u := Uniform(Word(key, 1<<40))
		boost = ExpNeg(-Log(u) / a)
		a++
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		z := Normal(key, i)
		u := Uniform(Word(key, (1<<41)+i))
		i++
		v := 1 + float64(c*z)
		if v <= 0 {
			continue
		}
		v = float64(float64(v*v) * v)
		if Log(u) < float64(0.5*float64(z*z))+float64(d-float64(d*v))+float64(d*Log(v)) {
			return float64(float64(d*v) * boost)
		}
	}
}

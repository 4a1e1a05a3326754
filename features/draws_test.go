package features

import (
	"math"
	"testing"
)

// Log agrees with math.Log to a few ulps over many decades and is NaN
// where the logarithm is not a number.
func TestLogAgainstTheStandardLibrary(t *testing.T) {
	for _, x := range []float64{1e-300, 1e-10, 0.1, 0.5, 0.70710678, 1, 1.0000001, 2, math.E, 10, 1e10, 1e300} {
		got, want := Log(x), math.Log(x)
		if math.Abs(got-want) > 4e-16*math.Max(1, math.Abs(want)) {
			t.Errorf("Log(%v) = %v, math.Log %v", x, got, want)
		}
	}
	// The smallest subnormal, 2⁻¹⁰⁷⁴: −1074·ln 2 (math.Log on amd64
	// gives −709.09 there, the logarithm of 2⁻¹⁰²³).
	if got, want := Log(math.SmallestNonzeroFloat64), -1074*math.Ln2; math.Abs(got-want) > 4e-16*-want {
		t.Errorf("Log(2⁻¹⁰⁷⁴) = %v, want %v", got, want)
	}
	for _, x := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if !math.IsNaN(Log(x)) {
			t.Errorf("Log(%v) = %v, want NaN", x, Log(x))
		}
	}
}

// The generator's draws have their distributions' moments: Uniform's
// mean ½ and variance 1/12 in (0, 1); Normal's 0 and 1 with the normal's
// fourth moment 3; gammaDraw's Gamma(a) mean a and variance a (Chebyshev-
// safe bounds of 6 standard errors over 200,000 draws; deterministic by
// key). Gamma's shapes cover both branches (a < 1 boosts a + 1).
func TestDrawsHaveTheirMoments(t *testing.T) {
	const n = 200000
	moments := func(draw func(i uint64) float64) (m, v, m4 float64) {
		for i := uint64(0); i < n; i++ {
			m += draw(i)
		}
		m /= n
		for i := uint64(0); i < n; i++ {
			d := draw(i) - m
			v += d * d
			m4 += d * d * d * d
		}
		return m, v / n, m4 / n
	}
	key := Key(2024, 77)
	m, v, _ := moments(func(i uint64) float64 {
		u := Uniform(Word(key, i))
		if !(u > 0 && u < 1) {
			t.Fatalf("Uniform %v outside (0, 1)", u)
		}
		return u
	})
	if math.Abs(m-0.5) > 6*math.Sqrt(1.0/12/n) || math.Abs(v-1.0/12) > 6*math.Sqrt(1.0/180/n) {
		t.Errorf("Uniform: mean %v, variance %v; want 1/2, 1/12", m, v)
	}
	m, v, m4 := moments(func(i uint64) float64 { return Normal(key, i) })
	if math.Abs(m) > 6/math.Sqrt(n) || math.Abs(v-1) > 6*math.Sqrt(2.0/n) || math.Abs(m4-3) > 6*math.Sqrt(96.0/n) {
		t.Errorf("Normal: mean %v, variance %v, fourth moment %v; want 0, 1, 3", m, v, m4)
	}
	for _, a := range []float64{0.5, 1.2, 4} {
		m, v, _ := moments(func(i uint64) float64 { return gammaDraw(Key(Word(key, i), 0), a) })
		// Var of the sample mean a/n; of the sample variance about
		// (μ₄ − a²)/n with μ₄ = 3a² + 6a for Gamma(a).
		if math.Abs(m-a) > 6*math.Sqrt(a/n) || math.Abs(v-a) > 6*math.Sqrt((2*a*a+6*a)/n) {
			t.Errorf("Gamma(%v): mean %v, variance %v; want both %v", a, m, v, a)
		}
	}
}

package online

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// floatsHeld counts the float64 in every slice reachable from v (struct
// fields, arrays, pointers), each slice's room once (slices of the same
// room start at the same address here): the memory a value holds.
func floatsHeld(v reflect.Value, seen map[uintptr]bool) int {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return 0
		}
		seen[v.Pointer()] = true
		return floatsHeld(v.Elem(), seen)
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			n += floatsHeld(v.Field(i), seen)
		}
		return n
	case reflect.Array:
		n := 0
		for i := range v.Len() {
			n += floatsHeld(v.Index(i), seen)
		}
		return n
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Float64 && v.Cap() > 0 && !seen[v.Pointer()] {
			seen[v.Pointer()] = true // a slice sharing another's room is counted once
			return v.Cap()
		}
	}
	return 0
}

// TestCovarianceBytesIsWhatTheSolverHolds: the memory CovarianceBudget
// bounds is the float64 a kcca learner's covariance solver really holds
// after its ridge choices on leading features (counted by walking its
// state): the model is not below it, and within 5% above.
func TestCovarianceBytesIsWhatTheSolverHolds(t *testing.T) {
	const m, k, b, lead, d = 640, 4, 512, 320, 6
	l, err := NewTwoView(Config{Algorithm: AlgKCCA, K: k, MaxFeatures: m, BlockSize: 128, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	x, y := make([]float64, b*d), make([]float64, b*d)
	for step := range 26 {
		for r := range b {
			z := rng.NormFloat64()
			for c := range d {
				x[r*d+c] = z + rng.NormFloat64()
				y[r*d+c] = math.Sin(z) + rng.NormFloat64()
			}
		}
		if err := l.Update(x, y, b); err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			l.cov.search.limit = lead
		}
	}
	if l.cov.search.sub == nil || len(l.cov.search.chosen) < 2 {
		t.Fatalf("the ridge was not chosen on leading features (chosen %v)", l.cov.search.chosen)
	}
	held := floatsHeld(reflect.ValueOf(l.cov), map[uintptr]bool{})
	model := covarianceBytes(m, m, k, b, lead) / 8
	t.Logf("held %d float64, modelled %d", held, model)
	if model < int64(held) || float64(model) > 1.05*float64(held) {
		t.Fatalf("modelled %d float64, the solver holds %d", model, held)
	}
}

// TestCovarianceBudget: the offline budget is the largest multiple of
// the block that each bound allows, worked out from the bounds' own
// arithmetic: memory, time at a given rate, the rows of a pass; never
// below the default.
func TestCovarianceBudget(t *testing.T) {
	const k, rows, rate = 50, 8000, 3e10
	base := OfflineCovariance{Rows: rows, K: k, Dims: [2]int{392, 392}, Rate: rate}
	bytes := func(m int) int64 { return covarianceBytes(m, m, k, 512, ridgeFeatures) }
	secs := func(m int) float64 { return 3 * rows * covarianceRowFlops(m, k, 392, 392) / rate }
	cases := []struct {
		name string
		o    func(OfflineCovariance) OfflineCovariance
		want int
	}{
		{"1 GiB, no time limit", func(o OfflineCovariance) OfflineCovariance { return o }, 4096},
		{"just enough memory for 4,608", func(o OfflineCovariance) OfflineCovariance { o.MaxBytes = bytes(4608); return o }, 4608},
		{"one byte short of 4,608", func(o OfflineCovariance) OfflineCovariance { o.MaxBytes = bytes(4608) - 1; return o }, 4096},
		{"time for 3,584", func(o OfflineCovariance) OfflineCovariance {
			o.Limit = time.Duration(secs(3584)*1e9) + time.Millisecond
			return o
		}, 3584},
		{"time for 2,048 only", func(o OfflineCovariance) OfflineCovariance { o.Limit = time.Second; return o }, 2048},
		{"8 GiB and all day", func(o OfflineCovariance) OfflineCovariance { o.MaxBytes, o.Limit = 8<<30, 24*time.Hour; return o }, 8192},
		{"a small file", func(o OfflineCovariance) OfflineCovariance { o.Rows = 900; return o }, 2048},
		{"3,000 rows", func(o OfflineCovariance) OfflineCovariance { o.Rows = 3000; return o }, 3072},
	}
	for _, c := range cases {
		if got := CovarianceBudget(c.o(base)); got != c.want {
			t.Errorf("%s: %d features per view, want %d", c.name, got, c.want)
		}
	}
	if r := MeasureCovarianceRate(1); !(r > 1e8 && r < 1e13) {
		t.Errorf("measured rate %g flop/s", r)
	}
}

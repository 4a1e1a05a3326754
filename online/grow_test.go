package online

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/features"
)

// TestGrowthStopsWhereTimeAndMemorySay: steps whose cost is c seconds per
// feature on a clock of the test's own. With only the time limit T the
// budget grows a block a step and stops within two blocks of the closed
// form √(2·B·T/(3c)); with a memory bound below that it stops at the
// bound, MaxBytes/(32·k) features rounded down to a block.
func TestGrowthStopsWhereTimeAndMemorySay(t *testing.T) {
	const b, k, c = 16, 2, 1e-6 // block, components, seconds per feature and step
	limit := 2 * time.Second
	run := func(maxBytes int64) (int, int) {
		l, err := New(Config{K: k, Oversample: -1, BlockSize: b, MaxFeatures: 64, Workers: 1,
			Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		clock := time.Unix(0, 0)
		g := &Growth{Limit: limit, MaxBytes: maxBytes, now: func() time.Time { return clock }}
		rng := rand.New(rand.NewPCG(1, 2))
		x := make([]float64, 8*2)
		for step := 0; step < 20000 && clock.Sub(time.Unix(0, 0)) < limit; step++ {
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			if err := l.Update(x, 8); err != nil {
				t.Fatal(err)
			}
			d := time.Duration(c * float64(l.Features()) * float64(time.Second))
			clock = clock.Add(d)
			g.Step(l, d)
		}
		return l.MaxFeatures(), g.Raised()
	}
	got, raised := run(0)
	want := math.Sqrt(2 * b * limit.Seconds() / (3 * c))
	t.Logf("time only: budget %d (%d blocks added), closed form %.0f", got, raised, want)
	if math.Abs(float64(got)-want) > 2*b || raised == 0 {
		t.Errorf("time only: budget %d, want within %d of √(2BT/3c) = %.0f", got, 2*b, want)
	}
	bound := int64(32 * k * 1600) // 1,600 features
	got, _ = run(bound)
	if want := 1600 / b * b; got != want {
		t.Errorf("memory bound %d bytes: budget %d, want %d", bound, got, want)
	}
}

// TestFitGrowsWithinItsTime: fit with Grow and a time budget ends with a
// budget past max_features; without Grow, at max_features.
func TestFitGrowsWithinItsTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const rows, d = 4000, 2
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	cfg := Config{K: 2, BlockSize: 32, MaxFeatures: 64, Workers: 1, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}}
	for _, grow := range []bool{false, true} {
		snap, _, err := Fit(context.Background(), cfg, x, rows, d, FitOptions{Epochs: 3, Budget: time.Minute, Grow: grow})
		if err != nil {
			t.Fatal(err)
		}
		if f := snap.Header.Features(); grow && f <= 64 || !grow && f != 64 {
			t.Errorf("grow %v: %d features, want %s", grow, f, map[bool]string{true: "more than 64", false: "64"}[grow])
		}
	}
}

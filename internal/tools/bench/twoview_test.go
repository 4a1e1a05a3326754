package bench

import (
	"context"
	"testing"
	"time"
)

// RunKCCA finds what linear CCA cannot: on the twoview stream, whose
// shared signal reaches y only through even functions of x's latent
// variables, kernel CCA's two held-out canonical correlations sum well
// above linear CCA's (fitted on 20,000 pairs), and each lies in [0, 1].
func TestRunKCCABeatsLinearCCA(t *testing.T) {
	steps := 0
	res, err := RunKCCA(context.Background(), KCCAConfig{Points: 2_048, Progress: func(n, total, _ int, _ time.Duration) {
		steps++
		if total != 2_048 || n > total {
			t.Errorf("progress %d of %d, want of 2,048", n, total)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held-out correlations %.3f (sum %.3f), linear CCA %.3f, %d features", res.HeldOut, res.SumK, res.LinearCCASumK, res.Features)
	if res.K != 2 || len(res.HeldOut) != 2 || res.Points != 2_048 || steps != (2_048+511)/512 {
		t.Fatalf("k %d, %d correlations, %d points in %d steps; want 2, 2, 2,048 in %d", res.K, len(res.HeldOut), res.Points, steps, (2_048+511)/512)
	}
	var sum float64
	for _, c := range res.HeldOut {
		if c < 0 || c > 1 {
			t.Errorf("a canonical correlation of %v", c)
		}
		sum += c
	}
	if rel(res.SumK, sum) > 1e-12 {
		t.Errorf("sum %v, want the correlations' %v", res.SumK, sum)
	}
	if !(res.SumK > res.LinearCCASumK+0.5) || !(res.LinearCCASumK > 0) {
		t.Errorf("kernel CCA's sum %v, linear CCA's %v; want kernel CCA ahead by more than 0.5", res.SumK, res.LinearCCASumK)
	}
}

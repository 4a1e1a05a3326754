package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/online"
)

// TestCompareBlockReachesLearner: `bench compare --block B` reaches the
// learner (its row names the block size it ran with), and the learner
// with its default block is named without one.
func TestCompareBlockReachesLearner(t *testing.T) {
	for _, tc := range []struct {
		block int
		want  string
	}{{64, "B = 64)"}, {0, "θ₁ = 0.05)"}} {
		res, err := RunCompare(context.Background(), CompareConfig{Case: "hermite1", Points: 2048, Budget: time.Second,
			Methods: []string{"dsgd=4096"}, Learner: online.Config{BlockSize: tc.block}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Methods[0].Method; !strings.HasSuffix(got, tc.want) {
			t.Errorf("block %d: method %q, want it to end in %q", tc.block, got, tc.want)
		}
		if e := res.Methods[0].ErrorAtEnd; !(e < 1) {
			t.Errorf("block %d: subspace error %v after 2,048 points", tc.block, e)
		}
	}
}

// TestCompareCentred: with Learner.Center the truth is exact centred
// kernel PCA of fresh points, and a centred learner and centred exact
// kernel PCA of the stream's first points land near it (against the
// uncentred closed form, whose first eigenfunction is the near-constant
// one a centred model leaves out, they would not); uncentred, the
// learner lands near the closed form as before; the uncentred baselines
// are refused.
func TestCompareCentred(t *testing.T) {
	cfg := CompareConfig{Case: "hermite1", Points: 20480, Budget: time.Minute, ExactN: 1500,
		Methods: []string{"dsgd=4096", "exact"}, Learner: online.Config{Center: true}}
	res, err := RunCompare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Methods {
		if !(m.ErrorAtEnd < 0.02) {
			t.Errorf("%s: subspace error %v against exact centred kernel PCA, want < 0.02", m.Method, m.ErrorAtEnd)
		}
	}
	cfg.Learner.Center = false
	cfg.Methods = []string{"dsgd=4096"}
	unc, err := RunCompare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e := unc.Methods[0].ErrorAtEnd; !(e < 0.02) {
		t.Errorf("uncentred against the closed form: %v", e)
	}
	cfg.Learner.Center = true
	cfg.Methods = []string{"rff"}
	if _, err := RunCompare(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "uncentred") {
		t.Errorf("--center with rff: %v, want a refusal", err)
	}
}

// TestRunCompareStopsAndRefuses: a time limit stops a method at its
// first checkpoint after it (and says so); a budget no checkpoint fits
// in leaves no error at the budget; unknown cases and methods, and sizes
// that are not positive integers, are refused by name.
func TestRunCompareStopsAndRefuses(t *testing.T) {
	res, err := RunCompare(t.Context(), CompareConfig{Case: "hermite1", Points: 100_000, Budget: time.Nanosecond, MaxTime: time.Nanosecond, Methods: []string{"rff=256"}})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Methods[0]
	if m.Points != 2048 || len(m.Curve) != 1 || !strings.Contains(m.Notes, "time limit") || !math.IsNaN(m.ErrorAtBudget) {
		t.Errorf("stopped at %d points after %d checkpoints (%q), error at the budget %v; want 2,048, 1, the time limit, NaN", m.Points, len(m.Curve), m.Notes, m.ErrorAtBudget)
	}
	for _, c := range []struct {
		cfg  CompareConfig
		want string
	}{
		{CompareConfig{Case: "hermite2"}, `unknown case "hermite2"`},
		{CompareConfig{Case: "hermite1", Methods: []string{"pca"}}, `unknown method "pca"`},
		{CompareConfig{Case: "hermite1", Methods: []string{"rff=0"}}, `"rff=0"`},
		{CompareConfig{Case: "hermite1", Methods: []string{"rff=many"}}, `"rff=many"`},
	} {
		if _, err := RunCompare(t.Context(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

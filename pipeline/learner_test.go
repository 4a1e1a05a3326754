package pipeline

import (
	"errors"
	"testing"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/online"
)

// TestRaiseBudgetStopsAtTheMemoryBound: a one-view learner's budget rises
// by one block while what it holds at the larger budget stays within the
// bound. At 320 features, k = 2 (no columns beyond: Config.Oversample
// -1), batches of 64 rows of 3 inputs: the coefficients and their
// working copies 32·k = 64 bytes a feature (20,480), the batch's kept
// features 64 rows × 320 × 8 bytes (163,840)
// and five cached blocks of 64 frequencies, each 8·(3 + 2)·64 bytes
// (12,800), and the four copies of the coefficients the service keeps
// besides the learner's (the last cut, its published bytes, the cut
// before, stored versions: 81,920): 278,528 bytes, so a bound one byte
// lower refuses the raise.
// (Counting the coefficients alone, the bound was 20,480: a service
// under a container limit was OOM-killed with its kept features 4 KiB a
// feature uncounted.)
func TestRaiseBudgetStopsAtTheMemoryBound(t *testing.T) {
	l, err := online.New(online.Config{K: 2, Oversample: -1, BlockSize: 64, MaxFeatures: 256, Workers: 1,
		Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}})
	if err != nil {
		t.Fatal(err)
	}
	o := oneView{l}
	defer o.close()
	if err := o.update(gaussRows(64, 3, 1), nil, 64); err != nil {
		t.Fatal(err)
	}
	const need = 320*64 + 64*320*8 + 5*8*(3+2)*64 + 4*320*64 // and the service's four copies of the coefficients (serviceCopies)
	if n, raised := o.raiseBudget(need-1, 64); raised || n != 256 || o.budget() != 256 {
		t.Errorf("bound %d bytes: budget %d (raised %v), want 256 kept", need-1, n, raised)
	}
	if n, raised := o.raiseBudget(need, 64); !raised || n != 320 || o.budget() != 320 {
		t.Errorf("bound %d bytes: budget %d (raised %v), want 320", need, n, raised)
	}
}

// TestTwoViewsLearner: the two-view learner reports no dimensions before
// its first step and both after it, keeps its budget, and checks y with
// view y's kernel, except for ksir, whose y is a target the kernel of x
// does not see.
func TestTwoViewsLearner(t *testing.T) {
	semi := features.Kernel{Family: features.ExpSemigroup, Beta: 1}
	gauss := features.Kernel{Family: features.Gaussian, Bandwidth: 1}
	for _, c := range []struct {
		alg     online.Algorithm
		refuses bool // a negative y
	}{{online.AlgKCCA, true}, {online.AlgKSIR, false}} {
		cfg := online.Config{Algorithm: c.alg, K: 1, BlockSize: 64, MaxFeatures: 128, Workers: 1, Kernel: gauss, KernelY: semi}
		if c.alg == online.AlgKSIR {
			cfg.KernelY = features.Kernel{}
		}
		l, err := online.NewTwoView(cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.alg, err)
		}
		tv := twoViews{l}
		if dx, dy := tv.dims(); dx != 0 || dy != 0 {
			t.Errorf("%s: dims %d, %d before the first step, want 0, 0", c.alg, dx, dy)
		}
		err = tv.checkInput([]float64{-1, 2}, []float64{-0.5})
		if got := errors.Is(err, features.ErrDomain); got != c.refuses {
			t.Errorf("%s: a negative y: %v, refused %v, want %v", c.alg, err, got, c.refuses)
		}
		y := gaussRows(64, 1, 2)
		for i := range y {
			y[i] = max(y[i], -y[i])
		}
		if err := tv.update(gaussRows(64, 2, 3), y, 64); err != nil {
			t.Fatalf("%s: %v", c.alg, err)
		}
		if dx, dy := tv.dims(); dx != 2 || dy != 1 {
			t.Errorf("%s: dims %d, %d after a step, want 2, 1", c.alg, dx, dy)
		}
		if n, raised := tv.raiseBudget(1<<40, 64); raised || n != 128 || !tv.twoView() {
			t.Errorf("%s: budget %d (raised %v), want 128 kept", c.alg, n, raised)
		}
		tv.close()
	}
}

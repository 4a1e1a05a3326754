package online

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamkpca/streamkpca/internal/synth"
)

// TestRaiseBudget: a model whose budget filled grows again once the budget
// is raised (one block a step, as before it filled), ends closer to exact
// kernel PCA than the same stream at the old budget, and carries the new
// budget through a snapshot: the restored learner continues bit for bit.
// The covariance solver and landmark blocks keep theirs.
func TestRaiseBudget(t *testing.T) {
	const n, m = smallN, smallHeldN
	x, hx, kern, truth := smallExact(t)
	run := func(raise bool) (*KPCA, float64) {
		l, err := New(Config{K: exactK, Kernel: kern, MaxFeatures: 256, BlockSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		streamEpochs(t, l, x, n, exactD, 100, 2)
		if l.Features() != 256 {
			t.Fatalf("features %d before raising, want the budget 256", l.Features())
		}
		if raise {
			if got := l.RaiseBudget(4096 + 63); got != 4096 {
				t.Fatalf("RaiseBudget(4159) = %d, want 4096 (whole blocks)", got)
			}
			if got := l.RaiseBudget(1024); got != 4096 {
				t.Fatalf("RaiseBudget to less = %d, want 4096 kept", got)
			}
		}
		streamEpochs(t, l, x, n, exactD, 100, 12)
		return l, synthErr(evalDense(l, hx, m), truth)
	}
	fixed, eFixed := run(false)
	defer fixed.Close()
	grown, eGrown := run(true)
	defer grown.Close()
	t.Logf("subspace error at 256 features %.3g; raised to %d: %.3g", eFixed, grown.Features(), eGrown)
	if grown.Features() != 4096 || grown.Snapshot().Header.MaxFeatures != 4096 {
		t.Errorf("features %d, snapshot budget %d; want 4096 (72 steps add 60 blocks)", grown.Features(), grown.Snapshot().Header.MaxFeatures)
	}
	if !(eGrown < eFixed/2) {
		t.Errorf("raised budget %.3g, fixed %.3g: want under half", eGrown, eFixed)
	}
	// Restored from a snapshot, the learner goes on as the original.
	r, err := Restore(grown.Snapshot(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	batch := x[:100*exactD]
	if err := grown.Update(batch, 100); err != nil {
		t.Fatal(err)
	}
	if err := r.Update(batch, 100); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(grown.Snapshot().Coef[0], r.Snapshot().Coef[0]) {
		t.Error("the restored learner differs from the original after one more step")
	}
	cov, err := New(Config{K: exactK, Kernel: kern, MaxFeatures: 256, BlockSize: 64, Solver: SolverCovariance})
	if err != nil {
		t.Fatal(err)
	}
	defer cov.Close()
	streamEpochs(t, cov, x, n, exactD, 100, 1)
	if got := cov.RaiseBudget(4096); got != 256 {
		t.Errorf("the covariance solver's budget raised to %d", got)
	}
}

// TestRaiseBudgetRestartsTheDetector: a raised budget changes what the
// held-out score settles at (the share of a larger feature space), so
// the change detector takes a new reference and waits monitorArmAge
// steps. Stood in for here by a stream whose score drops at the raise
// (the 1-D hermite stream widened ×2): before, the detector compared it
// with the smaller model's reference and restarted the model (three
// times in three 150 s runs of the service at 2,000 messages/s); now it
// reports no change, and a change after the wait is still found.
func TestRaiseBudgetRestartsTheDetector(t *testing.T) {
	h := synth.Hermite1D()
	rng := rand.New(rand.NewPCG(8, 8))
	// The level detector alone: the widened stream is a change a
	// challenger (forget: follow) rightly follows.
	l, err := New(Config{K: 3, Kernel: kernelG(1), MaxFeatures: 1024, BlockSize: 128, Forget: ForgetDetect})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	x, held := make([]float64, 256), make([]float64, 32)
	step := func(scale float64) bool {
		h.Sample(held, rng)
		h.Sample(x, rng)
		for i := range held {
			held[i] *= scale
		}
		for i := range x {
			x[i] *= scale
		}
		changed, err := l.Assess(held, len(held))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Update(x, len(x)); err != nil && !errors.Is(err, ErrDiverged) {
			t.Fatal(err)
		}
		return changed
	}
	for i := 0; i < 200; i++ {
		if step(1) {
			t.Fatalf("a change reported on the stationary stream at step %d", i)
		}
	}
	l.RaiseBudget(l.MaxFeatures() + 128)
	for i := 0; i < 150; i++ {
		if step(2) {
			t.Fatalf("a change reported %d steps after the budget was raised", i+1)
		}
	}
	found := false
	for i := 0; i < 100 && !found; i++ {
		found = step(6)
	}
	if !found || l.Changes() != 1 {
		t.Errorf("a drop after the wait: found %v, changes %d; want it found once", found, l.Changes())
	}
}

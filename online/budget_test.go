package online

import (
	"slices"
	"testing"
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

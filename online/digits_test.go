package online

import (
	"math/rand/v2"
	"testing"

	"github.com/streamkpca/streamkpca/internal/synth"
)

// digitsRun streams 1,500 64-dimensional digit-like images (b = 500) for
// the given epochs into a learner with cfg and returns its held-out
// subspace error against exact kernel PCA of the training images (gonum
// EigenSym on the Gram matrix, with the bandwidth the learner chose by the
// median trick on its first batch), measured on 500 held-out images
// through the Nyström extension.
func digitsRun(t *testing.T, cfg Config, epochs int) float64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 1))
	const n, held, d = 1500, 500, 64
	train := synth.Digits(rng, n)
	test := synth.Digits(rng, held)
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	streamEpochs(t, l, train, n, d, 500, epochs)
	ref := newExactKPCA(t, l.Kernel(), train, n, d, cfg.K)
	est, _ := l.Eigenvalues()
	e := synthErr(evalDense(l, test, held), ref.at(test, held))
	t.Logf("%s solver, k = %d: bandwidth %.3f, exact eigenvalues %.4f, estimates %.4f; features %d, held-out subspace error %.3g, rejected %d",
		l.Config().Solver, cfg.K, l.Kernel().Bandwidth, ref.vals, est, l.Features(), e, l.Rejected())
	return e
}

// TestDefaultsOn64D: with defaults (only k = 5 given: subspace solver,
// median-trick bandwidth, B = 512, 32,768 features), 60 epochs get within
// 2e-3 of exact kernel PCA (measured 9.0e-4; the oja rule's defaults
// reached 8.7e-3).
func TestDefaultsOn64D(t *testing.T) {
	longOnly(t)
	if e := digitsRun(t, Config{K: 5}, 60); e > 2e-3 {
		t.Errorf("held-out subspace error %.3g > 2e-3 with defaults", e)
	}
}

// TestSubspaceSolverSmallGaps: the case the Oja rule cannot do with its
// defaults — a dominant near-constant top eigenfunction (uncentred) and
// small gaps below it, k = 10, 20 epochs. With only k given, the subspace
// solver must reach 2e-2; the Oja rule's figure is logged beside it.
// Measured when written (deterministic): subspace 4.2e-3, oja 0.33.
func TestSubspaceSolverSmallGaps(t *testing.T) {
	longOnly(t)
	if e := digitsRun(t, Config{K: 10}, 20); e > 2e-2 {
		t.Errorf("subspace solver with defaults: held-out subspace error %.3g > 2e-2", e)
	}
	digitsRun(t, Config{K: 10, Solver: SolverOja}, 20)
}

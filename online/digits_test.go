package online

import (
	"math/rand/v2"
	"testing"

	"github.com/streamkpca/streamkpca/internal/synth"
)

// TestDefaultsOn64D: with defaults (only k given: median-trick bandwidth,
// θ₀ = 0.5, θ₁ = 0.01, B = 128, b = 512, 32,768 features), streaming 1,500
// 64-dimensional digit-like images for 60 epochs gets within 2e-2 subspace
// error of exact kernel PCA (gonum EigenSym on the Gram matrix), measured on
// 500 held-out images through the Nyström extension.
func TestDefaultsOn64D(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const n, held, d, k = 1500, 500, 64, 5
	train := synth.Digits(rng, n)
	test := synth.Digits(rng, held)
	l, err := New(Config{K: k})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	streamEpochs(t, l, train, n, d, 500, 60)
	// The exact reference uses the bandwidth the learner chose (median
	// trick on its first batch): the same kernel, solved exactly.
	ref := newExactKPCA(t, l.Kernel(), train, n, d, k)
	est, _ := l.Eigenvalues()
	t.Logf("bandwidth %.3f, exact eigenvalues %.4f, estimates %.4f", l.Kernel().Bandwidth, ref.vals, est)
	e := synthErr(evalDense(l, test, held), ref.at(test, held))
	t.Logf("features %d, held-out subspace error %.3g, rejected %d", l.Features(), e, l.Rejected())
	if e > 2e-2 {
		t.Errorf("held-out subspace error %.3g > 2e-2 with defaults", e)
	}
}

package online

import (
	"errors"
	"slices"
	"testing"
)

// TestEveryAlgorithmIsDescribed: each of Algorithms has its description
// (at least one solver, a score meaning), and Validate accepts exactly
// the solvers docs/learners.md gives each (written out here): kpca and
// gha take subspace, covariance and oja; kcca covariance and oja; ksvd
// and ksir the paper's rule only. Defect: ksvd and ksir accepted solver
// subspace and learned by the paper's rule anyway, the setting silently
// ignored.
func TestEveryAlgorithmIsDescribed(t *testing.T) {
	want := map[Algorithm][]Solver{
		AlgKPCA: {SolverSubspace, SolverCovariance, SolverOja},
		AlgGHA:  {SolverSubspace, SolverCovariance, SolverOja},
		AlgKSVD: {SolverOja},
		AlgKCCA: {SolverCovariance, SolverOja},
		AlgKSIR: {SolverOja},
	}
	if len(want) != len(Algorithms) {
		t.Fatalf("the test knows %d algorithms, Algorithms lists %d: say which solvers a new one takes", len(want), len(Algorithms))
	}
	for _, a := range Algorithms {
		if d := a.spec(); len(d.solvers) == 0 || d.score == "" {
			t.Errorf("%s: no description (solvers %v, score %q)", a, d.solvers, d.score)
		}
		for _, s := range Solvers {
			c := Config{Algorithm: a, K: 2, Solver: s, MaxFeatures: 1024, Slices: 5}
			err := c.Validate()
			if ok := slices.Contains(want[a], s); ok != (err == nil) {
				t.Errorf("%s with solver %s: %v; want accepted %v", a, s, err, ok)
			} else if err != nil && !errors.Is(err, ErrConfig) {
				t.Errorf("%s with solver %s: %v, want ErrConfig", a, s, err)
			}
		}
		if got := (Config{Algorithm: a, K: 2, Slices: 5}).WithDefaults().Solver; got != want[a][0] {
			t.Errorf("%s: default solver %s, want %s", a, got, want[a][0])
		}
	}
}
